"""``vcfvirtual inspect``: per-array facts equal bio2zarr's store of the same BCF, stored
bytes equal the references' own lengths, and a changed cache is reported, not raised."""

from __future__ import annotations

import base64
import json
import math
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import vcfvirtual
from vcfvirtual.cli import main
from vcfvirtual.inspect import inspect_store

from ...conftest import bio2zarr_convert

CHUNK = 64


def _index(bcf, tmp_path, refs_format, layout="bgzf"):
    suffix = {"json": ".json", "parquet": ".parq", "icechunk": ".icechunk"}[refs_format]
    refs = tmp_path / f"{bcf.stem}.{layout}{suffix}"
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=tmp_path / f"{bcf.stem}.{refs_format}.{layout}.cache.bcf",
        variants_chunk_size=CHUNK,
        cache_layout=layout,
        refs_format=refs_format,
        force=True,
    )
    return refs


def json_chunk_bytes(refs_path) -> dict[str, int]:
    """Per array, the lengths of its chunks' references plus its inlined chunks' decoded
    sizes, read straight from the Kerchunk JSON."""
    doc = json.loads(Path(refs_path).read_text())
    sizes: dict[str, int] = {}
    for key, value in doc["refs"].items():
        name, _, leaf = key.rpartition("/")
        if not name or leaf.startswith("."):
            continue
        if isinstance(value, list):
            n = value[2]
        elif value.startswith("base64:"):
            n = len(base64.b64decode(value[7:]))
        else:
            n = len(value.encode())
        sizes[name] = sizes.get(name, 0) + n
    return sizes


@pytest.mark.parametrize("refs_format", ["json", "parquet", "icechunk"])
def test_arrays_match_bio2zarr_store(refs_format, cohort_bcf, tmp_path):
    if refs_format == "icechunk":
        pytest.importorskip("icechunk")
    summary = inspect_store(_index(cohort_bcf, tmp_path, refs_format))
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "bio2zarr.vcz", CHUNK)
    ours = {a.name: a for a in summary.arrays}
    assert set(ours) == set(ref.array_keys())
    for name, theirs in ref.arrays():
        a = ours[name]
        assert a.shape == tuple(theirs.shape), name
        if theirs.dtype.kind in "OT":
            assert a.dtype.startswith(("StringDType", "object")), (name, a.dtype)
        else:
            assert a.dtype == str(theirs.dtype), name
        if "variants" in a.dimensions:
            assert a.chunk_shape[0] == theirs.chunks[0] == CHUNK, name
            assert a.nchunks == math.ceil(1500 / CHUNK), name
            assert "vcfvirtual.bcf" in a.codecs
        assert list(a.dimensions) == (theirs.attrs.get("_ARRAY_DIMENSIONS") or list(theirs.metadata.dimension_names))
    assert summary.num_variants == 1500 and summary.num_samples == 120
    assert summary.variants_chunk_size == CHUNK
    assert summary.refs_format == refs_format
    assert summary.fingerprints_match and summary.fingerprint_status() == "matches"


def test_stored_bytes_are_the_references_lengths(cohort_bcf, tmp_path):
    expected = json_chunk_bytes(_index(cohort_bcf, tmp_path, "json"))
    pytest.importorskip("icechunk")
    for refs_format in ("json", "parquet", "icechunk"):
        refs = (
            tmp_path / f"{cohort_bcf.stem}.bgzf.json"
            if refs_format == "json"
            else _index(cohort_bcf, tmp_path, refs_format)
        )
        summary = inspect_store(refs)
        got = {a.name: a.stored_bytes for a in summary.arrays}
        assert got == expected, refs_format
        cache = tmp_path / f"{cohort_bcf.stem}.{refs_format}.bgzf.cache.bcf"
        assert summary.cache_bytes == os.path.getsize(cache)
        # Every variants array references the records: the cache less its header.
        assert 0.9 * os.path.getsize(cache) < expected["call_genotype"] <= os.path.getsize(cache)


def test_cache_location_layout_and_sources(small_bcf, tmp_path):
    refs = _index(small_bcf, tmp_path, "json", layout="raw")
    summary = inspect_store(refs)
    cache = tmp_path / f"{small_bcf.stem}.json.raw.cache.bcf"
    assert summary.cache_url == "file://" + str(cache)
    assert summary.cache_layout == "raw"
    assert summary.cache_bytes == os.path.getsize(cache)
    assert summary.sources == (str(small_bcf),)
    assert not summary.zero_copy


@pytest.mark.parametrize("refs_format", ["json", "parquet", "icechunk"])
def test_a_changed_cache_is_reported_not_raised(refs_format, small_bcf, tmp_path):
    if refs_format == "icechunk":
        pytest.importorskip("icechunk")
    refs = _index(small_bcf, tmp_path, refs_format)
    cache = tmp_path / f"{small_bcf.stem}.{refs_format}.bgzf.cache.bcf"
    before = inspect_store(refs)
    with open(cache, "ab") as f:
        f.write(b"\0")
    with pytest.raises(vcfvirtual.errors.StaleCacheError):
        vcfvirtual.open_store(refs)
    after = inspect_store(refs)
    assert not after.fingerprints_match
    assert str(cache) in after.fingerprint_problem
    assert after.arrays == before.arrays  # still read from the references

    cache.unlink()
    gone = inspect_store(refs)
    assert not gone.fingerprints_match and "missing" in gone.fingerprint_problem


def test_cli_prints_table_and_status(small_bcf, tmp_path):
    refs = _index(small_bcf, tmp_path, "json")
    result = CliRunner().invoke(main, ["inspect", str(refs)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["name", "dtype", "stored"]
    names = {line.split()[0] for line in lines[2 : lines.index("")]}
    ref = bio2zarr_convert(small_bcf, tmp_path / "bio2zarr.vcz", CHUNK)
    assert set(ref.array_keys()) <= names
    assert f"cache:        file://{tmp_path}/{small_bcf.stem}.json.bgzf.cache.bcf" in lines
    assert "layout:       bgzf" in lines
    assert "fingerprints: matches" in lines

    (tmp_path / f"{small_bcf.stem}.json.bgzf.cache.bcf").write_bytes(b"x")
    stale = CliRunner().invoke(main, ["inspect", str(refs)])
    assert stale.exit_code == 0
    assert any(line.startswith("fingerprints: the transcode cache") for line in stale.output.splitlines())


def test_cli_errors_are_one_line(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "empty.json").write_text('{"version": 1, "refs": {}}')
    for target in (tmp_path / "bad.json", tmp_path / "missing.json", tmp_path / "empty.json"):
        result = CliRunner().invoke(main, ["inspect", str(target)])
        assert result.exit_code == 1
        assert result.output.count("\n") == 1 and result.output.startswith("vcfvirtual: error: ")
        assert str(target) in result.output
    bad_options = CliRunner().invoke(main, ["inspect", str(tmp_path / "bad.json"), "--storage-options", "[1]"])
    assert bad_options.exit_code == 1 and "--storage-options" in bad_options.output


def test_help_explains_every_option():
    command = main.commands["inspect"]
    text = CliRunner().invoke(main, ["inspect", "--help"]).output
    for param in command.params:
        if isinstance(param, click.Option):
            assert all(opt in text for opt in param.opts), param.opts
            assert param.help, param.opts


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        (None, "every field, under its ID"),
        ({"rename": {"INFO/filter": "filter_info"}, "omitted": ["FORMAT/PL"]},
         "renamed INFO/filter -> variant_filter_info; omitted on request FORMAT/PL"),
        ({"rename": "x"}, "the store's vcfvirtual.fields attribute is malformed"),
    ],
)  # fmt: skip
def test_fields_line_says_what_was_renamed_and_left_out(fields, text):
    from vcfvirtual.inspect import StoreSummary

    summary = StoreSummary(
        path="s.json", refs_format="json", arrays=(), num_variants=0, num_samples=0, vcf_zarr_version=None,
        cache_url=None, cache_layout=None, cache_bytes=None, zero_copy=False, sources=(), variants_chunk_size=None,
        fingerprints_match=True, attributes={} if fields is None else {"fields": fields},
    )  # fmt: skip
    assert summary.fields_text().startswith(text)
    assert f"fields:       {text}" in summary.to_text()
