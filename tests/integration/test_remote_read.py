"""Reading a cache over HTTP range requests and from S3 (moto on loopback): values equal
to bio2zarr's, only ranges fetched, and a changed or missing remote cache refused."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import StaleCacheError
from vcfvirtual.refs.relocate import relocate_file

from .. import bcfdata
from ..conftest import assert_matches_bio2zarr, bio2zarr_convert, serve_in_thread


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves files of ``directory`` with single byte ranges, as object stores and CDNs
    do; counts what it sends."""

    directory = "."
    stats: dict = {}

    def log_message(self, *args):
        pass

    def _file(self):
        path = os.path.join(self.directory, self.path.split("?", 1)[0].lstrip("/"))
        return path if os.path.isfile(path) else None

    def do_HEAD(self):
        path = self._file()
        if path is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self):
        path = self._file()
        if path is None:
            self.send_error(404)
            return
        size = os.path.getsize(path)
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        with open(path, "rb") as f:
            if match is None:
                body, status = f.read(), 200
            else:
                start = int(match.group(1))
                end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.end_headers()
                    return
                f.seek(start)
                body, status = f.read(end - start + 1), 206
        self.stats[status] = self.stats.get(status, 0) + 1
        self.stats["bytes"] = self.stats.get("bytes", 0) + len(body)
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(body)


class Server(http.server.ThreadingHTTPServer):
    # A listen backlog as web servers have (http.server's is 5): the fingerprint's window
    # requests arrive together, and connections beyond the backlog wait for a SYN resend (1 s+).
    request_queue_size = 128


@pytest.fixture
def http_dir(tmp_path):
    """(directory, base URL, request counts) of a local HTTP server with Range support."""
    served = tmp_path / "www"
    served.mkdir()
    handler = type("Handler", (RangeHandler,), {"directory": str(served), "stats": {}})
    server = Server(("127.0.0.1", 0), handler)
    serve_in_thread(server)
    yield served, f"http://127.0.0.1:{server.server_address[1]}/", handler.stats
    server.shutdown()


def _index(bcf, tmp_path, chunk_length=300):
    refs, cache = tmp_path / "c.vcz.json", tmp_path / "c.cache.bcf"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=cache, variants_chunk_size=chunk_length)
    return refs, cache


def test_cache_read_over_http_ranges(cohort_bcf, tmp_path, http_dir):
    served, base, stats = http_dir
    refs, cache = _index(cohort_bcf, tmp_path)
    shutil.copytree(cache, served / cache.name)  # a folder of parts, served as it is
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 300)
    ds = xr.open_zarr(vcfvirtual.open_store(refs, cache_url=base), consolidated=False)
    assert_matches_bio2zarr(ds, ref)
    assert stats.get(206, 0) >= 5 and stats.get(200, 0) == 0  # chunks and hash windows by range
    # Each array reads its chunks' ranges; nothing fetched the whole file per request.
    assert stats["bytes"] < 40 * len(bcfdata.cache_bytes(cache))
    # A collaborator: relocated JSON, plain xarray, fsspec's HTTP filesystem.
    relocate_file(refs, base, tmp_path / "http.vcz.json")
    plain = xr.open_zarr(
        "reference://",
        consolidated=False,
        storage_options={
            "fo": str(tmp_path / "http.vcz.json"),
            "remote_protocol": "http",
            "remote_options": {"asynchronous": True},
        },
    )
    assert_matches_bio2zarr(plain, ref)


def test_changed_or_missing_http_cache_is_refused(small_bcf, tmp_path, http_dir):
    served, base, _ = http_dir
    refs, cache = _index(small_bcf, tmp_path, 3)
    with pytest.raises(StaleCacheError, match=f"cannot reach the transcode cache part {base}c.cache.bcf/part-000000"):
        vcfvirtual.open_store(refs, cache_url=base)
    data = bytearray(bcfdata.cache_file(cache).read_bytes())
    data[len(data) // 2] ^= 0xFF
    served_part = served / cache.name / "part-000000"
    served_part.parent.mkdir()
    served_part.write_bytes(bytes(data))
    with pytest.raises(StaleCacheError, match="sampled hash differs"):
        vcfvirtual.open_store(refs, cache_url=base)
    served_part.write_bytes(bytes(data) + b"x")
    with pytest.raises(StaleCacheError, match="bytes, it was"):
        vcfvirtual.open_store(refs, cache_url=base)


def test_cache_read_from_s3(cohort_bcf, tmp_path, s3_bucket):
    bucket, fs, options = s3_bucket
    refs, cache = _index(cohort_bcf, tmp_path)
    part = bcfdata.cache_file(cache)
    fs.put_file(str(part), f"{bucket}/vcz/{cache.name}/{part.name}")
    ds = xr.open_zarr(
        vcfvirtual.open_store(refs, cache_url=f"s3://{bucket}/vcz/", storage_options=options), consolidated=False
    )
    assert_matches_bio2zarr(ds, bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 300))
    fs.pipe_file(f"{bucket}/vcz/{cache.name}/{part.name}", part.read_bytes()[:-28])  # cut short
    with pytest.raises(StaleCacheError, match="does not match"):
        vcfvirtual.open_store(refs, cache_url=f"s3://{bucket}/vcz/", storage_options=options)
    assert json.loads(refs.read_text())["templates"]["cache"].startswith("file://")  # refs file untouched


def test_bcf_served_over_http_is_indexed_in_place(cohort_bcf, tmp_path, http_dir):
    """A BCF on a web server: streamed by range requests, never saved locally, indexed to
    the same cache a local run writes."""
    served, base, stats = http_dir
    shutil.copy(cohort_bcf, served / "cohort.bcf")
    refs = tmp_path / "http.vcz.json"
    vcfvirtual.index(
        base + "cohort.bcf", refs_path=refs, cache_path=tmp_path / "http.cache.bcf", variants_chunk_size=300
    )
    _, local_cache = _index(cohort_bcf, tmp_path)
    assert bcfdata.cache_bytes(tmp_path / "http.cache.bcf") == bcfdata.cache_bytes(local_cache)
    assert stats.get(206, 0) >= 1 and stats.get(200, 0) == 0
    assert_matches_bio2zarr(
        xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False),
        bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 300),
    )
    assert (
        json.loads(json.loads(refs.read_text())["refs"][".zattrs"])["vcfvirtual"]["sources"][0]["path"]
        == base + "cohort.bcf"
    )


def test_a_missing_library_hint_is_the_install_command(small_bcf, tmp_path):
    """Reaching an S3 cache without s3fs: the hint is what to install, not the URL."""
    refs, _ = _index(small_bcf, tmp_path)
    script = (
        "import sys; sys.modules['s3fs'] = None\n"  # as if s3fs were not installed
        "import vcfvirtual\n"
        "from vcfvirtual.errors import StaleCacheError\n"
        "try:\n"
        f"    vcfvirtual.open_store({str(refs)!r}, cache_url='s3://bucket/c.cache.bcf')\n"
        "except StaleCacheError as e:\n"
        "    print(e.hint)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.startswith("pip install"), out


def test_an_unreachable_s3_endpoint_is_a_typed_error(small_bcf, tmp_path):
    """Whatever the remote library raises (botocore, aiohttp) comes out typed."""
    refs, _ = _index(small_bcf, tmp_path)
    options = {
        "endpoint_url": "http://127.0.0.1:9",
        "key": "k",
        "secret": "s",
        "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}},
    }
    with pytest.raises(StaleCacheError, match="cannot"):
        vcfvirtual.open_store(refs, cache_url="s3://bucket/c.cache.bcf", storage_options=options)


def _sampled_digest(data: bytes) -> str:
    """The crc32-sampled-v2 digest by its definition (fingerprint.py): BLAKE2b-128 of the
    size and each window's CRC32 (zlib's), from the bytes themselves."""
    import hashlib
    import zlib

    from vcfvirtual.io.fingerprint import windows

    h = hashlib.blake2b(len(data).to_bytes(8, "little"), digest_size=16)
    for offset, length in windows(len(data)):
        h.update(zlib.crc32(data[offset : offset + length]).to_bytes(4, "little"))
    return h.hexdigest()


def test_remote_fingerprints_ask_all_sizes_then_all_windows_at_once(tmp_path):
    """Fingerprinting a cache of parts over HTTP is two rounds of requests however many
    parts: each round's requests all reach the server before any is answered (a barrier
    of exactly that many, which requests sent one after another would never fill)."""
    from vcfvirtual.io import remote
    from vcfvirtual.io.fingerprint import windows

    rng = np.random.default_rng(7)
    sizes = (3 << 20, 5000, 1 << 20)  # windows, and files hashed whole
    served = tmp_path / "www"
    served.mkdir()
    blobs = {f"part-{i:06d}": rng.integers(0, 256, n, dtype=np.uint8).tobytes() for i, n in enumerate(sizes)}
    for name, data in blobs.items():
        (served / name).write_bytes(data)
    heads = threading.Barrier(len(blobs), timeout=20)
    gets = threading.Barrier(sum(len(windows(n)) for n in sizes), timeout=20)

    class Gated(RangeHandler):
        directory = str(served)
        stats: dict = {}

        def do_HEAD(self):
            heads.wait()
            super().do_HEAD()

        def do_GET(self):
            gets.wait()
            super().do_GET()

    server = Server(("127.0.0.1", 0), Gated)
    serve_in_thread(server)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        found = remote.fingerprints([base + name for name in blobs])
    finally:
        server.shutdown()
    assert [(f.size, f.digest) for f in found] == [(len(d), _sampled_digest(d)) for d in blobs.values()]
    assert Gated.stats[206] == gets.parties and 200 not in Gated.stats


def test_remote_fingerprints_name_each_missing_object(tmp_path, http_dir):
    from vcfvirtual.errors import VcfVirtualError
    from vcfvirtual.io import remote

    served, base, _ = http_dir
    (served / "here").write_bytes(b"x" * 100)
    here, gone = remote.fingerprints([base + "here", base + "gone"])
    assert here.size == 100 and here.digest == _sampled_digest(b"x" * 100)
    assert isinstance(gone, VcfVirtualError) and gone.path == base + "gone" and "no such object" in gone.problem
