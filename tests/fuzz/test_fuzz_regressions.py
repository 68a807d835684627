"""Inputs the fuzz targets (tests/fuzz_targets.py) found mishandled, kept as fixed tests.

Each mutates the fuzz seed (tests/bcfdata.FUZZ_RECORDS) the way the fuzzer did and
checks the typed error, and htslib (pysam) refusing the same bytes where it applies."""

from __future__ import annotations

import json

import numpy as np
import pysam
import pytest
from vcfvirtual_codec import codec

import vcfvirtual
from vcfvirtual.errors import ChunkDecodeError, CorruptBCFError, HeaderError

from .. import bcfdata
from ..conftest import resolved_refs


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    work = tmp_path_factory.mktemp("fuzzseed")
    bgzf = bcfdata.fuzz_bcf(work / "seed.bcf")
    return work, bcfdata.uncompressed_copy(bgzf, work / "seed.plain.bcf").read_bytes()


def _seed_refs(work, tmp_path, layout="raw"):
    """The seed indexed in chunks of 2 (raw by default: tests edit chunk bytes in place,
    which needs the uncompressed layout), as resolved Kerchunk references."""
    refs = tmp_path / "s.json"
    vcfvirtual.index(
        work / "seed.bcf",
        refs_path=refs,
        cache_path=tmp_path / "s.cache",
        variants_chunk_size=2,
        cache_layout=layout,
        force=True,
    )
    return resolved_refs(refs)


def _chunk(doc, key):
    """(the chunk's bytes, editable, and the codec spec of its array)."""
    path, offset, length = doc[key]
    name = key.split("/")[0]
    spec = codec.ChunkSpec.from_config(json.loads(doc[f"{name}/.zarray"])["filters"][-1])
    with open(path, "rb") as f:
        f.seek(offset)
        return bytearray(f.read(length)), spec


def _behind_seed_header(work, tmp_path, records: bytes):
    """An uncompressed BCF of the seed's header and ``records``, for htslib to read."""
    header = bcfdata.uncompressed_copy(work / "seed.bcf", tmp_path / "p.bcf").read_bytes()
    plain = tmp_path / "m.bcf"
    plain.write_bytes(header[: 9 + int.from_bytes(header[5:9], "little")] + records)
    return plain


def _index(work, data):
    path = work / "mutated.bcf"
    path.write_bytes(data)
    return path, lambda: vcfvirtual.index(
        path, refs_path=False, cache_path=work / "c.bcf", force=True, variants_chunk_size=2, progress=False
    )


def test_header_text_that_is_not_utf8_is_a_header_error(seed):
    work, plain = seed
    data = bytearray(plain)
    data[9] ^= 0x80  # first byte of the header text: '#' becomes an invalid UTF-8 lead byte
    _, run = _index(work, bytes(data))
    with pytest.raises(HeaderError, match="not UTF-8"):
        run()


def test_header_pysam_asserts_on_is_a_header_error(seed):
    """'##contig' damaged to '##bontig': the first contig's IDX=0 is gone, which leaves id 0
    unused (pysam asserts iterating such a header; we read it, as htslib does), and the
    records on it are ones htslib refuses ("Invalid CONTIG id 0"): so do we, typed."""
    work, plain = seed
    at = plain.index(b"##contig")
    data = plain[:at] + b"##bontig" + plain[at + 8 :]
    path, run = _index(work, data)
    with pytest.raises(OSError), pysam.VariantFile(str(path)) as vf:
        for _ in vf:
            pass
    with pytest.raises(CorruptBCFError, match="names contig id 0, which the header does not define"):
        run()


def test_info_key_the_header_does_not_define_is_refused(seed):
    """A damaged ##INFO line is dropped by htslib, leaving records that use its key:
    htslib refuses those records (bcf_record_check), so must we."""
    work, plain = seed
    data = plain.replace(b"ID=SOMATIC,Number=0,Type=Flag", b"ID=SOMATIC,Number=0,Type<Flag")
    assert data != plain
    path, run = _index(work, data)
    with pytest.raises(OSError), pysam.VariantFile(str(path)) as vf:
        for _ in vf:
            pass
    with pytest.raises(CorruptBCFError, match="key the header does not define"):
        run()


def test_allele_that_is_not_utf8_is_a_chunk_decode_error(seed, tmp_path):
    """A flipped bit in an allele string of a raw cache chunk used to surface as a
    UnicodeDecodeError from zarr's vlen-utf8 step."""
    work, _ = seed
    chunk, spec = _chunk(_seed_refs(work, tmp_path), "variant_allele/0.0")
    chunk = bytes(chunk)
    at = chunk.index(b"ACGT")
    assert codec.decode_chunk(chunk, spec) is not None
    with pytest.raises(ChunkDecodeError, match="not UTF-8"):
        codec.decode_chunk(chunk[:at] + b"\xc3" + chunk[at + 1 :], spec)
    with pytest.raises(ChunkDecodeError, match="not UTF-8"):
        codec.decode_chunk(chunk[:at] + b"\xff" + chunk[at + 1 :], spec)
    # A valid two-byte character is a value, not an error.
    out = codec.decode_chunk(chunk[:at] + b"\xc3\xa9" + chunk[at + 2 :], spec)
    assert "\u00e9GT" in bytes(np.asarray(out)).decode()


def test_value_outside_the_arrays_dtype_is_refused_not_wrapped(seed, tmp_path):
    """A raw-cache chunk whose POS gained 65536 (bit 0 of its third byte flipped):
    htslib reads 65541, and the codec used to cast it into variant_position's int16
    as 5. It must refuse instead."""
    work, _ = seed
    doc = _seed_refs(work, tmp_path)
    chunk, spec = _chunk(doc, "variant_position/2")
    assert np.dtype(json.loads(doc["variant_position/.zarray"])["dtype"]).itemsize == 2
    second = 8 + int.from_bytes(chunk[0:4], "little") + int.from_bytes(chunk[4:8], "little")
    chunk[second + 12 + 2] ^= 1  # POS += 65536
    with pytest.raises(ChunkDecodeError, match="outside the array's int16"):
        codec.decode_chunk(bytes(chunk), spec)
    with pysam.VariantFile(str(_behind_seed_header(work, tmp_path, bytes(chunk)))) as vf:
        assert [r.pos for r in vf][1] == 65541  # htslib's reading of the same bytes


@pytest.mark.parametrize("n_sample", [2, 4])
def test_record_sample_count_other_than_the_arrays_is_refused(seed, tmp_path, n_sample):
    """FORMAT vectors are laid out by the record's own n_sample; decoding the array's
    3 samples from a record that says 2 or 4 read bytes of other fields (or past the
    chunk) as genotypes."""
    work, _ = seed
    doc = _seed_refs(work, tmp_path)
    for name in ("call_genotype", "call_DP", "call_QS", "call_FT"):
        chunk, spec = _chunk(doc, f"{name}/0.0" if f"{name}/0.0" in doc else f"{name}/0.0.0")
        chunk[28] = n_sample  # low byte of record 0's n_sample (3 in the seed)
        with pytest.raises(ChunkDecodeError):
            codec.decode_chunk(bytes(chunk), spec)


def test_bgzf_block_size_smaller_than_its_header_is_corrupt(seed, tmp_path):
    """BSIZE (bytes 16-17 of a block) set to 0: the footer offset went negative and
    struct.error escaped from both the scan and the bgzf-layout codec."""
    work, _ = seed
    data = bytearray((work / "seed.bcf").read_bytes())
    data[16] = data[17] = 0
    _, run = _index(work, bytes(data))
    with pytest.raises(CorruptBCFError, match="BGZF block size"):
        run()
    chunk, spec = _chunk(_seed_refs(work, tmp_path, layout="bgzf"), "variant_position/0")
    chunk[16] = 0
    with pytest.raises(ChunkDecodeError, match="BGZF block size"):
        codec.decode_chunk(bytes(chunk), spec)


def test_bgzf_xlen_shorter_than_its_bc_subfield_is_corrupt(seed, tmp_path):
    """XLEN 6 -> 4 (bit 1 of byte 10 flipped): the BC subfield ran past the extra
    field and IndexError escaped from the BGZF block parser."""
    work, _ = seed
    data = bytearray((work / "seed.bcf").read_bytes())
    data[10] ^= 2
    _, run = _index(work, bytes(data))
    with pytest.raises(CorruptBCFError):
        run()


def test_record_chrom_outside_the_contigs_is_refused(seed):
    """CHROM of the first record set to 7 (3 contigs): htslib refuses the record; we
    stored 7 in variant_contig, an index past contig_id."""
    work, plain = seed
    hs = 9 + int.from_bytes(plain[5:9], "little")
    data = bytearray(plain)
    data[hs + 8 : hs + 12] = (7).to_bytes(4, "little")
    path, run = _index(work, bytes(data))
    with pytest.raises(OSError), pysam.VariantFile(str(path)) as vf:
        for _ in vf:
            pass
    with pytest.raises(CorruptBCFError, match="CHROM is not a contig"):
        run()


def test_negative_pos_is_refused_by_scan_and_codec(seed, tmp_path):
    """POS bytes set to 0xFFFFFFC7: we read int32 -57 (position -56), htslib reads it
    unsigned (position 4294967240). Only 0xFFFFFFFF (VCF POS 0) is a valid negative."""
    work, plain = seed
    hs = 9 + int.from_bytes(plain[5:9], "little")
    data = bytearray(plain)
    data[hs + 12 : hs + 16] = (2**32 - 57).to_bytes(4, "little")
    path, run = _index(work, bytes(data))
    with pysam.VariantFile(str(path)) as vf:
        assert next(iter(vf)).pos == 2**32 - 56
    with pytest.raises(CorruptBCFError, match="POS is negative"):
        run()
    chunk, spec = _chunk(_seed_refs(work, tmp_path), "variant_position/0")
    chunk[12:16] = (2**32 - 57).to_bytes(4, "little")
    with pytest.raises(ChunkDecodeError, match="negative POS"):
        codec.decode_chunk(bytes(chunk), spec)
    chunk[12:16] = (2**32 - 1).to_bytes(4, "little")  # VCF POS 0, as htslib writes it: a value
    assert np.frombuffer(codec.decode_chunk(bytes(chunk), spec), "<i2")[0] == 0


def test_flag_holding_values_reads_as_present(seed):
    """The fuzzer flipped NOTE's key into SOMATIC's (a Flag) in a record where NOTE is
    "x,y": htslib reads the flag as set. The index gave the flag a 2-wide dimension
    (two comma-separated parts) that the Flag decoder does not fill, and zarr failed
    with ValueError."""
    import xarray as xr

    work, plain = seed
    with pysam.VariantFile(str(work / "seed.plain.bcf")) as vf:
        note, somatic = vf.header.info["NOTE"].id, vf.header.info["SOMATIC"].id
    old = bytes([0x11, note, 0x37]) + b"x,y"
    assert plain.count(old) == 1
    path, run = _index(work, plain.replace(old, bytes([0x11, somatic, 0x37]) + b"x,y"))
    with pysam.VariantFile(str(path)) as vf:
        expected = ["SOMATIC" in rec.info for rec in vf]
    assert sum(expected) == 2
    ds = xr.open_zarr(run(), zarr_format=3, consolidated=False)
    assert ds["variant_SOMATIC"].dims == ("variants",)
    assert ds["variant_SOMATIC"].values.tolist() == expected


def test_genotype_values_after_vector_end_are_padding(seed, tmp_path):
    """A call whose first GT value is end-of-vector is empty to htslib (pysam: ());
    the decoder used to keep reading and return [-2, 1]."""
    work, _ = seed
    chunk, spec = _chunk(_seed_refs(work, tmp_path), "call_genotype/0.0.0")
    # Record 0 is "GT 0|1 ./. 1/1": GT's int8 values for the 3 samples follow its key and
    # descriptor at the start of the FORMAT part.
    fmt = 8 + int.from_bytes(chunk[0:4], "little")
    assert chunk[fmt + 2] == 0x21 and list(chunk[fmt + 3 : fmt + 9]) == [3, 5, 0, 0, 4, 4]
    chunk[fmt + 7] = 0x81  # sample 3's first allele := int8 end-of-vector (-127)
    with pysam.VariantFile(str(_behind_seed_header(work, tmp_path, bytes(chunk)))) as vf:
        assert next(iter(vf)).samples[2]["GT"] == ()
    values = np.frombuffer(codec.decode_chunk(bytes(chunk), spec), np.int8).reshape(2, 3, 2)
    assert values[0, 2].tolist() == [-2, -2]


def test_allele_that_is_not_a_string_is_refused(seed):
    """An allele's descriptor zeroed (the fuzzer's u32 0): a NULL-typed allele, which
    htslib refuses ("Invalid REF/ALT type") and we read as an empty allele."""
    work, plain = seed
    old = b"\x37rs3\x17G\x17C"  # record 3's ID and alleles
    assert plain.count(old) == 1
    path, run = _index(work, plain.replace(old, b"\x37rs3\x17G\x00\x00"))
    with pytest.raises(OSError), pysam.VariantFile(str(path)) as vf:
        for _ in vf:
            pass
    with pytest.raises(CorruptBCFError, match="type code"):
        run()


def test_file_cut_inside_the_magic_is_a_typed_error(seed):
    """The fuzzer truncated the plain BCF to b"BCF\\x02": classify_prefix read byte 4 for
    the minor version and raised IndexError."""
    work, plain = seed
    for n in (1, 3, 4):
        _, run = _index(work, plain[:n])
        with pytest.raises(HeaderError, match="inside the BCF magic"):
            run()


def test_genotype_byte_that_encodes_no_allele_is_refused(seed, tmp_path):
    """Found by a deep run: a GT byte 0x82 (negative, neither missing nor end-of-vector)
    decoded as allele -64."""
    work, _ = seed
    chunk, spec = _chunk(_seed_refs(work, tmp_path), "call_genotype/0.0.0")
    fmt = 8 + int.from_bytes(chunk[0:4], "little")
    assert chunk[fmt + 2] == 0x21 and list(chunk[fmt + 3 : fmt + 9]) == [3, 5, 0, 0, 4, 4]
    chunk[fmt + 3] = 0x82
    with pytest.raises(ChunkDecodeError, match="encodes no allele"):
        codec.decode_chunk(bytes(chunk), spec)
