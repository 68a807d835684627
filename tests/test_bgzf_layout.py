"""The chunk-aligned BGZF cache layout: same values, a valid compact BCF."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import vcfvirtual

from .conftest import assert_matches_bio2zarr, bio2zarr_convert, open_both


@pytest.mark.parametrize("chunk_length", [1, 3, 1000])
def test_small_bgzf_matches_bio2zarr(small_bcf, tmp_path, chunk_length):
    ref = bio2zarr_convert(small_bcf, tmp_path / "ref.vcz", chunk_length)
    for ds in open_both(small_bcf, chunk_length, tmp_path, layout="bgzf"):
        assert_matches_bio2zarr(ds, ref)


@pytest.mark.parametrize("chunk_length", [100, 640])
def test_cohort_bgzf_matches_bio2zarr(cohort_bcf, tmp_path, chunk_length):
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", chunk_length)
    for ds in open_both(cohort_bcf, chunk_length, tmp_path, layout="bgzf"):
        assert_matches_bio2zarr(ds, ref)


def test_bgzf_cache_is_a_compact_bcf_bcftools_reads(cohort_bcf, tmp_path):
    bcftools = shutil.which("bcftools")
    if bcftools is None:
        pytest.fail("bcftools is required (apt-get install bcftools)")
    cache = tmp_path / "c.bcf"
    vcfvirtual.index(cohort_bcf, refs_path=False, cache_path=cache, cache_layout="bgzf", variants_chunk_size=100)
    view = lambda p: subprocess.run([bcftools, "view", "-H", str(p)], capture_output=True, check=True).stdout  # noqa: E731
    assert view(cache) == view(cohort_bcf)
    assert subprocess.run([bcftools, "index", "-f", str(cache)], capture_output=True).returncode == 0
    # Chunk-aligned blocks cost a little against htslib's default level-6 zlib BCF.
    assert cache.stat().st_size < 1.3 * cohort_bcf.stat().st_size
