"""What test_layouts.py does not check of the chunk-aligned BGZF writer: source blocks
that no cut splits are copied byte for byte (no re-compression, a cache about the BCF's
size), each split block becomes one block per side of each cut, and the header ends in a
block of its own. Oracles: the gzip members of both files split by zlib, the record
starts walked by hand from the BCF spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from vcfvirtual.cache.base import SerialSource
from vcfvirtual.cache.layouts import layout_writer
from vcfvirtual.cache.write import write_cache_serial

from .... import bcfdata
from .. import bcf_spec

CHUNK = 50


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bgzf") / "s.bcf"
    return bcfdata.write_bcf(bcfdata.random_cohort_vcf(400, 60, seed=9), path, index=False)


def members(path: Path) -> list[tuple[int, int, bytes, bytes]]:
    """(stream start, inflated size, compressed bytes, inflated bytes) of each gzip member."""
    data = path.read_bytes()
    found = bcf_spec.gzip_members(path)
    out = []
    at = 0
    for i, (offset, inflated) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(data)
        out.append((at, len(inflated), data[offset:end], inflated))
        at += len(inflated)
    return out


def test_unsplit_blocks_are_copied_and_split_ones_cut(source, tmp_path):
    cache = tmp_path / "c.bcf"
    write_cache_serial(SerialSource(source, lambda header: CHUNK), cache, layout_writer("bgzf"))
    stream = bcf_spec.inflate(source)
    cuts = [bcf_spec.header_size(stream)] + bcf_spec.record_offsets(stream)[::CHUNK]
    source_blocks = [m for m in members(source) if m[1] > 0]  # the EOF block holds nothing
    cache_blocks = members(cache)
    assert cache_blocks[-1][1] == 0  # an EOF block ends the cache
    cache_raw = {m[2] for m in cache_blocks}
    expected_count = 1  # the EOF block
    unsplit = 0
    for start, size, raw, _ in source_blocks:
        inside = [c for c in cuts if start < c < start + size]
        expected_count += 1 + len(inside)
        if not inside:
            unsplit += 1
            assert raw in cache_raw, start  # copied, compressed bytes and all
    assert unsplit > 0 and len(source_blocks) > unsplit  # both kinds occur here
    assert len(cache_blocks) == expected_count
    # Every cut (the header's end, each chunk's first record) starts a cache block.
    cache_starts = {m[0] for m in cache_blocks}
    assert set(cuts) <= cache_starts


def test_uncompressed_source_is_compressed_with_the_same_cuts(source, tmp_path):
    plain = bcfdata.uncompressed_copy(source, tmp_path / "plain.bcf")
    cache = tmp_path / "c.bcf"
    write_cache_serial(SerialSource(plain, lambda header: CHUNK), cache, layout_writer("bgzf"))
    stream = plain.read_bytes()
    assert bcf_spec.inflate(cache) == stream
    cuts = [bcf_spec.header_size(stream)] + bcf_spec.record_offsets(stream)[::CHUNK]
    blocks = members(cache)
    assert set(cuts) <= {m[0] for m in blocks}
    assert all(m[1] <= 65536 for m in blocks)  # BGZF's limit on a block's inflated size
