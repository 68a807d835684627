"""References in another format from an indexed store's own (``vcfvirtual refs``): JSON ->
Parquet -> Icechunk over one cache, every array equal to bio2zarr's, the cache never
written; a stale cache refused."""

from __future__ import annotations

import json
import os

import pytest
import xarray as xr
from click.testing import CliRunner

import vcfvirtual
from vcfvirtual.api import references_from
from vcfvirtual.cli import main
from vcfvirtual.errors import OutputExistsError, StaleCacheError, VcfVirtualError
from vcfvirtual.refs.convert import load_all_references

from .. import bcfdata
from ..conftest import assert_matches_bio2zarr, bio2zarr_convert, layout_options


def _stat(path):
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def _open(refs):
    return xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)


@pytest.mark.parametrize("layout", ["columns", "bgzf"])
def test_json_then_parquet_then_icechunk_from_one_cache(cohort_bcf, tmp_path, layout):
    pytest.importorskip("icechunk")
    refs = tmp_path / "cohort.bcf.vcz.json"
    cache = tmp_path / "cohort.cache"
    vcfvirtual.index(cohort_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=200, **layout_options(layout, 7))
    before = _stat(cache)
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 200)

    parquet = references_from(refs, "parquet")
    assert parquet == tmp_path / "cohort.bcf.vcz.parq" and parquet.is_dir()
    icechunk = references_from(parquet, "icechunk")  # from the Parquet, not the JSON
    assert icechunk == tmp_path / "cohort.bcf.vcz.icechunk"
    from_json = references_from(refs, "icechunk", tmp_path / "other.icechunk")

    assert _stat(cache) == before  # the cache was only read
    for store in (refs, parquet, icechunk, from_json):
        assert_matches_bio2zarr(_open(store), ref)
    # The chunks name the same cache, byte for byte: Parquet written again as JSON is
    # the JSON index wrote.
    back = references_from(parquet, "json", tmp_path / "back.json")
    assert json.loads(back.read_text()) == json.loads(refs.read_text())
    assert _stat(cache) == before


def test_the_cli_line_and_its_default_name(small_bcf, tmp_path):
    refs = tmp_path / "small.bcf.vcz.json"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "small.cache", variants_chunk_size=3)
    result = CliRunner().invoke(main, ["refs", str(refs), "--format", "parquet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "small.bcf.vcz.parq"
    assert f"wrote  {out}" in result.output
    ref = bio2zarr_convert(small_bcf, tmp_path / "ref.vcz", 3)
    assert_matches_bio2zarr(_open(out), ref)

    again = CliRunner().invoke(main, ["refs", str(refs), "--format", "parquet"])
    assert again.exit_code == 1 and again.output.count("\n") == 1
    assert "already exists" in again.output and "--force" in again.output
    assert CliRunner().invoke(main, ["refs", str(refs), "--format", "parquet", "--force"]).exit_code == 0


def test_a_changed_cache_is_refused_with_the_way_out(small_bcf, tmp_path):
    refs = tmp_path / "small.bcf.vcz.json"
    cache = tmp_path / "small.cache"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=3)
    with open(bcfdata.cache_file(cache), "ab") as f:  # its one part
        f.write(b"\0")
    with pytest.raises(StaleCacheError):
        references_from(refs, "parquet")
    assert not (tmp_path / "small.bcf.vcz.parq").exists()
    result = CliRunner().invoke(main, ["refs", str(refs), "--format", "json", "-o", str(tmp_path / "x.json")])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert str(cache) in result.output and "index the BCF again with --force" in result.output
    assert not (tmp_path / "x.json").exists()


def test_a_changed_source_is_refused(tmp_path):

    bcf = bcfdata.small_bcf(tmp_path / "s.bcf")
    refs = tmp_path / "s.bcf.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, variants_chunk_size=3)
    bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[:3]), bcf, index=False)
    with pytest.raises(StaleCacheError):
        references_from(refs, "parquet")


def test_what_is_refused(small_bcf, tmp_path):
    refs = tmp_path / "small.bcf.vcz.json"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "small.cache", variants_chunk_size=3)
    with pytest.raises(VcfVirtualError, match="already json references"):
        references_from(refs, "json")
    with pytest.raises(VcfVirtualError, match="unknown references format"):
        references_from(refs, "zip")
    mine = tmp_path / "mine.parq"
    mine.mkdir()
    with pytest.raises(OutputExistsError, match="not a vcfvirtual references output"):
        references_from(refs, "parquet", mine, force=True)
    pytest.importorskip("icechunk")
    ice = references_from(refs, "icechunk")
    with pytest.raises(VcfVirtualError, match="not Icechunk"):
        references_from(ice, "json", tmp_path / "y.json")


def test_parquet_references_read_back_whole(small_bcf, tmp_path):
    """Every key of the Parquet references (metadata, chunk ranges, inlined chunks) reads
    back as the JSON of the same store holds it."""
    refs = tmp_path / "small.bcf.vcz.json"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "small.cache", variants_chunk_size=3)
    parquet = references_from(refs, "parquet")
    from_json = load_all_references(refs)["refs"]
    from_parquet = load_all_references(parquet)["refs"]
    assert set(from_parquet) == set(from_json)
    for key, value in from_json.items():
        if isinstance(value, list):
            assert from_parquet[key] == value, key
        elif key.rsplit("/", 1)[-1].startswith(".z"):
            assert json.loads(from_parquet[key]) == json.loads(value), key
        else:
            assert from_parquet[key] == value, key


def test_index_in_another_format_names_the_refs_command(small_bcf, tmp_path):
    bcf = tmp_path / "c.bcf"
    bcf.write_bytes(small_bcf.read_bytes())
    assert CliRunner().invoke(main, ["index", str(bcf)]).exit_code == 0
    cache = tmp_path / "c.bcf.vcz.cache.columns"
    before = _stat(cache)
    refused = CliRunner().invoke(main, ["index", "--format", "parquet", str(bcf)])
    assert refused.exit_code == 1 and refused.output.count("\n") == 1
    line = f"vcfvirtual refs {tmp_path / 'c.bcf.vcz.json'} --format parquet"
    assert line in refused.output and "--force" in refused.output
    followed = CliRunner().invoke(main, line.split()[1:])
    assert followed.exit_code == 0, followed.output
    assert _stat(cache) == before
    ref = bio2zarr_convert(small_bcf, tmp_path / "ref.vcz", 10_000)  # the same bytes, indexed
    assert_matches_bio2zarr(_open(tmp_path / "c.bcf.vcz.parq"), ref)
