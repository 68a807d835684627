"""io.remote against an S3-compatible server (moto): what is read through it equals
what s3fs put there, missing objects and failed uploads are typed errors naming the URL,
and the obstore registry built from fsspec options reaches the bucket."""

from __future__ import annotations

import obstore
import pytest

from vcfvirtual.errors import OutputWriteError, VcfVirtualError
from vcfvirtual.io import remote as storage


@pytest.mark.parametrize(
    ("path", "url"),
    [("s3://b/k", True), ("gs://b/k", True), ("https://h/x.bcf", True), ("file:///tmp/x", False), ("/tmp/x", False)],
)
def test_which_locations_are_urls(path, url):
    assert storage.is_url(path) is url


def test_a_path_object_is_never_a_url(tmp_path):
    assert storage.is_url(tmp_path / "s3:" / "x") is False


def test_open_input_reads_the_objects_bytes(s3_bucket):
    bucket, fs, options = s3_bucket
    payload = bytes(range(256)) * 1000
    fs.pipe_file(f"{bucket}/x.bin", payload)
    with storage.open_input(f"s3://{bucket}/x.bin", options) as f:
        assert f.size == len(payload)
        f.seek(1000)
        assert f.read(10) == payload[1000:1010]


def test_a_missing_object_is_a_typed_error_naming_it(s3_bucket):
    bucket, _, options = s3_bucket
    url = f"s3://{bucket}/missing.bcf"
    for read in (storage.open_input, storage.fingerprint):
        with pytest.raises(VcfVirtualError, match="no such object") as e:
            read(url, options)
        assert e.value.path == url


def test_fingerprint_size_and_unchanged(s3_bucket):
    bucket, fs, options = s3_bucket
    url = f"s3://{bucket}/x.bin"
    fs.pipe_file(url, b"a" * 5000)
    fingerprint = storage.fingerprint(url, options)
    assert fingerprint.size == 5000 and storage.unchanged(url, fingerprint, options)
    fs.pipe_file(url, b"b" * 5001)
    assert not storage.unchanged(url, fingerprint, options)


def test_upload_exists_and_remove(tmp_path, s3_bucket):
    bucket, fs, options = s3_bucket
    local = tmp_path / "c.bcf"
    local.write_bytes(b"cache bytes")
    url = f"s3://{bucket}/o/c.bcf"
    assert not storage.exists(url, options)
    storage.upload(local, url, options)
    assert storage.exists(url, options) and fs.cat_file(url) == b"cache bytes"
    storage.remove(url, options)
    storage.remove(url, options)  # already gone: not an error
    assert not fs.exists(url)


def test_a_failed_upload_is_typed_and_leaves_nothing(tmp_path, s3_bucket):
    bucket, fs, options = s3_bucket
    url = f"s3://{bucket}/c.bcf"
    with pytest.raises(OutputWriteError, match="cannot upload") as e:
        storage.upload(tmp_path / "never-written.bcf", url, options)
    assert e.value.path == url and not fs.exists(url)


def test_the_registry_reaches_the_bucket_with_the_fsspec_options(s3_bucket):
    bucket, fs, options = s3_bucket
    fs.pipe_file(f"{bucket}/dir/obj", b"through obstore")
    registry = storage.object_store_registry(f"s3://{bucket}/dir/obj", options)
    store, path = registry.resolve(f"s3://{bucket}/dir/obj")
    assert bytes(obstore.get(store, path).bytes()) == b"through obstore"
