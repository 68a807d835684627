"""refs/relocate: where a cache URL points (hand-computed from the rules in cache_target's
docstring), and references that cannot be relocated, as typed errors."""

from __future__ import annotations

import json

import pytest

from vcfvirtual.errors import VcfVirtualError
from vcfvirtual.refs.relocate import cache_target, relocate


def test_a_url_keeps_its_name_or_gets_the_caches_in_a_folder():
    assert cache_target("s3://b/k/c.bcf", "x.cache") == "s3://b/k/c.bcf"
    assert cache_target("s3://b/k/", "x.cache") == "s3://b/k/x.cache"
    assert cache_target("https://h:8/", "x.cache") == "https://h:8/x.cache"


def test_a_local_path_becomes_an_absolute_file_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    assert cache_target("c.bcf", "x.cache") == f"file://{tmp_path}/c.bcf"
    assert cache_target("dir", "x.cache") == f"file://{tmp_path}/dir/x.cache"
    assert cache_target(f"file://{tmp_path}/new/", "x.cache") == f"file://{tmp_path}/new/x.cache"
    assert cache_target(tmp_path / "a b.bcf", "x.cache") == f"file://{tmp_path}/a b.bcf"  # not percent-encoded


@pytest.mark.parametrize("url", ["", "s3://bucket", "http://host:8000"])
def test_urls_naming_no_file_are_refused(url):
    with pytest.raises(VcfVirtualError):
        cache_target(url, "x.cache")


def _refs(cache_url="file:///old/x.cache"):
    attrs = {"vcfvirtual": {"cache": {"url": cache_url, "size": 3}}}
    return {
        "version": 1,
        "templates": {"cache": cache_url},
        "refs": {".zattrs": json.dumps(attrs), "a/0": ["{{cache}}", 0, 3]},
    }


def test_relocate_rewrites_the_template_and_the_attribute_only():
    moved = relocate(_refs(), "s3://b/")
    assert moved["templates"] == {"cache": "s3://b/x.cache"}
    assert json.loads(moved["refs"][".zattrs"])["vcfvirtual"]["cache"]["url"] == "s3://b/x.cache"
    assert moved["refs"]["a/0"] == ["{{cache}}", 0, 3]


def test_references_without_the_template_or_cache_are_refused(tmp_path):
    no_template = {**_refs(), "templates": {}}
    with pytest.raises(VcfVirtualError, match="not by a template"):
        relocate(no_template, "s3://b/", tmp_path / "r.json")
    no_cache = {**_refs(), "refs": {".zattrs": "{}"}}
    with pytest.raises(VcfVirtualError, match="do not name a vcfvirtual cache") as e:
        relocate(no_cache, "s3://b/", tmp_path / "r.json")
    assert str(e.value.path) == str(tmp_path / "r.json")
