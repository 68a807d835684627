"""Writing the transcode cache in one of its layouts, from one serial pass or from
partitions scanned apart and merged."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np

from ..io.outputs import temporary_name
from ..scan import parallel
from . import bgzf as bgzf_cache
from . import raw as raw_cache

logger = logging.getLogger(__name__)


def write_cache_serial(bcf_path, tmp_cache: Path, layout: str, chunk_length_for, progress, threads, fileobj=None):
    """One pass over one BCF, writing the cache as it goes: (scan, chunk byte ranges or None)."""
    if layout == "bgzf":
        scan, starts, end = bgzf_cache.write_bgzf_cache(
            bcf_path, tmp_cache, chunk_length_for, progress=progress, threads=threads, fileobj=fileobj
        )
        return scan, (starts, np.append(starts[1:], np.uint64(end)) - starts)
    return raw_cache.write_raw_cache(
        bcf_path, tmp_cache, chunk_length_for, progress=progress, threads=threads, fileobj=fileobj
    ), None


def write_cache_partitioned(
    bcf_paths: list[Path],
    tmp_cache: Path,
    cache_path: Path,
    layout: str,
    chunk_length_for,
    workers: int,
    dask_client,
    progress,
):
    """Scan files (and parts of large ones) apart, merge, then assemble the cache."""
    # Twice as many parts as workers, so one slow part (denser records) does not leave
    # the others idle at the end.
    n_parts = 2 * (workers if dask_client is None else max(workers, _dask_threads(dask_client)))
    plan = _file_planner(n_parts) if n_parts > 2 else None
    # Absolute paths: Dask workers (and spawned processes) need not share our working directory.
    partitions = parallel.split_files([os.path.abspath(p) for p in bcf_paths], plan)
    # The raw layout is the partitions' inflated bytes, which workers write as they scan.
    segment_dir = None
    if layout == "raw":
        segment_dir = temporary_name(cache_path, "parts")
        segment_dir.mkdir()
    try:
        with parallel.executor_for(workers, dask_client) as executor:
            scanned = parallel.scan_all(partitions, executor, segment_dir, progress=progress)
        header = scanned[0][1].header
        chunk_length = int(chunk_length_for(header))
        merged = parallel.merge(scanned, chunk_length)
        scan = merged.scan
        if layout == "bgzf":
            starts, end = bgzf_cache.assemble_bgzf_cache(tmp_cache, merged.pieces, header.size, scan.chunk_offsets)
            return scan, (starts, np.append(starts[1:], np.uint64(end)) - starts)
        with raw_cache._cache_file(tmp_cache) as out:
            raw_cache.write_raw(merged, out)
        return scan, None
    finally:
        if segment_dir is not None:
            shutil.rmtree(segment_dir, ignore_errors=True)


def _dask_threads(client) -> int:
    return sum(client.nthreads().values())


def _file_planner(n_parts: int):
    """Record starts cutting a BGZF file into up to ``n_parts`` partitions."""
    from ..scan import partition

    def plan(path):
        return partition.plan_partitions(path, n_parts)

    return plan
