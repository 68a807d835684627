"""The header as htslib reads it: samples, contigs, dictionary keys and types from
pysam's VariantHeader; refusals of what is not BCF 2.2 as typed errors; header
compatibility between files by hand-written differences."""

from __future__ import annotations

import pysam
import pytest

from vcfvirtual.bcf.header import classify_prefix, compatibility_problems, normalise_number, read_prefix
from vcfvirtual.errors import HeaderError, NotBCFError, UnsupportedBCFError
from vcfvirtual.scan.scanner import read_header

from .... import bcfdata
from .. import bcf_spec


def test_header_agrees_with_htslib(small_bcf):
    header = read_header(small_bcf)
    with pysam.VariantFile(str(small_bcf)) as f:
        h = f.header
        assert header.samples == tuple(h.samples)
        assert header.contigs == tuple(h.contigs)
        assert header.contig_lengths == tuple(h.contigs[c].length for c in h.contigs)
        assert {f.name: f.type for f in header.info} == {name: h.info[name].type for name in h.info}
        assert {f.name: f.type for f in header.formats} == {name: h.formats[name].type for name in h.formats}
        # Dictionary keys: htslib's ids, which records use.
        assert {f.name: f.key for f in header.info} == {name: h.info[name].id for name in h.info}
        assert {f.name: f.key for f in header.formats} == {name: h.formats[name].id for name in h.formats}
        assert set(header.filters) == set(h.filters) and header.filters[0] == "PASS"
        assert dict(zip(header.filters, header.filter_keys)) == {name: h.filters[name].id for name in h.filters}
    assert header.gt_key == header.formats[[f.name for f in header.formats].index("GT")].key
    assert header.size == bcf_spec.header_size(bcf_spec.inflate(small_bcf))


@pytest.mark.parametrize(
    ("prefix", "error", "words"),
    [
        (b"", NotBCFError, "empty"),
        (b"BC", HeaderError, "inside the BCF magic"),
        (b"BCF\x02\x01", UnsupportedBCFError, "2.1"),
        (b"BCF\x01\x00", UnsupportedBCFError, "unknown BCF version"),
        (b"##fileformat=VCFv4.3", NotBCFError, "VCF text"),
        (b"\x89PNG\r\n", NotBCFError, "no BCF magic"),
    ],
)
def test_what_is_not_bcf_2_2_is_a_typed_error(prefix, error, words):
    with pytest.raises(error, match=words):
        classify_prefix(prefix, "x.bcf")


def test_read_prefix_gives_l_text():
    assert read_prefix(b"BCF\x02\x02" + (1234).to_bytes(4, "little"), "x.bcf") == 1234
    with pytest.raises(HeaderError, match="inside the BCF header"):
        read_prefix(b"BCF\x02\x02\x01", "x.bcf")


@pytest.mark.parametrize(
    ("word", "expected"), [("1", "1"), ("A", "A"), ("G", "G"), (".", "."), ("-1", "."), ("LA", "."), ("Q", ".")]
)
def test_numbers_as_sized(word, expected):
    assert normalise_number(word) == expected


def test_compatibility_names_the_first_difference(tmp_path):
    first = read_header(bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS), tmp_path / "a.bcf"))
    same = read_header(bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[:2]), tmp_path / "b.bcf"))
    assert compatibility_problems(first, same) == []
    other_samples = read_header(
        bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS, samples=("S1", "S2", "X")), tmp_path / "c.bcf")
    )
    problems = compatibility_problems(first, other_samples)
    assert problems and "sample" in problems[0]
