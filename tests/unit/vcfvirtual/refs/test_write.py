"""write_references: each format written where asked; a failure names the references
the user asked for (never the temporary they are written under)."""

from __future__ import annotations

import json
import shutil

import pytest

from vcfvirtual.api import IndexOptions, run_index
from vcfvirtual.errors import OutputWriteError, VcfVirtualError
from vcfvirtual.refs.icechunk import is_icechunk_repo
from vcfvirtual.refs.write import ReferencesOutput, write_references


@pytest.fixture(scope="module")
def indexed(small_bcf, tmp_path_factory):
    d = tmp_path_factory.mktemp("write")
    bcf = d / "small.bcf"
    shutil.copy(small_bcf, bcf)
    cache = d / "small.cache.bcf"
    run = run_index(bcf, IndexOptions(refs_path=False, cache_path=cache, variants_chunk_size=3, progress=False))
    return run.group, cache


def test_json_names_the_public_cache_url(indexed, tmp_path):
    group, cache = indexed
    out = tmp_path / "tmp.json"
    write_references(
        group, ReferencesOutput(out, tmp_path / "r.vcz.json", "json", cache, cache.as_uri(), "s3://bucket/dir/")
    )
    refs = json.loads(out.read_text())
    assert refs["templates"]["cache"] == "s3://bucket/dir/" + cache.name
    assert "variant_position/.zarray" in refs["refs"]


def test_parquet_is_a_directory_of_references(indexed, tmp_path):
    group, cache = indexed
    out = tmp_path / "tmp.parq"
    write_references(group, ReferencesOutput(out, tmp_path / "r.vcz.parq", "parquet", cache, cache.as_uri(), None))
    assert out.is_dir() and (out / ".zmetadata").exists()


def test_icechunk_is_a_repository(indexed, tmp_path):
    group, cache = indexed
    out = tmp_path / "tmp.icechunk"
    write_references(group, ReferencesOutput(out, tmp_path / "r.icechunk", "icechunk", cache, cache.as_uri(), None))
    assert is_icechunk_repo(out)


def test_icechunk_with_a_remote_cache_is_refused(indexed, tmp_path):
    group, cache = indexed
    with pytest.raises(VcfVirtualError, match="Icechunk"):
        write_references(
            group, ReferencesOutput(tmp_path / "t", tmp_path / "r", "icechunk", cache, cache.as_uri(), "s3://b/")
        )


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_write_failure_names_the_references(indexed, tmp_path, fmt):
    group, cache = indexed
    # Its folder is a file: no writer can create it (a read-only folder would not stop root).
    (tmp_path / "a-file").write_text("")
    tmp = tmp_path / "a-file" / ".tmp-refs"
    refs = tmp_path / "asked.vcz.json"
    with pytest.raises(OutputWriteError) as info:
        write_references(group, ReferencesOutput(tmp, refs, fmt, cache, cache.as_uri(), None))
    assert info.value.path == str(refs)
    assert ".tmp-refs" not in str(info.value)
