"""A collaborator's environment: Python 3.11 with vcfvirtual-codec (from codec/), xarray and
vcztools, and no vcfvirtual (it needs 3.12). The Kerchunk JSON someone shared, with its cache
served over HTTP range requests, opens there with the plain-xarray line the docs give, and
holds the values htslib reads from the BCF.

Runs when ``VCZTOOLS_PYTHON`` names that environment's Python (``.ci/run`` builds it with
``pip install vcztools xarray ./codec``)."""

from __future__ import annotations

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

from ..conftest import layout_options
from .test_remote_read import RangeHandler

ROOT = Path(__file__).resolve().parents[2]
READER_PYTHON = os.environ.get("VCZTOOLS_PYTHON")
pytestmark = pytest.mark.skipif(not READER_PYTHON, reason="set VCZTOOLS_PYTHON (see .ci/run)")

# The line docs/howto/share.md and the README give a collaborator.
READ = """
import json, sys
import numpy as np
import xarray as xr
ds = xr.open_zarr("reference://", consolidated=False, storage_options={
    "fo": sys.argv[1],
    "remote_options": {"asynchronous": True},
})
np.save(sys.argv[2], ds["call_genotype"].values)
print(json.dumps({"positions": ds["variant_position"].values.tolist()}))
"""


# The default layout and columns (samples blocks of 50: 50, 50 and a last of 20).
@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_plain_xarray_reads_a_shared_json_over_http_with_the_codec_alone(cohort_bcf, tmp_path, layout):
    import http.server
    import threading

    probe = subprocess.run([READER_PYTHON, "-c", "import vcfvirtual"], capture_output=True, text=True)
    assert probe.returncode != 0, "the reader environment should not have vcfvirtual itself"
    # Forced onto this older Python anyway, vcfvirtual says in one line what it needs.
    forced = subprocess.run(
        [READER_PYTHON, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); import vcfvirtual"],
        capture_output=True,
        text=True,
    )
    assert "ImportError: vcfvirtual needs Python >= 3.12" in forced.stderr.splitlines()[-1]
    served = tmp_path / "www"
    served.mkdir()
    refs = tmp_path / "cohort.vcz.json"
    vcfvirtual.index(
        cohort_bcf,
        refs_path=refs,
        cache_path=tmp_path / "cohort.cache.bcf",
        variants_chunk_size=300,
        **layout_options(layout, 50),
    )
    shutil.copy(tmp_path / "cohort.cache.bcf", served / "cohort.cache.bcf")
    handler = type("Handler", (RangeHandler,), {"directory": str(served), "stats": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        relocate_file(refs, f"http://127.0.0.1:{server.server_address[1]}/")
        proc = subprocess.run(
            [READER_PYTHON, "-c", READ, str(refs), str(tmp_path / "gt.npy")], capture_output=True, text=True
        )
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert handler.stats.get(206, 0) > 0 and handler.stats.get(200, 0) == 0  # range requests only
    with pysam.VariantFile(str(cohort_bcf)) as vf:
        records = list(vf)
    assert json.loads(proc.stdout)["positions"] == [r.pos for r in records]
    gt = np.load(tmp_path / "gt.npy")
    expected = [[[-1 if a is None else a for a in s["GT"]] for s in r.samples.values()] for r in records]
    assert gt.tolist() == expected
