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
