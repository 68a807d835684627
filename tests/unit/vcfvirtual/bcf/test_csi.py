"""CSI virtual offsets: every record start the index names is one htslib's reader stands
at before a record (pysam's ``tell()``), the first record of each contig among them; an
absent, damaged, older or mismatched index gives None."""

from __future__ import annotations

import os
import shutil

import pysam
import pytest

from vcfvirtual.bcf.csi import RecordStart, csi_record_starts

from .... import bcfdata


@pytest.fixture(scope="module")
def multi_block_bcf(tmp_path_factory):
    # 600 records x 100 samples span several BGZF blocks, and positions up to ~30,000
    # fill more than one CSI bin (min_shift 14) per contig.
    path = tmp_path_factory.mktemp("csi") / "cohort.bcf"
    bcfdata.write_bcf(bcfdata.random_cohort_vcf(600, 100, seed=3), path, index=False)
    bcfdata.bcftools("index", path)
    return path


def pysam_starts(path):
    """(virtual offset, contig) before each record, as htslib's reader reports it."""
    out: list[tuple[int, str]] = []
    with pysam.VariantFile(str(path)) as f:
        while True:
            at = f.tell()
            try:
                rec = next(f)
            except StopIteration:
                return out
            out.append((at, rec.chrom))


@pytest.mark.parametrize("which", ["small", "multi_block"])
def test_offsets_are_record_starts_htslib_reports(which, small_bcf, multi_block_bcf):
    path = small_bcf if which == "small" else multi_block_bcf
    starts = csi_record_starts(path)
    assert starts is not None and starts
    offsets = [s.virtual_offset for s in starts]
    assert offsets == sorted(set(offsets))
    tells = pysam_starts(path)
    assert set(offsets) <= {t for t, _ in tells}
    first_of_contig: dict[str, int] = {}
    for t, chrom in tells:
        first_of_contig.setdefault(chrom, t)
    assert set(first_of_contig.values()) <= set(offsets)
    if which == "multi_block":
        assert len({s.block_offset for s in starts}) > 1


def test_virtual_offset_joins_block_and_within():
    assert RecordStart(block_offset=0x1234, within_block=0x56).virtual_offset == (0x1234 << 16) | 0x56


def test_no_index_gives_none(tmp_path, small_bcf):
    copy = tmp_path / "x.bcf"
    shutil.copy(small_bcf, copy)
    assert csi_record_starts(copy) is None


@pytest.mark.parametrize(
    "damage",
    [b"", b"not an index at all", b"CSI\x01" + b"\x00" * 4],
    ids=["empty", "garbage", "cut"],
)
def test_damaged_index_gives_none(tmp_path, small_bcf, damage):
    copy = tmp_path / "x.bcf"
    shutil.copy(small_bcf, copy)
    (tmp_path / "x.bcf.csi").write_bytes(damage)
    assert csi_record_starts(copy) is None


def test_truncated_index_gives_none(tmp_path, small_bcf):
    copy = tmp_path / "x.bcf"
    shutil.copy(small_bcf, copy)
    data = (small_bcf.parent / (small_bcf.name + ".csi")).read_bytes()
    (tmp_path / "x.bcf.csi").write_bytes(data[: len(data) // 2])
    assert csi_record_starts(copy) is None


def test_index_older_than_the_bcf_gives_none(tmp_path, small_bcf):
    copy = tmp_path / "x.bcf"
    shutil.copy(small_bcf, copy)
    csi = tmp_path / "x.bcf.csi"
    shutil.copy(str(small_bcf) + ".csi", csi)
    os.utime(csi, (1_000_000, 1_000_000))
    assert csi_record_starts(copy) is None


def test_index_of_a_larger_file_gives_none(tmp_path, small_bcf, multi_block_bcf):
    # The cohort's index names blocks past the end of the small file.
    copy = tmp_path / "x.bcf"
    shutil.copy(small_bcf, copy)
    shutil.copy(str(multi_block_bcf) + ".csi", tmp_path / "x.bcf.csi")
    larger = csi_record_starts(multi_block_bcf)
    assert larger is not None and max(s.block_offset for s in larger) >= os.path.getsize(copy)
    assert csi_record_starts(copy) is None


def test_the_index_counts_the_records_pysam_reads(tmp_path):
    from vcfvirtual.bcf.csi import csi_record_count

    bcf = bcfdata.write_bcf(
        bcfdata.random_cohort_vcf(700, 5, seed=8, contigs=("chr1", "chr2", "chrX")), tmp_path / "c.bcf"
    )
    assert csi_record_count(bcf) == sum(1 for _ in pysam.VariantFile(str(bcf)))
    assert csi_record_count(tmp_path / "none.bcf") is None
