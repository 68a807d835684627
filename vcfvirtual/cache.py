"""The transcode cache: the BCF's records laid out so each variants chunk is one range.

Layout ``raw`` (the only one so far) is the uncompressed BCF stream itself (header then
records), so the cache is a valid uncompressed BCF that bcftools reads, and chunk k is
the contiguous range of its records. Files are written under a temporary name and
renamed only when complete, so a failed or killed run never leaves a partial cache
under the final name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from . import bgzf
from .errors import OutputExistsError, VcfVirtualError
from .scan import ScanResult, scan_bcf

LAYOUTS = ("raw", "bgzf")
BGZF_LEVEL = 2  # ISA-L level: 0 (fastest) to 3 (smallest)
CACHE_SUFFIX = ".vcz.cache.bcf"
REFS_SUFFIX = ".vcz.json"


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What identifies a file's contents cheaply: size and modification time."""

    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path) -> "Fingerprint":
        st = os.stat(path)
        return cls(size=st.st_size, mtime_ns=st.st_mtime_ns)


def default_paths(bcf_path) -> tuple[Path, Path]:
    """(refs, cache) written next to the BCF."""
    bcf_path = Path(bcf_path)
    return bcf_path.with_name(bcf_path.name + REFS_SUFFIX), bcf_path.with_name(bcf_path.name + CACHE_SUFFIX)


def temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_output(path: Path, *, force: bool) -> Iterator[Path]:
    """Yield a temporary path that becomes ``path`` only if the block completes."""
    path = Path(path)
    if path.exists() and not force:
        raise OutputExistsError(path, "output already exists", hint="pass --force to overwrite it")
    tmp = temporary_name(path)
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    os.replace(tmp, path)


@contextlib.contextmanager
def _cache_file(tmp_cache: Path):
    """The cache opened for writing, flushed to disk on success; OS errors made clear."""
    try:
        f = open(tmp_cache, "wb")
    except OSError as e:
        raise VcfVirtualError(tmp_cache, f"cannot write the cache: {e.strerror}") from None
    with f:
        try:
            yield f
            f.flush()
            os.fsync(f.fileno())
        except OSError as e:
            raise VcfVirtualError(tmp_cache, f"cannot write the cache: {e.strerror}",
                                  hint="check free disk space") from None


def write_raw_cache(bcf_path, tmp_cache: Path, progress: bool | None = None) -> ScanResult:
    """Scan ``bcf_path`` once, writing its uncompressed stream to ``tmp_cache``."""
    with _cache_file(tmp_cache) as f:
        return scan_bcf(bcf_path, sink=f, progress=progress)


class ChunkAlignedBGZFWriter:
    """Sink for the scan that writes the stream as BGZF with chunk-aligned blocks.

    The header gets blocks of its own; each variants chunk (``chunk_length`` records)
    starts a new block, so chunk k is a byte range of whole BGZF blocks; an EOF block
    ends the file. The result is a normal BGZF BCF that bcftools reads and indexes.
    """

    def __init__(self, fileobj, chunk_length_for, level: int = BGZF_LEVEL):
        self.fileobj = fileobj
        self.chunk_length_for = chunk_length_for
        self.level = level
        self.chunk_length = None
        self.buffer = bytearray()
        self.buffer_start = 0  # stream offset of buffer[0]
        self.records_seen = 0
        self.written = 0  # cache bytes written so far
        self.chunk_starts: list[int] = []  # cache offset where each chunk begins

    def header_parsed(self, header) -> None:
        self.chunk_length = self.chunk_length_for(header)

    def write(self, data: bytes) -> None:
        self.buffer += data

    def records_scanned(self, offsets: np.ndarray) -> None:
        n = self.chunk_length
        first = (-self.records_seen) % n  # index in offsets of the next chunk start
        for stream_offset in offsets[first::n]:
            self._flush_to(int(stream_offset))
            self.chunk_starts.append(self.written)
        self.records_seen += len(offsets)

    def _flush_to(self, stream_offset: int) -> None:
        cut = stream_offset - self.buffer_start
        if cut <= 0:
            return
        blocks = bgzf.compress_blocks(self.buffer[:cut], self.level)
        self.fileobj.write(blocks)
        self.written += len(blocks)
        del self.buffer[:cut]
        self.buffer_start = stream_offset

    def close(self) -> int:
        """Flush the last chunk, write the EOF block; returns where the last chunk ends."""
        self._flush_to(self.buffer_start + len(self.buffer))
        end = self.written
        self.fileobj.write(bgzf.EOF_BLOCK)
        self.written += len(bgzf.EOF_BLOCK)
        return end


def write_bgzf_cache(bcf_path, tmp_cache: Path, chunk_length_for, progress: bool | None = None):
    """Scan ``bcf_path`` once, writing a chunk-aligned BGZF cache to ``tmp_cache``.

    Returns (scan result, chunk length, chunk start offsets, end of the last chunk).
    """
    with _cache_file(tmp_cache) as f:
        writer = ChunkAlignedBGZFWriter(f, chunk_length_for)
        result = scan_bcf(bcf_path, sink=writer, progress=progress)
        end = writer.close()
    starts = np.asarray(writer.chunk_starts, dtype=np.uint64)
    return result, writer.chunk_length, starts, end
