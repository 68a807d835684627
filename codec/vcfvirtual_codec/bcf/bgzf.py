"""BGZF block reading and writing.

A BGZF file is a series of gzip members, each at most 64 KiB uncompressed, whose gzip
header carries a ``BC`` extra subfield giving the member's compressed size (BSIZE). We
walk the members ourselves rather than through a gzip stream so that every block is
validated (magic, BSIZE, CRC32, ISIZE) and a damaged file fails at the block where the
damage is, not somewhere downstream; and so that the chunk-aligned cache can copy a
source block's compressed bytes as they are.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, NoReturn

import numpy as np
from isal import igzip_lib, isal_zlib

from .._kernels import bgzf as _framing
from ..errors import CorruptBCFError, FilePath

deflate: ModuleType | None
try:  # libdeflate, htslib's own inflate: vcfvirtual (the indexer) depends on it, the codec alone need not
    import deflate
except ImportError:  # pragma: no cover - the indexer's environments have it
    deflate = None

if TYPE_CHECKING:
    from collections.abc import Buffer

GZIP_MAGIC = b"\x1f\x8b"
# The empty block every BGZF file should end with (SAM/BAM spec, section 4.1.2).
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_HEADER = struct.Struct("<4sIBBH")  # magic+CM+FLG, MTIME, XFL, OS, XLEN
_FOOTER = struct.Struct("<II")  # CRC32, ISIZE
MAX_BLOCK_SIZE = 65536
# Deflate's largest expansion, output bytes per compressed byte (a run of 258-byte
# matches): no block's ISIZE can honestly exceed its payload times this.
MAX_DEFLATE_RATIO = 1032
# How much compressed input we read per IO call; blocks are parsed out of it in memory.
READ_SIZE = 4 * 1024 * 1024
# Blocks inflated per task when inflating on worker threads: large enough that the
# hand-off costs little next to the inflate (ISA-L releases the GIL while it works).
BLOCKS_PER_TASK = 64
# Why the compiled header walk stopped (_whole_blocks).
_CODES = _framing.codes()
_PARTIAL, _BAD = _CODES["PARTIAL"], _CODES["BAD"]


class Block(NamedTuple):
    offset: int  # compressed offset of the block in its file
    raw: memoryview  # the whole compressed block, header to footer
    data: bytes | memoryview  # its inflated bytes, CRC32 and ISIZE checked


def block_size(buf: memoryview, pos: int, path: FilePath, file_offset: int) -> int:
    """Total size in bytes of the BGZF block starting at ``buf[pos]``."""
    magic, _mtime, _xfl, _os, xlen = _HEADER.unpack_from(buf, pos)
    xlen = int(xlen)
    if magic != b"\x1f\x8b\x08\x04":
        raise CorruptBCFError(
            path,
            "not a BGZF block: bad gzip magic or no extra field",
            offset=file_offset,
            hint="BCF must be BGZF-compressed (bcftools view -Ob) or uncompressed (-Ou)",
        )
    extra = buf[pos + 12 : pos + 12 + xlen]
    if len(extra) < xlen:
        raise CorruptBCFError(path, "truncated BGZF block header", offset=file_offset)
    i = 0
    while i + 4 <= xlen:
        si1, si2, slen = extra[i], extra[i + 1], extra[i + 2] | (extra[i + 3] << 8)
        if i + 4 + slen > xlen:  # a subfield running past XLEN: the header is damaged
            break
        if si1 == 66 and si2 == 67 and slen == 2:  # 'B', 'C'
            size = (extra[i + 4] | (extra[i + 5] << 8)) + 1
            if size < 12 + xlen + 8:  # smaller than its own header and footer
                raise CorruptBCFError(
                    path,
                    f"BGZF block size field says {size} bytes, less than the block's header and footer",
                    offset=file_offset,
                )
            return size
        i += 4 + slen
    raise CorruptBCFError(path, "gzip member has no BGZF 'BC' size field (plain gzip, not BGZF)", offset=file_offset)


def _block_runs(fileobj: BinaryIO, path: FilePath, start: int) -> Iterator[tuple[int, memoryview, list[int]]]:
    """Each read's whole blocks, not inflated: ``(compressed offset of the first, the
    read's bytes from there, each block's size)``. A block cut short by a read's end waits
    for the next read; a damaged header, or a block cut short by the end of the file, is
    refused once the blocks before it have been yielded.

    A read's headers are walked in one compiled call (:func:`~vcfvirtual_codec._kernels.bgzf.block_sizes`,
    which accepts what :func:`block_size` accepts), and its blocks then sliced out by the
    one loop that uses them: a generator step and a tuple per block (~32,000 for a 2 GB
    stream) were most of the split's 0.15 s of CPU on cohort A."""
    pending = b""
    file_offset = start  # compressed offset of pending[0]
    eof = False
    while True:
        if not eof and len(pending) < 2 * MAX_BLOCK_SIZE:
            more = fileobj.read(READ_SIZE)
            pending, eof = (pending + more if pending else more), not more
        if not pending:
            return
        # Blocks are views of this read's bytes: nothing is copied until inflated.
        view = memoryview(pending)
        sizes, n, stop, used = _framing.block_sizes(view)
        if n:
            yield file_offset, view, sizes.tolist()
        if stop == _BAD or (stop == _PARTIAL and eof):
            _refuse_header(view, used, path, file_offset)
        pending = pending[used:]
        file_offset += used
        if eof and not pending:
            return


def _refuse_header(view: memoryview, pos: int, path: FilePath, file_offset: int) -> NoReturn:
    """The error for the block at ``view[pos]``, where the header walk stopped at the
    file's end or at a header :func:`block_size` refuses (it names what is wrong)."""
    if len(view) - pos < 18:
        raise CorruptBCFError(path, "truncated BGZF block", offset=file_offset + pos)
    size = block_size(view, pos, path, file_offset + pos)
    raise CorruptBCFError(
        path,
        f"truncated BGZF block: header says {size} bytes, {len(view) - pos} remain in the file",
        offset=file_offset + pos,
    )


def _split_blocks(fileobj: BinaryIO, path: FilePath, start: int) -> Iterator[tuple[int, memoryview]]:
    """Yield ``(compressed_offset, whole_block)`` for every block, without inflating."""
    for base, view, sizes in _block_runs(fileobj, path, start):
        pos = 0
        for size in sizes:
            yield base + pos, view[pos : pos + size]
            pos += size


def inflate_block(raw: bytes | memoryview, path: FilePath, offset: int) -> bytes:
    """The inflated bytes of one whole BGZF block, checked against its CRC32 and ISIZE.

    One call of ISA-L's gzip inflate does it all: it parses the gzip header, inflates, and
    checks the trailer's CRC32 (computed as it inflates, while the bytes are in cache)
    and ISIZE: 0.53-0.59 s against 0.66-0.76 s for a raw inflate and a separate CRC32 over
    783 MB of cohort A's blocks. It reads the trailer where the deflate data ends, and the
    ISIZE checked here is the one at the block's end: the two are the same bytes in any
    block whose deflate data fills it, as a BGZF writer makes them. Anything it refuses is
    inflated again by :func:`_inflate_checked`, the raw inflate that names what is wrong
    (and accepts what it accepted before: deflate data followed by padding)."""
    size = len(raw)
    # FLG must be FEXTRA alone: the gzip header is then the 12 + XLEN bytes a BGZF block has.
    if size < 26 or raw[3] != 4:
        return _inflate_checked(raw, path, offset)
    isize = raw[size - 4] | (raw[size - 3] << 8) | (raw[size - 2] << 16) | (raw[size - 1] << 24)
    try:
        # ISIZE sizes the first output buffer, but it is the block's own claim: a damaged
        # one (4 GiB) must not allocate more than a BGZF block can hold.
        data = igzip_lib.decompress(raw, flag=igzip_lib.DECOMP_GZIP, bufsize=min(max(isize, 1), MAX_BLOCK_SIZE))
    # isal's stubs declare ``error`` an Exception instance; it is the class IsalError.
    except igzip_lib.error:  # type: ignore[misc]
        return _inflate_checked(raw, path, offset)
    if len(data) != isize:
        return _inflate_checked(raw, path, offset)
    return data


def inflate_block_serial(raw: bytes | memoryview, path: FilePath, offset: int) -> bytes | memoryview:
    """:func:`inflate_block` for a caller that inflates one block at a time: by libdeflate
    (htslib's and bgzip's inflate) where it is installed, which takes ~25% less CPU than
    ISA-L on BGZF's small blocks (0.70-0.72 against 0.95-0.99 s over cohort A's 32,081
    blocks, 2.1 GB, its header set-up being cheaper): the index's serial scan. It holds the
    GIL while it works, so what inflates on several threads at once (:func:`read_blocks`
    with ``threads``, the codec's chunks in zarr's threads) keeps ISA-L's, which releases it.
    One call checks CRC32 and ISIZE as ISA-L's does; anything it refuses is inflated again
    by :func:`_inflate_checked`, which names what is wrong."""
    size = len(raw)
    if deflate is None or size < 26 or raw[3] != 4:
        return inflate_block(raw, path, offset)
    isize = raw[size - 4] | (raw[size - 3] << 8) | (raw[size - 2] << 16) | (raw[size - 1] << 24)
    if isize == 0:
        # The binding answers a claim of no output with nothing, without inflating or
        # checking anything (seen in the fuzz suite: a damaged block claiming ISIZE 0 was
        # read as empty): such a block, the EOF block, goes to ISA-L's checked call.
        return inflate_block(raw, path, offset)
    if isize > MAX_BLOCK_SIZE:  # the block's own claim, not allocated beyond what BGZF holds
        return _inflate_checked(raw, path, offset)
    try:
        data = deflate.gzip_decompress(raw, isize)
    except deflate.DeflateError:
        return _inflate_checked(raw, path, offset)
    if len(data) != isize:
        return _inflate_checked(raw, path, offset)
    return memoryview(data).toreadonly()  # libdeflate returns a bytearray


def _inflate_checked(raw: bytes | memoryview, path: FilePath, offset: int) -> bytes:
    """:func:`inflate_block` by a raw inflate of the payload and a CRC32 of its output,
    each failure named: the path of a block the one-call inflate refused."""
    xlen = raw[10] | (raw[11] << 8)
    crc, isize = _FOOTER.unpack_from(raw, len(raw) - 8)
    isize = int(isize)
    try:
        data = isal_zlib.decompress(
            raw[12 + xlen : len(raw) - 8], wbits=-15, bufsize=min(max(isize, 1), MAX_BLOCK_SIZE)
        )
    except isal_zlib.error as e:  # type: ignore[misc]
        raise CorruptBCFError(path, f"BGZF block does not inflate ({e})", offset=offset) from None
    if len(data) != isize:
        raise CorruptBCFError(
            path, f"BGZF block inflates to {len(data)} bytes but its ISIZE says {isize}", offset=offset
        )
    if isal_zlib.crc32(data) != crc:
        raise CorruptBCFError(path, "BGZF block CRC32 mismatch (corrupted data)", offset=offset)
    return data


def _inflate_task(blocks: list[tuple[int, memoryview]], path: FilePath) -> list[Block]:
    return [Block(offset, raw, inflate_block(raw, path, offset)) for offset, raw in blocks]


def read_blocks(fileobj: BinaryIO, path: FilePath, *, start: int = 0, threads: int = 0) -> Iterator[Block]:
    """Every block of a BGZF stream, in order, inflated and checked.

    With ``threads`` > 0, blocks are inflated on that many worker threads, a few tasks
    ahead of the consumer, so inflating overlaps the caller's own work (the record scan).
    Raises :class:`CorruptBCFError` naming the block offset on a bad header, a short
    block, a CRC32 or ISIZE mismatch, or data that does not inflate.
    """
    if threads <= 0:
        for base, view, sizes in _block_runs(fileobj, path, start):
            pos = 0
            for size in sizes:
                raw = view[pos : pos + size]
                yield Block(base + pos, raw, inflate_block_serial(raw, path, base + pos))
                pos += size
        return
    blocks = _split_blocks(fileobj, path, start)
    with ThreadPoolExecutor(threads, thread_name_prefix="vcfvirtual-inflate") as pool:
        in_flight: collections.deque[Future[list[Block]]] = collections.deque()
        batch: list[tuple[int, memoryview]] = []
        try:
            for item in blocks:
                batch.append(item)
                if len(batch) == BLOCKS_PER_TASK:
                    in_flight.append(pool.submit(_inflate_task, batch, path))
                    batch = []
                    if len(in_flight) > 2 * threads:
                        yield from in_flight.popleft().result()
            if batch:
                in_flight.append(pool.submit(_inflate_task, batch, path))
            while in_flight:
                yield from in_flight.popleft().result()
        finally:
            for future in in_flight:
                future.cancel()


def iter_blocks(fileobj: BinaryIO, path: FilePath, *, start: int = 0) -> Iterator[tuple[int, bytes | memoryview]]:
    """``(compressed_offset, inflated_bytes)`` for every block of a BGZF stream."""
    for block in read_blocks(fileobj, path, start=start):
        yield block.offset, block.data


# Uncompressed bytes per block, as htslib uses, so a block always fits BSIZE's 16 bits.
BLOCK_INPUT = 0xFF00
_BLOCK_HEADER = struct.Struct("<4sIBBHBBHH")  # magic.., MTIME, XFL, OS, XLEN, 'B', 'C', SLEN, BSIZE


def compress_block(data: bytes | memoryview, level: int) -> bytes:
    """One BGZF block holding ``data`` (at most BLOCK_INPUT bytes)."""
    payload = isal_zlib.compress(data, level=level, wbits=-15)
    size = 18 + len(payload) + 8
    if size > MAX_BLOCK_SIZE:  # incompressible input: store it
        payload = isal_zlib.compress(data, level=0, wbits=-15)
        size = 18 + len(payload) + 8
    header = _BLOCK_HEADER.pack(b"\x1f\x8b\x08\x04", 0, 0, 0xFF, 6, 66, 67, 2, size - 1)
    return header + payload + _FOOTER.pack(isal_zlib.crc32(data), len(data))


def compress_blocks(data: Buffer, level: int) -> bytes:
    """``data`` as consecutive BGZF blocks, every block starting where the last ended."""
    view = memoryview(data)
    return b"".join(compress_block(view[i : i + BLOCK_INPUT], level) for i in range(0, len(view), BLOCK_INPUT))


def _chunk_blocks(view: memoryview, path: FilePath) -> tuple[list[tuple[int, int, int]], int]:
    """(offset, size, inflated offset) of each block of a chunk, and the inflated total."""
    spans = []
    total = 0
    pos = 0
    limit = len(view)
    while pos < limit:
        if limit - pos < 18:
            raise CorruptBCFError(path, "truncated BGZF block", offset=pos)
        size = block_size(view, pos, path, pos)
        if pos + size > limit:
            raise CorruptBCFError(
                path, f"truncated BGZF block: header says {size} bytes, {limit - pos} remain", offset=pos
            )
        isize = int(_FOOTER.unpack_from(view, pos + size - 8)[1])
        # The output is allocated from these claims before anything inflates, so they
        # are bounded first: a BGZF block holds at most 64 KiB, and deflate expands its
        # input at most 1032-fold (a header claiming 4 GiB must not allocate 4 GiB).
        xlen = view[pos + 10] | (view[pos + 11] << 8)
        payload = size - 12 - xlen - 8
        if isize > MAX_BLOCK_SIZE or isize > MAX_DEFLATE_RATIO * payload + 8:
            raise CorruptBCFError(
                path,
                f"BGZF block's ISIZE says {isize} bytes, more than its {payload} compressed bytes can inflate to",
                offset=pos,
            )
        spans.append((pos, size, total))
        total += isize
        pos += size
    return spans, total


def inflate_chunk(
    buf: np.ndarray, path: FilePath = None, buffer: np.ndarray | None = None, limit: int | None = None
) -> np.ndarray:
    """Inflate a byte range made of whole BGZF blocks (one cache chunk) into one array.

    Block boundaries are walked first, so the output's final size is known (the ISIZE
    fields) and each block is inflated straight into place.

    Parameters
    ----------
    buf : numpy.ndarray
        The compressed bytes: whole BGZF blocks, nothing else.
    path : str or path-like, optional
        The file the bytes come from, for error messages.
    buffer : numpy.ndarray, optional
        A uint8 array to inflate into when it is large enough.
    limit : int, optional
        The most bytes the chunk may inflate to (the codec's bound for what its compressed
        size can honestly hold); the ISIZE fields are checked against it before anything
        is allocated or inflated.

    Returns
    -------
    numpy.ndarray
        The inflated bytes (uint8): a view of the front of ``buffer`` when it was
        large enough, else a new array.

    Raises
    ------
    CorruptBCFError
        A block that is not BGZF, is truncated, claims an ISIZE more than its
        compressed bytes can hold, does not inflate, or fails its ISIZE or CRC32 check;
        the offset is the block's within ``buf``. Blocks whose ISIZE fields add up to
        more than ``limit``.
    """
    view = memoryview(np.ascontiguousarray(buf, dtype=np.uint8)).cast("B")
    spans, total = _chunk_blocks(view, path)
    if limit is not None and total > limit:
        raise CorruptBCFError(
            path,
            f"BGZF blocks' ISIZE fields add up to {total} bytes from {len(view)} compressed, more than "
            f"a chunk of this size may inflate to ({limit})",
        )
    if buffer is not None and buffer.shape[0] >= total:
        out = buffer[:total]
    else:
        out = np.empty(total, dtype=np.uint8)
    for pos, size, at in spans:
        data = inflate_block(view[pos : pos + size], path, pos)
        out[at : at + len(data)] = np.frombuffer(data, dtype=np.uint8)
    return out


def inflate_all(data: Buffer, path: FilePath = None) -> bytes:
    """Inflate a byte string made of whole BGZF blocks (one cache chunk)."""
    return inflate_chunk(np.frombuffer(bytes(data), dtype=np.uint8), path).tobytes()
