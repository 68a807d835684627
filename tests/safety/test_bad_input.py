"""Bad input gets one typed error, from the library and as one line from the CLI.

Every bad file here is a BCF that htslib (pysam) wrote, then edited byte by byte: its
header text rewritten (with l_text fixed), a record field changed. Offsets expected in
errors are found by walking the records with the BCF spec's arithmetic (8 + l_shared +
l_indiv), not by asking vcfvirtual. tests/integration/test_cli.py and tests/safety/test_safety.py hold the
cases that existed before (not BCF, VCF text, damaged BGZF, version, EOF, n_sample).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pysam
import pytest
from vcfvirtual_codec.bcf import bgzf
from vcfvirtual_codec.codec import BCFRecordsCodec

import vcfvirtual
from vcfvirtual import errors
from vcfvirtual.bcf import header as header_mod
from vcfvirtual.refs import kerchunk

from .. import bcfdata
from ..conftest import FullDisk
from ..integration.test_cli import run_index

LAYOUTS = ["raw", "bgzf", "columns"]
# BCF 2.2 record layout: n_sample is the low 24 bits of the u32 at byte 28 of a record.
N_SAMPLE_OFFSET = 28


def header_end(data: bytes) -> int:
    return 9 + int.from_bytes(data[5:9], "little")


def record_offsets(data: bytes) -> list[int]:
    """Offsets of the records in an uncompressed BCF, by the spec's lengths."""
    out, pos = [], header_end(data)
    while pos < len(data):
        out.append(pos)
        pos += 8 + int.from_bytes(data[pos : pos + 4], "little") + int.from_bytes(data[pos + 4 : pos + 8], "little")
    return out


def rewrite_header(data: bytes, old: str, new: str) -> bytes:
    """The uncompressed BCF with ``old`` replaced by ``new`` in its header text."""
    end = header_end(data)
    text = data[9:end]
    assert text.count(old.encode()) == 1, old
    text = text.replace(old.encode(), new.encode())
    return data[:5] + len(text).to_bytes(4, "little") + text + data[end:]


def line_of(data: bytes, start: str) -> str:
    """The whole header line beginning with ``start`` (htslib adds IDX= when writing)."""
    text = data[9 : header_end(data)].decode()
    (line,) = [x for x in text.split("\n") if x.startswith(start)]
    return line + "\n"


@pytest.fixture(scope="module")
def plain(small_bcf) -> bytes:
    """small.bcf uncompressed (bcftools view -Ou writes the same bytes)."""
    return gzip.decompress(small_bcf.read_bytes())


def _cases(plain: bytes) -> dict:
    """name -> (bytes, error class, words in the message, offset or None)."""
    offsets = record_offsets(plain)
    n_sample = bytearray(plain)
    n_sample[offsets[2] + N_SAMPLE_OFFSET] = 4  # 3 samples in the header
    no_dp = rewrite_header(plain, line_of(plain, "##INFO=<ID=DP"), "")
    no_q10 = rewrite_header(plain, line_of(plain, "##FILTER=<ID=q10"), "")
    no_gt = rewrite_header(plain, line_of(plain, "##FORMAT=<ID=GT"), "")
    no_chrx = rewrite_header(plain, line_of(plain, "##contig=<ID=chrX"), "")
    dp_float = rewrite_header(plain, "ID=DP,Number=1,Type=Integer", "ID=DP,Number=1,Type=Float")
    return {
        # Records 0 (DP=5) and 1 (FILTER q10;s50) are the first to use the hidden keys.
        "undeclared_info_key": (no_dp, errors.CorruptBCFError, "INFO/FORMAT key", record_offsets(no_dp)[0]),
        "undeclared_filter_key": (no_q10, errors.CorruptBCFError, "FILTER key", record_offsets(no_q10)[1]),
        "undeclared_format_key": (no_gt, errors.CorruptBCFError, "INFO/FORMAT key", record_offsets(no_gt)[0]),
        "undeclared_contig": (no_chrx, errors.CorruptBCFError, "CHROM", record_offsets(no_chrx)[6]),
        "info_typed_against_header": (
            dp_float,
            errors.CorruptBCFError,
            "INFO/DP (Type=Float)",
            record_offsets(dp_float)[0],
        ),
        "record_n_sample_differs": (bytes(n_sample), errors.CorruptBCFError, "sample count", offsets[2]),
        "unknown_bcf_version": (b"BCF\x03\x01" + plain[5:], errors.UnsupportedBCFError, "unknown BCF version", None),
        "header_not_vcf": (
            rewrite_header(plain, "##fileformat=VCFv4.3", "##format=VCF"),
            errors.HeaderError,
            "##fileformat",
            None,
        ),
        "header_cut_short": (plain[: header_end(plain) - 100], errors.HeaderError, "truncated", None),
        "record_cut_short": (
            plain[: record_offsets(plain)[3] + 20],
            errors.CorruptBCFError,
            "incomplete record",
            record_offsets(plain)[3],
        ),
    }


CASES = [
    "undeclared_info_key",
    "undeclared_filter_key",
    "undeclared_format_key",
    "undeclared_contig",
    "info_typed_against_header",
    "record_n_sample_differs",
    "unknown_bcf_version",
    "header_not_vcf",
    "header_cut_short",
    "record_cut_short",
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES)
def test_library_raises_a_typed_error_naming_file_and_offset(plain, tmp_path, case, layout):
    data, cls, words, offset = _cases(plain)[case]
    bad = tmp_path / f"{case}.bcf"
    bad.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(cls) as info:
        vcfvirtual.index(bad, refs_path=out / "x.json", cache_path=out / "x.cache", cache_layout=layout)
    assert info.value.path == str(bad) and words in info.value.problem, str(info.value)
    assert info.value.offset == offset, str(info.value)
    assert os.listdir(out) == []  # no output, not even a temporary


@pytest.mark.parametrize("case", ["undeclared_info_key", "undeclared_filter_key", "undeclared_format_key"])
def test_htslib_refuses_the_same_records(plain, tmp_path, case):
    """The undeclared-key records are invalid to htslib too (bcf_record_check), so
    refusing them agrees with the reference reader rather than being stricter."""
    bad = tmp_path / f"{case}.bcf"
    bad.write_bytes(_cases(plain)[case][0])
    verbosity = pysam.set_verbosity(0)
    try:
        with pytest.raises(OSError), pysam.VariantFile(str(bad)) as vf:
            for _ in vf:
                pass
    finally:
        pysam.set_verbosity(verbosity)


@pytest.mark.parametrize("case", CASES)
def test_cli_prints_one_line_and_exits_1(plain, tmp_path, case):
    bad = tmp_path / f"{case}.bcf"
    bad.write_bytes(_cases(plain)[case][0])
    result = run_index(bad)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vcfvirtual: error: ") and str(bad) in lines[0], result.output
    assert sorted(os.listdir(tmp_path)) == [bad.name]


def test_more_samples_than_a_record_can_hold(small_bcf, tmp_path, monkeypatch):
    """A BCF record's n_sample has 24 bits; a header naming more samples is refused.
    (A header with 2^24 samples is too big to make here, so the limit is lowered.)"""
    monkeypatch.setattr(header_mod, "MAX_SAMPLES", 2)
    with pytest.raises(errors.UnsupportedBCFError, match="3 samples, more than the 2") as info:
        vcfvirtual.index(small_bcf, refs_path=False, cache_path=tmp_path / "c.bcf")
    assert info.value.path == str(small_bcf)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_unreadable_file(small_bcf, tmp_path):
    bad = tmp_path / "locked.bcf"
    bad.write_bytes(small_bcf.read_bytes())
    bad.chmod(0)
    result = run_index(bad)
    assert result.exit_code == 1 and "Permission denied" in result.output and "Traceback" not in result.output


# ------------------------------------------------------------------ header lines


def _with_extra_header_line(small_bcf, tmp_path, line: str):
    data = gzip.decompress(small_bcf.read_bytes())
    bad = tmp_path / "h.bcf"
    gt = line_of(data, "##FORMAT=<ID=GT")
    bad.write_bytes(rewrite_header(data, gt, line + "\n" + gt))
    return bad


@pytest.mark.parametrize(
    "line, warning",
    [
        ('##INFO=<Number=1,Type=Integer,Description="no id">', "has no ID"),
        ('##INFO=<ID=DP,Number=2,Type=Float,Description="again">', "defines INFO/DP again"),
    ],
)
def test_repeated_or_id_less_header_lines_warn_and_read_as_htslib(small_bcf, tmp_path, caplog, line, warning):
    """htslib reads these headers anyway (first definition wins, a line without ID is
    dropped); we read them as it does, and say so."""
    bad = _with_extra_header_line(small_bcf, tmp_path, line)
    refs = tmp_path / "h.json"
    with caplog.at_level(logging.WARNING, logger="vcfvirtual.bcf.header"):
        vcfvirtual.index(bad, refs_path=refs, cache_path=tmp_path / "h.cache")
    assert warning in caplog.text and str(bad) in caplog.text
    import xarray as xr

    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    with pysam.VariantFile(str(bad)) as vf:
        expected = [r.info.get("DP", -1) for r in vf]
    assert ds["variant_DP"].values.tolist() == expected


@pytest.mark.parametrize(
    "line",
    [
        '##INFO=<ID=XQ,Number=Q,Type=Integer,Description="bad number">',
        '##FILTER=<ID=q20,Description="unterminated"',
        '##INFO=<ID=XT,Number=1,Type=Integer,Description="unterminated',
    ],
)
def test_header_lines_htslib_cannot_parse_are_a_header_error(small_bcf, tmp_path, line):
    bad = _with_extra_header_line(small_bcf, tmp_path, line)
    verbosity = pysam.set_verbosity(0)
    try:
        with pytest.raises((ValueError, OSError)):  # pysam refuses the BCF itself too
            pysam.VariantFile(str(bad))
    finally:
        pysam.set_verbosity(verbosity)
    with pytest.raises(errors.HeaderError, match="htslib rejects the VCF header") as info:
        vcfvirtual.index(bad, refs_path=tmp_path / "h.json", cache_path=tmp_path / "h.cache")
    assert info.value.path == str(bad)
    assert sorted(os.listdir(tmp_path)) == ["h.bcf"]


def test_header_warnings_are_ours_not_htslibs_on_stderr(small_bcf, tmp_path):
    """htslib's own messages would go straight to stderr; only our named lines do."""
    bad = _with_extra_header_line(small_bcf, tmp_path, '##INFO=<Number=1,Type=Integer,Description="x">')
    proc = subprocess.run(
        [sys.executable, "-m", "vcfvirtual.cli", "index", "--no-progress", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert [x for x in lines if "[W::" in x or "[E::" in x] == []
    assert any("has no ID" in x and str(bad) in x for x in lines), proc.stderr


# ------------------------------------------------------------------ no space left


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_space_for_the_references(small_bcf, tmp_path, monkeypatch, layout):
    real_open = open
    monkeypatch.setattr(
        kerchunk, "open", lambda p, mode="r", **kw: FullDisk(real_open(p, mode, **kw), 1000), raising=False
    )
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(errors.OutputWriteError, match="No space left") as info:
        vcfvirtual.index(small_bcf, refs_path=out / "s.json", cache_path=out / "s.cache", cache_layout=layout)
    assert info.value.path == str(out / "s.json")
    assert "free disk space" in info.value.hint and "refs_path=" in info.value.hint
    assert os.listdir(out) == []  # neither the cache nor either temporary
    result = run_index(small_bcf, "-o", out / "s.json", "--cache", out / "s.cache", "--cache-layout", layout)
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "No space left" in result.output and os.listdir(out) == []


# ------------------------------------------------------------------ codec type checks


@pytest.fixture(scope="module")
def type_bcf(data_dir):
    header = bcfdata.HEADER + (
        '##INFO=<ID=AF,Number=1,Type=Float,Description="Allele frequency">\n'
        '##INFO=<ID=BIG,Number=1,Type=Integer,Description="Needs int32">\n'
        '##INFO=<ID=XS,Number=1,Type=String,Description="Text">\n'
    )
    records = [f"chr1\t{p}\t.\tA\tT\t.\tPASS\tAF=0.{p};BIG={100000 + p};XS=ab{p}\tGT\t0|1\t1/1\t0/0" for p in (1, 2, 3)]
    return bcfdata.write_bcf(bcfdata.vcf_text(records, header=header), data_dir / "types.bcf")


def _chunk(bcf, tmp_path, layout, array):
    """The raw bytes of chunk 0 of ``array`` and its codec config, from the references."""
    refs = tmp_path / f"t.{layout}.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / f"t.{layout}.cache", cache_layout=layout, force=True)
    doc = json.loads(refs.read_text())
    zarray = json.loads(doc["refs"][f"{array}/.zarray"])
    key = f"{array}/" + ".".join("0" for _ in zarray["shape"])
    path, offset, length = doc["refs"][key]
    for name, value in doc.get("templates", {}).items():  # Kerchunk v1 templates
        path = path.replace("{{" + name + "}}", value)
    path = path.removeprefix("file://")
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    config = next(c for c in zarray["filters"] if c["id"] == "vcfvirtual.bcf")
    return data, {k: v for k, v in config.items() if k != "id"}


def _edit_chunk(data: bytes, layout: str, old: bytes, new: bytes) -> bytes:
    """Replace every ``old`` by ``new`` (same length) in the chunk's records."""
    plain = bgzf.inflate_all(data) if layout == "bgzf" else data
    assert len(old) == len(new) and plain.count(old) == 3, plain.count(old)  # once per record
    plain = plain.replace(old, new)
    return bgzf.compress_blocks(plain, 1) if layout == "bgzf" else plain


# Edits the BCF record bytes in a chunk, which the raw and bgzf layouts keep; a columns
# segment is compressed behind a CRC32 (its retyped values: tests/unit/vcfvirtual_codec/test_columns.py).
@pytest.mark.parametrize("layout", ["raw", "bgzf"])
@pytest.mark.parametrize(
    "array, field, declared, retyped",
    [
        # (array, header field, descriptor of its values, the same bytes typed otherwise)
        ("variant_BIG", "BIG", 0x13, 0x15),  # Integer field holding a float
        ("variant_AF", "AF", 0x15, 0x13),  # Float field holding an int32
        ("variant_XS", "XS", 0x37, 0x31),  # String field holding int8s
        ("call_genotype", "GT", 0x21, 0x27),  # GT holding characters
    ],
)
def test_codec_refuses_values_typed_against_the_config(type_bcf, tmp_path, layout, array, field, declared, retyped):
    bcf = type_bcf
    with pysam.VariantFile(str(bcf)) as vf:
        meta = vf.header.formats[field] if field == "GT" else vf.header.info[field]
        key = meta.id
        recs = list(vf)
    data, config = _chunk(bcf, tmp_path, layout, array)
    codec = BCFRecordsCodec(**config)
    # The unedited chunk decodes to what pysam reads, so the edit alone makes the error.
    got = np.frombuffer(codec.decode(data), dtype=np.dtype(config["dtype"]) if config["dtype"] != "str" else "u1")
    if field == "AF":
        assert np.allclose(got[:3], [r.info["AF"] for r in recs])
    elif field == "BIG":
        assert got[:3].tolist() == [r.info["BIG"] for r in recs]
    elif field == "GT":
        assert got.reshape(-1, 3, 2)[:3].tolist() == [[list(r.samples[s]["GT"]) for s in r.samples] for r in recs]
    edited = _edit_chunk(data, layout, bytes([0x11, key, declared]), bytes([0x11, key, retyped]))
    with pytest.raises(errors.ChunkDecodeError, match=f"cannot decode {array} chunk"):
        codec.decode(edited)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_codec_refuses_an_undeclared_filter_key(small_bcf, tmp_path, layout):
    data, config = _chunk(small_bcf, tmp_path, layout, "variant_filter")
    # FILTER q10 is column 1; as if the references had been built from a header without
    # it (its column gone, the later ones moved down: a map the codec accepts).
    config["filter_columns"] = [-1 if c == 1 else (c - 1 if c > 1 else c) for c in config["filter_columns"]]
    config["shape"] = [config["shape"][0] - 1]
    with pytest.raises(errors.ChunkDecodeError, match="FILTER key the header does not define"):
        BCFRecordsCodec(**config).decode(data)


# ------------------------------------------------------------------ stale caches, both layouts


def _positions(refs):
    import xarray as xr

    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    return ds["variant_position"].values.tolist()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cache_edit_that_keeps_size_and_mtime_is_refused(small_bcf, tmp_path, layout):
    """A same-size change whose mtime was put back (cp -p, rsync -t of another file)
    is still refused: the cache's sampled hash is checked at every open."""
    refs, output = tmp_path / "s.json", tmp_path / "s.cache"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=output, cache_layout=layout)
    with pysam.VariantFile(str(small_bcf)) as vf:
        assert _positions(refs) == [r.pos for r in vf]
    cache = bcfdata.cache_file(output)  # a columns cache's one part
    st = cache.stat()
    data = bytearray(cache.read_bytes())
    data[len(data) // 2] ^= 0x01
    cache.write_bytes(bytes(data))
    os.utime(cache, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(errors.StaleCacheError, match="sampled hash") as info:
        vcfvirtual.open_store(refs)
    assert str(cache) in str(info.value) and "--force" in info.value.hint


@pytest.mark.parametrize("layout", LAYOUTS)
def test_touched_cache_is_accepted(small_bcf, tmp_path, layout):
    refs, cache = tmp_path / "s.json", tmp_path / "s.cache"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, cache_layout=layout)
    os.utime(bcfdata.cache_file(cache), ns=(0, 10**18))  # a columns cache's one part
    with pysam.VariantFile(str(small_bcf)) as vf:
        assert _positions(refs) == [r.pos for r in vf]


# ------------------------------------------------------------------ truncated at a block boundary


def test_bgzf_cut_at_a_block_boundary_inside_a_record(cohort_bcf, tmp_path):
    """Whole BGZF blocks but no EOF block, ending inside a record: not indexed (a file
    that merely lacks the EOF block but ends on a record boundary is indexed with a
    warning, tests/safety/test_safety.py)."""
    raw = cohort_bcf.read_bytes()
    with open(cohort_bcf, "rb") as f:
        blocks = list(bgzf.iter_blocks(f, cohort_bcf))
    plain = b"".join(data for _, data in blocks)
    boundaries = set(record_offsets(plain))
    inflated_end = np.cumsum([len(data) for _, data in blocks])
    # The first block after the header whose end falls inside a record.
    cut = next(
        i
        for i, end in enumerate(inflated_end)
        if end > header_end(plain) and end not in boundaries and end < len(plain)
    )
    bad = tmp_path / "cut.bcf"
    bad.write_bytes(raw[: blocks[cut + 1][0]])
    with pytest.raises(errors.CorruptBCFError, match="incomplete record") as info:
        vcfvirtual.index(bad, refs_path=tmp_path / "c.json", cache_path=tmp_path / "c.cache")
    assert info.value.offset == max(b for b in boundaries if b < inflated_end[cut])
    assert sorted(os.listdir(tmp_path)) == ["cut.bcf"]
