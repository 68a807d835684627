"""The columns layout's codec half: segments decode to bio2zarr's arrays, bad ones are refused.

Segments are cut by the index side (``ColumnsLayout``) from BCFs written by htslib
(tests/bcfdata.py), taken out of its cache by the tests' own reader of the format
(tests/columns_reader.py: preamble, CRC32, decompression, the GT shift undone where a
case wants it), wrapped again in the contract's preamble and compressor, and decoded through
``BCFRecordsCodec(**config)`` as a reader would. The oracle is bio2zarr's conversion of
the same BCF with the same variants and samples chunking; the padding of edge chunks is
VCF Zarr's fill of each kind.
"""

from __future__ import annotations

import struct
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
import zarr
from numcodecs import Blosc, VLenUTF8, Zstd
from vcfvirtual_codec.codec import BCFRecordsCodec, decode_chunk
from vcfvirtual_codec.columns import FLAG_GT_SHIFT, MAGIC, PREAMBLE
from vcfvirtual_codec.errors import ChunkDecodeError
from vcfvirtual_codec.spec import ChunkSpec

from vcfvirtual.cache.base import SerialSource
from vcfvirtual.cache.columns import ColumnsLayout

from ... import bcfdata, columns_reader

CHUNK_LENGTH = 3
CHARACTER_HEADER = (
    bcfdata.HEADER
    + """##INFO=<ID=CI,Number=1,Type=Character,Description="A character">
##FORMAT=<ID=CF,Number=1,Type=Character,Description="A character per sample">
"""
)
# Character values: ASCII, a two-byte UTF-8 character, missing, absent.
CHARACTER_RECORDS = [
    "chr1\t100\t.\tA\tT\t30\tPASS\tCI=x\tGT:CF\t0|1:a\t./.:q\t1/1:.",
    "chr1\t200\t.\tA\tC\t.\t.\tCI=\u00e9\tGT:CF\t0/0:b\t0/1:c\t1|1:d",
    "chr1\t300\t.\tG\tT\t1\t.\t.\tGT\t0/0\t0/1\t1|1",
    "chr2\t10\t.\tT\tC\t2\tq10\tCI=.\tGT:CF\t0|0:.\t1|0:z\t0/.:y",
]
CASES = {
    "small": lambda: bcfdata.vcf_text(bcfdata.SMALL_RECORDS),
    "fuzz_seed": lambda: bcfdata.vcf_text(bcfdata.FUZZ_RECORDS, header=bcfdata.FUZZ_HEADER),
    "cohort": lambda: bcfdata.random_cohort_vcf(40, 7, seed=3),
    "character": lambda: bcfdata.vcf_text(CHARACTER_RECORDS, header=CHARACTER_HEADER),
}
FIXED = {
    "variant_contig": ("contig", "contig"),
    "variant_position": ("position", "position"),
    "variant_length": ("length", "rlen"),
    "variant_quality": ("quality", "qual"),
    "variant_id": ("id", "id"),
    "variant_id_mask": ("id_mask", "id"),
    "variant_allele": ("allele", "alleles"),
    "variant_filter": ("filter", "filter"),
}
GT_KINDS = {
    "call_genotype": "genotype",
    "call_genotype_phased": "genotype_phased",
    "call_genotype_mask": "genotype_mask",
}
FLOAT_FILL_BITS = 0x7F800002
# The contract's pick (GT: Blosc lz4 bit-shuffle, the rest Zstd 1), and the other way round
# so that each compressor is decoded for every kind.
PICKED = {"gt": "blosc", "other": "zstd"}
SWAPPED = {"gt": "zstd", "other": "blosc"}


def compress(raw: np.ndarray, compressor: str) -> bytes:
    if compressor == "zstd":
        return Zstd(level=1).encode(raw)
    return Blosc(cname="lz4", clevel=5, shuffle=Blosc.BITSHUFFLE).encode(raw)


# The preamble before its CRC32, which covers these 32 bytes then the compressed frame.
PREAMBLE_HEAD = struct.Struct("<4sBBHiIIIQ")


def sealed(head_fields: tuple, frame: bytes) -> bytes:
    """A segment with its preamble fields (all but the CRC) and frame, the CRC computed
    by zlib (the codec's is isal's)."""
    head = PREAMBLE_HEAD.pack(*head_fields)
    return head + struct.pack("<I", zlib.crc32(frame, zlib.crc32(head))) + frame


def wrap(raw: np.ndarray, compressor: str, kind: int, key: int, n: int, block: int, width: int, flags: int) -> bytes:
    """One chunk's bytes as the contract lays them out: preamble, compressed segment."""
    return sealed((MAGIC, kind, flags, 0, key, n, block, width, raw.shape[0]), compress(raw, compressor))


class Cache:
    """Every chunk's segments of one BCF, wrapped, keyed by (segment name, chunk); a FORMAT
    segment's name carries its samples block (``format/GT#1``)."""

    def __init__(self, bcf: Path, samples_chunk_size: int, gt_shift: bool, compressors: dict[str, str]):
        self.chunks: dict[tuple[str, int], bytes] = {}
        stored = bcf.with_suffix(".columns")
        scan, ranges = ColumnsLayout(samples_chunk_size).write_serial(SerialSource(bcf, lambda h: CHUNK_LENGTH), stored)
        self.header = scan.header
        data = (stored / ranges.parts[0]).read_bytes()  # a serial write: one part
        for name, (offsets, lengths) in ranges.segments.items():
            is_gt = name == "format/GT"
            for where in np.ndindex(offsets.shape):
                compressor = "blosc" if is_gt else "zstd"  # as the index writes them
                seg = columns_reader.read_segment(data, int(offsets[where]), int(lengths[where]), compressor)
                raw = seg.data if is_gt and gt_shift else columns_reader.unshifted(seg)
                flags = FLAG_GT_SHIFT if is_gt and gt_shift else 0
                if is_gt and gt_shift and seg.gt_alleles:  # an alleles block, as the index wrote it
                    R = columns_reader
                    flags = seg.flags & (R.FLAG_GT_ALLELES | R.FLAG_GT_ALL_PHASED | R.FLAG_GT_NONE_PHASED)
                recompressed = compressors["gt" if is_gt else "other"]
                key = f"{name}#{where[1]}" if len(where) == 2 else name
                self.chunks[key, where[0]] = wrap(
                    raw, recompressed, seg.kind, seg.key, seg.records, seg.block, seg.width, flags
                )
        self.records = [min(CHUNK_LENGTH, scan.num_records - i) for i in range(0, scan.num_records, CHUNK_LENGTH)]
        self.compressors = compressors


def config_for(name: str, array, group, header, samples_chunk_size: int, compressors: dict[str, str]) -> dict | None:
    """The codec configuration of one of bio2zarr's arrays, and its segment name, as the
    index side would write it (dtype and shape: bio2zarr's)."""
    dtype = np.dtype(array.dtype)
    shape = list(array.shape[1:])
    base = {"array": name, "dtype": dtype.str, "shape": shape, "chunk_length": CHUNK_LENGTH,
            "num_records": array.shape[0], "layout": "columns"}  # fmt: skip
    if name in FIXED:
        kind, segment = FIXED[name]
        config = {**base, "kind": kind, "compressor": compressors["other"]}
        if kind in ("id", "allele"):
            config["dtype"] = "str"
        if kind == "filter":
            config["filter_columns"] = list(header.filter_column_map())
        return {**config, "_segment": segment}
    if name in GT_KINDS:
        gt = next(f for f in header.formats if f.name == "GT")
        ploidy = group["call_genotype"].shape[2]
        return {**base, "kind": GT_KINDS[name], "key": gt.key, "ploidy": ploidy,
                "samples_chunk_size": samples_chunk_size, "compressor": compressors["gt"],
                "_segment": "format/GT"}  # fmt: skip
    for prefix, category, defs in (("variant_", "info", header.info), ("call_", "format", header.formats)):
        if not name.startswith(prefix):
            continue
        field = next((f for f in defs if f.name == name[len(prefix) :]), None)
        if field is None:
            return None
        config = {**base, "kind": category, "key": field.key, "vcf_type": field.type,
                  "compressor": compressors["other"], "_segment": f"{category}/{field.name}"}  # fmt: skip
        if field.type == "String":
            config["dtype"] = "str"
        if category == "format":
            config["samples_chunk_size"] = samples_chunk_size
        return config
    return None


def pysam_phasing_of_haploid_calls(bcf: Path, reference: np.ndarray) -> np.ndarray:
    """bio2zarr's call_genotype_phased with each haploid call's phasing as htslib reports it.

    bio2zarr (cyvcf2) gives haploid calls of a diploid dataset inconsistent phasing (the
    fuzz seed's "0" phased, "1" not); htslib calls every haploid call phased, which is what
    vcfvirtual decodes (and tests/unit/vcfvirtual/refs/test_open.py checks against pysam).
    """
    import pysam

    expected = np.array(reference)
    with pysam.VariantFile(str(bcf)) as f:
        for k, rec in enumerate(f):
            for s, sample in enumerate(rec.samples.values()):
                if "GT" in rec.format and len(sample["GT"]) == 1:
                    expected[k, s] = sample.phased
    return expected


def fill_of(config: dict):
    """VCF Zarr's fill of a kind, which edge chunks hold past the data."""
    kind, dtype = config["kind"], config["dtype"]
    if kind == "genotype_mask":
        return True  # a padded call reads as fill, which the mask marks (gt < 0)
    if dtype in ("str", "<U1"):
        return ""
    if dtype == "|b1":
        return False
    if dtype == "<f4":
        return np.array([FLOAT_FILL_BITS], "<u4").view("<f4")[0]
    return -2


def decoded(codec: BCFRecordsCodec, data: bytes) -> np.ndarray:
    spec = codec.spec
    out = codec.decode(data)
    if spec.dtype == "str":
        return VLenUTF8().decode(out).reshape(spec.chunk_shape)
    return np.frombuffer(out, np.dtype(spec.dtype)).reshape(spec.chunk_shape)


def assert_same(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(got.view("<u4"), np.asarray(ref, "<f4").view("<u4"), err_msg=what)
    elif got.dtype == object:
        assert got.tolist() == np.asarray(ref).astype(object).tolist(), what
    else:
        np.testing.assert_array_equal(got, np.asarray(ref), err_msg=what)


def assert_padding(got: np.ndarray, n: int, width: int, config: dict) -> None:
    fill = fill_of(config)
    rows = got[n:]
    samples = got[:n, width:] if config.get("samples_chunk_size") else got[:0]
    for part in (rows, samples):
        if got.dtype.kind == "f":
            assert (part.view("<u4") == FLOAT_FILL_BITS).all(), config["array"]
        else:
            assert (part == fill).all(), (config["array"], part)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """bio2zarr's store of each case, per samples chunking (converted once per module)."""
    from bio2zarr import vcf

    done: dict[tuple[str, int], tuple[Path, zarr.Group]] = {}

    def get(case: str, samples_chunk_size: int):
        if (case, samples_chunk_size) not in done:
            tmp = tmp_path_factory.mktemp(f"{case}-{samples_chunk_size}")
            bcf = bcfdata.write_bcf(CASES[case](), tmp / f"{case}.bcf")
            store = tmp / "b2z.vcz"
            vcf.convert([str(bcf)], str(store), variants_chunk_size=CHUNK_LENGTH, samples_chunk_size=samples_chunk_size)
            done[case, samples_chunk_size] = bcf, zarr.open_group(str(store), mode="r")
        return done[case, samples_chunk_size]

    return get


@pytest.mark.parametrize("gt_shift,compressors", [(True, PICKED), (False, SWAPPED)], ids=["picked", "swapped"])
@pytest.mark.parametrize("blocks", ["blocks_of_2", "one_block"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_array_decodes_as_bio2zarr(converted, case, blocks, gt_shift, compressors):
    n_samples = {"cohort": 7}.get(case, 3)
    samples_chunk_size = 2 if blocks == "blocks_of_2" else n_samples
    bcf, group = converted(case, samples_chunk_size)
    cache = Cache(bcf, samples_chunk_size, gt_shift, compressors)
    checked = set()
    for name, array in group.arrays():
        config = config_for(name, array, group, cache.header, samples_chunk_size, compressors)
        if config is None:
            continue
        if name == "call_genotype_phased":
            array = pysam_phasing_of_haploid_calls(bcf, array[:])
        segment = config.pop("_segment")
        codec = BCFRecordsCodec(**config)
        n_blocks = -(-n_samples // samples_chunk_size) if config.get("samples_chunk_size") else 1
        for i, n in enumerate(cache.records):
            rows = slice(i * CHUNK_LENGTH, i * CHUNK_LENGTH + n)
            for b in range(n_blocks):
                key = f"{segment}#{b}" if segment.startswith("format/") else segment
                got = decoded(codec, cache.chunks[key, i])
                if n_blocks > 1 or config.get("samples_chunk_size"):
                    width = min(samples_chunk_size, n_samples - b * samples_chunk_size)
                    ref = array[rows, b * samples_chunk_size : b * samples_chunk_size + width]
                    assert_same(got[:n, :width], ref, f"{name} chunk {i} block {b}")
                else:
                    width = 0
                    assert_same(got[:n], array[rows], f"{name} chunk {i}")
                assert_padding(got, n, width, config)
        checked.add(config["kind"] + ("/" + config.get("vcf_type", "") if config.get("vcf_type") else ""))
    assert {"contig", "position", "length", "quality", "id", "id_mask", "allele", "filter", "genotype",
            "genotype_phased", "genotype_mask"} <= checked  # fmt: skip
    expected = {
        "small": {"info/Integer"},
        "fuzz_seed": {
            "info/Integer",
            "info/Float",
            "info/String",
            "info/Flag",
            "format/Integer",
            "format/Float",
            "format/String",
        },  # fmt: skip
        "cohort": {"info/Integer"},
        "character": {"info/Character", "format/Character"},
    }[case]
    assert expected <= checked


# ---------------------------------------------------------------------------- refusals


@pytest.fixture(scope="module")
def fuzz_cache(converted):
    """The fuzz seed's segments (blocks of 2 samples: 3 samples make a narrower last block)."""
    bcf, group = converted("fuzz_seed", 2)
    return Cache(bcf, 2, True, PICKED), group


def gt_config(cache: Cache, **change) -> dict:
    gt = next(f for f in cache.header.formats if f.name == "GT")
    config = {"array": "call_genotype", "kind": "genotype", "dtype": "|i1", "shape": [3, 2], "chunk_length": 3,
              "num_records": sum(cache.records), "key": gt.key, "ploidy": 2, "layout": "columns",
              "samples_chunk_size": 2, "compressor": "blosc"}  # fmt: skip
    return {**config, **change}


def rewrap(chunk: bytes, compressor: str = "blosc", **change) -> bytes:
    """A chunk with preamble fields changed (the segment itself re-compressed as is)."""
    names = ("magic", "kind", "flags", "pad", "key", "records", "block", "width", "length", "crc")
    fields = dict(zip(names, PREAMBLE.unpack_from(chunk)))
    fields.update(change)
    return PREAMBLE.pack(*fields.values()) + chunk[PREAMBLE.size :]


def preamble_of(chunk: bytes) -> dict:
    names = ("magic", "kind", "flags", "pad", "key", "records", "block", "width", "length", "crc")
    return dict(zip(names, PREAMBLE.unpack_from(chunk)))


def test_the_unchanged_chunk_decodes(fuzz_cache):
    """The baseline of the refusals below: the same chunk and config decode."""
    cache, group = fuzz_cache
    got = decoded(BCFRecordsCodec(**gt_config(cache)), cache.chunks["format/GT#0", 0])
    np.testing.assert_array_equal(got, group["call_genotype"][0:3, 0:2])


@pytest.mark.parametrize(
    "change,named",
    [
        ({"magic": b"VVS9"}, "segment magic is b'VVS9'"),
        ({"magic": b"VVS1"}, "older format b'VVS1' (its CRC32 covers the decompressed bytes)"),
        ({"kind": 7}, "the segment is of kind 7"),
        ({"key": 1}, "key 1, the array reads kind 8 (format) key"),
        ({"records": 2}, "holds 2 records, expected 3"),
        ({"records": 0}, "holds 0 records"),
        ({"width": 1}, "samples block 0 of 1 samples"),
        ({"block": 1}, "samples block 1 of 2 samples"),
        ({"block": 2}, "samples block 2 of 2 samples"),
        ({"flags": 8}, "preamble flags 8"),  # 1, 2 and 4 are GT's: shifted, all and none phased
        ({"flags": 7}, "preamble flags 7"),  # all phased and none phased at once
        ({"pad": 3}, "reserved 3"),  # GT's complete count, above the ploidy
        ({"length": 1}, "the preamble says 1 decompressed bytes, the blosc frame"),
        ({"crc": 12345}, "fails its CRC32"),
    ],
)
def test_each_preamble_mismatch_is_refused(fuzz_cache, change, named):
    cache, _ = fuzz_cache
    codec = BCFRecordsCodec(**gt_config(cache))
    with pytest.raises(ChunkDecodeError) as e:
        codec.decode(rewrap(cache.chunks["format/GT#0", 0], **change))
    assert named in str(e.value)
    assert "call_genotype" in str(e.value)


def test_misplaced_references_are_refused(fuzz_cache):
    """A reference to another array's segment fails the preamble. (One swapped with another
    chunk of the same array and width cannot be told apart by the codec, which is never
    told which chunk it decodes: the contract leaves that to verify and fingerprints.)"""
    cache, _ = fuzz_cache
    codec = BCFRecordsCodec(**gt_config(cache))
    for other in ("format/DP#0", "format/DP#1", "position", "info/NOTE", "alleles"):
        with pytest.raises(ChunkDecodeError, match="the segment is of kind"):
            codec.decode(cache.chunks[other, 0])
    # variant_position pointed at contig's segment: same size, another kind.
    position = {"array": "variant_position", "kind": "position", "dtype": "<i4", "shape": [], "chunk_length": 3,
                "num_records": sum(cache.records), "layout": "columns", "compressor": "zstd"}  # fmt: skip
    BCFRecordsCodec(**position).decode(cache.chunks["position", 0])
    with pytest.raises(ChunkDecodeError, match=r"kind 0 key -1, the array reads kind 1 \(position\)"):
        BCFRecordsCodec(**position).decode(cache.chunks["contig", 0])


def test_damaged_segment_fails_the_crc(fuzz_cache):
    """One flipped GT value byte, compressed again with the original CRC: only the CRC sees it."""
    cache, _ = fuzz_cache
    chunk = cache.chunks["format/GT#0", 0]
    fields = preamble_of(chunk)
    raw = np.frombuffer(Blosc().decode(chunk[PREAMBLE.size :]), np.uint8).copy()
    raw[-1] ^= 0x02  # a phase bit: still a valid GT byte
    damaged = PREAMBLE.pack(*fields.values()) + compress(raw, "blosc")
    with pytest.raises(ChunkDecodeError, match="CRC32"):
        BCFRecordsCodec(**gt_config(cache)).decode(damaged)


def test_stored_damage_the_decompressor_accepts_fails_the_crc(fuzz_cache):
    """A byte of the stored Blosc frame changed so that the frame still decompresses (to
    other values): the CRC32 over the compressed bytes refuses it."""
    cache, _ = fuzz_cache
    chunk = cache.chunks["format/GT#0", 0]
    original = bytes(Blosc().decode(chunk[PREAMBLE.size :]))
    codec = BCFRecordsCodec(**gt_config(cache))
    accepted = 0
    # Past the 16-byte Blosc header: its payload bytes.
    for at in range(PREAMBLE.size + 16, len(chunk)):
        damaged = bytearray(chunk)
        damaged[at] ^= 0x01
        try:
            if bytes(Blosc().decode(bytes(damaged[PREAMBLE.size :]))) == original:
                continue
        except (RuntimeError, ValueError):
            continue
        accepted += 1
        with pytest.raises(ChunkDecodeError, match="fails its CRC32"):
            codec.decode(bytes(damaged))
    assert accepted > 0  # the segment has such bytes (its bit planes are stored verbatim)


def test_a_preamble_field_the_configuration_cannot_check_is_covered_by_the_crc(fuzz_cache):
    """The GT shift flag cleared: the preamble still fits call_genotype's configuration
    (flags 0 is what an unshifted GT segment says), but its CRC32 covers the preamble."""
    cache, group = fuzz_cache
    chunk = cache.chunks["format/GT#0", 0]
    assert preamble_of(chunk)["flags"] == FLAG_GT_SHIFT
    codec = BCFRecordsCodec(**gt_config(cache))
    with pytest.raises(ChunkDecodeError, match="fails its CRC32"):
        codec.decode(rewrap(chunk, flags=0))
    # Why it matters: the same frame sealed with the flag cleared is another chunk (refused
    # by the GT kernel here, or other values), so only the CRC tells the damage apart.
    resealed = sealed(PREAMBLE.unpack_from(rewrap(chunk, flags=0))[:-1], chunk[PREAMBLE.size :])
    try:
        assert not np.array_equal(decoded(codec, resealed), group["call_genotype"][0:3, 0:2])
    except ChunkDecodeError as e:
        assert "CRC32" not in str(e)


def test_compressed_bytes_that_do_not_decompress_are_refused(fuzz_cache):
    cache, _ = fuzz_cache
    chunk = cache.chunks["format/GT#0", 0]
    codec = BCFRecordsCodec(**gt_config(cache))
    with pytest.raises(ChunkDecodeError, match="shorter than a segment's 36-byte preamble"):
        codec.decode(chunk[:20])
    with pytest.raises(ChunkDecodeError, match="Blosc frame says"):
        codec.decode(chunk[:-1])  # truncated: the frame's own length disagrees
    with pytest.raises(ChunkDecodeError, match="the zstd frame no readable frame header"):
        BCFRecordsCodec(**gt_config(cache, compressor="zstd")).decode(chunk)  # the wrong compressor
    zstd_chunk = sealed(PREAMBLE.unpack_from(chunk)[:-1], Zstd(level=1).encode(Blosc().decode(chunk[PREAMBLE.size :])))
    BCFRecordsCodec(**gt_config(cache, compressor="zstd")).decode(zstd_chunk)
    garbled = bytearray(zstd_chunk)
    garbled[-4:] = b"\xff\xff\xff\xff"
    with pytest.raises(ChunkDecodeError, match="does not decompress|CRC32"):
        BCFRecordsCodec(**gt_config(cache, compressor="zstd")).decode(bytes(garbled))


def gt_bcf_meaning(byte: int) -> int:
    """An int8 GT byte as the BCF spec defines it: 0x80 missing, 0x81 end of vector (the
    call_genotype fill, -2), else (allele + 1) << 1 | phased, allele -1 meaning missing."""
    if byte == 0x80:
        return -1
    if byte == 0x81:
        return -2
    return (byte >> 1) - 1


@pytest.mark.parametrize("shifted", [False, True])
def test_every_gt_byte_decodes_as_the_bcf_spec_says(fuzz_cache, shifted):
    """Diploid int8 GT segments holding every valid byte (0-0x81) as the second allele of
    each sample: call_genotype and _phased are what the spec says; an end-of-vector as the
    first allele (a record cut short) pads the sample; a negative value is refused."""
    cache, _ = fuzz_cache
    gt_key = next(f for f in cache.header.formats if f.name == "GT").key
    shift = 2 if shifted else 0
    flags = FLAG_GT_SHIFT if shifted else 0
    samples = 2

    def segment(bytes_per_record: list[list[int]]) -> bytes:
        n = len(bytes_per_record)
        counts = np.full(n, 2, "<i4").view(np.uint8)
        types = np.ones(n, np.uint8)  # int8
        values = (np.array(bytes_per_record, np.int64).ravel() - shift) & 0xFF
        return wrap(np.concatenate([counts, types, values.astype(np.uint8)]), "blosc", 8, gt_key, n, 0, samples, flags)

    genotype = BCFRecordsCodec(**gt_config(cache))
    phased = BCFRecordsCodec(
        **gt_config(cache, array="call_genotype_phased", kind="genotype_phased", dtype="|b1", shape=[3])
    )
    valid = list(range(0x82))
    for start in range(0, len(valid), 3 * samples):
        seconds = (valid[start : start + 3 * samples] * samples)[: 3 * samples]
        firsts = [0x04, 0x02, 0x80, 0x03, 0x05, 0x02][: len(seconds)]  # 1/, 0/, ./, 0|, 1|
        rows = [[x for pair in zip(firsts[r * 2 : r * 2 + 2], seconds[r * 2 : r * 2 + 2]) for x in pair]
                for r in range(3)]  # fmt: skip
        gt = decoded(genotype, segment(rows))
        ph = decoded(phased, segment(rows))
        for r in range(3):
            for k in range(samples):
                first, second = rows[r][2 * k], rows[r][2 * k + 1]
                assert gt[r, k].tolist() == [gt_bcf_meaning(first), gt_bcf_meaning(second)], (first, second)
                assert ph[r, k] == bool(second & 1), (first, second)
    # A sample's vector ended at its first allele: both alleles are the fill.
    gt = decoded(genotype, segment([[0x81, 0x81, 0x02, 0x04]] * 3))
    assert gt[:, 0].tolist() == [[-2, -2]] * 3 and gt[:, 1].tolist() == [[0, 1]] * 3
    for negative in (0x82, 0xC0, 0xFF):
        with pytest.raises(ChunkDecodeError, match="encodes no allele"):
            genotype.decode(segment([[0x02, 0x02, 0x02, negative]] * 3))


@pytest.mark.parametrize("shifted", [False, True])
def test_the_gt_kernel_refuses_alleles_past_the_output_maximum(shifted):
    """The kernel's max_allele bound (int8 GT bytes hold alleles up to 62, so it only bites
    for a smaller bound): allele 1 with max 0 is refused, with max 1 decoded."""
    from vcfvirtual_codec._kernels.genotypes import columns_genotypes
    from vcfvirtual_codec.bcf import records as R

    shift = 2 if shifted else 0
    gt_bytes = (np.array([0x02, 0x04, 0x02, 0x03]) - shift) & 0xFF  # 0/1 and 0|0
    seg = np.concatenate([np.array([2], "<i4").view(np.uint8), [1], gt_bytes]).astype(np.uint8)
    out = np.empty((1, 2, 2), np.int8)
    err, _ = columns_genotypes(seg, 1, out, np.empty((0, 0), bool), 0, shifted)
    assert err == R.ERR_SHAPE
    err, _ = columns_genotypes(seg, 1, out, np.empty((0, 0), bool), 1, shifted)
    assert err == R.OK and out.tolist() == [[[0, 1], [0, 0]]]


def test_a_segment_whose_counts_disagree_with_its_length_is_refused(fuzz_cache):
    """Structurally damaged inside (CRC made to match): the typed column check refuses it."""
    cache, _ = fuzz_cache
    raw = np.zeros(5 * 3 + 7, np.uint8)  # three records claiming 2 int8 values x 2 samples each
    for k in range(3):
        raw[4 * k] = 2
        raw[12 + k] = 1
    gt_key = next(f for f in cache.header.formats if f.name == "GT").key
    chunk = wrap(raw, "blosc", 8, gt_key, 3, 0, 2, 0)
    with pytest.raises(ChunkDecodeError, match="segment's length disagrees with its value counts"):
        BCFRecordsCodec(**gt_config(cache)).decode(chunk)


def test_a_huge_claimed_length_is_refused_before_allocating(fuzz_cache):
    """A preamble (and frame) claiming 2 GiB decompressed from a few bytes allocates nothing."""
    cache, _ = fuzz_cache
    config = {"array": "variant_NOTE", "kind": "info", "dtype": "str", "shape": [], "chunk_length": 3,
              "num_records": sum(cache.records), "key": next(f.key for f in cache.header.info if f.name == "NOTE"),
              "vcf_type": "String", "layout": "columns", "compressor": "zstd"}  # fmt: skip
    chunk = cache.chunks["info/NOTE", 0]
    huge = 2 << 30
    # A Zstd frame header claiming `huge` bytes (single segment, 8-byte content size).
    frame = b"\x28\xb5\x2f\xfd" + bytes([0b11100000]) + struct.pack("<Q", huge) + b"\x00" * 8
    crafted = rewrap(chunk, length=huge)[: PREAMBLE.size] + frame
    tracemalloc.start()
    try:
        with pytest.raises(ChunkDecodeError, match="refusing to allocate"):
            BCFRecordsCodec(**config).decode(crafted)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_an_oversized_config_is_refused_before_decoding(fuzz_cache):
    """A config claiming a huge chunk for a small segment: the decode budget refuses it."""
    cache, _ = fuzz_cache
    spec = ChunkSpec.from_config(gt_config(cache, chunk_length=1 << 30, num_records=3))
    with pytest.raises(ChunkDecodeError, match="refusing to allocate"):
        decode_chunk(cache.chunks["format/GT#0", 0], spec)


@pytest.mark.parametrize(
    "name",
    ["call_genotype", "call_genotype_mask", "call_DP", "call_FT", "call_QS", "variant_allele", "variant_position"],
)
def test_zarr3_reads_whole_arrays_as_bio2zarr(fuzz_cache, name):
    """Through zarr 3 (the codec as a bytes-to-bytes step): chunks of one samples block
    each, the edge chunks trimmed by zarr, read as bio2zarr's arrays."""
    from vcfvirtual_codec.codec import BCFRecordsZarrCodec
    from zarr.codecs import BytesCodec, VLenUTF8Codec
    from zarr.core.buffer import cpu
    from zarr.storage import MemoryStore

    cache, group = fuzz_cache
    reference = group[name]
    config = config_for(name, reference, group, cache.header, 2, PICKED)
    assert config is not None
    segment = config.pop("_segment")
    spec = ChunkSpec.from_config(config)
    strings = spec.dtype == "str"
    store = MemoryStore()
    array = zarr.create_array(
        store,
        name=name,
        shape=reference.shape,
        chunks=spec.chunk_shape,
        dtype=str if strings else spec.dtype,
        serializer=VLenUTF8Codec() if strings else BytesCodec(),
        compressors=[BCFRecordsZarrCodec(spec=spec)],
        fill_value="" if strings else None,
    )
    n_blocks = 2 if spec.samples_chunk_size else 1
    for (key, i), chunk in cache.chunks.items():
        for b in range(n_blocks):
            if key == (f"{segment}#{b}" if spec.samples_chunk_size else segment):
                coords = [i, b] if spec.samples_chunk_size else [i]
                coords += [0] * (len(spec.chunk_shape) - len(coords))
                store._store_dict[f"{name}/c/" + "/".join(map(str, coords))] = cpu.Buffer.from_bytes(chunk)
    assert_same(np.asarray(array[:]), reference[:], name)


def test_character_values_are_the_first_character_python_decodes():
    """The Character kernel against Python's own UTF-8 decoder (errors="replace"): whole
    characters of 1-4 bytes, and byte strings that start no whole character."""
    from vcfvirtual_codec.columns import first_characters

    values = ["a", "ab", "\u00e9x", "\u20ac", "\U0001f600z", "\u00e9"]
    raw = [v.encode() for v in values]
    raw += [b"\xc3", b"\xe2\x82", b"\xff", b"\x80a", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80"]
    seg = np.frombuffer(b"".join(raw), np.uint8)
    starts = np.cumsum([0] + [len(r) for r in raw[:-1]]).astype(np.int64)
    lengths = np.array([len(r) for r in raw], np.int64)
    # Missing (".") and fill ("") spans after the values.
    starts = np.concatenate([starts, [0, 0]])
    lengths = np.concatenate([lengths, [-2, -1]])
    out = np.empty(starts.shape[0], "<u4")
    first_characters(seg, starts, lengths, out)
    expected = [r.decode("utf-8", errors="replace")[0] for r in raw] + [".", ""]
    assert out.view("<U1").tolist() == expected


def test_variant_length_reads_the_resolved_rlen_whatever_end_key_the_config_carries(fuzz_cache):
    """Other layouts' length configs carry INFO/END's key (the decode resolves rlen from
    it); the columns rlen segment is resolved already and its preamble key is -1."""
    cache, group = fuzz_cache
    config = {"array": "variant_length", "kind": "length", "dtype": "<i4", "shape": [], "chunk_length": 3,
              "num_records": sum(cache.records), "layout": "columns", "compressor": "zstd"}  # fmt: skip
    for key in (-1, 7):
        got = decoded(BCFRecordsCodec(**config, key=key), cache.chunks["rlen", 0])
        np.testing.assert_array_equal(got, group["variant_length"][0:3])


@pytest.mark.parametrize(("vcf_type", "dtype", "stored_type"), [("Integer", "<i4", 5), ("Float", "<f4", 3)])
def test_values_typed_against_the_config_are_refused(fuzz_cache, vcf_type, dtype, stored_type):
    """An INFO segment whose values are typed otherwise than the header's Type (floats in an
    Integer field, int32s in a Float field), its CRC made to match: refused as the record
    layouts refuse it (htslib's bcf_record_check would not read such a record either)."""
    cache, _ = fuzz_cache
    field = next(f for f in cache.header.info if f.type == vcf_type)
    n = sum(cache.records[:1])
    counts = np.ones(n, "<i4").view(np.uint8)
    types = np.full(n, stored_type, np.uint8)
    values = np.arange(n, dtype="<f4" if stored_type == 5 else "<i4").view(np.uint8)
    raw = np.concatenate([counts, types, values])
    chunk = wrap(raw, "zstd", 7, field.key, n, 0, 1, 0)
    config = {"array": f"variant_{field.name}", "kind": "info", "key": field.key, "vcf_type": vcf_type,
              "dtype": dtype, "shape": [], "chunk_length": CHUNK_LENGTH, "num_records": sum(cache.records),
              "layout": "columns", "compressor": "zstd"}  # fmt: skip
    with pytest.raises(ChunkDecodeError, match="another type than the header declares"):
        BCFRecordsCodec(**config).decode(chunk)


@pytest.mark.parametrize(("dtype", "stored_type", "big"), [("|i1", 2, 300), ("<i2", 3, 70000), ("|i1", 3, -200)])
def test_integers_outside_the_array_dtype_are_refused_not_wrapped(fuzz_cache, dtype, stored_type, big):
    """Integers decode straight into the array's (narrower) dtype: a value stored wider
    that does not fit is refused naming the record and value, as the record layouts'
    decode refuses it; values of the same wider type that fit decode to themselves."""
    cache, _ = fuzz_cache
    field = next(f for f in cache.header.info if f.type == "Integer")
    n = cache.records[0]
    config = {"array": f"variant_{field.name}", "kind": "info", "key": field.key, "vcf_type": "Integer",
              "dtype": dtype, "shape": [], "chunk_length": CHUNK_LENGTH, "num_records": sum(cache.records),
              "layout": "columns", "compressor": "zstd"}  # fmt: skip
    stored = "<i2" if stored_type == 2 else "<i4"

    def chunk_of(values):
        counts = np.ones(n, "<i4").view(np.uint8)
        types = np.full(n, stored_type, np.uint8)
        return wrap(np.concatenate([counts, types, np.array(values, stored).view(np.uint8)]), "zstd", 7, field.key,
                    n, 0, 1, 0)  # fmt: skip

    values = [5, big, -7][:n]
    refused = f"record 1 of the chunk holds {big}, outside the array's {np.dtype(dtype)}"
    with pytest.raises(ChunkDecodeError, match=refused):
        BCFRecordsCodec(**config).decode(chunk_of(values))
    fitting = [5, np.iinfo(dtype).max, np.iinfo(dtype).min + 2][:n]  # min and min + 1: BCF's sentinels
    got = decoded(BCFRecordsCodec(**config), chunk_of(fitting))
    np.testing.assert_array_equal(got[:n], fitting)
    assert got.dtype == np.dtype(dtype)


def test_a_decoded_chunk_keeps_its_values_while_later_chunks_decode(fuzz_cache):
    """Every decode returns memory of its own (the codec keeps no pool of outputs): a chunk
    still referred to, even through a view, is never overwritten by later decodes."""
    cache, group = fuzz_cache
    codec = BCFRecordsCodec(**gt_config(cache))
    first = decoded(codec, cache.chunks["format/GT#0", 0])
    tail = first[1:]  # a view: the chunk stays alive through it alone
    del first
    n = cache.records[1]
    for _ in range(3):
        other = decoded(codec, cache.chunks["format/GT#0", 1])
        np.testing.assert_array_equal(other[:n], group["call_genotype"][3 : 3 + n, 0:2])
        assert not np.shares_memory(other, tail)
        del other
    np.testing.assert_array_equal(tail, group["call_genotype"][1:3, 0:2])


@pytest.mark.parametrize("name", ["call_DP", "call_genotype", "call_genotype_phased"])
def test_every_value_of_a_decoded_chunk_is_written(fuzz_cache, converted, name):
    """Outputs start uninitialised (np.empty): every value of the decoded chunk, padding
    included, is written by the decode."""
    cache, group = fuzz_cache
    config = config_for(name, group[name], group, cache.header, 2, PICKED)
    segment = config.pop("_segment")
    # The first chunk read as the whole array of a 4-variant chunk: one row of padding.
    n = cache.records[0]
    config.update(chunk_length=n + 1, num_records=n)
    got = decoded(BCFRecordsCodec(**config), cache.chunks[f"{segment}#0", 0])
    expected = group[name][:]
    if name == "call_genotype_phased":  # haploid calls: htslib's phasing, as the decode reads it
        expected = pysam_phasing_of_haploid_calls(converted("fuzz_seed", 2)[0], expected)
    assert_same(got[:n], expected[0:n, 0:2], name)
    assert_padding(got, n, 2, config)
