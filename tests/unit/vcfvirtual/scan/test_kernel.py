"""The record kernel on records written byte by byte from the BCF 2.2 spec: per-record
facts and per-key statistics against hand computation and pysam reading the same bytes;
each refusal htslib's bcf_record_check makes is its own error code."""

from __future__ import annotations

import numpy as np
import pysam
import pytest
from vcfvirtual_codec.bcf import records as R

from vcfvirtual.scan import kernel
from vcfvirtual.scan.scanner import read_header

from ... import handmade_bcf as H
from ...vcfvirtual_codec.test_decode import RECORDS

I8, I16 = H.BT_INT8, H.BT_INT16
N_KEYS = len(H.KEY)
K = H.KEY


def kinds():
    """What HEADER declares each key to be, written out by hand."""
    info = np.zeros(N_KEYS, np.int8)
    fmt = np.zeros(N_KEYS, np.int8)
    for name in ("DP", "XI", "END"):
        info[K[name]] = kernel.KIND_INTEGER
    info[K["XF"]] = kernel.KIND_FLOAT
    info[K["DB"]] = kernel.KIND_FLAG
    info[K["XS"]] = kernel.KIND_CHAR
    fmt[K["GT"]] = kernel.KIND_INTEGER  # declared String, encoded as integers
    fmt[K["AD"]] = kernel.KIND_INTEGER
    fmt[K["FF"]] = kernel.KIND_FLOAT
    filters = np.zeros(N_KEYS, bool)
    filters[[K["PASS"], K["q10"]]] = True
    return info, fmt, filters


def scan(records, *, capacity=16, base=0, cut=0, n_contigs=2, rlen_needs_more=False):
    buf, _ = H.chunk(records)
    if cut:
        buf = buf[:-cut]
    out = [np.zeros(capacity, np.int64)] + [np.zeros(capacity, np.int32) for _ in range(5)]
    stats = kernel.new_stats(N_KEYS), kernel.new_stats(N_KEYS)
    n, consumed, err, err_pos, err_key = kernel.scan_records(
        buf, 2, n_contigs, K["GT"], base, *out, *stats, *kinds(), K["END"], rlen_needs_more
    )
    return {"n": n, "consumed": consumed, "err": err, "err_pos": err_pos, "key": err_key, "out": out, "stats": stats}


@pytest.fixture(scope="module")
def htslib(tmp_path_factory):
    path = H.write(tmp_path_factory.mktemp("kernel") / "hand.bcf", RECORDS)
    with pysam.VariantFile(str(path)) as f:
        return list(f)


def test_declared_kinds_from_the_header(tmp_path):
    header = read_header(H.write(tmp_path / "h.bcf", RECORDS))
    for got, expected in zip(kernel.declared_kinds(header, N_KEYS), kinds()):
        assert got.tolist() == expected.tolist()


def test_record_facts_against_htslib(htslib):
    r = scan(RECORDS, base=1000)
    assert (r["n"], r["err"]) == (len(RECORDS), R.OK)
    assert r["consumed"] == sum(len(x) for x in RECORDS)
    offset, chrom, pos, rlen, n_allele, ploidy = (a[: r["n"]].tolist() for a in r["out"])
    starts = np.cumsum([0] + [len(x) for x in RECORDS[:-1]]) + 1000
    assert offset == starts.tolist()
    assert chrom == [["chr1", "chr2"].index(rec.chrom) for rec in htslib]
    assert pos == [rec.start for rec in htslib]
    assert rlen == [rec.rlen for rec in htslib] == [1, 4, 51, 1]
    assert n_allele == [len(rec.alleles) for rec in htslib]
    assert ploidy == [2, 2, 0, 1]  # GT values per sample; 0 without GT


def pysam_stats(htslib, name, format_field):
    """(max values per vector, min, max) from pysam's values."""
    vectors = []
    for rec in htslib:
        if format_field:
            vectors += [s[name] for s in rec.samples.values() if name in s and s[name] is not None]
        elif name in rec.info:
            vectors.append(rec.info[name])
    vectors = [v if isinstance(v, tuple) else (v,) for v in vectors]
    values = [x for v in vectors for x in v if x is not None]
    return max(len(v) for v in vectors), min(values), max(values)


@pytest.mark.parametrize(
    "name,format_field,expected",
    [
        ("XI", False, (2, -5, 70000)),  # int16 300,-5 and int32 70000,. (missing skipped)
        ("DP", False, (1, -127, 5)),  # the lone int8 0x81 is a value (-127) for htslib
        ("AD", True, (2, 3, 1000)),  # end-of-vector and missing skipped
    ],
)
def test_integer_stats(htslib, name, format_field, expected):
    r = scan(RECORDS)
    stats = r["stats"][1 if format_field else 0][K[name]]
    assert tuple(stats.tolist()) == expected
    assert pysam_stats(htslib, name, format_field) == expected


def test_string_and_float_stats():
    info_stats, fmt_stats = scan(RECORDS)["stats"]
    assert info_stats[K["XS"], 0] == 2  # "a,bc": two comma-separated parts
    assert info_stats[K["XF"], 0] == 3  # three floats (values per vector only)
    assert fmt_stats[K["FF"], 0] == 2
    untouched = kernel.new_stats(1)[0].tolist()
    assert info_stats[K["END"]].tolist() == [1, 60, 60]
    assert fmt_stats[K["GT"]].tolist() == untouched  # GT never sizes a dtype


def test_capacity_stops_the_walk():
    r = scan(RECORDS, capacity=2)
    assert (r["n"], r["err"]) == (2, R.OK)
    assert r["consumed"] == len(RECORDS[0]) + len(RECORDS[1])


def test_record_cut_by_the_buffer_end_is_left_for_the_next_batch():
    r = scan(RECORDS, cut=3)
    assert (r["n"], r["err"]) == (len(RECORDS) - 1, R.OK)
    assert r["consumed"] == sum(len(x) for x in RECORDS[:-1])


GOOD = H.record()
REFUSED = {
    # CHROM 2: the header defines two contigs.
    "unknown_contig": (H.record(chrom=2), R.ERR_UNKNOWN_CONTIG, -1, True),
    # Key 11 is in no header line: htslib's "Invalid INFO id" / "Invalid FORMAT id".
    "info_key_not_in_header": (H.record(info=[(N_KEYS, H.ints(I8, [1]))]), R.ERR_UNKNOWN_KEY, N_KEYS, True),
    "format_key_not_in_header": (
        H.record(fmt=[(N_KEYS, H.fmt_ints(I8, [[1], [2]]))]),
        R.ERR_UNKNOWN_KEY,
        N_KEYS,
        True,
    ),
    # Keys the header defines, but not as INFO / FORMAT (PASS is a FILTER, DP an INFO):
    # htslib reads these records; the codec could not decode them, so the scan refuses.
    "filter_key_as_info": (H.record(info=[(K["PASS"], H.ints(I8, [1]))]), R.ERR_UNKNOWN_KEY, K["PASS"], False),
    "info_key_as_format": (
        H.record(fmt=[(K["DP"], H.fmt_ints(I8, [[1], [2]]))]),
        R.ERR_UNKNOWN_KEY,
        K["DP"],
        False,
    ),
    # Floats for an Integer key (pysam reads it; the codec could not).
    "type_mismatch": (H.record(info=[(K["XI"], H.floats([1.5]))]), R.ERR_TYPE_MISMATCH, K["XI"], False),
    # A NULL-typed value with a count: htslib's "Invalid INFO type 0".
    "null_values": (H.record(info=[(K["DP"], H.descriptor(H.BT_NULL, 1))]), R.ERR_NULL_VALUES, K["DP"], True),
    "no_ref": (H.record(alleles=()), R.ERR_NO_REF, -1, True),
    "id_not_a_string": (H.record(id_=H.ints(I8, [1])), R.ERR_ID_TYPE, -1, True),
    # Even a NULL of count 0: htslib's "Invalid ID type 0".
    "id_null": (H.record(id_=H.descriptor(H.BT_NULL, 0)), R.ERR_ID_TYPE, -1, True),
    "format_null_values": (
        H.record(fmt=[(K["AD"], H.descriptor(H.BT_NULL, 1))]),
        R.ERR_NULL_VALUES,
        K["AD"],
        True,
    ),
    "unknown_filter": (H.record(filters=H.ints(I8, [K["DP"]])), R.ERR_UNKNOWN_FILTER, K["DP"], False),
    "negative_pos": (H.record(pos=-5), R.ERR_NEGATIVE_POS, -1, False),
    "samples": (H.record(n_sample=1, fmt=[(K["AD"], H.fmt_ints(I8, [[1]]))]), R.ERR_SAMPLES, -1, False),
    # An INFO vector claiming 5 int16 values where the record holds 2 bytes.
    "truncated_value": (
        H.record(info=[(K["XI"], H.descriptor(I16, 5) + b"\x01\x00")]),
        R.ERR_OVERRUN,
        K["XI"],
        True,
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_are_their_error_codes(case, tmp_path):
    bad, code, key, htslib_refuses = REFUSED[case]
    r = scan([GOOD, bad, GOOD])
    assert (r["n"], r["err"], r["key"]) == (1, code, key)
    assert r["err_pos"] == r["consumed"] == len(GOOD)  # stopped at the bad record
    if htslib_refuses:
        path = H.write(tmp_path / "bad.bcf", [GOOD, bad, GOOD])
        with pytest.raises((OSError, ValueError)), pysam.VariantFile(str(path)) as f:
            for _ in f:
                pass


def test_l_shared_shorter_than_the_fixed_part_is_refused():
    bad = b"\x10\x00\x00\x00\x00\x00\x00\x00" + b"\x00" * 16
    r = scan([GOOD, bad])
    assert (r["n"], r["err"]) == (1, R.ERR_SHORT_SHARED)


def test_rlen_of_2_31_is_replaced_or_refused():
    # Stored rlen 2^31 (negative as int32): htslib computes END - POS = 60 - 9 = 51; with
    # SVLEN or FORMAT/LEN in the header that computation needs them, so the scan refuses.
    rec = H.record(pos=9, rlen=-(2**31), info=[(K["END"], H.ints(I8, [60]))])
    r = scan([rec])
    assert (r["n"], r["err"]) == (1, R.OK) and r["out"][3][0] == 51
    assert scan([rec], rlen_needs_more=True)["err"] == R.ERR_RLEN
