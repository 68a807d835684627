"""GT alleles blocks packed into 1, 2 or 4 bits a value (FLAG_GT_PACKED, issue 24): an
alleles block whose values are all 0/1 is stored 1 bit a value, -2..1 (missing calls,
haploid calls in diploid records) 2 bits, -2..13 4 bits; one with an allele of 14 or more
stays int8 alleles, and a block of mixed phasing stays shifted BCF bytes.

The oracle is pysam (htslib) reading the same hand-written VCF, and bio2zarr's store of it,
for call_genotype, call_genotype_mask and call_genotype_phased read through the codec. Each
block's flags and bits byte are read from the cache (its frame decompressed by numcodecs
here), so that the comparison cannot pass with no block of a width. Appending records to a
store whose last partial chunk's blocks are packed reads as bio2zarr's store of the whole.
Blocks of 2,000 samples (the writer's one pass over them takes its vectors and crosses its
64 KB check) with missing calls, haploid calls, phased, unphased and multi-allelic read as
pysam and bio2zarr read them, each stored at the width its calls need.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from numcodecs import Blosc

import vcfvirtual

from .. import bcfdata
from ..columns_reader import codec_versions
from ..conftest import bio2zarr_convert, chunk_bytes
from .test_append import append, cut
from .test_gt_alleles_blocks import (
    ALL_PHASED,
    ALLELES,
    DP_HEADER,
    PREAMBLE,
    SAMPLES,
    assert_gt_as_oracles,
    index,
    random_cohort,
    record,
)

PACKED = 64
ALT15 = "C,G,T,AC,AG,AT,CA,CC,CG,CT,GA,GC,GG,GT,TA"  # alleles 0..15

# (chunk of 4 records) -> what each of its two samples blocks (S0-S2, S3-S5) must be stored as.
RECORDS = [
    # chunk 0: all phased, alleles 0/1 only -> 1 bit, both blocks.
    record(100, "C", ["0|1", "1|1", "0|0", "1|0", "0|0", "1|1"]),
    record(110, "C", ["1|0", "0|1", "1|1", "0|0", "0|1", "1|0"]),
    record(120, "C", ["0|0", "0|0", "1|0", "1|1", "1|1", "0|1"]),
    record(130, "C", ["1|1", "1|0", "0|1", "0|1", "1|0", "0|0"]),
    # chunk 1: none phased; block 0 missing alleles -> 2 bits; block 1 0/1 -> 1 bit.
    record(200, "C", ["0/1", "./.", "1/1", "0/0", "1/1", "0/1"]),
    record(210, "C", ["./1", "0/.", "1/1", "1/0", "0/1", "0/0"]),
    record(220, "C", ["0/0", "1/1", "0/1", "1/1", "0/0", "1/1"]),
    record(230, "C", ["1/1", "0/0", "1/0", "0/0", "0/1", "0/1"]),
    # chunk 2: all phased; block 0 haploid calls in diploid records (-2) -> 2 bits; block 1
    # alleles up to 13 and a missing one -> 4 bits.
    record(300, ALT15, ["1", "0|1", ".", "13|0", "1|12", "0|0"]),
    record(310, ALT15, ["0|0", "0", "1|1", "1|0", ".|13", "2|11"]),
    record(320, ALT15, ["1|0", "1|1", "0|0", "3|4", "5|6", "7|8"]),
    record(330, ALT15, [".|.", "0|1", "1", "9|10", "0|1", "1|0"]),
    # chunk 3: block 0 an allele of 14 (phased) -> int8 alleles; block 1 mixed -> shifted.
    record(400, ALT15, ["0|14", "1|0", "0|1", "0|1", "1/1", "0|1"]),
    record(410, ALT15, ["0|0", "1|0", "0|1", "0|1", "1|0", "0|0"]),
    record(420, ALT15, ["0|0", "1|0", "0|1", "0/1", "1/0", "0/0"]),
    record(430, ALT15, ["0|0", "1|0", "15|1", "0|1", "1|0", "0|0"]),
    # chunk 4 (partial): none phased, 0/1 -> 1 bit, padded to the chunk.
    record(500, "C", ["0/0", "1/1", "0/1", "1/0", "0/0", "1/1"]),
    record(510, "C", ["0/1", "1/1", "0/0", "1/1", "0/1", "1/0"]),
]
EXPECTED = {(0, 0): 1, (0, 1): 1, (1, 0): 2, (1, 1): 1, (2, 0): 2, (2, 1): 4, (3, 0): "int8", (3, 1): "shifted"}
EXPECTED |= {(4, 0): 1, (4, 1): 1}
# A triploid record (chunk 3, record 3): the array's ploidy is 3, so no diploid block's mask
# is its preamble's summary (its complete count 2 is not the ploidy): unpacked or, at 1 bit,
# known all False; chunk 3's block 0 then holds two counts -> shifted.
TRIPLOID = record(430, "C", ["0|1|1", "0|0|1", "1|1|1", "0|1|0", "0|0|0", "1|0|1"])


def stored_as(refs: Path, chunk: int, block: int) -> int | str:
    """A GT block's storage, read from its preamble and (packed) the decompressed bits
    byte after the table: 1, 2, 4 (bits), "int8" (alleles) or "shifted"."""
    data = chunk_bytes(refs, f"call_genotype/{chunk}.{block}.0")
    flags, n = PREAMBLE.unpack_from(data)[2], PREAMBLE.unpack_from(data)[5]
    if not flags & ALLELES:
        assert not flags & PACKED
        return "shifted"
    if not flags & PACKED:
        return "int8"
    raw = np.frombuffer(Blosc().decode(data[PREAMBLE.size :]), np.uint8)
    return int(raw[5 * n])


@pytest.mark.parametrize("triploid", [False, True], ids=["diploid", "triploid"])
def test_packed_blocks_read_as_pysam_and_bio2zarr(tmp_path, triploid):
    records = list(RECORDS)
    if triploid:
        records[15] = TRIPLOID
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, samples=SAMPLES, header=DP_HEADER), tmp_path / "gt.bcf")
    refs = index(bcf, tmp_path)
    stored = {(i, b): stored_as(refs, i, b) for i in range(5) for b in range(2)}
    assert stored == EXPECTED | ({(3, 0): "shifted"} if triploid else {})
    ref = bio2zarr_convert(bcf, tmp_path / "ref.vcz", 4, samples_chunk_size=3)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert ds["call_genotype"].shape[2] == (3 if triploid else 2)
    assert_gt_as_oracles(ds, bcf, ref)


def cohort(n_records: int, missing: bool) -> str:
    """Diploid calls, all phased, alleles 0/1 (and a missing call every other record)."""
    return random_cohort(n_records, seed=7, alt="C", phased_from=n_records, missing_every=2 if missing else 0)


@pytest.mark.parametrize("missing,bits", [(False, 1), (True, 2)], ids=["one_bit", "two_bits"])
def test_append_completes_a_packed_block(tmp_path, missing, bits):
    """The store's partial last chunk (records 8, 9 of a chunk of 4) is packed; appended
    records complete it (and it is packed again)."""
    whole, (first, second) = cut(cohort(20, missing), [10], tmp_path, "cohort")
    refs = index(first, tmp_path)
    assert stored_as(refs, 2, 0) == bits
    before = PREAMBLE.unpack_from(chunk_bytes(refs, "call_genotype/2.0.0"))
    assert before[2] & ALL_PHASED and before[5] == 2
    append(second, refs)
    assert PREAMBLE.unpack_from(chunk_bytes(refs, "call_genotype/2.0.0"))[5] == 4
    assert {stored_as(refs, i, b) for i in range(5) for b in range(2)} <= {1, 2}
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", 4, samples_chunk_size=3)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert_gt_as_oracles(ds, whole, ref)


def test_a_codec_reading_only_version_1_refuses_the_gt_arrays_at_open_and_reads_the_rest(tmp_path, monkeypatch):
    """The arrays decoded from GT segments (which may be packed) are written with codec
    configuration version 2, every other array with 1: a codec that reads version 1 only
    (the one before packed blocks) reads positions as pysam does and refuses call_genotype
    when it is opened, naming the package to upgrade, rather than at its first chunk."""

    import pysam
    import zarr
    from vcfvirtual_codec import spec

    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, samples=SAMPLES, header=DP_HEADER), tmp_path / "gt.bcf")
    refs = index(bcf, tmp_path)
    versions = codec_versions(refs)
    gt = {"call_genotype", "call_genotype_mask", "call_genotype_phased"}
    assert {name: v for name, v in versions.items() if name in gt} == dict.fromkeys(gt, 2)
    info = {name for name in versions if name == "variant_DP"}  # INFO: version 3 (rearranged segments)
    assert info and {versions[name] for name in info} == {3}
    assert set(versions) - gt - info and {v for name, v in versions.items() if name not in gt | info} == {1}
    monkeypatch.setattr(spec, "FORMAT_VERSION", 1)
    # As a collaborator holding only the codec reads the JSON: plain Kerchunk.
    group = zarr.open_group("reference://", storage_options={"fo": str(refs)}, mode="r", zarr_format=2)
    with pysam.VariantFile(str(bcf)) as f:
        assert group["variant_position"][:].tolist() == [r.pos for r in f]
    with pytest.raises(ValueError, match=r"config version 2 is newer .*pip install -U \./codec"):
        group["call_genotype"]


# A cohort of blocks the writer's one pass packs (demux.gt_block_encode) at every width:
# 20 records x 2,000 diploid samples a block (80,000 bytes: its vectors, and the pass's
# check after the first 64 KB), one samples block a chunk. (chunk) -> how its calls are
# drawn, and the block's storage.
WIDE_SAMPLES = tuple(f"S{j}" for j in range(2000))
WIDE_CHUNK = 20
WIDE_CHUNKS = [
    ("phased, 1% missing: .|. and half-missing 0|.", 2),
    ("unphased, 1% missing: ./. and ./1", 2),
    ("phased, haploid calls (1, .) among diploid ones and missing", 2),
    ("phased, alleles up to 5 and missing", 4),
    ("phased, alleles 0/1, none missing", 1),
    ("phased, alleles 0/1, one missing call in the last record (past 64 KB)", 2),
    ("phased, one call of allele 14", "int8"),
    ("mixed phasing and missing", "shifted"),
]


def wide_cohort(seed: int = 26) -> str:
    """Hand-drawn VCF text of WIDE_CHUNKS' chunks (rng draws, written call by call)."""
    rng = np.random.default_rng(seed)
    records = []
    for chunk, (kind, _) in enumerate(WIDE_CHUNKS):
        for r in range(WIDE_CHUNK):
            top = 5 if kind.startswith("phased, alleles up to 5") else 1
            alleles = rng.integers(0, top + 1, size=(len(WIDE_SAMPLES), 2))
            sep = np.where(rng.random(len(WIDE_SAMPLES)) < 0.5, "|", "/") if kind.startswith("mixed") else None
            calls = []
            for s, (a, b) in enumerate(alleles):
                phase = "/" if kind.startswith("unphased") else ("|" if sep is None else sep[s])
                call = f"{a}{phase}{b}"
                draw = rng.random()
                if kind.startswith("phased, alleles 0/1, one missing") and r == WIDE_CHUNK - 1 and s == 1500:
                    call = ".|."
                elif kind.startswith("phased, one call of allele 14") and r == 7 and s == 3:
                    call = f"14|{b}"
                elif "missing" in kind and "none missing" not in kind and "one missing" not in kind and draw < 0.01:
                    call = [f".{phase}.", f"{a}{phase}.", f".{phase}{b}"][int(rng.integers(3))]
                elif kind.startswith("phased, haploid") and draw > 0.98:
                    call = "." if draw > 0.995 else str(a)
                calls.append(call)
            alt = "C,G,T,AC,AG,AT,CA,CC,CG,CT,GA,GC,GG,GT,TA" if top > 1 or "14" in kind else "C"
            records.append(record(1000 * chunk + 10 * r + 1, alt, calls))
    return bcfdata.vcf_text(records, samples=WIDE_SAMPLES, header=DP_HEADER)


def test_blocks_packed_in_one_pass_read_as_pysam_and_bio2zarr(tmp_path):
    """Every block of WIDE_CHUNKS is stored at the width (or as the int8 alleles, or the
    shifted bytes) its calls need, and call_genotype, _mask and _phased read as pysam and
    bio2zarr read the same BCF."""
    bcf = bcfdata.write_bcf(wide_cohort(), tmp_path / "wide.bcf")
    refs = tmp_path / "store.vcz.json"
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=tmp_path / "store.cache.columns",
        variants_chunk_size=WIDE_CHUNK,
        samples_chunk_size=len(WIDE_SAMPLES),
        cache_layout="columns",
        force=True,
    )
    assert [stored_as(refs, i, 0) for i in range(len(WIDE_CHUNKS))] == [want for _, want in WIDE_CHUNKS]
    ref = bio2zarr_convert(bcf, tmp_path / "ref.vcz", WIDE_CHUNK, samples_chunk_size=len(WIDE_SAMPLES))
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert_gt_as_oracles(ds, bcf, ref)
