"""Indexing a BCF that lives on S3, writing the cache and references to S3, against a
real S3-compatible server (moto) on loopback. The oracle is bio2zarr on a local copy."""

from __future__ import annotations

import json
import os

import pysam
import pytest
import xarray as xr

import vcfvirtual
import vcfvirtual.cache.columns
import vcfvirtual.scan.partition
from vcfvirtual.errors import OutputExistsError, VcfVirtualError
from vcfvirtual.io import remote as storage

from .. import bcfdata
from ..conftest import assert_matches_bio2zarr, bio2zarr_convert


def test_s3_source_to_s3_cache_and_references(cohort_bcf, s3_bucket, tmp_path):
    bucket, fs, options = s3_bucket
    fs.put_file(str(cohort_bcf), f"{bucket}/in/cohort.bcf")
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 300)
    store = vcfvirtual.index(
        f"s3://{bucket}/in/cohort.bcf",
        refs_path=f"s3://{bucket}/out/cohort.vcz.json",
        cache_path=f"s3://{bucket}/out/cohort.cache.bcf",
        variants_chunk_size=300,
        storage_options=options,
    )
    assert sorted(fs.ls(f"{bucket}/out")) == [f"{bucket}/out/cohort.cache.bcf", f"{bucket}/out/cohort.vcz.json"]
    # The store index returns reads the uploaded cache through obstore.
    assert_matches_bio2zarr(xr.open_zarr(store, zarr_format=3, consolidated=False), ref)
    # A collaborator: the references from S3, the cache from S3, plain xarray and fsspec.
    refs = json.loads(fs.cat_file(f"{bucket}/out/cohort.vcz.json"))
    assert refs["templates"] == {"cache": f"s3://{bucket}/out/cohort.cache.bcf"}
    ds = xr.open_zarr(
        "reference://",
        consolidated=False,
        storage_options={"fo": refs, "remote_protocol": "s3", "remote_options": {**options, "asynchronous": True}},
    )
    assert_matches_bio2zarr(ds, ref)
    # The cache uploaded is the one a local run writes.
    vcfvirtual.index(cohort_bcf, refs_path=False, cache_path=tmp_path / "local.cache.bcf", variants_chunk_size=300)
    uploaded = fs.find(f"{bucket}/out/cohort.cache.bcf")  # a folder of parts, uploaded part by part
    assert uploaded == [f"{bucket}/out/cohort.cache.bcf/part-000000"]
    assert b"".join(fs.cat_file(p) for p in uploaded) == bcfdata.cache_bytes(tmp_path / "local.cache.bcf")


def test_local_source_to_s3_cache(small_bcf, s3_bucket, tmp_path):
    bucket, fs, options = s3_bucket
    refs = tmp_path / "small.vcz.json"
    vcfvirtual.index(
        small_bcf,
        refs_path=refs,
        cache_path=f"s3://{bucket}/small.cache.bcf",
        storage_options=options,
        variants_chunk_size=3,
    )
    assert json.loads(refs.read_text())["templates"] == {"cache": f"s3://{bucket}/small.cache.bcf"}
    ds = xr.open_zarr(
        "reference://",
        consolidated=False,
        storage_options={"fo": str(refs), "remote_protocol": "s3", "remote_options": {**options, "asynchronous": True}},
    )
    assert_matches_bio2zarr(ds, bio2zarr_convert(small_bcf, tmp_path / "ref.vcz", 3))
    assert not list(tmp_path.glob(".*"))  # no local staging left behind


def test_failed_upload_leaves_nothing_under_the_final_names(cohort_bcf, s3_bucket, monkeypatch):
    bucket, fs, options = s3_bucket
    real_upload = storage.upload

    def failing(local, url, storage_options=None):
        if url.endswith(".json"):
            raise OSError(28, "No space left on device")
        real_upload(local, url, storage_options)

    monkeypatch.setattr(storage, "upload", failing)
    with pytest.raises(OSError):
        vcfvirtual.index(
            cohort_bcf,
            refs_path=f"s3://{bucket}/o/c.vcz.json",
            cache_path=f"s3://{bucket}/o/c.cache.bcf",
            storage_options=options,
        )
    assert fs.ls(bucket) == []  # the cache that was uploaded is gone again


def test_existing_outputs_and_missing_sources(small_bcf, s3_bucket):
    bucket, fs, options = s3_bucket
    fs.pipe_file(f"{bucket}/x.cache.bcf", b"someone's")
    with pytest.raises(OutputExistsError, match="already exists"):
        vcfvirtual.index(small_bcf, refs_path=False, cache_path=f"s3://{bucket}/x.cache.bcf", storage_options=options)
    assert fs.cat_file(f"{bucket}/x.cache.bcf") == b"someone's"
    with pytest.raises(VcfVirtualError, match=f"s3://{bucket}/nope.bcf: cannot read"):
        vcfvirtual.index(
            f"s3://{bucket}/nope.bcf", refs_path=False, cache_path=f"s3://{bucket}/n.cache.bcf", storage_options=options
        )
    with pytest.raises(VcfVirtualError, match="in the columns layout only"):
        vcfvirtual.index(
            f"s3://{bucket}/x.bcf", refs_path=False, workers=2, cache_layout="bgzf", storage_options=options
        )


def test_cli_indexes_from_s3_with_storage_options(small_bcf, s3_bucket, tmp_path):
    import subprocess
    import sys

    bucket, fs, options = s3_bucket
    fs.put_file(str(small_bcf), f"{bucket}/small.bcf")
    out = tmp_path / "small.vcz.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "vcfvirtual.cli",
            "index",
            f"s3://{bucket}/small.bcf",
            "-o",
            str(out),
            "--cache",
            str(tmp_path / "small.cache.bcf"),
            "--storage-options",
            json.dumps(options),
        ],
        check=True,
        capture_output=True,
    )
    ds = xr.open_zarr(vcfvirtual.open_store(out), consolidated=False)
    assert_matches_bio2zarr(ds, bio2zarr_convert(small_bcf, tmp_path / "ref.vcz", 1000))
    assert json.loads(out.read_text())["refs"][".zattrs"]  # sources recorded by URL
    assert f"s3://{bucket}/small.bcf" in out.read_text()


def test_dask_workers_read_s3_and_write_the_cache_on_s3(cohort_bcf, s3_bucket, tmp_path, monkeypatch):
    """A LocalCluster's two workers read their partitions of a BCF on S3 by range
    requests and upload the cache's parts to S3 themselves: the caller writes no local
    file over 1 MB (only the references), and the store holds bio2zarr's values."""
    import os
    import tempfile
    import threading

    import vcfvirtual.scan.partition

    distributed = pytest.importorskip("distributed")
    import dask

    bucket, fs, options = s3_bucket
    fs.put_file(str(cohort_bcf), f"{bucket}/in/cohort.bcf")
    # Cut into four partitions (planned by the caller from range reads near the cuts).
    monkeypatch.setattr(vcfvirtual.scan.partition, "MIN_PARTITION_BYTES", os.path.getsize(cohort_bcf) // 4)
    local = tmp_path / "caller"
    local.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(local))  # the caller's staging goes here too
    largest, done = [0], threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            sizes = [f.stat().st_size for f in local.rglob("*") if f.is_file()]
            largest[0] = max([largest[0], *sizes])

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with (
            dask.config.set({"temporary-directory": str(tmp_path / "workers")}),  # Dask's scratch, not ours
            distributed.LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                local_directory=str(tmp_path / "workers"),  # the workers' own, not the caller's
            ) as c,
            distributed.Client(c) as client,
        ):
            vcfvirtual.index(
                f"s3://{bucket}/in/cohort.bcf",
                refs_path=local / "c.vcz.json",
                cache_path=f"s3://{bucket}/out/c.cache.columns",
                variants_chunk_size=100,
                dask_client=client,
                storage_options=options,
            )
    finally:
        done.set()
        watcher.join()
    parts = fs.find(f"{bucket}/out/c.cache.columns")
    assert [p.rsplit("/", 1)[1] for p in parts] == [f"part-{i:06d}" for i in range(len(parts))] and len(parts) >= 2
    assert sorted(p.name for p in local.iterdir()) == ["c.vcz.json"]  # no staging left, no cache here
    assert 0 < largest[0] < 1_000_000
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 100)
    store = vcfvirtual.open_store(local / "c.vcz.json", storage_options=options)
    assert_matches_bio2zarr(xr.open_zarr(store, consolidated=False), ref)


def test_a_failed_part_upload_removes_the_parts_written(cohort_bcf, s3_bucket, monkeypatch):
    """A task that fails while parts are being uploaded ends the run: the parts already
    on S3 are removed and no references are published."""
    bucket, fs, options = s3_bucket
    monkeypatch.setattr(vcfvirtual.cache.columns, "write_run", _fails_after_the_first_part)
    # Partitions of a quarter of the file, so that the run is several tasks.
    monkeypatch.setattr(vcfvirtual.scan.partition, "MIN_PARTITION_BYTES", os.path.getsize(cohort_bcf) // 4)
    with pytest.raises(OSError, match="No space left"):
        vcfvirtual.index(
            cohort_bcf,
            workers=2,
            refs_path=f"s3://{bucket}/o/c.vcz.json",
            cache_path=f"s3://{bucket}/o/c.cache.columns",
            variants_chunk_size=100,
            storage_options=options,
        )
    assert fs.find(bucket) == []


def _fails_after_the_first_part(task, folder, *args):
    if task.first_chunk > 0:
        raise OSError(28, "No space left on device")
    return _write_run(task, folder, *args)


_write_run = vcfvirtual.cache.columns.write_run


def test_force_over_a_cache_of_more_parts_leaves_only_the_new_ones(cohort_bcf, s3_bucket, monkeypatch):
    """A cache in place on S3 indexed again with --force into fewer parts: the old
    parts past the new ones are removed once the new references are published."""
    bucket, fs, options = s3_bucket
    monkeypatch.setattr(vcfvirtual.scan.partition, "MIN_PARTITION_BYTES", os.path.getsize(cohort_bcf) // 4)
    outputs = dict(
        refs_path=f"s3://{bucket}/o/c.vcz.json",
        cache_path=f"s3://{bucket}/o/c.cache.columns",
        variants_chunk_size=100,
        storage_options=options,
    )
    vcfvirtual.index(cohort_bcf, workers=2, **outputs)
    assert len(fs.ls(f"{bucket}/o/c.cache.columns")) > 1
    vcfvirtual.index(cohort_bcf, workers=1, force=True, **outputs)
    fs.invalidate_cache()
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(f"{bucket}/o/c.cache.columns")] == ["part-000000"]
    ds = xr.open_zarr(vcfvirtual.open_store(outputs["refs_path"], storage_options=options), consolidated=False)
    assert ds.variant_position.values.tolist() == [rec.pos for rec in pysam.VariantFile(str(cohort_bcf))]
