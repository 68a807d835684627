"""A remote cache verified once at a size and version (ETag, else Last-Modified) is not
sampled again while the server gives the same: counted at an HTTP server on loopback.
Rewritten (a new version, the same size), it is sampled again and refused when stale;
a server naming no version has it sampled at every open. Values against htslib (pysam)."""

from __future__ import annotations

import email.utils
import os

import pysam
import pytest
import zarr

import vcfvirtual
from vcfvirtual.errors import StaleCacheError
from vcfvirtual.io import remote, user_cache
from vcfvirtual.refs import verdicts
from vcfvirtual.refs.relocate import relocate_file

from .. import bcfdata
from ..conftest import serve_in_thread
from .test_remote_read import RangeHandler, Server


class VersionedHandler(RangeHandler):
    """The counting Range server, naming each file's version as nginx does: Last-Modified
    and an ETag of its mtime and size."""

    def end_headers(self):
        path = self._file()
        if path is not None and self.command == "HEAD":
            st = os.stat(path)
            self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
            self.send_header("ETag", f'"{int(st.st_mtime):x}-{st.st_size:x}"')
        super().end_headers()


def serving(tmp_path, handler):
    served = tmp_path / "www"
    served.mkdir(parents=True)
    cls = type("Handler", (handler,), {"directory": str(served), "stats": {}})
    server = Server(("127.0.0.1", 0), cls)
    serve_in_thread(server)
    return server, served, f"http://127.0.0.1:{server.server_address[1]}/", cls.stats


@pytest.fixture
def served_store(small_bcf, tmp_path, monkeypatch):
    """(refs, serve): serve(handler) serves the cache with ``handler`` until the test
    ends, giving (the served cache part, base URL, request counts)."""
    monkeypatch.setenv(user_cache.ENV, str(tmp_path / "user-cache"))
    refs, cache = tmp_path / "c.vcz.json", tmp_path / "c.cache"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=3, progress=False)

    servers = []

    def serve(handler):
        server, served, base, stats = serving(tmp_path / handler.__name__, handler)
        servers.append(server)
        part = served / cache.name / "part-000000"
        part.parent.mkdir(parents=True)
        part.write_bytes(bcfdata.cache_file(cache).read_bytes())
        return part, base, stats

    yield refs, serve
    for server in servers:
        server.shutdown()


def positions(refs, base) -> list[int]:
    group = zarr.open_group(vcfvirtual.open_store(refs, cache_url=base), mode="r", zarr_format=2)
    return group["variant_position"][:].tolist()


def htslib_positions(bcf) -> list[int]:
    with pysam.VariantFile(str(bcf)) as f:
        return [r.pos for r in f]


def test_a_cache_verified_at_this_version_is_not_sampled_again(served_store, small_bcf, tmp_path):
    refs, serve = served_store
    _, base, stats = serve(VersionedHandler)
    vcfvirtual.open_store(refs, cache_url=base)
    assert stats.get(206, 0) >= 1  # the windows (a small file: one, itself)
    stats.clear()
    vcfvirtual.open_store(refs, cache_url=base)
    assert stats == {}  # one HEAD (not counted), no window
    assert positions(refs, base) == htslib_positions(small_bcf)


def test_references_read_by_url_have_their_verdict_kept(served_store, small_bcf, tmp_path, monkeypatch):
    refs, serve = served_store
    part, base, _ = serve(VersionedHandler)
    relocate_file(refs, base, part.parent.parent / "c.vcz.json")
    calls = []
    found = verdicts.reference_verdict
    monkeypatch.setattr(verdicts, "reference_verdict", lambda *a, **k: calls.append(a[1]) or found(*a, **k))
    for _ in range(2):
        group = zarr.open_group(vcfvirtual.open_store(base + "c.vcz.json"), mode="r", zarr_format=2)
        assert group["variant_position"][:].tolist() == htslib_positions(small_bcf)
    assert calls == [base + "c.vcz.json"]  # the second open took the verdict on the same bytes


def test_a_rewritten_cache_is_sampled_again_and_refused(served_store, tmp_path):
    refs, serve = served_store
    part, base, stats = serve(VersionedHandler)
    vcfvirtual.open_store(refs, cache_url=base)
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the same size, other bytes, a later mtime: a new ETag
    part.write_bytes(bytes(data))
    st = part.stat()
    os.utime(part, (st.st_atime, st.st_mtime + 10))
    stats.clear()
    with pytest.raises(StaleCacheError, match="sampled hash differs"):
        vcfvirtual.open_store(refs, cache_url=base)
    assert stats.get(206, 0) >= 1


def test_a_server_naming_no_version_has_the_cache_sampled_at_every_open(served_store, tmp_path):
    refs, serve = served_store
    _, base, stats = serve(RangeHandler)
    for _ in range(2):
        stats.clear()
        vcfvirtual.open_store(refs, cache_url=base)
        assert stats.get(206, 0) >= 1


def test_an_s3_object_rewritten_at_the_same_size_is_refused(small_bcf, tmp_path, s3_bucket, monkeypatch):
    """S3 gives each write a new ETag (and LastModified): verified once, rewritten, refused."""
    monkeypatch.setenv(user_cache.ENV, str(tmp_path / "user-cache"))
    bucket, fs, options = s3_bucket
    refs, cache = tmp_path / "c.vcz.json", tmp_path / "c.cache"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=3, progress=False)
    part = bcfdata.cache_file(cache)
    key = f"{bucket}/vcz/{cache.name}/{part.name}"
    fs.put_file(str(part), key)
    url = f"s3://{bucket}/vcz/"
    for _ in range(2):  # sampled, then taken as verified
        store = vcfvirtual.open_store(refs, cache_url=url, storage_options=options)
        group = zarr.open_group(store, mode="r", zarr_format=2)
        assert group["variant_position"][:].tolist() == htslib_positions(small_bcf)
    assert len(list((tmp_path / "user-cache" / "remote").iterdir())) == 1
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    fs.pipe_file(key, bytes(data))
    with pytest.raises(StaleCacheError, match="sampled hash differs"):
        vcfvirtual.open_store(refs, cache_url=url, storage_options=options)


@pytest.mark.parametrize(
    ("info", "version"),
    [
        ({"size": 3, "ETag": '"5f-3"', "Last-Modified": "Wed, 01 Jan 2025 00:00:00 GMT"}, 'etag "5f-3"'),
        ({"size": 3, "Last-Modified": "Wed, 01 Jan 2025 00:00:00 GMT"}, "modified Wed, 01 Jan 2025 00:00:00 GMT"),
        ({"size": 3, "etag": "CJ2z", "updated": "2025-01-01T00:00:00Z"}, "etag CJ2z"),
        ({"size": 3}, None),
        ({"size": 3, "ETag": ""}, None),
    ],
)
def test_the_version_is_the_etag_else_the_modification_time(info, version):
    assert remote.object_version(info) == version
