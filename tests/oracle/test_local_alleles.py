"""``index --local-alleles``: call_LA, call_LAD and call_LPL equal bio2zarr's
``vcf2zarr convert --local-alleles`` store, array by array, on every cache layout, read
through open_store, the in-memory ManifestStore and a plain ``reference://``; refused
with one line where bio2zarr's definition does not apply; and checked by ``verify``
against its own numpy reading of bio2zarr's definition."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pysam
import pytest
import xarray as xr
import zarr

import vcfvirtual
from vcfvirtual.errors import UnsupportedBCFError, UntrustedReferenceError
from vcfvirtual.inspect import inspect_store
from vcfvirtual.verify import verify_store

from .. import bcfdata
from ..conftest import differences_from_bio2zarr, layout_options
from .test_parallel import true_record_starts, use_starts

HEADER = """##fileformat=VCFv4.3
##contig=<ID=chr1,length=100000>
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">
##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Read depth">
##FORMAT=<ID=PL,Number=G,Type=Integer,Description="Phred-scaled genotype likelihoods">
"""

# 2 to 6 alleles; homozygous, heterozygous (either order), half-missing, missing and
# haploid calls; AD and PL missing as a whole ("."), in part ("3,.") and shorter than the
# alleles; phased and unphased; a record without GT; a value past int8 so that LPL is int16.
RECORDS = [
    "chr1\t10\t.\tA\tC\t.\tPASS\t.\tGT:AD:DP:PL\t0/1:5,6:11:10,0,20\t1/1:0,7:7:90,21,0\t0|0:9,0:9:0,27,300",
    "chr1\t20\t.\tA\tC,G\t.\tPASS\t.\tGT:AD:PL\t2/1:1,2,3:1,2,3,4,5,6\t2/2:.:.\t./.:1,2,3:1,2,3,4,5,6",
    "chr1\t30\t.\tA\tC,G,T\t.\tPASS\t.\tGT:AD:PL\t3/1:1,2,3,4:1,2,3,4,5,6,7,8,9,10\t0:4,.,1,2:5,6,7,8\t./1:.:.",
    "chr1\t40\t.\tA\tC,G,T,AC\t.\tPASS\t.\tGT:AD:PL\t4|0:1,2,3,4,5:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15"
    "\t3|3:1,2,3,4,5:15,14,13,12,11,10,9,8,7,6,5,4,3,2,1\t1/4:9,8:.",
    "chr1\t50\t.\tA\tC,G,T,AC,AG\t.\tPASS\t.\tGT:AD:PL\t5/2:"
    + ",".join(map(str, range(6)))
    + ":"
    + ",".join(map(str, range(21)))
    + "\t0/5:6,5,4,3,2,1:"
    + ",".join(map(str, range(20, -1, -1)))
    + "\t.|5:.:.",
    "chr1\t60\t.\tAT\tA\t.\tPASS\t.\tGT:AD:PL\t0/0:3,.:0,3,30\t1/0:2,2:20,0,20\t1|1:0,5:50,15,0",
    "chr1\t70\t.\tA\tC\t.\tPASS\t.\tAD:PL\t1,2:0,1,2\t3,4:5,6,7\t.:.",  # no GT: no local allele
]


def _bio2zarr_local(bcf: Path, out: Path, chunk_length: int) -> zarr.Group:
    from bio2zarr import vcf

    vcf.convert([str(bcf)], str(out), variants_chunk_size=chunk_length, local_alleles=True, worker_processes=0)
    return zarr.open_group(str(out), mode="r")


def _all_ways(bcf: Path, tmp: Path, chunk_length: int, layout: str, samples_chunk_size: int = 2):
    """Our local-alleles store, read through open_store, the ManifestStore and plain reference://."""
    refs = tmp / f"{bcf.name}.{layout}.vcz.json"
    store = vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=tmp / f"{bcf.name}.{layout}.cache",
        variants_chunk_size=chunk_length,
        local_alleles=True,
        force=True,
        **layout_options(layout, samples_chunk_size),
    )
    yield "open_store", xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    yield "ManifestStore", xr.open_zarr(store, zarr_format=3, consolidated=False)
    yield "reference://", xr.open_zarr("reference://", consolidated=False, storage_options={"fo": str(refs)})


@pytest.mark.parametrize("chunk_length", [2, 1000])
def test_hand_written_records_equal_bio2zarr(tmp_path, cache_layout, chunk_length):
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, header=HEADER), tmp_path / "local.bcf")
    ref = _bio2zarr_local(bcf, tmp_path / "ref.vcz", chunk_length)
    assert {"call_LA", "call_LAD", "call_LPL"} <= set(ref.array_keys())
    assert not {"call_AD", "call_PL"} & set(ref.array_keys())  # bio2zarr renames them
    for how, ds in _all_ways(bcf, tmp_path, chunk_length, cache_layout):
        problems = differences_from_bio2zarr(ds, ref)
        assert not problems, f"{how}: " + "\n".join(problems)
        assert ds["call_LPL"].dtype == np.int16  # PL holds 300
        assert ds["call_LA"].dims == ("variants", "samples", "local_alleles")
    # A few values against the VCF text itself: 2/1 with AD 1,2,3 and PL 1..6.
    assert ds["call_LA"].values[1, 0].tolist() == [1, 2]
    assert ds["call_LAD"].values[1, 0].tolist() == [2, 3]
    assert ds["call_LPL"].values[1, 0].tolist() == [3, 5, 6]  # PL[1/1], PL[1/2], PL[2/2]


def _msprime_cohort(path: Path, n_samples: int = 30, seed: int = 3) -> Path:
    """A diploid msprime cohort with 2 to 6 alleles per site, GT partly missing, and AD
    (Number=R) and PL (Number=G) added through pysam, some values missing."""
    msprime = pytest.importorskip("msprime")
    alleles = ["A", "C", "G", "T", "AC", "AG"]
    n = len(alleles)
    matrix = np.full((n, n), 1 / (n - 1))
    np.fill_diagonal(matrix, 0)
    model = msprime.MatrixMutationModel(alleles, root_distribution=np.full(n, 1 / n), transition_matrix=matrix)
    ts = msprime.sim_ancestry(samples=n_samples, ploidy=2, sequence_length=400, population_size=1e4, random_seed=seed)
    ts = msprime.sim_mutations(ts, rate=2e-5, model=model, random_seed=seed + 2)
    text = io.StringIO()
    ts.write_vcf(text, position_transform=lambda x: np.asarray(x) + 1)
    vcf = path.with_suffix(".plain.vcf")
    vcf.write_text(text.getvalue())
    rng = np.random.default_rng(seed)
    with pysam.VariantFile(str(vcf)) as src:
        header = src.header.copy()
        header.add_line('##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">')
        header.add_line('##FORMAT=<ID=PL,Number=G,Type=Integer,Description="Genotype likelihoods">')
        with pysam.VariantFile(str(path), "wb", header=header) as dst:
            for rec in src:
                out = dst.new_record(contig=rec.contig, start=rec.start, stop=rec.stop, alleles=rec.alleles, id=rec.id)
                k = len(rec.alleles)
                for name in rec.samples:
                    call = out.samples[name]
                    gt = rec.samples[name]["GT"]
                    call["GT"] = (None, gt[1]) if rng.random() < 0.05 else gt
                    call.phased = rec.samples[name].phased
                    ad = [int(x) for x in rng.integers(0, 40, k)]
                    call["AD"] = tuple(None if rng.random() < 0.05 else x for x in ad)
                    if rng.random() > 0.05:
                        call["PL"] = tuple(int(x) for x in rng.integers(0, 200, math.comb(k + 1, 2)))
                dst.write(out)
    pysam.bcftools.index(str(path))
    return path


def test_msprime_cohort_equals_bio2zarr(tmp_path, cache_layout):
    bcf = _msprime_cohort(tmp_path / "cohort.bcf")
    with pysam.VariantFile(str(bcf)) as f:
        counts = {len(r.alleles) for r in f}
    assert {2, 3, 4, 5, 6} <= counts
    ref = _bio2zarr_local(bcf, tmp_path / "ref.vcz", 50)
    # Samples blocks of 7: 30 samples make four full blocks and a last one of 2.
    for how, ds in _all_ways(bcf, tmp_path, 50, cache_layout, samples_chunk_size=7):
        problems = differences_from_bio2zarr(ds, ref)
        assert not problems, f"{how}: " + "\n".join(problems)


def test_verify_compares_the_local_arrays(tmp_path, cache_layout, monkeypatch):
    bcf = _msprime_cohort(tmp_path / "cohort.bcf", n_samples=8)
    refs = tmp_path / "cohort.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, local_alleles=True, force=True, **layout_options(cache_layout, 3))
    report = verify_store(refs)
    assert report.ok, report.summary()
    assert not {"call_LA", "call_LAD", "call_LPL"} & set(report.not_compared)
    # inspect lists them as bio2zarr shapes them, over a cache that still matches.
    summary = inspect_store(refs)
    arrays = {a.name: a for a in summary.arrays}
    assert summary.fingerprints_match and not {"call_AD", "call_PL"} & set(arrays)
    assert arrays["call_LA"].dimensions == ("variants", "samples", "local_alleles")
    assert arrays["call_LPL"].shape[1:] == (8, 3) and arrays["call_LPL"].dtype == "int16"  # PL up to 199
    # A codec that gathers AD at the wrong allele is caught.
    from vcfvirtual_codec import local_alleles

    def shifted(ad, la, out):
        out[:] = np.where(la >= 0, ad[..., :2], -2)

    monkeypatch.setattr(local_alleles, "local_ad", shifted)
    report = verify_store(refs)
    assert [d.name for d in report.differences] == ["call_LAD"]


def test_record_without_ad_reads_missing_where_bio2zarr_stops(tmp_path):
    """bio2zarr 0.2.1 fails on a record lacking AD (AttributeError); ours gathers call_AD's
    missing value (-1) at the call's local alleles, and verify agrees."""
    records = [RECORDS[0], "chr1\t70\t.\tA\tC,G\t.\tPASS\t.\tGT:DP\t0/2:3\t1/1:4\t./.:."]
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, header=HEADER), tmp_path / "noad.bcf")
    refs = tmp_path / "noad.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, local_alleles=True, force=True)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert ds["call_LAD"].values[1].tolist() == [[-1, -1], [-1, -2], [-2, -2]]
    assert ds["call_LPL"].values[1].tolist() == [[-1, -1, -1], [-1, -2, -2], [-2, -2, -2]]
    assert verify_store(refs).ok


@pytest.mark.parametrize(
    "header_extra,records,problem",
    [
        ("", ["chr1\t10\t.\tA\tC\t.\tPASS\t.\tGT:AD\t0/1/1:1,2\t0/0/0:3,0\t1/1/1:0,4"], "the largest ploidy is 3"),
        ("", ["chr1\t10\t.\tA\tC\t.\tPASS\t.\tGT:AD\t0:1,2\t1:3,0\t.:0,4"], "the largest ploidy is 1"),
        ("", ["chr1\t10\t.\tA\tC\t.\tPASS\t.\tAD\t1,2\t3,0\t0,4"], "no record has a GT call"),
        (
            '##FORMAT=<ID=LAD,Number=.,Type=Integer,Description="Local AD">\n',
            ["chr1\t10\t.\tA\tC\t.\tPASS\t.\tGT:AD:LAD\t0/1:1,2:1,2\t0/0:3,0:3\t1/1:0,4:4"],
            "already has FORMAT/LAD",
        ),
    ],
)
def test_refused_where_bio2zarr_definition_does_not_apply(tmp_path, header_extra, records, problem):
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, header=HEADER + header_extra), tmp_path / "x.bcf")
    with pytest.raises(UnsupportedBCFError, match=problem) as caught:
        vcfvirtual.index(bcf, refs_path=tmp_path / "x.vcz.json", local_alleles=True, force=True)
    assert str(bcf) in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "x.vcz.json").exists()
    # Without the option the same file indexes.
    vcfvirtual.index(bcf, refs_path=tmp_path / "x.vcz.json", force=True)


def test_polyploid_refused_by_bio2zarr_too(tmp_path):
    records = ["chr1\t10\t.\tA\tC\t.\tPASS\t.\tGT:AD\t0/1/1:1,2\t0/0/0:3,0\t1/1/1:0,4"]
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, header=HEADER), tmp_path / "tri.bcf")
    with pytest.raises(ValueError, match="diploid"):
        _bio2zarr_local(bcf, tmp_path / "ref.vcz", 10)


def test_header_without_gt_is_refused(tmp_path):
    header = HEADER.replace('##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n', "")
    bcf = bcfdata.write_bcf(
        bcfdata.vcf_text(["chr1\t10\t.\tA\tC\t.\tPASS\t.\tAD\t1,2\t3,0\t0,4"], header=header), tmp_path / "nogt.bcf"
    )
    with pytest.raises(UnsupportedBCFError, match="declares no FORMAT/GT"):
        vcfvirtual.index(bcf, refs_path=tmp_path / "x.vcz.json", local_alleles=True, force=True)


def test_cli_refusal_is_one_line(tmp_path):
    from click.testing import CliRunner

    from vcfvirtual.cli import main

    records = ["chr1\t10\t.\tA\tC\t.\tPASS\t.\tGT:AD\t0/1/1:1,2\t0/0/0:3,0\t1/1/1:0,4"]
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, header=HEADER), tmp_path / "tri.bcf")
    result = CliRunner().invoke(main, ["index", "--local-alleles", str(bcf)])
    assert result.exit_code == 1
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "cannot expose local alleles" in lines[0], result.output


def test_open_store_refuses_a_local_config_naming_another_field(tmp_path):
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, header=HEADER), tmp_path / "local.bcf")
    refs = tmp_path / "local.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, local_alleles=True, force=True)
    doc = json.loads(refs.read_text())
    meta = json.loads(doc["refs"]["call_LAD/.zarray"])
    codec = meta["filters"][-1]
    codec["key"] = codec["gt_key"]  # gather GT's bytes as if they were AD's
    doc["refs"]["call_LAD/.zarray"] = json.dumps(meta)
    refs.write_text(json.dumps(doc))
    with pytest.raises(UntrustedReferenceError, match="call_LAD"):
        vcfvirtual.open_store(refs)


def test_columns_cache_keeps_its_other_segments_and_sizes(tmp_path):
    """With local alleles the columns cache holds the same segments, only reordered:
    the same size, and call_AD's segments are still there (read by call_LAD)."""
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, header=HEADER), tmp_path / "local.bcf")
    plain = tmp_path / "plain.cache"
    local = tmp_path / "local.cache"
    vcfvirtual.index(bcf, refs_path=tmp_path / "p.json", cache_path=plain, samples_chunk_size=2, force=True)
    vcfvirtual.index(
        bcf, refs_path=tmp_path / "l.json", cache_path=local, samples_chunk_size=2, local_alleles=True, force=True
    )
    plain_bytes, local_bytes = bcfdata.cache_bytes(plain), bcfdata.cache_bytes(local)  # their parts
    assert len(plain_bytes) == len(local_bytes)
    assert sorted(plain_bytes) == sorted(local_bytes)


def test_parallel_index_writes_the_serial_cache(tmp_path, monkeypatch):
    """-j 2 goes through the same columns writer: every chunk the same bytes (the cache
    cut into parts by the tasks that wrote them: one per partition, cut here at record
    starts pysam names, inside chunks)."""
    bcf = _msprime_cohort(tmp_path / "cohort.bcf", n_samples=8)
    starts = true_record_starts(bcf)
    use_starts(monkeypatch, lambda path: [starts[k] for k in (50, 130, 222) if k < len(starts)])
    caches = []
    for workers in (1, 2):
        cache = tmp_path / f"c{workers}.cache"
        vcfvirtual.index(
            bcf,
            refs_path=tmp_path / f"c{workers}.json",
            cache_path=cache,
            variants_chunk_size=40,
            samples_chunk_size=3,
            workers=workers,
            local_alleles=True,
            force=True,
        )
        caches.append(bcfdata.referenced_chunks(tmp_path / f"c{workers}.json"))
    assert len(os.listdir(tmp_path / "c2.cache")) > 1
    assert caches[0] == caches[1]


def test_parquet_references_read_the_same(tmp_path):
    pytest.importorskip("fastparquet")
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, header=HEADER), tmp_path / "local.bcf")
    ref = _bio2zarr_local(bcf, tmp_path / "ref.vcz", 4)
    refs = tmp_path / "local.vcz.parq"
    vcfvirtual.index(bcf, refs_path=refs, refs_format="parquet", variants_chunk_size=4, local_alleles=True, force=True)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert not differences_from_bio2zarr(ds, ref)


@pytest.mark.parametrize("layout", ["columns", "raw"])
@pytest.mark.parametrize("source_width", [2**31 - 1, 1])
def test_a_hostile_source_width_is_a_typed_error(tmp_path, layout, source_width):
    """A config claiming AD is 2^31 - 1 values wide is refused before allocating; one
    narrower than the records is refused as for call_AD (plain Kerchunk, no checks)."""
    from vcfvirtual_codec.errors import ChunkDecodeError

    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, header=HEADER), tmp_path / "local.bcf")
    refs = tmp_path / "local.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, local_alleles=True, force=True, **layout_options(layout))
    doc = json.loads(refs.read_text())
    meta = json.loads(doc["refs"]["call_LAD/.zarray"])
    meta["filters"][-1]["source_width"] = source_width
    doc["refs"]["call_LAD/.zarray"] = json.dumps(meta)
    refs.write_text(json.dumps(doc))
    with pytest.raises(ChunkDecodeError, match="call_LAD"):
        _ = xr.open_zarr(vcfvirtual.open_store(refs, check=False), consolidated=False)["call_LAD"].values
