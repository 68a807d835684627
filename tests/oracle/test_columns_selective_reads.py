"""The columns layout reads only what a query names (issue 12): a few samples fetch only
their samples block's chunks, one array only its own byte ranges. Values against pysam."""

from __future__ import annotations

import numpy as np
import pysam
import pytest
import zarr
from zarr.storage import WrapperStore

import vcfvirtual

from .. import bcfdata
from ..conftest import resolved_refs

SAMPLES_BLOCK = 50  # the cohort's 120 samples: blocks of 50, 50 and 20
CHUNK_LENGTH = 400  # 1,500 records: four variants chunks, the last of 300


class RecordingStore(WrapperStore):
    """Notes every key zarr fetches, so a test can say which chunks a read touched."""

    def __init__(self, store):
        super().__init__(store)
        self.fetched: list[str] = []

    async def get(self, key, prototype, byte_range=None):
        self.fetched.append(key)
        return await self._store.get(key, prototype, byte_range)


@pytest.fixture(scope="module")
def columns_store(cohort_bcf, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("selective")
    refs = tmp / "cohort.vcz.json"
    vcfvirtual.index(
        cohort_bcf,
        refs_path=refs,
        cache_path=tmp / "cohort.cache",
        cache_layout="columns",
        variants_chunk_size=CHUNK_LENGTH,
        samples_chunk_size=SAMPLES_BLOCK,
    )
    return refs


def _open(refs):
    store = RecordingStore(vcfvirtual.open_store(refs))
    return store, zarr.open_group(store, mode="r", zarr_format=2)


def _pysam_genotypes(bcf, samples):
    with pysam.VariantFile(str(bcf)) as vf:
        return np.array(
            [[[-1 if a is None else a for a in rec.samples[s]["GT"]] for s in samples] for rec in vf],
            dtype=np.int8,
        )


def test_ten_samples_fetch_only_their_samples_block(cohort_bcf, columns_store):
    store, group = _open(columns_store)
    gt = group["call_genotype"]
    names = list(group["sample_id"][:])
    store.fetched.clear()
    ten = gt[:, 60:70]  # inside the second block of 50

    n_chunks = -(-1500 // CHUNK_LENGTH)
    assert sorted(store.fetched) == sorted(f"call_genotype/{i}.1.0" for i in range(n_chunks))
    assert np.array_equal(ten, _pysam_genotypes(cohort_bcf, names[60:70]))


def test_one_array_fetches_only_its_own_bytes(cohort_bcf, columns_store):
    store, group = _open(columns_store)
    position = group["variant_position"]
    store.fetched.clear()
    values = position[:]

    with pysam.VariantFile(str(cohort_bcf)) as vf:
        assert values.tolist() == [rec.pos for rec in vf]
    assert store.fetched and all(key.startswith("variant_position/") for key in store.fetched)
    # The bytes behind those keys are a small part of the cache: positions, not records.
    refs = resolved_refs(columns_store)
    read = sum(refs[key][2] for key in store.fetched if key in refs and isinstance(refs[key], (list, tuple)))
    cache_size = len(bcfdata.cache_bytes(columns_store.parent / "cohort.cache"))
    assert 0 < read < cache_size / 20


def test_each_samples_block_is_a_distinct_byte_range(columns_store):
    """Sample chunks (i, j) of one variants chunk are separate ranges of the cache, none
    overlapping: reading block j cannot pull in block k's bytes."""
    refs = resolved_refs(columns_store)
    ranges = sorted(
        (offset, offset + length)
        for key, value in refs.items()
        if key.startswith("call_genotype/") and not key.endswith((".zarray", ".zattrs"))
        for _, offset, length in [value]
    )
    assert len(ranges) == 4 * 3
    assert all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False))
