"""RecordSummary folds batches of per-record facts into chunk offsets, region rows and
ranges: checked against a plain-Python loop over the same records (read by pysam),
however the records are cut into batches, across chunk and contig boundaries."""

from __future__ import annotations

import numpy as np
import pysam
import pytest

from vcfvirtual.scan.results import REGION_COLUMNS, RecordCollector, RecordSummary

from .... import bcfdata


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    """Per-record facts from pysam: 60 records over 3 contigs (so contig runs end inside
    chunks), with made-up ascending offsets."""
    vcf = bcfdata.random_cohort_vcf(60, 3, seed=11, contigs=("chr1", "chr2", "chrX"))
    path = bcfdata.write_bcf(vcf, tmp_path_factory.mktemp("results") / "r.bcf", index=False)
    with pysam.VariantFile(str(path)) as f:
        contigs = list(f.header.contigs)
        recs = [(contigs.index(r.chrom), r.start, r.rlen, len(r.alleles), gt_ploidy(r)) for r in f]
    chrom, pos, rlen, n_allele, ploidy = (np.array(c, np.int32) for c in zip(*recs))
    offset = np.cumsum(np.arange(7, 7 + len(recs), dtype=np.int64))
    return offset, chrom, pos, rlen, n_allele, ploidy


def gt_ploidy(rec) -> int:
    return max(len(s["GT"] or ()) for s in rec.samples.values())


def rows_by_loop(chrom, pos, rlen, chunk_length):
    """Region rows: (chunk, contig, first POS, last POS, largest end, records), 1-based."""
    rows: list[list[int]] = []
    for i in range(len(chrom)):
        c, p1 = i // chunk_length, int(pos[i]) + 1
        end = p1 + int(rlen[i]) - 1
        if rows and rows[-1][0] == c and rows[-1][1] == chrom[i]:
            rows[-1][3] = p1
            rows[-1][4] = max(rows[-1][4], end)
            rows[-1][5] += 1
        else:
            rows.append([c, int(chrom[i]), p1, p1, end, 1])
    return rows


def batches(n, sizes):
    at = 0
    for size in sizes:
        if at >= n:
            return
        yield at, min(n, at + size)
        at += size
    if at < n:
        yield at, n


@pytest.mark.parametrize("chunk_length", [1, 7, 20, 1000])
@pytest.mark.parametrize(
    "batch_sizes", [[1000], [1] * 60, [5, 13, 2, 30], [20, 20, 20]], ids=["one", "each", "uneven", "chunks"]
)
def test_summary_matches_a_plain_loop(facts, chunk_length, batch_sizes):
    offset, chrom, pos, rlen, n_allele, ploidy = facts
    summary = RecordSummary(chunk_length)
    for lo, hi in batches(len(offset), batch_sizes):
        summary.add(*(a[lo:hi] for a in facts))
    summary.add(*(a[:0] for a in facts))  # an empty batch changes nothing
    got = summary.arrays()
    assert got["num_records"] == len(offset)
    assert got["chunk_offsets"].tolist() == offset[::chunk_length].tolist()
    assert got["region_rows"].shape[1] == REGION_COLUMNS
    assert got["region_rows"].tolist() == rows_by_loop(chrom, pos, rlen, chunk_length)
    assert got["pos_range"] == (int(pos.min()) + 1, int(pos.max()) + 1)
    assert got["rlen_range"] == (int(rlen.min()), int(rlen.max()))
    assert got["max_alleles"] == int(n_allele.max())
    assert got["max_ploidy"] == 2


def test_rows_split_at_contig_changes_inside_a_chunk():
    # Hand-made: chunk of 4 holding chr0 x2 then chr1 x2, then a second chunk of chr1.
    chrom = np.array([0, 0, 1, 1, 1], np.int32)
    pos = np.array([9, 19, 4, 99, 199], np.int32)
    rlen = np.array([1, 30, 1, 1, 2], np.int32)
    ones = np.ones(5, np.int32)
    summary = RecordSummary(4)
    summary.add(np.arange(5, dtype=np.int64) * 10, chrom, pos, rlen, ones, ones)
    assert summary.arrays()["region_rows"].tolist() == [
        [0, 0, 10, 20, 49, 2],  # the largest end is the second record's 20 + 30 - 1
        [0, 1, 5, 100, 100, 2],
        [1, 1, 200, 200, 201, 1],
    ]
    assert summary.arrays()["chunk_offsets"].tolist() == [0, 40]


def test_empty_summary():
    got = RecordSummary(10).arrays()
    assert got["num_records"] == 0
    assert got["chunk_offsets"].shape == (0,)
    assert got["region_rows"].shape == (0, REGION_COLUMNS)
    assert got["pos_range"] == got["rlen_range"] == (0, 0)


def test_collector_keeps_copies_in_order(facts):
    collector = RecordCollector()
    first = [a[:10].copy() for a in facts]
    collector.add(*first)
    collector.add(*(a[:0] for a in facts))
    collector.add(*(a[10:] for a in facts))
    first[1][:] = 99  # the scan reuses its buffers: the collector must have copied
    got = collector.arrays()
    for name, column in zip(RecordCollector.FIELDS, facts):
        assert got[name].tolist() == column.tolist()


def test_empty_collector_has_typed_empty_columns():
    got = RecordCollector().arrays()
    assert set(got) == set(RecordCollector.FIELDS)
    assert got["offset"].dtype == np.int64 and got["pos"].dtype == np.int32
    assert all(v.size == 0 for v in got.values())


def test_a_lead_makes_the_first_chunk_complete_a_stored_one():
    # Chunks of 3 records, 2 already stored: the first new record finishes chunk 0 alone,
    # records 1-3 are chunk 1, record 4 starts chunk 2.
    summary = RecordSummary(3, lead=2)
    n = 5
    summary.add(
        np.arange(n, dtype=np.int64) * 100,
        np.zeros(n, np.int32),
        np.arange(n, dtype=np.int32) * 10,
        np.ones(n, np.int32),
        np.full(n, 2, np.int32),
        np.full(n, 2, np.int32),
    )
    out = summary.arrays()
    assert out["chunk_offsets"].tolist() == [0, 100, 400]
    # (chunk, contig, first POS, last POS, largest end, records)
    assert out["region_rows"].tolist() == [[0, 0, 1, 1, 1, 1], [1, 0, 11, 31, 31, 3], [2, 0, 41, 41, 41, 1]]
