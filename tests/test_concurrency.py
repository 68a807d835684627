"""Many readers at once: dask's threaded and process schedulers, and a thread pool
hammering random chunks, read the same values as one reader and as bio2zarr, from a cache
that nothing may write to."""

from __future__ import annotations

import contextlib
import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import xarray as xr
import zarr

import vcfvirtual

from .conftest import bio2zarr_convert, values_equal

ARRAYS = ["call_genotype", "call_genotype_phased", "variant_position", "variant_allele", "variant_filter",
          "variant_quality", "variant_id"]
CHUNK = 100


@contextlib.contextmanager
def immutable(*paths):
    """Make files immutable (chattr +i), so that even root cannot open them for writing:
    any reader that tried would fail instead of passing unnoticed."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("chattr not available")
    done = []
    try:
        for p in paths:
            if subprocess.run([chattr, "+i", str(p)], capture_output=True).returncode != 0:
                pytest.skip("this filesystem does not support immutable files")
            done.append(p)
        with pytest.raises(PermissionError):
            open(paths[0], "r+b").close()
        yield
    finally:
        for p in done:
            subprocess.run([chattr, "-i", str(p)], check=True)


@pytest.fixture(scope="module")
def store(cohort_bcf, tmp_path_factory):
    work = tmp_path_factory.mktemp("concurrent")
    refs, cache = work / "c.json", work / "c.cache"
    vcfvirtual.index(cohort_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=CHUNK)
    ref = bio2zarr_convert(cohort_bcf, work / "ref.vcz", CHUNK)
    expected = {name: ref[name][:] for name in ARRAYS}
    return refs, cache, expected


def test_dask_threads_and_processes_read_what_bio2zarr_wrote(store):
    refs, cache, expected = store
    with immutable(cache, refs):
        ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False, chunks={})
        assert ds["call_genotype"].chunks[0][0] == CHUNK
        for scheduler in ("threads", "processes"):
            computed = ds[ARRAYS].compute(scheduler=scheduler, num_workers=4)
            for name in ARRAYS:
                assert values_equal(computed[name].values, expected[name]), (scheduler, name)


def _read_random_chunks(array: zarr.Array, seed: int, n: int):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randrange(0, -(-array.shape[0] // CHUNK))
        out.append((k, array[k * CHUNK : (k + 1) * CHUNK]))
    return out


@pytest.mark.parametrize("route", ["kerchunk", "manifest"])
def test_thread_pool_hammering_random_chunks_reads_consistent_values(store, cohort_bcf, tmp_path, route):
    refs, cache, expected = store
    with immutable(cache, refs):
        if route == "kerchunk":
            group = zarr.open_group(vcfvirtual.open_store(refs), mode="r", zarr_format=2)
        else:
            manifest = vcfvirtual.index(cohort_bcf, refs_path=False, cache_path=tmp_path / "m.cache",
                                        variants_chunk_size=CHUNK)
            group = zarr.open_group(manifest, mode="r", zarr_format=3)
        jobs = [(name, seed) for name in ARRAYS for seed in range(6)]
        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(lambda job: (job[0], _read_random_chunks(group[job[0]], job[1], 8)), jobs))
        for name, reads in results:
            for k, values in reads:
                assert values_equal(np.asarray(values), expected[name][k * CHUNK : (k + 1) * CHUNK]), (name, k)
