"""Layout ``raw``: the uncompressed BCF stream (header then records); bigger than the
BCF, but decoding needs no inflate. A chunk's range is its records' bytes: from its first
record to the next chunk's first (or the stream's end)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import BinaryIO

from .._progress import phase
from ..io.outputs import CACHE_SUFFIX
from ..scan.parallel import Facts, Merged
from ..scan.results import ScanResult
from ..scan.sink import FileSink
from .base import (
    CacheTarget,
    ChunkRanges,
    PartitionedRun,
    SerialSource,
    WholeRecordChunks,
    chunk_byte_ranges,
    local_target,
    open_cache,
)
from .names import LayoutName

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


class RawLayout(WholeRecordChunks):
    """The raw cache, written as the scan reads, or joined from the partitions' segments."""

    name: LayoutName = "raw"
    suffix = CACHE_SUFFIX  # a BCF stream
    needs_segments = True
    facts: Facts = "records"
    uncompressed_stream = True

    def chunk_records(self, f: BinaryIO, offset: int, size: int) -> int | None:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.chunk_records`: the records' own
        lengths, walked (l_shared and l_indiv before each record)."""
        f.seek(offset)
        data = f.read(size)
        found, at = 0, 0
        while at + 8 <= len(data):
            at += 8 + int.from_bytes(data[at : at + 4], "little") + int.from_bytes(data[at + 4 : at + 8], "little")
            found += 1
        return found

    def write_serial(self, source: SerialSource, target: CacheTarget) -> tuple[ScanResult, ChunkRanges]:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_serial`."""
        tmp_cache = local_target(target)
        with open_cache(tmp_cache) as f:
            scan = source.scan(FileSink(f))
        return scan, raw_ranges(scan)

    def write_partitioned(self, merged: Merged, target: CacheTarget, run: PartitionedRun) -> ChunkRanges:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_partitioned`: the segments
        in order (the first starts with the first file's header, later files' are skipped)."""
        tmp_cache = local_target(target)
        with phase("write", run.progress):  # this process writes it alone
            return self._write_merged(merged, tmp_cache)

    def _write_merged(self, merged: Merged, tmp_cache: Path) -> ChunkRanges:
        with open_cache(tmp_cache) as out:
            for segment in merged.segments:
                with open(segment.path, "rb") as f:
                    f.seek(segment.skip)
                    shutil.copyfileobj(f, out, COPY_BUFFER)
        return raw_ranges(merged.scan)
