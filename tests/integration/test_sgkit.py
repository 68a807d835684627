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
