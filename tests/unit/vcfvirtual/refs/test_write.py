"""write_references: each format written where asked; a failure names the references
the user asked for (never the temporary they are written under)."""

from __future__ import annotations

import json
import shutil

import pytest

import vcfvirtual
from vcfvirtual.errors import OutputWriteError, VcfVirtualError
from vcfvirtual.refs.icechunk import is_icechunk_repo
from vcfvirtual.refs.write import write_references


@pytest.fixture(scope="module")
def indexed(small_bcf, tmp_path_factory):
    d = tmp_path_factory.mktemp("write")
    bcf = d / "small.bcf"
    shutil.copy(small_bcf, bcf)
    cache = d / "small.cache.bcf"
    store = vcfvirtual.index(bcf, refs_path=False, cache_path=cache, variants_chunk_size=3, progress=False)
    # ManifestStore keeps its group privately; index() hands write_references the same group.
    return store._group, cache


def test_json_names_the_public_cache_url(indexed, tmp_path):
    group, cache = indexed
    out = tmp_path / "tmp.json"
    write_references(
        group,
        out,
        refs_path=tmp_path / "r.vcz.json",
        refs_format="json",
        cache_url="s3://bucket/dir/",
        cache_path=cache,
        local_cache_url=cache.as_uri(),
    )
    refs = json.loads(out.read_text())
    assert refs["templates"]["cache"] == "s3://bucket/dir/" + cache.name
    assert "variant_position/.zarray" in refs["refs"]


def test_parquet_is_a_directory_of_references(indexed, tmp_path):
    group, cache = indexed
    out = tmp_path / "tmp.parq"
    write_references(
        group,
        out,
        refs_path=tmp_path / "r.vcz.parq",
        refs_format="parquet",
        cache_url=None,
        cache_path=cache,
        local_cache_url=cache.as_uri(),
    )
    assert out.is_dir() and (out / ".zmetadata").exists()


def test_icechunk_is_a_repository(indexed, tmp_path):
    group, cache = indexed
    out = tmp_path / "tmp.icechunk"
    write_references(
        group,
        out,
        refs_path=tmp_path / "r.icechunk",
        refs_format="icechunk",
        cache_url=None,
        cache_path=cache,
        local_cache_url=cache.as_uri(),
    )
    assert is_icechunk_repo(out)


def test_icechunk_with_a_remote_cache_is_refused(indexed, tmp_path):
    group, cache = indexed
    with pytest.raises(VcfVirtualError, match="Icechunk"):
        write_references(
            group,
            tmp_path / "t",
            refs_path=tmp_path / "r",
            refs_format="icechunk",
            cache_url="s3://b/",
            cache_path=cache,
            local_cache_url=cache.as_uri(),
        )


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_write_failure_names_the_references(indexed, tmp_path, fmt):
    group, cache = indexed
    # Its folder is a file: no writer can create it (a read-only folder would not stop root).
    (tmp_path / "a-file").write_text("")
    tmp = tmp_path / "a-file" / ".tmp-refs"
    refs = tmp_path / "asked.vcz.json"
    with pytest.raises(OutputWriteError) as info:
        write_references(
            group,
            tmp,
            refs_path=refs,
            refs_format=fmt,
            cache_url=None,
            cache_path=cache,
            local_cache_url=cache.as_uri(),
        )
    assert info.value.path == str(refs)
    assert ".tmp-refs" not in str(info.value)
