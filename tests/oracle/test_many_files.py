"""Several BCFs, one store: per-chromosome files of one cohort read as the whole cohort.

The oracle is bio2zarr converting the unsplit BCF (the same records in the same order),
and bcftools reading the cache back; files that cannot share a store are refused with
the difference named."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import HeaderError, StaleCacheError, VcfVirtualError

from .. import bcfdata
from ..conftest import assert_matches_bio2zarr, bio2zarr_convert


@pytest.fixture(scope="module")
def split_cohort(tmp_path_factory):
    """A cohort over three contigs, and the same records as one BCF per contig (bcftools
    view -r, header unchanged)."""
    d = tmp_path_factory.mktemp("split")
    whole = bcfdata.write_bcf(
        bcfdata.random_cohort_vcf(1800, 60, seed=11, contigs=("chr1", "chr2", "chrX")), d / "whole.bcf"
    )
    parts = []
    for contig in ("chr1", "chr2", "chrX"):
        part = d / f"{contig}.bcf"
        bcfdata.bcftools("view", "--no-version", "-r", contig, "-Ob", "-o", str(part), str(whole))
        parts.append(part)
    counts = [sum(1 for _ in pysam.VariantFile(str(p))) for p in parts]
    assert all(counts) and sum(counts) == 1800, counts  # every contig has records: a real split
    return whole, parts


@pytest.mark.parametrize("layout", ["bgzf", "raw", "columns"])
def test_per_contig_files_make_the_whole_cohort(split_cohort, tmp_path, layout):
    whole, parts = split_cohort
    chunk_length = 250  # no file holds a multiple of 250 records: chunks straddle files
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", chunk_length)
    refs = tmp_path / "cohort.vcz.json"
    # Columns: samples blocks of 25 (60 samples: a narrower last block).
    extra = {"samples_chunk_size": 25} if layout == "columns" else {}
    store = vcfvirtual.index(parts, refs_path=refs, variants_chunk_size=chunk_length, cache_layout=layout, **extra)
    cache = tmp_path / ("cohort.vcz.cache.columns" if layout == "columns" else "cohort.vcz.cache.bcf")
    assert cache.exists()
    for ds in (
        xr.open_zarr(store, zarr_format=3, consolidated=False),
        xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False),
    ):
        assert_matches_bio2zarr(ds, ref)
    if layout == "bgzf":
        # The cache is one BCF of every file's records, the first file's header.
        view = ["view", "--no-version", "-H"]
        assert bcfdata.bcftools(*view, str(cache)) == bcfdata.bcftools(*view, str(whole))


def test_cli_takes_several_files_and_needs_a_name(split_cohort, tmp_path):
    _, parts = split_cohort
    cli = [sys.executable, "-m", "vcfvirtual.cli"]
    no_name = subprocess.run([*cli, "index", *map(str, parts)], capture_output=True, text=True)
    assert no_name.returncode == 1 and "--output" in no_name.stderr
    out = tmp_path / "all.vcz.json"
    subprocess.run([*cli, "index", *map(str, parts), "-o", str(out), "-c", "300"], check=True, capture_output=True)
    ds = xr.open_zarr(vcfvirtual.open_store(out), consolidated=False)
    expected = [rec.pos for p in parts for rec in pysam.VariantFile(str(p))]
    assert ds.variant_position.values.tolist() == expected


def test_the_same_file_twice_is_refused(split_cohort, tmp_path):
    _, parts = split_cohort
    with pytest.raises(VcfVirtualError, match="given twice"):
        vcfvirtual.index([parts[0], parts[1], parts[0]], refs_path=tmp_path / "x.json")


def _with_header(src, dst, edit):
    """``src``'s records under a header changed by ``edit`` (text -> text), through
    htslib, which re-encodes each record against the new header's dictionary."""
    text = str(pysam.VariantFile(str(src)).header)
    vcf = bcfdata.bcftools("view", "--no-version", "-H", src)
    return bcfdata.write_bcf(edit(text) + vcf, dst, index=False)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("\tsample_0\t", "\tNA0\t", 1), "sample 0 is 'NA0' where the first file has 'sample_0'"),
        (
            lambda t: t.replace("##contig=<ID=chrX>\n", "").replace(
                "##contig=<ID=chr1,", "##contig=<ID=chrX>\n##contig=<ID=chr1,"
            ),
            "contig 0 is 'chrX' where the first file has 'chr1'",
        ),
        (
            lambda t: t.replace("ID=DP,Number=1,Type=Integer", "ID=DP,Number=1,Type=Float"),
            "INFO/DP is Number=1,Type=Float where the first file has Number=1,Type=Integer",
        ),
        (
            lambda t: t.replace(
                "##INFO=<ID=DP", '##INFO=<ID=XX,Number=1,Type=Integer,Description="new">\n##INFO=<ID=DP'
            ),
            "INFO/XX, which the first file does not",
        ),
    ],
)
def test_incompatible_headers_name_the_difference(split_cohort, tmp_path, edit, message):
    _, parts = split_cohort
    other = _with_header(parts[1], tmp_path / "other.bcf", edit)
    refs = tmp_path / "x.vcz.json"
    with pytest.raises(HeaderError) as e:
        vcfvirtual.index([parts[0], other], refs_path=refs)
    assert message in str(e.value) and str(other) in str(e.value) and str(parts[0]) in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.bcf", "other.vcf"]  # nothing written


def test_fields_in_another_order_are_refused_not_misread(split_cohort, tmp_path):
    """The same definitions in another order number the dictionary differently: records
    of the second file would decode as the wrong fields, so the store is refused."""
    _, parts = split_cohort

    def reorder(text):
        lines = text.split("\n")
        filters = [line for line in lines if line.startswith("##FILTER=<ID=q10") or line.startswith("##FILTER=<ID=s50")]
        rest = [line for line in lines if line not in filters]
        return "\n".join(rest[:3] + filters[::-1] + rest[3:])

    other = _with_header(parts[1], tmp_path / "other.bcf", reorder)
    with pytest.raises(HeaderError, match="dictionary key"):
        vcfvirtual.index([parts[0], other], refs_path=tmp_path / "x.vcz.json")


def test_header_lines_outside_the_dictionaries_may_differ(split_cohort, tmp_path):
    _, parts = split_cohort
    other = _with_header(
        parts[1],
        tmp_path / "other.bcf",
        lambda t: t.replace("##source=vcfvirtual-tests", "##source=elsewhere\n##note=x"),
    )
    ds = xr.open_zarr(
        vcfvirtual.index([parts[0], other], refs_path=False, cache_path=tmp_path / "c.bcf"),
        zarr_format=3,
        consolidated=False,
    )
    assert ["source", "vcfvirtual-tests"] in ds.attrs["vcf_meta_information"]  # the first file's header
    expected = [rec.pos for p in parts[:2] for rec in pysam.VariantFile(str(p))]
    assert ds.variant_position.values.tolist() == expected


def test_a_changed_second_source_is_refused(split_cohort, tmp_path):
    _, parts = split_cohort
    copies = [shutil.copy(p, tmp_path / p.name) for p in parts[:2]]
    refs = tmp_path / "two.vcz.json"
    vcfvirtual.index(copies, refs_path=refs)
    with open(copies[1], "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(StaleCacheError, match="chr2.bcf changed"):
        vcfvirtual.open_store(refs)


def test_vcf_and_uncompressed_inputs_mix(split_cohort, tmp_path):
    whole, parts = split_cohort
    vcf = tmp_path / "chr2.vcf.gz"
    bcfdata.bcftools("view", "--no-version", "-Oz", "-o", str(vcf), str(parts[1]))
    plain = bcfdata.uncompressed_copy(parts[2], tmp_path / "chrX.bcf")
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", 400)
    store = vcfvirtual.index([parts[0], vcf, plain], refs_path=tmp_path / "mixed.vcz.json", variants_chunk_size=400)
    assert_matches_bio2zarr(xr.open_zarr(store, zarr_format=3, consolidated=False), ref)
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # converted VCF removed
