"""Writing the transcode cache in one of its layouts, from one serial pass or from
partitions scanned apart and merged. The cache is written under a temporary name the
caller renames into place when complete, so a failed or killed run never leaves a
partial cache under the final name."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from ..bcf.csi import RecordStart
from ..bcf.header import BCFHeader
from ..errors import CorruptBCFError, NotBCFError
from ..io.outputs import temporary_name
from ..io.remote import is_url
from ..io.sources import StorageOptions
from ..scan import parallel, partition
from ..scan.parallel import Merged
from ..scan.results import ScanResult
from ..scan.scanner import read_header
from .base import (
    CacheLayout,
    CacheRanges,
    CacheTarget,
    ChunkLengthFor,
    Continuation,
    FilesRun,
    PartitionedRun,
    SegmentRanges,
    SerialSource,
    SinglePassLayout,
)

logger = logging.getLogger(__name__)


def write_cache_serial(
    source: SerialSource, tmp_cache: CacheTarget, layout: CacheLayout
) -> tuple[ScanResult, CacheRanges]:
    """One pass over one BCF, writing the cache in ``layout`` as it goes (see
    :meth:`CacheLayout.write_serial <vcfvirtual.cache.base.CacheLayout.write_serial>`)."""
    return layout.write_serial(source, tmp_cache)


def write_cache_partitioned(
    bcf_paths: Sequence[Path | str],
    tmp_cache: CacheTarget,
    cache_path: Path,
    layout: CacheLayout,
    chunk_length_for: ChunkLengthFor,
    workers: int,
    dask_client: Any,
    progress: bool | None,
    storage_options: StorageOptions = None,
    continuation: Continuation | None = None,
) -> tuple[ScanResult, CacheRanges]:
    """Scan files (and parts of large ones) apart, merge, then write the cache.

    Parameters
    ----------
    bcf_paths : list of Path
        The BCFs, in the order their records go into the store.
    tmp_cache, cache_path : Path (or str)
        The cache's temporary name (or the URL a cache made of parts is written under),
        and its local name (working files go next to it).
    layout : CacheLayout
        The cache's layout (:func:`vcfvirtual.cache.layouts.layout_writer`).
    chunk_length_for : callable
        Records per variants chunk, given the first file's header.
    workers : int
        Local worker processes (1: scan in this process).
    dask_client : distributed.Client or None
        Scan on this Dask cluster instead.
    progress : bool or None
        Show a progress bar (None: when on a terminal).
    storage_options : mapping or None
        fsspec options for inputs named by URL, which the workers read by range requests.
    continuation : Continuation or None
        Appending to a store (columns layout): its chunk length, parts and partial last
        chunk, which the records go on from (the scan's chunks then count from that one).

    Returns
    -------
    tuple of (ScanResult, ChunkRanges or SegmentRanges)
        The merged scan (as one serial scan of the records would be), and each chunk's
        byte range in the cache.

    Raises
    ------
    OutputWriteError
        The cache or a worker's segment could not be written.
    HeaderError
        The files' headers are not compatible.
    NotBCFError, CorruptBCFError
        An input is not a readable BCF.
    """
    # Twice as many parts as workers, so one slow part (denser records) does not leave
    # the others idle at the end.
    n_parts = 2 * (workers if dask_client is None else max(workers, _dask_threads(dask_client)))
    plan = _file_planner(n_parts, storage_options) if n_parts > 2 else None
    # Absolute paths: Dask workers (and spawned processes) need not share our working directory.
    paths = [p if is_url(p) else os.path.abspath(p) for p in bcf_paths]
    if dask_client is None and workers == 1 and isinstance(layout, SinglePassLayout):
        files = FilesRun(tuple(map(str, paths)), chunk_length_for, progress, storage_options, continuation)
        return layout.write_files(files, tmp_cache)
    indexed = parallel.indexed_partitions(paths, n_parts // 2) if layout.facts == "counts" else None
    with contextlib.ExitStack() as pools:
        segment_dir = pools.enter_context(_segment_folder(layout, cache_path))
        executor = pools.enter_context(parallel.executor_for(workers, dask_client))
        local_pool = dask_client is None and workers > 1

        def renew() -> Executor:
            return pools.enter_context(parallel.executor_for(workers))

        run = PartitionedRun(
            executor,
            n_parts // 2,
            progress,
            renew if local_pool else None,
            storage_options,
            continuation,
            on_workers=dask_client.run if dask_client is not None else None,
        )
        stages = _Stages(paths, layout, chunk_length_for, run, segment_dir)
        if indexed is not None:
            try:
                return stages.write(stages.indexed(indexed), tmp_cache)
            except (CorruptBCFError, NotBCFError) as e:  # the index was wrong: count by scanning
                logger.warning("%s; the files are counted by scanning them instead", e)
        return stages.write(stages.counted(plan), tmp_cache)


@contextlib.contextmanager
def _segment_folder(layout: CacheLayout, cache_path: Path) -> Iterator[Path | None]:
    """Where the workers write their partitions' inflated bytes, when the layout is made
    of them (raw), removed when the run ends; absolute: the workers write into it from
    their own working directories."""
    if not layout.needs_segments:
        yield None
        return
    segment_dir = temporary_name(Path(os.path.abspath(cache_path)), "parts")
    segment_dir.mkdir()
    try:
        yield segment_dir
    finally:
        shutil.rmtree(segment_dir, ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class _Stages:
    """The two phases of a partitioned run: counting (or taking the indexes' counts), then
    writing the cache."""

    paths: list[str]
    layout: CacheLayout
    chunk_length_for: ChunkLengthFor
    run: PartitionedRun
    segment_dir: Path | None

    def chunking(self, header: BCFHeader) -> tuple[int, int]:
        """(chunk length, records of the first chunk already stored)."""
        go_on = self.run.continuation
        if go_on is None:
            return int(self.chunk_length_for(header)), 0
        return go_on.chunk_length, go_on.lead_records

    def indexed(self, partitions: list[parallel.CountedPartition]) -> Merged:
        """The store's scan from its files' index counts (no first phase)."""
        header = read_header(self.paths[0], self.run.storage_options)
        for p in partitions[1:]:
            if not p.n_records:  # no task reads it: its header is checked here
                parallel.check_compatible([(self.paths[0], header), (p.path, read_header(p.path))])
        return parallel.counted_merge(header, partitions, self.chunking(header)[0])

    def counted(self, plan: Callable[[str], list[RecordStart]] | None) -> Merged:
        """The first phase: partitions scanned and merged (counted only, for the columns
        layout; every record's facts for the others, whose caller places the chunks)."""
        run = self.run
        partitions = parallel.split_files(self.paths, plan, run.storage_options)
        scanned = parallel.scan_all(
            partitions, run.executor, self.segment_dir, progress=run.progress, facts=self.layout.facts
        )
        chunk_length, lead = self.chunking(scanned[0][1].file_header)
        if self.layout.facts == "counts":
            return parallel.count_merge(scanned, chunk_length)
        return parallel.merge(scanned, chunk_length, lead)

    def write(self, merged: Merged, tmp_cache: CacheTarget) -> tuple[ScanResult, CacheRanges]:
        """The second phase: the layout writes the cache from the merged scan."""
        ranges = self.layout.write_partitioned(merged, tmp_cache, self.run)
        if isinstance(ranges, SegmentRanges) and ranges.facts is not None:  # learnt by the tasks
            return ranges.facts.into(merged.scan), ranges
        return merged.scan, ranges


def _dask_threads(client: Any) -> int:
    return sum(client.nthreads().values())


def _file_planner(n_parts: int, storage_options: StorageOptions = None) -> Callable[[str], list[RecordStart]]:
    """Record starts cutting a BGZF file into up to ``n_parts`` partitions."""

    def plan(path: str) -> list[RecordStart]:
        return partition.plan_partitions(path, n_parts, storage_options)

    return plan
