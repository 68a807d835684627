"""Each cache layout writes a cache htslib reads to the source's records, and chunk byte
ranges each of which is whole records (bgzf: whole BGZF blocks). Oracles: htslib
(pysam) reading the cache and each chunk range behind the cache's header, zlib for BGZF
block boundaries, and the BCF specification's record lengths (``bcf_spec``)."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pysam
import pytest
from vcfvirtual_codec.bcf import bgzf

from vcfvirtual.cache.base import SerialSource, chunk_byte_ranges
from vcfvirtual.cache.layouts import LAYOUT_WRITERS, LAYOUTS, layout_writer
from vcfvirtual.cache.write import write_cache_partitioned, write_cache_serial

from .. import bcf_spec

CHUNK = 97  # not a divisor of the cohort's 1,500 records


def records(path) -> list[tuple]:
    with pysam.VariantFile(str(path)) as f:
        return [(r.chrom, r.pos, r.alleles, tuple(s["GT"] for s in r.samples.values())) for r in f]


def test_every_layout_the_codec_decodes_has_a_writer():
    assert set(LAYOUT_WRITERS) == set(LAYOUTS) == {"raw", "bgzf", "columns"}
    assert all(LAYOUT_WRITERS[name].name == name for name in LAYOUTS)


def test_chunk_byte_ranges_by_hand():
    offsets, lengths = chunk_byte_ranges(np.array([10, 25, 40]), 100)
    assert offsets.dtype == lengths.dtype == np.uint64
    assert offsets.tolist() == [10, 25, 40] and lengths.tolist() == [15, 15, 60]
    offsets, lengths = chunk_byte_ranges(np.array([], dtype=np.int64), 7)
    assert offsets.tolist() == [] and lengths.tolist() == []


def chunk_as_file(cache, header_end: int, offset: int, length: int, layout: str, out) -> None:
    """The cache's header, then one chunk's bytes (then BGZF's EOF block): a BCF that
    htslib reads only if the range holds whole records (and, for bgzf, whole blocks)."""
    data = cache.read_bytes()
    tail = bgzf.EOF_BLOCK if layout == "bgzf" else b""
    out.write_bytes(data[:header_end] + data[offset : offset + length] + tail)


@pytest.mark.parametrize("layout", ["bgzf", "raw"])
def test_serial_cache_is_the_bcf_and_each_chunk_whole_records(cohort_bcf, tmp_path, layout):
    cache = tmp_path / f"c.{layout}.bcf"
    scan, (offsets, lengths) = write_cache_serial(
        SerialSource(cohort_bcf, lambda header: CHUNK), cache, layout_writer(layout)
    )
    expected = records(cohort_bcf)
    assert records(cache) == expected
    n_chunks = -(-len(expected) // CHUNK)
    assert len(offsets) == len(lengths) == n_chunks == scan.chunk_offsets.shape[0]
    stream = bcf_spec.inflate(cache)
    assert stream == bcf_spec.inflate(cohort_bcf)  # the same uncompressed BCF
    if layout == "bgzf":
        member_offsets = {offset for offset, _ in bcf_spec.gzip_members(cache)}
        assert set(offsets.tolist()) <= member_offsets  # each chunk starts a block
        header_end = int(offsets[0])
    else:
        header_end = bcf_spec.header_size(stream)
        assert int(offsets[0]) == header_end
    # Chunks tile the cache's records: each starts where the previous ended.
    assert (offsets[1:] == offsets[:-1] + lengths[:-1]).all()
    for k, (offset, length) in enumerate(zip(offsets.tolist(), lengths.tolist())):
        one = tmp_path / f"chunk-{k}.bcf"
        chunk_as_file(cache, header_end, offset, length, layout, one)
        assert records(one) == expected[k * CHUNK : (k + 1) * CHUNK], k


@pytest.mark.parametrize("layout", ["bgzf", "raw"])
def test_partitioned_cache_joins_files_as_htslib_reads_them(cohort_bcf, tmp_path, layout):
    second = shutil.copy(cohort_bcf, tmp_path / "second.bcf")
    cache = tmp_path / f"joined.{layout}.bcf"
    scan, (offsets, lengths) = write_cache_partitioned(
        [cohort_bcf, second], cache, cache, layout_writer(layout), lambda header: CHUNK, 1, None, False
    )
    expected = records(cohort_bcf) * 2
    assert records(cache) == expected and scan.num_records == len(expected)
    # One header (the first file's), then both files' records.
    one = bcf_spec.inflate(cohort_bcf)
    size = bcf_spec.header_size(one)
    assert bcf_spec.inflate(cache) == one + one[size:]
    header_end = int(offsets[0]) if layout == "bgzf" else size
    for k in (0, len(offsets) // 2, len(offsets) - 1):
        out = tmp_path / f"chunk-{k}.bcf"
        chunk_as_file(cache, header_end, int(offsets[k]), int(lengths[k]), layout, out)
        assert records(out) == expected[k * CHUNK : (k + 1) * CHUNK], k
    assert not [p for p in tmp_path.iterdir() if ".tmp-parts-" in p.name]  # working files removed


def test_bgzf_cache_is_gzip_readable_and_ends_with_eof(cohort_bcf, tmp_path):
    cache = tmp_path / "c.bcf"
    write_cache_serial(SerialSource(cohort_bcf, lambda header: CHUNK), cache, layout_writer("bgzf"))
    data = cache.read_bytes()
    assert data.endswith(bgzf.EOF_BLOCK)
    assert gzip.decompress(data) == bcf_spec.inflate(cohort_bcf)
