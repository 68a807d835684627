"""open_store on each reference format (Kerchunk JSON, Parquet, Icechunk) reads the
values htslib (pysam) reads from the BCF; what it refuses is a typed error."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import StaleCacheError, UntrustedReferenceError, VcfVirtualError
from vcfvirtual.refs.open import open_store

from .... import bcfdata

FORMATS = {"json": "refs.vcz.json", "parquet": "refs.vcz.parq", "icechunk": "refs.icechunk"}


@pytest.fixture(scope="module")
def htslib(small_bcf):
    with pysam.VariantFile(str(small_bcf)) as f:
        recs = list(f)
        samples = list(f.header.samples)
        contigs = list(f.header.contigs)
    return recs, samples, contigs


@pytest.fixture(scope="module")
def stores(small_bcf, tmp_path_factory):
    out = {}
    for fmt, name in FORMATS.items():
        d = tmp_path_factory.mktemp(f"open-{fmt}")
        bcf = d / "small.bcf"
        shutil.copy(small_bcf, bcf)
        refs = d / name
        vcfvirtual.index(bcf, refs_path=refs, refs_format=fmt, variants_chunk_size=3, progress=False)
        out[fmt] = refs
    return out


def read(refs, **kwargs):
    return xr.open_zarr(open_store(refs, **kwargs), consolidated=False).load()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_values_equal_htslib(stores, htslib, fmt):
    recs, samples, contigs = htslib
    ds = read(stores[fmt])
    assert ds["sample_id"].values.tolist() == samples
    assert ds["contig_id"].values.tolist() == contigs
    assert ds["variant_position"].values.tolist() == [r.pos for r in recs]
    assert [contigs[i] for i in ds["variant_contig"].values] == [r.chrom for r in recs]
    alleles = ds["variant_allele"].values
    for k, r in enumerate(recs):
        assert [a for a in alleles[k] if a] == list(r.alleles)
    gt = ds["call_genotype"].values
    phased = ds["call_genotype_phased"].values
    for k, r in enumerate(recs):
        for s, sample in enumerate(r.samples.values()):
            call = sample["GT"] if "GT" in sample else (None, None)
            expected = [-1 if a is None else a for a in call] + [-2] * (2 - len(call))
            assert gt[k, s].tolist() == expected, (k, s)
            if "GT" in r.format and len(call) == 2 and None not in call:
                assert bool(phased[k, s]) == sample.phased


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_unchecked_open_reads_the_same(stores, htslib, fmt):
    ds = read(stores[fmt], check=False)
    assert ds["variant_position"].values.tolist() == [r.pos for r in htslib[0]]


def test_a_changed_cache_is_refused(small_bcf, tmp_path):
    bcf = tmp_path / "x.bcf"
    shutil.copy(small_bcf, bcf)
    refs = tmp_path / "x.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, progress=False)
    cache = bcfdata.cache_file(json.loads(refs.read_text())["templates"]["cache"].removeprefix("file://"))
    with open(cache, "r+b") as f:
        f.seek(40)
        byte = f.read(1)
        f.seek(40)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(StaleCacheError):
        open_store(refs)


def test_references_without_a_cache_declaration_are_refused(tmp_path):
    refs = tmp_path / "bare.json"
    refs.write_text(json.dumps({"version": 1, "refs": {".zgroup": '{"zarr_format": 2}'}}))
    with pytest.raises(UntrustedReferenceError):
        open_store(refs)


def test_not_references_is_refused(tmp_path):
    refs = tmp_path / "list.json"
    refs.write_text("[1, 2]")
    with pytest.raises(VcfVirtualError):
        open_store(refs)


@pytest.mark.parametrize("fmt", ["parquet", "icechunk"])
def test_cache_url_only_for_json(stores, fmt):
    with pytest.raises(VcfVirtualError, match="cache"):
        open_store(stores[fmt], cache_url="file:///elsewhere/")


def test_values_are_equal_across_formats(stores):
    # Secondary (formats against each other): every variable, not only those compared
    # with pysam above; floats bit for bit (missing and fill are two NaNs).
    json_ds = read(stores["json"])
    for fmt in ("parquet", "icechunk"):
        other = read(stores[fmt])
        assert set(other.data_vars) == set(json_ds.data_vars)
        for name in json_ds.data_vars:
            a, b = other[name].values, json_ds[name].values
            if a.dtype.kind == "f":
                a, b = a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")
            assert np.array_equal(a, b), (fmt, name)


@pytest.mark.parametrize(
    "name,content",
    [
        ("absent.json", None),
        ("a-folder", "dir"),
        ("empty.json", ""),
        ("bad.json", "{bad"),
        ("no-attrs.json", '{"refs": {}}'),
        ("bad-attrs.json", '{"version": 1, "refs": {".zattrs": "not json"}}'),
    ],
)
def test_unreadable_references_are_a_typed_error_naming_them(tmp_path, name, content):
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    with pytest.raises(VcfVirtualError) as info:
        open_store(path)
    assert info.value.path == str(path)


def test_a_cache_cut_short_after_opening_is_a_typed_error(small_bcf, tmp_path):
    """Chunks of a local cache are read straight from the file: one that ends before a
    chunk's range (replaced after the checks at open) is a StaleCacheError naming the
    references, not a short chunk handed to the codec."""
    bcf = tmp_path / "x.bcf"
    shutil.copy(small_bcf, bcf)
    refs = tmp_path / "x.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, variants_chunk_size=3, progress=False)
    cache = bcfdata.cache_file(json.loads(refs.read_text())["templates"]["cache"].removeprefix("file://"))
    ds = xr.open_zarr(open_store(refs), consolidated=False)
    with open(cache, "r+b") as f:
        f.truncate(100)
    with pytest.raises(StaleCacheError) as e:
        ds["call_genotype"].load()
    assert e.value.path == str(refs)


def test_opening_and_reading_json_references_imports_neither_xarray_nor_virtualizarr(stores, htslib):
    """A zarr-only reader (vcztools) opens a store without xarray, pandas and virtualizarr
    (~0.3 s of imports, ten times the rest of a first open): they serve indexing only."""
    import subprocess
    import sys

    code = (
        "import sys, zarr, vcfvirtual\n"
        f"g = zarr.open_group(vcfvirtual.open_store({str(stores['json'])!r}), mode='r', zarr_format=2)\n"
        "print(int(g['variant_position'][:].sum()))\n"
        "print(sorted(m for m in ('xarray', 'virtualizarr', 'pandas') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert int(out[0]) == sum(rec.pos for rec in htslib[0])
    assert out[1] == "[]"
