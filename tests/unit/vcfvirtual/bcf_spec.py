"""The BCF layout read by hand from the BCF specification (VCF v4.3, section 6), for
tests that need record boundaries without asking vcfvirtual: a stream is the magic
``BCF\\2\\2``, ``l_text`` (uint32 little-endian) and the header text, then records, each
``l_shared`` and ``l_indiv`` (uint32) followed by that many bytes."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path


def inflate(path: Path) -> bytes:
    """The uncompressed stream of a BGZF (multi-member gzip) or uncompressed BCF."""
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def header_size(stream: bytes) -> int:
    assert stream[:5] == b"BCF\x02\x02"
    (l_text,) = struct.unpack_from("<I", stream, 5)
    return 9 + l_text


def record_offsets(stream: bytes) -> list[int]:
    """Stream offset of every record."""
    out = []
    at = header_size(stream)
    while at < len(stream):
        out.append(at)
        l_shared, l_indiv = struct.unpack_from("<II", stream, at)
        at += 8 + l_shared + l_indiv
    assert at == len(stream)
    return out


def gzip_members(path: Path) -> list[tuple[int, bytes]]:
    """(compressed offset, inflated bytes) of each gzip member (BGZF block), by zlib."""
    import zlib

    data = Path(path).read_bytes()
    out = []
    at = 0
    while at < len(data):
        d = zlib.decompressobj(31)
        inflated = d.decompress(data[at:])
        out.append((at, inflated))
        at = len(data) - len(d.unused_data)
    return out


def stream_offset(path: Path, virtual_offset: int) -> int:
    """The uncompressed-stream offset of an htslib virtual offset (block << 16 | within)."""
    block, within = virtual_offset >> 16, virtual_offset & 0xFFFF
    before = 0
    for offset, inflated in gzip_members(path):
        if offset == block:
            return before + within
        before += len(inflated)
    raise AssertionError(f"no block at {block}")
