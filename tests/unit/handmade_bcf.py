"""BCF records written byte by byte from the BCF 2.2 specification (VCF v4.3, section 6.3),
and a plain (uncompressed) BCF stream holding them, so that htslib (pysam) can read the
very bytes the kernels are given.

Dictionary keys of ``HEADER`` (htslib numbers FILTER/INFO/FORMAT ids in one dictionary,
PASS first, then in order of appearance; the tests check this against pysam):
PASS 0, q10 1, DP 2, XI 3, XF 4, DB 5, END 6, XS 7, GT 8, AD 9, FF 10. Contigs: chr1 0, chr2 1.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

BT_NULL, BT_INT8, BT_INT16, BT_INT32, BT_FLOAT, BT_CHAR = 0, 1, 2, 3, 5, 7
INT_CODE = {BT_INT8: "b", BT_INT16: "h", BT_INT32: "i"}
# Sentinels (spec 6.3.3): missing, end-of-vector.
INT8_MISSING, INT8_END = -128, -127
INT16_MISSING, INT16_END = -32768, -32767
INT32_MISSING, INT32_END = -(2**31), -(2**31) + 1
FLOAT_MISSING, FLOAT_END = 0x7F800001, 0x7F800002

KEY = {"PASS": 0, "q10": 1, "DP": 2, "XI": 3, "XF": 4, "DB": 5, "END": 6, "XS": 7, "GT": 8, "AD": 9, "FF": 10}
SAMPLES = ("S1", "S2")

HEADER = """##fileformat=VCFv4.3
##FILTER=<ID=PASS,Description="All filters passed">
##FILTER=<ID=q10,Description="Quality below 10">
##contig=<ID=chr1>
##contig=<ID=chr2>
##INFO=<ID=DP,Number=1,Type=Integer,Description="d">
##INFO=<ID=XI,Number=.,Type=Integer,Description="i">
##INFO=<ID=XF,Number=.,Type=Float,Description="f">
##INFO=<ID=DB,Number=0,Type=Flag,Description="b">
##INFO=<ID=END,Number=1,Type=Integer,Description="e">
##INFO=<ID=XS,Number=1,Type=String,Description="s">
##FORMAT=<ID=GT,Number=1,Type=String,Description="g">
##FORMAT=<ID=AD,Number=.,Type=Integer,Description="a">
##FORMAT=<ID=FF,Number=.,Type=Float,Description="f">
#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS1\tS2
"""


def descriptor(t: int, n: int) -> bytes:
    """Type byte (count << 4 | type), the count as a typed int8/int16 after 0xF_ when >= 15."""
    if n < 15:
        return bytes([n << 4 | t])
    if n < 128:
        return bytes([0xF0 | t, 0x11, n])
    return bytes([0xF0 | t, 0x12]) + struct.pack("<h", n)


def ints(t: int, values, per_vector: int | None = None) -> bytes:
    """A typed integer vector (values already in the record's layout)."""
    n = len(values) if per_vector is None else per_vector
    return descriptor(t, n) + struct.pack("<" + INT_CODE[t] * len(values), *values)


def floats(values, per_vector: int | None = None) -> bytes:
    """A typed float vector; an int value is taken as the float's bit pattern."""
    n = len(values) if per_vector is None else per_vector
    raw = b"".join(struct.pack("<I", v) if isinstance(v, int) else struct.pack("<f", v) for v in values)
    return descriptor(BT_FLOAT, n) + raw


def fmt_ints(t: int, per_sample) -> bytes:
    """A FORMAT integer field: one vector per sample, all of one length."""
    n = len(per_sample[0])
    assert all(len(v) == n for v in per_sample)
    return ints(t, [x for v in per_sample for x in v], per_vector=n)


def fmt_floats(per_sample) -> bytes:
    n = len(per_sample[0])
    assert all(len(v) == n for v in per_sample)
    return floats([x for v in per_sample for x in v], per_vector=n)


def chars(text: bytes) -> bytes:
    return descriptor(BT_CHAR, len(text)) + text


def key(k: int) -> bytes:
    return bytes([0x11, k])


MISSING_ID = chars(b".")
PASS_ONLY = ints(BT_INT8, [0])


def record(
    *,
    chrom=0,
    pos=99,
    rlen=1,
    qual: int = FLOAT_MISSING,
    id_=MISSING_ID,
    alleles=(b"A", b"T"),
    filters=PASS_ONLY,
    info=(),
    fmt=(),
    n_sample=2,
    n_allele=None,
) -> bytes:
    """One record: ``info`` as (key, typed value bytes), ``fmt`` as (key, typed descriptor
    and all samples' values). ``qual`` is a float bit pattern; ``pos`` 0-based."""
    n_allele = len(alleles) if n_allele is None else n_allele
    shared = struct.pack("<iiiI", chrom, pos, rlen, qual)
    shared += struct.pack("<II", n_allele << 16 | len(info), len(fmt) << 24 | n_sample)
    shared += id_ + b"".join(chars(a) for a in alleles) + filters
    shared += b"".join(key(k) + v for k, v in info)
    indiv = b"".join(key(k) + v for k, v in fmt)
    return struct.pack("<II", len(shared), len(indiv)) + shared + indiv


def stream(records, header: str = HEADER) -> tuple[bytes, list[int]]:
    """A plain BCF stream (magic, l_text, NUL-terminated header text, records) and each
    record's offset in it."""
    text = header.encode() + b"\x00"
    out = b"BCF\x02\x02" + struct.pack("<I", len(text)) + text
    offsets = []
    for r in records:
        offsets.append(len(out))
        out += r
    return out, offsets


def chunk(records) -> tuple[np.ndarray, np.ndarray]:
    """The records alone, as a kernel gets them: uint8 bytes and int64 record offsets."""
    data = b"".join(records)
    offsets = np.cumsum([0] + [len(r) for r in records[:-1]]).astype(np.int64)
    return np.frombuffer(data, np.uint8).copy(), offsets


def write(path: Path, records, header: str = HEADER) -> Path:
    """The records as a plain BCF file htslib reads."""
    path = Path(path)
    path.write_bytes(stream(records, header)[0])
    return path
