"""INFO segments rearranged for the compressor (issue 24; preamble flag 16 on an INFO segment,
configuration version 3): types, counts plus one in byte planes, integer values in byte planes across the
records, floats verbatim, each string's length beside its text.

Oracles: the layout written out by hand here and an independent reader of it
(tests/columns_reader.py, plain Python) restoring the very bytes given (never our decode);
bio2zarr converting, and pysam reading, hand-written VCF text whose INFO values reach the
encoding's edges (int8, int16 and int32 in one chunk, missing, absent, Number=A/R/2/., -0.0,
strings, Flags). Crafted segments that lie are typed refusals, never a crash.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pysam
import pytest
import xarray as xr
import zarr
from numcodecs import Zstd
from vcfvirtual_codec import spec
from vcfvirtual_codec._kernels import info_planes as kernel
from vcfvirtual_codec.codec import BCFRecordsCodec
from vcfvirtual_codec.columns import FLAG_INFO_PLANES, PREAMBLE
from vcfvirtual_codec.errors import ChunkDecodeError
from vcfvirtual_codec.segment_transforms import info_planes, undo_info_planes

import vcfvirtual
from vcfvirtual.cache import columns

from ... import bcfdata
from ...columns_reader import codec_versions, info_planes_undone, stored_segments
from ...conftest import assert_matches_bio2zarr, bio2zarr_convert

PREAMBLE_HEAD = struct.Struct("<4sBBHiIIIQ")
INFO_KIND = 7
SIZES = {0: 0, 1: 1, 2: 2, 3: 4, 5: 4, 7: 1}


def typed_column(records: list[tuple[int, int, bytes]]) -> bytes:
    """The format's typed column: int32 counts, uint8 types, then each record's value bytes."""
    counts = struct.pack(f"<{len(records)}i", *(c for c, _, _ in records))
    return counts + bytes(t for _, t, _ in records) + b"".join(v for _, _, v in records)


# --- the layout, by hand ------------------------------------------------------------------


def test_the_layout_is_the_formats():
    records = [
        (2, 2, bytes([0x02, 0x01, 0x04, 0x03])),  # int16 0x0102, 0x0304
        (-1, 0, b""),  # absent
        (3, 7, b"abc"),  # a string: its count goes beside it
        (1, 5, bytes([0xF0, 0xF1, 0xF2, 0xF3])),  # a float, verbatim
        (1, 1, bytes([0x7F])),  # int8
    ]
    want = (
        bytes([2, 0, 7, 5, 1])  # the types
        + bytes([3, 0, 2, 2]) + bytes(12)  # count + 1 of the 4 records not char, 4 planes
        + bytes([0x02, 0x04, 0x7F])  # byte 0 of every integer value
        + bytes([0x01, 0x03])  # byte 1 of the int16 ones (no int32: planes 2 and 3 empty)
        + bytes([4, 0, 0, 0]) + b"abc"  # the string's count + 1, its text
        + bytes([0xF0, 0xF1, 0xF2, 0xF3])  # the float
    )  # fmt: skip
    raw = np.frombuffer(typed_column(records), np.uint8)
    planes = info_planes(raw, len(records))
    assert planes.tobytes() == want
    assert info_planes_undone(planes, len(records)).tobytes() == raw.tobytes()
    back = planes.copy()
    undo_info_planes(back, len(records))
    assert back.tobytes() == raw.tobytes()


@pytest.mark.parametrize(
    "records",
    [
        # One type throughout but for a type 0 record holding a count (no values): its count
        # is no int16 value (a fast path once summed it as one).
        [(0, 2, b""), (-1, 0, b""), (1, 0, b"")],
        [(1, 5, b"abcd"), (2, 0, b""), (1, 5, b"efgh")],
        [(0, 7, b""), (-1, 7, b""), (2, 7, b"xy")],  # strings empty, absent (type kept), set
    ],
)
def test_edge_columns_restore_every_byte(records):
    raw = np.frombuffer(typed_column(records), np.uint8)
    planes = info_planes(raw, len(records))
    assert info_planes_undone(planes, len(records)).tobytes() == raw.tobytes()
    back = planes.copy()
    undo_info_planes(back, len(records))
    assert back.tobytes() == raw.tobytes()


def test_absent_records_with_counts_as_large_as_the_segment_restore_every_byte():
    """A crafted column: one int8 value, then 200,000 absent (type 0) records each saying
    its count is the segment's length. They hold no values; the undo once looped over each
    count (n x length steps: minutes here), and must give the column back as it is."""
    n = 200_001
    length = 5 * n + 1
    records = [(1, 1, bytes([0x2A]))] + [(length - 1, 0, b"")] * (n - 1)
    raw = np.frombuffer(typed_column(records), np.uint8)
    assert raw.shape[0] == length
    planes = info_planes(raw, n)
    back = planes.copy()
    undo_info_planes(back, n)
    assert back.tobytes() == raw.tobytes()


def random_column(rng: np.random.Generator, n: int, types: tuple[int, ...] = (0, 1, 2, 3, 5, 7)) -> bytes:
    """A typed column of ``n`` records of random ``types``, counts (absent, 0 and up; a type 0
    record may hold a count, as a set Flag does) and value bytes."""
    records = []
    for _ in range(n):
        t = int(rng.choice(types))
        count = int(rng.integers(-1, 2)) if t == 0 else int(rng.integers(-1, 7))
        records.append((count, t, rng.integers(0, 256, max(count, 0) * SIZES[t], np.uint8).tobytes()))
    return typed_column(records)


@pytest.mark.parametrize("types", [(0, 1, 2, 3, 5, 7), (0, 1), (0, 2), (0, 3), (0, 5), (0, 7), (3,)])
@pytest.mark.parametrize("seed", range(12))
def test_the_rearrangement_restores_every_byte(seed, types):
    """Random typed columns (every type mixed, or one type beside absent records: the undo's
    fast path; empty ones): the independent reader and the undo give back the input, byte
    for byte."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60)) if seed else 0
    raw = np.frombuffer(random_column(rng, n, types), np.uint8)
    planes = info_planes(raw, n)
    assert planes.shape == raw.shape
    assert info_planes_undone(planes, n).tobytes() == raw.tobytes()
    back = planes.copy()
    undo_info_planes(back, n)
    assert back.tobytes() == raw.tobytes()


@pytest.mark.parametrize(
    "records,n,what",
    [
        ([(1, 4, b"abcd")], 1, "type code"),  # 4 is no BCF type
        ([(-2, 1, b"")], 1, "count"),  # below -1
        ([(2, 3, b"abcd")], 1, "account for"),  # two int32 in four bytes
        ([(1, 3, b"abcdefgh")], 1, "account for"),  # four bytes left over
        ([], 1, "account for"),  # a record in no bytes
    ],
)
def test_a_column_that_is_no_typed_column_is_refused(records, n, what):
    raw = np.frombuffer(typed_column(records), np.uint8)
    with pytest.raises(ValueError, match=what):
        info_planes(raw, n)


def test_crafted_rearrangements_never_crash():
    """Random bytes, and a valid rearrangement with bytes changed or cut: the undo (and the
    rearrangement) return an error code or a column of the input's length, never read or
    write outside."""
    rng = np.random.default_rng(7)
    valid = info_planes(np.frombuffer(random_column(rng, 40), np.uint8), 40)
    for i in range(3000):
        if i % 3 == 0:
            data = rng.integers(0, 256, int(rng.integers(0, 300)), np.uint8)
            n = int(rng.integers(0, 70))
        else:
            data = valid.copy()[: valid.shape[0] - int(rng.integers(0, 3))]
            spots = rng.integers(0, data.shape[0], int(rng.integers(1, 4)))
            data[spots] = rng.integers(0, 256, spots.shape[0], np.uint8)
            n = 40
        out = np.empty_like(data)
        err, at = kernel.undo_info_planes(data, n, out)
        assert err in kernel.ERRORS or (err, at) == (0, 0)
        err, at = kernel.info_planes(data, n, out)  # the writer's side, on the same bytes
        assert err in kernel.ERRORS or (err, at) == (0, 0)


# --- whole stores against bio2zarr and pysam ----------------------------------------------

INFO_HEADER = (
    bcfdata.HEADER
    + """##INFO=<ID=IN,Number=1,Type=Integer,Description="int8, int16, int32 by record">
##INFO=<ID=IA,Number=A,Type=Integer,Description="Per ALT">
##INFO=<ID=IR,Number=R,Type=Integer,Description="Per allele">
##INFO=<ID=I2,Number=2,Type=Integer,Description="Two">
##INFO=<ID=IV,Number=.,Type=Integer,Description="Any number">
##INFO=<ID=FL,Number=1,Type=Float,Description="A float">
##INFO=<ID=FA,Number=A,Type=Float,Description="Floats per ALT">
##INFO=<ID=ST,Number=1,Type=String,Description="A string">
##INFO=<ID=SV,Number=.,Type=String,Description="Strings">
##INFO=<ID=FG,Number=0,Type=Flag,Description="A flag">
"""
)
INFO_RECORDS = [
    "chr1\t100\t.\tA\tT\t.\t.\tDP=5;IN=5;IA=1;IR=1,2;I2=3,4;IV=1;FL=1.5;FA=0.25;ST=abc;SV=x,yz;FG\tGT\t0/1\t./.\t1/1",
    "chr1\t200\t.\tA\tC,G\t.\t.\tIN=300;IA=-129,127;IR=.,70000,1;I2=7;IV=1,2,3,4,5;FL=0.001;FA=.,2.5;ST=.\tGT\t0/2\t1/1\t./.",
    "chr1\t300\t.\tG\tT\t.\t.\tIN=70000;IA=.;I2=.,-2147483647;FL=.;ST=a_much_longer_string_value;FG\tGT\t0/0\t0/1\t1|1",
    "chr1\t400\t.\tG\tT\t.\t.\tIN=.;IV=-1;FL=-0.0;SV=.\tGT\t0/0\t0/1\t1|1",
    "chr2\t10\t.\tT\tC\t.\t.\t.\tGT\t0/0\t0/1\t./.",  # every field absent
    "chr2\t20\t.\tT\tC,A,G\t.\t.\tIN=-128;IA=1,2,3;IR=4,5,6,7;FA=1e30,1e-30,3;ST=z\tGT\t0/3\t0/1\t./.",
]
INFO_ARRAYS = ["variant_DP", "variant_IN", "variant_IA", "variant_IR", "variant_I2", "variant_IV", "variant_FL",
               "variant_FA", "variant_ST", "variant_SV", "variant_FG"]  # fmt: skip


@pytest.fixture(scope="module")
def info_bcf(tmp_path_factory):
    d = tmp_path_factory.mktemp("info_planes")
    return bcfdata.write_bcf(bcfdata.vcf_text(INFO_RECORDS, header=INFO_HEADER), d / "info.bcf")


def index(bcf, folder, chunk_length: int = 1000):
    refs = folder / "s.vcz.json"
    vcfvirtual.index(
        bcf, refs_path=refs, cache_path=folder / "s.cache", cache_layout="columns", variants_chunk_size=chunk_length
    )
    return refs


@pytest.mark.parametrize("chunk_length", [1, 4, 1000])  # one record a chunk; a partial last chunk; one chunk
def test_info_fields_match_bio2zarr(info_bcf, tmp_path, chunk_length):
    refs = index(info_bcf, tmp_path, chunk_length)
    for array in INFO_ARRAYS:  # the rearrangement is in every INFO chunk: the comparison is of it
        segments = stored_segments(refs, array)
        assert segments and {PREAMBLE.unpack_from(s)[:3] for s in segments} == {(b"VVS3", INFO_KIND, FLAG_INFO_PLANES)}
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert_matches_bio2zarr(ds, bio2zarr_convert(info_bcf, tmp_path / "b.vcz", chunk_length))
    assert ds.variant_IN.values.tolist() == [5, 300, 70000, -1, -1, -128]  # int8, int16, int32 in one chunk
    with pysam.VariantFile(str(info_bcf)) as f:
        ir = next(r for r in f if r.pos == 200).info["IR"]  # (None, 70000, 1): a missing value first
    assert ds.variant_IR.values[1].tolist() == [-1 if v is None else v for v in ir] + [-2]  # padded to 4 alleles
    assert ds.variant_ST.values.tolist() == ["abc", ".", "a_much_longer_string_value", ".", ".", "z"]  # as bio2zarr


def test_an_older_codec_refuses_the_info_arrays_when_opened(info_bcf, tmp_path, monkeypatch):
    """INFO arrays of a columns cache are configuration version 3; every other stays 1 (GT's
    2): a codec that reads version 2 at most (the one before the rearrangement) opens
    positions and genotypes and refuses an INFO array when it is opened, naming the
    package to upgrade, rather than misreading its first chunk."""
    refs = index(info_bcf, tmp_path)
    versions = codec_versions(refs)
    assert {name: versions[name] for name in INFO_ARRAYS} == dict.fromkeys(INFO_ARRAYS, 3)
    assert versions["variant_position"] == 1 and versions["call_genotype"] == 2
    monkeypatch.setattr(spec, "FORMAT_VERSION", 2)
    group = zarr.open_group("reference://", storage_options={"fo": str(refs)}, mode="r", zarr_format=2)
    with pysam.VariantFile(str(info_bcf)) as f:
        assert group["variant_position"][:].tolist() == [r.pos for r in f]
    assert group["call_genotype"][:].shape == (6, 3, 2)
    with pytest.raises(ValueError, match=r"config version 3 is newer .*pip install -U \./codec"):
        group["variant_IN"]


def test_an_unflagged_info_segment_still_reads(info_bcf, tmp_path, monkeypatch):
    """A cache written before the rearrangement (INFO segments plain, configuration version
    1) reads as bio2zarr's conversion."""
    monkeypatch.setattr(columns, "FLAG_INFO_PLANES", 0)
    monkeypatch.setattr(spec, "INFO_SEGMENT_VERSION", 1)
    refs = index(info_bcf, tmp_path, 4)
    monkeypatch.undo()
    assert {PREAMBLE.unpack_from(s)[2] for s in stored_segments(refs, "variant_IN")} == {0}
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert_matches_bio2zarr(ds, bio2zarr_convert(info_bcf, tmp_path / "b.vcz", 4))


# --- crafted segments: lying ones refused --------------------------------------------------


def info_codec(n: int, vcf_type: str = "Integer", dtype: str = "<i4") -> BCFRecordsCodec:
    return BCFRecordsCodec(array="variant_IN", kind="info", dtype=dtype, shape=[], chunk_length=n, num_records=n,
                           key=3, layout="columns", vcf_type=vcf_type, compressor="zstd", version=3)  # fmt: skip


def sealed(raw: bytes, n: int, flags: int = FLAG_INFO_PLANES, magic: bytes = b"VVS3", kind: int = INFO_KIND) -> bytes:
    head = PREAMBLE_HEAD.pack(magic, kind, flags, 0, 3, n, 0, 1, len(raw))
    frame = Zstd(level=5).encode(raw)
    return head + struct.pack("<I", zlib.crc32(frame, zlib.crc32(head))) + frame


RECORDS = [(1, 1, bytes([5])), (1, 2, struct.pack("<h", 300)), (-1, 0, b""), (1, 3, struct.pack("<i", 70000))]


def test_a_flagged_segment_decodes():
    raw = np.frombuffer(typed_column(RECORDS), np.uint8)
    got = info_codec(4).decode(sealed(info_planes(raw, 4).tobytes(), 4))
    assert np.frombuffer(got, "<i4").tolist() == [5, 300, -1, 70000]


@pytest.mark.parametrize(
    "lie",
    [
        lambda b: b[:-1],  # truncated
        lambda b: b[:4] + bytes([9]) + b[5:],  # record 0's count + 1 is 9: more values than the bytes
        lambda b: bytes([4]) + b[1:],  # record 0's type 4 is no BCF type
        lambda b: b[:4] + bytes([0]) + b[5:] + b"\x00",  # record 0 absent: its bytes left over
    ],
    ids=["truncated", "count-too-large", "unknown-type", "does-not-add-up"],
)
def test_a_flagged_segment_that_lies_is_refused(lie):
    planes = info_planes(np.frombuffer(typed_column(RECORDS), np.uint8), 4).tobytes()
    with pytest.raises(ChunkDecodeError, match="INFO values cannot be put back in order"):
        info_codec(4).decode(sealed(lie(planes), 4))


def test_other_flags_on_an_info_segment_are_refused():
    planes = info_planes(np.frombuffer(typed_column(RECORDS), np.uint8), 4).tobytes()
    with pytest.raises(ChunkDecodeError, match="preamble flags 16"):  # no VVS2 writer rearranged INFO
        info_codec(4).decode(sealed(planes, 4, magic=b"VVS2"))
    with pytest.raises(ChunkDecodeError, match="preamble flags 8"):  # the positions' flag
        info_codec(4).decode(sealed(planes, 4, flags=8))
    with pytest.raises(ChunkDecodeError, match="newer vcfvirtual"):  # bit 128 stays a newer writer's
        info_codec(4).decode(sealed(planes, 4, flags=FLAG_INFO_PLANES | 128))
