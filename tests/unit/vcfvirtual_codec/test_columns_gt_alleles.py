"""GT blocks stored as alleles (FLAG_GT_ALLELES): the rewrite is exact, and the codec
refuses what the index never writes.

Exactness is checked over every diploid call BCF's int8 bytes can hold (each of the 130
bytes an int8 GT value may be: alleles 0-62 with either phase bit, missing 0x00/0x01 and
0x80, end-of-vector 0x81, as first and as second value), split into a block whose second
values all carry the phase bit and one where none does: the block decodes through the
codec to the same call_genotype, _mask and _phased stored shifted (as before), as alleles
(:func:`alleles_block`), and as shifted bytes again (:func:`shifted_block`, what an append
joins). A few calls are checked against their values as htslib defines them, written here.
"""

from __future__ import annotations

import numpy as np
import pytest
from numcodecs import Blosc
from vcfvirtual_codec import columns as cc
from vcfvirtual_codec._kernels.demux import gt_block_summary
from vcfvirtual_codec.codec import BCFRecordsCodec
from vcfvirtual_codec.errors import ChunkDecodeError

GT_KEY = 7
BYTES = [*range(0x80), 0x80, 0x81]  # every value an int8 GT byte may hold that htslib reads
KINDS = {"genotype": "call_genotype", "genotype_mask": "call_genotype_mask", "genotype_phased": "call_genotype_phased"}


def every_call(phased: bool) -> np.ndarray:
    """Every (first, second) pair of BYTES whose second value's phase bit is ``phased``."""
    pairs = np.array([(a, b) for a in BYTES for b in BYTES if (b & 1) == phased], np.uint8)
    return pairs


def table(n: int, count: int = 2, type_code: int = 1) -> np.ndarray:
    return np.concatenate([np.full(n, count, "<i4").view(np.uint8), np.full(n, type_code, np.uint8)])


def shifted_segment(calls: np.ndarray) -> np.ndarray:
    """(records, samples, alleles) BCF bytes as the demux stores them: table, bytes minus 2."""
    n = calls.shape[0]
    return np.concatenate(
        [table(n, calls.shape[2]), ((calls.astype(np.int16) - cc.GT_SHIFT) & 0xFF).astype(np.uint8).ravel()]
    )


def codec(
    kind: str, n_samples: int, width: int, ploidy: int, chunk_length: int, records: int, dtype: str = "|i1"
) -> BCFRecordsCodec:
    return BCFRecordsCodec(
        array=KINDS[kind], kind=kind, dtype="|b1" if kind != "genotype" else dtype,
        shape=[n_samples, ploidy] if kind != "genotype_phased" else [n_samples],
        chunk_length=chunk_length, num_records=records, layout="columns", key=GT_KEY, ploidy=ploidy,
        samples_chunk_size=width, compressor="blosc",
    )  # fmt: skip


def sealed(raw: np.ndarray, flags: int, n: int, width: int, block: int = 0, count: int = 0) -> bytes:
    frame = Blosc(cname="zstd", clevel=1, shuffle=Blosc.BITSHUFFLE).encode(raw)
    kind = cc.SEGMENT_KINDS["format"]
    return cc.seal_segment(kind, flags, GT_KEY, n, block, width, raw.shape[0], frame, complete_count=count)


def decoded(codecs: dict[str, BCFRecordsCodec], chunk: bytes) -> dict[str, np.ndarray]:
    out = {}
    for kind, c in codecs.items():
        out[kind] = np.frombuffer(c.decode(chunk), np.dtype(c.spec.dtype)).reshape(c.spec.chunk_shape)
    return out


@pytest.mark.parametrize("phased", [True, False], ids=["all_phased", "none_phased"])
def test_every_call_decodes_the_same_stored_as_alleles_and_shifted_back(phased):
    calls = every_call(phased)
    width = 65
    n = calls.shape[0] // width
    calls = calls[: n * width].reshape(n, width, 2)
    shifted = shifted_segment(calls)
    count, all_phased, none_phased = gt_block_summary(shifted, n, width)
    assert (all_phased, none_phased) == (phased, not phased) and count == 0
    phase_flag = cc.FLAG_GT_ALL_PHASED if phased else cc.FLAG_GT_NONE_PHASED
    codecs = {kind: codec(kind, width, width, 2, n, n) for kind in KINDS}
    want = decoded(codecs, sealed(shifted, cc.FLAG_GT_SHIFT | phase_flag, n, width))
    assert want["genotype_phased"].all() == phased and want["genotype_phased"].any() == phased
    alleles = cc.alleles_block(shifted, n, width)
    assert alleles is not None and alleles.shape == shifted.shape
    got = decoded(codecs, sealed(alleles, cc.FLAG_GT_ALLELES | phase_flag, n, width))
    for kind in KINDS:
        np.testing.assert_array_equal(got[kind], want[kind], err_msg=kind)
    back = cc.shifted_block(alleles, n, width, phased)
    assert gt_block_summary(back, n, width) == (count, all_phased, none_phased)
    again = decoded(codecs, sealed(back, cc.FLAG_GT_SHIFT | phase_flag, n, width))
    for kind in KINDS:
        np.testing.assert_array_equal(again[kind], want[kind], err_msg=kind)


# (first byte, second byte) of a diploid call -> its alleles as htslib reads them (BCF:
# (allele + 1) << 1 | phased; 0 and 0x80 missing; 0x81 the vector's end, after which a
# call holds nothing more).
HAND = {
    (0x02, 0x05): (0, 1),
    (0x06, 0x03): (2, 0),
    (0x00, 0x01): (-1, -1),
    (0x80, 0x81): (-1, -2),
    (0x04, 0x81): (1, -2),
    (0x7F, 0x7F): (62, 62),
    (0x81, 0x81): (-2, -2),
}


def test_alleles_block_holds_the_alleles_htslib_reads():
    calls = np.array([[list(pair) for pair in HAND]], np.uint8)
    alleles = cc.alleles_block(shifted_segment(calls), 1, len(HAND))
    assert alleles is not None
    assert alleles[5:].view(np.int8).reshape(-1, 2).tolist() == [list(v) for v in HAND.values()]
    assert alleles[:5].tolist() == table(1).tolist()  # the table is kept


def test_padded_chunks_of_an_alleles_block():
    """A partial chunk of a narrower last samples block, its calls diploid in a triploid
    array: the alleles padded with the fill, as the shifted block decodes."""
    n, width, n_samples, chunk, ploidy = 5, 3, 7, 8, 3  # blocks of 4: the last is 3 wide
    rng = np.random.default_rng(3)
    calls = ((rng.integers(0, 4, (n, width, 2)) + 1) << 1 | 1).astype(np.uint8)
    calls[1, 2] = (0x00, 0x01)  # a missing call
    shifted = shifted_segment(calls)
    alleles = cc.alleles_block(shifted, n, width)
    assert alleles is not None
    flag = cc.FLAG_GT_ALL_PHASED
    codecs = {kind: codec(kind, n_samples, 4, ploidy, chunk, n) for kind in KINDS}
    want = decoded(codecs, sealed(shifted, cc.FLAG_GT_SHIFT | flag, n, width, block=1))
    got = decoded(codecs, sealed(alleles, cc.FLAG_GT_ALLELES | flag, n, width, block=1))
    for kind in KINDS:
        np.testing.assert_array_equal(got[kind], want[kind], err_msg=kind)
    gt = got["genotype"]
    assert (gt[n:] == -2).all() and (gt[:, width:] == -2).all() and (gt[:n, :width, 2] == -2).all()
    assert gt[1, 2, :2].tolist() == [-1, -1]


def test_an_alleles_block_in_a_wider_array():
    """An int16 call_genotype (another block's records had alleles past int8's): the
    alleles widened, as the shifted block decodes."""
    calls = np.array([[[0x02, 0x05], [0x00, 0x81]], [[0x7C, 0x03], [0x04, 0x01]]], np.uint8)
    shifted = shifted_segment(calls)
    alleles = cc.alleles_block(shifted, 2, 2)
    assert alleles is not None
    c = codec("genotype", 2, 2, 2, 2, 2, dtype="<i2")
    flag = cc.FLAG_GT_ALL_PHASED
    want = decoded({"genotype": c}, sealed(shifted, cc.FLAG_GT_SHIFT | flag, 2, 2))["genotype"]
    got = decoded({"genotype": c}, sealed(alleles, cc.FLAG_GT_ALLELES | flag, 2, 2))["genotype"]
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, want)
    assert got.tolist() == [[[0, 1], [-1, -2]], [[61, 0], [1, -1]]]


def test_blocks_that_cannot_be_alleles_stay_shifted():
    calls = np.full((2, 3, 2), 0x03, np.uint8)
    mixed_counts = shifted_segment(calls)
    mixed_counts[0:4] = np.array([1], "<i4").view(np.uint8)  # record 0 claims count 1
    assert cc.alleles_block(mixed_counts, 2, 3) is None
    wide = shifted_segment(calls)
    wide[8] = 2  # record 0 of type int16
    assert cc.alleles_block(wide, 2, 3) is None
    negative = shifted_segment(np.full((2, 3, 2), 0x90, np.uint8))  # no allele's byte
    assert cc.alleles_block(negative, 2, 3) is None


def good_alleles(n: int = 2, width: int = 3) -> np.ndarray:
    alleles = cc.alleles_block(shifted_segment(np.full((n, width, 2), 0x03, np.uint8)), n, width)
    assert alleles is not None
    return alleles


def crafted(kind: str) -> list[tuple[str, bytes]]:
    """Alleles blocks the index never writes, each sealed with a right CRC32."""
    raw = good_alleles()
    int16 = raw.copy()
    int16[8] = 2
    counts = raw.copy()
    counts[4:8] = np.array([3], "<i4").view(np.uint8)
    short = raw[:-2].copy()
    allele, all_p, none_p, shift = cc.FLAG_GT_ALLELES, cc.FLAG_GT_ALL_PHASED, cc.FLAG_GT_NONE_PHASED, cc.FLAG_GT_SHIFT
    head = cc.PREAMBLE_HEAD.pack(b"VVS2", cc.SEGMENT_KINDS["format"], allele | all_p, 0, GT_KEY, 2, 0, 3, raw.shape[0])
    frame = Blosc().encode(raw)
    old_magic = head + cc.segment_crc(head, frame).to_bytes(4, "little") + frame
    return [
        ("with the shift flag", sealed(raw, allele | all_p | shift, 2, 3)),
        ("without a phasing", sealed(raw, allele, 2, 3)),
        ("with both phasings", sealed(raw, allele | all_p | none_p, 2, 3)),
        ("in a VVS2 segment", old_magic),
        ("of int16 type", sealed(int16, allele | all_p, 2, 3)),
        ("of two counts", sealed(counts, allele | all_p, 2, 3)),
        ("shorter than its counts", sealed(short, allele | none_p, 2, 3)),
    ]


@pytest.mark.parametrize("kind", ["genotype", "genotype_mask"])
def test_crafted_alleles_blocks_are_refused(kind):
    c = codec(kind, 3, 3, 2, 2, 2)
    for what, chunk in crafted(kind):
        with pytest.raises(ChunkDecodeError, match="call_genotype"):
            c.decode(chunk)
            pytest.fail(f"an alleles block {what} was read")


def test_shifted_block_refuses_a_table_of_another_kind():
    raw = good_alleles()
    raw[8] = 3  # int32
    with pytest.raises(ValueError, match="int8"):
        cc.shifted_block(raw, 2, 3, True)
