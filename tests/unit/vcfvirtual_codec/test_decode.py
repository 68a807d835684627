"""The decode kernels on records written byte by byte from the BCF 2.2 spec (section 6.3).

Every expected value is computed by hand from the spec's encoding and VCF Zarr's
conventions (-1 missing, -2 fill / end-of-vector; float bit patterns 0x7F800001
missing, 0x7F800002 fill), and the same bytes, written as a plain BCF, are read by
htslib through pysam as the second oracle.
"""

from __future__ import annotations

import struct

import numpy as np
import pysam
import pytest
from vcfvirtual_codec import decode
from vcfvirtual_codec.bcf import records as R

from .. import handmade_bcf as H

I8, I16, I32 = H.BT_INT8, H.BT_INT16, H.BT_INT32
M, F = H.FLOAT_MISSING, H.FLOAT_END


def bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


RECORDS = [
    # chr1:100 rs1 A>T PASS; DP=5 XI=300,-5 (int16) XF=1.5,.,<end> DB;
    # GT 0|1 and haploid 1 (end-of-vector second); AD 3,4 and 5,<end>; FF 0.5,<end> and .,.
    H.record(
        id_=H.chars(b"rs1"),
        info=[
            (H.KEY["DP"], H.ints(I8, [5])),
            (H.KEY["XI"], H.ints(I16, [300, -5])),
            (H.KEY["XF"], H.floats([1.5, M, F])),
            (H.KEY["DB"], H.ints(I8, [1])),
        ],
        fmt=[
            (H.KEY["GT"], H.fmt_ints(I8, [[0x02, 0x05], [0x04, H.INT8_END]])),
            (H.KEY["AD"], H.fmt_ints(I8, [[3, 4], [5, H.INT8_END]])),
            (H.KEY["FF"], H.fmt_floats([[0.5, F], [M, M]])),
        ],
    ),
    # chr1:200 . ACGT>A,AC q10; DP the lone int8 0x81 (a value, -127, for htslib);
    # XI=70000,. (int32) XS="a,bc"; GT int16 0/2 and ./.; AD int16 1000,<end> and .,.
    H.record(
        pos=199,
        rlen=4,
        qual=bits(30.0),
        alleles=(b"ACGT", b"A", b"AC"),
        filters=H.ints(I8, [H.KEY["q10"]]),
        info=[
            (H.KEY["DP"], H.ints(I8, [H.INT8_END])),
            (H.KEY["XI"], H.ints(I32, [70000, H.INT32_MISSING])),
            (H.KEY["XS"], H.chars(b"a,bc")),
        ],
        fmt=[
            (H.KEY["GT"], H.fmt_ints(I16, [[0x02, 0x06], [0x00, 0x00]])),
            (H.KEY["AD"], H.fmt_ints(I16, [[1000, H.INT16_END], [H.INT16_MISSING, H.INT16_MISSING]])),
        ],
    ),
    # chr2:10 rs3 G (no ALT), no FILTER, no FORMAT; rlen stored as 2^31 (negative as
    # int32): htslib replaces it by END - POS = 60 - 9 = 51.
    H.record(
        chrom=1,
        pos=9,
        rlen=-(2**31),
        id_=H.chars(b"rs3"),
        alleles=(b"G",),
        filters=H.ints(I8, []),
        info=[(H.KEY["END"], H.ints(I8, [60]))],
    ),
    # chr2:20 . C>G PASS; haploid GT record: 1 and phased 0.
    H.record(chrom=1, pos=19, alleles=(b"C", b"G"), fmt=[(H.KEY["GT"], H.fmt_ints(I8, [[0x04], [0x03]]))]),
]
N = len(RECORDS)


@pytest.fixture(scope="module")
def chunk():
    return H.chunk(RECORDS)


@pytest.fixture(scope="module")
def htslib(tmp_path_factory):
    """pysam's reading of the same records."""
    path = H.write(tmp_path_factory.mktemp("decode") / "hand.bcf", RECORDS)
    with pysam.VariantFile(str(path)) as f:
        h = f.header
        keys = {**{k: h.filters[k].id for k in h.filters}, **{k: h.info[k].id for k in h.info}}
        keys.update({k: h.formats[k].id for k in h.formats})
        assert keys == H.KEY  # the dictionary numbering the records were written with
        recs = list(f)
    assert len(recs) == N
    return recs


def padded(values, width, missing, fill):
    """pysam's values as a VCF Zarr row: None missing, then fill to the width."""
    if values is None:
        values = ()
    if not isinstance(values, tuple):
        values = (values,)
    row = [missing if v is None else v for v in values]
    return row + [fill] * (width - len(row))


# -- genotypes ----------------------------------------------------------------------


def test_genotypes_against_spec_and_htslib(chunk, htslib):
    buf, offsets = chunk
    gt = np.zeros((N, 2, 2), np.int8)
    phased = np.zeros((N, 2), bool)
    assert decode.genotypes(buf, offsets, H.KEY["GT"], gt, phased, 127) == (R.OK, 0)
    expected_gt = [
        [[0, 1], [1, -2]],  # 0|1; haploid 1 in a diploid record: end-of-vector is fill
        [[0, 2], [-1, -1]],  # int16 0/2; ./. (allele 0 is missing in GT's encoding)
        [[-1, -1], [-1, -1]],  # no GT: missing
        [[1, -2], [0, -2]],  # ploidy-1 record
    ]
    expected_phased = [[True, True], [False, False], [False, False], [True, True]]
    assert gt.tolist() == expected_gt
    assert phased.tolist() == expected_phased
    for k in (0, 1, 3):  # the records with GT
        for s, sample in enumerate(htslib[k].samples.values()):
            assert padded(sample["GT"], 2, -1, -2) == expected_gt[k][s], (k, s)
            assert sample.phased == expected_phased[k][s], (k, s)


def test_genotypes_alleles_only(chunk):
    buf, offsets = chunk
    gt = np.zeros((N, 2, 2), np.int8)
    assert decode.genotypes(buf, offsets, H.KEY["GT"], gt, np.empty((0, 0), bool), 127)[0] == R.OK
    assert gt[0].tolist() == [[0, 1], [1, -2]]


@pytest.mark.parametrize(
    "gt_bytes,code",
    [
        ([[0x02, -5], [0x02, 0x02]], R.ERR_GT_VALUE),  # negative, neither missing nor end
        ([[0x02, 0x02, 0x02], [0x02, 0x02, 0x02]], R.ERR_SHAPE),  # ploidy 3 > the array's 2
    ],
)
def test_genotype_refusals(gt_bytes, code):
    buf, offsets = H.chunk([H.record(fmt=[(H.KEY["GT"], H.fmt_ints(I8, gt_bytes))])])
    gt = np.zeros((1, 2, 2), np.int8)
    assert decode.genotypes(buf, offsets, H.KEY["GT"], gt, np.zeros((1, 2), bool), 127)[0] == code


def test_allele_index_past_the_dtype_is_refused():
    # Allele 200 (int16 (200 + 1) << 1) does not fit an int8 array: an error, not a wrap.
    buf, offsets = H.chunk([H.record(fmt=[(H.KEY["GT"], H.fmt_ints(I16, [[402, 2], [2, 2]]))])])
    gt = np.zeros((1, 2, 2), np.int8)
    assert decode.genotypes(buf, offsets, H.KEY["GT"], gt, np.zeros((1, 2), bool), 127)[0] == R.ERR_SHAPE
    gt16 = np.zeros((1, 2, 2), np.int16)
    assert decode.genotypes(buf, offsets, H.KEY["GT"], gt16, np.zeros((1, 2), bool), 32767)[0] == R.OK
    assert gt16[0].tolist() == [[200, 0], [0, 0]]


def test_genotypes_refuse_a_record_of_another_sample_count():
    buf, offsets = H.chunk([H.record(n_sample=1, fmt=[(H.KEY["GT"], H.fmt_ints(I8, [[2, 4]]))])])
    gt = np.zeros((1, 2, 2), np.int8)
    assert decode.genotypes(buf, offsets, H.KEY["GT"], gt, np.zeros((1, 2), bool), 127)[0] == R.ERR_SAMPLES


# -- INFO / FORMAT numbers -----------------------------------------------------------


def numeric(chunk, name, is_format, is_float, n_vectors, width):
    buf, offsets = chunk
    out = np.zeros((N, n_vectors, width), np.int32)
    err = decode.field_numeric(buf, offsets, H.KEY[name], is_format, is_float, out)
    assert err == (R.OK, 0)
    return out


def test_info_integers_int8_int16_int32(chunk, htslib):
    out = numeric(chunk, "XI", False, False, 1, 3)
    expected = [[300, -5, -2], [70000, -1, -2], [-1, -1, -1], [-1, -1, -1]]
    assert out[:, 0, :].tolist() == expected
    for k, rec in enumerate(htslib):
        assert padded(rec.info.get("XI", (None,) * 3), 3, -1, -2) == expected[k]


def test_lone_info_int8_end_of_vector_is_a_value(chunk, htslib):
    # htslib keeps a lone INFO value as a plain number: int8 0x81 is -127.
    out = numeric(chunk, "DP", False, False, 1, 1)
    assert out[:, 0, 0].tolist() == [5, -127, -1, -1]
    assert [rec.info.get("DP") for rec in htslib] == [5, -127, None, None]


def test_info_floats_missing_versus_end_of_vector(chunk, htslib):
    out = numeric(chunk, "XF", False, True, 1, 4)
    # 1.5, missing, end-of-vector (a NaN inside the record's width: missing), then fill.
    assert out[0, 0].tolist() == [bits(1.5), M, M, F]
    assert out[1, 0].tolist() == [M] * 4  # absent
    assert htslib[0].info["XF"] == (1.5, None)  # htslib stops at the end-of-vector


def test_format_integers_with_end_of_vector_and_missing(chunk, htslib):
    out = numeric(chunk, "AD", True, False, 2, 2)
    expected = [[[3, 4], [5, -2]], [[1000, -2], [-1, -1]], [[-1, -1], [-1, -1]], [[-1, -1], [-1, -1]]]
    assert out.tolist() == expected
    for k in (0, 1):
        for s, sample in enumerate(htslib[k].samples.values()):
            row = padded(sample["AD"], 2, -1, -2)
            if sample["AD"] in (None, (None,)):
                row = [-1, -1]  # pysam shortens an all-missing vector
            assert row == expected[k][s], (k, s)


def test_format_floats(chunk, htslib):
    out = numeric(chunk, "FF", True, True, 2, 2)
    assert out[0].tolist() == [[bits(0.5), M], [M, M]]
    assert out[1].tolist() == [[M, M], [M, M]]  # absent from the record
    samples = list(htslib[0].samples.values())
    assert samples[0]["FF"] == (0.5,)
    assert samples[1]["FF"] in (None, (None,), (None, None))


def test_numeric_refusals(chunk):
    buf, offsets = chunk
    # Two values in a width of one: the index and the array disagree.
    assert decode.field_numeric(buf, offsets, H.KEY["XI"], False, False, np.zeros((N, 1, 1), np.int32))[0] == (
        R.ERR_SHAPE
    )
    # Float values read as Integer.
    assert decode.field_numeric(buf, offsets, H.KEY["XF"], False, False, np.zeros((N, 1, 4), np.int32))[0] == (
        R.ERR_BAD_TYPE
    )
    # Integer values read as Float.
    assert decode.field_numeric(buf, offsets, H.KEY["AD"], True, True, np.zeros((N, 2, 2), np.int32))[0] == (
        R.ERR_BAD_TYPE
    )


# -- flags, filters, strings, lengths ------------------------------------------------


def test_info_flag(chunk, htslib):
    buf, offsets = chunk
    out = np.zeros(N, bool)
    assert decode.info_flag(buf, offsets, H.KEY["DB"], out) == (R.OK, 0)
    assert out.tolist() == [True, False, False, False]
    assert out.tolist() == ["DB" in rec.info for rec in htslib]


def test_filters(chunk, htslib):
    buf, offsets = chunk
    column_of_key = np.array([0, 1] + [-1] * 9, np.int64)
    out = np.zeros((N, 2), bool)
    assert decode.filters(buf, offsets, column_of_key, out) == (R.OK, 0)
    assert out.tolist() == [[True, False], [False, True], [False, False], [True, False]]
    assert [[f in rec.filter.keys() for f in ("PASS", "q10")] for rec in htslib] == out.tolist()


def test_filter_key_that_is_no_filter_is_refused():
    buf, offsets = H.chunk([H.record(filters=H.ints(I8, [H.KEY["DP"]]))])
    column_of_key = np.array([0, 1] + [-1] * 9, np.int64)
    assert decode.filters(buf, offsets, column_of_key, np.zeros((1, 2), bool))[0] == R.ERR_UNKNOWN_FILTER


def test_filter_column_past_the_array_is_refused():
    buf, offsets = H.chunk([H.record()])
    assert decode.filters(buf, offsets, np.array([5], np.int64), np.zeros((1, 2), bool))[0] == R.ERR_UNKNOWN_FILTER


def span_text(buf, start, length):
    if length == decode.SPAN_MISSING:
        return "."
    if length == decode.SPAN_FILL:
        return ""
    return bytes(buf[start : start + length]).decode()


def test_id_spans(chunk, htslib):
    buf, offsets = chunk
    starts = np.zeros(N, np.int64)
    lengths = np.zeros(N, np.int64)
    assert decode.id_spans(buf, offsets, starts, lengths) == (R.OK, 0)
    ids = [span_text(buf, s, n) for s, n in zip(starts, lengths)]
    assert ids == ["rs1", ".", "rs3", "."]
    assert ids == [rec.id or "." for rec in htslib]


def test_id_that_is_not_a_string_is_refused():
    buf, offsets = H.chunk([H.record(id_=H.ints(I8, [1]))])
    assert decode.id_spans(buf, offsets, np.zeros(1, np.int64), np.zeros(1, np.int64))[0] == R.ERR_ID_TYPE


def test_allele_spans(chunk, htslib):
    buf, offsets = chunk
    starts = np.zeros((N, 3), np.int64)
    lengths = np.full((N, 3), decode.SPAN_FILL, np.int64)
    assert decode.allele_spans(buf, offsets, starts, lengths) == (R.OK, 0)
    alleles = [[span_text(buf, s, n) for s, n in zip(starts[k], lengths[k])] for k in range(N)]
    assert alleles == [["A", "T", ""], ["ACGT", "A", "AC"], ["G", "", ""], ["C", "G", ""]]
    for k, rec in enumerate(htslib):
        assert [a for a in alleles[k] if a] == list(rec.alleles)


def test_more_alleles_than_the_array_is_refused(chunk):
    buf, offsets = chunk
    starts = np.zeros((N, 2), np.int64)
    assert decode.allele_spans(buf, offsets, starts, np.full((N, 2), -1, np.int64))[0] == R.ERR_SHAPE


def test_info_string_parts(chunk, htslib):
    buf, offsets = chunk
    starts = np.zeros((N, 1, 2), np.int64)
    lengths = np.full((N, 1, 2), decode.SPAN_FILL, np.int64)
    assert decode.field_string_spans(buf, offsets, H.KEY["XS"], False, starts, lengths) == (R.OK, 0)
    assert [span_text(buf, starts[1, 0, j], lengths[1, 0, j]) for j in range(2)] == ["a", "bc"]
    xs = htslib[1].info["XS"]  # pysam splits a string at commas itself
    assert (list(xs) if isinstance(xs, tuple) else xs.split(",")) == ["a", "bc"]
    assert lengths[0, 0].tolist() == [decode.SPAN_MISSING] * 2  # absent


def test_lengths_and_positions(chunk, htslib):
    buf, offsets = chunk
    rlen = np.zeros(N, np.int64)
    assert decode.lengths(buf, offsets, H.KEY["END"], rlen) == (R.OK, 0)
    assert rlen.tolist() == [1, 4, 51, 1]  # the third: END 60 - 0-based POS 9
    assert rlen.tolist() == [rec.rlen for rec in htslib]
    pos = np.zeros(N, np.int32)
    decode.fixed_int32(buf, offsets, R.OFF_POS, pos)
    assert (pos + 1).tolist() == [rec.pos for rec in htslib] == [100, 200, 10, 20]


def test_qual_bit_patterns(chunk, htslib):
    buf, offsets = chunk
    out = np.zeros(4 * N, np.uint8)
    decode.fixed_bytes4(buf, offsets, R.OFF_QUAL, out)
    assert out.view("<i4").tolist() == [M, bits(30.0), M, M]
    assert [rec.qual for rec in htslib] == [None, 30.0, None, None]


# -- sentinels at the edges, one record each ---------------------------------------------


def one_record(tmp_path, rec):
    """The record's chunk, and pysam's reading of it (INFO dict, per-sample dicts)."""
    path = H.write(tmp_path / "one.bcf", [rec])
    with pysam.VariantFile(str(path)) as f:
        r = next(f)
        return H.chunk([rec]), dict(r.info), [dict(s) for s in r.samples.values()]


def test_lone_int16_end_of_vector_is_a_value(tmp_path):
    (buf, offsets), info, _ = one_record(tmp_path, H.record(info=[(H.KEY["DP"], H.ints(I16, [H.INT16_END]))]))
    out = np.zeros((1, 1, 1), np.int32)
    decode.field_numeric(buf, offsets, H.KEY["DP"], False, False, out)
    assert out.ravel().tolist() == [-32767] == [info["DP"]]


def test_lone_int32_end_of_vector_is_fill(tmp_path):
    # The one documented disagreement with pysam (tests/README.md): bio2zarr's fill.
    (buf, offsets), info, _ = one_record(tmp_path, H.record(info=[(H.KEY["DP"], H.ints(I32, [H.INT32_END]))]))
    out = np.zeros((1, 1, 1), np.int32)
    decode.field_numeric(buf, offsets, H.KEY["DP"], False, False, out)
    assert out.ravel().tolist() == [-2]
    assert info["DP"] == H.INT32_END


def test_values_after_an_end_of_vector_are_fill(tmp_path):
    rec = H.record(
        info=[(H.KEY["XI"], H.ints(I8, [H.INT8_END, 5]))],
        fmt=[
            (H.KEY["AD"], H.fmt_ints(I8, [[H.INT8_END, 5], [1, 2]])),
            (H.KEY["FF"], H.fmt_floats([[F, 1.0], [1.0, 2.0]])),
        ],
    )
    (buf, offsets), info, samples = one_record(tmp_path, rec)
    xi = np.zeros((1, 1, 2), np.int32)
    decode.field_numeric(buf, offsets, H.KEY["XI"], False, False, xi)
    assert xi.tolist() == [[[-2, -2]]] and info["XI"] == ()  # htslib: no values
    ad = np.zeros((1, 2, 2), np.int32)
    decode.field_numeric(buf, offsets, H.KEY["AD"], True, False, ad)
    assert ad.tolist() == [[[-2, -2], [1, 2]]]
    assert [s["AD"] for s in samples] == [(), (1, 2)]
    ff = np.zeros((1, 2, 2), np.int32)
    decode.field_numeric(buf, offsets, H.KEY["FF"], True, True, ff)
    # Float slots inside the record's width read missing after an end (bio2zarr's choice).
    assert ff.tolist() == [[[M, M], [bits(1.0), bits(2.0)]]]
    assert [s["FF"] for s in samples] == [(), (1.0, 2.0)]


def test_a_nan_value_reads_missing(tmp_path):
    (buf, offsets), info, _ = one_record(tmp_path, H.record(info=[(H.KEY["XF"], H.floats([0x7FC00000, 2.0]))]))
    out = np.zeros((1, 1, 2), np.int32)
    decode.field_numeric(buf, offsets, H.KEY["XF"], False, True, out)
    assert out.tolist() == [[[M, bits(2.0)]]]
    assert np.isnan(info["XF"][0]) and info["XF"][1] == 2.0


def test_a_call_of_end_of_vector_only_is_empty(tmp_path):
    rec = H.record(fmt=[(H.KEY["GT"], H.fmt_ints(I8, [[H.INT8_END, H.INT8_END], [0x00, 0x01]]))])
    (buf, offsets), _, samples = one_record(tmp_path, rec)
    gt = np.zeros((1, 2, 2), np.int8)
    phased = np.zeros((1, 2), bool)
    decode.genotypes(buf, offsets, H.KEY["GT"], gt, phased, 127)
    assert gt.tolist() == [[[-2, -2], [-1, -1]]]
    assert [s["GT"] for s in samples] == [(), (None, None)]
    # ".|." (the second allele's phase bit set) is phased, as htslib prints it. The empty
    # call's phase follows the end-of-vector's low bit, as bio2zarr reads it (pysam: False).
    assert phased.tolist() == [[True, True]]
