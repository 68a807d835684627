"""A collaborator's environments: Python 3.11 with vcfvirtual-codec (``pip install
"./codec[s3]"``) and no vcfvirtual (it needs 3.12), one with zarr 3 (beside vcztools), one
with zarr 2 (beside sgkit 0.10, which needs it). The Kerchunk JSON someone shared, with
its cache served over HTTP range requests or from S3 (moto on loopback), opens in both
with the one line the docs give, and holds the values htslib reads from the BCF.

Run when ``VCZTOOLS_PYTHON`` / ``SGKIT_PYTHON`` name those environments' Pythons
(``.ci/run`` builds them)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pysam
import pytest

import vcfvirtual
from vcfvirtual.refs.relocate import relocate_file

from ..conftest import layout_options, serve_in_thread
from .test_remote_read import RangeHandler

ROOT = Path(__file__).resolve().parents[2]
# (the environment's variable, the zarr major version it holds, whether it has dask)
READERS = {"zarr3": ("VCZTOOLS_PYTHON", 3, False), "zarr2": ("SGKIT_PYTHON", 2, True)}

# The line the README, docs/howto/share.md, remote.md and sgkit.md give a collaborator
# (with chunks={} where dask is installed, as sgkit's environment has it), then what it
# read, for the oracle.
LINE = {
    False: 'xr.open_dataset(sys.argv[1], engine="vcfvirtual")',
    True: 'xr.open_dataset(sys.argv[1], engine="vcfvirtual", chunks={})',
}
READ = """
import json, sys
import numpy as np
import xarray as xr
import zarr

ds = {line}

np.save(sys.argv[2], ds["call_genotype"].values)
print(json.dumps({{
    "positions": ds["variant_position"].values.tolist(),
    "samples": ds["sample_id"].values.tolist(),
    "gt_chunks": [list(c) for c in ds["call_genotype"].chunks or ()],
    "zarr": zarr.__version__,
}}))
"""


def _reader(name: str) -> tuple[str, int, str]:
    """(the environment's Python, its zarr major version, the script to run there)."""
    variable, major, dask = READERS[name]
    python = os.environ.get(variable)
    if not python:
        pytest.skip(f"set {variable} (see .ci/run)")
    return python, major, READ.format(line=LINE[dask])


def _serve(directory: Path):
    handler = type("Handler", (RangeHandler,), {"directory": str(directory), "stats": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_thread(server)
    return server, handler.stats


def _expected(bcf: Path):
    with pysam.VariantFile(str(bcf)) as vf:
        records = list(vf)
        samples = list(vf.header.samples)
    gt = [[[-1 if a is None else a for a in s["GT"]] for s in r.samples.values()] for r in records]
    return [r.pos for r in records], samples, gt


def _check_read(proc, tmp_path, bcf, major, variants_chunk, samples_chunk):
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert int(out["zarr"].split(".")[0]) == major
    positions, samples, gt = _expected(bcf)
    assert out["positions"] == positions
    assert out["samples"] == samples
    assert np.load(tmp_path / "gt.npy").tolist() == gt
    if major == 3:
        assert out["gt_chunks"] == []  # no dask there (nor chunks={}): lazily indexed arrays
        return
    # chunks={}: one dask chunk per zarr chunk, as xr.open_zarr gives
    assert out["gt_chunks"][:2] == [_blocks(len(positions), variants_chunk), _blocks(len(samples), samples_chunk)]


def _blocks(n: int, size: int) -> list[int]:
    return [size] * (n // size) + ([n % size] if n % size else [])


def _index(bcf, tmp_path, layout):
    refs = tmp_path / "cohort.vcz.json"
    cache = tmp_path / "cohort.cache.bcf"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=cache, variants_chunk_size=300, **layout_options(layout, 50))
    return refs, cache


def test_the_reader_environments_hold_the_codec_alone():
    for name in READERS:
        python, _, _ = _reader(name)
        probe = subprocess.run([python, "-c", "import vcfvirtual"], capture_output=True, text=True)
        assert probe.returncode != 0, f"{name}: the reader environment should not have vcfvirtual itself"
        # Forced onto this older Python anyway, vcfvirtual says in one line what it needs.
        forced = subprocess.run(
            [python, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); import vcfvirtual"],
            capture_output=True,
            text=True,
        )
        assert "ImportError: vcfvirtual needs Python >= 3.12" in forced.stderr.splitlines()[-1]


# The default layout and columns (samples blocks of 50: 50, 50 and a last of 20); the
# bgzf layout keeps all 120 samples in one chunk.
@pytest.mark.parametrize("layout", ["bgzf", "columns"])
@pytest.mark.parametrize("reader", list(READERS))
def test_the_documented_line_reads_a_shared_json_over_http(cohort_bcf, tmp_path, layout, reader):
    python, major, script = _reader(reader)
    served = tmp_path / "www"
    served.mkdir()
    refs, cache = _index(cohort_bcf, tmp_path, layout)
    server, stats = _serve(served)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        (shutil.copytree if cache.is_dir() else shutil.copy)(cache, served / cache.name)  # columns: a folder
        relocate_file(refs, base, served / refs.name)
        proc = subprocess.run(
            [python, "-c", script, base + refs.name, str(tmp_path / "gt.npy")], capture_output=True, text=True
        )
    finally:
        server.shutdown()
    _check_read(proc, tmp_path, cohort_bcf, major, 300, 50 if layout == "columns" else 120)
    assert stats.get(206, 0) > 0  # the cache read by range requests


@pytest.mark.parametrize("reader", list(READERS))
def test_the_documented_line_reads_a_shared_json_from_s3(cohort_bcf, tmp_path, s3_bucket, reader):
    python, major, script = _reader(reader)
    bucket, fs, options = s3_bucket
    refs, cache = _index(cohort_bcf, tmp_path, "columns")
    for part in sorted(cache.iterdir()):  # a folder of parts
        fs.put_file(str(part), f"{bucket}/vcz/{cache.name}/{part.name}")
    relocate_file(refs, f"s3://{bucket}/vcz/", storage_options=options)
    fs.put_file(str(refs), f"{bucket}/vcz/{refs.name}")
    # Credentials and the endpoint from the usual places, as a collaborator's would be.
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": options["endpoint_url"],
        "AWS_ACCESS_KEY_ID": options["key"],
        "AWS_SECRET_ACCESS_KEY": options["secret"],
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    proc = subprocess.run(
        [python, "-c", script, f"s3://{bucket}/vcz/{refs.name}", str(tmp_path / "gt.npy")],
        capture_output=True,
        text=True,
        env=env,
    )
    _check_read(proc, tmp_path, cohort_bcf, major, 300, 50)
