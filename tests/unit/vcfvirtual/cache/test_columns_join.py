"""Joining a stored partial chunk's segments to the records that complete it (--append):
segments built here by hand in the format the codec documents, the joined bytes written
out by hand too."""

from __future__ import annotations

import numpy as np
import pytest
from numcodecs import Zstd
from vcfvirtual_codec import columns as codec_columns

from vcfvirtual.cache.columns_join import StoredSegment, join_payloads, payload_of
from vcfvirtual.errors import StaleCacheError

KIND = codec_columns.SEGMENT_KINDS


def _i32(*values: int) -> bytes:
    return np.array(values, "<i4").tobytes()


def _u8(*values: int) -> bytes:
    return bytes(values)


def _join(kind: str, first: bytes, n1: int, second: bytes, n2: int) -> bytes:
    a, b = np.frombuffer(first, np.uint8), np.frombuffer(second, np.uint8)
    return join_payloads(KIND[kind], a, n1, b, n2).tobytes()


def test_fixed_width_columns_concatenate():
    assert _join("position", _i32(99, 199), 2, _i32(5), 1) == _i32(99, 199, 5)


def test_typed_columns_join_counts_then_types_then_values():
    # Record 1: two int8 values; record 2: absent (count -1, type 0); then one int16 value.
    first = _i32(2, -1) + _u8(1, 0) + _u8(7, 8)
    second = _i32(1) + _u8(2) + np.array([300], "<i2").tobytes()
    expected = _i32(2, -1, 1) + _u8(1, 0, 2) + _u8(7, 8) + np.array([300], "<i2").tobytes()
    assert _join("info", first, 2, second, 1) == expected


def test_alleles_join_counts_then_lengths_then_bytes():
    first = _i32(2) + _i32(1, 1) + b"AT"  # REF A, ALT T
    second = _i32(3, 1) + _i32(2, 1, 1, 1) + b"ACGC"  # AC > G,C ; then a lone C
    expected = _i32(2, 3, 1) + _i32(1, 1, 2, 1, 1, 1) + b"AT" + b"ACGC"
    assert _join("alleles", first, 1, second, 2) == expected


def test_a_segment_shorter_than_its_records_is_refused():
    with pytest.raises(ValueError, match="holds"):
        _join("info", _i32(1), 2, _i32(1) + _u8(1) + _u8(3), 1)


def _stored(payload: bytes, records: int, **changes) -> tuple[bytes, StoredSegment]:
    frame = Zstd(level=1).encode(payload)
    data = codec_columns.seal_segment(KIND["position"], 0, -1, records, 0, 1, len(payload), frame)
    segment = StoredSegment("position", 0, "part-000000", 40, len(data), KIND["position"], -1, 1, False, "zstd")
    for name, value in changes.items():
        segment = StoredSegment(**{**segment.__dict__, name: value})
    return data, segment


def test_a_stored_segment_is_read_back_checked():
    data, segment = _stored(_i32(10, 20, 30), 3)
    assert payload_of(data, segment, 3).tobytes() == _i32(10, 20, 30)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC32"),
        (lambda d: d, "preamble"),  # read for a chunk of 2 records: the preamble says 3
    ],
)
def test_a_changed_segment_is_refused_as_stale(damage, problem):
    data, segment = _stored(_i32(10, 20, 30), 3)
    records = 2 if problem == "preamble" else 3
    with pytest.raises(StaleCacheError, match=problem):
        payload_of(damage(data), segment, records)


def test_a_segment_of_another_kind_is_refused():
    data, segment = _stored(_i32(1), 1, kind=KIND["contig"])
    with pytest.raises(StaleCacheError, match="preamble"):
        payload_of(data, segment, 1)


def test_a_preamble_claiming_more_than_its_frame_can_hold_is_refused_before_allocating():
    """A segment made to pass its CRC32 (sealed as the index seals one) whose preamble
    claims 2^40 bytes from a few compressed ones: refused, nothing of that size made."""
    frame = Zstd(level=1).encode(_i32(1, 2, 3))
    data = codec_columns.seal_segment(KIND["position"], 0, -1, 3, 0, 1, 1 << 40, frame)
    segment = StoredSegment("position", 0, "part-000000", 0, len(data), KIND["position"], -1, 1, False, "zstd")
    with pytest.raises(StaleCacheError, match="refusing to allocate"):
        payload_of(data, segment, 3)


def test_a_preamble_length_other_than_the_frames_is_refused():
    frame = Zstd(level=1).encode(_i32(1, 2, 3))
    data = codec_columns.seal_segment(KIND["position"], 0, -1, 3, 0, 1, 8, frame)  # the frame holds 12
    segment = StoredSegment("position", 0, "part-000000", 0, len(data), KIND["position"], -1, 1, False, "zstd")
    with pytest.raises(StaleCacheError, match="frame declares 12 bytes, its preamble 8"):
        payload_of(data, segment, 3)


def _gt_block(values: bytes, flags: int, types: bytes = b"\x01\x01") -> tuple[bytes, StoredSegment]:
    """A GT block of 2 records of 2 samples (counts 2), sealed as the index seals it."""
    from numcodecs import Blosc

    raw = _i32(2, 2) + types + values
    frame = Blosc().encode(np.frombuffer(raw, np.uint8))
    data = codec_columns.seal_segment(KIND["format"], flags, 5, 2, 0, 2, len(raw), frame)
    return data, StoredSegment("format/GT", 0, "part-000000", 0, len(data), KIND["format"], 5, 2, True, "blosc")


def test_an_alleles_block_is_read_back_as_shifted_bcf_bytes():
    """A stored GT block of alleles (all phased) comes back as BCF's bytes minus 2, written
    out by hand: allele a is (a + 1) << 1 | 1 after a call's first, -1 missing (0), -2 the
    vector's end (0x81)."""
    alleles = bytes(np.array([0, 1, -1, -2, 2, 2, 1, -1], np.int8).view(np.uint8))
    flags = codec_columns.FLAG_GT_ALLELES | codec_columns.FLAG_GT_ALL_PHASED
    data, segment = _gt_block(alleles, flags)
    bcf = [0x02, 0x05, 0x00, 0x81, 0x06, 0x07, 0x04, 0x01]
    want = _i32(2, 2) + _u8(1, 1) + bytes((b - 2) % 256 for b in bcf)
    assert payload_of(data, segment, 2).tobytes() == want


@pytest.mark.parametrize(
    "flags,types,problem",
    [
        (codec_columns.FLAG_GT_ALLELES, b"\x01\x01", "flags 32 are not what the index writes"),
        (
            codec_columns.FLAG_GT_ALLELES | codec_columns.FLAG_GT_SHIFT | codec_columns.FLAG_GT_NONE_PHASED,
            b"\x01\x01",
            "are not what the index writes",
        ),
        (codec_columns.FLAG_GT_ALLELES | codec_columns.FLAG_GT_NONE_PHASED, b"\x01\x02", "int8"),
    ],
    ids=["no-phasing", "shifted-too", "int16-record"],
)
def test_an_alleles_block_the_index_never_writes_is_stale(flags, types, problem):
    data, segment = _gt_block(bytes(8), flags, types)
    with pytest.raises(StaleCacheError, match=problem):
        payload_of(data, segment, 2)


def _packed(values: list[int], bits: int) -> bytes:
    """The bits byte, then values packed ``bits`` bits each from each byte's lowest bit
    (the allele itself at 1 bit, the allele plus 2 wider), written out here by numpy."""
    codes = np.array(values) + (0 if bits == 1 else 2)
    planes = ((codes[:, None] >> np.arange(bits)) & 1).astype(np.uint8).ravel()
    return bytes([bits]) + np.packbits(planes, bitorder="little").tobytes()


@pytest.mark.parametrize(
    "bits,alleles,bcf",
    [
        (2, [0, 1, -1, -2, 1, 1, 1, -1], [0x02, 0x05, 0x00, 0x81, 0x04, 0x05, 0x04, 0x01]),
        (4, [0, 1, -1, -2, 2, 2, 13, -1], [0x02, 0x05, 0x00, 0x81, 0x06, 0x07, 0x1C, 0x01]),
    ],
)
def test_a_packed_alleles_block_is_read_back_as_shifted_bcf_bytes(bits, alleles, bcf):
    """A stored GT block of alleles packed into bits (all phased) comes back as BCF's
    bytes minus 2, written out by hand as for an unpacked block."""
    flags = codec_columns.FLAG_GT_ALLELES | codec_columns.FLAG_GT_PACKED | codec_columns.FLAG_GT_ALL_PHASED
    data, segment = _gt_block(_packed(alleles, bits), flags)
    want = _i32(2, 2) + _u8(1, 1) + bytes((b - 2) % 256 for b in bcf)
    assert payload_of(data, segment, 2).tobytes() == want


def test_a_one_bit_block_is_read_back_unphased():
    flags = codec_columns.FLAG_GT_ALLELES | codec_columns.FLAG_GT_PACKED | codec_columns.FLAG_GT_NONE_PHASED
    data, segment = _gt_block(_packed([0, 1, 1, 1, 0, 0, 1, 0], 1), flags)
    bcf = [0x02, 0x04, 0x04, 0x04, 0x02, 0x02, 0x04, 0x02]
    want = _i32(2, 2) + _u8(1, 1) + bytes((b - 2) % 256 for b in bcf)
    assert payload_of(data, segment, 2).tobytes() == want


@pytest.mark.parametrize(
    "flags,values,problem",
    [
        (codec_columns.FLAG_GT_PACKED | codec_columns.FLAG_GT_ALL_PHASED, _packed([0] * 8, 1), "shift flag is not"),
        (
            codec_columns.FLAG_GT_ALLELES | codec_columns.FLAG_GT_PACKED | codec_columns.FLAG_GT_ALL_PHASED,
            b"\x03" + bytes(3),
            "bits per value are 3",
        ),
        (
            codec_columns.FLAG_GT_ALLELES | codec_columns.FLAG_GT_PACKED | codec_columns.FLAG_GT_ALL_PHASED,
            _packed([0] * 8, 1) + b"\x00",
            "are not 2 records",
        ),
    ],
    ids=["packed-not-alleles", "bits-3", "a-byte-long"],
)
def test_a_packed_block_the_index_never_writes_is_stale(flags, values, problem):
    data, segment = _gt_block(values, flags)
    with pytest.raises(StaleCacheError, match=problem):
        payload_of(data, segment, 2)


def _sealed(kind: str, flags: int, key: int, records: int, payload: bytes, name: str) -> tuple[bytes, StoredSegment]:
    """A segment of one samples block as the index seals it (Zstd), and the plan for it."""
    data = codec_columns.seal_segment(
        KIND[kind], flags, key, records, 0, 1, len(payload), Zstd(level=1).encode(payload)
    )
    return data, StoredSegment(name, 0, "part-000000", 0, len(data), KIND[kind], key, 1, False, "zstd")


def test_stored_position_deltas_are_read_back_summed():
    """Positions 99, 104, 2 stored as their differences (99, 5, -98 mod 2^32) in byte
    planes, written out by hand: byte k of record i at k * 3 + i."""
    steps = [99, 5, (2 - 104) % (1 << 32)]
    planes = bytes((step >> (8 * k)) & 0xFF for k in range(4) for step in steps)
    data, segment = _sealed("position", codec_columns.FLAG_POSITION_DELTA, -1, 3, planes, "position")
    assert payload_of(data, segment, 3).tobytes() == _i32(99, 104, 2)


def test_a_stored_info_rearrangement_that_lies_is_stale_naming_it():
    """An INFO segment flagged as rearranged whose bytes stop short of the layout (types,
    counts plus one in 4 planes, value bytes: 2 records of int8 5 and int16 300 written out
    by hand, less the last byte): stale, the transform named."""
    rearranged = _u8(1, 2) + _u8(2, 2) + bytes(6) + _u8(5, 0x2C, 0x01)
    data, segment = _sealed("info", codec_columns.FLAG_INFO_PLANES, 3, 2, rearranged[:-1], "info/DP")
    with pytest.raises(StaleCacheError, match=r"its values cannot be put back \(INFO planes: record"):
        payload_of(data, segment, 2)
    data, segment = _sealed("info", codec_columns.FLAG_INFO_PLANES, 3, 2, rearranged, "info/DP")
    assert payload_of(data, segment, 2).tobytes() == _i32(1, 1) + _u8(1, 2) + _u8(5) + _u8(0x2C, 0x01)
