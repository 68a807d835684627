"""The writer's one-pass GT block encode (demux.gt_block_encode) against the functions it
fuses, which are the oracle: the block summary (gt_block_summary), the codec's own decode
of the shifted block to alleles (columns.alleles_block, the codec's genotypes kernel) and
the packing into the fewest bits (columns.packed_block).

The blocks are random shifted GT segments as the demux writes them (counts, int8 types,
then every value byte minus GT_SHIFT), over palettes of BCF bytes from the common
(alleles 0 and 1) to the rare (missing, end-of-vector, alleles up to 62, bytes no allele
makes), counts 1 to 3, phase bits all set, all clear or mixed, and crafted tables: a
record of another count, an int16 GT record, an absent or empty record, a segment cut
short or running long, no records, no samples.
"""

from __future__ import annotations

import platform

import numpy as np
import pytest
from vcfvirtual_codec import columns as cc
from vcfvirtual_codec._kernels.demux import GT_VECTORS, gt_block_encode, gt_block_summary

# BCF int8 GT bytes: allele a is (a + 1) << 1, plus 1 when phased; 0x00/0x01 and 0x80
# missing, 0x81 end-of-vector; 0x82..0xFF no allele (the codec refuses them).
BIALLELIC = np.arange(2, 6, dtype=np.uint8)
PALETTES = {
    "biallelic": BIALLELIC,
    "missing": np.array([*BIALLELIC, 0x00, 0x01, 0x80], np.uint8),
    "vector_end": np.array([*BIALLELIC, 0x81], np.uint8),
    "alleles_to_13": np.arange(2, 30, dtype=np.uint8),
    "alleles_to_62": np.arange(2, 128, dtype=np.uint8),
    "no_allele": np.array([*BIALLELIC, 0x82, 0xC7, 0xFF], np.uint8),
}
TABLES = ["uniform", "other_count", "int16_record", "absent_record", "empty_record", "short", "long"]


def oracle(seg: np.ndarray, n: int, width: int) -> tuple[tuple[int, bool, bool], np.ndarray | None]:
    """The summary, and the packed block the writer stored before the fusion (None: kept
    shifted or as unpacked alleles): packed only where the calls are all phased or none."""
    summary = gt_block_summary(seg, n, width)
    if not (summary[1] or summary[2]):
        return summary, None
    alleles = cc.alleles_block(seg, n, width)
    return summary, None if alleles is None else cc.packed_block(alleles, n, width)


def random_block(rng: np.random.Generator, palette: np.ndarray, table: str, phase: str) -> tuple[np.ndarray, int, int]:
    """A shifted GT segment of random records and samples, and its ``n`` and width."""
    n, width, count = int(rng.integers(1, 6)), int(rng.integers(1, 14)), int(rng.integers(1, 4))
    counts, types, values = [], [], []
    for k in range(n):
        c = count + 1 if table == "other_count" and k == n - 1 else count
        calls = rng.choice(palette, size=(width, c)).astype(np.uint8)
        if c >= 2 and phase != "mixed":
            calls[:, 1] = (calls[:, 1] & 0xFE) | (phase == "set")
        if table == "int16_record" and k == 0:
            # int16 values are stored as they are (the shift is of int8 bytes): the same
            # alleles, their sentinels widened.
            wide = np.where(calls == 0x80, 0x8000, np.where(calls == 0x81, 0x8001, calls.astype(np.int32)))
            counts.append(c), types.append(2), values.append(wide.astype("<u2").view(np.uint8).ravel())
            continue
        if table in ("absent_record", "empty_record") and k == n - 1:
            counts.append(-1 if table == "absent_record" else 0), types.append(1)
            continue
        counts.append(c), types.append(1)
        values.append(((calls.astype(np.int16) - cc.GT_SHIFT) & 0xFF).astype(np.uint8).ravel())
    seg = np.concatenate([np.array(counts, "<i4").view(np.uint8), np.array(types, np.uint8), *values])
    if table == "short":
        seg = seg[: max(5 * n, seg.shape[0] - int(rng.integers(1, 4)))]
    elif table == "long":
        seg = np.concatenate([seg, rng.integers(0, 256, int(rng.integers(1, 4)), np.uint8)])
    return seg, n, width


def check(seg: np.ndarray, n: int, width: int) -> int:
    """The fused kernel's results are the oracle's, with its 16-byte vectors and without
    (a host without SSE2); returns the packed length (0: none)."""
    summary, packed = oracle(seg, n, width)
    lengths = []
    for vectors in (True, False):
        out = np.full(seg.shape[0] + 1, 0xAA, np.uint8)  # no stale zero can pass for a code
        *got, length = gt_block_encode(seg, n, width, out, vectors)
        assert tuple(got) == summary
        if length:
            assert packed is not None and packed[5 * n] == 1
            np.testing.assert_array_equal(out[:length], packed)
        else:  # every block the oracle packs at 1 bit is the fused pass's
            assert packed is None or packed[5 * n] != 1
        lengths.append(length)
    assert lengths[0] == lengths[1]
    return lengths[0]


@pytest.mark.parametrize("palette", list(PALETTES))
@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("phase", ["set", "clear", "mixed"])
def test_fused_encode_is_the_summary_alleles_and_packing(palette, table, phase):
    rng = np.random.default_rng([len(palette), TABLES.index(table), len(phase)])
    packed = sum(bool(check(*random_block(rng, PALETTES[palette], table, phase))) for _ in range(40))
    # check() holds that every block the oracle packs at 1 bit takes the fused pass; the
    # case the fusion is for (biallelic, no missing, phase uniform, a clean table) is met
    # (its blocks of one allele per call carry no phase: never packed). The tail of each
    # block's values (n * width * count bytes, most not a multiple of 8) varies with the
    # random shapes.
    if palette == "biallelic" and table == "uniform" and phase != "mixed":
        assert packed > 0


def test_a_block_of_many_words():
    """A block of 3 records of 1001 diploid calls (374 vectors, 2 words left over, a 6-byte
    tail), the phase bit of one call's second allele the odd one out: in a vector, in a
    word left over, in the tail."""
    rng = np.random.default_rng(5)
    n, width = 3, 1001
    calls = rng.choice(BIALLELIC & 0xFE, size=(n, width, 2)).astype(np.uint8)
    for record, sample in [(0, 0), (1, 500), (2, 990), (2, 1000)]:
        odd = calls.copy()
        odd[record, sample, 1] |= 1
        seg = np.concatenate([np.full(n, 2, "<i4").view(np.uint8), np.ones(n, np.uint8), (odd - cc.GT_SHIFT).ravel()])
        assert gt_block_encode(seg, n, width, np.empty(seg.shape[0] + 1, np.uint8))[1:] == (False, False, 0)
        check(seg, n, width)
        everyone = odd | 1
        seg[5 * n :] = (everyone - cc.GT_SHIFT).ravel()
        assert check(seg, n, width) == 5 * n + 1 + (n * width * 2 + 7) // 8


# Stored bytes that end a block's 1-bit packing: allele 2, missing (0x00 and 0x80 as BCF
# bytes), end-of-vector, a byte no allele makes; and the phase bit flipped.
ODD_BYTES = {"allele_2": 0x04, "missing": 0xFE, "int8_missing": 0x7E, "vector_end": 0x7F, "no_allele": 0x90}


@pytest.mark.parametrize("odd", [*ODD_BYTES, "phase"])
@pytest.mark.parametrize("at", [0, 70_000, 139_999, 279_999, 280_003, 280_010, 280_011])
def test_a_block_of_many_vector_steps(odd, at):
    """A block of 2 records of 70,003 diploid calls (280,012 bytes: 17,500 vectors, checked
    for packing every 4,096, a word, a 4-byte tail), all phased, with one odd byte: in the
    first vectors, past a check, in the last vectors, in the word, in the tail. The summary
    is the oracle's wherever the pass stopped packing, and no block is packed that should
    not be (a flipped phase bit of a first allele changes nothing)."""
    rng = np.random.default_rng(at)
    n, width = 2, 70_003
    values = rng.integers(0, 4, size=(n, width, 2), dtype=np.uint8) | np.array([0, 1], np.uint8)
    values = values.reshape(-1)
    values[at] = values[at] ^ 1 if odd == "phase" else ODD_BYTES[odd]
    seg = np.concatenate([np.full(n, 2, "<i4").view(np.uint8), np.ones(n, np.uint8), values])
    assert check(seg, n, width) == (5 * n + 1 + (values.shape[0] + 7) // 8 if odd == "phase" and at % 2 == 0 else 0)


@pytest.mark.parametrize("n, width", [(0, 4), (2, 0), (-1, 4)])
def test_no_records_or_no_samples_are_the_summary_alone(n, width):
    seg = np.concatenate([np.full(max(n, 0), 2, "<i4").view(np.uint8), np.ones(max(n, 0), np.uint8)])
    assert gt_block_encode(seg, n, width, np.empty(seg.shape[0] + 1, np.uint8)) == (
        *gt_block_summary(seg, n, width),
        0,
    )


def test_a_buffer_too_small_is_refused():
    seg = np.concatenate([np.full(1, 2, "<i4").view(np.uint8), np.ones(1, np.uint8), np.zeros(8, np.uint8)])
    with pytest.raises(ValueError, match="13 bytes for a GT block of 13 bytes"):
        gt_block_encode(seg, 1, 4, np.empty(seg.shape[0], np.uint8))


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="SSE2 is x86-64's")
def test_an_x86_64_build_takes_the_vectors():
    """Every x86-64 has SSE2: the vectors are compiled in (and so tested above)."""
    assert GT_VECTORS
