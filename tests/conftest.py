from __future__ import annotations

import gzip
import os
import socketserver
import struct
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

import vcfvirtual

from . import bcfdata

# bio2zarr's conversions, shared by the tests of a run (and its pytest-xdist workers) and
# kept between runs: the equivalence suites compare every cache layout with the same
# conversion, which costs more than indexing. Set by the ``_shared_bio2zarr_conversions``
# fixture: a folder in pytest's cache directory (``.pytest_cache``, gitignored; emptied by
# ``--cache-clear``), or the run's temporary directory under ``-p no:cacheprovider``.
BIO2ZARR_CONVERSIONS: Path | None = None

# The oracle's own code: a conversion is reused only by the same versions of these (and
# of this file's recipe, CONVERSION_RECIPE: bump it when _bio2zarr changes what it asks for).
ORACLE_PACKAGES = ("bio2zarr", "cyvcf2", "zarr", "numcodecs", "numpy")
CONVERSION_RECIPE = 1
# Conversions no run has used for this long are removed at the start of a run.
CONVERSIONS_KEPT_DAYS = 14


def _bio2zarr(bcf: Path, out: Path, chunk_length: int, **options) -> None:
    from bio2zarr import vcf

    # Processes only pay off on the larger corpus files.
    options.setdefault("worker_processes", 2 if bcf.stat().st_size > 1_000_000 else 0)
    vcf.convert([str(bcf)], str(out), variants_chunk_size=chunk_length, **options)


def _conversion_key(bcf: Path, chunk_length: int, options: dict) -> str:
    """What a conversion depends on: the BCF's bytes and its index files' (bio2zarr needs
    an index for a multi-contig file), the options, and the oracle's versions. Never
    anything vcfvirtual wrote: these files are the inputs both sides read."""
    import hashlib
    import importlib.metadata

    digest = hashlib.sha256(bcf.read_bytes())
    for suffix in (".csi", ".tbi"):
        index = bcf.with_name(bcf.name + suffix)
        digest.update(index.read_bytes() if index.exists() else b"-")
    versions = [f"{name}={importlib.metadata.version(name)}" for name in ORACLE_PACKAGES]
    recipe = [f"recipe={CONVERSION_RECIPE}", f"chunk_length={chunk_length}", *versions]
    recipe += [f"{k}={options[k]!r}" for k in sorted(options)]
    digest.update("\n".join(recipe).encode())
    return f"{digest.hexdigest()[:32]}-{chunk_length}{''.join(bcf.suffixes)}"


def bio2zarr_convert(bcf: Path, out: Path, chunk_length: int, **options) -> zarr.Group:
    """The reference conversion: bio2zarr's vcf2zarr on the same BCF (``options`` go to
    ``vcf.convert``, e.g. ``samples_chunk_size``, ``local_alleles``).

    ``out`` is a link to the shared conversion of the same bytes, options and oracle
    versions, made once (see BIO2ZARR_CONVERSIONS); a conversion that fails is not kept,
    so it fails again for every caller."""
    if out.exists():
        return zarr.open_group(str(out), mode="r")
    if BIO2ZARR_CONVERSIONS is None:
        _bio2zarr(bcf, out, chunk_length, **options)
        return zarr.open_group(str(out), mode="r")
    import fcntl
    import os
    import shutil

    key = _conversion_key(bcf, chunk_length, options)
    shared = BIO2ZARR_CONVERSIONS / f"{key}.vcz"
    with open(BIO2ZARR_CONVERSIONS / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker (or run) may be converting the same file
        if not shared.exists():
            # bio2zarr reads the file under its own name (and its index beside it).
            partial = BIO2ZARR_CONVERSIONS / f"{key}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            try:
                _bio2zarr(bcf, partial, chunk_length, **options)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            partial.rename(shared)  # whole or absent: a killed run leaves only the .partial
        os.utime(shared)  # used now: kept by _prune_conversions
    out.symlink_to(shared, target_is_directory=True)
    return zarr.open_group(str(out), mode="r")


def _conversions_dir(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = getattr(config, "cache", None)
    if cache is not None:
        return cache.mkdir("bio2zarr-conversions")
    # No cache provider: one directory per run, under pytest-xdist the workers' common base.
    import os

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "bio2zarr-conversions"


@pytest.fixture(scope="session", autouse=True)
def _shared_bio2zarr_conversions(pytestconfig, tmp_path_factory):
    global BIO2ZARR_CONVERSIONS
    BIO2ZARR_CONVERSIONS = _conversions_dir(pytestconfig, tmp_path_factory)
    BIO2ZARR_CONVERSIONS.mkdir(parents=True, exist_ok=True)
    yield
    BIO2ZARR_CONVERSIONS = None


@pytest.fixture(autouse=True)
def _opens_check_in_full(monkeypatch):
    """Nothing an open finds is kept for the next open of the same files (refs/opened.py:
    only files settled for RACY_SECONDS are, so whether a test's own files are depends on
    how long it took): tests that patch a check between two opens expect it to run. The
    tests of keeping (tests/unit/vcfvirtual/refs/test_opened.py) set it back."""
    from vcfvirtual.refs import opened

    monkeypatch.setattr(opened, "RACY_SECONDS", 1e9)


def pytest_sessionstart(session):
    """Remove conversions no run has used for CONVERSIONS_KEPT_DAYS (once, in the
    controlling process: xdist workers are not started yet)."""
    if hasattr(session.config, "workerinput") or getattr(session.config, "cache", None) is None:
        return
    _prune_conversions(session.config.cache.mkdir("bio2zarr-conversions"))


def _prune_conversions(folder: Path) -> None:
    import shutil
    import time

    cutoff = time.time() - CONVERSIONS_KEPT_DAYS * 86400
    for entry in folder.iterdir():
        # (a .partial is what a killed run left; the next conversion of its key replaces it)
        if entry.suffix in (".vcz", ".partial") and entry.stat().st_mtime < cutoff:
            shutil.rmtree(entry, ignore_errors=True)
            for kept_beside in (".lock", ".verified"):  # the lock, test_corpus's verifier outcome
                entry.with_suffix(kept_beside).unlink(missing_ok=True)


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow (multi-minute corpus files; CI runs them apart: --slow -m slow)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; skipped unless --slow is given")
    # Stores opened by the tests keep their parsed headers (refs/header_cache) in a folder
    # of the run's, not the user's ~/.cache (child processes inherit it).
    if "VCFVIRTUAL_CACHE_DIR" not in os.environ:
        os.environ["VCFVIRTUAL_CACHE_DIR"] = tempfile.mkdtemp(prefix="vcfvirtual-tests-cache-")


def pytest_collection_modifyitems(config, items):
    """Skip (visibly, with the reason in the summary) what is marked slow, unless --slow."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow (CI runs pytest --slow -m slow as a step of its own)")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


# The cache layouts every equivalence suite runs on (tests take the ``cache_layout``
# fixture, or parametrize it with fewer). The columns layout gets samples blocks of
# COLUMNS_SAMPLES_CHUNK: the 3-sample test files then hold a block of 2 and a narrower
# last block of 1.
CACHE_LAYOUTS = ("bgzf", "raw", "columns")
COLUMNS_SAMPLES_CHUNK = 2


def layout_options(layout: str, samples_chunk_size: int = COLUMNS_SAMPLES_CHUNK) -> dict:
    """index() (and open_both) options for a cache layout: columns with small samples blocks."""
    if layout == "columns":
        return {"cache_layout": layout, "samples_chunk_size": samples_chunk_size}
    return {"cache_layout": layout}


@pytest.fixture(params=CACHE_LAYOUTS)
def cache_layout(request) -> str:
    return request.param


def open_both(bcf: Path, chunk_length: int, tmp: Path, layout: str = "bgzf", **options):
    """Our store read both ways: Kerchunk JSON (v2) and the in-memory ManifestStore (v3).

    ``layout`` defaults to the library's default cache layout (``options`` may name it as
    ``cache_layout``, as :func:`layout_options` does); ``options`` go to index()."""
    refs = tmp / (bcf.name + ".vcz.json")
    cache = tmp / (bcf.name + ".cache.bcf")
    options.setdefault("cache_layout", layout)
    store = vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=cache,
        variants_chunk_size=chunk_length,
        force=True,
        **options,
    )
    ds_v3 = xr.open_zarr(store, zarr_format=3, consolidated=False)
    ds_v2 = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    return ds_v2, ds_v3


def header_text_via_gzip(bcf: Path) -> str:
    """The header text, read with Python's gzip module rather than our BGZF reader."""
    with gzip.open(bcf, "rb") as f:
        head = f.read(9)
        (l_text,) = struct.unpack("<I", head[5:9])
        return f.read(l_text).rstrip(b"\0").decode()


def values_equal(ours: np.ndarray, theirs: np.ndarray) -> bool:
    if ours.shape != theirs.shape:
        return False
    if theirs.dtype.kind in "OTU":
        return ours.tolist() == theirs.tolist()
    if theirs.dtype.kind == "f":
        # Bit patterns, so missing (0x7F800001) and fill (0x7F800002) NaNs must match too.
        return np.array_equal(ours.astype(theirs.dtype).view(np.uint32), theirs.view(np.uint32))
    return np.array_equal(ours, theirs)


@dataclass(frozen=True)
class ArraySnapshot:
    """One array of bio2zarr's store, read: its values (``[...]`` indexes them) and attributes."""

    values: np.ndarray
    attrs: dict

    def __getitem__(self, key):
        return self.values[key]


@dataclass(frozen=True)
class GroupSnapshot:
    """bio2zarr's store read into memory once (see :func:`snapshot`)."""

    arrays: dict[str, ArraySnapshot]
    attrs: dict

    def array_keys(self):
        return iter(self.arrays)

    def __getitem__(self, name: str) -> ArraySnapshot:
        return self.arrays[name]


def snapshot(ref: zarr.Group) -> GroupSnapshot:
    """bio2zarr's store as :func:`differences_from_bio2zarr` reads it (array names, values,
    attributes), read once: a test comparing several of our stores with one conversion
    (each layout, each read path) otherwise lists and reads every array of it each time."""
    arrays = {name: ArraySnapshot(ref[name][:], dict(ref[name].attrs)) for name in ref.array_keys()}
    return GroupSnapshot(arrays, dict(ref.attrs))


def differences_from_bio2zarr(ds: xr.Dataset, ref: zarr.Group | GroupSnapshot, ignore=()) -> list[str]:
    """Every way our dataset differs from bio2zarr's store, as readable lines."""
    problems = []
    ref_names = set(ref.array_keys()) - set(ignore)
    ours = set(ds.data_vars)
    if ref_names - ours:
        problems.append(f"arrays bio2zarr writes that we lack: {sorted(ref_names - ours)}")
    if ours - ref_names:
        problems.append(f"arrays we write that bio2zarr does not: {sorted(ours - ref_names)}")
    for name in sorted(ref_names & ours):
        theirs = ref[name]
        expected = theirs[:]
        got = ds[name].values
        if list(ds[name].dims) != theirs.attrs["_ARRAY_DIMENSIONS"]:
            problems.append(f"{name}: dims {list(ds[name].dims)} != {theirs.attrs['_ARRAY_DIMENSIONS']}")
        if expected.dtype.kind in "OT":
            if got.dtype.kind not in "OT":
                problems.append(f"{name}: dtype {got.dtype} is not a string dtype like {expected.dtype}")
        elif got.dtype != expected.dtype:
            problems.append(f"{name}: dtype {got.dtype} != {expected.dtype}")
        if not values_equal(got, expected):
            problems.append(f"{name}: values differ: ours {got.tolist()[:4]} theirs {expected.tolist()[:4]}")
        if "description" in theirs.attrs and ds[name].attrs.get("description") != theirs.attrs["description"]:
            problems.append(
                f"{name}: description {ds[name].attrs.get('description')!r} != {theirs.attrs['description']!r}"
            )
    if ds.attrs["vcf_meta_information"] != [list(x) for x in ref.attrs["vcf_meta_information"]]:
        problems.append("vcf_meta_information differs")
    return problems


def assert_matches_bio2zarr(ds: xr.Dataset, ref: zarr.Group):
    problems = differences_from_bio2zarr(ds, ref)
    assert not problems, "\n".join(problems)


# Filled from test_corpus.py's ("corpus", (file, outcome)) user properties, printed at the
# end of the run. They travel with the test reports, so a run split over pytest-xdist
# workers still prints every file's outcome.
CORPUS_RESULTS: dict[str, str] = {}


def pytest_runtest_logreport(report):
    for key, value in report.user_properties:
        if key == "corpus":
            name, outcome = value
            CORPUS_RESULTS[name] = outcome


def pytest_terminal_summary(terminalreporter):
    if not CORPUS_RESULTS:
        return
    tr = terminalreporter
    tr.section("corpus: vcfvirtual vs bio2zarr")
    for name, outcome in sorted(CORPUS_RESULTS.items()):
        tr.write_line(f"{outcome[:110]:110}  {name}")
    comparable = [o for o in CORPUS_RESULTS.values() if o == "pass" or o.startswith(("xfail", "FAIL"))]
    passed = sum(o == "pass" for o in comparable)
    tr.write_line(
        f"pass rate on files bio2zarr converts: {passed}/{len(comparable)} "
        f"({100 * passed / max(len(comparable), 1):.0f}%), xfail {sum(o.startswith('xfail') for o in comparable)}"
    )


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bcf")


@pytest.fixture(scope="session")
def small_bcf(data_dir) -> Path:
    return bcfdata.small_bcf(data_dir / "small.bcf")


@pytest.fixture(scope="session")
def cohort_bcf(data_dir) -> Path:
    # 1,500 records x 120 samples: ~1.2 MB of records, so many records straddle
    # BGZF block boundaries, and 1,500 is not a multiple of the chunk sizes used.
    return bcfdata.write_bcf(bcfdata.random_cohort_vcf(1500, 120, seed=7), data_dir / "cohort.bcf")


def chunk_bytes(refs_path: Path, key: str) -> bytes:
    """The bytes a Kerchunk reference points at, its cache template resolved by hand."""
    path, offset, length = resolved_refs(refs_path)[key]
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def resolved_refs(refs_path: Path) -> dict:
    """A Kerchunk JSON's references with templates filled in and file:// dropped, so a
    chunk reference is a (local path, offset, length) to open directly."""
    import json

    doc = json.loads(Path(refs_path).read_text())
    out = {}
    for key, value in doc["refs"].items():
        if isinstance(value, list) and value and isinstance(value[0], str):
            url = value[0]
            for name, target in doc.get("templates", {}).items():
                url = url.replace("{{" + name + "}}", target)
            value = [url.removeprefix("file://"), *value[1:]]
        out[key] = value
    return out


class FullDisk:
    """A file that fails as a full disk does once ``room`` bytes (or characters) have
    been written to it; monkeypatched in for ``open`` to test running out of space."""

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def write(self, data):
        self.room -= len(data)
        if self.room < 0:
            import errno
            import os

            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Serve ``server`` from a daemon thread, looking for ``server.shutdown()`` every 50 ms
    rather than socketserver's 0.5 s: a test stopping its server would otherwise wait up
    to half a second for the thread to notice."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="session")
def s3_server():
    """An S3-compatible server (moto) on loopback for the session: fsspec storage options
    reaching it, with a bucket per test made by ``s3_bucket``."""
    moto_server = pytest.importorskip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = {
        "endpoint_url": f"http://{host}:{port}",
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    yield options
    server.stop()


@pytest.fixture
def s3_bucket(s3_server, request):
    """(bucket name, fsspec S3 filesystem, storage options) for a fresh bucket."""
    import re

    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_server)
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-")
    fs.call_s3("create_bucket", Bucket=name)
    return name, fs, s3_server
