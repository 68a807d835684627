"""Layout ``raw``: the uncompressed BCF stream (header then records); bigger than the
BCF, but decoding needs no inflate. A chunk's range is its records' bytes: from its first
record to the next chunk's first (or the stream's end)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import BinaryIO

from ..scan.parallel import Merged
from ..scan.results import ScanResult
from ..scan.scanner import scan_bcf
from ..scan.sink import FileSink
from .base import ChunkLengthFor, ChunkRanges, chunk_byte_ranges, open_cache

COPY_BUFFER = 16 * 1024 * 1024


def raw_ranges(scan: ScanResult) -> ChunkRanges:
    """Chunk ranges in a cache that is the uncompressed stream itself (the raw layout, or
    an uncompressed BCF serving as its own cache).

    Parameters
    ----------
    scan : ScanResult
        The scan of that stream.

    Returns
    -------
    ChunkRanges
        Stream offsets and lengths of each chunk's records.
    """
    return chunk_byte_ranges(scan.chunk_offsets, scan.stream_size)


class RawLayout:
    """The raw cache, written as the scan reads, or joined from the partitions' segments."""

    name = "raw"
    needs_segments = True
    needs_record_offsets = False

    def write_serial(
        self,
        bcf_path: str | Path,
        tmp_cache: Path,
        chunk_length_for: ChunkLengthFor,
        progress: bool | None = None,
        threads: int = 0,
        fileobj: BinaryIO | None = None,
    ) -> tuple[ScanResult, ChunkRanges]:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_serial`."""
        with open_cache(tmp_cache) as f:
            scan = scan_bcf(
                bcf_path, chunk_length_for, sink=FileSink(f), progress=progress, threads=threads, fileobj=fileobj
            )
        return scan, raw_ranges(scan)

    def write_partitioned(self, merged: Merged, tmp_cache: Path) -> ChunkRanges:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_partitioned`: the segments
        in order (the first starts with the first file's header, later files' are skipped)."""
        with open_cache(tmp_cache) as out:
            for segment in merged.segments:
                with open(segment.path, "rb") as f:
                    f.seek(segment.skip)
                    shutil.copyfileobj(f, out, COPY_BUFFER)
        return raw_ranges(merged.scan)
