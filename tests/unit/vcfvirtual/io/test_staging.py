"""Staging: the local folder of a run with URLs exists only while the run does, whatever
way it ends; uploads go cache first; a failed run withdraws what it uploaded. And
issue 11's bug: a remote index run that is refused, or fails, leaves no
``vcfvirtual-upload-*`` folder in the temp directory."""

from __future__ import annotations

import stat
import tempfile

import pytest

import vcfvirtual
from vcfvirtual import api
from vcfvirtual.errors import CorruptBCFError, OutputExistsError, OutputWriteError, VcfVirtualError
from vcfvirtual.io import remote as storage
from vcfvirtual.io.staging import Staging


@pytest.fixture
def tmpdir_(tmp_path, monkeypatch):
    """A private temp directory (TMPDIR) to look for staging folders in."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    return folder


# ------------------------------------------------------------------ the context manager


def test_the_folder_is_private_and_exists_only_inside(tmp_path):
    folder = tmp_path / "staging"
    with Staging(folder) as staging:
        assert folder.is_dir() and stat.S_IMODE(folder.stat().st_mode) == 0o700
        (folder / "cache.bcf").write_bytes(b"x")
        staging.publish()
    assert not folder.exists()


@pytest.mark.parametrize("error", [ValueError("a bug"), KeyboardInterrupt(), OutputWriteError("p", "disk full")])
def test_the_folder_goes_on_every_way_out(tmp_path, error):
    folder = tmp_path / "staging"
    with pytest.raises(type(error)), Staging(folder):
        (folder / "half.bcf").write_bytes(b"x")
        raise error
    assert not folder.exists()


def test_an_existing_folder_is_not_taken_over(tmp_path):
    folder = tmp_path / "staging"
    folder.mkdir()
    (folder / "theirs").write_bytes(b"x")
    with pytest.raises(FileExistsError), Staging(folder):
        pass
    assert (folder / "theirs").read_bytes() == b"x"


def test_without_a_folder_publish_only_places_the_references():
    placed = []
    with Staging(None) as staging:
        staging.publish(lambda: placed.append("refs"))
    assert placed == ["refs"] and staging.uploaded == []


def test_uploads_go_cache_then_references(tmp_path, monkeypatch):
    events = []
    monkeypatch.setattr(storage, "upload", lambda local, url, options=None: events.append(("upload", url)))
    folder = tmp_path / "staging"
    with Staging(folder, cache=(folder / "c", "s3://b/c"), refs=(folder / "r", "s3://b/r")) as staging:
        staging.publish(lambda: events.append(("place", None)))
    assert events == [("upload", "s3://b/c"), ("place", None), ("upload", "s3://b/r")]


def test_a_failed_run_withdraws_its_uploads_from_the_store(tmp_path, s3_bucket):
    bucket, fs, options = s3_bucket
    folder = tmp_path / "staging"
    cache, refs = f"s3://{bucket}/o/c.bcf", f"s3://{bucket}/o/r.json"
    with pytest.raises(RuntimeError), Staging(folder, cache=(folder / "c", cache), refs=(folder / "r", refs),
                                              storage_options=options) as staging:  # fmt: skip
        (folder / "c").write_bytes(b"cache")
        (folder / "r").write_bytes(b"refs")
        staging.publish()
        assert fs.cat_file(cache) == b"cache" and fs.cat_file(refs) == b"refs"
        raise RuntimeError("after publishing, before the run returned")
    assert fs.ls(bucket) == [] and not folder.exists()


def test_a_failed_reference_upload_withdraws_the_cache(tmp_path, s3_bucket, monkeypatch):
    bucket, fs, options = s3_bucket
    folder = tmp_path / "staging"
    cache, refs = f"s3://{bucket}/c.bcf", f"s3://{bucket}/r.json"
    real = storage.upload

    def upload(local, url, storage_options=None):
        if url == refs:
            raise OutputWriteError(url, "cannot upload: connection reset")
        real(local, url, storage_options)

    monkeypatch.setattr(storage, "upload", upload)
    with pytest.raises(OutputWriteError, match="connection reset"):
        with Staging(folder, cache=(folder / "c", cache), refs=(folder / "r", refs), storage_options=options) as s:
            (folder / "c").write_bytes(b"cache")
            (folder / "r").write_bytes(b"refs")
            s.publish()
    assert fs.ls(bucket) == [] and not folder.exists()


def test_a_cache_made_of_parts_is_uploaded_part_by_part_and_withdrawn_whole(tmp_path, s3_bucket, monkeypatch):
    """A folder of parts goes up as one object per part under the cache's URL; a failed
    run withdraws each of them (and nothing else of the bucket's)."""
    bucket, fs, options = s3_bucket
    fs.pipe_file(f"{bucket}/theirs", b"kept")
    folder = tmp_path / "staging"
    cache, refs = f"s3://{bucket}/c.cache.columns", f"s3://{bucket}/r.json"
    real = storage.upload

    def upload(local, url, storage_options=None):
        if url == refs:
            assert sorted(fs.find(cache.removeprefix("s3://"))) == [
                f"{bucket}/c.cache.columns/part-00000{i}" for i in (0, 1)
            ]
            raise OutputWriteError(url, "cannot upload: connection reset")
        real(local, url, storage_options)

    monkeypatch.setattr(storage, "upload", upload)
    with pytest.raises(OutputWriteError, match="connection reset"):
        with Staging(folder, cache=(folder / "c", cache), refs=(folder / "r", refs), storage_options=options) as s:
            (folder / "c").mkdir()
            for i in (0, 1):
                (folder / "c" / f"part-00000{i}").write_bytes(b"part %d" % i)
            (folder / "r").write_bytes(b"refs")
            s.publish()
    fs.invalidate_cache()
    assert fs.find(bucket) == [f"{bucket}/theirs"] and not folder.exists()


def test_a_withdrawal_that_fails_keeps_the_runs_own_error(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "upload", lambda local, url, options=None: None)

    def remove(url, options=None):
        raise PermissionError("no delete permission")

    monkeypatch.setattr(storage, "remove", remove)
    folder = tmp_path / "staging"
    with pytest.raises(ValueError, match="the run's error"), Staging(folder, cache=(folder / "c", "s3://b/c")) as s:
        s.publish()
        raise ValueError("the run's error")
    assert not folder.exists()


# ------------------------------------------------------------------ issue 11: index() leaves no staging


def staging_folders(tmp):
    return list(tmp.glob("vcfvirtual-upload-*"))


@pytest.mark.parametrize(
    ("case", "error", "match"),
    [
        ("bad layout", VcfVirtualError, "unknown cache layout"),
        ("bad chunk size", VcfVirtualError, "at least 1"),
        ("missing source", VcfVirtualError, "nope.bcf: cannot read"),
        ("existing output", OutputExistsError, "already exists"),
        ("corrupt source", CorruptBCFError, None),
    ],
)
def test_a_remote_run_that_is_refused_or_fails_leaves_no_staging(
    small_bcf, s3_bucket, tmpdir_, tmp_path, case, error, match
):
    bucket, fs, options = s3_bucket
    out = f"{bucket}/{case.replace(' ', '-')}"  # the cases share a bucket (named after the test)
    source, kwargs = str(small_bcf), {}
    if case == "bad layout":
        kwargs["cache_layout"] = "gzip"
    elif case == "bad chunk size":
        kwargs["variants_chunk_size"] = 0
    elif case == "missing source":
        source = f"s3://{bucket}/nope.bcf"
    elif case == "existing output":
        fs.pipe_file(f"{out}/out.cache.bcf", b"someone's")
    else:  # a BCF cut in the middle of its records: the scan fails after staging was made
        data = small_bcf.read_bytes()
        import gzip

        plain = gzip.decompress(data)
        fs.pipe_file(f"{bucket}/cut.bcf", plain[: len(plain) - 20])
        source = f"s3://{bucket}/cut.bcf"
    with pytest.raises(error, match=match):
        vcfvirtual.index(
            source,
            refs_path=f"s3://{out}/out.vcz.json",
            cache_path=f"s3://{out}/out.cache.bcf",
            storage_options=options,
            **kwargs,
        )
    assert staging_folders(tmpdir_) == []
    # Nothing under the outputs' names but what was there before.
    expected = [f"{out}/out.cache.bcf"] if case == "existing output" else []
    assert (fs.ls(out, refresh=True) if fs.exists(out) else []) == expected


def test_a_remote_run_interrupted_while_scanning_leaves_no_staging_and_no_uploads(
    small_bcf, s3_bucket, tmpdir_, monkeypatch
):
    bucket, fs, options = s3_bucket
    seen = []

    def interrupted(*args, **kwargs):
        seen.extend(staging_folders(tmpdir_))  # the folder exists while the cache is written
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "write_cache_serial", interrupted)
    with pytest.raises(KeyboardInterrupt):
        vcfvirtual.index(small_bcf, refs_path=f"s3://{bucket}/r.vcz.json", storage_options=options)
    assert len(seen) == 1 and staging_folders(tmpdir_) == [] and fs.ls(bucket) == []


def test_a_successful_remote_run_leaves_no_staging(small_bcf, s3_bucket, tmpdir_):
    bucket, fs, options = s3_bucket
    vcfvirtual.index(
        small_bcf,
        refs_path=f"s3://{bucket}/r.vcz.json",
        cache_path=f"s3://{bucket}/c.cache.bcf",
        storage_options=options,
    )
    assert sorted(fs.ls(bucket)) == [f"{bucket}/c.cache.bcf", f"{bucket}/r.vcz.json"]
    assert staging_folders(tmpdir_) == []
