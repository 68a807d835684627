"""`vcfvirtual inspect --samples STORE` lists the sample names htslib reads from the BCF's
header (pysam), one per line, in order: across samples blocks of the columns layout, in a
BCF-layout cache, and through Parquet references; a changed cache is refused."""

from __future__ import annotations

import shutil

import pysam
import pytest
from click.testing import CliRunner

import vcfvirtual
from vcfvirtual.cli import main
from vcfvirtual.inspect import sample_names

from ... import bcfdata
from ...conftest import layout_options


def _header_samples(bcf) -> list[str]:
    with pysam.VariantFile(str(bcf)) as f:
        return list(f.header.samples)


# columns with samples blocks of 50: 120 names from three chunks (50, 50, 20)
@pytest.mark.parametrize("layout", ["columns", "bgzf"])
def test_samples_are_htslibs_in_order(cohort_bcf, tmp_path, layout):
    refs = tmp_path / "c.vcz.json"
    vcfvirtual.index(
        cohort_bcf, refs_path=refs, cache_path=tmp_path / "c.cache", progress=False, **layout_options(layout, 50)
    )
    result = CliRunner().invoke(main, ["inspect", "--samples", str(refs)])
    assert result.exit_code == 0, result.output
    expected = _header_samples(cohort_bcf)
    assert len(expected) == 120
    assert result.stdout.splitlines() == expected
    assert sample_names(refs) == expected


def test_samples_through_parquet_references(small_bcf, tmp_path):
    pytest.importorskip("kerchunk")
    refs = tmp_path / "s.vcz.parq"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "s.cache", refs_format="parquet", progress=False)
    result = CliRunner().invoke(main, ["inspect", "--samples", str(refs)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == _header_samples(small_bcf)


def test_a_changed_cache_is_one_error_line(small_bcf, tmp_path):
    bcf = tmp_path / "x.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, progress=False)
    cache = bcfdata.cache_file(tmp_path / "x.bcf.vcz.cache.columns")
    cache.write_bytes(cache.read_bytes() + b"\x00")
    result = CliRunner().invoke(main, ["inspect", "--samples", str(tmp_path / "x.bcf.vcz.json")])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("vcfvirtual: error: ") and result.stderr.count("\n") == 1
