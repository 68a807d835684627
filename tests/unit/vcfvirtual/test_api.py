"""index() as a pipeline: its public signature and return value unchanged, and the
IndexSummary it hands the command line equal to what is on disk (record counts from
pysam, files found where the summary says)."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pysam
import pytest
import xarray as xr
from virtualizarr.manifests import ManifestStore

import vcfvirtual
from vcfvirtual import api
from vcfvirtual.api import IndexOptions, index_with_summary
from vcfvirtual.errors import OutputWriteError

from ... import bcfdata


def pysam_positions(bcf) -> list[int]:
    with pysam.VariantFile(str(bcf)) as vf:
        return [r.pos for r in vf]


def test_index_keeps_its_public_signature():
    params = inspect.signature(vcfvirtual.index).parameters
    assert list(params) == [
        "bcf_path",
        "refs_path",
        "cache_path",
        "variants_chunk_size",
        "cache_layout",
        "samples_chunk_size",
        "local_alleles",
        "force",
        "progress",
        "inflate_threads",
        "cache_url",
        "refs_format",
        "workers",
        "dask_client",
        "storage_options",
        "rename_fields",
        "fields",
        "exclude_fields",
        "append",
    ]
    assert all(p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "bcf_path")
    # IndexOptions holds the same options, with the same defaults.
    defaults = {name: p.default for name, p in params.items() if name != "bcf_path"}
    assert {name: getattr(IndexOptions(), name) for name in defaults} == defaults
    assert vcfvirtual.IndexOptions is IndexOptions and vcfvirtual.index_with_summary is index_with_summary


def test_index_returns_a_store_of_the_records(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "s.bcf")
    store = vcfvirtual.index(bcf, variants_chunk_size=2)
    assert isinstance(store, ManifestStore)
    ds = xr.open_zarr(store, zarr_format=3, consolidated=False)
    assert ds["variant_position"].values.tolist() == pysam_positions(bcf)


@pytest.mark.parametrize("layout", ["bgzf", "raw"])
def test_the_summary_is_what_was_written(small_bcf, tmp_path, layout):
    bcf = Path(shutil.copy(small_bcf, tmp_path / "s.bcf"))
    _, summary = index_with_summary(bcf, IndexOptions(variants_chunk_size=2, cache_layout=layout))
    assert summary.records == len(pysam_positions(bcf))
    assert summary.references == bcf.with_name("s.bcf.vcz.json") and summary.references.is_file()
    assert summary.refs_format == "json" and summary.cache_layout == layout and not summary.zero_copy
    cache = Path(summary.cache.removeprefix("file://"))
    assert summary.cache.startswith("file://") and cache == bcf.with_name("s.bcf.vcz.cache.bcf")
    assert pysam_positions(cache) == pysam_positions(bcf)  # the cache is a BCF of the same records
    refs = json.loads(summary.references.read_text())["refs"]
    assert json.loads(refs["variant_position/.zarray"])["chunks"] == [summary.variants_chunk_size] == [2]
    assert summary.sources == (bcf,)


def test_the_summary_of_an_uncompressed_bcf_names_it_as_the_cache(small_bcf, tmp_path):
    plain = bcfdata.uncompressed_copy(small_bcf, tmp_path / "plain.bcf")
    _, summary = index_with_summary(plain, IndexOptions())
    assert summary.zero_copy and summary.cache == f"file://{plain}" and summary.cache_layout == "raw"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.bcf", "plain.bcf.vcz.json"]  # no cache made
    assert summary.records == len(pysam_positions(plain))


def test_the_summary_of_several_files_counts_all_their_records(small_bcf, tmp_path):
    a = shutil.copy(small_bcf, tmp_path / "a.bcf")
    b = bcfdata.small_bcf(tmp_path / "b.bcf")
    _, summary = index_with_summary([a, b], IndexOptions(refs_path=tmp_path / "ab.vcz.json", workers=2))
    assert summary.records == len(pysam_positions(a)) + len(pysam_positions(b))
    assert summary.references == tmp_path / "ab.vcz.json" and summary.references.is_file()
    assert (
        summary.cache == f"file://{tmp_path / 'ab.vcz.cache.columns'}"
        and (tmp_path / "ab.vcz.cache.columns" / "part-000000").is_file()  # a folder of parts
    )


def test_no_references_asked_for_none_in_the_summary(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "s.bcf")
    _, summary = index_with_summary(bcf, IndexOptions(refs_path=False))
    assert summary.references is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.bcf", "s.bcf.vcz.cache.columns"]


def test_a_failed_reference_write_names_the_references_and_leaves_nothing(small_bcf, tmp_path, monkeypatch):
    bcf = shutil.copy(small_bcf, tmp_path / "s.bcf")

    def full_disk(group, output):
        tmp_refs = output.tmp
        Path(tmp_refs).write_text("half")  # what a writer leaves when the disk fills
        raise OutputWriteError(tmp_refs, "cannot write the references: No space left on device")

    monkeypatch.setattr(api, "write_references", full_disk)
    with pytest.raises(OutputWriteError, match="No space left") as e:
        vcfvirtual.index(bcf, refs_path=tmp_path / "r.vcz.json")
    assert e.value.path == str(tmp_path / "r.vcz.json")
    # The references are written before the cache is renamed into place: a run that fails
    # there leaves neither output, nor any temporary.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.bcf"]
