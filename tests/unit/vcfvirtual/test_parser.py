"""parser: BCFParser in VirtualiZarr's parser protocol opens what ``vcfvirtual index``
wrote, through the caller's registry, as a ManifestStore that reads htslib's values
(pysam); it writes nothing, and refuses a missing index, a changed cache and references
outside the cache with typed errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pysam
import pytest
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestStore

import vcfvirtual
from vcfvirtual.api import references_from
from vcfvirtual.errors import StaleCacheError, UntrustedReferenceError, VcfVirtualError

from ... import bcfdata


def _local() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": LocalStore()})


def _assert_htslib_values(store: ManifestStore, bcf) -> None:
    group = zarr.open_group(store, mode="r", zarr_format=3)
    with pysam.VariantFile(str(bcf)) as vf:
        records = list(vf)
        samples = list(vf.header.samples)
    assert group["variant_position"][:].tolist() == [r.pos for r in records]
    gt = group["call_genotype"][:]
    for i, r in enumerate(records):
        for j, s in enumerate(samples):
            alleles = r.samples[s].get("GT") if "GT" in r.format else None
            expected = [-1 if a is None else a for a in (alleles or ())]
            got = [int(x) for x in gt[i, j] if x != -2]
            assert got == (expected or [-1] * len(got)), (r.pos, s)
    assert np.asarray(group["sample_id"][:]).tolist() == samples


@pytest.fixture
def indexed(small_bcf, tmp_path):
    """A copy of the small BCF, indexed under the default names next to it."""
    bcf = tmp_path / "s.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, variants_chunk_size=3)
    return bcf


def test_parser_reads_the_index_through_the_registry(indexed, tmp_path):
    before = sorted(p.name for p in tmp_path.iterdir())
    store = vcfvirtual.BCFParser()(indexed.as_uri(), _local())
    assert isinstance(store, ManifestStore)
    _assert_htslib_values(store, indexed)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_a_folder_with_a_space_by_path_and_by_quoted_url(small_bcf, tmp_path):
    bcf = tmp_path / "a folder" / "s.bcf"
    bcf.parent.mkdir()
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, variants_chunk_size=3)
    assert "%20" in bcf.as_uri()
    for url in (str(bcf), bcf.as_uri()):
        _assert_htslib_values(vcfvirtual.BCFParser()(url, _local()), bcf)


def test_a_plain_path_and_named_references(small_bcf, tmp_path):
    refs = tmp_path / "elsewhere.json"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "c.cache", variants_chunk_size=3)
    store = vcfvirtual.BCFParser(refs=refs)(str(small_bcf), _local())
    _assert_htslib_values(store, small_bcf)


def test_the_store_reads_through_the_callers_registry(indexed):
    # A registry whose file:// store is rooted at the BCF's folder: the store must resolve
    # the cache through it (a registry of its own would resolve the absolute path).
    registry = ObjectStoreRegistry({indexed.parent.as_uri(): LocalStore(indexed.parent)})
    store = vcfvirtual.BCFParser()(indexed.as_uri(), registry)
    _assert_htslib_values(store, indexed)
    with pytest.raises(VcfVirtualError, match="reaches no store") as e:
        vcfvirtual.BCFParser()(indexed.as_uri(), ObjectStoreRegistry())
    assert e.value.path == f"file://{indexed}.vcz.json"


def test_no_index_is_one_typed_error_naming_the_command(small_bcf, tmp_path):
    bcf = tmp_path / "new.bcf"
    shutil.copy(small_bcf, bcf)
    with pytest.raises(VcfVirtualError, match="no vcfvirtual index found") as e:
        vcfvirtual.BCFParser()(bcf.as_uri(), _local())
    # The command as the CLI takes it: a local file by its path.
    assert e.value.path == bcf.as_uri() and e.value.hint == f"vcfvirtual index {bcf}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.bcf"]


def test_parquet_references_are_refused_with_the_command_that_converts_them(small_bcf, tmp_path):
    pytest.importorskip("fastparquet")
    bcf = tmp_path / "p.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, variants_chunk_size=3, refs_format="parquet")
    parquet = tmp_path / "p.bcf.vcz.parq"
    with pytest.raises(VcfVirtualError, match="reads Kerchunk JSON references") as e:
        vcfvirtual.BCFParser(refs=parquet)(str(bcf), _local())
    assert f"vcfvirtual refs {parquet} --format json" in e.value.hint
    references_from(parquet, "json")  # what the hint runs: then the parser opens it
    _assert_htslib_values(vcfvirtual.BCFParser()(str(bcf), _local()), bcf)


def test_a_changed_cache_is_refused_unless_unchecked(indexed):
    cache = bcfdata.cache_file(indexed.with_name(indexed.name + ".vcz.cache.columns"))
    data = bytearray(cache.read_bytes())
    data[-1] ^= 0xFF
    cache.write_bytes(bytes(data))
    with pytest.raises(StaleCacheError, match="does not match"):
        vcfvirtual.BCFParser()(indexed.as_uri(), _local())
    assert isinstance(vcfvirtual.BCFParser(check=False)(indexed.as_uri(), _local()), ManifestStore)


def test_a_reference_outside_the_cache_is_refused(indexed):
    refs_path = indexed.with_name(indexed.name + ".vcz.json")
    refs = json.loads(refs_path.read_text())
    refs["refs"]["variant_position/0"] = ["/etc/passwd", 0, 10]
    refs_path.write_text(json.dumps(refs))
    with pytest.raises(UntrustedReferenceError, match="not at the cache"):
        vcfvirtual.BCFParser()(indexed.as_uri(), _local())


def test_a_cache_on_s3_is_fingerprinted_and_read_through_the_registry(small_bcf, s3_bucket, tmp_path):
    from vcfvirtual.io import remote as storage

    bucket, fs, options = s3_bucket
    fs.put_file(str(small_bcf), f"{bucket}/s.bcf")
    url = f"s3://{bucket}/s.bcf"
    vcfvirtual.index(
        url,
        refs_path=url + ".vcz.json",
        cache_path=url + ".vcz.cache.columns",
        variants_chunk_size=3,
        storage_options=options,
    )
    registry = storage.object_store_registry(url, options)
    _assert_htslib_values(vcfvirtual.BCFParser()(url, registry), small_bcf)
    # The cache uploaded again with a byte changed: the fingerprint read through the
    # registry no longer matches.
    part = f"{bucket}/s.bcf.vcz.cache.columns/part-000000"  # the folder's one part
    data = bytearray(fs.cat_file(part))
    data[len(data) // 2] ^= 0xFF
    fs.pipe_file(part, bytes(data))
    with pytest.raises(StaleCacheError, match=f"part s3://{part} does not match"):
        vcfvirtual.BCFParser()(url, registry)
    fs.rm_file(part)
    with pytest.raises(StaleCacheError, match=f"part s3://{part} is missing"):
        vcfvirtual.BCFParser()(url, registry)
