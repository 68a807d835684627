"""A shared Kerchunk JSON naming something else as its cache (issue 21, "cases not yet
reached"): /etc/passwd, another local file, a local HTTP service, a FIFO, /dev/zero, a
directory. The references name it both in their template (what plain Kerchunk follows)
and in their ``vcfvirtual`` attribute (what open_store fingerprints), as a sender would.

Each is read two ways, each in a child process with a deadline, whose outcome and peak
RSS are reported: ``open_store`` must refuse with a typed error, and never read more than
its fingerprint windows of anything; plain ``xr.open_zarr("reference://", ...)`` must not
crash or exhaust memory. Plain Kerchunk follows any URL by design (docs/design.md,
"Untrusted references"): it reads /etc/passwd's bytes into the codec, which refuses them,
and it blocks on a FIFO inside fsspec's ``open``, before any of our code runs: that one
hang is recorded here as what the trust model leaves to plain readers.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vcfvirtual

from .. import bcfdata
from ..conftest import serve_in_thread

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 30  # seconds for one read; a FIFO blocks forever

CHILD = r"""
import json, resource, sys
how, path = sys.argv[1], sys.argv[2]
out = {}
try:
    import xarray as xr
    import vcfvirtual
    from vcfvirtual.errors import VcfVirtualError
    if how == "open_store":
        ds = xr.open_zarr(vcfvirtual.open_store(path), consolidated=False)
    else:
        ds = xr.open_zarr("reference://", storage_options={"fo": path}, consolidated=False)
    {name: ds[name].values for name in ds.data_vars}
    out["outcome"] = "values"
except VcfVirtualError as e:
    out["outcome"], out["error"] = "typed", f"{type(e).__name__}: {e}"
except Exception as e:
    out["outcome"], out["error"] = "untyped", f"{type(e).__name__}: {e}"[:300]
out["peak_mb"] = int(next(x for x in open("/proc/self/status") if x.startswith("VmHWM")).split()[1]) // 1024
print(json.dumps(out))
"""


def read_in_child(refs: Path, how: str, deadline: float = DEADLINE) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, how, str(refs)],
            capture_output=True,
            text=True,
            timeout=deadline,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "hang"}
    if proc.returncode != 0:
        return {"outcome": f"crash {proc.returncode}", "stderr": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with 64 kB of 'x' and records it."""

    requests: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).requests.append(self.path)
        body = b"x" * 65536
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):  # noqa: N802
        type(self).requests.append("HEAD " + self.path)
        self.send_response(200)
        self.send_header("Content-Length", "65536")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    work = tmp_path_factory.mktemp("cacheurls")
    bcf = bcfdata.fuzz_bcf(work / "seed.bcf")
    refs = work / "seed.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=work / "seed.cache", variants_chunk_size=2, progress=False)
    return json.loads(refs.read_text()), work


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    serve_in_thread(httpd)
    yield httpd
    httpd.shutdown()


def pointed_at(doc: dict, url: str, work: Path, name: str) -> Path:
    """The references with their cache (template and attribute) at ``url``: one file, as a
    sender naming one would write them (the index's own cache is a folder of parts, each
    chunk ``{{cache}}/part-000000``; pointed at a file, those names would reach nothing)."""
    doc = json.loads(json.dumps(doc))
    doc["templates"]["cache"] = url
    attrs = json.loads(doc["refs"][".zattrs"])
    attrs["vcfvirtual"]["cache"]["url"] = url
    attrs["vcfvirtual"]["cache"].pop("parts")
    doc["refs"][".zattrs"] = json.dumps(attrs)
    for value in doc["refs"].values():
        if isinstance(value, list):
            assert value[0] == "{{cache}}/part-000000"
            value[0] = "{{cache}}"
    path = work / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def _target(kind: str, work: Path, server) -> str:
    if kind == "passwd":
        return "file:///etc/passwd"
    if kind == "user_file":
        secret = work / "secret.txt"
        secret.write_bytes(b"a user's private notes\n" * 400)
        return f"file://{secret}"
    if kind == "http":
        return f"http://127.0.0.1:{server.server_address[1]}/admin/cache"
    if kind == "fifo":
        fifo = work / "fifo"
        if not fifo.exists():
            os.mkfifo(fifo)
        return f"file://{fifo}"
    if kind == "dev_zero":
        return "file:///dev/zero"
    return f"file://{work}"  # a directory


KINDS = ["passwd", "user_file", "http", "fifo", "dev_zero", "directory"]


@pytest.mark.parametrize("kind", KINDS)
def test_open_store_refuses_every_other_cache(store, server, kind):
    doc, work = store
    refs = pointed_at(doc, _target(kind, work, server), work, f"open-{kind}")
    before = len(_Recorder.requests)
    result = read_in_child(refs, "open_store")
    print("open_store", kind, result)  # with -s: the table in docs/design.md#safety
    assert result["outcome"] == "typed", result
    assert result["error"].startswith(("StaleCacheError", "UntrustedReferenceError")), result
    assert result["peak_mb"] < 1024, result
    if kind == "http":
        # A remote cache is fingerprinted by range reads (bounded: the sampled windows),
        # then refused: nothing beyond those windows is fetched.
        assert all(r.startswith(("/admin/cache", "HEAD /admin/cache")) for r in _Recorder.requests[before:])
        assert len(_Recorder.requests) - before <= 40


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "fifo"])
def test_plain_kerchunk_reads_other_caches_into_typed_errors_or_its_own(store, server, kind):
    """Plain Kerchunk fetches the chunk ranges from whatever the template names: each
    range is bounded by the references, and the codec refuses bytes that are no segment."""
    doc, work = store
    refs = pointed_at(doc, _target(kind, work, server), work, f"plain-{kind}")
    result = read_in_child(refs, "plain")
    print("plain", kind, result)
    # never values, a hang or a crash (http: fsspec refuses to mix its sync and async filesystems)
    assert result["outcome"] in ("typed", "untyped"), result
    assert result["peak_mb"] < 1024, result
    if kind in ("passwd", "user_file", "dev_zero"):
        assert result["outcome"] == "typed", result  # the codec saw the bytes: no VVS2 segment


def _waits_for_a_fifo_writer(pid: int) -> bool | None:
    """Whether a thread of process ``pid`` sleeps in the kernel opening a FIFO until a
    writer comes (its wchan is Linux's ``wait_for_partner``); None where /proc does not
    say where threads sleep (no wchan, or it reads 0)."""
    known = False
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            where = (task / "wchan").read_text().strip()
        except OSError:
            continue
        if where == "wait_for_partner":
            return True
        known = known or where not in ("", "0")
    return False if known else None


def test_plain_kerchunk_blocks_on_a_fifo_which_open_store_refuses(store, server):
    """fsspec opens the FIFO to read a chunk and waits for a writer: outside the codec's
    reach (no byte arrives to refuse). Recorded, so a change in fsspec shows here."""
    doc, work = store
    refs = pointed_at(doc, _target("fifo", work, server), work, "plain-fifo")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "plain", str(refs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # The child is seen asleep opening the FIFO for a writer (the block itself, as
        # soon as it starts) rather than merely still running after a wait longer than
        # its start-up. Where /proc does not tell, the wait: 10 s, a child's start-up
        # being ~2 s, while the FIFO blocks forever.
        deadline = time.monotonic() + DEADLINE
        while proc.poll() is None and time.monotonic() < deadline:
            waiting = _waits_for_a_fifo_writer(proc.pid)
            if waiting is None:
                deadline = min(deadline, time.monotonic() + 10)
            elif waiting:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the plain read ended: {proc.communicate()}"
    finally:
        proc.kill()
        proc.communicate()
