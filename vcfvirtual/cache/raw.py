"""Layout ``raw``: the uncompressed BCF stream (header then records); bigger than the
BCF, but decoding needs no inflate.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..io.outputs import output_file
from ..scan.parallel import Merged
from ..scan.results import ScanResult
from ..scan.scanner import scan_bcf


def write_raw(merged: Merged, out) -> None:
    """The raw cache: the first file's header, then the partitions' records in order."""
    out.write(merged.header_bytes)
    segments = merged.segments
    for path in segments:
        with open(path, "rb") as f:
            shutil.copyfileobj(f, out, 16 * 1024 * 1024)


def _cache_file(tmp_cache: Path):
    """The cache opened for writing, flushed to disk on success; OS errors made clear."""
    return output_file(tmp_cache, "the cache", "cache_path=")


def write_raw_cache(
    bcf_path, tmp_cache: Path, chunk_length_for, progress: bool | None = None, threads: int = 0, fileobj=None
) -> ScanResult:
    """Scan ``bcf_path`` once, writing its uncompressed stream to ``tmp_cache``."""
    with _cache_file(tmp_cache) as f:
        return scan_bcf(bcf_path, chunk_length_for, sink=f, progress=progress, threads=threads, fileobj=fileobj)
