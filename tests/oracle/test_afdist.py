"""benchmarks/afdist.py: the af-dist histogram of a vcfvirtual store equals
`bcftools +af-dist` on the BCF (the oracle), and its fast diploid kernel counts what
numpy counts on any int8 calls (missing, fill, multi-allelic)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vcfvirtual

from .. import bcfdata

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def afdist_module():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import afdist

        yield afdist
    finally:
        sys.path.remove(str(BENCHMARKS))


def _numpy_counts(gt):
    a, b = gt[..., 0].astype(np.int64), gt[..., 1].astype(np.int64)
    ok = (a >= 0) & (b >= 0)
    return [
        (ok * ((a == 0).astype(int) + (b == 0))).sum(axis=1),
        (ok & (a != b)).sum(axis=1),
        (ok & (a == b) & (a > 0)).sum(axis=1),
        2 * ok.sum(axis=1),
    ]


def test_diploid_kernel_counts_as_numpy(afdist_module):
    rng = np.random.default_rng(3)
    gt = rng.integers(-2, 4, size=(57, 301, 2)).astype(np.int8)
    gt[:, ::7] = rng.integers(0, 2, size=(57, 43, 2))  # mostly biallelic calls too
    outs = [np.zeros(gt.shape[0], np.int64) for _ in range(4)]
    afdist_module.count_calls(gt, *outs)
    for got, expected in zip(outs, _numpy_counts(gt), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_diploid_kernel_counts_rows_wider_than_its_16_bit_block(afdist_module):
    # Rows of 2.5 blocks, all hom-REF but for a few calls: the block's REF count reaches
    # 2 * 16,384, and the row's total is summed over blocks without wrapping.
    width = int(2.5 * afdist_module.BLOCK_CALLS)
    gt = np.zeros((3, width, 2), np.int8)
    gt[1, ::5] = (0, 1)
    gt[2, 7::11] = (-1, -1)
    gt[2, ::13] = (1, 1)
    outs = [np.full(gt.shape[0], 5, np.int64) for _ in range(4)]  # counts are added to what is there
    afdist_module.count_calls(gt, *outs)
    for got, expected in zip(outs, _numpy_counts(gt), strict=True):
        np.testing.assert_array_equal(got, expected + 5)
    assert outs[0][0] == 2 * width + 5


@pytest.mark.skipif(shutil.which("bcftools") is None, reason="needs bcftools with its plugins")
@pytest.mark.parametrize(("layout", "samples_chunk_size"), [("columns", 10_000), ("bgzf", 10_000), ("columns", 16)])
def test_histogram_equals_bcftools(afdist_module, tmp_path, layout, samples_chunk_size):
    # 16 samples a chunk: each variant's counts add up over chunks of samples, the last partial.
    # Every call complete, as in the benchmark's cohorts: with a half-missing call ("1/.")
    # bcftools' AF counts the called allele, where afdist.py skips the whole call.
    vcf = re.sub(r"\.(?=[|/])|(?<=[|/])\.", "0", bcfdata.random_cohort_vcf(120, 40, seed=5, contigs=("chr1",)))
    plain = bcfdata.write_bcf(vcf, tmp_path / "plain.bcf", index=False)
    bcf = tmp_path / "af.bcf"
    # Biallelic sites with INFO/AF, what +af-dist bins by.
    subprocess.run(
        f"bcftools view -m2 -M2 -Ou '{plain}' | bcftools +fill-tags -Ob -o '{bcf}' -- -t AF", shell=True, check=True
    )
    plugin = subprocess.run(["bcftools", "+af-dist", str(bcf)], capture_output=True, text=True)
    if plugin.returncode != 0:
        pytest.skip(f"bcftools +af-dist unavailable: {plugin.stderr[:200]}")
    expected = [int(line.split("\t")[3]) for line in plugin.stdout.splitlines() if line.startswith("PROB_DIST")]
    refs = tmp_path / "af.vcz.json"
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_layout=layout,
        variants_chunk_size=16,
        samples_chunk_size=samples_chunk_size,
        progress=False,
    )
    assert afdist_module.afdist(str(refs)).tolist() == expected
    assert sum(expected) > 0
