"""GT blocks stored as the alleles they read as (FLAG_GT_ALLELES, issue 24): a block whose
calls are all phased or none, every record holding int8 GT of one count, is stored as its
decoded alleles; call_genotype is then its decompressed values.

The oracle is pysam (htslib) reading the same hand-written VCF, and bio2zarr's store of it
for call_genotype and call_genotype_mask: missing calls ('.', './.', '.|.', '0|.'),
haploid calls in diploid records, all-phased, none-phased and mixed blocks, multi-allelic
sites, a record without GT, a haploid record and (one case) a triploid record, which makes
every diploid block's count less than the array's ploidy. The preambles are read to assert
which blocks were stored as alleles (and which not), so that the comparison cannot pass
with no block of the new kind. Appending records to a store whose last partial chunk's
block is of alleles (joined to phased records, and to unphased ones) reads as bio2zarr's
store of the whole file.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pysam
import pytest
import xarray as xr

import vcfvirtual

from .. import bcfdata
from ..conftest import bio2zarr_convert, chunk_bytes
from .test_append import append, cut

CHUNK, BLOCK = 4, 3
SAMPLES = tuple(f"S{j}" for j in range(6))  # two samples blocks of 3
# The preamble's fields (tests/columns_reader.py documents the format): flags are byte 5.
PREAMBLE = struct.Struct("<4sBBHiIIIQI")
SHIFTED, ALL_PHASED, NONE_PHASED, ALLELES = 1, 2, 4, 32


def record(pos: int, alt: str, calls: list[str], fmt: str = "GT") -> str:
    return f"chr1\t{pos}\t.\tA\t{alt}\t.\tPASS\t.\t{fmt}\t" + "\t".join(calls)


# (chunk of 4 records) -> what each of its two samples blocks (S0-S2, S3-S5) must be stored as.
RECORDS = [
    # chunk 0: all phased, multi-allelic, missing alleles in block 0 -> both blocks alleles.
    record(100, "C,G,T", ["0|1", ".|.", "3|2", "1|1", "0|0", "2|3"]),
    record(110, "C", ["0|.", "1|0", ".|1", "0|1", "1|0", "1|1"]),
    record(120, "C,G", ["2|2", "0|0", "1|2", "0|2", "2|0", "0|0"]),
    record(130, "C", ["1|1", "1|0", "0|0", "0|0", "0|1", "1|0"]),
    # chunk 1: none phased, missing calls -> both blocks alleles (unphased).
    record(200, "C,G", ["0/1", "./.", "2/1", "0/0", "1/1", "0/2"]),
    record(210, "C", ["./1", "0/.", "1/1", "1/0", "0/1", "0/0"]),
    record(220, "C", ["0/0", "1/1", "0/1", "./.", "0/0", "1/1"]),
    record(230, "C,G,T", ["3/3", "0/2", "1/0", "2/2", "0/3", "0/1"]),
    # chunk 2: haploid and '.' calls in diploid records, all phased otherwise: a haploid call
    # reads as phased, so block 0 is all phased (alleles, with -2); block 1 mixed (shifted).
    record(300, "C", ["1", "0|1", ".", "0|1", "1/1", "0|0"]),
    record(310, "C", ["0|0", "0", "1|1", "1|0", "0|0", "1|1"]),
    record(320, "C,G", ["2", "1|2", "0|0", "0/0", "0/1", "1/1"]),
    record(330, "C", [".|.", "0|1", "1", "0|1", "0|1", "1|0"]),
    # chunk 3: mixed phasing in block 0; block 1 a record without GT -> neither is alleles.
    record(400, "C", ["0|1", "0/1", "1|1", "0|0", "1|1", "0|1"]),
    record(410, "C", ["0/0", "1|0", "0/1", "0|1", "1|0", "0|0"], fmt="GT"),
    record(420, "C", ["0/0", "1/0", "0/1", "0/1", "1/0", "0/0"]),
    record(430, "C", ["0|0", "1|0", "0|1", "0|1", "1|0", "0|0"]),
    # chunk 4 (partial): a haploid record among diploid ones -> counts differ -> not alleles.
    record(500, "C", ["0", "1", "0", "1", "1", "0"]),
    record(510, "C", ["0|1", "1|1", "0|0", "1|1", "0|1", "1|0"]),
]
EXPECTED_ALLELES = {(0, 0): True, (0, 1): True, (1, 0): True, (1, 1): True, (2, 0): True, (2, 1): False}
EXPECTED_ALLELES |= {(3, 0): False, (3, 1): False, (4, 0): False, (4, 1): False}
NO_GT = record(420, "C", ["5", "5", "5", "5", "5", "5"], fmt="DP")  # chunk 3, record 2: FORMAT without GT
TRIPLOID = record(430, "C", ["0|1|1", "0|0|1", "1|1|1", "0|1|0", "0|0|0", "1|0|1"])  # chunk 3, record 3
DP_HEADER = bcfdata.HEADER + '##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Depth">\n'


def cohort_text(triploid: bool) -> str:
    records = list(RECORDS)
    records[14] = NO_GT
    if triploid:
        records[15] = TRIPLOID
    return bcfdata.vcf_text(records, samples=SAMPLES, header=DP_HEADER)


def pysam_arrays(bcf: Path, ploidy: int) -> tuple[np.ndarray, np.ndarray]:
    """call_genotype (-1 missing, -2 past the call) and call_genotype_phased as htslib reads them."""
    gts, phased = [], []
    with pysam.VariantFile(str(bcf)) as f:
        for rec in f:
            row, row_phased = [], []
            for sample in rec.samples.values():
                if "GT" not in rec.format:
                    row.append([-1] * ploidy)
                    row_phased.append(False)
                    continue
                alleles = [-1 if a is None else a for a in sample["GT"]]
                row.append(alleles + [-2] * (ploidy - len(alleles)))
                row_phased.append(sample.phased)
            gts.append(row)
            phased.append(row_phased)
    return np.array(gts), np.array(phased)


def gt_flags(refs: Path, n_chunks: int, n_blocks: int) -> dict[tuple[int, int], int]:
    """Each (chunk, samples block)'s GT preamble flags, read from the cache."""
    return {
        (i, b): PREAMBLE.unpack_from(chunk_bytes(refs, f"call_genotype/{i}.{b}.0"))[2]
        for i in range(n_chunks)
        for b in range(n_blocks)
    }


def index(bcf: Path, folder: Path, **options) -> Path:
    refs = folder / "store.vcz.json"
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=folder / "store.cache.columns",
        variants_chunk_size=CHUNK,
        cache_layout="columns",
        samples_chunk_size=BLOCK,
        force=True,
        **options,
    )
    return refs


def assert_gt_as_oracles(ds: xr.Dataset, bcf: Path, ref) -> None:
    ploidy = ds["call_genotype"].shape[2]
    want_gt, want_phased = pysam_arrays(bcf, ploidy)
    got = ds["call_genotype"].values
    np.testing.assert_array_equal(got, want_gt)
    np.testing.assert_array_equal(got, ref["call_genotype"][:])
    np.testing.assert_array_equal(ds["call_genotype_mask"].values, want_gt < 0)
    np.testing.assert_array_equal(ds["call_genotype_mask"].values, ref["call_genotype_mask"][:])
    # htslib calls a haploid call phased; bio2zarr (cyvcf2) is inconsistent there, so pysam.
    np.testing.assert_array_equal(ds["call_genotype_phased"].values, want_phased)


@pytest.mark.parametrize("triploid", [False, True], ids=["diploid", "triploid"])
def test_alleles_blocks_read_as_pysam_and_bio2zarr(tmp_path, triploid):
    bcf = bcfdata.write_bcf(cohort_text(triploid), tmp_path / "gt.bcf")
    refs = index(bcf, tmp_path)
    flags = gt_flags(refs, 5, 2)
    # (The triploid record is in chunk 3, whose blocks are not alleles either way.)
    assert {k: bool(f & ALLELES) for k, f in flags.items()} == EXPECTED_ALLELES
    for f in flags.values():  # never both: the alleles replace the shifted bytes
        assert not (f & ALLELES and f & SHIFTED)
        assert f & (ALLELES | SHIFTED)
    ref = bio2zarr_convert(bcf, tmp_path / "ref.vcz", CHUNK, samples_chunk_size=BLOCK)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert ds["call_genotype"].shape[2] == (3 if triploid else 2)
    assert_gt_as_oracles(ds, bcf, ref)


def random_cohort(n_records: int, *, seed: int, alt: str, phased_from: int, missing_every: int) -> str:
    """Random diploid calls of the alleles of REF and ``alt``, all phased in the first
    ``phased_from`` records and none after, one call missing in every ``missing_every``-th
    record (none: 0)."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n_records):
        sep = "|" if i < phased_from else "/"
        calls = [f"{a}{sep}{b}" for a, b in rng.integers(0, alt.count(",") + 2, (len(SAMPLES), 2))]
        if missing_every and i % missing_every == 0:
            calls[i % len(SAMPLES)] = f".{sep}."
        records.append(record(1000 + 10 * i, alt, calls))
    return bcfdata.vcf_text(records, samples=SAMPLES, header=DP_HEADER)


def phased_cohort(n_records: int, phased_from: int) -> str:
    """Triallelic calls, all phased in the first ``phased_from`` records and none after."""
    return random_cohort(n_records, seed=5, alt="C,G", phased_from=phased_from, missing_every=3)


@pytest.mark.parametrize(
    "phased_from,joined_alleles", [(40, True), (10, False)], ids=["joined_phased", "joined_unphased"]
)
def test_append_completes_an_alleles_block(tmp_path, phased_from, joined_alleles):
    """The store's partial last chunk (records 8, 9 of a chunk of 4 -> chunk 2 holds 2) is an
    alleles block; the appended records complete it: all phased (the joined block is
    alleles again) or unphased (mixed: shifted bytes)."""
    whole, (first, second) = cut(phased_cohort(20, phased_from), [10], tmp_path, "cohort")
    refs = index(first, tmp_path)
    before = gt_flags(refs, 3, 2)
    assert before[2, 0] & ALLELES and before[2, 1] & ALLELES and before[2, 0] & ALL_PHASED
    append(second, refs)
    after = gt_flags(refs, 5, 2)
    assert bool(after[2, 0] & ALLELES) == joined_alleles
    assert bool(after[2, 0] & SHIFTED) != joined_alleles
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", CHUNK, samples_chunk_size=BLOCK)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert_gt_as_oracles(ds, whole, ref)
