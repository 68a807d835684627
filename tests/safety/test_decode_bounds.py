"""A chunk's bytes bound what decoding it may allocate (docs/design.md, "Decode bounds").

Issue 21 found three ways a small shared Kerchunk JSON made the codec allocate
gigabytes: a GT summary answered from a preamble (a 26 kB JSON -> 5.9 GB), a FORMAT
field absent from every record of a segment redeclared huge (26 kB -> 4.8 GB), and a
real Zstd frame of a gigabyte of zeros padded so that its length passed the old
1024-fold budget (1.4 MB -> 1.3 GB). Each is crafted here as the reference file a
collaborator would open with plain ``xr.open_zarr("reference://")`` (only the codec
installed): self-contained references whose one chunk is inline, the segment sealed
with a valid CRC32. Each must be refused with a typed error before anything large is
allocated: the codec directly (traced allocations) and through zarr in a child process
(peak RSS). The FILTER map cases check that the codec alone refuses configs that would
read silently wrong ``variant_filter`` values.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import struct
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pysam
import pytest
import xarray as xr
from numcodecs import Zstd
from vcfvirtual_codec import codec as codec_mod
from vcfvirtual_codec import columns as columns_mod
from vcfvirtual_codec.bcf import records as R
from vcfvirtual_codec.errors import ChunkDecodeError, CodecConfigError, VcfVirtualError

import vcfvirtual

from .. import bcfdata

REPO = Path(__file__).resolve().parents[2]
# What any case may add to a child's peak RSS beyond the interpreter, zarr and the
# compiled kernels (~0.3-0.5 GB): the decodes refused here allocate almost nothing.
PEAK_RSS = 1 << 30
# What the codec may allocate, traced, while refusing a crafted chunk.
TRACED = 64 << 20
ZSTD_BLOCK = 128 << 10  # a Zstandard block regenerates at most 128 KiB


def zstd_rle_frame(n_bytes: int, value: int = 0) -> bytes:
    """A real Zstandard frame of ``n_bytes`` copies of one byte, written by hand (RFC 8878)
    as RLE blocks of 4 bytes per 128 KiB: a gigabyte in 33 kB, without holding it."""
    # Frame header descriptor 0xE0: an 8-byte content size, single segment.
    out = [b"\x28\xb5\x2f\xfd\xe0", n_bytes.to_bytes(8, "little")]
    full, rest = divmod(n_bytes, ZSTD_BLOCK)
    sizes = [ZSTD_BLOCK] * full + ([rest] if rest else [])
    block = ((ZSTD_BLOCK << 3) | (1 << 1)).to_bytes(3, "little") + bytes([value])  # RLE type 1
    out.append(block * (len(sizes) - 1))
    out.append(((sizes[-1] << 3) | (1 << 1) | 1).to_bytes(3, "little") + bytes([value]))  # last block
    return b"".join(out)


def skippable_frame(n_bytes: int) -> bytes:
    """A Zstandard skippable frame of ``n_bytes`` payload: decompressors pass over it."""
    return b"\x50\x2a\x4d\x18" + n_bytes.to_bytes(4, "little") + bytes(n_bytes)


def blosc_header(nbytes: int) -> bytes:
    """A Blosc 1.x header alone (16 bytes) that claims ``nbytes`` decompressed."""
    return bytes([2, 1, 0x20 | 0x04, 1]) + struct.pack("<III", nbytes, min(nbytes, 1 << 18), 16)


def seal(spec: codec_mod.ChunkSpec, records: int, length: int, frame: bytes, **preamble) -> bytes:
    """A segment as the index stores it: preamble (its CRC32 right) then ``frame``."""
    segment = columns_mod.SEGMENT_OF_KIND[spec.kind]
    return columns_mod.seal_segment(
        columns_mod.SEGMENT_KINDS[segment],
        preamble.get("flags", 0),
        spec.key if segment in ("info", "format") else -1,
        records,
        preamble.get("block", 0),
        preamble.get("block_samples", spec.samples_chunk_size or 1),
        length,
        frame,
        complete_count=preamble.get("complete_count", 0),
    )


def one_array_refs(spec: codec_mod.ChunkSpec, segment: bytes, dims: list[str]) -> dict:
    """Kerchunk references holding one array of ``spec`` and its first chunk inline."""
    shape = [spec.num_records, *spec.shape]
    chunks = list(spec.chunk_shape)
    zarray = {
        "shape": shape,
        "chunks": chunks,
        "dtype": spec.dtype if spec.dtype != "str" else "|O",
        "fill_value": None,
        "order": "C",
        "filters": [{"id": codec_mod.CODEC_ID, **spec.to_config()}],
        "dimension_separator": ".",
        "compressor": None,
        "zarr_format": 2,
    }
    key = ".".join("0" * len(shape))
    return {
        "version": 1,
        "refs": {
            ".zgroup": json.dumps({"zarr_format": 2}),
            f"{spec.array}/.zarray": json.dumps(zarray),
            f"{spec.array}/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": dims}),
            f"{spec.array}/{key}": "base64:" + base64.b64encode(segment).decode(),
        },
    }


CHILD = """
import json, resource, sys
import numpy as np
import xarray as xr
from vcfvirtual_codec.errors import VcfVirtualError
outcome = {}
try:
    ds = xr.open_zarr("reference://", consolidated=False, storage_options={"fo": sys.argv[1]})
    # One value of the chunk the references hold (the first, or the row given).
    row = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    array = ds[sys.argv[2]]
    values = array[(slice(row, row + 1),) + (slice(0, 1),) * (array.ndim - 1)].values
    outcome["result"] = "values"
except VcfVirtualError as e:
    outcome["result"] = "typed " + type(e).__name__
    outcome["error"] = str(e)
except BaseException as e:
    outcome["result"] = "untyped " + type(e).__name__
    outcome["error"] = repr(e)[:500]
outcome["peak_rss"] = int(next(x for x in open("/proc/self/status") if x.startswith("VmHWM")).split()[1]) * 1024
print("OUTCOME " + json.dumps(outcome))
"""


def plain_read_in_child(refs: Path, name: str) -> dict:
    """Read ``name``'s first chunk through plain ``reference://`` in a fresh process: its
    outcome and peak RSS. A crash is reported as the outcome."""
    return plain_read_in_child_at(refs, name, 0)


def plain_read_in_child_at(refs: Path, name: str, row: int) -> dict:
    """As :func:`plain_read_in_child`, reading the chunk holding variant ``row``."""
    path = os.pathsep.join([str(REPO), str(REPO / "codec"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(refs), name, str(row)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        return {"result": f"crash (exit {proc.returncode})", "error": proc.stderr[-2000:]}
    line = next(x for x in proc.stdout.splitlines() if x.startswith("OUTCOME "))
    return json.loads(line.removeprefix("OUTCOME "))


def refused_with_little_memory(segment: bytes, spec: codec_mod.ChunkSpec, match: str) -> None:
    """The codec refuses ``segment`` (ChunkDecodeError naming ``match``) having allocated
    at most TRACED bytes (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        with pytest.raises(ChunkDecodeError, match=match):
            codec_mod.decode_chunk(segment, spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < TRACED, f"{peak >> 20} MiB traced while refusing"


def save(doc: dict, path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path


# ------------------------------------------------------------------ item 1: GT summary


def mask_spec(records: int, samples: int, ploidy: int) -> codec_mod.ChunkSpec:
    return codec_mod.ChunkSpec(
        array="call_genotype_mask",
        kind="genotype_mask",
        dtype="|b1",
        shape=(samples, ploidy),
        chunk_length=records,
        num_records=records,
        key=1,
        ploidy=ploidy,
        layout="columns",
        samples_chunk_size=samples,
        compressor="blosc",
    )


def test_gt_summary_claiming_a_huge_mask_is_refused(tmp_path):
    """Issue 21 item 1: call_genotype_mask redeclared 1,000,000 records x 59 samples x
    ploidy 100 over one segment whose preamble says "every call complete" and whose
    frame is a 16-byte Blosc header claiming 64 MiB: the summary answered without
    decompressing, the budget took the claimed length for real bytes, and 5.9 GB were
    allocated. A complete block's length is now exactly its calls' alleles (5.9 GB here,
    more than the shape's ceiling), and the mask's size is checked against the ceiling
    before the summary answers."""
    n, samples, ploidy = 1_000_000, 59, 100
    spec = mask_spec(n, samples, ploidy)
    length = 64 << 20
    segment = seal(spec, n, length, blosc_header(length), complete_count=ploidy, flags=columns_mod.FLAG_GT_SHIFT)
    assert len(segment) < 100
    refused_with_little_memory(segment, spec, "every call holds 100 alleles")
    # Its length made what the claim needs (590 MB for 100,000 records): refused by the
    # decode ceiling instead. (Below the ceiling such a claim is answered, as an honest
    # block's would be: a mask of at most half the ceiling, ~470 MB.)
    exact = 5 * 100_000 + 100_000 * samples * ploidy
    spec = mask_spec(100_000, samples, ploidy)
    honest_looking = seal(spec, 100_000, exact, blosc_header(exact), complete_count=ploidy)
    refused_with_little_memory(honest_looking, spec, "more than any chunk of")
    doc = one_array_refs(mask_spec(n, samples, ploidy), segment, ["variants", "samples", "ploidy"])
    refs = save(doc, tmp_path / "m.json")
    assert refs.stat().st_size < 30_000
    plain = plain_read_in_child(refs, spec.array)
    assert plain["result"] == "typed ChunkDecodeError", plain
    assert plain["peak_rss"] < PEAK_RSS, plain


def test_gt_summary_whose_length_cannot_hold_its_calls_is_refused():
    """A preamble saying every call holds ploidy alleles, with a length too short for
    them: within the length bound, the summary would answer for calls the segment cannot
    hold. Refused before any output."""
    n, samples, ploidy = 100_000, 100, 2
    spec = mask_spec(n, samples, ploidy)
    length = 5 * n  # room for the counts alone
    segment = seal(spec, n, length, blosc_header(length), complete_count=ploidy)
    refused_with_little_memory(segment, spec, "every call holds 2 alleles")
    # The phase flags likewise: every call (un)phased means two alleles or more each.
    phased = codec_mod.ChunkSpec(**{**spec.to_config(), "kind": "genotype_phased", "shape": [samples]})
    segment = seal(phased, n, length, blosc_header(length), flags=columns_mod.FLAG_GT_ALL_PHASED)
    refused_with_little_memory(segment, phased, "phase flags")


# ------------------------------------------------------------------ item 2: absent fields


def dp_spec(records: int, samples: int, width: int) -> codec_mod.ChunkSpec:
    return codec_mod.ChunkSpec(
        array="call_DP",
        kind="format",
        dtype="<i4",
        shape=(samples, width),
        chunk_length=records,
        num_records=records,
        key=5,
        vcf_type="Integer",
        layout="columns",
        samples_chunk_size=samples,
        compressor="zstd",
    )


def absent_segment(spec: codec_mod.ChunkSpec, n: int) -> bytes:
    """A typed column in which no record holds the field: count -1 and type 0 each."""
    raw = np.concatenate([np.full(n, -1, "<i4").view(np.uint8), np.zeros(n, np.uint8)])
    return seal(spec, n, raw.shape[0], bytes(Zstd(level=1).encode(raw)))


def test_absent_field_redeclared_huge_is_refused(tmp_path):
    """Issue 21 item 2: call_DP redeclared 1,000,000 records x 30 samples x width 20 over
    a segment in which every record lacks DP (187 bytes compressed): 2.4 GB decoded,
    copied once by zarr. Nothing in the segment backs the claimed records x samples x
    width, so beyond the fixed floor they are capped."""
    n = 1_000_000
    spec = dp_spec(n, 30, 20)
    segment = absent_segment(spec, n)
    assert len(segment) < 1000
    refused_with_little_memory(segment, spec, "would take")
    refs = save(one_array_refs(spec, segment, ["variants", "samples", "DP_dim"]), tmp_path / "dp.json")
    plain = plain_read_in_child(refs, spec.array)
    assert plain["result"] == "typed ChunkDecodeError", plain
    assert plain["peak_rss"] < PEAK_RSS, plain


def test_absent_field_of_an_ordinary_chunk_still_reads_missing():
    """The honest case the cap must leave alone: a chunk of 1,000 records x 2,000 samples
    in which no record holds DP reads -1 (missing) everywhere, as bio2zarr stores it."""
    spec = dp_spec(1000, 2000, 1)
    values = np.asarray(codec_mod.decode_chunk(absent_segment(spec, 1000), spec))
    assert values.shape == (1000, 2000, 1) and (values == -1).all()


def test_a_reader_raises_the_decode_budget_explicitly():
    """The budget is the reader's, set for the process (not a config field, not read from
    the environment at import): a chunk of no DP whose decode (137 MB) is just past the
    default 128 MiB and past what its 130 kB segment backs is refused by default, read as
    missing everywhere once the budget is raised, and refused again once it is put back."""
    from vcfvirtual_codec.checks import MIN_DECODE_BUDGET, decode_limits, set_decode_budget

    spec = dp_spec(26_000, 30, 22)
    segment = absent_segment(spec, 26_000)
    with pytest.raises(ChunkDecodeError, match="would take 137280000 bytes"):
        codec_mod.decode_chunk(segment, spec)
    before = set_decode_budget(256 << 20)
    try:
        assert before == MIN_DECODE_BUDGET
        values = np.asarray(codec_mod.decode_chunk(segment, spec))
        assert values.shape == (26_000, 30, 22) and (values == -1).all()
    finally:
        assert set_decode_budget(None) == 256 << 20
    with pytest.raises(ChunkDecodeError, match="would take"):
        codec_mod.decode_chunk(segment, spec)
    assert decode_limits().budget == MIN_DECODE_BUDGET


def test_a_budget_past_the_ceiling_raises_the_ceiling_and_nonsense_is_refused():
    from vcfvirtual_codec.checks import MAX_DECODE_BYTES, decode_limits, set_decode_budget

    assert decode_limits().ceiling == MAX_DECODE_BYTES == 900 << 20
    set_decode_budget(1 << 30)
    try:
        assert decode_limits().ceiling == 1 << 30
    finally:
        set_decode_budget(None)
    for bad in (0, -1, True, 1.5, "1"):
        with pytest.raises(ValueError, match="positive number of bytes"):
            set_decode_budget(bad)
    assert decode_limits().ceiling == MAX_DECODE_BYTES


# ------------------------------------------------------------------ item 3: zero frames


def position_spec() -> codec_mod.ChunkSpec:
    return codec_mod.ChunkSpec(
        array="variant_position",
        kind="position",
        dtype="<i4",
        shape=(),
        chunk_length=2,
        num_records=2,
        layout="columns",
        compressor="zstd",
    )


def test_zstd_frame_of_a_gigabyte_of_zeros_is_refused_before_inflating(tmp_path):
    """Issue 21 item 3: a real Zstd frame of 1.1 GB of zeros, padded with a skippable
    frame so that the body passed length/1024: typed, but only after a 1.1 GB buffer was
    filled. Two positions need 8 bytes: a longer claim is refused from the shape, before
    any buffer exists."""
    length = 1_100_000_000
    frame = zstd_rle_frame(length) + skippable_frame(length // 1024 + 1)
    spec = position_spec()
    segment = seal(spec, 2, length, frame)
    refused_with_little_memory(segment, spec, "preamble claims")
    refs = save(one_array_refs(spec, segment, ["variants"]), tmp_path / "zeros.json")
    assert refs.stat().st_size < 2_000_000
    plain = plain_read_in_child(refs, spec.array)
    assert plain["result"] == "typed ChunkDecodeError", plain
    assert plain["peak_rss"] < PEAK_RSS, plain


def test_frames_giving_more_than_the_claimed_length_are_refused_without_it():
    """The length is bounded by the shape, and the decompression by the length: a true
    first frame of the 8 bytes two positions need, followed by a second frame of a
    gigabyte of zeros, is refused by the decompressor writing into the 8-byte buffer
    (numcodecs counts every frame's content size first), nothing allocated for the rest."""
    spec = position_spec()
    values = np.array([99, 199], "<i4").view(np.uint8)
    frame = bytes(Zstd(level=1).encode(values)) + zstd_rle_frame(1_000_000_000)
    refused_with_little_memory(seal(spec, 2, 8, frame), spec, "does not decompress")
    # The same first frame alone: the positions, 1-based.
    assert codec_mod.decode_chunk(seal(spec, 2, 8, bytes(Zstd(level=1).encode(values))), spec).tolist() == [100, 200]


def test_handwritten_zstd_frame_is_one_numcodecs_reads():
    """The crafted frames above are real: numcodecs inflates a small one to its zeros."""
    frame = zstd_rle_frame(300_000, 7) + skippable_frame(10)
    assert bytes(Zstd().decode(frame)) == bytes([7]) * 300_000


# ------------------------------------------------------------------ item 6: FILTER maps

IDX_HEADER = """##fileformat=VCFv4.2
##FILTER=<ID=PASS,Description="All filters passed",IDX=0>
##FILTER=<ID=q10,Description="Quality below 10",IDX=3>
##FILTER=<ID=s50,Description="Less than 50% of samples have data",IDX=1>
##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth",IDX=2>
##contig=<ID=chr1,length=1000,IDX=0>
"""
IDX_RECORDS = [
    "chr1\t10\t.\tA\tC\t.\tq10\tDP=3",
    "chr1\t20\t.\tA\tC\t.\ts50;q10\tDP=3",
    "chr1\t30\t.\tA\tC\t.\tPASS\t.",
    "chr1\t40\t.\tA\tC\t.\ts50\tDP=1",
]


@pytest.fixture(scope="module")
def filters_store(tmp_path_factory):
    """A BCF whose header gives its FILTERs IDX= out of order (htslib honours it: q10 is
    dictionary key 3, s50 key 1), indexed in the default layout; and pysam's filters."""
    work = tmp_path_factory.mktemp("filters")
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(IDX_RECORDS, samples=(), header=IDX_HEADER), work / "idx.bcf")
    refs = work / "idx.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=work / "idx.cache", variants_chunk_size=2, progress=False)
    with pysam.VariantFile(str(bcf)) as vf:
        names = list(vf.header.filters)
        rows = [list(r.filter) for r in vf]
    return refs, names, rows


def _filter_config(doc: dict) -> dict:
    return json.loads(doc["refs"]["variant_filter/.zarray"])["filters"][-1]


def _with_filter_columns(doc: dict, columns: list[int]) -> dict:
    doc = copy.deepcopy(doc)
    meta = json.loads(doc["refs"]["variant_filter/.zarray"])
    meta["filters"][-1]["filter_columns"] = columns
    doc["refs"]["variant_filter/.zarray"] = json.dumps(meta)
    return doc


def _plain(refs: Path) -> xr.Dataset:
    return xr.open_zarr("reference://", consolidated=False, storage_options={"fo": str(refs)})


def test_filter_map_of_an_out_of_order_header_reads_pysams_filters(filters_store):
    """The honest map the codec must keep accepting: columns in the header's order, keys
    in IDX order, so the map is not increasing ([0, 2, -1, 1])."""
    refs, names, rows = filters_store
    assert _filter_config(json.loads(refs.read_text()))["filter_columns"] == [0, 2, -1, 1]
    ds = _plain(refs)
    got = [[str(name) for name, on in zip(ds["filter_id"].values, row) if on] for row in ds["variant_filter"].values]
    assert [sorted(g) for g in got] == [sorted(r) for r in rows]
    assert sorted(ds["filter_id"].values.tolist()) == sorted(names)


@pytest.mark.parametrize("columns", [[0, 1, -1, 1], [0, 2, -1, 2], [0, 0, -1, 1], [0, 2, -1, -1]])
def test_filter_map_no_header_gives_is_refused_by_the_codec_alone(filters_store, tmp_path, columns):
    """Issue 21 item 6: duplicated filter_columns decoded a silently wrong variant_filter
    through plain reference:// (two keys setting one column, another never set). The
    codec alone now refuses any map that is not one column per key."""
    refs, _, _ = filters_store
    bad = save(_with_filter_columns(json.loads(refs.read_text()), columns), tmp_path / "dup.json")
    with pytest.raises(CodecConfigError, match="filter_columns"):
        _ = _plain(bad)["variant_filter"].values
    with pytest.raises(VcfVirtualError):
        vcfvirtual.open_store(bad)


def test_reordered_filter_map_is_refused_by_open_store(filters_store, tmp_path):
    """A map reordered into another valid one ([0, 1, -1, 2]) is what a header with other
    IDX values would give: the codec cannot tell it from the header's, open_store can."""
    refs, _, _ = filters_store
    bad = save(_with_filter_columns(json.loads(refs.read_text()), [0, 1, -1, 2]), tmp_path / "perm.json")
    with pytest.raises(VcfVirtualError, match="filter_columns"):
        vcfvirtual.open_store(bad)


# ------------------------------------------------------------------ raw and bgzf layouts


@pytest.fixture(scope="module")
def raw_dp_chunk(tmp_path_factory):
    """The first call_DP chunk of the fuzz seed in the raw layout (2 whole records), and
    its codec configuration."""
    work = tmp_path_factory.mktemp("raw")
    bcf = bcfdata.fuzz_bcf(work / "seed.bcf")
    refs = work / "seed.json"
    cache = work / "seed.cache"
    vcfvirtual.index(
        bcf, refs_path=refs, cache_path=cache, variants_chunk_size=2, cache_layout="raw", force=True, progress=False
    )
    doc = json.loads(refs.read_text())
    _, offset, length = doc["refs"]["call_DP/0.0"]
    config = json.loads(doc["refs"]["call_DP/.zarray"])["filters"][-1]
    config.pop("id")
    return cache.read_bytes()[offset : offset + length], config


def test_records_claiming_the_most_samples_cannot_justify_gigabytes(raw_dp_chunk, tmp_path):
    """Raw layout: two records whose 24-bit n_sample claims 16,777,215 samples, as the
    last chunk of a call_DP redeclared with 30-variant chunks of that many samples. The
    records' own claims passed the budget (64 bytes per claimed sample and row) and the
    decode allocated 2 GB of padding before reading a record; the ceiling refuses it."""
    data, config = raw_dp_chunk
    buf = np.frombuffer(data, np.uint8).copy()
    offsets, n, _, _ = R.record_offsets(buf, 2)
    assert n == 2
    for at in offsets[:n]:
        buf[at + R.OFF_N_FMT_SAMPLE : at + R.OFF_N_FMT_SAMPLE + 3] = 0xFF
    samples = codec_mod.MAX_SAMPLES
    spec = codec_mod.ChunkSpec(**{**config, "shape": [samples], "chunk_length": 30, "num_records": 32})
    refused_with_little_memory(buf.tobytes(), spec, "more than any chunk of")
    refs = save(one_array_refs(spec, buf.tobytes(), ["variants", "samples"]), tmp_path / "claims.json")
    # The chunk read is the last one, whose two records the references hold.
    doc = json.loads(refs.read_text())
    doc["refs"]["call_DP/1.0"] = doc["refs"].pop("call_DP/0.0")
    save(doc, refs)
    plain = plain_read_in_child_at(refs, spec.array, 30)
    assert plain["result"] == "typed ChunkDecodeError", plain
    assert plain["peak_rss"] < PEAK_RSS, plain


BGZF_INPUT = 0xFF00


def bgzf_block(data: bytes) -> bytes:
    """One BGZF block (SAM/BAM spec 4.1) holding ``data``, deflated at zlib's level 9."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = deflate.compress(data) + deflate.flush()
    size = 18 + len(payload) + 8
    header = b"\x1f\x8b\x08\x04" + bytes(4) + b"\x00\xff" + struct.pack("<H2sHH", 6, b"BC", 2, size - 1)
    return header + payload + struct.pack("<II", zlib.crc32(data), len(data))


def test_bgzf_chunk_inflating_past_its_honest_ratio_is_refused_before_inflating():
    """BGZF layout: 2,100 blocks of 65,280 zeros each (~100 bytes compressed, deflate's
    best) inflate to 137 MB before the record walk refuses them. The ISIZE fields add up
    past what 512 bytes per compressed byte allow, so nothing is inflated."""
    block = bgzf_block(bytes(BGZF_INPUT))
    data = block * 2_100
    assert len(data) * 512 < 2_100 * BGZF_INPUT  # deflate's best: ~600 to 1
    spec = codec_mod.ChunkSpec(
        array="variant_position", kind="position", dtype="<i4", shape=(), chunk_length=2, num_records=2, layout="bgzf"
    )
    refused_with_little_memory(data, spec, "ISIZE fields add up")


OPEN_STORE_CHILD = """
import json, resource, sys
import xarray as xr
import vcfvirtual
from vcfvirtual.errors import VcfVirtualError
outcome = {}
try:
    ds = xr.open_zarr(vcfvirtual.open_store(sys.argv[1]), consolidated=False)
    ds[sys.argv[2]][:1].values
    outcome["result"] = "values"
except VcfVirtualError as e:
    outcome["result"] = "typed " + type(e).__name__
    outcome["error"] = str(e)
except BaseException as e:
    outcome["result"] = "untyped " + type(e).__name__
    outcome["error"] = repr(e)[:500]
outcome["peak_rss"] = int(next(x for x in open("/proc/self/status") if x.startswith("VmHWM")).split()[1]) * 1024
print("OUTCOME " + json.dumps(outcome))
"""


def test_gt_summary_redeclared_in_a_real_store_is_refused_through_open_store(tmp_path):
    """Item 1 as the issue found it, through open_store: the seed's call_genotype_mask
    redeclared as 1,000,000 records x ploidy 100 (its own dimension names, so that xarray
    opens it) over one inline complete-block segment with a valid CRC32."""
    bcf = bcfdata.fuzz_bcf(tmp_path / "seed.bcf")
    refs = tmp_path / "seed.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / "seed.cache", variants_chunk_size=2, progress=False)
    doc = json.loads(refs.read_text())
    n, ploidy = 1_000_000, 100
    meta = json.loads(doc["refs"]["call_genotype_mask/.zarray"])
    config = {k: v for k, v in meta["filters"][-1].items() if k != "id"}
    config.update(chunk_length=n, num_records=n, ploidy=ploidy, shape=[3, ploidy])
    spec = codec_mod.ChunkSpec(**config)
    meta["shape"], meta["chunks"] = [n, 3, ploidy], list(spec.chunk_shape)
    meta["filters"][-1] = {"id": codec_mod.CODEC_ID, **spec.to_config()}
    block = spec.samples_chunk_size
    segment = seal(spec, n, 64 << 20, blosc_header(64 << 20), complete_count=ploidy, block_samples=block)
    doc["refs"] = {k: v for k, v in doc["refs"].items() if not k.startswith("call_genotype_mask/")}
    doc["refs"]["call_genotype_mask/.zarray"] = json.dumps(meta)
    doc["refs"]["call_genotype_mask/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": ["v", "s", "p"]})
    doc["refs"]["call_genotype_mask/0.0.0"] = "base64:" + base64.b64encode(segment).decode()
    bad = save(doc, tmp_path / "bad.json")
    path = os.pathsep.join([str(REPO), str(REPO / "codec"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", OPEN_STORE_CHILD, str(bad), "call_genotype_mask"],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcome = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("OUTCOME ")).removeprefix("OUTCOME "))
    assert outcome["result"].startswith("typed "), outcome
    assert outcome["peak_rss"] < PEAK_RSS, outcome
    plain = plain_read_in_child(bad, "call_genotype_mask")
    assert plain["result"] == "typed ChunkDecodeError", plain
    assert plain["peak_rss"] < PEAK_RSS, plain
