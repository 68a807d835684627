"""The transcode cache: the BCF's records laid out so each variants chunk is one range.

Layout ``bgzf`` (the default) is the BCF's own BGZF blocks, re-cut so that every
variants chunk starts a block: chunk k is a range of whole blocks holding whole records,
and the cache is itself a valid BCF. Layout ``raw`` is the uncompressed BCF stream
(header then records): bigger, but decoding needs no inflate. Files are written under a temporary name and
renamed only when complete, so a failed or killed run never leaves a partial cache
under the final name.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
from vcfvirtual_codec.bcf import bgzf

from ..scan.scanner import scan_bcf
from .raw import _cache_file

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


class ChunkAlignedBGZFWriter:
    """Sink for the scan that writes the stream as BGZF with chunk-aligned blocks.

    The header gets blocks of its own; each variants chunk (``chunk_length`` records)
    starts a new block, so chunk k is a byte range of whole BGZF blocks; an EOF block
    ends the file. The result is a normal BGZF BCF that bcftools reads and indexes.

    A source block that no cut (header end, chunk start) falls inside is copied as it is,
    compressed bytes and all, so the cache is about the size of the BCF and costs no
    compression; only the blocks a cut splits are re-compressed, as two blocks. An
    uncompressed source is compressed whole.
    """

    def __init__(self, fileobj, level: int = BGZF_LEVEL):
        self.fileobj = fileobj
        self.level = level
        self.chunk_length = None
        # Blocks read but not yet written: (stream offset, length, compressed block or None, data).
        # A block is written once the scan has passed its end, when every cut inside it
        # is known; the scan's batch size bounds how many wait here.
        self.pending: collections.deque = collections.deque()
        self.stream_end = 0  # stream offset where the next block starts
        # Stream offsets still to cut at, ascending: (offset, starts a chunk).
        self.cuts: collections.deque = collections.deque()
        self.records_seen = 0
        self.written = 0  # cache bytes written so far
        self.chunk_starts: list[int] = []  # cache offset where each chunk begins
        self.blocks_copied = 0
        self.blocks_recompressed = 0
        self.run: SourceRange | None = None  # source bytes to copy as they are, not yet copied

    def header_parsed(self, header, chunk_length: int) -> None:
        self.chunk_length = chunk_length
        self.cuts.append((header.size, False))  # the header ends in a block of its own

    def add_block(self, raw, data) -> None:
        if not data:
            return  # empty blocks (the source's EOF marker among them) hold nothing
        self.add_piece(self.stream_end, len(data), raw, data)

    def records_scanned(self, offsets: np.ndarray) -> None:
        n = self.chunk_length
        first = (-self.records_seen) % n  # index in offsets of the next chunk start
        self.cuts.extend((int(o), True) for o in offsets[first::n])
        self.records_seen += len(offsets)

    def add_piece(self, start: int, length: int, raw, data) -> None:
        """Queue ``length`` stream bytes at ``start``, given as a whole compressed block
        ``raw`` (or None) and ``data``, the inflated bytes or a function returning them,
        called only if a cut splits the piece or ``raw`` is None."""
        self.pending.append((start, length, raw, data))
        self.stream_end = start + length

    def scanned_to(self, stream_offset: int) -> None:
        while self.pending and self.pending[0][0] + self.pending[0][1] <= stream_offset:
            self._emit(*self.pending.popleft())

    def _write(self, data) -> None:
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

    def _emit(self, start: int, length: int, raw, data) -> None:
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
        view = memoryview(data() if callable(data) else data)
        for lo, hi in zip(edges[:-1], edges[1:]):
            if lo in chunk_edges:
                self.chunk_starts.append(self.written)
            self._write(bgzf.compress_blocks(view[lo - start : hi - start], self.level))
            self.blocks_recompressed += 1

    def close(self) -> int:
        """Write what is left and the EOF block; returns where the last chunk ends."""
        self.scanned_to(self.stream_end)
        end = self.written
        self._write(bgzf.EOF_BLOCK)
        self._copy_run()
        return end


def write_bgzf_cache(
    bcf_path, tmp_cache: Path, chunk_length_for, progress: bool | None = None, threads: int = 0, fileobj=None
):
    """Scan ``bcf_path`` once, writing a chunk-aligned BGZF cache to ``tmp_cache``.

    Returns (scan result, chunk start offsets, end of the last chunk).
    """
    with _cache_file(tmp_cache) as f:
        writer = ChunkAlignedBGZFWriter(f)
        result = scan_bcf(bcf_path, chunk_length_for, sink=writer, progress=progress, threads=threads, fileobj=fileobj)
        end = writer.close()
    logger.info(
        "%s: %d BGZF blocks copied, %d re-compressed at chunk boundaries",
        bcf_path,
        writer.blocks_copied,
        writer.blocks_recompressed,
    )
    starts = np.asarray(writer.chunk_starts, dtype=np.uint64)
    return result, starts, end


def assemble_bgzf_cache(tmp_cache: Path, pieces, header_size: int, chunk_offsets: np.ndarray):
    """Write a chunk-aligned BGZF cache from source blocks already scanned (``pieces``:
    :class:`vcfvirtual.scan.parallel.Piece`, in stream order), cut where a serial run cuts: at
    the header's end and at every chunk's first record. Blocks no cut splits are copied;
    only split ones are read inflated. Returns (chunk start offsets, end of the last chunk)."""
    with _cache_file(tmp_cache) as f, contextlib.ExitStack() as stack:
        writer = ChunkAlignedBGZFWriter(f)
        writer.cuts.append((header_size, False))
        writer.cuts.extend((int(o), True) for o in chunk_offsets)
        files = {}
        for piece in pieces:
            if piece.path not in files:
                files[piece.path] = stack.enter_context(open(piece.path, "rb")).fileno()
            fd = files[piece.path]
            length = piece.hi - piece.lo
            if piece.compressed_size == 0:
                raw, data = None, os.pread(fd, length, piece.offset + piece.lo)
            else:

                def data(fd=fd, piece=piece):
                    block = os.pread(fd, piece.compressed_size, piece.offset)
                    return bgzf.inflate_block(block, piece.path, piece.offset)[piece.lo : piece.hi]

                raw = SourceRange(fd, piece.offset, piece.compressed_size) if piece.whole else None
            writer.add_piece(piece.stream_start, length, raw, data)
            writer.scanned_to(piece.stream_start + length)
        end = writer.close()
    logger.info(
        "%d BGZF blocks copied, %d re-compressed at chunk boundaries", writer.blocks_copied, writer.blocks_recompressed
    )
    return np.asarray(writer.chunk_starts, dtype=np.uint64), end
