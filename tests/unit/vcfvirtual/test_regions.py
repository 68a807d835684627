"""Region selection through region_index equals htslib's own region query (pysam fetch)."""

from __future__ import annotations

import pysam
import pytest

import vcfvirtual
from vcfvirtual.errors import RegionError, UnknownContigError, VcfVirtualError
from vcfvirtual.regions import parse_region

from ...conftest import open_both


def htslib_positions(bcf, contig, start, end):
    with pysam.VariantFile(str(bcf)) as vf:
        return [(r.chrom, r.pos) for r in vf.fetch(contig, start - 1, end)]


@pytest.mark.parametrize("region", ["chr1:1-5000", "chr1:20000-40000", "chr2", "chr2:37000-37010", "chr1:1-1"])
def test_select_region_matches_htslib(cohort_bcf, tmp_path, region):
    contig, start, end = parse_region(region)
    expected = htslib_positions(cohort_bcf, contig, start, min(end, 2**31 - 1))
    for ds in open_both(cohort_bcf, 100, tmp_path):
        sub = vcfvirtual.select_region(ds, region)
        contigs = ds["contig_id"].values.tolist()
        got = [(contigs[c], int(p)) for c, p in zip(sub["variant_contig"].values, sub["variant_position"].values)]
        assert got == expected


def test_region_overlap_uses_variant_length(small_bcf, tmp_path):
    # The chr1:200 ACGT deletion spans 200-203, so a query at 202 must find it.
    expected = htslib_positions(small_bcf, "chr1", 202, 202)
    assert expected == [("chr1", 200)]
    for ds in open_both(small_bcf, 2, tmp_path):
        assert vcfvirtual.select_region(ds, "chr1:202-202")["variant_position"].values.tolist() == [200]


def test_bad_regions():
    with pytest.raises(ValueError, match="ends before"):
        parse_region("chr1:10-5")
    assert parse_region("chr1:1,000-2,000") == ("chr1", 1000, 2000)
    assert parse_region("chr1:7") == ("chr1", 7, 7)


def test_bad_regions_are_typed_errors_naming_the_region_and_the_fix(small_bcf, tmp_path):
    """Still a ValueError / KeyError for callers that caught those; now also a
    VcfVirtualError that names the region and says what to give instead."""
    with pytest.raises(RegionError) as e:
        parse_region("chr1:x-5")
    assert isinstance(e.value, ValueError)
    assert str(e.value).startswith("region 'chr1:x-5': cannot be parsed (give contig, contig:start")
    with pytest.raises(RegionError, match=r"region 'chr1:10-5': it ends before it starts \(give start <= end\)"):
        parse_region("chr1:10-5")
    ds = next(iter(open_both(small_bcf, 2, tmp_path)))
    with pytest.raises(UnknownContigError) as e:
        vcfvirtual.select_region(ds, "chr9:1-10")
    assert isinstance(e.value, KeyError) and isinstance(e.value, VcfVirtualError)
    # The store's contigs, as htslib reads them from the BCF's header.
    with pysam.VariantFile(str(small_bcf)) as f:
        contigs = list(f.header.contigs)
    assert str(e.value) == f"region 'chr9:1-10': contig 'chr9' is not in this store (its contigs are {contigs})"


def test_region_index_holds_an_end_past_the_positions_dtype(data_dir, tmp_path):
    """POS 2^31 - 1 with a 2-base REF ends at 2^31: region_index widens to int64 to hold
    it (it used to saturate at the positions' int32 maximum)."""
    from ... import bcfdata

    top = 2**31 - 1  # the largest position BCF can hold; the AA record ends one past it
    records = ["chr1\t1\t.\tA\t.\t.\t.\t.", f"chr1\t{top}\t.\tAA\t.\t.\t.\t."]
    # htslib cannot index a record ending past 2^31 - 1, so the oracle is the text itself.
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, samples=()), data_dir / "top.bcf", index=False)
    for ds in open_both(bcf, 10, tmp_path):
        assert ds["region_index"].values[0, 4] == top + 1 and ds["region_index"].dtype == "int64"
        assert ds["variant_position"].dtype == "int32"
        assert vcfvirtual.select_region(ds, f"chr1:{top}-{top}")["variant_position"].values.tolist() == [top]


@pytest.mark.parametrize("chunk_length", [100, 1500])
def test_region_index_folded_over_many_scan_batches_matches_bio2zarr(cohort_bcf, tmp_path, monkeypatch, chunk_length):
    """The scan folds region rows batch by batch; with batches far smaller than a chunk,
    runs continue across batches and must still come out as bio2zarr's rows."""
    from vcfvirtual.scan import scanner as scan

    from ...conftest import bio2zarr_convert

    monkeypatch.setattr(scan, "SCAN_BATCH", 8192)
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", chunk_length)
    for ds in open_both(cohort_bcf, chunk_length, tmp_path):
        assert ds["region_index"].values.tolist() == ref["region_index"][:].tolist()
        assert ds["variant_position"].values.tolist() == ref["variant_position"][:].tolist()
