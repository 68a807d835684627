"""The one numeric value decoder through both layouts, on vectors htslib cuts short.

FORMAT values of the array's full width are decoded in one vectorised pass and the few
vectors holding an end-of-vector are fixed afterwards, the ends searched for a block at a
time: these records put ends (and bytes after them that look like values) at every
position of vectors spread over several blocks, for each integer width and for floats.
The oracle is htslib (pysam) reading the same hand-written bytes as a BCF, with VCF Zarr's
encoding: integers -1 missing and -2 past the vector's end; floats missing inside the
record's width.
"""

from __future__ import annotations

import numpy as np
import pysam
import pytest
from vcfvirtual_codec import columns, decode
from vcfvirtual_codec.bcf import records as R

from .. import handmade_bcf as H

N_SAMPLES = 40  # 120 values per record: several of the fix-up's 32-value blocks
WIDTH = 3
SAMPLES = [f"S{i}" for i in range(N_SAMPLES)]
HEADER = H.HEADER.replace("\tS1\tS2\n", "\t" + "\t".join(SAMPLES) + "\n")
END = {H.BT_INT8: H.INT8_END, H.BT_INT16: H.INT16_END, H.BT_INT32: H.INT32_END}
MISSING = {H.BT_INT8: H.INT8_MISSING, H.BT_INT16: H.INT16_MISSING, H.BT_INT32: H.INT32_MISSING}
BIG = {H.BT_INT8: 100, H.BT_INT16: 30000, H.BT_INT32: 2_000_000}


def vectors(rng: np.random.Generator, end, missing, value) -> list[list]:
    """One vector per sample: full, cut short at each position (with value-like bytes
    after the end), or holding a missing value; the first and last samples cut."""
    out = []
    for s in range(N_SAMPLES):
        v = [value(), value(), value()]
        kind = 0 if s in (0, N_SAMPLES - 1) else int(rng.integers(0, 6))
        if kind <= 2:  # an end at position 0, 1 or 2; what follows is no value for htslib
            v[kind] = end
        elif kind == 3:
            v[int(rng.integers(0, WIDTH))] = missing
        out.append(v)
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """Per record: (type, per-sample vectors); the records; pysam's reading."""
    rng = np.random.default_rng(24)
    made = []
    for t in (H.BT_INT8, H.BT_INT16, H.BT_INT32):
        ints = vectors(rng, END[t], MISSING[t], lambda t=t: int(rng.integers(-BIG[t], BIG[t])))
        floats = vectors(rng, H.FLOAT_END, H.FLOAT_MISSING, lambda: float(rng.integers(-1000, 1000)) / 8)
        made.append((t, ints, floats))
    recs = [
        H.record(
            pos=100 * (k + 1),
            n_sample=N_SAMPLES,
            fmt=[(H.KEY["AD"], H.fmt_ints(t, ints)), (H.KEY["FF"], H.fmt_floats(fl))],
        )
        for k, (t, ints, fl) in enumerate(made)
    ]
    path = H.write(tmp_path_factory.mktemp("kernels") / "cut.bcf", recs, header=HEADER)
    with pysam.VariantFile(str(path)) as f:
        read = [[(dict(s)["AD"], dict(s)["FF"]) for s in rec.samples.values()] for rec in f]
    return made, recs, read


def expected(read, field: int, is_float: bool) -> np.ndarray:
    """pysam's values as VCF Zarr rows of the full width (n == width in every record)."""
    rows = []
    for rec in read:
        row = []
        for sample in rec:
            values = sample[field]
            values = () if values is None else values if isinstance(values, tuple) else (values,)
            if is_float:
                bits = [
                    H.FLOAT_MISSING if v is None or np.isnan(v) else int(np.float32(v).view(np.int32)) for v in values
                ]
                row.append(bits + [H.FLOAT_MISSING] * (WIDTH - len(bits)))
            else:
                ints = [-1 if v is None else v for v in values]
                row.append(ints + [-2] * (WIDTH - len(ints)))
        rows.append(row)
    return np.array(rows, np.int64)


def column_segment(t: int, per_sample: list[list]) -> np.ndarray:
    """A one-record typed column (count, type, values) holding these vectors."""
    values = H.fmt_ints(t, per_sample) if t != H.BT_FLOAT else H.fmt_floats(per_sample)
    body = values[len(H.descriptor(t, WIDTH)) :]
    return np.frombuffer(np.array([WIDTH], "<i4").tobytes() + bytes([t]) + body, np.uint8).copy()


@pytest.mark.parametrize("is_float", [False, True])
def test_records_layout_reads_cut_vectors_as_htslib(cases, is_float):
    _, recs, read = cases
    buf, offsets = H.chunk(recs)
    out = np.zeros((len(recs), N_SAMPLES, WIDTH), np.int32)
    key = H.KEY["FF" if is_float else "AD"]
    assert decode.field_numeric(buf, offsets, key, True, is_float, out) == (R.OK, 0)
    np.testing.assert_array_equal(out, expected(read, int(is_float), is_float))


@pytest.mark.parametrize("is_float", [False, True])
def test_columns_layout_reads_cut_vectors_as_htslib(cases, is_float):
    """Each record as a segment, decoded into the narrowest dtype that holds its values
    (int8 values into int8, as the array's dtype would be), and into int32."""
    made, _, read = cases
    want = expected(read, int(is_float), is_float)
    for k, (t, ints, floats) in enumerate(made):
        seg = column_segment(H.BT_FLOAT if is_float else t, floats if is_float else ints)
        dtypes = [np.int32] if is_float else [{H.BT_INT8: np.int8, H.BT_INT16: np.int16}.get(t, np.int32), np.int32]
        for dtype in dtypes:
            out = np.zeros((1, N_SAMPLES, WIDTH), dtype)
            info = np.iinfo(dtype)
            assert columns.numeric(seg, 1, True, is_float, out, info.min, info.max) == (R.OK, 0)
            np.testing.assert_array_equal(out[0], want[k], err_msg=f"record {k}, {np.dtype(dtype)}")


def test_a_value_past_the_dtype_is_refused_not_wrapped(cases):
    """int16 values into an int8 output: ERR_NARROW naming the record, whatever ends the
    record also holds."""
    made, _, _ = cases
    t, ints, _ = made[1]
    assert t == H.BT_INT16
    out = np.zeros((1, N_SAMPLES, WIDTH), np.int8)
    err, at = columns.numeric(column_segment(t, ints), 1, True, False, out, -128, 127)
    assert (err, at) == (columns.ERR_NARROW, 0)
