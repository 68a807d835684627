"""A cache larger than the fingerprint's sampled windows, changed between them with its
size and mtime kept (issue 21, "cases not yet reached"; docs/design.md, "Stale caches
refused"). open_store's fingerprint cannot see it, by design (it guards against stale or
mismatched files, not forgers, who could rewrite between any windows). What catches it:

- columns cache: the changed segment's CRC32, when that chunk is read: ChunkDecodeError;
- raw cache: nothing (values are plain bytes): the changed byte is read as data. Out of
  the threat model, asserted here so that the day it changes, this test says so.
"""

from __future__ import annotations

import json
import os

import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import ChunkDecodeError
from vcfvirtual.io import fingerprint

from .. import bcfdata


def _outside_windows(size: int, lo: int, hi: int) -> int | None:
    """A byte in [lo, hi) that no sampled window covers, or None."""
    covered = fingerprint.windows(size)
    for at in range(lo, hi):
        if not any(start <= at < start + length for start, length in covered):
            return at
    return None


def _flip_keeping_stat(path, at: int) -> None:
    stat = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x01]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """~4 MB of cache: more than the 1 MiB head, the tail and 16 windows of 64 KiB."""
    work = tmp_path_factory.mktemp("windows")
    return bcfdata.write_bcf(bcfdata.random_cohort_vcf(16000, 300, seed=5), work / "c.bcf", index=False), work


def _chunk_outside_windows(refs_path, cache_size: int, array: str, skip: int) -> tuple[str, int]:
    """(chunk key, byte) of ``array``: a byte past the chunk's first ``skip`` bytes that no window covers."""
    refs = json.loads(refs_path.read_text())["refs"]
    for key, value in refs.items():
        if key.startswith(array + "/") and isinstance(value, list):
            _, offset, length = value
            at = _outside_windows(cache_size, offset + skip, offset + length)
            if at is not None:
                return key, at
    pytest.skip(f"no {array} chunk falls between the windows")


def test_columns_cache_changed_between_windows_is_caught_by_the_segment_crc(cohort):
    bcf, work = cohort
    refs, folder = work / "col.json", work / "col.cache"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=folder, variants_chunk_size=500, progress=False)
    cache = bcfdata.cache_file(folder)  # its one part, which the fingerprint samples in windows
    size = cache.stat().st_size
    assert size > fingerprint.HEAD_BYTES + (fingerprint.WINDOWS + 1) * fingerprint.WINDOW_BYTES
    # Past the 36-byte preamble and the Blosc frame's 16-byte header (whose lengths the
    # codec compares with the preamble's before the CRC): inside the compressed data.
    _, at = _chunk_outside_windows(refs, size, "call_genotype", skip=36 + 16)
    _flip_keeping_stat(cache, at)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)  # the fingerprint passes
    with pytest.raises(ChunkDecodeError, match="CRC32"):
        _ = ds["call_genotype"].values


def _a_pos_byte_between_windows(refs: dict, data: bytes, size: int) -> int | None:
    """The first byte of a record's POS (8 bytes into it, after its two length words and
    CHROM) that no window covers, walking the raw cache's variant_position chunks."""
    for key, value in refs.items():
        if not (key.startswith("variant_position/") and isinstance(value, list)):
            continue
        _, offset, length = value
        pos = offset
        while pos < offset + length:
            l_shared = int.from_bytes(data[pos : pos + 4], "little")
            l_indiv = int.from_bytes(data[pos + 4 : pos + 8], "little")
            if _outside_windows(size, pos + 12, pos + 13) is not None:
                return pos + 12
            pos += 8 + l_shared + l_indiv
    return None


def test_raw_cache_changed_between_windows_is_read_as_data(cohort):
    bcf, work = cohort
    refs, cache = work / "raw.json", work / "raw.cache"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=cache, variants_chunk_size=500, cache_layout="raw", progress=False)
    before = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)["variant_position"].values.copy()
    size = cache.stat().st_size
    at = _a_pos_byte_between_windows(json.loads(refs.read_text())["refs"], cache.read_bytes(), size)
    if at is None:
        pytest.skip("no record's POS falls between the windows")
    _flip_keeping_stat(cache, at)
    after = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)["variant_position"].values
    assert (after != before).sum() == 1  # out of the threat model: read as data, one value changed
