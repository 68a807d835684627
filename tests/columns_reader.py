"""An independent reader of the ``columns`` cache layout's segments, for tests.

Written from the format as docs/design.md ("The columns layout") and the codec's module
docstring describe it, with struct, numpy and numcodecs only: it shares no code with the
index (``vcfvirtual.cache.columns*``) or the codec (``vcfvirtual_codec``), so a test that
reads a cache through it and compares with bio2zarr checks the writer against the spec,
not against the decoder it ships with. Plain Python loops over records and samples: the
test files are a few dozen records.

A segment is a 36-byte preamble, then its compressed frame (Zstd, or Blosc for GT):

    char[4] magic "VVS3" ("VVS2" before flag 8) | uint8 kind | uint8 flags | uint16 GT complete count
    | int32 BCF key (-1: a fixed column) | uint32 records | uint32 samples block
    | uint32 samples in the block (1 outside FORMAT) | uint64 decompressed length
    | uint32 CRC32 of the 32 bytes before it, then of the compressed frame

Decompressed: ``int32[n]`` (contig, position, rlen), ``uint32[n]`` (QUAL's bits),
alleles (``int32 n_allele[n]``, ``int32 length[sum]``, the bytes), or a typed column:
``int32 count[n]`` (-1 absent), ``uint8 type[n]``, then each record's
``count * size(type)`` value bytes (times the block's samples for FORMAT), BCF's own
encoding and sentinels; int8 GT bytes stored minus 2 when flag 1 is set, or, when flag 32
is set (with flag 2, every call phased, or 4, none), as the alleles they read as (int8:
-1 missing, -2 past the call's end; every record int8 of one count); with flag 64 too,
those values follow one byte of bits per value b (1, 2 or 4), packed b bits each from
each byte's lowest bit up (a 1-bit value is the allele, a wider one the allele plus 2),
read back here as the unpacked alleles block. A position
segment with flag 8 holds its int32 values as differences from the value before (the
first from 0, modulo 2^32), cut into byte planes: all low bytes, then all second bytes...
A FORMAT segment with flag 16 holds each record's values wider than a byte likewise in
byte planes, within the record (all its values' low bytes, then their next...).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numcodecs import Blosc, Zstd

PREAMBLE = struct.Struct("<4sBBHiIIIQI")
MAGICS = (b"VVS2", b"VVS3")
KIND_CODES = {
    "contig": 0, "position": 1, "rlen": 2, "qual": 3, "id": 4, "alleles": 5, "filter": 6, "info": 7, "format": 8,
}  # fmt: skip
FLAG_GT_SHIFTED = 1
FLAG_GT_ALL_PHASED = 2
FLAG_GT_NONE_PHASED = 4
FLAG_GT_ALLELES = 32
FLAG_GT_PACKED = 64
FLAG_POSITION_DELTA = 8
FLAG_VALUE_PLANES = 16
FLAG_INFO_PLANES = 16  # on an INFO segment: the bit of FLAG_VALUE_PLANES, a FORMAT segment's
GT_SHIFT = 2
# BCF type codes (BCF2 spec, "Type encoding") -> little-endian numpy dtype; 0 holds no values.
BCF_TYPES = {0: "|u1", 1: "<i1", 2: "<i2", 3: "<i4", 5: "<f4", 7: "|u1"}
INT_MISSING = {1: -0x80, 2: -0x8000, 3: -0x80000000}  # the type's missing value; end-of-vector is one more
FLOAT_MISSING_BITS = 0x7F800001
FLOAT_END_BITS = 0x7F800002


@dataclass(frozen=True)
class Segment:
    """One segment's preamble and its checked, decompressed bytes."""

    kind: int
    flags: int
    complete_count: int  # the preamble's uint16: GT blocks' count of alleles per call, else 0
    key: int
    records: int
    block: int
    width: int
    data: np.ndarray  # uint8

    @property
    def gt_shifted(self) -> bool:
        return bool(self.flags & FLAG_GT_SHIFTED)

    @property
    def gt_alleles(self) -> bool:
        return bool(self.flags & FLAG_GT_ALLELES)

    @property
    def is_gt(self) -> bool:
        """A GT block (shifted or alleles; the complete count and phase flags are GT's)."""
        return bool(self.flags & (FLAG_GT_SHIFTED | FLAG_GT_ALLELES))


def read_segment(cache: bytes, offset: int, length: int, compressor: str) -> Segment:
    """The segment stored at one byte range, its magic, CRC32 and length checked."""
    magic, kind, flags, pad, key, n, block, width, raw, crc = PREAMBLE.unpack_from(cache, offset)
    assert magic in MAGICS, magic
    frame = cache[offset + PREAMBLE.size : offset + length]
    assert zlib.crc32(frame, zlib.crc32(cache[offset : offset + PREAMBLE.size - 4])) == crc, "CRC32"
    codec = Blosc() if compressor == "blosc" else Zstd()
    data = np.frombuffer(bytes(codec.decode(frame)), np.uint8)
    assert data.shape[0] == raw, (data.shape[0], raw)
    if flags & FLAG_POSITION_DELTA:
        assert kind == KIND_CODES["position"] and magic == b"VVS3", (kind, magic)
        data = _summed_planes(data, n)
    if flags & FLAG_VALUE_PLANES and kind != KIND_CODES["info"]:
        assert kind == KIND_CODES["format"] and magic == b"VVS3", (kind, magic)
        data = _record_planes_undone(data, n, width)
    if flags & FLAG_INFO_PLANES and kind == KIND_CODES["info"]:
        assert magic == b"VVS3", magic
        data = info_planes_undone(data, n)
    if flags & FLAG_GT_PACKED:
        assert flags & FLAG_GT_ALLELES and magic == b"VVS3", (flags, magic)
        data = _bits_unpacked(data, n, width)
    return Segment(kind, flags, pad, key, n, block, width, data)


def _bits_unpacked(data: np.ndarray, n: int, width: int) -> np.ndarray:
    """Flag 64: the alleles block whose values are packed ``bits`` bits each."""
    count, bits = int(data[:4].view("<i4")[0]), int(data[5 * n])
    assert bits in (1, 2, 4), bits
    m = n * width * count
    packed = data[5 * n + 1 :]
    assert packed.shape[0] == -(-m * bits // 8), (packed.shape[0], m, bits)
    planes = np.unpackbits(packed, bitorder="little").reshape(-1, bits).astype(np.int16)
    codes = (planes << np.arange(bits)).sum(axis=1)[:m]
    values = (codes - (0 if bits == 1 else 2)).astype(np.int8)
    return np.concatenate([data[: 5 * n], values.view(np.uint8)])


def _record_planes_undone(data: np.ndarray, n: int, width: int) -> np.ndarray:
    """Flag 16: each record's values of s > 1 bytes stored byte k of value j at k * m + j
    (m values in the record); here put back value by value."""
    out = bytearray(data.tobytes())
    counts = data[: 4 * n].view("<i4").tolist()
    at = 5 * n
    for count, code in zip(counts, data[4 * n : 5 * n].tolist()):
        size = np.dtype(BCF_TYPES[code]).itemsize
        m = max(count, 0) * width
        if size > 1:
            for j in range(m):
                for k in range(size):
                    out[at + j * size + k] = int(data[at + k * m + j])
        at += m * size
    return np.frombuffer(bytes(out), np.uint8)


def info_planes_undone(data: np.ndarray, n: int) -> np.ndarray:
    """Flag 16 of an INFO segment: its typed column stored as its n types; then count + 1 (uint32) of each
    record not of type char as 4 byte planes (m such records: byte k of the j-th at n + k * m
    + j); then the integer values' byte planes (byte 0 of every int8/16/32 value in record
    order, byte 1 of the 2- and 4-byte ones, bytes 2 and 3 of the 4-byte ones); then, in
    record order, each float record's values and each char record's count + 1 (4 bytes)
    followed by its characters. Here put back record by record."""
    types = data[:n].tolist()
    m = sum(t != 7 for t in types)
    planes = iter(range(m))
    table: list[int | None] = []
    for t in types:
        if t == 7:
            table.append(None)
            continue
        j = next(planes)
        table.append(sum(int(data[n + k * m + j]) << (8 * k) for k in range(4)) - 1)
    sizes = {t: np.dtype(BCF_TYPES[t]).itemsize if t else 0 for t in set(types)}
    ints = [(t, c) for t, c in zip(types, table) if t in (1, 2, 3)]
    plane_len = [sum(max(c, 0) for t, c in ints if sizes[t] > k) for k in range(4)]
    plane_at = [n + 4 * m + sum(plane_len[:k]) for k in range(4)]
    tail = n + 4 * m + sum(plane_len)
    counts, values = [], []
    for t, c in zip(types, table):
        if t == 7:
            c = int(data[tail : tail + 4].view("<u4")[0]) - 1
            tail += 4
        counts.append(c)
        size, k_values = sizes[t], max(c, 0)
        if t in (1, 2, 3):
            value = bytearray()
            for _ in range(k_values):
                for k in range(size):
                    value.append(int(data[plane_at[k]]))
                    plane_at[k] += 1
            values.append(bytes(value))
        else:
            values.append(data[tail : tail + k_values * size].tobytes())
            tail += k_values * size
    assert tail == data.shape[0], (tail, data.shape[0])
    head = np.array(counts, "<i4").view(np.uint8).tobytes() + bytes(types)
    return np.frombuffer(head + b"".join(values), np.uint8)


def _summed_planes(data: np.ndarray, n: int) -> np.ndarray:
    """Flag 8's positions: byte k of record i is at k * n + i; the values are running sums."""
    total, out = 0, []
    for i in range(n):
        step = sum(int(data[k * n + i]) << (8 * k) for k in range(4))
        total = (total + step) % (1 << 32)
        out.append(total)
    return np.array(out, "<u4").view(np.uint8)


@dataclass(frozen=True)
class TypedValue:
    """One record's entry of a typed column: ``values`` is (vectors, count), None if absent."""

    type: int
    values: np.ndarray | None


def typed_column(seg: Segment) -> list[TypedValue]:
    """Each record's typed values; int8 GT bytes shifted back when the preamble says so."""
    n, data = seg.records, seg.data
    counts = data[: 4 * n].view("<i4")
    types = data[4 * n : 5 * n]
    at, out = 5 * n, []
    for count, code in zip(counts.tolist(), types.tolist()):
        if count < 0:
            out.append(TypedValue(code, None))
            continue
        dtype = np.dtype(BCF_TYPES[code])
        size = count * dtype.itemsize * seg.width
        raw = data[at : at + size]
        if seg.gt_shifted and code == 1:
            raw = (raw.astype(np.int16) + GT_SHIFT).astype(np.uint8)
        out.append(TypedValue(code, raw.view(dtype).reshape(seg.width, count)))
        at += size
    assert at == data.shape[0], "the counts account for every byte"
    return out


def unshifted(seg: Segment) -> np.ndarray:
    """The segment's bytes with int8 GT values as BCF stores them (2 added back, or an
    alleles block's alleles written as BCF's values, the block's phasing on every allele
    after a call's first)."""
    if seg.gt_alleles:
        return _alleles_as_bcf(seg)
    if not seg.gt_shifted:
        return seg.data
    n, data = seg.records, seg.data.copy()
    counts = data[: 4 * n].view("<i4").tolist()
    at = 5 * n
    for count, code in zip(counts, data[4 * n : 5 * n].tolist()):
        size = max(count, 0) * np.dtype(BCF_TYPES[code]).itemsize * seg.width
        if code == 1:
            data[at : at + size] = (data[at : at + size].astype(np.int16) + GT_SHIFT).astype(np.uint8)
        at += size
    return data


def _alleles_as_bcf(seg: Segment) -> np.ndarray:
    assert seg.flags & (FLAG_GT_ALL_PHASED | FLAG_GT_NONE_PHASED) and not seg.gt_shifted, seg.flags
    phase = 1 if seg.flags & FLAG_GT_ALL_PHASED else 0
    n, data = seg.records, bytearray(seg.data.tobytes())
    counts = seg.data[: 4 * n].view("<i4").tolist()
    assert set(seg.data[4 * n : 5 * n].tolist()) == {1} and len(set(counts)) == 1, "int8, one count"
    at = 5 * n
    for count in counts:
        for _ in range(seg.width):
            for j in range(count):
                allele = data[at] - 256 if data[at] >= 0x80 else data[at]
                data[at] = 0x81 if allele == -2 else ((allele + 1) << 1) | (phase if j else 0)
                at += 1
    assert at == len(data)
    return np.frombuffer(bytes(data), np.uint8)


def int32s(seg: Segment) -> np.ndarray:
    return seg.data.view("<i4")


def text(raw: np.ndarray) -> str:
    """A BCF character vector: its bytes up to the first NUL (htslib's padding)."""
    return bytes(raw.astype(np.uint8)).split(b"\0")[0].decode()


def alleles(seg: Segment, width: int) -> np.ndarray:
    """variant_allele: each record's alleles, padded with ""."""
    n, data = seg.records, seg.data
    per_record = data[: 4 * n].view("<i4")
    total = int(per_record.sum())
    lengths = data[4 * n : 4 * (n + total)].view("<i4")
    at, k = 4 * (n + total), 0
    out = np.full((n, width), "", object)
    for r, count in enumerate(per_record.tolist()):
        for a in range(count):
            out[r, a] = text(data[at : at + lengths[k]])
            at += int(lengths[k])
            k += 1
    return out


def ids(seg: Segment) -> np.ndarray:
    """variant_id: "." where the record has none."""
    got = [text(v.values[0]) if v.values is not None else "" for v in typed_column(seg)]
    return np.array([g or "." for g in got], object)


def filters(seg: Segment, column_of_key: dict[int, int], n_filters: int) -> np.ndarray:
    """variant_filter: each record's FILTER keys as columns of filter_id."""
    out = np.zeros((seg.records, n_filters), bool)
    for r, v in enumerate(typed_column(seg)):
        for key in [] if v.values is None else v.values[0].tolist():
            out[r, column_of_key[key]] = True
    return out


def flags(seg: Segment) -> np.ndarray:
    """An INFO Flag: set where the record holds the key."""
    return np.array([v.values is not None for v in typed_column(seg)], bool)


def _int_vector(values: np.ndarray, code: int, width: int, info: bool) -> list[int]:
    """One vector as bio2zarr stores it: -1 missing, -2 past the values (end-of-vector);
    an INFO value that is one missing value is missing in every slot."""
    missing = INT_MISSING[code]
    got = []
    for x in values.tolist():
        if x == missing + 1:
            break
        got.append(-1 if x == missing else x)
    if info and got == [-1]:
        return [-1] * width
    return (got + [-2] * width)[:width]


def _float_vector(values: np.ndarray, width: int, info: bool) -> list[int]:
    """One float vector as bits: NaNs inside the record's values read as missing, past
    them end-of-vector; an INFO value that is one missing value is missing in every slot."""
    bits = values.view("<u4").tolist()
    got = [FLOAT_MISSING_BITS if (b & 0x7F800000) == 0x7F800000 and b & 0x7FFFFF else b for b in bits]
    while got and bits[len(got) - 1] == FLOAT_END_BITS:
        got.pop()
    if info and got == [FLOAT_MISSING_BITS]:
        return [FLOAT_MISSING_BITS] * width
    return (got + [FLOAT_END_BITS] * width)[:width]


def numbers(seg: Segment, width: int, is_float: bool, info: bool) -> np.ndarray:
    """An Integer or Float INFO key, or FORMAT key's samples block: (records, vectors,
    width) int64 values, or uint32 bits for floats; absent records all missing."""
    missing = FLOAT_MISSING_BITS if is_float else -1
    out = np.full((seg.records, seg.width, width), missing, np.uint32 if is_float else np.int64)
    for r, v in enumerate(typed_column(seg)):
        if v.values is None:
            continue
        for s in range(seg.width):
            row = v.values[s]
            out[r, s] = _float_vector(row, width, info) if is_float else _int_vector(row, v.type, width, info)
    return out


def strings(seg: Segment, width: int) -> np.ndarray:
    """A String INFO key or FORMAT key's samples block: (records, vectors, width) of its
    comma-separated parts, "" past them, "." where absent."""
    out = np.full((seg.records, seg.width, width), "", object)
    for r, v in enumerate(typed_column(seg)):
        for s in range(seg.width):
            if v.values is None:
                out[r, s] = "."
                continue
            parts = text(v.values[s]).split(",")
            out[r, s, : len(parts)] = parts[:width]
    return out


def genotypes(seg: Segment, ploidy: int) -> np.ndarray:
    """call_genotype of one samples block: allele (BCF's value >> 1) - 1, -1 missing, -2
    past the call's end; a record without GT all missing."""
    out = np.full((seg.records, seg.width, ploidy), -1, np.int64)
    if seg.gt_alleles:
        n = seg.records
        count = int(seg.data[:4].view("<i4")[0])
        stored = seg.data[5 * n :].view(np.int8).reshape(n, seg.width, count)
        out[:, :, :count] = stored
        out[:, :, count:] = -2
        return out
    for r, v in enumerate(typed_column(seg)):
        if v.values is None:
            continue
        missing = INT_MISSING[v.type]
        for s in range(seg.width):
            call = [int(x) for x in v.values[s].tolist()]
            alleles = []
            for x in call:
                if x == missing + 1:
                    break
                alleles.append(-1 if x == missing else (x >> 1) - 1)
            out[r, s] = (alleles + [-2] * ploidy)[:ploidy]
    return out


def stored_segments(refs: Path, array: str) -> list[bytes]:
    """The byte ranges a Kerchunk JSON's references give ``array``'s chunks, in chunk
    order, read from the cache file they name."""
    doc = json.loads(refs.read_text())
    chunks = sorted(
        (tuple(int(i) for i in key.split("/")[1].split(".")), value)
        for key, value in doc["refs"].items()
        if key.startswith(array + "/") and isinstance(value, list)
    )
    out = []
    for _, (url, offset, length) in chunks:
        with open(url.replace("{{cache}}", doc["templates"]["cache"]).removeprefix("file://"), "rb") as f:
            f.seek(offset)
            out.append(f.read(length))
    return out


def codec_versions(refs: Path) -> dict[str, int]:
    """Each array's ``vcfvirtual.bcf`` configuration version, as a Kerchunk JSON's array
    metadata gives it."""
    doc = json.loads(refs.read_text())["refs"]
    return {
        key.split("/")[0]: f["version"]
        for key, meta in doc.items()
        if key.endswith("/.zarray")
        for f in json.loads(meta)["filters"] or []
        if f["id"] == "vcfvirtual.bcf"
    }
