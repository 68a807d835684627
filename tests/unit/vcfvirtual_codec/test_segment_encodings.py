"""The columns segments' encodings of issue 24: GT blocks as Blosc Zstd bit-shuffled over
large blocks, positions as their differences' byte planes (segment format "VVS3", flag 8),
FORMAT values wider than a byte in byte planes within each record (flag 16).

Oracles: byte planes written out by hand here; bio2zarr converting the same BCF and
pysam reading it, for stores whose records reach the encodings' edges (a contig's
positions falling back, the largest position, one record, missing, mixed ploidy and
all-missing calls); "VVS2" segments as the writer before wrote them (plain positions,
Blosc lz4), which must still decode. Crafted segments that lie are typed refusals.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pysam
import pytest
import xarray as xr
from numcodecs import Blosc, Zstd
from vcfvirtual_codec.codec import BCFRecordsCodec
from vcfvirtual_codec.columns import (
    FLAG_GT_SHIFT,
    FLAG_INFO_PLANES,
    FLAG_POSITION_DELTA,
    FLAG_VALUE_PLANES,
    PREAMBLE,
    TransformUndoError,
    undo_transforms,
)
from vcfvirtual_codec.errors import ChunkDecodeError
from vcfvirtual_codec.segment_transforms import (
    position_deltas,
    undo_position_deltas,
    undo_value_planes,
    value_planes,
)

import vcfvirtual

from ... import bcfdata
from ...columns_reader import stored_segments
from ...conftest import assert_matches_bio2zarr, bio2zarr_convert

PREAMBLE_HEAD = struct.Struct("<4sBBHiIIIQ")
POSITION_KIND, CONTIG_KIND, FORMAT_KIND = 1, 0, 8
BLOSC_ZSTD = 4  # c-blosc's format code of Zstd, bits 5-7 of a frame's flags byte


def hand_planes(values: list[int]) -> bytes:
    """Flag 8's bytes, by the format's words: each value minus the one before (the first
    minus 0) modulo 2^32; byte k of record i at k * n + i."""
    n = len(values)
    steps = [(v - (values[i - 1] if i else 0)) % (1 << 32) for i, v in enumerate(values)]
    out = bytearray(4 * n)
    for i, step in enumerate(steps):
        for k in range(4):
            out[k * n + i] = (step >> (8 * k)) & 0xFF
    return bytes(out)


@pytest.mark.parametrize(
    "values",
    [
        [99, 104, 2, 2**31 - 1, 0],  # a new contig falls back; the largest int32; back to 0
        [7],  # one record
        [],  # no records
        [5, 5, 5],  # one position repeated (several records at one POS)
    ],
)
def test_position_planes_are_the_formats(values):
    raw = np.array(values, "<i4").view(np.uint8)
    planes = position_deltas(raw)
    assert planes.tobytes() == hand_planes(values)
    back = planes.copy()
    undo_position_deltas(back)
    assert back.view("<i4").tolist() == values


def test_a_positions_segment_of_no_whole_records_is_refused():
    with pytest.raises(ValueError, match="4 bytes a record"):
        position_deltas(np.zeros(7, np.uint8))
    with pytest.raises(ValueError, match="4 bytes a record"):
        undo_position_deltas(np.zeros(7, np.uint8))


# --- whole stores against bio2zarr and pysam ---------------------------------------------

HEADER = bcfdata.HEADER
EDGE_RECORDS = [
    # Missing calls, a haploid call beside diploid ones (mixed ploidy), phased and not.
    "chr1\t1\trs1\tA\tT\t30\tPASS\t.\tGT\t0|1\t./.\t1",
    "chr1\t1\t.\tA\tC\t.\t.\t.\tGT\t0/0\t1/1\t0|0",  # the same position again
    "chr1\t500000000\t.\tG\tT\t1\t.\t.\tGT\t./.\t./.\t./.",  # all calls missing; a large step (CSI indexes reach 2^29)
    "chr2\t10\t.\tT\tC,G\t2\tq10\t.\tGT\t2|1\t0/2\t.",  # a smaller position on the next contig
    # (A record whose calls are all a haploid missing "." is left out: its
    # call_genotype_phased differs from bio2zarr's before and after issue 24's encodings.)
    "chr2\t11\t.\tT\tC\t2\t.\t.\tGT\t0\t.\t1/.",  # haploid and diploid, some missing
]


@pytest.fixture(scope="module")
def edge_bcf(tmp_path_factory):
    d = tmp_path_factory.mktemp("encodings")
    return bcfdata.write_bcf(bcfdata.vcf_text(EDGE_RECORDS, header=HEADER), d / "edges.bcf")


@pytest.mark.parametrize("chunk_length", [1, 2, 1000])  # one record a chunk; a partial last chunk; one chunk
def test_edge_records_match_bio2zarr(edge_bcf, tmp_path, chunk_length):
    refs = tmp_path / "s.vcz.json"
    vcfvirtual.index(
        edge_bcf, refs_path=refs, cache_path=tmp_path / "s.cache", cache_layout="columns",
        variants_chunk_size=chunk_length,
    )  # fmt: skip
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    ref = bio2zarr_convert(edge_bcf, tmp_path / "b.vcz", chunk_length)
    assert_matches_bio2zarr(ds, ref)
    records = list(pysam.VariantFile(str(edge_bcf)))
    assert ds.variant_position.values.tolist() == [r.pos for r in records]


def test_one_record_store_matches_pysam(tmp_path):
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(EDGE_RECORDS[2:3], header=HEADER), tmp_path / "one.bcf")
    refs = tmp_path / "one.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / "one.cache", cache_layout="columns")
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    record = next(iter(pysam.VariantFile(str(bcf))))
    assert ds.variant_position.values.tolist() == [record.pos]
    assert ds.call_genotype.values.tolist() == [[[-1, -1]] * 3]
    assert ds.call_genotype_mask.values.all()


def test_the_index_writes_the_new_encodings(edge_bcf, tmp_path):
    """Positions with flag 8 under magic VVS3; GT in Blosc frames of Zstd."""
    refs = tmp_path / "s.vcz.json"
    vcfvirtual.index(edge_bcf, refs_path=refs, cache_path=tmp_path / "s.cache", cache_layout="columns",
                     variants_chunk_size=2)  # fmt: skip
    for seg in stored_segments(refs, "variant_position"):
        magic, kind, flags = PREAMBLE.unpack_from(seg)[:3]
        assert (magic, kind, flags) == (b"VVS3", POSITION_KIND, FLAG_POSITION_DELTA)
    for seg in stored_segments(refs, "call_genotype"):
        blosc_flags = seg[PREAMBLE.size + 2]
        assert blosc_flags >> 5 == BLOSC_ZSTD


# --- crafted segments: old ones read, lying ones refused ----------------------------------


def sealed(magic: bytes, kind: int, flags: int, n: int, raw: bytes, frame: bytes) -> bytes:
    head = PREAMBLE_HEAD.pack(magic, kind, flags, 0, -1, n, 0, 1, len(raw))
    return head + struct.pack("<I", zlib.crc32(frame, zlib.crc32(head))) + frame


def position_codec(n: int, kind: str = "position") -> BCFRecordsCodec:
    return BCFRecordsCodec(array=f"variant_{kind}", kind=kind, dtype="<i4", shape=[], chunk_length=n,
                           num_records=n, layout="columns", compressor="zstd")  # fmt: skip


VALUES = [99, 104, 2, 2_000_000_000]


def test_an_old_plain_positions_segment_still_decodes():
    """A "VVS2" segment (the writer before this one: plain int32 positions, 0-based)."""
    raw = np.array(VALUES, "<i4").tobytes()
    seg = sealed(b"VVS2", POSITION_KIND, 0, 4, raw, Zstd(level=1).encode(raw))
    assert np.frombuffer(position_codec(4).decode(seg), "<i4").tolist() == [v + 1 for v in VALUES]


def test_an_old_lz4_gt_frame_still_decodes():
    """GT blocks of the writer before: Blosc lz4, level 9, bit-shuffled (the frame names its codec)."""
    # Two records of one sample, diploid int8 calls shifted by 2: 0/1 and 1|1.
    raw = (np.array([2, 2], "<i4").tobytes() + bytes([1, 1])
           + bytes([(1 << 1) - 2, (2 << 1) - 2, (2 << 1) - 2, ((2 << 1) | 1) - 2]))  # fmt: skip
    frame = Blosc(cname="lz4", clevel=9, shuffle=Blosc.BITSHUFFLE).encode(raw)
    head = PREAMBLE_HEAD.pack(b"VVS2", FORMAT_KIND, 1, 0, 3, 2, 0, 1, len(raw))
    seg = head + struct.pack("<I", zlib.crc32(frame, zlib.crc32(head))) + frame
    codec = BCFRecordsCodec(array="call_genotype", kind="genotype", dtype="|i1", shape=[1, 2], chunk_length=2,
                            num_records=2, key=3, ploidy=2, layout="columns", samples_chunk_size=1,
                            compressor="blosc")  # fmt: skip
    assert np.frombuffer(codec.decode(seg), "i1").reshape(2, 1, 2).tolist() == [[[0, 1]], [[1, 1]]]


def test_a_planes_segment_decodes():
    raw = position_deltas(np.array(VALUES, "<i4").view(np.uint8)).tobytes()
    seg = sealed(b"VVS3", POSITION_KIND, FLAG_POSITION_DELTA, 4, raw, Zstd(level=3).encode(raw))
    assert np.frombuffer(position_codec(4).decode(seg), "<i4").tolist() == [v + 1 for v in VALUES]


@pytest.mark.parametrize(
    "magic,kind,what",
    [
        (b"VVS2", POSITION_KIND, "preamble flags 8"),  # no VVS2 writer wrote flag 8
        (b"VVS3", CONTIG_KIND, "preamble flags 8"),  # flag 8 is the positions' alone
    ],
)
def test_flag_8_where_the_format_has_none_is_refused(magic, kind, what):
    raw = position_deltas(np.array(VALUES, "<i4").view(np.uint8)).tobytes()
    seg = sealed(magic, kind, FLAG_POSITION_DELTA, 4, raw, Zstd(level=3).encode(raw))
    codec = position_codec(4, "position" if kind == POSITION_KIND else "contig")
    with pytest.raises(ChunkDecodeError, match=what):
        codec.decode(seg)


def test_a_newer_segment_format_is_refused_in_one_line():
    raw = np.array(VALUES, "<i4").tobytes()
    seg = sealed(b"VVS4", POSITION_KIND, 0, 4, raw, Zstd(level=3).encode(raw))
    with pytest.raises(ChunkDecodeError, match="segment magic is b'VVS4', this reader reads b'VVS2 and VVS3'") as e:
        position_codec(4).decode(seg)
    assert "\n" not in str(e.value).split("hint")[0].strip()


@pytest.mark.parametrize("length", [0, 12, 20, 1 << 40])
def test_a_planes_segment_of_the_wrong_length_is_refused(length):
    """A preamble whose length is no 4 bytes a record: refused before anything the size
    of its claim is allocated."""
    raw = bytes(length) if length < 100 else bytes(16)
    head = PREAMBLE_HEAD.pack(b"VVS3", POSITION_KIND, FLAG_POSITION_DELTA, 0, -1, 4, 0, 1, length)
    frame = Zstd(level=3).encode(raw)
    seg = head + struct.pack("<I", zlib.crc32(frame, zlib.crc32(head))) + frame
    with pytest.raises(ChunkDecodeError):
        position_codec(4).decode(seg)


def test_random_planes_decode_to_numbers_or_a_typed_refusal():
    """Whatever 4n bytes a planes segment holds, they sum to int32 values: no crash."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        raw = rng.integers(0, 256, 4 * 6, dtype=np.uint8).tobytes()
        seg = sealed(b"VVS3", POSITION_KIND, FLAG_POSITION_DELTA, 6, raw, Zstd(level=3).encode(raw))
        try:
            out = np.frombuffer(position_codec(6).decode(seg), "<i4")
        except ChunkDecodeError:
            continue
        assert out.shape == (6,)


# --- FORMAT values in byte planes (flag 16) ------------------------------------------------


def typed_column(records: list[tuple[int, int, list[int]]], vectors: int) -> bytes:
    """A typed column by the format's words: counts, types, then each record's values
    (``vectors`` x count of them) little-endian in its type's width."""
    widths = {1: 1, 2: 2, 3: 4, 5: 4, 7: 1}
    out = b"".join(struct.pack("<i", count) for count, _, _ in records)
    out += bytes(code for _, code, _ in records)
    for count, code, values in records:
        assert len(values) == max(count, 0) * vectors
        out += b"".join(v.to_bytes(widths.get(code, 1), "little", signed=code != 5) for v in values)
    return out


def hand_value_planes(records: list[tuple[int, int, list[int]]], vectors: int) -> bytes:
    """Flag 16's bytes: in each record of values s > 1 bytes wide, byte k of value j at k * m + j."""
    widths = {1: 1, 2: 2, 3: 4, 5: 4, 7: 1}
    head = typed_column([(c, t, []) if c <= 0 else (c, t, v) for c, t, v in records], vectors)
    n = len(records)
    out = bytearray(head[: 5 * n])
    for count, code, values in records:
        size, m = widths.get(code, 1), max(count, 0) * vectors
        plain = b"".join(v.to_bytes(size, "little", signed=code != 5) for v in values)
        out += bytes(plain[j * size + k] for k in range(size) for j in range(m)) if size > 1 else plain
    return bytes(out)


FORMAT_RECORDS = [
    (3, 2, [0, 300, -32768, 12, 0, 999]),  # int16 likelihoods, 2 samples x 3, a missing one
    (3, 2, [1, 2, 3, 4, 5, 6]),  # the same layout: one run with the record before
    (2, 1, [5, -128, 7, -127]),  # int8 (no planes), with missing and end-of-vector
    (-1, 0, []),  # absent
    (0, 3, []),  # present, no values
    (1, 3, [70000, -2147483647]),  # int32
    (1, 5, [0x3F800000, 0x7F800001]),  # float32 bits: 1.0 and missing
]


@pytest.mark.parametrize("records", [FORMAT_RECORDS, FORMAT_RECORDS[:1], FORMAT_RECORDS[3:4], []])
def test_value_planes_are_the_formats(records):
    raw = np.frombuffer(typed_column(records, 2), np.uint8)
    planes = value_planes(raw, len(records), 2)
    assert planes.tobytes() == hand_value_planes(records, 2)
    back = planes.copy()
    undo_value_planes(back, len(records), 2)
    assert back.tobytes() == raw.tobytes()


@pytest.mark.parametrize(
    "raw,what",
    [
        (typed_column(FORMAT_RECORDS, 2) + b"\0", "do not fill"),  # a byte past the values
        (typed_column(FORMAT_RECORDS, 2)[:-1], "do not fill"),  # one short
        (struct.pack("<i", 1) + bytes([9]) + bytes(4), "type code"),  # no BCF type 9
        (bytes(3), "holds 3 bytes"),  # shorter than its counts and types
    ],
)
def test_value_planes_of_a_column_that_lies_are_refused(raw, what):
    n = 1 if len(raw) < 40 else len(FORMAT_RECORDS)
    with pytest.raises(ValueError, match=what):
        undo_value_planes(np.frombuffer(raw, np.uint8).copy(), n, 2 if n > 1 else 1)


FIELDS_HEADER = (
    HEADER
    + """##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">
##FORMAT=<ID=PL,Number=G,Type=Integer,Description="Likelihoods">
##FORMAT=<ID=QS,Number=1,Type=Float,Description="A float score">
"""
)
FIELDS_RECORDS = [
    # PL past int8 (int16 in BCF), then within it (int8), int32; missing and absent values.
    "chr1\t100\t.\tA\tT\t.\t.\t.\tGT:AD:PL:QS\t0/1:3,400:300,0,999:1.5\t./.:.:.:.\t1/1:0,2:40,6,0:2",
    "chr1\t200\t.\tA\tC,G\t.\t.\t.\tGT:AD:PL\t0/2:1,2,3:0,1,2,3,4,5\t1/1:7,8,9:9,8,7,6,5,4\t./.:.:.",
    "chr1\t300\t.\tG\tT\t.\t.\t.\tGT:PL\t0/0:70000,0,1\t0/1:.\t1|1:2,1,0",
    "chr2\t10\t.\tT\tC\t.\t.\t.\tGT:AD\t0/0:1,0\t0/1:.,5\t./.:.",
]


@pytest.mark.parametrize("chunk_length", [1, 3])
def test_format_fields_match_bio2zarr(tmp_path, chunk_length):
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(FIELDS_RECORDS, header=FIELDS_HEADER), tmp_path / "f.bcf")
    refs = tmp_path / "f.vcz.json"
    vcfvirtual.index(
        bcf, refs_path=refs, cache_path=tmp_path / "f.cache", cache_layout="columns",
        variants_chunk_size=chunk_length, samples_chunk_size=2,
    )  # fmt: skip
    for seg in stored_segments(refs, "call_PL"):
        assert PREAMBLE.unpack_from(seg)[2] == FLAG_VALUE_PLANES
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert_matches_bio2zarr(ds, bio2zarr_convert(bcf, tmp_path / "b.vcz", chunk_length, samples_chunk_size=2))
    first = next(iter(pysam.VariantFile(str(bcf))))
    assert ds.call_PL.values[0, 0, :3].tolist() == list(first.samples["S1"]["PL"])


def format_codec(n: int, samples: int, kind: str = "format") -> BCFRecordsCodec:
    return BCFRecordsCodec(array="call_PL", kind=kind, dtype="<i4", shape=[samples, 3], chunk_length=n,
                           num_records=n, key=5, layout="columns", samples_chunk_size=samples, vcf_type="Integer",
                           compressor="zstd")  # fmt: skip


def format_segment(magic: bytes, flags: int, raw: bytes, n: int, samples: int) -> bytes:
    head = PREAMBLE_HEAD.pack(magic, FORMAT_KIND, flags, 0, 5, n, 0, samples, len(raw))
    frame = Zstd(level=5).encode(raw)
    return head + struct.pack("<I", zlib.crc32(frame, zlib.crc32(head))) + frame


def test_a_value_planes_segment_decodes_and_lies_are_refused():
    records = [(3, 2, [0, 300, -32768, 12, 0, 999]), (3, 2, [1, 2, 3, 4, 5, 6])]
    plain = typed_column(records, 2)
    raw = hand_value_planes(records, 2)
    got = format_codec(2, 2).decode(format_segment(b"VVS3", FLAG_VALUE_PLANES, raw, 2, 2))
    want = format_codec(2, 2).decode(format_segment(b"VVS3", 0, plain, 2, 2))
    assert np.array_equal(np.frombuffer(got, "<i4"), np.frombuffer(want, "<i4"))
    assert np.frombuffer(got, "<i4").reshape(2, 2, 3)[0].tolist() == [[0, 300, -1], [12, 0, 999]]
    with pytest.raises(ChunkDecodeError, match="preamble flags 16"):  # no VVS2 writer wrote flag 16
        format_codec(2, 2).decode(format_segment(b"VVS2", FLAG_VALUE_PLANES, raw, 2, 2))
    # Counts claiming more values than the segment holds: a typed refusal, nothing allocated for them.
    lying = struct.pack("<ii", 3, 1000) + bytes([2, 2]) + raw[10:]
    with pytest.raises(ChunkDecodeError, match="cannot be put back in order"):
        format_codec(2, 2).decode(format_segment(b"VVS3", FLAG_VALUE_PLANES, lying, 2, 2))


# --- one undo for every reader of segments (the codec's decode, the append's join) --------

# Two INFO records, int8 5 and int16 300 (0x012C), as a typed column and rearranged by the
# layout tests/unit/vcfvirtual_codec/test_info_planes.py writes out: the types, each count
# plus one in 4 byte planes, byte 0 of every integer value, then byte 1 of the int16 one.
INFO_PLAIN = struct.pack("<2i", 1, 1) + bytes([1, 2]) + bytes([5]) + struct.pack("<h", 300)
INFO_REARRANGED = bytes([1, 2]) + bytes([2, 2]) + bytes(6) + bytes([5, 0x2C]) + bytes([0x01])


@pytest.mark.parametrize(
    "segment,flags,stored,n,width,plain",
    [
        ("position", FLAG_POSITION_DELTA, hand_planes([99, 104, 2]), 3, 1, np.array([99, 104, 2], "<i4").tobytes()),
        ("format", FLAG_VALUE_PLANES, hand_value_planes(FORMAT_RECORDS, 2), 7, 2, typed_column(FORMAT_RECORDS, 2)),
        ("info", FLAG_INFO_PLANES, INFO_REARRANGED, 2, 1, INFO_PLAIN),  # the same bit, named by the kind
        ("format", FLAG_GT_SHIFT, b"\x01\x02", 0, 1, b"\x01\x02"),  # a GT flag: the caller's to undo
        ("position", 0, hand_planes([99, 104]), 2, 1, hand_planes([99, 104])),  # no flag, nothing undone
    ],
    ids=["position-deltas", "value-planes", "info-planes", "gt-shift", "none"],
)
def test_one_undo_puts_back_the_transform_the_flag_and_kind_name(segment, flags, stored, n, width, plain):
    raw = np.frombuffer(stored, np.uint8).copy()
    undo_transforms(raw, segment, flags, n, width)
    assert raw.tobytes() == plain


@pytest.mark.parametrize(
    "segment,flags,stored,n,transform,problem",
    [
        ("position", FLAG_POSITION_DELTA, bytes(12), 4, "position deltas", "a positions segment of 4 records holds 12"),
        ("contig", FLAG_POSITION_DELTA, bytes(16), 4, "position deltas", "flag 8 on a contig segment"),
        ("format", FLAG_VALUE_PLANES, typed_column(FORMAT_RECORDS, 2) + b"\0", 7, "value planes", "do not fill"),
        ("info", FLAG_INFO_PLANES, INFO_REARRANGED[:-1], 2, "INFO planes", "record"),
        ("filter", FLAG_VALUE_PLANES, INFO_PLAIN, 2, "value planes", "flag 16 on a filter segment"),
    ],
    ids=["positions-short", "deltas-on-contig", "values-too-long", "info-truncated", "planes-on-filter"],
)
def test_one_undo_names_the_transform_that_failed(segment, flags, stored, n, transform, problem):
    with pytest.raises(TransformUndoError, match=problem) as e:
        undo_transforms(np.frombuffer(stored, np.uint8).copy(), segment, flags, n, 2)
    assert e.value.transform == transform
    assert isinstance(e.value, ValueError)  # what the append's caller turns into a stale cache
