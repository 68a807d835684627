"""Reading a columns cache made of parts (a folder of ``part-NNNNNN`` files).

Until the parallel writer writes several parts, the two-part caches here are made by
hand from the one part a serial index writes: its copy becomes ``part-000001``, the
provenance lists both with their fingerprints, and the references of the second half of
the variants chunks name the copy (the same bytes at the same offsets). What is read
through them must still be what htslib (pysam) reads; what is refused, a typed error
naming the part."""

from __future__ import annotations

import asyncio
import json
import os
import shutil

import pysam
import pytest
import xarray as xr
from zarr.buffer import default_buffer_prototype

import vcfvirtual
from vcfvirtual.errors import StaleCacheError, UntrustedReferenceError
from vcfvirtual.io.fingerprint import Fingerprint
from vcfvirtual.refs.open import LocalCacheStore, open_store
from vcfvirtual.refs.relocate import relocate_file

from .... import bcfdata

N_RECORDS, N_SAMPLES, CHUNK = 40, 5, 4  # 10 variants chunks


@pytest.fixture(scope="module")
def bcf(tmp_path_factory):
    d = tmp_path_factory.mktemp("parts-bcf")
    return bcfdata.write_bcf(bcfdata.random_cohort_vcf(N_RECORDS, N_SAMPLES, seed=7), d / "cohort.bcf")


@pytest.fixture(scope="module")
def htslib(bcf):
    with pysam.VariantFile(str(bcf)) as f:
        return [(r.pos, r.alleles, r.info["DP"], [s["GT"] for s in r.samples.values()]) for r in f]


def _split_in_two_parts(refs_path):
    """The references at ``refs_path`` rewritten over a two-part cache: part-000001 a copy
    of part-000000, named by every chunk of the second half of the variants chunks."""
    refs = json.loads(refs_path.read_text())
    attrs = json.loads(refs["refs"][".zattrs"])
    cache = attrs["vcfvirtual"]["cache"]
    folder = cache["url"].removeprefix("file://")
    shutil.copy(f"{folder}/part-000000", f"{folder}/part-000001")
    second = {"name": "part-000001", **Fingerprint.of(f"{folder}/part-000001").to_json()}
    assert [p["name"] for p in cache["parts"]] == ["part-000000"]
    cache["parts"].append(second)
    cache["size"] += second["size"]
    refs["refs"][".zattrs"] = json.dumps(attrs)
    moved = 0
    for key, value in refs["refs"].items():
        if isinstance(value, list) and int(key.split("/")[1].split(".")[0]) >= N_RECORDS // CHUNK // 2:
            assert value[0] == "{{cache}}/part-000000"
            value[0] = "{{cache}}/part-000001"
            moved += 1
    assert moved
    refs_path.write_text(json.dumps(refs))
    return refs_path, folder


@pytest.fixture
def two_parts(bcf, tmp_path):
    local = tmp_path / "cohort.bcf"
    shutil.copy(bcf, local)
    refs = tmp_path / "cohort.vcz.json"
    vcfvirtual.index(local, refs_path=refs, variants_chunk_size=CHUNK, progress=False)
    return _split_in_two_parts(refs)


def _assert_htslibs(ds, htslib):
    assert ds["variant_position"].values.tolist() == [pos for pos, *_ in htslib]
    assert ds["variant_DP"].values.tolist() == [dp for _, _, dp, _ in htslib]
    alleles = ds["variant_allele"].values
    gt = ds["call_genotype"].values
    for k, (_, expected_alleles, _, calls) in enumerate(htslib):
        assert [a for a in alleles[k] if a] == list(expected_alleles), k
        assert gt[k].tolist() == [[-1 if a is None else a for a in call] for call in calls], k


@pytest.mark.parametrize("check", [True, False])
def test_two_parts_read_htslibs_values(two_parts, htslib, check):
    """Checked (the local store, reading each part) and unchecked (plain fsspec
    reference://, rendering ``{{cache}}/part-000001`` itself)."""
    refs, _ = two_parts
    store = open_store(refs, check=check)
    assert isinstance(store, LocalCacheStore) == check
    _assert_htslibs(xr.open_zarr(store, consolidated=False).load(), htslib)


def test_two_parts_moved_with_their_folder_read_the_same(two_parts, htslib, tmp_path):
    """One template moves the whole folder: open_store(cache_url=) and relocate."""
    refs, folder = two_parts
    moved = tmp_path / "elsewhere" / "copy.cache"
    moved.parent.mkdir()
    shutil.move(folder, moved)
    _assert_htslibs(xr.open_zarr(open_store(refs, cache_url=str(moved)), consolidated=False).load(), htslib)
    with pytest.raises(StaleCacheError, match="missing"):
        open_store(refs)
    relocate_file(refs, str(moved))
    _assert_htslibs(xr.open_zarr(open_store(refs), consolidated=False).load(), htslib)


def test_two_parts_through_parquet_references_read_the_same(two_parts, htslib, tmp_path):
    """Parquet has no templates: every chunk names its part's URL, read through the
    guarded reference filesystem."""
    from kerchunk.df import refs_to_dataframe

    refs, folder = two_parts
    loaded = json.loads(refs.read_text())
    resolved = {
        k: [v[0].replace("{{cache}}", loaded["templates"]["cache"]), *v[1:]] if isinstance(v, list) else v
        for k, v in loaded["refs"].items()
    }
    assert resolved["variant_position/9"][0] == f"file://{folder}/part-000001"
    parquet = tmp_path / "cohort.vcz.parq"
    refs_to_dataframe({"version": 1, "refs": resolved}, str(parquet))
    _assert_htslibs(xr.open_zarr(open_store(parquet), consolidated=False).load(), htslib)


@pytest.mark.parametrize("change", ["delete", "truncate", "rewrite"])
def test_a_changed_second_part_is_stale_and_named(two_parts, change):
    refs, folder = two_parts
    part = f"{folder}/part-000001"
    data = bytearray(open(part, "rb").read())
    if change == "delete":
        os.unlink(part)
    elif change == "truncate":
        open(part, "wb").write(data[:-1])
    else:  # same size, one byte changed, mtime put back: only the sampled hash tells
        stat = os.stat(part)
        data[-20] ^= 0xFF
        open(part, "wb").write(data)
        os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(StaleCacheError, match="part-000001") as e:
        open_store(refs)
    assert e.value.path == str(refs)
    assert ("missing" if change == "delete" else "does not match") in e.value.problem


def test_a_part_the_provenance_does_not_list_is_refused(two_parts):
    """A reference naming a part file that is there but unlisted (not fingerprinted)."""
    refs, folder = two_parts
    shutil.copy(f"{folder}/part-000000", f"{folder}/part-000002")
    loaded = json.loads(refs.read_text())
    loaded["refs"]["variant_position/0"][0] = "{{cache}}/part-000002"
    refs.write_text(json.dumps(loaded))
    with pytest.raises(UntrustedReferenceError, match="variant_position/0.*part-000002"):
        open_store(refs)


@pytest.mark.parametrize(
    "url",
    [
        "{{cache}}/../outside",
        "{{cache}}/part-000001/..",
        "{{cache}}/part-000002",
        "{{cache}}//part-000001",
        "/etc/passwd",
        "file:///etc/passwd",
    ],
)
def test_the_local_store_checks_every_fetch(two_parts, url):
    """A reference changed after the checks at open (the store's map is the caller's):
    the fetch itself refuses it, before any file is opened."""
    refs, _ = two_parts
    store = open_store(refs)
    assert isinstance(store, LocalCacheStore)
    store._refs["variant_position/0"] = [url, 0, 4]
    with pytest.raises(UntrustedReferenceError, match="points at"):
        asyncio.run(store.get("variant_position/0", default_buffer_prototype()))
    assert store._fds == {}  # nothing was opened


def test_references_to_a_single_file_columns_cache_still_open(bcf, htslib, tmp_path):
    """References written before the cache was a folder: one file at the cache's URL, every
    chunk ``{{cache}}``, no ``parts`` recorded. Made from a new index by moving its one part
    to the folder's name; they open and read what htslib reads."""
    local = tmp_path / "cohort.bcf"
    shutil.copy(bcf, local)
    refs = tmp_path / "cohort.vcz.json"
    vcfvirtual.index(local, refs_path=refs, variants_chunk_size=CHUNK, progress=False)
    doc = json.loads(refs.read_text())
    attrs = json.loads(doc["refs"][".zattrs"])
    cache = attrs["vcfvirtual"]["cache"]
    folder = cache["url"].removeprefix("file://")
    os.rename(f"{folder}/part-000000", f"{folder}.file")  # keeps its bytes and mtime
    os.rmdir(folder)
    os.rename(f"{folder}.file", folder)
    (part,) = cache.pop("parts")
    cache.update({k: v for k, v in part.items() if k != "name"})  # the file's own fingerprint
    doc["refs"][".zattrs"] = json.dumps(attrs)
    for value in doc["refs"].values():
        if isinstance(value, list):
            value[0] = "{{cache}}"
    refs.write_text(json.dumps(doc))
    store = open_store(refs)
    assert isinstance(store, LocalCacheStore)
    _assert_htslibs(xr.open_zarr(store, consolidated=False).load(), htslib)
    _assert_htslibs(xr.open_zarr(open_store(refs, check=False), consolidated=False).load(), htslib)
