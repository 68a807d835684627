"""The ``columns`` cache layout, index half: every segment the writer stores reads back
(preamble, contract's compressor, CRC32, decoded by the tests' own reader of the format,
``tests/columns_reader.py``) to bio2zarr's chunk of the same array, variants chunk and samples
block (oracle: bio2zarr converting the same BCF with the same chunk sizes); the store's
manifests point each array's chunks at segments whose preamble names that array's kind,
key and block (oracle: the contract's kind codes and htslib's dictionary keys read by
pysam); bad sizes are refused with typed errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pysam
import pytest
import zarr
from vcfvirtual_codec import spec as codec_spec

import vcfvirtual
from vcfvirtual.cache import columns
from vcfvirtual.cache.base import SerialSource
from vcfvirtual.cache.columns import FLAG_GT_ALL_PHASED, FLAG_GT_NONE_PHASED, ColumnsLayout, ColumnsWriter
from vcfvirtual.errors import VcfVirtualError
from vcfvirtual.io import outputs
from vcfvirtual.io.fingerprint import Fingerprint
from vcfvirtual.manifests.provenance import RecordedCache, RecordedPart, RecordedSource
from vcfvirtual.manifests.vcf_zarr import build_store_group, store_provenance
from vcfvirtual.manifests.virtual import manifest_group

from .... import bcfdata, columns_reader

# The contract between the two halves of issue 12 (briefs/columns_contract.md), written
# out here rather than imported from the code under test.
PREAMBLE = columns_reader.PREAMBLE
KIND_CODES = {
    "contig": 0,
    "position": 1,
    "rlen": 2,
    "qual": 3,
    "id": 4,
    "alleles": 5,
    "filter": 6,
    "info": 7,
    "format": 8,
}
END_HEADER = bcfdata.HEADER + '##INFO=<ID=END,Number=1,Type=Integer,Description="End position">\n'
END_RECORDS = [
    "chr1\t100\t.\tA\t<DEL>\t30\tPASS\tEND=250;DP=4\tGT\t0/1\t./.\t1/1",
    "chr1\t300\t.\tC\tT\t.\t.\t.\tGT\t0|0\t0/1\t1|1",
    "chr2\t5\t.\tG\t<DUP>\t.\tq10\tEND=5000\tGT\t1/1\t0/0\t./1",
    "chr2\t6000\t.\tGT\tG\t7\tPASS\tDP=1\tGT\t0/1\t1/1\t0/0",
]
CASES = {
    "small": lambda: bcfdata.vcf_text(bcfdata.SMALL_RECORDS),
    "info_end": lambda: bcfdata.vcf_text(END_RECORDS, header=END_HEADER),
    "fuzz_seed": lambda: bcfdata.vcf_text(bcfdata.FUZZ_RECORDS, header=bcfdata.FUZZ_HEADER),
    "cohort": lambda: bcfdata.random_cohort_vcf(40, 7, seed=3),
}
CHUNK = 3


@pytest.fixture
def codec_takes_columns(monkeypatch):
    """Each array's codec config as the index wrote it, recorded as the codec parses it."""
    seen: dict[str, dict] = {}  # each array's config as the index wrote it
    original = codec_spec.ChunkSpec.from_config.__func__

    def from_config(cls, config):
        seen[config.get("array")] = dict(config)
        return original(cls, config)

    monkeypatch.setattr(codec_spec.ChunkSpec, "from_config", classmethod(from_config))
    return seen


def bio2zarr_store(bcf: Path, out: Path, samples_chunk_size: int):
    from bio2zarr import vcf

    vcf.convert([str(bcf)], str(out), variants_chunk_size=CHUNK, samples_chunk_size=samples_chunk_size)
    return zarr.open_group(str(out), mode="r")


def header_keys(bcf: Path) -> dict[str, int]:
    """htslib's dictionary key of each INFO/FORMAT id (pysam's record of the header)."""
    with pysam.VariantFile(str(bcf)) as f:
        keys = {f"info/{k}": v.record.get("IDX") for k, v in f.header.info.items()}
        keys.update({f"format/{k}": v.record.get("IDX") for k, v in f.header.formats.items()})
    # Without IDX attributes the dictionary is the header's order of first appearance.
    if any(v is None for v in keys.values()):
        with pysam.VariantFile(str(bcf)) as f:
            ids = ["PASS"]
            for rec in f.header.records:
                i = rec.get("ID")
                if rec.type in ("FILTER", "INFO", "FORMAT") and i not in ids:
                    ids.append(i)
        keys = {k: ids.index(k.split("/", 1)[1]) for k in keys}
    return {k: int(v) for k, v in keys.items()}


def filter_columns(bcf: Path, group) -> dict[int, int]:
    """htslib's dictionary key of each FILTER id (pysam) -> its column of bio2zarr's filter_id."""
    with pysam.VariantFile(str(bcf)) as f:
        idx = {k: v.record.get("IDX") if v.record is not None else None for k, v in f.header.filters.items()}
        if any(v is None for v in idx.values()):  # no IDX attributes: order of first appearance
            ids = ["PASS"]
            for rec in f.header.records:
                i = rec.get("ID")
                if rec.type in ("FILTER", "INFO", "FORMAT") and i not in ids:
                    ids.append(i)
            idx = {k: ids.index(k) for k in idx}
    names = list(group["filter_id"][:])
    return {int(key): names.index(name) for name, key in idx.items()}


def b2z_array(name: str) -> str:
    """bio2zarr's array holding a segment's values."""
    fixed = {"contig": "variant_contig", "position": "variant_position", "rlen": "variant_length",
             "qual": "variant_quality", "id": "variant_id", "alleles": "variant_allele",
             "filter": "variant_filter"}  # fmt: skip
    if name in fixed:
        return fixed[name]
    cat, field = name.split("/")
    if cat == "info":
        return f"variant_{field}"
    return "call_genotype" if field == "GT" else f"call_{field}"


def decode(name: str, seg: columns_reader.Segment, group, column_of_key: dict[int, int]) -> np.ndarray:
    """One segment as bio2zarr's chunk of its array, read by the tests' own reader."""
    R = columns_reader
    array = group[b2z_array(name)]
    shape, dtype = array.shape, array.dtype
    if name in ("contig", "position", "rlen"):
        return (R.int32s(seg) + (name == "position")).astype(dtype)
    if name == "qual":
        return seg.data.view("<u4").view(np.float32)
    if name == "id":
        return R.ids(seg)
    if name == "alleles":
        return R.alleles(seg, shape[1])
    if name == "filter":
        return R.filters(seg, column_of_key, shape[1])
    cat, field = name.split("/")
    if name == "format/GT":
        return R.genotypes(seg, shape[2]).astype(dtype)
    if cat == "info" and dtype.kind == "b":
        return R.flags(seg)
    is_format = cat == "format"
    width = shape[-1] if len(shape) == (3 if is_format else 2) else 1
    full = (seg.records, seg.width, *shape[2:]) if is_format else (seg.records, *shape[1:])
    if dtype.kind in "OTU":
        return R.strings(seg, width).reshape(full)
    if dtype.kind == "f":
        return R.numbers(seg, width, True, not is_format).view(np.float32).reshape(full)
    return R.numbers(seg, width, False, not is_format).astype(dtype).reshape(full)


@pytest.mark.parametrize("samples_chunk_size", [2, 10_000])
@pytest.mark.parametrize("case", sorted(CASES))
def test_segments_read_back_as_bio2zarr(tmp_path, case, samples_chunk_size):
    check_segments(tmp_path, case, samples_chunk_size)


def test_segments_read_back_demuxed_by_samples_block(tmp_path, monkeypatch):
    """Chunks too big to demux whole are demuxed a group of segments at a time (the
    variant-level columns, then each samples block): the same segments."""
    monkeypatch.setattr(columns, "WHOLE_CHUNK_MAX_BYTES", 0)
    check_segments(tmp_path, "cohort", 2)


def check_segments(tmp_path, case, samples_chunk_size):
    bcf = bcfdata.write_bcf(CASES[case](), tmp_path / f"{case}.bcf", index=True)
    group = bio2zarr_store(bcf, tmp_path / "b2z.vcz", samples_chunk_size)
    cache = tmp_path / "c.columns"
    scan, ranges = ColumnsLayout(samples_chunk_size).write_serial(SerialSource(bcf, lambda h: CHUNK), cache)
    assert ranges.parts == ("part-000000",) and not ranges.chunk_part.any()  # a serial run: one part
    data = (cache / "part-000000").read_bytes()
    assert data.startswith(b"VVCOLS1\nBCF\x02")
    keys = header_keys(bcf)
    n_samples = len(scan.header.samples)
    width = min(samples_chunk_size, n_samples)
    n_blocks = -(-n_samples // width)
    n_chunks = -(-scan.num_records // CHUNK)
    column_of_key = filter_columns(bcf, group)
    character = {f"{d.category.lower()}/{d.name}" for d in (*scan.header.info, *scan.header.formats)}
    character = {k for k in character if k in keys and _vcf_type(scan.header, k) == "Character"}
    checked = set()
    claims = 0  # GT blocks whose preamble answers for the mask or the phasing
    for name, (offsets, lengths) in ranges.segments.items():
        blocked = name.startswith("format/")
        assert offsets.shape == ((n_chunks, n_blocks) if blocked else (n_chunks,)), name
        compressor = "blosc" if name == "format/GT" else "zstd"
        for i in range(n_chunks):
            n = min(CHUNK, scan.num_records - i * CHUNK)
            for b in range(n_blocks if blocked else 1):
                where = (i, b) if blocked else (i,)
                seg = columns_reader.read_segment(data, int(offsets[where]), int(lengths[where]), compressor)
                assert seg.complete_count == 0 or seg.is_gt  # only a GT block holds a complete count
                ident = (seg.kind, int(seg.is_gt), seg.key, seg.records, seg.block, seg.width)
                cat = name.split("/")[0]
                block_width = min(width, n_samples - b * width) if blocked else 1
                want = (
                    KIND_CODES[cat if "/" in name else name],
                    1 if name == "format/GT" else 0,
                    keys[name] if "/" in name else -1,
                    n,
                    b,
                    block_width,
                )
                assert ident == want, (name, i, b)
                if name == "format/GT":
                    rows = slice(i * CHUNK, i * CHUNK + n)
                    claims += check_gt_summary(group, seg.flags, seg.complete_count, rows, b * width, block_width)
                if name in character:
                    continue  # Character values: the codec's tests check them against bio2zarr
                got = decode(name, seg, group, column_of_key)
                ref = group[b2z_array(name)][i * CHUNK : i * CHUNK + n]
                if blocked:
                    ref = ref[:, b * width : b * width + got.shape[1]]
                if got.dtype == object:
                    assert got.tolist() == np.asarray(ref).astype(object).tolist(), (name, i)
                elif got.dtype.kind == "f":
                    np.testing.assert_array_equal(got.view(np.uint32), np.asarray(ref).view(np.uint32), err_msg=name)
                else:
                    np.testing.assert_array_equal(got, ref, err_msg=f"{name} chunk {i} block {b}")
                checked.add(name)
    assert {"position", "contig", "rlen", "qual", "id", "alleles", "filter", "format/GT"} <= checked
    if case == "cohort":  # blocks without missing calls, or of one phasing: the claims are checked
        assert claims > 0
    if case == "fuzz_seed":
        assert {"info/NOTE", "format/FT", "info/SOMATIC", "format/QS", "info/AF"} <= checked


def check_gt_summary(group, flags: int, complete_count: int, rows: slice, s0: int, width: int) -> int:
    """What a GT block's preamble claims of its calls (which the codec then returns without
    decompressing it) holds in bio2zarr's arrays: the complete count is the ploidy only
    where no call of the block is masked; all or none phased only where bio2zarr says so."""
    mask = group["call_genotype_mask"][rows, s0 : s0 + width]
    phased = group["call_genotype_phased"][rows, s0 : s0 + width]
    ploidy = group["call_genotype"].shape[2]
    assert complete_count in (0, ploidy) or mask.any()
    if complete_count == ploidy:
        assert not mask.any()
    assert not (flags & FLAG_GT_ALL_PHASED and flags & FLAG_GT_NONE_PHASED)
    if flags & FLAG_GT_ALL_PHASED:
        assert phased.all()
    if flags & FLAG_GT_NONE_PHASED:
        assert not phased.any()
    return int(complete_count == ploidy) + int(bool(flags & (FLAG_GT_ALL_PHASED | FLAG_GT_NONE_PHASED)))


def _vcf_type(header, name: str) -> str:
    cat, field = name.split("/")
    defs = header.info if cat == "info" else header.formats
    return next(d.type for d in defs if d.name == field)


# Array -> (segment, per the contract) for the arrays the fuzz seed has.
ARRAY_SEGMENTS = {
    "variant_contig": "contig",
    "variant_position": "position",
    "variant_length": "rlen",
    "variant_quality": "qual",
    "variant_id": "id",
    "variant_id_mask": "id",
    "variant_allele": "alleles",
    "variant_filter": "filter",
    "variant_DP": "info/DP",
    "variant_AF": "info/AF",
    "variant_NOTE": "info/NOTE",
    "variant_SOMATIC": "info/SOMATIC",
    "call_genotype": "format/GT",
    "call_genotype_phased": "format/GT",
    "call_genotype_mask": "format/GT",
    "call_DP": "format/DP",
    "call_QS": "format/QS",
    "call_FT": "format/FT",
}


def test_manifests_point_each_array_at_its_segments(tmp_path, codec_takes_columns):
    # INFO/END declared: variant_length's segment holds rlen as resolved, with no key.
    header = bcfdata.FUZZ_HEADER + '##INFO=<ID=END,Number=1,Type=Integer,Description="End">\n'
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.FUZZ_RECORDS, header=header), tmp_path / "f.bcf", index=False)
    cache = tmp_path / "f.columns"
    scs = 2
    scan, ranges = ColumnsLayout(scs).write_serial(SerialSource(bcf, lambda h: CHUNK), cache)
    sources = [RecordedSource(str(bcf), Fingerprint.of(bcf))]
    part = cache / "part-000000"
    cached = RecordedCache.of_parts(f"file://{cache}", "columns", (RecordedPart(part.name, Fingerprint.of(part)),))
    provenance = store_provenance(scan, sources=sources, cache=cached, zero_copy=False, samples_chunk_size=scs)
    group = manifest_group(build_store_group(scan, ranges, provenance))  # VirtualiZarr's view of it
    data = part.read_bytes()
    keys = header_keys(bcf)
    n_samples = len(scan.header.samples)
    n_chunks = -(-scan.num_records // CHUNK)
    assert set(ARRAY_SEGMENTS) <= set(group.arrays)
    for name, segment in ARRAY_SEGMENTS.items():
        array = group.arrays[name]
        config = codec_takes_columns[name]
        assert config["layout"] == "columns"
        assert config["compressor"] == ("blosc" if segment == "format/GT" else "zstd"), name
        sampled = name.startswith("call_")
        chunk_shape = array.metadata.chunk_grid.chunk_shape
        assert chunk_shape[0] == CHUNK
        if sampled:
            assert chunk_shape[1] == scs and config["samples_chunk_size"] == scs
            assert array.manifest.shape_chunk_grid[:2] == (n_chunks, -(-n_samples // scs))
        else:
            assert config.get("samples_chunk_size", 0) == 0
            assert array.manifest.shape_chunk_grid[0] == n_chunks
        entries = array.manifest.dict()
        assert len(entries) == n_chunks * (-(-n_samples // scs) if sampled else 1)
        for chunk_key, entry in entries.items():
            assert entry["path"] == f"file://{part}"  # the part holding the chunk
            offset, length = entry["offset"], entry["length"]
            assert 0 < offset and offset + length <= len(data), (name, chunk_key)
            magic, kind, _, _, key, n, block, *_ = PREAMBLE.unpack_from(data, offset)
            i, *rest = (int(x) for x in chunk_key.split("."))
            cat = segment.split("/")[0]
            assert (magic, kind, key) == (b"VVS3", KIND_CODES[cat], keys[segment] if "/" in segment else -1), name
            assert config["key"] == key, name  # what the codec compares
            assert n == min(CHUNK, scan.num_records - i * CHUNK)
            assert block == (rest[0] if sampled else 0), (name, chunk_key)


def test_bgzf_store_keeps_samples_whole(tmp_path):
    """The option reaches the columns layout only: a bgzf store's call arrays stay one samples chunk."""
    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")
    store = vcfvirtual.index(bcf, cache_layout="bgzf", samples_chunk_size=1, variants_chunk_size=CHUNK)
    group = zarr.open_group(store, mode="r", zarr_format=3)
    assert group["call_genotype"].chunks[1] == group["call_genotype"].shape[1] == 3
    assert "samples_chunk_size" not in group.attrs["vcfvirtual"]


def test_index_writes_columns_cache_under_its_own_name(tmp_path, codec_takes_columns):
    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")
    vcfvirtual.index(bcf, cache_layout="columns", variants_chunk_size=CHUNK, samples_chunk_size=2)
    cache = tmp_path / "f.bcf.vcz.cache.columns"
    assert os.listdir(cache) == ["part-000000"]  # a folder of parts: one, from a serial run
    assert (cache / "part-000000").read_bytes().startswith(b"VVCOLS1\n")
    assert not (tmp_path / "f.bcf.vcz.cache.bcf").exists()
    assert outputs.is_vcfvirtual_cache(cache)
    # Recognised as ours: --force replaces it; without, it is refused.
    with pytest.raises(vcfvirtual.errors.OutputExistsError):
        vcfvirtual.index(bcf, cache_layout="columns", variants_chunk_size=CHUNK)
    vcfvirtual.index(bcf, cache_layout="columns", variants_chunk_size=CHUNK, force=True)


def test_foreign_file_is_not_a_columns_cache(tmp_path):
    other = tmp_path / "x.vcz.cache.columns"
    other.write_bytes(b"VVCOLS1\nnot a header")
    assert not outputs.is_vcfvirtual_cache(other)
    folder = tmp_path / "y.vcz.cache.columns"
    folder.mkdir()
    assert not outputs.is_vcfvirtual_cache(folder)  # no part
    (folder / "part-000000").write_bytes(b"VVCOLS1\nnot a header")
    assert not outputs.is_vcfvirtual_cache(folder)


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_samples_chunk_size_validated(tmp_path, bad):
    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")
    with pytest.raises(VcfVirtualError, match="samples chunk size"):
        vcfvirtual.index(bcf, cache_layout="columns", samples_chunk_size=bad)


def test_cli_samples_chunk_size(tmp_path):
    from click.testing import CliRunner

    from vcfvirtual.cli import main

    help_text = CliRunner().invoke(main, ["index", "--help"]).output
    assert "--samples-chunk-size" in help_text and "columns" in help_text
    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")
    # -j 2 writes the cache a serial run writes.
    for name, jobs in (("p", "2"), ("s", "1")):
        args = ["index", str(bcf), "--cache-layout", "columns", "-j", jobs, "--samples-chunk-size", "3"]
        names = ["-o", str(tmp_path / f"{name}.json"), "--cache", str(tmp_path / f"{name}.cache.columns")]
        result = CliRunner().invoke(main, [*args, *names])
        assert result.exit_code == 0, result.output
    assert bcfdata.cache_bytes(tmp_path / "p.cache.columns") == bcfdata.cache_bytes(tmp_path / "s.cache.columns")
    result = CliRunner().invoke(main, ["index", str(bcf), "--samples-chunk-size", "0"])
    assert result.exit_code != 0 and "samples-chunk-size" in result.output


NO_SAMPLES = (
    bcfdata.HEADER + "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n" + "chr1\t100\t.\tA\tT\t30\tPASS\tDP=5\n" * 5
)


@pytest.mark.parametrize("case", ["no_records", "no_samples"])
def test_edge_stores_match_bio2zarr_shapes(tmp_path, codec_takes_columns, case):
    """No records: arrays with no chunk referenced; no samples: the samples dimension empty.
    Shapes as bio2zarr gives them (oracle); every reference inside the cache."""
    text = bcfdata.vcf_text([]) if case == "no_records" else NO_SAMPLES
    bcf = bcfdata.write_bcf(text, tmp_path / "e.bcf", index=True)
    store = vcfvirtual.index(bcf, cache_layout="columns", variants_chunk_size=CHUNK, samples_chunk_size=2)
    ours = zarr.open_group(store, mode="r", zarr_format=3)
    size = (tmp_path / "e.bcf.vcz.cache.columns" / "part-000000").stat().st_size
    if case == "no_samples":
        theirs = bio2zarr_store(bcf, tmp_path / "b2z.vcz", 2)
        for name in ("variant_position", "variant_DP", "sample_id"):
            assert ours[name].shape == theirs[name].shape, name
    for name, array in ours.arrays():
        if name.startswith(("variant_", "call_")):
            assert array.shape[0] == (0 if case == "no_records" else 5)
    for name in ("variant_position", "variant_DP"):
        offsets = [e["offset"] + e["length"] for e in store._group.arrays[name].manifest.dict().values()]
        assert len(offsets) == (0 if case == "no_records" else 2) and all(o <= size for o in offsets)


def test_s3_source_to_s3_columns_cache(s3_bucket, tmp_path, codec_takes_columns):
    """A remote BCF streamed once, its columns cache uploaded: the one a local run writes,
    and its references name the uploaded cache."""
    bucket, fs, options = s3_bucket
    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")
    fs.put_file(str(bcf), f"{bucket}/in/f.bcf")
    vcfvirtual.index(
        f"s3://{bucket}/in/f.bcf",
        refs_path=f"s3://{bucket}/out/f.vcz.json",
        cache_path=f"s3://{bucket}/out/f.cache.columns",
        cache_layout="columns",
        variants_chunk_size=CHUNK,
        samples_chunk_size=2,
        storage_options=options,
    )
    vcfvirtual.index(
        bcf,
        refs_path=False,
        cache_path=tmp_path / "local.columns",
        cache_layout="columns",
        variants_chunk_size=CHUNK,
        samples_chunk_size=2,
    )
    assert fs.ls(f"{bucket}/out/f.cache.columns", detail=False) == [f"{bucket}/out/f.cache.columns/part-000000"]
    uploaded = fs.cat_file(f"{bucket}/out/f.cache.columns/part-000000")
    assert uploaded.startswith(b"VVCOLS1\n") and uploaded == bcfdata.cache_bytes(tmp_path / "local.columns")
    refs = json.loads(fs.cat_file(f"{bucket}/out/f.vcz.json"))
    assert refs["templates"] == {"cache": f"s3://{bucket}/out/f.cache.columns"}
    assert json.loads(refs["refs"]["call_genotype/.zarray"])["chunks"][:2] == [CHUNK, 2]
    assert refs["refs"]["call_genotype/1.1.0"][0] == "{{cache}}/part-000000"  # samples block 1 of chunk 1


def test_uncompressed_bcf_gets_the_same_columns_cache(tmp_path, codec_takes_columns):
    """An uncompressed BCF is not its own cache in this layout: the cache written from it
    holds the same segments as from its BGZF original (whose segments are checked against
    bio2zarr above)."""
    bcf = bcfdata.write_bcf(bcfdata.random_cohort_vcf(40, 7, seed=3), tmp_path / "c.bcf", index=False)
    plain = bcfdata.uncompressed_copy(bcf, tmp_path / "u.bcf")
    for source in (bcf, plain):
        vcfvirtual.index(source, cache_layout="columns", variants_chunk_size=CHUNK, samples_chunk_size=2)
    from_bgzf = bcfdata.cache_bytes(tmp_path / "c.bcf.vcz.cache.columns")
    assert from_bgzf == bcfdata.cache_bytes(tmp_path / "u.bcf.vcz.cache.columns")
    assert plain.read_bytes()[:4] == b"BCF\x02" and from_bgzf.startswith(b"VVCOLS1\nBCF\x02")


def _one_chunk(bcf: Path):
    """The inflated records of a BCF (pysam/htslib writes it; zlib inflates it) and their
    offsets from the BCF specification's record lengths."""
    import gzip

    data = np.frombuffer(gzip.decompress(bcf.read_bytes()), np.uint8)
    l_text = int.from_bytes(data[5:9].tobytes(), "little")
    pos, offsets = 9 + l_text, []
    while pos < data.shape[0]:
        offsets.append(pos)
        pos += (
            8
            + int.from_bytes(data[pos : pos + 4].tobytes(), "little")
            + int.from_bytes(data[pos + 4 : pos + 8].tobytes(), "little")
        )
    return data, np.asarray(offsets, np.int64) - offsets[0], offsets[0]


def test_demux_kernel_refuses_what_it_cannot_cut(tmp_path):
    """Typed error codes, not reads past the buffer: a sample count other than the
    records', records cut short, a samples block width of 0, an undeclared key."""
    from vcfvirtual_codec.bcf import records

    from vcfvirtual.bcf.header import parse_header_text
    from vcfvirtual.cache import columns_demux as demux

    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")
    data, offsets, start = _one_chunk(bcf)
    header = parse_header_text(data[9 : start - 1].tobytes(), str(bcf), 0)
    info_slot, fmt_slot = demux.slot_maps([f.key for f in header.info], [f.key for f in header.formats])
    buf = data[start:]
    scratch = np.empty(0, np.uint8)

    def run(buf=buf, offsets=offsets, n_samples=3, scs=2, fmt_slot=fmt_slot):
        n_info, n_fmt = len(header.info), len(header.formats)
        return demux.demux_chunk(buf, offsets, info_slot, fmt_slot, n_info, n_fmt, n_samples, scs, -1, 0, scratch)

    assert run()[2] == records.OK
    assert run(n_samples=4)[2] == records.ERR_SAMPLES
    assert run(buf=buf[:-3])[2] == records.ERR_TRAILING
    assert run(scs=0)[2] == records.ERR_SHAPE
    assert run(fmt_slot=np.full_like(fmt_slot, -1))[2] == records.ERR_UNKNOWN_KEY


def test_demux_kernel_writes_only_the_segments_selected(tmp_path):
    """A chunk demuxed a few segments at a time gives each segment the bytes it has when the
    chunk is demuxed whole (whose bytes test_segments_read_back_as_bio2zarr checks against
    bio2zarr): any selection, the segments not selected empty; without a buffer, the
    bounds of the whole chunk and no bytes; a corrupt record is refused whatever is
    selected; a selection of another length is refused."""
    from vcfvirtual_codec.bcf import records

    from vcfvirtual.bcf.header import parse_header_text
    from vcfvirtual.cache import columns_demux as demux

    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")  # INFO and FORMAT fields of several types
    data, offsets, start = _one_chunk(bcf)
    header = parse_header_text(data[9 : start - 1].tobytes(), str(bcf), 0)
    slots = demux.slot_maps([f.key for f in header.info], [f.key for f in header.formats])
    n_info, n_fmt, n_samples, scs = len(header.info), len(header.formats), 3, 2
    buf = data[start:]
    n_seg = demux.N_FIXED_SEGMENTS + n_info + n_fmt * 2

    def run(scratch, select=None, buf=buf):
        return demux.demux_chunk(buf, offsets, *slots, n_info, n_fmt, n_samples, scs, -1, 0, scratch, select)

    whole, bounds, err, _ = run(np.empty(0, np.uint8))
    assert err == records.OK
    segments = [whole[bounds[s] : bounds[s + 1]].tobytes() for s in range(n_seg)]
    assert all(segments)
    rng = np.random.default_rng(7)
    selections = [np.eye(n_seg, dtype=np.uint8)[s] for s in range(n_seg)]
    selections += [rng.integers(0, 2, n_seg).astype(np.uint8) for _ in range(8)]
    for select in selections:
        scratch = np.full(len(whole), 0xAA, np.uint8)  # reused: no byte of an earlier call shows
        out, part_bounds, err, _ = run(scratch, select)
        assert err == records.OK
        for s in range(n_seg):
            got = out[part_bounds[s] : part_bounds[s + 1]].tobytes()
            assert got == (segments[s] if select[s] else b""), s
    sizes_only, size_bounds, err, _ = run(None)
    assert err == records.OK and sizes_only.shape == (0,) and np.array_equal(size_bounds, bounds)
    last_block = np.zeros(n_seg, np.uint8)
    last_block[-1] = 1
    assert run(None, last_block, buf=buf[:-3])[2] == records.ERR_TRAILING
    assert run(np.empty(0, np.uint8), last_block, buf=buf[:-3])[2] == records.ERR_TRAILING
    assert run(np.empty(0, np.uint8), np.ones(n_seg + 1, np.uint8))[2] == records.ERR_SHAPE


@pytest.mark.parametrize("by_block", [False, True], ids=["whole", "by-block"])
def test_a_record_the_demux_refuses_is_one_error_before_its_chunk_is_written(tmp_path, monkeypatch, by_block):
    """A record the scan let through but the demux cannot cut (its sample count is not the
    header's): one CorruptBCFError naming the file and the record's stream offset, raised
    before any segment of its chunk is written, whether the chunk is demuxed whole or a
    samples block at a time (the records are fed to the writer as a scan would)."""
    import io

    from vcfvirtual.bcf.header import parse_header_text
    from vcfvirtual.errors import CorruptBCFError

    if by_block:
        monkeypatch.setattr(columns, "WHOLE_CHUNK_MAX_BYTES", 0)
    bcf = bcfdata.fuzz_bcf(tmp_path / "f.bcf")  # six records of three samples
    data, offsets, start = _one_chunk(bcf)
    data = data.copy()
    bad = start + int(offsets[5])  # in the second chunk (of four records each), with FORMAT fields
    data[bad + 28] = 4  # n_sample: the low 24 bits of the u32 at byte 28 of a record
    header = parse_header_text(data[9 : start - 1].tobytes(), str(bcf), start)
    writer = ColumnsWriter(io.BytesIO(), str(bcf), ColumnsLayout(2), threads=1)
    try:
        writer.add_block(None, data.tobytes())
        writer.header_parsed(header, 4)
        writer.records_scanned(offsets + start)
        with pytest.raises(CorruptBCFError, match="sample") as info:
            writer.scanned_to(data.shape[0])
            writer.close(data.shape[0])
    finally:
        writer.pool.shutdown()
    assert info.value.offset == bad and str(bcf) in str(info.value)
    assert all(len(r) <= 1 for r in writer.ranges)  # the first chunk's segments at most


def test_gt_summary_of_a_segment_shorter_than_its_counts_claims_nothing():
    """gt_block_summary reads no byte past the segment whatever its counts say: a block cut
    short makes no claim (the codec then decodes the block itself)."""
    from vcfvirtual_codec.bcf import records

    from vcfvirtual.cache import columns_demux as demux

    n, block_samples, ploidy = 3, 4, 2
    counts = np.full(n, ploidy, "<i4").view(np.uint8)
    types = np.full(n, records.BT_INT8, np.uint8)
    alleles = np.zeros(n * block_samples * ploidy, np.uint8)  # allele 0, unphased, stored minus 2
    segment = np.concatenate([counts, types, alleles])
    assert demux.gt_block_summary(segment, n, block_samples) == (ploidy, False, True)
    assert demux.gt_block_summary(segment[:-1], n, block_samples) == (0, False, False)
