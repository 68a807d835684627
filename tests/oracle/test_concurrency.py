"""Many threads and several processes reading one store at once get the same values.

The oracle is bio2zarr's conversion of the same BCF, and a single-threaded read.
Reads go through both ways of opening a store: the Kerchunk JSON (zarr v2, fsspec's
reference filesystem) and the in-memory VirtualiZarr ManifestStore (zarr v3, obstore).

The cache must be opened read-only by every reader. We run as root, so a 0444 mode
proves nothing (root writes it anyway), and Python-level patching of ``open`` would
miss obstore's Rust reads and the dask worker processes. So the kernel is asked:
an inotify watch on the cache and the references reports every open, and every close
of a file opened for writing (IN_CLOSE_WRITE), by any process.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import os
import random
import struct

import numpy as np
import pytest
import xarray as xr
import zarr

import vcfvirtual

from .. import bcfdata
from ..conftest import bio2zarr_convert, values_equal

CHUNK = 50
# Arrays whose chunks every reader decodes: genotypes (the big one), strings, floats, INFO.
ARRAYS = [
    "call_genotype",
    "call_genotype_phased",
    "call_genotype_mask",
    "variant_position",
    "variant_contig",
    "variant_allele",
    "variant_id",
    "variant_quality",
    "variant_filter",
    "variant_DP",
]

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_CLOSE_NOWRITE, IN_OPEN = 0x2, 0x4, 0x8, 0x10, 0x20


class FileWatch:
    """inotify on some files: which kinds of access happened, from any process."""

    def __init__(self, paths):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            pytest.fail(f"inotify_init1 failed: errno {ctypes.get_errno()}")
        mask = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_OPEN
        for p in paths:
            if self.libc.inotify_add_watch(self.fd, os.fsencode(p), mask) < 0:
                pytest.fail(f"inotify_add_watch({p}) failed: errno {ctypes.get_errno()}")
        self.counts = {IN_MODIFY: 0, IN_ATTRIB: 0, IN_CLOSE_WRITE: 0, IN_CLOSE_NOWRITE: 0, IN_OPEN: 0}

    def drain(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.counts
            i = 0
            while i < len(data):
                _wd, mask, _cookie, length = struct.unpack_from("iIII", data, i)
                for bit in self.counts:
                    if mask & bit:
                        self.counts[bit] += 1
                i += 16 + length

    def close(self):
        os.close(self.fd)


@pytest.fixture(scope="module")
def store_files(tmp_path_factory):
    """A 600-variant x 40-sample cohort indexed in both layouts, and bio2zarr's store."""
    work = tmp_path_factory.mktemp("concurrency")
    bcf = bcfdata.write_bcf(bcfdata.random_cohort_vcf(600, 40, seed=11), work / "cohort.bcf")
    ref = bio2zarr_convert(bcf, work / "ref.vcz", CHUNK)
    expected = {name: ref[name][:] for name in ARRAYS}
    out = {}
    for layout in ("raw", "bgzf"):
        refs, cache = work / f"{layout}.json", work / f"{layout}.cache.bcf"
        vcfvirtual.index(
            bcf, refs_path=refs, cache_path=cache, variants_chunk_size=CHUNK, cache_layout=layout, progress=False
        )
        out[layout] = (refs, cache)
    return out, expected


def _check(values: dict, expected: dict, how: str):
    for name in ARRAYS:
        assert values_equal(np.asarray(values[name]), expected[name]), f"{how}: {name} differs from bio2zarr"


@pytest.mark.parametrize("layout", ["raw", "bgzf"])
def test_dask_threads_and_processes_match_bio2zarr(store_files, layout):
    files, expected = store_files
    refs, cache = files[layout]
    watch = FileWatch([cache, refs])
    try:
        # One dask task per zarr chunk: 12 variant chunks per array, decoded concurrently.
        ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False, chunks={})[ARRAYS]
        assert ds["call_genotype"].chunks[0] == (CHUNK,) * 12
        _check(ds.compute(scheduler="threads", num_workers=8), expected, "dask threads")
        # Worker processes reopen the store from the pickled graph: through fsspec's
        # reference:// URL, the way a collaborator without vcfvirtual imported reads it.
        ds_url = xr.open_zarr("reference://", storage_options={"fo": str(refs)}, consolidated=False, chunks={})[ARRAYS]
        _check(ds_url.compute(scheduler="processes", num_workers=3), expected, "dask processes")
        counts = watch.drain()
    finally:
        watch.close()
    assert counts[IN_OPEN] > 0 and counts[IN_CLOSE_NOWRITE] > 0, counts  # the watch saw the reads
    assert counts[IN_CLOSE_WRITE] == counts[IN_MODIFY] == counts[IN_ATTRIB] == 0, counts


@pytest.mark.parametrize("layout", ["raw", "bgzf"])
def test_thread_pool_hammering_random_chunks(store_files, layout, tmp_path):
    """400 random (array, chunk) reads from 16 threads, through both store kinds at
    once, equal a single-threaded read of the same chunk and bio2zarr's values."""
    files, expected = store_files
    refs, cache = files[layout]
    # The ManifestStore comes from index(); make it now, before the watch starts.
    manifest = vcfvirtual.index(
        cache.with_name("cohort.bcf"),
        refs_path=False,
        cache_path=tmp_path / "c.bcf",
        variants_chunk_size=CHUNK,
        cache_layout=layout,
        progress=False,
    )
    watch = FileWatch([cache, refs, tmp_path / "c.bcf"])
    try:
        groups = {
            "kerchunk": zarr.open_group(vcfvirtual.open_store(refs), mode="r", zarr_format=2),
            "manifest": zarr.open_group(manifest, mode="r", zarr_format=3),
        }
        n = expected["variant_position"].shape[0]
        n_chunks = -(-n // CHUNK)
        rng = random.Random(5)
        tasks = [(rng.choice(list(groups)), rng.choice(ARRAYS), rng.randrange(n_chunks)) for _ in range(400)]

        def read(task):
            kind, name, k = task
            return groups[kind][name][k * CHUNK : (k + 1) * CHUNK]

        single = {t: read(t) for t in set(tasks)}  # one thread, one read at a time
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(read, tasks))
        counts = watch.drain()
    finally:
        watch.close()
    for task, got in zip(tasks, results):
        kind, name, k = task
        assert values_equal(got, single[task]), f"{task}: concurrent read differs from single-threaded"
        assert values_equal(got, expected[name][k * CHUNK : (k + 1) * CHUNK]), f"{task}: differs from bio2zarr"
    assert counts[IN_OPEN] > 0 and counts[IN_CLOSE_NOWRITE] > 0, counts
    assert counts[IN_CLOSE_WRITE] == counts[IN_MODIFY] == counts[IN_ATTRIB] == 0, counts
