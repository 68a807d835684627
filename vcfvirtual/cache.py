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
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
from vcfvirtual_codec import bgzf

from .errors import OutputExistsError, OutputWriteError
from .scan import ScanResult, scan_bcf

logger = logging.getLogger(__name__)

LAYOUTS = ("raw", "bgzf")
# ISA-L level (0 fastest to 3 smallest) for the blocks we compress: only those a chunk
# boundary splits, unless the source is uncompressed. Few, so the smallest.
BGZF_LEVEL = 3
CACHE_SUFFIX = ".vcz.cache.bcf"
REFS_SUFFIX = ".vcz.json"


def default_paths(bcf_path) -> tuple[Path, Path]:
    """(refs, cache) written next to the BCF."""
    bcf_path = Path(bcf_path)
    return bcf_path.with_name(bcf_path.name + REFS_SUFFIX), bcf_path.with_name(bcf_path.name + CACHE_SUFFIX)


def temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _set_aside_name(path: Path) -> Path:
    """Where an output being replaced waits until its successor is in place."""
    return path.with_name(f".{path.name}.old-{os.getpid()}")


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Clean up after runs writing ``path`` that were killed (their pid is gone).

    A run that is still going (another process indexing to the same name) keeps its
    files; only a dead writer's are touched. Its temporaries are deleted. An output it
    had set aside to replace (``.<name>.old-<pid>``) is put back when nothing stands
    under the final name (it was killed between the two renames), and only deleted when
    its successor is in place: the only copy is never deleted. Returns what was removed."""
    path = Path(path)
    removed = []
    for old in path.parent.glob(f".{path.name}.old-*"):
        if not _dead_writer(old):
            continue
        if not os.path.lexists(path):
            with contextlib.suppress(FileNotFoundError):
                os.rename(old, path)
                logger.warning("restored %s, set aside by an index run that was killed", path)
                continue
        _delete(old)
        removed.append(old)
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        if _dead_writer(tmp):
            _delete(tmp)
            removed.append(tmp)
    return removed


def _dead_writer(name: Path) -> bool:
    pid = name.name.rsplit("-", 1)[-1]
    return pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid))


def _delete(path: Path) -> None:
    """Delete what this tool wrote under a temporary name: a file, or a directory of
    references (Parquet, Icechunk) that it created whole."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def replace_output(tmp: Path, path: Path) -> None:
    """Put the finished ``tmp`` under the name ``path`` so that a kill at any instant
    leaves the old output or the new one there (or, at worst, the old one set aside as
    ``.<name>.old-<pid>``, which the next run puts back).

    A file replacing a file is one rename. A directory (Parquet, Icechunk) cannot replace
    anything in one rename: the old one is renamed aside, the new one renamed in, and only
    then is the old one deleted. Callers have checked that what stands at ``path`` is an
    output of this tool (:func:`refuse_foreign_output`)."""
    tmp, path = Path(tmp), Path(path)
    if not os.path.lexists(path) or (not tmp.is_dir() and path.is_file() and not path.is_symlink()):
        os.replace(tmp, path)
        return
    old = _set_aside_name(path)
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)  # this run stops here: the old output stays, as it was
        raise
    _delete(old)


@contextlib.contextmanager
def atomic_output(path: Path, *, force: bool) -> Iterator[Path]:
    """Yield a temporary path that becomes ``path`` only if the block completes."""
    path = Path(path)
    if os.path.lexists(path) and not force:
        raise OutputExistsError(path, "output already exists", hint="pass force=True to overwrite it")
    tmp = temporary_name(path)
    try:
        yield tmp
    except BaseException:
        _delete(tmp)
        raise
    replace_output(tmp, path)


# --------------------------------------------------------------- whose outputs

REFS, CACHE = "references", "cache"


def refuse_foreign_output(path: Path, kind: str, *, force: bool, option: str) -> None:
    """Refuse to replace ``path`` unless it is an output this tool wrote.

    Only what vcfvirtual recognises as its own, by content, is ever replaced (and only
    with ``force``): references whose group attributes carry the ``vcfvirtual`` key
    (Kerchunk JSON, a Kerchunk Parquet directory, an Icechunk repository), or a cache
    that is a BCF (raw or BGZF). Anything else (a folder of the user's, another file, a
    symbolic link, which this tool never makes) is refused with or without ``force``:
    a directory is never deleted because it was named as an output."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if path.is_symlink():
        raise OutputExistsError(
            path,
            "is a symbolic link, not a vcfvirtual output; it and what it points to are left alone",
            hint=f"remove the link or give another {option}",
        )
    ours = is_vcfvirtual_references(path) if kind == REFS else is_vcfvirtual_cache(path)
    if not ours:
        what = "a directory" if path.is_dir() else "a file"
        hint = (
            f"name a file inside it, e.g. {path / 'cohort.vcz.json'}"
            if path.is_dir() and kind == REFS
            else f"give another {option}, or move it away"
        )
        raise OutputExistsError(
            path,
            f"is {what} that is not a vcfvirtual {kind} output; it is not replaced, even with force=True",
            hint=hint,
        )
    if not force:
        raise OutputExistsError(path, "output already exists", hint="pass force=True to overwrite it")


def is_vcfvirtual_references(path: Path) -> bool:
    """Kerchunk JSON, Kerchunk Parquet or Icechunk references that vcfvirtual wrote."""
    import json

    path = Path(path)
    try:
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                # Not JSON at all (a BCF, a VCF named by mistake): decided without reading it whole.
                if f.read(64).lstrip()[:1] != "{":
                    return False
                f.seek(0)
                attrs = json.load(f)["refs"][".zattrs"]
        elif (path / ".zmetadata").is_file():
            with open(path / ".zmetadata", encoding="utf-8") as f:
                attrs = json.load(f)["metadata"][".zattrs"]
        elif (path / "repo").exists():
            return _is_vcfvirtual_icechunk(path)
        else:
            return False
        if isinstance(attrs, (str, bytes)):
            attrs = json.loads(attrs)
        return isinstance(attrs, dict) and "vcfvirtual" in attrs
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return False


def _is_vcfvirtual_icechunk(path: Path) -> bool:
    try:
        import icechunk
        import zarr

        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(os.fspath(path)))
        group = zarr.open_group(repo.readonly_session("main").store, mode="r", zarr_format=3)
        return "vcfvirtual" in group.attrs
    except Exception:  # noqa: BLE001  not installed, not a repository, no main branch, no group: not ours
        return False


BCF_MAGIC = b"BCF\x02"


def is_vcfvirtual_cache(path: Path) -> bool:
    """A regular file holding a BCF, raw or BGZF: what a cache is."""
    import gzip
    import zlib

    path = Path(path)
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(18)
            if head.startswith(BCF_MAGIC):
                return True
            # A BGZF block: gzip with the "BC" extra subfield; inflated, a BCF starts it.
            if not (head.startswith(bgzf.GZIP_MAGIC) and head[12:14] == b"BC"):
                return False
            f.seek(0)
            with gzip.GzipFile(fileobj=f) as inflated:
                return inflated.read(len(BCF_MAGIC)) == BCF_MAGIC
    except (OSError, EOFError, zlib.error):
        return False


@contextlib.contextmanager
def output_file(tmp: Path, what: str, option: str, mode: str = "wb", opener=None):
    """``tmp`` opened for writing, flushed to disk on success; OS errors made one typed
    error. On an error the file is closed with its own errors dropped: closing flushes
    the buffer, which fails again on a full disk and would bury the first error under a
    second one (a traceback)."""
    try:
        f = (opener or open)(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"}))  # noqa: SIM115 closed below
    except OSError as e:
        raise OutputWriteError(tmp, f"cannot write {what}: {e.strerror}", hint=write_hint(e, option)) from None
    try:
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
    except OSError as e:
        with contextlib.suppress(OSError):
            f.close()
        raise OutputWriteError(tmp, f"cannot write {what}: {e.strerror}", hint=write_hint(e, option)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            f.close()
        raise


def _cache_file(tmp_cache: Path):
    """The cache opened for writing, flushed to disk on success; OS errors made clear."""
    return output_file(tmp_cache, "the cache", "cache_path=")


def write_hint(e: OSError, option: str = "cache_path=") -> str:
    """What to do about a failed write; ``option`` is the argument that moves the output
    (the CLI names its flag instead)."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"free disk space or write it elsewhere with {option}"
    return "check that the output directory is writable"


def write_raw_cache(
    bcf_path, tmp_cache: Path, chunk_length_for, progress: bool | None = None, threads: int = 0, fileobj=None
) -> ScanResult:
    """Scan ``bcf_path`` once, writing its uncompressed stream to ``tmp_cache``."""
    with _cache_file(tmp_cache) as f:
        return scan_bcf(bcf_path, chunk_length_for, sink=f, progress=progress, threads=threads, fileobj=fileobj)


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
    :class:`vcfvirtual.parallel.Piece`, in stream order), cut where a serial run cuts: at
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
