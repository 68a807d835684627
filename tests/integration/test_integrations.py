"""vcfvirtual inside the tools around it: xarray's backend entry point and VirtualiZarr's
parser protocol, each compared with bio2zarr's store of the same BCF."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import vcfvirtual
from vcfvirtual.errors import VcfVirtualError

from ..conftest import assert_matches_bio2zarr, bio2zarr_convert, layout_options, values_equal


def test_xarray_engine_opens_the_kerchunk_json(small_bcf, tmp_path):
    refs = tmp_path / "s.bcf.vcz.json"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "s.cache", variants_chunk_size=3)
    ref = bio2zarr_convert(small_bcf, tmp_path / "ref.vcz", 3)
    assert_matches_bio2zarr(xr.open_dataset(refs, engine="vcfvirtual"), ref)
    # A fresh process that never imports vcfvirtual finds the engine by its entry point,
    # and guesses it from the file name.
    script = f"""
import json, xarray as xr
ds = xr.open_dataset({str(refs)!r})
print(json.dumps(ds["variant_position"].values.tolist()))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ref["variant_position"][:].tolist()


# Every cache layout; columns with samples blocks of 7 (the 120 samples: 17 blocks and a
# narrower last one), so VirtualiZarr's manifests carry a chunked samples dimension.
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_virtualizarr_parser_and_kerchunk_writer_keep_the_codec(cohort_bcf, tmp_path, zarr_format, cache_layout):
    from virtualizarr import open_virtual_dataset

    # Indexed first (the parser only opens what the index wrote), then opened through
    # VirtualiZarr with the caller's registry.
    refs_path = tmp_path / "c.vcz.json"
    options = layout_options(cache_layout, 7)
    vcfvirtual.index(
        cohort_bcf, refs_path=refs_path, cache_path=tmp_path / "c.cache", variants_chunk_size=100, **options
    )
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parser = vcfvirtual.BCFParser(refs=refs_path)
    vds = open_virtual_dataset(f"file://{cohort_bcf}", registry=registry, parser=parser)
    assert type(vds["call_genotype"].data).__name__ == "ManifestArray"
    if cache_layout == "columns":
        assert vds["call_genotype"].data.manifest.shape_chunk_grid[:2] == (15, 18)
    out = tmp_path / "refs.json"
    vds.vz.to_kerchunk(out, format="json", zarr_format=zarr_format)
    refs = json.loads(out.read_text())["refs"]
    meta = refs["call_genotype/zarr.json" if zarr_format == 3 else "call_genotype/.zarray"]
    assert "vcfvirtual.bcf" in meta
    # VirtualiZarr's Zarr v2 refs carry each array's fill value, which xarray turns into a
    # mask (a genotype -2 pad would read as NaN): v2 readers pass mask_and_scale=False.
    # Its v3 refs read as they are. (vcfvirtual's own JSON declares no fill value.)
    ds = xr.open_zarr(
        "reference://",
        storage_options={"fo": str(out)},
        consolidated=False,
        zarr_format=zarr_format,
        mask_and_scale=zarr_format == 3,
    )
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 100)
    assert_matches_bio2zarr(ds, ref)


def test_parser_without_an_index_names_the_command_that_writes_it(small_bcf, tmp_path):
    bcf = tmp_path / "new.bcf"
    bcf.write_bytes(small_bcf.read_bytes())
    with pytest.raises(VcfVirtualError, match="no vcfvirtual index found") as e:
        vcfvirtual.BCFParser()(bcf.as_uri(), ObjectStoreRegistry({"file://": LocalStore()}))
    assert e.value.hint == f"vcfvirtual index {bcf}"


@pytest.mark.parametrize("name", ["in.vcf", "in.vcf.gz"])
def test_vcf_input_is_converted_with_htslib_and_matches_bio2zarr_on_the_vcf(tmp_path, name):
    import pysam

    from .. import bcfdata

    text = bcfdata.vcf_text(bcfdata.SMALL_RECORDS)
    vcf = tmp_path / name
    if name.endswith(".gz"):
        (tmp_path / "plain.vcf").write_text(text)
        pysam.tabix_compress(str(tmp_path / "plain.vcf"), str(vcf))
        pysam.tabix_index(str(vcf), preset="vcf")  # bio2zarr reads multi-contig VCFs by index
    else:
        vcf.write_text(text)
    refs = tmp_path / (name + ".vcz.json")
    vcfvirtual.index(vcf, refs_path=refs, cache_path=tmp_path / "c.bcf", variants_chunk_size=3)
    # bio2zarr converts the VCF itself: an oracle that never sees our BCF.
    ref = bio2zarr_convert(vcf, tmp_path / "ref.vcz", 3) if name.endswith(".gz") else None
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    if ref is not None:
        assert_matches_bio2zarr(ds, ref)
    with pysam.VariantFile(str(vcf)) as vf:
        assert ds["variant_position"].values.tolist() == [r.pos for r in vf]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_vcf_htslib_cannot_convert_is_a_clear_error(tmp_path):
    vcf = tmp_path / "bad.vcf"
    vcf.write_text(
        "##fileformat=VCFv4.3\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\nchr1\t1\t.\tA\tT\t.\t.\tXX=1\n"
    )
    with pytest.raises(VcfVirtualError, match="htslib cannot convert this VCF") as info:
        vcfvirtual.index(vcf, refs_path=tmp_path / "b.json", cache_path=tmp_path / "b.cache")
    assert str(vcf) in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.vcf"]


def test_parquet_references_read_back_equal_to_json(cohort_bcf, tmp_path):
    bcf = tmp_path / "p.bcf"
    bcf.write_bytes(cohort_bcf.read_bytes())
    vcfvirtual.index(bcf, variants_chunk_size=100, refs_format="parquet")
    vcfvirtual.index(bcf, variants_chunk_size=100, force=True)
    parq, js = tmp_path / "p.bcf.vcz.parq", tmp_path / "p.bcf.vcz.json"
    assert parq.is_dir() and (parq / ".zmetadata").exists()
    ds_parquet = xr.open_zarr(vcfvirtual.open_store(parq), consolidated=False)
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 100)
    assert_matches_bio2zarr(ds_parquet, ref)
    ds_json = xr.open_zarr(vcfvirtual.open_store(js), consolidated=False)
    for name in ds_json.data_vars:
        assert values_equal(ds_parquet[name].values, ds_json[name].values), name
    # Plain xarray and fsspec read it too, without vcfvirtual's help.
    plain = xr.open_zarr(
        "reference://", storage_options={"fo": str(parq), "remote_protocol": "file"}, consolidated=False
    )
    assert plain["call_genotype"].values.tolist() == ref["call_genotype"][:].tolist()


def test_icechunk_repository_reads_back_equal_to_json(cohort_bcf, tmp_path):
    bcf = tmp_path / "i.bcf"
    bcf.write_bytes(cohort_bcf.read_bytes())
    vcfvirtual.index(bcf, variants_chunk_size=100, refs_format="icechunk")
    repo = tmp_path / "i.bcf.vcz.icechunk"
    assert (repo / "repo").exists()
    ds = xr.open_zarr(vcfvirtual.open_store(repo), consolidated=False, zarr_format=3)
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 100)
    assert_matches_bio2zarr(ds, ref)
    assert ds.attrs["vcf_zarr_version"] == "0.3"
    # A changed cache is refused through Icechunk too.
    cache = tmp_path / "i.bcf.vcz.cache.columns" / "part-000000"  # its one part
    cache.write_bytes(cache.read_bytes() + b"\0")
    with pytest.raises(VcfVirtualError, match="does not match"):
        vcfvirtual.open_store(repo)
