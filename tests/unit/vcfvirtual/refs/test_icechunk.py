"""Icechunk repositories: recognised by their layout, refused when not one or when the
cache changed; a written repository reads the values htslib reads."""

from __future__ import annotations

import shutil

import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import StaleCacheError
from vcfvirtual.refs.icechunk import is_icechunk_repo, open_icechunk

from .... import bcfdata


@pytest.fixture(scope="module")
def repo(small_bcf, tmp_path_factory):
    d = tmp_path_factory.mktemp("icechunk")
    bcf = d / "small.bcf"
    shutil.copy(small_bcf, bcf)
    refs = d / "small.icechunk"
    vcfvirtual.index(bcf, refs_path=refs, refs_format="icechunk", variants_chunk_size=4, progress=False)
    return refs, d / "small.bcf.vcz.cache.columns"


def test_recognised(repo):
    assert is_icechunk_repo(repo[0])


def test_other_things_are_not_repositories(tmp_path, small_bcf):
    assert not is_icechunk_repo(tmp_path)  # an empty folder
    assert not is_icechunk_repo(small_bcf)  # a file
    assert not is_icechunk_repo(tmp_path / "absent")
    (tmp_path / "x.vcz.parq").mkdir()
    (tmp_path / "x.vcz.parq" / ".zmetadata").write_text("{}")
    assert not is_icechunk_repo(tmp_path / "x.vcz.parq")


def test_open_reads_htslib_positions(repo, small_bcf):
    ds = xr.open_zarr(open_icechunk(repo[0]), consolidated=False, zarr_format=3)
    with pysam.VariantFile(str(small_bcf)) as f:
        assert ds["variant_position"].values.tolist() == [r.pos for r in f]


def test_changed_cache_is_refused(repo, tmp_path):
    refs, folder = repo
    cache = bcfdata.cache_file(folder)  # the one part a serial index writes
    assert cache.exists()
    saved = cache.read_bytes()
    try:
        cache.write_bytes(saved[:-10])
        with pytest.raises(StaleCacheError):
            open_icechunk(refs)
        open_icechunk(refs, check=False)  # unchecked: opens (the caller trusts it)
    finally:
        cache.write_bytes(saved)
