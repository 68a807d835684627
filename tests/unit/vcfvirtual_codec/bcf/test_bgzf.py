"""BGZF blocks (SAM/BAM spec, section 4.1) against Python's gzip and zlib as the oracle."""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib

import numpy as np
import pytest
from vcfvirtual_codec.bcf import bgzf
from vcfvirtual_codec.errors import CorruptBCFError

# Text that compresses, and random bytes that do not (a block must then be stored).
TEXT = b"".join(b"chr1\t%d\t.\tA\tT\t.\tPASS\tDP=%d\n" % (i, i % 97) for i in range(9000))
NOISE = np.random.default_rng(3).integers(0, 256, 200_000, dtype=np.uint8).tobytes()


def zlib_block(data: bytes, *, crc: int | None = None, isize: int | None = None) -> bytes:
    """One BGZF block built by hand from zlib's raw deflate: gzip header with the BC
    extra subfield (BSIZE = block size - 1), deflate data, CRC32 and ISIZE."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    payload = compressor.compress(data) + compressor.flush()
    size = 18 + len(payload) + 8
    header = b"\x1f\x8b\x08\x04" + struct.pack("<IBBH", 0, 0, 0xFF, 6) + b"BC" + struct.pack("<HH", 2, size - 1)
    footer = struct.pack("<II", zlib.crc32(data) if crc is None else crc, len(data) if isize is None else isize)
    return header + payload + footer


def as_array(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


@pytest.mark.parametrize("data", [b"", b"x", TEXT, NOISE], ids=["empty", "one", "text", "noise"])
def test_compressed_blocks_are_gzip_members_that_gzip_inflates(data):
    """compress_blocks writes gzip members Python's gzip reads back, each a BGZF block
    whose BSIZE is its own length minus one and no larger than 64 KiB."""
    blocks = bgzf.compress_blocks(data, 1)
    assert gzip.decompress(blocks) == data
    pos = 0
    while pos < len(blocks):
        assert blocks[pos : pos + 4] == b"\x1f\x8b\x08\x04"
        assert blocks[pos + 12 : pos + 16] == b"BC\x02\x00"
        size = struct.unpack_from("<H", blocks, pos + 16)[0] + 1
        assert size <= 65536
        pos += size
    assert pos == len(blocks)


def test_eof_block_is_an_empty_gzip_member():
    assert gzip.decompress(bgzf.EOF_BLOCK) == b""
    assert bgzf.inflate_chunk(as_array(bgzf.EOF_BLOCK)).size == 0


def test_inflate_chunk_reads_blocks_zlib_wrote():
    pieces = [TEXT[i : i + 60000] for i in range(0, len(TEXT), 60000)]
    chunk = b"".join(zlib_block(p) for p in pieces)
    assert bgzf.inflate_chunk(as_array(chunk)).tobytes() == TEXT
    assert bgzf.inflate_all(chunk) == TEXT


def test_inflate_chunk_uses_a_buffer_large_enough_and_allocates_otherwise():
    chunk = as_array(zlib_block(TEXT[:50000]))
    buffer = np.zeros(60000, dtype=np.uint8)
    out = bgzf.inflate_chunk(chunk, buffer=buffer)
    assert out.base is buffer and out.tobytes() == TEXT[:50000]
    small = np.zeros(10, dtype=np.uint8)
    out = bgzf.inflate_chunk(chunk, buffer=small)
    assert out.base is None and out.tobytes() == TEXT[:50000] and not small.any()


def test_read_blocks_gives_each_block_offset_and_data_serially_and_threaded():
    pieces = [NOISE[i : i + 30000] for i in range(0, len(NOISE), 30000)]
    blocks = [zlib_block(p) for p in pieces]
    offsets = np.cumsum([0] + [len(b) for b in blocks[:-1]]).tolist()
    stream = b"".join(blocks)
    for threads in (0, 2):
        got = list(bgzf.read_blocks(io.BytesIO(stream), "x.bcf", threads=threads))
        assert [b.offset for b in got] == offsets
        assert [b.data for b in got] == pieces
        assert [bytes(b.raw) for b in got] == blocks


def test_wrong_isize_is_refused():
    block = zlib_block(TEXT[:1000], isize=999)
    with pytest.raises(CorruptBCFError, match="ISIZE says 999"):
        bgzf.inflate_chunk(as_array(block))


def test_isize_beyond_a_bgzf_block_is_refused_before_inflating():
    """A claim of 4 GiB is refused from the header alone (no allocation of that size)."""
    block = zlib_block(TEXT[:1000], isize=0xFFFFFFFF)
    with pytest.raises(CorruptBCFError, match="ISIZE says 4294967295 bytes"):
        bgzf.inflate_chunk(as_array(block))


def test_crc_mismatch_is_refused():
    data = TEXT[:1000]
    block = zlib_block(data, crc=zlib.crc32(data) ^ 1)
    with pytest.raises(CorruptBCFError, match="CRC32 mismatch"):
        bgzf.inflate_chunk(as_array(block))
    with pytest.raises(CorruptBCFError, match="CRC32 mismatch"):
        list(bgzf.read_blocks(io.BytesIO(block), "x.bcf"))


def test_plain_gzip_and_damaged_deflate_are_refused():
    with pytest.raises(CorruptBCFError, match="not a BGZF block"):
        bgzf.inflate_chunk(as_array(gzip.compress(TEXT[:1000])))
    block = bytearray(zlib_block(os.urandom(100)))
    block[18:26] = b"\xff" * 8  # deflate block type 3 (reserved): no inflater accepts it
    with pytest.raises(CorruptBCFError, match="does not inflate|ISIZE|CRC32"):
        bgzf.inflate_chunk(as_array(bytes(block)))


def test_truncated_chunk_names_the_block_offset():
    first = zlib_block(TEXT[:1000])
    chunk = first + zlib_block(TEXT[1000:2000])[:-5]
    with pytest.raises(CorruptBCFError, match="truncated BGZF block") as e:
        bgzf.inflate_chunk(as_array(chunk))
    assert e.value.offset == len(first)


# The stream-level walk: the compiled header walk (_kernels.bgzf.block_sizes) and the
# one-call gzip inflate of each block, against blocks zlib wrote and gzip reads back.


def hand_block(data: bytes, subfields: bytes = b"", bsize: int | None = None) -> bytes:
    """A BGZF block whose extra field holds ``subfields`` (each SI1 SI2 SLEN DATA) before
    the BC subfield; ``bsize`` overrides BSIZE (the block's size - 1)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    payload = compressor.compress(data) + compressor.flush()
    xlen = len(subfields) + 6
    size = 12 + xlen + len(payload) + 8
    bc = b"BC" + struct.pack("<HH", 2, size - 1 if bsize is None else bsize)
    header = b"\x1f\x8b\x08\x04" + struct.pack("<IBBH", 0, 0, 0xFF, xlen) + subfields + bc
    return header + payload + struct.pack("<II", zlib.crc32(data), len(data))


def test_block_sizes_walks_what_a_hand_walk_finds():
    """The compiled walk's sizes are each block's BSIZE + 1 as written, and it stops where
    the bytes end inside a block (PARTIAL) or at a header that is not BGZF's (BAD)."""
    from vcfvirtual_codec._kernels import bgzf as framing

    codes = framing.codes()
    blocks = [zlib_block(NOISE[i : i + 20000]) for i in range(0, 100_000, 20000)]
    blocks.append(hand_block(TEXT[:5000], subfields=b"XY\x03\x00abc"))  # BC not first
    stream = b"".join(blocks)
    sizes, n, stop, at = framing.block_sizes(as_array(stream))
    assert sizes.tolist() == [len(b) for b in blocks] and n == len(blocks)
    assert (stop, at) == (codes["DONE"], len(stream))
    cut = len(stream) - 7
    sizes, n, stop, at = framing.block_sizes(as_array(stream[:cut]))
    assert n == len(blocks) - 1 and (stop, at) == (codes["PARTIAL"], len(stream) - len(blocks[-1]))
    sizes, n, stop, at = framing.block_sizes(as_array(stream[: len(blocks[0]) + 10]))  # < 18 bytes left
    assert n == 1 and (stop, at) == (codes["PARTIAL"], len(blocks[0]))
    for bad in (gzip.compress(b"x"), hand_block(b"x", bsize=10), hand_block(b"x", subfields=b"XY\x09\x00abc")):
        sizes, n, stop, at = framing.block_sizes(as_array(blocks[0] + bad))
        assert n == 1 and (stop, at) == (codes["BAD"], len(blocks[0]))
    assert framing.block_sizes(as_array(b""))[1:] == (0, codes["DONE"], 0)


@pytest.mark.parametrize("read_size", [1000, 70000, bgzf.READ_SIZE])
def test_read_blocks_across_reads_inflates_what_gzip_does(monkeypatch, read_size):
    """Blocks cut by the reads' ends (any read size) are whole once read: the data is
    Python's gzip's, the offsets and raw blocks are the stream's."""
    monkeypatch.setattr(bgzf, "READ_SIZE", read_size)
    pieces = [(NOISE + TEXT)[i : i + 40000] for i in range(0, len(NOISE) + len(TEXT), 40000)]
    blocks = [zlib_block(p) for p in pieces] + [bgzf.EOF_BLOCK]
    stream = b"".join(blocks)
    got = list(bgzf.read_blocks(io.BytesIO(stream), "x.bcf"))
    assert b"".join(b.data for b in got) == gzip.decompress(stream)
    assert [b.offset for b in got] == np.cumsum([0] + [len(b) for b in blocks[:-1]]).tolist()
    assert [bytes(b.raw) for b in got] == blocks


def test_read_blocks_names_a_truncated_or_damaged_block_by_offset():
    first = zlib_block(TEXT[:1000])
    cases = [
        (first + zlib_block(TEXT[1000:2000])[:10], "truncated BGZF block$"),
        (first + zlib_block(TEXT[1000:2000])[:-5], r"header says \d+ bytes, \d+ remain in the file"),
        (first + gzip.compress(b"x"), "not a BGZF block"),
        (first + hand_block(b"x", bsize=10), "less than the block's header and footer"),
        (first + hand_block(b"x", subfields=b"XY\x09\x00abc"), "no BGZF 'BC' size field"),
    ]
    for stream, message in cases:
        seen = []
        with pytest.raises(CorruptBCFError, match=message) as e:
            for block in bgzf.read_blocks(io.BytesIO(stream), "x.bcf"):
                seen.append(block.data)
        assert e.value.offset == len(first) and seen == [TEXT[:1000]]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[:-8] + struct.pack("<I", zlib.crc32(TEXT[:1000]) ^ 1) + b[-4:], "CRC32 mismatch"),
        (lambda b: b[:-4] + struct.pack("<I", 999), "ISIZE says 999"),
        (lambda b: b[:18] + b"\xff" * 8 + b[26:], "does not inflate"),
    ],
    ids=["crc", "isize", "deflate"],
)
@pytest.mark.parametrize("inflate", [bgzf.inflate_block, bgzf.inflate_block_serial], ids=["isal", "libdeflate"])
def test_inflate_block_refuses_as_the_checked_inflate_does(damage, message, inflate):
    """A block the one-call gzip inflate (ISA-L's, or libdeflate's for the serial scan)
    refuses gets the checked inflate's message."""
    block = damage(zlib_block(TEXT[:1000]))
    with pytest.raises(CorruptBCFError, match=message) as e:
        inflate(block, "x.bcf", 1234)
    assert e.value.offset == 1234
    with pytest.raises(CorruptBCFError, match=message):
        list(bgzf.read_blocks(io.BytesIO(zlib_block(TEXT[:10]) + block), "x.bcf"))


@pytest.mark.parametrize("inflate", [bgzf.inflate_block, bgzf.inflate_block_serial], ids=["isal", "libdeflate"])
def test_inflate_block_keeps_accepting_padding_after_the_deflate_data(inflate):
    """Bytes between the deflate data's end and the footer: the one-call inflate reads
    its trailer there and refuses; the checked inflate accepted such a block before, and
    still does (the footer at the block's end holds the data's CRC32 and ISIZE)."""
    data = TEXT[:3000]
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    payload = compressor.compress(data) + compressor.flush() + b"\x00" * 5
    size = 18 + len(payload) + 8
    header = b"\x1f\x8b\x08\x04" + struct.pack("<IBBH", 0, 0, 0xFF, 6) + b"BC" + struct.pack("<HH", 2, size - 1)
    block = header + payload + struct.pack("<II", zlib.crc32(data), len(data))
    assert bytes(inflate(block, "x.bcf", 0)) == data


@pytest.mark.parametrize("inflate", [bgzf.inflate_block, bgzf.inflate_block_serial], ids=["isal", "libdeflate"])
def test_a_damaged_block_claiming_no_output_is_refused(inflate):
    """ISIZE 0 over data that does not inflate (found by the fuzz suite: bytes deleted
    inside a block): libdeflate's binding answers a claim of no output with nothing,
    checking nothing, so such a block must not reach it."""
    block = bytearray(zlib_block(TEXT[:1000], crc=0, isize=0))
    block[18:26] = b"\xff" * 8  # deflate block type 3 (reserved)
    with pytest.raises(CorruptBCFError, match="does not inflate|ISIZE|CRC32"):
        inflate(bytes(block), "x.bcf", 0)
    # Valid deflate data whose footer claims nothing: the inflated bytes disagree with it.
    with pytest.raises(CorruptBCFError, match="ISIZE says 0"):
        inflate(zlib_block(TEXT[:1000], crc=0, isize=0), "x.bcf", 0)


@pytest.mark.parametrize("data", [b"", TEXT[:60000], NOISE[:60000]], ids=["empty", "text", "noise"])
def test_serial_inflate_is_libdeflate_and_gives_what_zlib_wrote(data):
    """The indexer's environment has libdeflate (a dependency of vcfvirtual), and its
    one-call inflate gives the bytes zlib compressed, the EOF block included."""
    assert bgzf.deflate is not None
    assert bytes(bgzf.inflate_block_serial(zlib_block(data), "x.bcf", 0)) == data
    assert bytes(bgzf.inflate_block_serial(bgzf.EOF_BLOCK, "x.bcf", 0)) == b""


def test_block_sizes_stops_where_block_size_refuses_on_damaged_streams():
    """Random damage (bytes flipped, cut anywhere) against the Python walk: the compiled
    walk finds the same blocks, and stops BAD exactly where block_size raises and PARTIAL
    where a block runs past the bytes."""
    from vcfvirtual_codec._kernels import bgzf as framing

    codes = framing.codes()
    stream = b"".join(zlib_block(TEXT[i : i + 3000]) for i in range(0, 30000, 3000))
    rng = np.random.default_rng(11)
    for _ in range(400):
        damaged = bytearray(stream[: rng.integers(0, len(stream) + 1)])
        for at in rng.integers(0, max(len(damaged), 1), rng.integers(0, 4)):
            if at < len(damaged):
                damaged[at] = rng.integers(0, 256)
        view = memoryview(bytes(damaged))
        sizes, pos, expect = [], 0, (codes["DONE"], len(view))
        while pos < len(view):
            if len(view) - pos < 18:
                expect = (codes["PARTIAL"], pos)
                break
            try:
                size = bgzf.block_size(view, pos, "x.bcf", pos)
            except CorruptBCFError:
                expect = (codes["BAD"], pos)
                break
            if pos + size > len(view):
                expect = (codes["PARTIAL"], pos)
                break
            sizes.append(size)
            pos += size
        got, n, stop, at = framing.block_sizes(as_array(bytes(damaged)))
        assert (got.tolist(), n, (stop, at)) == (sizes, len(sizes), expect)
