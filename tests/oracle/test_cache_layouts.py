"""Every cache layout gives bio2zarr's values; the default BGZF cache is a valid BCF about
the size of its source, made of the source's own compressed blocks."""

from __future__ import annotations

import pysam
import pytest
import zarr
from vcfvirtual_codec.bcf import bgzf

import vcfvirtual

from ..bcfdata import bcftools, fuzz_bcf
from ..conftest import assert_matches_bio2zarr, bio2zarr_convert, differences_from_bio2zarr, open_both


# The raw layout's equivalence with bio2zarr (small file, cohort) runs in
# test_bio2zarr_equivalence.py with every layout; these are the columns layout's extra
# samples blockings: one sample per block, and one block for all (10,000); read both ways.
@pytest.mark.parametrize(("chunk_length", "samples_chunk_size"), [(1, 1), (3, 2), (1000, 10_000)])
def test_small_columns_layout_matches_bio2zarr(small_bcf, tmp_path, chunk_length, samples_chunk_size):
    ref = bio2zarr_convert(small_bcf, tmp_path / "ref.vcz", chunk_length)
    for ds in open_both(small_bcf, chunk_length, tmp_path, layout="columns", samples_chunk_size=samples_chunk_size):
        assert_matches_bio2zarr(ds, ref)


@pytest.mark.parametrize(("chunk_length", "samples_chunk_size"), [(100, 7), (640, 10_000)])
def test_cohort_columns_layout_matches_bio2zarr(cohort_bcf, tmp_path, chunk_length, samples_chunk_size):
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", chunk_length)
    for ds in open_both(cohort_bcf, chunk_length, tmp_path, layout="columns", samples_chunk_size=samples_chunk_size):
        assert_matches_bio2zarr(ds, ref)
        assert ds["call_genotype"].encoding["chunks"][1] == min(samples_chunk_size, 120)


def test_fuzz_seed_columns_layout_matches_bio2zarr(tmp_path):
    """Every typed-value path (INFO/FORMAT Integer, Float, String, Flag, haploid GT, '.')."""
    bcf = fuzz_bcf(tmp_path / "fuzz.bcf")
    bcftools("index", "-f", bcf)  # bio2zarr converts a multi-contig file only when indexed
    ref = bio2zarr_convert(bcf, tmp_path / "ref.vcz", 2)
    # bio2zarr marks a haploid call in a diploid record unphased or phased inconsistently;
    # htslib (pysam) is the oracle for phasing there, as in every layout.
    with pysam.VariantFile(str(bcf)) as vf:
        phased = [[call.phased for call in rec.samples.values()] for rec in vf]
    for ds in open_both(bcf, 2, tmp_path, layout="columns", samples_chunk_size=2):
        problems = differences_from_bio2zarr(ds.drop_vars("call_genotype_phased"), ref, ignore=["call_genotype_phased"])
        assert not problems, "\n".join(problems)
        assert ds["call_genotype_phased"].values.tolist() == phased


@pytest.mark.parametrize("chunk_length", [1, 7, 100])
def test_bgzf_cache_is_a_bcf_bcftools_reads(cohort_bcf, tmp_path, chunk_length):
    cache = tmp_path / "c.bcf"
    vcfvirtual.index(
        cohort_bcf, refs_path=False, cache_path=cache, variants_chunk_size=chunk_length, cache_layout="bgzf"
    )
    assert bcftools("view", "--no-version", cache) == bcftools("view", "--no-version", cohort_bcf)
    bcftools("index", "-f", cache)  # raises if htslib cannot index it


def _blocks(path):
    with open(path, "rb") as f:
        return [bytes(b.raw) for b in bgzf.read_blocks(f, path)]


def test_bgzf_cache_reuses_the_source_blocks(cohort_bcf, tmp_path):
    """Blocks no chunk boundary splits are copied byte for byte, so the cache is about
    the size of the BCF; only the blocks holding a boundary are re-compressed."""
    cache = tmp_path / "c.bcf"
    chunk_length = 500  # ~6 source blocks a chunk, as real chunks span hundreds
    store = vcfvirtual.index(
        cohort_bcf, refs_path=False, cache_path=cache, variants_chunk_size=chunk_length, cache_layout="bgzf"
    )
    source_blocks = _blocks(cohort_bcf)
    cache_blocks = _blocks(cache)
    n_chunks = -(-store._group.arrays["variant_position"].shape[0] // chunk_length)
    copied = set(source_blocks) & set(cache_blocks)
    # At most one source block is split per chunk boundary, plus the header's end.
    assert len(copied) >= len(source_blocks) - 1 - n_chunks
    assert cache.stat().st_size <= 1.05 * cohort_bcf.stat().st_size


def test_chunk_ranges_are_whole_blocks_starting_with_a_record(cohort_bcf, tmp_path):
    """Every chunk's byte range inflates on its own to exactly its records, as pysam
    reads them."""
    import numpy as np
    import pysam

    chunk_length = 64
    cache = tmp_path / "c.bcf"
    store = vcfvirtual.index(
        cohort_bcf, refs_path=False, cache_path=cache, variants_chunk_size=chunk_length, cache_layout="bgzf"
    )
    manifest = store._group.arrays["variant_position"].manifest
    data = cache.read_bytes()
    with pysam.VariantFile(str(cohort_bcf)) as vf:
        positions = [r.pos for r in vf]
    from vcfvirtual_codec.bcf import records

    for k, (offset, length) in enumerate(zip(manifest._offsets.ravel(), manifest._lengths.ravel())):
        chunk = bgzf.inflate_chunk(np.frombuffer(data[int(offset) : int(offset) + int(length)], np.uint8))
        offsets, n, err, _ = records.record_offsets(chunk, chunk_length)
        assert err == records.OK
        expected = positions[k * chunk_length : (k + 1) * chunk_length]
        assert n == len(expected)
        # BCF POS is 0-based; pysam's .pos is 1-based.
        got = [int.from_bytes(chunk[o + 12 : o + 16].tobytes(), "little") + 1 for o in offsets[:n]]
        assert got == expected


def test_threaded_inflate_writes_the_same_cache(cohort_bcf, tmp_path):
    serial, threaded = tmp_path / "serial.bcf", tmp_path / "threaded.bcf"
    a = vcfvirtual.index(cohort_bcf, refs_path=False, cache_path=serial, variants_chunk_size=100, cache_layout="bgzf")
    b = vcfvirtual.index(
        cohort_bcf,
        refs_path=False,
        cache_path=threaded,
        variants_chunk_size=100,
        inflate_threads=2,
        cache_layout="bgzf",
    )
    assert serial.read_bytes() == threaded.read_bytes()
    # And what the caches hold is the source's records, as bcftools reads them.
    assert bcftools("view", "--no-version", threaded) == bcftools("view", "--no-version", cohort_bcf)
    ma, mb = a._group.arrays["call_genotype"].manifest, b._group.arrays["call_genotype"].manifest
    assert (ma._offsets == mb._offsets).all() and (ma._lengths == mb._lengths).all()


def test_uncompressed_bcf_is_referenced_directly_without_a_cache(cohort_bcf, tmp_path):
    """Zero copy: an uncompressed BCF (bcftools view -Ou) is its own raw cache."""
    import gzip
    import json

    import xarray as xr

    plain = tmp_path / "plain.bcf"
    plain.write_bytes(gzip.decompress(cohort_bcf.read_bytes()))
    refs = tmp_path / "plain.json"
    vcfvirtual.index(plain, refs_path=refs, variants_chunk_size=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.bcf", "plain.json"]
    doc = json.loads(refs.read_text())
    assert doc["templates"]["cache"] == f"file://{plain}"
    ref = bio2zarr_convert(cohort_bcf, tmp_path / "ref.vcz", 100)
    assert_matches_bio2zarr(xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False), ref)
    # The source is the cache: changing it is refused like a changed cache.
    data = bytearray(plain.read_bytes())
    data[len(data) // 2] ^= 1
    plain.write_bytes(bytes(data))
    with pytest.raises(vcfvirtual.VcfVirtualError, match="does not match"):
        vcfvirtual.open_store(refs)


@pytest.mark.parametrize("refs_format", ["json", "parquet", "icechunk"])
def test_columns_store_in_every_reference_format_reads_as_htslib(cohort_bcf, tmp_path, refs_format):
    """verify compares every array, chunk by chunk, with pysam's reading of the BCF."""
    from vcfvirtual.verify import verify_store

    refs = tmp_path / f"c.vcz.{refs_format}"
    vcfvirtual.index(
        cohort_bcf,
        refs_path=refs,
        cache_path=tmp_path / "c.cache.columns",
        cache_layout="columns",
        variants_chunk_size=200,
        samples_chunk_size=50,
        refs_format=refs_format,
    )
    report = verify_store(str(refs))
    assert report.ok, report.summary()


def test_relocated_columns_store_reads_as_htslib(cohort_bcf, tmp_path):
    from vcfvirtual.refs.relocate import relocate_file
    from vcfvirtual.verify import verify_store

    refs = tmp_path / "c.vcz.json"
    vcfvirtual.index(
        cohort_bcf,
        refs_path=refs,
        cache_path=tmp_path / "c.cache.columns",
        cache_layout="columns",
        samples_chunk_size=50,
    )
    moved = tmp_path / "moved"
    moved.mkdir()
    (tmp_path / "c.cache.columns").rename(moved / "c.cache.columns")
    out = relocate_file(refs, f"file://{moved}/", moved / "c.vcz.json")
    report = verify_store(str(out))
    assert report.ok, report.summary()


def test_columns_sample_id_is_chunked_as_bio2zarr_chunks_it(small_bcf, tmp_path):
    """bio2zarr chunks sample_id by samples_chunk_size, and vcztools takes the samples
    chunking of the call_* arrays from sample_id's chunks: one sample_id chunk over
    samples blocks of 2 made vcztools index past a block ("index 2 is out of bounds")."""
    from bio2zarr import vcf

    vcf.convert([str(small_bcf)], str(tmp_path / "ref.vcz"), samples_chunk_size=2, worker_processes=0)
    ref = zarr.open_group(str(tmp_path / "ref.vcz"), mode="r")
    for ds in open_both(small_bcf, 3, tmp_path, layout="columns", samples_chunk_size=2):
        assert ds["sample_id"].encoding["chunks"] == ref["sample_id"].chunks == (2,)
        assert ds["call_genotype"].encoding["chunks"][1] == ref["call_genotype"].chunks[1]
        assert ds["sample_id"].values.tolist() == ref["sample_id"][:].tolist()
