"""GT alleles blocks packed into bits (FLAG_GT_PACKED): the kernels pack and unpack as the
format says, a packed block decodes as the alleles block it packs, and the codec refuses
packed blocks the index never writes with a typed error.

The packing's oracle is numpy, written here: ``np.packbits(bitorder="little")`` of each
value's code bits, lowest first (value i at bit (i * bits) % 8 of byte (i * bits) // 8;
a 1-bit code is the allele, a wider one the allele plus 2). The decode's oracle is the
same block's decode stored shifted, as BCF's bytes (tests of test_columns_gt_alleles.py
hold that against htslib's values).
"""

from __future__ import annotations

import numpy as np
import pytest
from vcfvirtual_codec import columns as cc
from vcfvirtual_codec._kernels import gt_bits
from vcfvirtual_codec.errors import ChunkDecodeError

from .test_columns_gt_alleles import KINDS, codec, decoded, sealed, shifted_segment

RANGES = {1: (0, 1), 2: (-2, 1), 4: (-2, 13)}


def numpy_packed(values: np.ndarray, bits: int) -> np.ndarray:
    """The format's packing, by numpy: each value's code as ``bits`` bits, lowest first."""
    codes = values.astype(np.int16) + (0 if bits == 1 else 2)
    assert ((codes >= 0) & (codes < 1 << bits)).all()
    planes = (codes[:, None] >> np.arange(bits)) & 1
    return np.packbits(planes.astype(np.uint8).ravel(), bitorder="little")


def fewest_bits(values: np.ndarray) -> int:
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    return next((bits for bits, (a, b) in RANGES.items() if a <= lo and hi <= b), 0)


@pytest.mark.parametrize("bits", [1, 2, 4])
@pytest.mark.parametrize("length", range(18))
def test_pack_and_unpack_as_numpy_packs(bits, length):
    rng = np.random.default_rng(length * 10 + bits)
    lo, hi = RANGES[bits]
    for _ in range(5):
        values = rng.integers(lo, hi + 1, length).astype(np.int8)
        want = numpy_packed(values, bits)
        assert np.packbits(values.astype(np.uint8), bitorder="little").tolist() == want.tolist() or bits != 1
        assert gt_bits.packed_size(length, bits) == want.shape[0]
        packed = np.full(want.shape[0], 0xFF, np.uint8)  # the spare bits must come out 0
        gt_bits.pack(values.view(np.uint8), bits, packed)
        assert packed.tolist() == want.tolist()
        back = np.empty(length, np.int8)
        gt_bits.unpack(packed, bits, back)
        assert back.tolist() == values.tolist()
        if length:
            assert_packed_fewest(values)


def assert_packed_fewest(values: np.ndarray) -> None:
    """pack_fewest (the writer's one pass) picks the fewest bits and packs as numpy does."""
    want_bits = fewest_bits(values)
    out = np.full(gt_bits.packed_size(values.shape[0], 4) + 3, 0xFF, np.uint8)
    bits = gt_bits.pack_fewest(values.view(np.uint8), out)
    assert bits == want_bits
    if bits:
        want = numpy_packed(values, bits)
        assert out[: want.shape[0]].tolist() == want.tolist()


def test_pack_fewest_at_each_edge():
    for values, bits in [([0, 1], 1), ([0, -1], 2), ([-2, 1], 2), ([0, 2], 4), ([13, -2], 4), ([14], 0), ([-3], 0)]:
        v = np.array(values * 9, np.int8)  # past one word
        out = np.empty(gt_bits.packed_size(v.shape[0], 4), np.uint8)
        assert gt_bits.pack_fewest(v.view(np.uint8), out) == bits == fewest_bits(v), values
        for length in (1, 7, 8, 9, 17, 18):  # the edge value in the 8-value words and in the tail
            assert_packed_fewest(v[:length] if length < 18 else v)
            assert_packed_fewest(v[::-1][:length].copy())


def test_unpack_ignores_the_spare_bits():
    packed = np.array([0b1111_0101], np.uint8)  # 5 values of 1 bit: 1, 0, 1, 0, 1 (then 3 spare)
    out = np.empty(5, np.int8)
    gt_bits.unpack(packed, 1, out)
    assert out.tolist() == [1, 0, 1, 0, 1]
    out = np.empty(1, np.int8)
    gt_bits.unpack(np.array([0xF3], np.uint8), 4, out)  # code 3: allele 1; the high nibble spare
    assert out.tolist() == [1]


def test_pack_and_unpack_refuse_sizes_and_widths_not_the_format():
    values = np.zeros(9, np.uint8)
    with pytest.raises(ValueError, match="bits per value 3"):
        gt_bits.pack(values, 3, np.empty(4, np.uint8))
    with pytest.raises(ValueError, match="exactly 9 values"):
        gt_bits.pack(values, 1, np.empty(1, np.uint8))
    with pytest.raises(ValueError, match="not 9 values of 2 bits"):
        gt_bits.unpack(np.empty(2, np.uint8), 2, np.empty(9, np.int8))
    with pytest.raises(ValueError, match="bits per value 8"):
        gt_bits.unpack(np.empty(9, np.uint8), 8, np.empty(9, np.int8))
    with pytest.raises(ValueError, match="up to 4 bits"):
        gt_bits.pack_fewest(values, np.empty(4, np.uint8))


def bcf_bytes(alleles: np.ndarray, phased: bool) -> np.ndarray:
    """Diploid alleles (-1 missing, -2 past the call) as BCF's GT bytes, by the spec."""
    a = alleles.astype(np.int16)
    out = np.where(a >= -1, (a + 1) << 1, 0x81)
    if phased:
        out[..., 1:] |= 1
    return out.astype(np.uint8)


def calls_of(bits: int, n: int, width: int, seed: int) -> np.ndarray:
    """Diploid calls whose alleles need ``bits`` bits (-2 only as a second allele)."""
    rng = np.random.default_rng(seed)
    if bits == 1:
        return rng.integers(0, 2, (n, width, 2)).astype(np.int8)
    calls = rng.integers(-1, 2 if bits == 2 else 14, (n, width, 2)).astype(np.int8)
    calls[0, 0] = (-1, -2)  # a haploid-in-diploid call, its first allele missing
    calls[-1, -1] = (1 if bits == 2 else 13, -1)
    return calls


@pytest.mark.parametrize("bits", [1, 2, 4])
@pytest.mark.parametrize("phased", [True, False], ids=["all_phased", "none_phased"])
@pytest.mark.parametrize(
    "layout",
    [(9, 5, 5, 5, 9, 2, "|i1"), (5, 3, 7, 4, 8, 3, "|i1"), (4, 3, 3, 3, 4, 2, "<i2")],
    ids=["full_chunk", "partial_narrow_triploid", "int16"],
)
def test_a_packed_block_decodes_as_its_bcf_bytes(bits, phased, layout):
    """(records, block width, samples, samples block size, chunk length, ploidy, dtype): a
    full chunk unpacked
    in place, a partial chunk of a narrower last block in a triploid array padded, an
    int16 call_genotype widened; each kind as the block's BCF bytes decode."""
    n, width, n_samples, size, chunk, ploidy, dtype = layout
    block = 0 if width == n_samples else 1
    shifted = shifted_segment(bcf_bytes(calls_of(bits, n, width, seed=bits), phased))
    alleles = cc.alleles_block(shifted, n, width)
    assert alleles is not None
    packed = cc.packed_block(alleles, n, width)
    assert packed is not None and packed[5 * n] == bits
    assert packed.shape[0] == 5 * n + 1 + -(-n * width * 2 * bits // 8)
    assert cc.unpacked_block(packed, n, width).tolist() == alleles.tolist()
    flag = cc.FLAG_GT_ALL_PHASED if phased else cc.FLAG_GT_NONE_PHASED
    codecs = {
        kind: codec(kind, n_samples, size, ploidy, chunk, n, dtype=dtype if kind == "genotype" else "|i1")
        for kind in KINDS
    }
    want = decoded(codecs, sealed(shifted, cc.FLAG_GT_SHIFT | flag, n, width, block=block))
    got = decoded(codecs, sealed(packed, cc.FLAG_GT_ALLELES | cc.FLAG_GT_PACKED | flag, n, width, block=block))
    for kind in KINDS:
        assert got[kind].dtype == want[kind].dtype
        np.testing.assert_array_equal(got[kind], want[kind], err_msg=kind)


def test_alleles_past_thirteen_stay_unpacked():
    calls = np.zeros((2, 3, 2), np.int8)
    calls[1, 2, 0] = 14
    alleles = cc.alleles_block(shifted_segment(bcf_bytes(calls, True)), 2, 3)
    assert alleles is not None and cc.packed_block(alleles, 2, 3) is None


def packed_of(bits: int = 1, n: int = 2, width: int = 3) -> np.ndarray:
    alleles = cc.alleles_block(shifted_segment(bcf_bytes(calls_of(bits, n, width, seed=1), True)), n, width)
    assert alleles is not None
    packed = cc.packed_block(alleles, n, width)
    assert packed is not None and packed[5 * n] == bits
    return packed


def crafted() -> list[tuple[str, bytes, str]]:
    """Packed blocks the index never writes, each sealed with a right CRC32, and what the
    refusal names."""
    allele, packed, phase = cc.FLAG_GT_ALLELES, cc.FLAG_GT_PACKED, cc.FLAG_GT_ALL_PHASED
    raw = packed_of()
    cases = []
    for bits in (0, 3, 8):
        other = raw.copy()
        other[10] = bits
        cases.append((f"bits {bits}", sealed(other, allele | packed | phase, 2, 3), f"bits per value are {bits}"))
    longer = np.concatenate([raw, [0]]).astype(np.uint8)
    cases += [
        ("a byte longer", sealed(longer, allele | packed | phase, 2, 3), "packed alleles"),
        ("a byte shorter", sealed(raw[:-1].copy(), allele | packed | phase, 2, 3), "packed alleles"),
        ("packed without alleles", sealed(raw, packed | phase, 2, 3), "an alleles block's only"),
        ("packed and shifted", sealed(raw, allele | packed | phase | cc.FLAG_GT_SHIFT, 2, 3), "never shifted"),
        ("packed without a phasing", sealed(raw, allele | packed, 2, 3), "all phased or none"),
        ("a flag of a newer writer", sealed(raw, allele | packed | phase | 128, 2, 3), "newer vcfvirtual"),
    ]
    int16 = raw.copy()
    int16[8] = 2
    cases.append(("of int16 type", sealed(int16, allele | packed | phase, 2, 3), "int8"))
    return cases


@pytest.mark.parametrize("kind", ["genotype", "genotype_mask"])
def test_crafted_packed_blocks_are_refused(kind):
    c = codec(kind, 3, 3, 2, 2, 2)
    for what, chunk, problem in crafted():
        with pytest.raises(ChunkDecodeError, match="call_genotype") as e:
            c.decode(chunk)
            pytest.fail(f"a packed block {what} was read")
        assert problem in str(e.value), (what, str(e.value))


def test_a_longer_block_of_another_width_is_refused_too():
    """A 2-bit block's bytes under a bits byte of 1: its length is a 1-bit block's of no
    count, so the claims check or the table refuses it."""
    raw = packed_of(bits=2, n=4, width=4)
    raw[20] = 1
    chunk = sealed(raw, cc.FLAG_GT_ALLELES | cc.FLAG_GT_PACKED | cc.FLAG_GT_ALL_PHASED, 4, 4)
    with pytest.raises(ChunkDecodeError, match="packed alleles"):
        codec("genotype", 4, 4, 2, 4, 4).decode(chunk)


def test_a_packed_block_no_count_fits_is_refused_whatever_the_ploidy():
    """A packed block of no values (its table and bits byte alone) in an array whose
    crafted configuration claims a ploidy of 2^31 - 1: the count the length would need is
    solved for, not tried count by count, so it is refused at once."""
    raw = packed_of()[: 5 * 2 + 1]
    chunk = sealed(raw, cc.FLAG_GT_ALLELES | cc.FLAG_GT_PACKED | cc.FLAG_GT_ALL_PHASED, 2, 3)
    with pytest.raises(ChunkDecodeError, match="packed alleles of two or more values"):
        codec("genotype", 3, 3, 2**31 - 1, 2, 2).decode(chunk)


def test_unpacked_block_refuses_what_is_not_one():
    raw = packed_of()
    raw[10] = 5
    with pytest.raises(ValueError, match="bits per value are 5"):
        cc.unpacked_block(raw, 2, 3)
    with pytest.raises(ValueError, match="are not 2 records"):
        cc.unpacked_block(packed_of()[:-1], 2, 3)
