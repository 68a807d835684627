"""VCF input becomes a BGZF BCF through htslib, under a temporary name next to the cache
that is gone afterwards; a VCF htslib refuses is a typed error. Oracle: pysam reading
the VCF and the converted BCF."""

from __future__ import annotations

import os

import pysam
import pytest

from vcfvirtual.bcf.vcf_input import as_bcf, is_vcf_path, vcf_field_ids
from vcfvirtual.errors import NotBCFError

from .... import bcfdata


@pytest.mark.parametrize(
    ("name", "is_vcf"), [("a.vcf", True), ("a.VCF.GZ", True), ("a.vcf.bgz", True), ("a.bcf", False), ("vcf", False)]
)
def test_vcf_is_recognised_by_name(name, is_vcf):
    assert is_vcf_path(name) == is_vcf


def test_vcf_is_converted_to_a_temporary_bcf(tmp_path, small_bcf):
    vcf = tmp_path / "in.vcf"
    vcf.write_text(bcfdata.vcf_text(bcfdata.SMALL_RECORDS))
    cache = tmp_path / "out.cache.bcf"
    with as_bcf([small_bcf, vcf], cache) as paths:
        assert paths[0] == small_bcf
        converted = paths[1]
        assert converted == tmp_path / f".out.cache.bcf.tmp-vcf1-{os.getpid()}"
        assert converted.read_bytes()[:2] == b"\x1f\x8b"  # BGZF
        with pysam.VariantFile(str(converted)) as got, pysam.VariantFile(str(vcf)) as want:
            assert [(r.chrom, r.pos, r.alleles) for r in got] == [(r.chrom, r.pos, r.alleles) for r in want]
    assert not converted.exists()


def test_a_vcf_htslib_refuses_is_a_typed_error(tmp_path):
    vcf = tmp_path / "bad.vcf"
    # A record on a contig the header does not declare cannot be written as BCF.
    vcf.write_text(bcfdata.vcf_text(["chrUnknown\t5\t.\tA\tT\t.\t.\t.\tGT\t0/1\t0/0\t1/1"]))
    with pytest.raises(NotBCFError, match="htslib cannot convert"):
        with as_bcf([vcf], tmp_path / "c.bcf"):
            pass
    assert os.listdir(tmp_path) == ["bad.vcf"]


@pytest.mark.parametrize("suffix", [".vcf", ".vcf.gz"])
def test_field_ids_are_read_from_the_header_text(tmp_path, suffix):
    """The INFO and FORMAT IDs htslib reads from the header (pysam's header.info/formats),
    without converting the file; a repeated ID counts once, as htslib keeps the first."""
    header = bcfdata.HEADER + '##INFO=<ID=AF,Number=A,Type=Float,Description="a, ID=X">\n'
    header += '##INFO=<ID=DP,Number=1,Type=Integer,Description="again">\n'
    text = bcfdata.vcf_text(bcfdata.SMALL_RECORDS, header=header)
    plain = tmp_path / "in.vcf"
    plain.write_text(text)
    path = plain
    if suffix == ".vcf.gz":
        path = tmp_path / "in.vcf.gz"
        pysam.tabix_compress(str(plain), str(path))
    with pysam.VariantFile(str(path)) as vf:
        expected = (list(vf.header.info), list(vf.header.formats))
    assert vcf_field_ids(path) == expected == (["DP", "AF"], ["GT"])
    assert vcf_field_ids(tmp_path / "missing.vcf") is None
