"""Writing the transcode cache in one of its layouts, from one serial pass or from
partitions scanned apart and merged. The cache is written under a temporary name the
caller renames into place when complete, so a failed or killed run never leaves a
partial cache under the final name."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from .._progress import phase
from ..bcf.csi import RecordStart
from ..bcf.fields import EVERY_FIELD, FieldChoice
from ..io.outputs import temporary_name
from ..scan import parallel, partition
from ..scan.results import ScanResult
from .base import CacheRanges, ChunkLengthFor
from .columns import DEFAULT_SAMPLES_CHUNK_SIZE
from .layouts import layout_writer

logger = logging.getLogger(__name__)


def write_cache_serial(
    bcf_path: str | Path,
    tmp_cache: Path,
    layout: str,
    chunk_length_for: ChunkLengthFor,
    progress: bool | None,
    threads: int,
    fileobj: BinaryIO | None = None,
    samples_chunk_size: int = DEFAULT_SAMPLES_CHUNK_SIZE,
    field_choice: FieldChoice = EVERY_FIELD,
    local_alleles: bool = False,
) -> tuple[ScanResult, CacheRanges]:
    """One pass over one BCF, writing the cache as it goes.

    Parameters
    ----------
    bcf_path : str or Path
        The BCF (with ``fileobj``, only its name in messages).
    tmp_cache : Path
        The cache's temporary name.
    layout : str
        One of :data:`vcfvirtual.cache.layouts.LAYOUTS`.
    chunk_length_for : callable
        Records per variants chunk, given the header.
    progress : bool or None
        Show a progress bar (None: when on a terminal).
    threads : int
        Threads inflating blocks ahead of the scan (0: none).
    fileobj : file object, optional
        The BCF already open (a URL's stream), closed when done.
    samples_chunk_size : int
        Samples per block of the ``columns`` layout (the others ignore it).
    field_choice : FieldChoice
        The fields chosen: the ``columns`` layout writes no segment of a field left out
        (the others hold whole records).
    local_alleles : bool
        ``columns``: write each samples block's AD, GT and PL segments together, so that
        a call_LAD or call_LPL chunk is one byte range (the others ignore it).

    Returns
    -------
    tuple of (ScanResult, ChunkRanges or SegmentRanges)
        What the scan learnt, and each chunk's (or segment's) byte range in the cache.

    Raises
    ------
    OutputWriteError
        The cache could not be written.
    NotBCFError, HeaderError, CorruptBCFError
        The input is not a readable BCF.
    """
    return layout_writer(layout, samples_chunk_size, local_alleles, field_choice).write_serial(
        bcf_path, tmp_cache, chunk_length_for, progress=progress, threads=threads, fileobj=fileobj
    )


def write_cache_partitioned(
    bcf_paths: list[Path],
    tmp_cache: Path,
    cache_path: Path,
    layout: str,
    chunk_length_for: ChunkLengthFor,
    workers: int,
    dask_client: Any,
    progress: bool | None,
    samples_chunk_size: int = DEFAULT_SAMPLES_CHUNK_SIZE,
    field_choice: FieldChoice = EVERY_FIELD,
    local_alleles: bool = False,
) -> tuple[ScanResult, CacheRanges]:
    """Scan files (and parts of large ones) apart, merge, then write the cache.

    Parameters
    ----------
    bcf_paths : list of Path
        The BCFs, in the order their records go into the store.
    tmp_cache, cache_path : Path
        The cache's temporary name, and its final name (working files go next to it).
    layout : str
        One of :data:`vcfvirtual.cache.layouts.LAYOUTS`.
    chunk_length_for : callable
        Records per variants chunk, given the first file's header.
    workers : int
        Local worker processes (1: scan in this process).
    dask_client : distributed.Client or None
        Scan on this Dask cluster instead.
    progress : bool or None
        Show a progress bar (None: when on a terminal).
    samples_chunk_size : int
        Samples per block of the ``columns`` layout (the others ignore it).
    field_choice : FieldChoice
        The fields chosen (as for :func:`write_cache_serial`).
    local_alleles : bool
        As for :func:`write_cache_serial`.

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
    writer = layout_writer(layout, samples_chunk_size, local_alleles, field_choice)
    # Twice as many parts as workers, so one slow part (denser records) does not leave
    # the others idle at the end.
    n_parts = 2 * (workers if dask_client is None else max(workers, _dask_threads(dask_client)))
    plan = _file_planner(n_parts) if n_parts > 2 else None
    # Absolute paths: Dask workers (and spawned processes) need not share our working directory.
    partitions = parallel.split_files([os.path.abspath(p) for p in bcf_paths], plan)
    # The workers write their partitions' inflated bytes when the layout is made of them.
    segment_dir = None
    if writer.needs_segments:
        # Absolute too: the workers write into it from their own working directories.
        segment_dir = temporary_name(Path(os.path.abspath(cache_path)), "parts")
        segment_dir.mkdir()
    try:
        with parallel.executor_for(workers, dask_client) as executor:
            scanned = parallel.scan_all(partitions, executor, segment_dir, progress=progress)
        chunk_length = int(chunk_length_for(scanned[0][1].header))
        with phase("compress", progress):  # the parts' records merged and written as the cache
            merged = parallel.merge(scanned, chunk_length, keep_record_offsets=writer.needs_record_offsets)
            return merged.scan, writer.write_partitioned(merged, tmp_cache)
    finally:
        if segment_dir is not None:
            shutil.rmtree(segment_dir, ignore_errors=True)


def _dask_threads(client: Any) -> int:
    return sum(client.nthreads().values())


def _file_planner(n_parts: int) -> Callable[[str], list[RecordStart]]:
    """Record starts cutting a BGZF file into up to ``n_parts`` partitions."""

    def plan(path: str) -> list[RecordStart]:
        return partition.plan_partitions(path, n_parts)

    return plan
