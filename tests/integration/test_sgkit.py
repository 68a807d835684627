"""sgkit reads a vcfvirtual store: the example's sgkit part, on a small simulated cohort,
must count the alleles bcftools counts in the same BCF (the example checks it and exits
non-zero otherwise; the counts are compared here again).

sgkit 0.10 needs zarr 2, so it runs in its own environment, named by ``SGKIT_PYTHON``
(``.ci/run`` builds one); without it the test is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sgkit_analysis.py"


@pytest.mark.skipif(not os.environ.get("SGKIT_PYTHON"), reason="set SGKIT_PYTHON to a Python with sgkit (see .ci/run)")
def test_sgkit_counts_what_bcftools_counts(tmp_path):
    pytest.importorskip("msprime")
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import sgkit_analysis
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    png = tmp_path / "plot.png"
    subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--workdir",
            str(tmp_path),
            "--png",
            str(png),
            "--sgkit-python",
            os.environ["SGKIT_PYTHON"],
            "--diploids",
            "10",
            "--length",
            "3e5",
        ],
        check=True,
        capture_output=True,
    )
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    counts = np.load(tmp_path / "cohort_allele_counts.npy")
    populations = json.loads((tmp_path / "populations.json").read_text())
    expected = sgkit_analysis.bcftools_allele_counts(tmp_path / "two_populations.bcf", populations, counts.shape[2])
    assert counts.shape[0] > 50 and np.array_equal(counts, expected)


# sgkit in its zarr 2 environment, reading our Kerchunk JSON with the codec alone.
SGKIT_COUNTS = """
import sys
import numpy as np
import sgkit as sg
import xarray as xr

ds = xr.open_dataset(sys.argv[1], engine="vcfvirtual", chunks={})  # the line docs/howto/sgkit.md gives
np.save(sys.argv[2], sg.count_variant_alleles(ds).variant_allele_count.values)
np.save(sys.argv[3], sg.count_call_alleles(ds).call_allele_count.values)
"""


# The example above reads the default (bgzf) layout; sgkit's start costs ~30 s a run, so
# this one reads the columns layout (raw adds nothing sgkit sees for its cost).
@pytest.mark.skipif(not os.environ.get("SGKIT_PYTHON"), reason="set SGKIT_PYTHON to a Python with sgkit (see .ci/run)")
@pytest.mark.parametrize("cache_layout", ["columns"])
def test_sgkit_allele_counts_equal_htslib_on_the_columns_layout(cohort_bcf, tmp_path, cache_layout):
    """sgkit's per-variant and per-call allele counts from our store equal the counts of
    htslib's (pysam's) genotypes; columns with samples blocks of 7 (dask chunks over
    samples, a narrower last block)."""
    import pysam

    import vcfvirtual

    from ..conftest import layout_options

    refs = tmp_path / "c.vcz.json"
    vcfvirtual.index(
        cohort_bcf,
        refs_path=refs,
        cache_path=tmp_path / "c.cache",
        variants_chunk_size=200,
        **layout_options(cache_layout, 7),
    )
    variant_npy, call_npy = tmp_path / "variant.npy", tmp_path / "call.npy"
    proc = subprocess.run(
        [os.environ["SGKIT_PYTHON"], "-c", SGKIT_COUNTS, str(refs), str(variant_npy), str(call_npy)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    variant_counts, call_counts = np.load(variant_npy), np.load(call_npy)
    with pysam.VariantFile(str(cohort_bcf)) as vf:
        records = list(vf)
    expected_calls = np.zeros(call_counts.shape, dtype=np.int64)
    for i, rec in enumerate(records):
        for j, call in enumerate(rec.samples.values()):
            for allele in call["GT"]:
                if allele is not None:
                    expected_calls[i, j, allele] += 1
    assert np.array_equal(call_counts, expected_calls)
    assert np.array_equal(variant_counts, expected_calls.sum(axis=1))
