"""The xarray backend: ``engine="vcfvirtual"`` opens the Kerchunk JSON with its cache
checked, reading htslib's values; it claims ``.vcz.json`` names only."""

from __future__ import annotations

import shutil

import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import StaleCacheError
from vcfvirtual.xarray_backend import VcfVirtualBackend


@pytest.fixture(scope="module")
def refs(small_bcf, tmp_path_factory):
    d = tmp_path_factory.mktemp("backend")
    bcf = d / "small.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, variants_chunk_size=3, progress=False)
    return d / "small.bcf.vcz.json"


def test_engine_reads_htslib_values(refs, small_bcf):
    ds = xr.open_dataset(refs, engine="vcfvirtual")
    with pysam.VariantFile(str(small_bcf)) as f:
        recs = list(f)
    assert ds["variant_position"].values.tolist() == [r.pos for r in recs]
    assert ds["sample_id"].values.tolist() == ["S1", "S2", "S3"]


def test_engine_is_registered():
    assert "vcfvirtual" in xr.backends.list_engines()


def test_drop_variables(refs):
    ds = xr.open_dataset(refs, engine="vcfvirtual", drop_variables=["call_genotype"])
    assert "call_genotype" not in ds and "variant_position" in ds


@pytest.mark.parametrize(
    "name,claimed",
    [("cohort.bcf.vcz.json", True), ("cohort.json", False), ("cohort.vcz.parq", False), ("x.bcf", False)],
)
def test_guess_can_open(name, claimed, tmp_path):
    assert VcfVirtualBackend().guess_can_open(name) is claimed
    assert VcfVirtualBackend().guess_can_open(tmp_path / name) is claimed


def test_guess_can_open_refuses_non_paths():
    assert VcfVirtualBackend().guess_can_open(object()) is False


def test_changed_cache_is_refused_unless_unchecked(small_bcf, tmp_path):
    bcf = tmp_path / "x.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, progress=False)
    cache = tmp_path / "x.bcf.vcz.cache.columns"
    cache.write_bytes(cache.read_bytes() + b"\x00")  # size no longer the fingerprint's
    with pytest.raises(StaleCacheError):
        xr.open_dataset(tmp_path / "x.bcf.vcz.json", engine="vcfvirtual")
    ds = xr.open_dataset(tmp_path / "x.bcf.vcz.json", engine="vcfvirtual", check=False)
    assert "variant_position" in ds
