"""The one genotype row decoder through both layouts: the same GT vectors as records
(BCF 2.2 bytes, section 6.3) and as a columns-layout GT block (counts, types, values;
int8 bytes optionally stored minus GT_SHIFT) decode to the same rows, for every output
dtype. Expected rows are worked out by hand from the spec's GT encoding ((allele + 1)
<< 1 | phased; 0 and the type's missing value are a missing allele, end-of-vector ends
the call) and VCF Zarr's conventions (-1 missing, -2 fill).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from vcfvirtual_codec import columns, decode
from vcfvirtual_codec import local_alleles as la_mod
from vcfvirtual_codec._kernels.genotypes import columns_genotypes
from vcfvirtual_codec.bcf import records as R

from .. import handmade_bcf as H

I8, I16, I32 = H.BT_INT8, H.BT_INT16, H.BT_INT32
END8 = H.INT8_END

# (type, per-sample GT values or None for a record without GT, expected alleles, expected phase)
CASES = [
    (I8, [[0x02, 0x05], [0x04, 0x04]], [[0, 1], [1, 1]], [True, False]),  # 0|1, 1/1
    (I8, [[0x00, 0x00], [H.INT8_MISSING, H.INT8_MISSING]], [[-1, -1], [-1, -1]], [False, False]),
    (I8, [[0x04, END8], [0x02, 0x03]], [[1, -2], [0, 0]], [True, True]),  # haploid 1 in diploid; 0|0
    (I8, [[END8, END8], [0x06, 0x02]], [[-2, -2], [2, 0]], [True, False]),  # an empty call; 2/0
    (I16, [[0x06, 0x09], [0x02, 0x02]], [[2, 3], [0, 0]], [True, False]),  # 2|3, 0/0
    (I32, [[0x02, H.INT32_END], [0x00, 0x03]], [[0, -2], [-1, 0]], [True, True]),  # haploid 0; .|0
    (I8, [[0x04], [0x03]], [[1, -2], [0, -2]], [True, True]),  # a ploidy-1 record
    (I8, None, [[-1, -1], [-1, -1]], [False, False]),  # no GT
]
DTYPES = [np.int8, np.int16, np.int32]


def _records(cases) -> tuple[np.ndarray, np.ndarray]:
    return H.chunk(
        [H.record(fmt=[] if values is None else [(H.KEY["GT"], H.fmt_ints(t, values))]) for t, values, *_ in cases]
    )


def _segment(cases, shift: int = 0) -> np.ndarray:
    """The same GT vectors as one columns-layout GT block of 2 samples."""
    counts, types, body = [], [], b""
    for t, values, *_ in cases:
        if values is None:
            counts.append(-1)
            types.append(0)
            continue
        flat = [x for v in values for x in v]
        counts.append(len(values[0]))
        types.append(t)
        packed = struct.pack("<" + H.INT_CODE[t] * len(flat), *flat)
        if t == I8 and shift:
            packed = bytes((b - shift) & 0xFF for b in packed)
        body += packed
    head = struct.pack(f"<{len(cases)}i", *counts) + bytes(types)
    return np.frombuffer(head + body, np.uint8).copy()


def _decode(layout: str, cases, dtype, phased_rows: bool = True):
    n = len(cases)
    gt = np.full((n, 2, 2), 99, dtype)  # every value must be written
    phased = np.full((n, 2), True, bool) if phased_rows else np.empty((0, 0), bool)
    max_allele = np.iinfo(dtype).max
    if layout == "records":
        buf, offsets = _records(cases)
        result = decode.genotypes(buf, offsets, H.KEY["GT"], gt, phased, max_allele)
    else:
        shifted = layout == "columns_shifted"
        seg = _segment(cases, columns.GT_SHIFT if shifted else 0)
        result = columns_genotypes(seg, n, gt, phased, max_allele, shifted)
    return result, gt, phased


def test_the_decoder_adds_back_the_shift_the_writer_subtracts():
    from vcfvirtual_codec._kernels import genotypes

    assert genotypes.SHIFT_ADDED == columns.GT_SHIFT


@pytest.mark.parametrize("layout", ["records", "columns", "columns_shifted"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_both_layouts_decode_the_hand_worked_rows(layout, dtype):
    (err, _), gt, phased = _decode(layout, CASES, dtype)
    assert err == R.OK
    assert gt.tolist() == [expected for *_, expected, _ in CASES]
    assert phased.tolist() == [expected for *_, expected in CASES]
    (err, _), alleles_only, _ = _decode(layout, CASES, dtype, phased_rows=False)
    assert err == R.OK and alleles_only.tolist() == gt.tolist()


@pytest.mark.parametrize("layout", ["records", "columns", "columns_shifted"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_each_row_alone(layout, case):
    """Each case as a chunk of its own (the common int8 path sees one kind of row)."""
    (err, _), gt, phased = _decode(layout, CASES[case : case + 1], np.int8)
    assert err == R.OK
    assert gt.tolist() == [CASES[case][2]] and phased.tolist() == [CASES[case][3]]


@pytest.mark.parametrize("layout", ["records", "columns"])
def test_an_allele_past_the_dtype_is_refused_in_both_layouts(layout):
    big = [(I32, [[(1000 + 1) << 1, 0x02], [0x02, 0x02]], [[1000, 0], [0, 0]], [False, False])]
    assert _decode(layout, big, np.int8)[0][0] == R.ERR_SHAPE
    (err, _), gt, _ = _decode(layout, big, np.int16)
    assert err == R.OK and gt.tolist() == [big[0][2]]


@pytest.mark.parametrize("layout", ["records", "columns"])
def test_a_negative_value_is_refused_in_both_layouts(layout):
    bad = [(I8, [[0x02, -5], [0x02, 0x02]], None, None)]
    assert _decode(layout, bad, np.int8)[0][0] == R.ERR_GT_VALUE


def test_outputs_too_small_for_the_records_are_refused():
    """The kernels write without bounds checks: outputs are checked against the records first."""
    buf, offsets = _records(CASES)
    short = np.empty((len(CASES) - 1, 2, 2), np.int8)
    assert decode.genotypes(buf, offsets, H.KEY["GT"], short, np.empty((0, 0), bool), 127) == (R.ERR_SHAPE, 0)
    gt = np.empty((len(CASES), 2, 2), np.int8)
    with pytest.raises(ValueError, match="out_phased"):
        decode.genotypes(buf, offsets, H.KEY["GT"], gt, np.empty((len(CASES), 3), bool), 127)
    seg = _segment(CASES)
    with pytest.raises(ValueError, match="out_phased"):
        columns_genotypes(seg, len(CASES), gt, np.empty((1, 2), bool), 127)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_local_kernels_for_every_integer_dtype(dtype):
    """call_LA/LAD/LPL of calls 0/2, 1/1, ./1 and 2|- by hand (VCF 4.5 local alleles)."""
    gt = np.array([[[0, 2], [1, 1], [-1, 1], [2, -2]]], np.int8)
    la = np.empty((1, 4, 2), np.int8)
    la_mod.local_alleles(gt, la)
    assert la.tolist() == [[[0, 2], [1, -2], [1, -2], [2, -2]]]
    ad = np.array([[[10, 11, 12], [20, 21, 22], [30, 31, -2], [40, 41, 42]]], dtype)
    lad = np.empty((1, 4, 2), dtype)
    la_mod.local_ad(ad, la, lad)
    assert lad.tolist() == [[[10, 12], [21, -2], [31, -2], [42, -2]]]
    pl = np.arange(6, dtype=dtype)[None, None, :].repeat(4, axis=1)  # PL index i holds i
    lpl = np.empty((1, 4, 3), dtype)
    la_mod.local_pl(pl, la, lpl)
    # a/b -> b(b+1)/2 + a: 0/0 0, 0/2 3, 2/2 5; 1/1 2; 2/2 5
    assert lpl.tolist() == [[[0, 3, 5], [2, -2, -2], [2, -2, -2], [5, -2, -2]]]


def test_local_kernels_refuse_mismatched_shapes():
    la = np.zeros((2, 3, 2), np.int8)
    with pytest.raises(ValueError):
        la_mod.local_alleles(np.zeros((2, 4, 2), np.int8), la)
    with pytest.raises(ValueError):
        la_mod.local_ad(np.zeros((1, 3, 2), np.int16), la, np.empty((2, 3, 2), np.int16))
    with pytest.raises(ValueError):
        la_mod.local_pl(np.zeros((2, 3, 6), np.int16), la, np.empty((2, 3, 2), np.int16))
