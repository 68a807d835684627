"""The writer's one-pass GT block encode (demux.gt_block_encode) against the functions it
fuses, which are the oracle: the block summary (gt_block_summary), the codec's own decode
of the shifted block to alleles (columns.alleles_block, the codec's genotypes kernel) and
the packing into the fewest bits (columns.packed_block); and, for crafted calls, against
BCF bytes and packed bits written out by hand.

The blocks are random shifted GT segments as the demux writes them (counts, int8 types,
then every value byte minus GT_SHIFT), over palettes of BCF bytes from the common
(alleles 0 and 1) to the rare (missing, end-of-vector, alleles up to 62, bytes no allele
makes), counts 1 to 3, phase bits all set, all clear or mixed, and crafted tables: a
record of another count, an int16 GT record, an absent or empty record, a segment cut
short or running long, no records, no samples. Large blocks put odd bytes before and
after the pass's checks, so that it widens its packing (1 -> 2 -> 4 bits) or gives up
late. Each runs with the 16-byte vectors and with words alone (a host without SSE2).
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


def value_after_an_end(seg: np.ndarray, n: int, width: int) -> bool:
    """Whether some call of a block of one int8 count holds a value after an end-of-vector
    (stored 0x7F), which the codec reads as -2 whatever it is: the one packable block the
    fused pass leaves to the codec's functions."""
    count = int(seg[:4].view("<i4")[0])
    calls = seg[5 * n :].reshape(n * width, count)
    ended = np.logical_or.accumulate(calls == 0x7F, axis=1)
    return bool((ended[:, :-1] & (calls[:, 1:] != 0x7F)).any())


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
            assert packed is not None
            np.testing.assert_array_equal(out[:length], packed)
        else:  # every block the oracle packs is the fused pass's, but for a value after an end
            assert packed is None or value_after_an_end(seg, n, width)
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


# Stored bytes that end a block's 1-bit packing: allele 2 (unphased and phased), missing
# (BCF's 0x00, 0x01 and 0x80), end-of-vector, a byte no allele makes; and the phase bit flipped.
ODD_BYTES = {
    "allele_2": 0x04,
    "allele_2_phased": 0x05,
    "missing": 0xFE,
    "missing_phased": 0xFF,
    "int8_missing": 0x7E,
    "vector_end": 0x7F,
    "no_allele": 0x90,
}
# The block's packing (bits; 0: none) with the odd byte as a first allele, then as a
# second, among calls all phased: a second allele's clear phase bit mixes the phasing; an
# end-of-vector as a first allele is followed by a value (left to the codec's functions); a
# missing value or an end needs 2 bits, allele 2 needs 4.
ODD_BITS = {
    "allele_2": (4, 0),
    "allele_2_phased": (4, 4),
    "missing": (2, 0),
    "missing_phased": (2, 2),
    "int8_missing": (2, 0),
    "vector_end": (0, 2),
    "no_allele": (0, 0),
    "phase": (1, 0),
}


@pytest.mark.parametrize("odd", list(ODD_BITS))
@pytest.mark.parametrize("at", [0, 70_000, 139_999, 279_999, 280_003, 280_010, 280_011])
def test_a_block_of_many_vector_steps(odd, at):
    """A block of 2 records of 70,003 diploid calls (280,012 bytes: 17,500 vectors, checked
    every 64 KB, a word, a 4-byte tail), all phased, with one odd byte: in the first
    vectors, past a check, in the last vectors, in the word, in the tail. The summary and
    the packing are the oracle's wherever the pass widened or stopped packing, at the
    width the odd byte needs (a flipped phase bit of a first allele changes nothing)."""
    rng = np.random.default_rng(at)
    n, width = 2, 70_003
    values = rng.integers(0, 4, size=(n, width, 2), dtype=np.uint8) | np.array([0, 1], np.uint8)
    values = values.reshape(-1)
    values[at] = values[at] ^ 1 if odd == "phase" else ODD_BYTES[odd]
    seg = np.concatenate([np.full(n, 2, "<i4").view(np.uint8), np.ones(n, np.uint8), values])
    bits = ODD_BITS[odd][at % 2]
    assert check(seg, n, width) == (5 * n + 1 + (values.shape[0] * bits + 7) // 8 if bits else 0)


# Odd stored bytes at their places in a block of all-phased diploid calls (even places
# first alleles, odd ones second), and the bits it packs at: the width widening once or
# twice, early or past a check, and the pass giving up late (a byte no width holds,
# mixed phasing, a value after an end).
WIDENINGS = {
    "missing early, allele 2 late": ([(10, 0xFE), (200_000, 0x04)], 4),
    "allele 2 early, missing late": ([(10, 0x04), (200_001, 0xFF)], 4),
    "missing past the first check": ([(100_000, 0xFE)], 2),
    "missing, then an allele of 14 last": ([(10, 0xFE), (279_999, 0x1D)], 0),
    "missing, then a byte no allele makes": ([(10, 0xFE), (150_000, 0x90)], 0),
    "missing, then a clear phase bit": ([(10, 0xFE), (150_001, 0x02)], 0),
    "missing, then an end followed by an allele": ([(10, 0xFE), (200_000, 0x7F)], 0),
    "allele 3, then an end as a second allele": ([(4, 0x06), (200_001, 0x7F)], 4),
}


@pytest.mark.parametrize("case", list(WIDENINGS))
def test_a_block_widened_or_given_up_across_checks(case):
    """A block of 2 records of 70,003 diploid calls (280,012 bytes), all phased, alleles
    0/1, with WIDENINGS' odd bytes: packed as the oracle packs it, at the width expected."""
    places, bits = WIDENINGS[case]
    rng = np.random.default_rng(len(case))
    n, width = 2, 70_003
    values = (rng.integers(0, 4, size=(n, width, 2), dtype=np.uint8) | np.array([0, 1], np.uint8)).reshape(-1)
    for at, byte in places:
        values[at] = byte
    seg = np.concatenate([np.full(n, 2, "<i4").view(np.uint8), np.ones(n, np.uint8), values])
    assert check(seg, n, width) == (5 * n + 1 + (values.shape[0] * bits + 7) // 8 if bits else 0)


def bcf_call(call: str, count: int) -> tuple[list[int], list[int]]:
    """A VCF call (``0|1``, ``./.``, ``1``) as BCF's int8 bytes for a record of ``count``
    values per call, and the alleles htslib reads from it (-1 missing, -2 past its end):
    allele a is (a + 1) << 1 and '.' 0, each after the first plus 1 when phased, then
    end-of-vector (0x81) bytes up to the count."""
    alleles = call.replace("|", "/").split("/")
    phased = "|" in call
    values = [-1 if a == "." else int(a) for a in alleles]
    encoded = [((v + 1) << 1 if v >= 0 else 0) | (phased and i > 0) for i, v in enumerate(values)]
    pad = count - len(values)
    return encoded + [0x81] * pad, values + [-2] * pad


def hand_packed(values: list[int], bits: int) -> bytes:
    """Alleles packed as FLAG_GT_PACKED says, written out bit by bit: code allele + 2
    (1 bit: the allele), value i at bit (i * bits) % 8 of byte (i * bits) // 8."""
    out = bytearray((len(values) * bits + 7) // 8)
    for i, v in enumerate(values):
        code = v if bits == 1 else v + 2
        out[i * bits // 8] |= code << (i * bits % 8)
    return bytes(out)


# (values per call, the calls, the bits the block packs at; 0: left to the codec's functions)
CRAFTED = {
    "unphased missing ./., 0/., ./1": (2, ["0/1", "./.", "0/.", "./1", "1/1"], 2),
    "phased missing .|., 1|., .|0": (2, ["0|1", ".|.", "1|.", ".|0", "1|1"], 2),
    "haploid calls among phased diploid ones": (2, ["0|1", "1", ".", "1|0", "0|0"], 2),
    "haploid calls among unphased diploid ones (they read phased)": (2, ["0/1", "1", "0/0"], 0),
    "triploid with missing": (3, ["0/1/.", "././.", "1/1/0", "./0/1"], 2),
    "diploid calls among triploid ones": (3, ["0/1/1", "1/0", "./."], 2),
    "phased triploid, alleles up to 3": (3, ["0|1|3", "2|.|1", "1|1|0"], 4),
    "multi-allelic with missing": (2, ["0/2", "3/.", "13/1", "./."], 4),
    "an allele of 14": (2, ["0|14", "1|1"], 0),
    "mixed phasing with missing": (2, ["0|1", "./.", "1/1"], 0),
    "haploid records": (1, ["0", "1", "."], 0),
}


@pytest.mark.parametrize("case", list(CRAFTED))
@pytest.mark.parametrize("repeat", [1, 51])
def test_crafted_calls_pack_as_written_out_by_hand(case, repeat):
    """Blocks of 2 records of VCF calls (repeated: 1, or 51 times, which takes vectors,
    words and a tail) written as BCF bytes by hand: packed at the width their alleles
    need, the codes those of the alleles htslib reads, bit by bit; or left to the codec's
    functions. Either way the oracle's (check)."""
    count, calls, bits = CRAFTED[case]
    n = 2
    records = [calls * repeat, (calls[1:] + calls[:1]) * repeat]
    width = len(records[0])
    encoded = [[bcf_call(call, count) for call in row] for row in records]
    values = bytes((byte - cc.GT_SHIFT) & 0xFF for row in encoded for call, _ in row for byte in call)
    alleles = [a for row in encoded for _, call in row for a in call]
    seg = np.concatenate(
        [np.full(n, count, "<i4").view(np.uint8), np.ones(n, np.uint8), np.frombuffer(values, np.uint8)]
    )
    length = check(seg, n, width)
    if not bits:
        assert length == 0
        return
    table = seg[: 5 * n].tobytes()
    for vectors in (True, False):
        out = np.full(seg.shape[0] + 1, 0xAA, np.uint8)
        assert gt_block_encode(seg, n, width, out, vectors)[3] == length
        assert out[:length].tobytes() == table + bytes([bits]) + hand_packed(alleles, bits)


def test_a_value_after_an_end_is_left_to_the_codec():
    """An end-of-vector followed by an allele in its call (no writer makes it; the codec
    reads the allele as -2): not packed, and the oracle packs it (2 bits)."""
    seg = np.concatenate(
        [
            np.full(1, 2, "<i4").view(np.uint8),
            np.ones(1, np.uint8),
            (np.array([0x81, 0x03, 0x02, 0x03]) - 2).astype(np.uint8),
        ]
    )
    assert check(seg, 1, 2) == 0
    assert oracle(seg, 1, 2)[1] is not None


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
