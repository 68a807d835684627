"""Writing the transcode cache in one of its layouts, from one serial pass or from
partitions scanned apart and merged. The cache is written under a temporary name the
caller renames into place when complete, so a failed or killed run never leaves a
partial cache under the final name."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from ..bcf.csi import RecordStart
from ..io.outputs import temporary_name
from ..io.remote import is_url
from ..io.sources import StorageOptions
from ..scan import parallel, partition
from ..scan.results import ScanResult
from ..scan.scanner import load_kernel, read_header
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
    partitions = parallel.split_files(paths, plan, storage_options)
    if dask_client is None and workers > 1:
        # Workers forked from this process inherit the kernels loaded here, once.
        header = read_header(paths[0], storage_options)
        load_kernel(header)
        layout.load_kernels(header)
    # The workers write their partitions' inflated bytes when the layout is made of them
    # (made last before the block that removes it, whatever ends the run).
    segment_dir = None
    if layout.needs_segments:
        # Absolute too: the workers write into it from their own working directories.
        segment_dir = temporary_name(Path(os.path.abspath(cache_path)), "parts")
        segment_dir.mkdir()
    try:
        with contextlib.ExitStack() as pools:
            executor = pools.enter_context(parallel.executor_for(workers, dask_client))
            scanned = parallel.scan_all(partitions, executor, segment_dir, progress=progress, facts=layout.facts)
            if continuation is None:
                chunk_length, lead = int(chunk_length_for(scanned[0][1].file_header)), 0
            else:
                chunk_length, lead = continuation.chunk_length, continuation.lead_records
            if layout.facts == "counts":
                merged = parallel.count_merge(scanned, chunk_length)
            else:
                merged = parallel.merge(scanned, chunk_length, lead)
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
            ranges = layout.write_partitioned(merged, tmp_cache, run)
            if isinstance(ranges, SegmentRanges) and ranges.facts is not None:  # learnt by the tasks
                return ranges.facts.into(merged.scan), ranges
            return merged.scan, ranges
    finally:
        if segment_dir is not None:
            shutil.rmtree(segment_dir, ignore_errors=True)


def _dask_threads(client: Any) -> int:
    return sum(client.nthreads().values())


def _file_planner(n_parts: int, storage_options: StorageOptions = None) -> Callable[[str], list[RecordStart]]:
    """Record starts cutting a BGZF file into up to ``n_parts`` partitions."""

    def plan(path: str) -> list[RecordStart]:
        return partition.plan_partitions(path, n_parts, storage_options)

    return plan
