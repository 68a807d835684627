"""Layout ``bgzf`` (the default): the BCF's own BGZF blocks, re-cut so that every
variants chunk starts a block. Chunk k is a range of whole blocks holding whole records,
and the cache is itself a valid BCF.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO, NamedTuple

import numpy as np
from vcfvirtual_codec.bcf import bgzf

from .._progress import phase
from ..bcf.header import BCFHeader
from ..io.outputs import CACHE_SUFFIX
from ..scan.parallel import Facts, Merged, Piece
from ..scan.results import ScanResult
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

logger = logging.getLogger(__name__)
# ISA-L level (0 fastest to 3 smallest) for the blocks we compress: only those a chunk
# boundary splits, unless the source is uncompressed. Few, so the smallest.
BGZF_LEVEL = 3


class SourceRange(NamedTuple):
    """Compressed bytes of a source file, copied to the cache without being read in."""

    fd: int
    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


# The inflated bytes of a piece, produced only when needed (a cut splits the piece, or
# it has no compressed block to copy).
Inflate = Callable[[], bytes | memoryview]
# A piece's compressed bytes: a whole block in memory, a whole block still in its file,
# or None (there is none to copy).
Compressed = bytes | memoryview | SourceRange | None


class ChunkAlignedBGZFWriter:
    """A scan's sink (:class:`~vcfvirtual.scan.sink.RecordSink`) writing the stream as
    BGZF with chunk-aligned blocks.

    The header gets blocks of its own; each variants chunk (``chunk_length`` records)
    starts a new block, so chunk k is a byte range of whole BGZF blocks; an EOF block
    ends the file. The result is a normal BGZF BCF that bcftools reads and indexes.

    A source block that no cut (header end, chunk start) falls inside is copied as it is,
    compressed bytes and all, so the cache is about the size of the BCF and costs no
    compression; only the blocks a cut splits are re-compressed, as two blocks. An
    uncompressed source is compressed whole.
    """

    def __init__(self, fileobj: IO[Any], level: int = BGZF_LEVEL):
        self.fileobj = fileobj
        self.level = level
        self.chunk_length = 0
        # Pieces read but not yet written: (stream offset, length, compressed, inflate).
        # A piece is written once the scan has passed its end, when every cut inside it
        # is known; the scan's batch size bounds how many wait here.
        self.pending: collections.deque[tuple[int, int, Compressed, Inflate]] = collections.deque()
        self.stream_end = 0  # stream offset where the next piece starts
        # Stream offsets still to cut at, ascending: (offset, starts a chunk).
        self.cuts: collections.deque[tuple[int, bool]] = collections.deque()
        self.records_seen = 0
        self.written = 0  # cache bytes written so far
        self.chunk_starts: list[int] = []  # cache offset where each chunk begins
        self.blocks_copied = 0
        self.blocks_recompressed = 0
        self.run: SourceRange | None = None  # source bytes to copy as they are, not yet copied

    def cut_at(self, header_size: int, chunk_offsets: np.ndarray) -> None:
        """Cut at the header's end and at these chunks' first records, all known ahead
        (instead of learning them from a scan as a sink).

        Parameters
        ----------
        header_size : int
            Stream offset of the first record.
        chunk_offsets : numpy.ndarray
            Stream offset of each chunk's first record, ascending.
        """
        self.cuts.append((header_size, False))
        self.cuts.extend((int(o), True) for o in chunk_offsets)

    def header_parsed(self, header: BCFHeader, chunk_length: int) -> None:
        self.chunk_length = chunk_length
        self.cuts.append((header.size, False))  # the header ends in a block of its own

    def add_block(self, raw: bytes | memoryview | None, data: bytes | memoryview) -> None:
        if not data:
            return  # empty blocks (the source's EOF marker among them) hold nothing
        # The scan reuses nothing it hands over; the bytes are kept until written.
        self.add_piece(self.stream_end, len(data), raw, lambda: data)

    def records_scanned(self, offsets: np.ndarray) -> None:
        n = self.chunk_length
        first = (-self.records_seen) % n  # index in offsets of the next chunk start
        self.cuts.extend((int(o), True) for o in offsets[first::n])
        self.records_seen += len(offsets)

    def add_piece(self, start: int, length: int, raw: Compressed, inflate: Inflate) -> None:
        """Queue stream bytes to write once the cuts inside them are known.

        Parameters
        ----------
        start, length : int
            Where the bytes are in the stream; pieces come in stream order.
        raw : bytes, memoryview, SourceRange or None
            Their whole compressed block, copied as it is if no cut splits it (None:
            there is none to copy).
        inflate : callable
            Returns the inflated bytes; called only if a cut splits the piece or
            ``raw`` is None.
        """
        self.pending.append((start, length, raw, inflate))
        self.stream_end = start + length

    def scanned_to(self, stream_offset: int) -> None:
        while self.pending and self.pending[0][0] + self.pending[0][1] <= stream_offset:
            self._emit(*self.pending.popleft())

    def _write(self, data: bytes | memoryview | SourceRange) -> None:
        if isinstance(data, SourceRange):
            if self.run is not None and self.run.fd == data.fd and self.run.end == data.offset:
                self.run = self.run._replace(size=self.run.size + data.size)
            else:
                self._copy_run()
                self.run = data
            self.written += data.size
            return
        self._copy_run()
        self.fileobj.write(data)
        self.written += len(data)

    def _copy_run(self) -> None:
        """Copy the pending run of source bytes in the kernel (no trip through Python)."""
        run, self.run = self.run, None
        if run is None:
            return
        self.fileobj.flush()
        out = self.fileobj.fileno()
        offset, left = run.offset, run.size
        while left:
            try:
                n = os.copy_file_range(run.fd, out, left, offset)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                n = os.write(out, os.pread(run.fd, min(left, 1 << 24), offset))
            if n == 0:
                raise OSError(errno.EIO, f"source ended while copying {left} more bytes")
            offset += n
            left -= n

    def _emit(self, start: int, length: int, raw: Compressed, inflate: Inflate) -> None:
        end = start + length
        edges = [start]
        chunk_edges = set()
        while self.cuts and self.cuts[0][0] < end:
            offset, is_chunk = self.cuts.popleft()
            if offset > edges[-1]:
                edges.append(offset)
            if is_chunk:
                chunk_edges.add(offset)
        edges.append(end)
        if raw is not None and len(edges) == 2:
            if start in chunk_edges:
                self.chunk_starts.append(self.written)
            self._write(raw)
            self.blocks_copied += 1
            return
        view = memoryview(inflate())
        for lo, hi in zip(edges[:-1], edges[1:]):
            if lo in chunk_edges:
                self.chunk_starts.append(self.written)
            self._write(bgzf.compress_blocks(view[lo - start : hi - start], self.level))
            self.blocks_recompressed += 1

    def close(self) -> int:
        """Write what is left and the EOF block.

        Returns
        -------
        int
            Cache offset where the last chunk ends (the EOF block's start).
        """
        self.scanned_to(self.stream_end)
        end = self.written
        self._write(bgzf.EOF_BLOCK)
        self._copy_run()
        return end


class BGZFLayout(WholeRecordChunks):
    """The chunk-aligned BGZF cache, written as the scan reads, or assembled from the
    source blocks of partitions scanned apart (cut where a serial run cuts, so it is the
    same cache byte for byte)."""

    name: LayoutName = "bgzf"
    suffix = CACHE_SUFFIX  # a BCF
    needs_segments = False
    facts: Facts = "records"
    uncompressed_stream = False

    def chunk_records(self, f: BinaryIO, offset: int, size: int) -> int | None:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.chunk_records`: None, as the
        records are compressed (counting them means inflating the chunk)."""
        return None

    def write_serial(self, source: SerialSource, target: CacheTarget) -> tuple[ScanResult, ChunkRanges]:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_serial`."""
        tmp_cache = local_target(target)
        with open_cache(tmp_cache) as f:
            writer = ChunkAlignedBGZFWriter(f)
            scan = source.scan(writer)
            with phase("compress", source.progress):  # the last block, re-cut
                end = writer.close()
        logger.info(
            "%s: %d BGZF blocks copied, %d re-compressed at chunk boundaries",
            source.path,
            writer.blocks_copied,
            writer.blocks_recompressed,
        )
        return scan, chunk_byte_ranges(np.asarray(writer.chunk_starts, dtype=np.uint64), end)

    def write_partitioned(self, merged: Merged, target: CacheTarget, run: PartitionedRun) -> ChunkRanges:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_partitioned`. Blocks no cut
        splits are copied; only split ones are read and inflated."""
        tmp_cache = local_target(target)
        with phase("compress", run.progress):  # this process writes it alone
            return self._write_merged(merged, tmp_cache)

    def _write_merged(self, merged: Merged, tmp_cache: Path) -> ChunkRanges:
        with open_cache(tmp_cache) as f, contextlib.ExitStack() as stack:
            writer = ChunkAlignedBGZFWriter(f)
            writer.cut_at(merged.scan.header.size, merged.scan.chunk_offsets)
            files: dict[str, int] = {}
            for piece in merged.pieces:
                if piece.path not in files:
                    files[piece.path] = stack.enter_context(open(piece.path, "rb")).fileno()
                fd = files[piece.path]
                length = piece.hi - piece.lo
                raw: Compressed = None
                if piece.compressed_size == 0:
                    inflate: Inflate = functools.partial(bytes, os.pread(fd, length, piece.offset + piece.lo))
                else:

                    def inflate(fd: int = fd, piece: Piece = piece) -> bytes:
                        block = os.pread(fd, piece.compressed_size, piece.offset)
                        return bgzf.inflate_block(block, piece.path, piece.offset)[piece.lo : piece.hi]

                    if piece.whole:
                        raw = SourceRange(fd, piece.offset, piece.compressed_size)
                writer.add_piece(piece.stream_start, length, raw, inflate)
                writer.scanned_to(piece.stream_start + length)
            end = writer.close()
        logger.info(
            "%d BGZF blocks copied, %d re-compressed at chunk boundaries",
            writer.blocks_copied,
            writer.blocks_recompressed,
        )
        return chunk_byte_ranges(np.asarray(writer.chunk_starts, dtype=np.uint64), end)
