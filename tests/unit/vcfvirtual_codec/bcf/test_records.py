"""BCF record primitives on hand-written bytes, as the BCF 2.2 spec (section 6.3) lays
them out: typed values, record lengths, field lookup and the sentinel values."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from vcfvirtual_codec.bcf import records as R


def arr(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def typed_chars(text: bytes) -> bytes:
    assert len(text) < 15
    return bytes([len(text) << 4 | R.BT_CHAR]) + text


def record(*, n_sample=2, with_info=True, with_gt=True, filter_keys=(0,)) -> bytes:
    """chr index 0, POS 100 (0-based 99), REF A, ALT T, FILTER keys, INFO key 1 = 5
    (int8), FORMAT key 2 = GT int8[2] per sample: 0/1 and 1|1."""
    shared = struct.pack("<iiiI", 0, 99, 1, 0x7F800001)  # CHROM, POS, rlen, QUAL missing
    n_info = 1 if with_info else 0
    n_fmt = 1 if with_gt else 0
    shared += struct.pack("<II", 2 << 16 | n_info, n_fmt << 24 | n_sample)
    shared += typed_chars(b".") + typed_chars(b"A") + typed_chars(b"T")
    shared += bytes([len(filter_keys) << 4 | R.BT_INT8, *filter_keys])
    if with_info:
        shared += b"\x11\x01" + b"\x11\x05"  # key 1 (int8), one int8 value 5
    indiv = b""
    if with_gt:
        calls = [b"\x02\x04", b"\x05\x05"][:n_sample]  # (allele + 1) << 1 | phased
        indiv = b"\x11\x02" + b"\x21" + b"".join(calls)
    return struct.pack("<II", len(shared), len(indiv)) + shared + indiv


# -- typed values --------------------------------------------------------------------


def test_type_sizes_follow_the_spec():
    assert [R.type_size(t) for t in (0, 1, 2, 3, 5, 7)] == [0, 1, 2, 4, 4, 1]
    assert [R.type_size(t) for t in (4, 6, 8, 15)] == [-1] * 4


@pytest.mark.parametrize(
    "data,expected",
    [
        (b"\x11\x05", (R.BT_INT8, 1, 1)),
        (b"\x37abc", (R.BT_CHAR, 3, 1)),
        (b"\x00", (R.BT_NULL, 0, 1)),
        (b"\xf7\x11\x14" + b"x" * 20, (R.BT_CHAR, 20, 3)),  # count 15: the real count follows, int8 20
        (b"\xf1\x12\x2c\x01" + b"\x00" * 300, (R.BT_INT8, 300, 4)),  # count as int16 300
        (b"\xf5\x13\x00\x00\x01\x00", (R.BT_FLOAT, 65536, 6)),  # count as int32
    ],
)
def test_typed_descriptors(data, expected):
    t, n, d = R.typed_descriptor(arr(data), 0, len(data))
    assert (t, n, d) == expected


@pytest.mark.parametrize(
    "data",
    [
        b"\x14",  # type 4 is not a BCF type
        b"\xf1",  # the count's own descriptor is missing
        b"\xf1\x15\x00\x00\x00\x00",  # a count typed float
        b"\xf1\x11\xff",  # a negative count
        b"\xf1\x12\x01",  # an int16 count cut short
    ],
)
def test_malformed_descriptors_give_no_data_start(data):
    assert R.typed_descriptor(arr(data), 0, len(data))[2] == -1


def test_descriptor_at_the_end_gives_no_data_start():
    assert R.typed_descriptor(arr(b"\x11\x05"), 2, 2)[2] == -1


def test_read_int_is_signed_little_endian():
    data = arr(b"\xfe\x34\x12\x00\x80\xff\xff\xff\x7f")
    assert R.read_int(data, 0, R.BT_INT8) == -2
    assert R.read_int(data, 1, R.BT_INT16) == 0x1234
    assert R.read_int(data, 3, R.BT_INT16) == -32768
    assert R.read_int(data, 5, R.BT_INT32) == 0x7FFFFFFF
    assert R.i32(arr(b"\xff\xff\xff\xff"), 0) == -1
    assert R.u32(arr(b"\xff\xff\xff\xff"), 0) == 0xFFFFFFFF


def test_skip_typed_steps_over_the_values_and_refuses_an_overrun():
    data = arr(b"\x32\x01\x00\x02\x00\x03\x00\x11")
    assert R.skip_typed(data, 0, 8) == 7
    assert R.skip_typed(data, 0, 6) == -1


def test_int_sentinels_are_the_spec_table():
    """BCF 2.2 section 6.3.3: missing is the type's smallest value (0x80, 0x8000,
    0x80000000), end-of-vector the next one."""
    assert R.int_sentinels(R.BT_INT8) == (np.int8(np.uint8(0x80)), np.int8(np.uint8(0x81)))
    assert R.int_sentinels(R.BT_INT16) == (np.int16(np.uint16(0x8000)), np.int16(np.uint16(0x8001)))
    assert R.int_sentinels(R.BT_INT32) == (np.int32(np.uint32(0x80000000)), np.int32(np.uint32(0x80000001)))


def test_float_sentinels_are_the_spec_bit_patterns():
    assert np.uint32(R.FLOAT_MISSING_BITS) == 0x7F800001
    assert np.uint32(R.FLOAT_END_BITS) == 0x7F800002
    # Both are NaNs, so they never equal a value.
    bits = np.array([R.FLOAT_MISSING_BITS, R.FLOAT_END_BITS], dtype="<i4")
    assert np.isnan(bits.view("<f4")).all()


# -- records -------------------------------------------------------------------------


def test_record_length_is_eight_plus_l_shared_plus_l_indiv():
    rec = record()
    l_shared, l_indiv = struct.unpack_from("<II", rec)
    assert R.record_length(arr(rec), 0, len(rec)) == 8 + l_shared + l_indiv == len(rec)


def test_record_length_errors():
    rec = record()
    assert R.record_length(arr(rec), 0, len(rec) - 1) == -R.ERR_TRAILING
    assert R.record_length(arr(rec[:7]), 0, 7) == -R.ERR_TRAILING
    short = struct.pack("<II", 23, 0) + b"\x00" * 23
    assert R.record_length(arr(short), 0, len(short)) == -R.ERR_SHORT_SHARED


def test_record_offsets_walk_whole_records_up_to_the_limit():
    one, two = record(), record(with_info=False)
    data = arr(one + two + one)
    offsets, n, err, _ = R.record_offsets(data, 3)
    assert (n, err) == (3, R.OK)
    assert offsets.tolist() == [0, len(one), len(one) + len(two)]
    _, n, err, at = R.record_offsets(data, 2)
    assert (n, err, at) == (2, R.ERR_COUNT, len(one) + len(two))
    _, _, err, at = R.record_offsets(arr(one + one[:-1]), 3)
    assert (err, at) == (R.ERR_TRAILING, len(one))


def test_find_info_and_find_format_locate_fields():
    rec = record()
    data = arr(rec)
    t, n, d, err = R.find_info(data, 0, 1)
    assert (t, n, err) == (R.BT_INT8, 1, R.OK) and data[d] == 5
    t, n, d, err = R.find_format(data, 0, 2)
    assert (t, n, err) == (R.BT_INT8, 2, R.OK)
    assert data[d : d + 4].tobytes() == b"\x02\x04\x05\x05"
    assert R.find_info(data, 0, 7)[2:] == (-1, R.OK)  # absent
    assert R.find_format(data, 0, 7)[2:] == (-1, R.OK)
    assert R.n_sample(data, 0) == 2


def test_filter_start_points_at_the_filter_vector():
    data = arr(record(filter_keys=(0, 3)))
    i, end = R.filter_start(data, 0)
    assert data[i : i + 3].tobytes() == b"\x21\x00\x03"
    assert end == 8 + struct.unpack_from("<I", data.tobytes())[0]
    i, n_info, _ = R.info_start(data, 0)
    assert n_info == 1 and data[i : i + 2].tobytes() == b"\x11\x01"


def test_a_value_running_past_its_record_is_an_overrun():
    rec = bytearray(record())
    l_shared = struct.unpack_from("<I", rec)[0]
    rec[8 + l_shared - 2] = 0x41  # INFO value: four int8 values where one byte remains
    assert R.find_info(arr(bytes(rec)), 0, 1)[3] == R.ERR_OVERRUN


def test_null_typed_values_with_a_count_are_refused_as_htslib_does():
    rec = bytearray(record())
    l_shared = struct.unpack_from("<I", rec)[0]
    rec[8 + l_shared - 2] = 0x10  # INFO value typed NULL, count 1
    assert R.find_info(arr(bytes(rec)), 0, 1)[3] == R.ERR_NULL_VALUES
    rec = bytearray(record())
    rec[8 + l_shared + 2] = 0x20  # GT typed NULL, count 2
    assert R.find_format(arr(bytes(rec)), 0, 2)[3] == R.ERR_NULL_VALUES


def test_error_codes_are_distinct_and_each_has_a_text():
    codes = {name: value for name, value in vars(R).items() if name.startswith("ERR_")}
    assert len(set(codes.values())) == len(codes)
    assert set(R.ERROR_TEXT) == set(codes.values())
    assert R.OK == 0 and R.OK not in R.ERROR_TEXT


def test_compiled_constants_are_the_python_tables():
    """The kernels are compiled with bcf.pxd's constants; an error code read in Python
    must mean what the kernel meant (one number, one meaning)."""
    from vcfvirtual_codec._kernels import records as compiled

    for name, value in compiled.constants().items():
        assert getattr(R, name) == value, name


def test_the_primitives_are_re_exported_on_first_use():
    """The compiled primitives load when first named (the codec's checks need only the
    tables): each is the compiled function, and no other name is made up."""
    from vcfvirtual_codec._kernels import records as compiled

    for name in R._PRIMITIVES:
        assert getattr(R, name) is getattr(compiled, name), name
    with pytest.raises(AttributeError, match="has no attribute 'no_such_primitive'"):
        _ = R.no_such_primitive
