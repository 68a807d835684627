"""Partition scans merged: record counts, positions and region rows against pysam reading
the files, chunk offsets and the joined segments against the streams inflated by Python's
gzip and walked by hand from the BCF spec; a serial scan only as a secondary check."""

from __future__ import annotations

import gzip

import numpy as np
import pysam
import pytest

from vcfvirtual.bcf.csi import RecordStart
from vcfvirtual.errors import HeaderError
from vcfvirtual.scan import parallel
from vcfvirtual.scan.scanner import scan_bcf

from .... import bcfdata
from .. import bcf_spec

CHUNK = 64  # records per chunk; not a divisor of any file's record count


@pytest.fixture(scope="module")
def two_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("parallel")
    a = bcfdata.write_bcf(bcfdata.random_cohort_vcf(400, 60, seed=5), d / "a.bcf", index=False)
    b = bcfdata.write_bcf(bcfdata.random_cohort_vcf(150, 60, seed=6), d / "b.bcf", index=False)
    return str(a), str(b)


def htslib_records(path):
    """(virtual offset, contig index, 0-based POS, rlen) of each record, from pysam."""
    out: list[tuple[int, int, int, int]] = []
    with pysam.VariantFile(path) as f:
        contigs = list(f.header.contigs)
        while True:
            at = f.tell()
            try:
                r = next(f)
            except StopIteration:
                return out
            out.append((at, contigs.index(r.chrom), r.start, r.rlen))


def cuts_at(path, record_numbers, shift=0):
    starts = [htslib_records(path)[i][0] for i in record_numbers]
    return [RecordStart(v >> 16, (v & 0xFFFF) + shift) for v in starts]


def merged_stream(paths):
    """The store's stream: the first file whole, later files without their header."""
    out = b""
    for i, p in enumerate(paths):
        data = gzip.decompress(open(p, "rb").read())
        out += data if i == 0 else data[bcf_spec.header_size(data) :]
    return out


def rows_by_loop(recs, chunk_length):
    rows: list[list[int]] = []
    for i, (_, chrom, pos, rlen) in enumerate(recs):
        c, p1 = i // chunk_length, pos + 1
        if rows and rows[-1][0] == c and rows[-1][1] == chrom:
            rows[-1][3] = p1
            rows[-1][4] = max(rows[-1][4], p1 + rlen - 1)
            rows[-1][5] += 1
        else:
            rows.append([c, chrom, p1, p1, p1 + rlen - 1, 1])
    return rows


def run(paths, plan, tmp_path, chunk_length=CHUNK):
    partitions = parallel.split_files(list(paths), plan)
    with parallel.executor_for(1) as executor:
        scanned = parallel.scan_all(partitions, executor, tmp_path, progress=False)
    return partitions, parallel.merge(scanned, chunk_length)


@pytest.mark.parametrize("cut", ["whole", "records", "mid_record"])
def test_merge_against_htslib_and_the_spec(two_files, tmp_path, cut):
    a, b = two_files
    if cut == "whole":
        plan = None
    elif cut == "records":
        plan = {a: cuts_at(a, [100, 333]), b: cuts_at(b, [1])}.__getitem__
    else:
        # A start inside a record: the partitions do not join, the file is scanned whole.
        plan = {a: cuts_at(a, [100], shift=3), b: []}.__getitem__
    partitions, merged = run(two_files, plan, tmp_path)
    if cut == "records":
        assert len(partitions) == 5
    recs = htslib_records(a) + htslib_records(b)
    scan = merged.scan
    assert scan.num_records == len(recs) == 550
    assert scan.pos_range == (min(r[2] for r in recs) + 1, max(r[2] for r in recs) + 1)
    assert scan.region_rows.tolist() == rows_by_loop(recs, CHUNK)
    stream = merged_stream(two_files)
    assert scan.chunk_offsets.tolist() == bcf_spec.record_offsets(stream)[::CHUNK]
    assert scan.stream_size == len(stream)
    # The raw cache is the segments joined: exactly the store's stream.
    joined = b"".join(s.path.read_bytes()[s.skip :] for s in merged.segments)
    assert joined == stream


def test_pieces_cover_the_stream_in_order(two_files, tmp_path):
    a, b = two_files
    _, merged = run(two_files, {a: cuts_at(a, [200]), b: []}.__getitem__, tmp_path)
    at = 0
    for piece in merged.pieces:
        assert piece.stream_start == at
        at += piece.hi - piece.lo
    assert at == len(merged_stream(two_files))


def test_merge_equals_a_serial_scan(two_files, tmp_path):
    # Secondary check: one file cut in three merges to what one pass learns.
    a, _ = two_files
    _, merged = run([a], {a: cuts_at(a, [50, 260])}.__getitem__, tmp_path)
    serial = scan_bcf(a, lambda h: CHUNK, progress=False)
    assert merged.scan.chunk_offsets.tolist() == serial.chunk_offsets.tolist()
    assert merged.scan.region_rows.tolist() == serial.region_rows.tolist()
    assert np.array_equal(merged.scan.info_stats, serial.info_stats)
    assert (merged.scan.max_alleles, merged.scan.max_ploidy) == (serial.max_alleles, serial.max_ploidy)


def test_split_files_without_a_plan_is_one_partition_per_file():
    assert parallel.split_files(["x", "y"], None) == [parallel.Partition("x"), parallel.Partition("y")]


def test_incompatible_headers_are_refused(two_files, tmp_path):
    other = bcfdata.write_bcf(bcfdata.random_cohort_vcf(10, 5, seed=1), tmp_path / "other.bcf", index=False)
    with pytest.raises(HeaderError):
        run([two_files[0], str(other)], None, tmp_path)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_file_without_records_adds_nothing(tmp_path, where):
    a = bcfdata.write_bcf(bcfdata.random_cohort_vcf(30, 4, seed=5), tmp_path / "a.bcf", index=False)
    b = bcfdata.write_bcf(bcfdata.random_cohort_vcf(20, 4, seed=6), tmp_path / "b.bcf", index=False)
    samples = [f"sample_{j}" for j in range(4)]
    empty = bcfdata.write_bcf(bcfdata.vcf_text([], samples=samples), tmp_path / "e.bcf", index=False)
    files = {"first": [empty, a, b], "middle": [a, empty, b], "last": [a, b, empty]}[where]
    paths = [str(p) for p in files]
    _, merged = run(paths, None, tmp_path, chunk_length=7)
    recs = [r for p in paths for r in htslib_records(p)]
    assert merged.scan.num_records == len(recs) == 50
    stream = merged_stream(paths)
    assert merged.scan.chunk_offsets.tolist() == bcf_spec.record_offsets(stream)[::7]
    assert merged.scan.region_rows.tolist() == rows_by_loop(recs, 7)
    assert b"".join(s.path.read_bytes()[s.skip :] for s in merged.segments) == stream


def _contig_runs(path) -> list[tuple[RecordStart, int]]:
    """pysam's reading: each contig's first record and its records, in file order."""
    runs: list[tuple[str, RecordStart, int]] = []
    with pysam.VariantFile(str(path)) as f:
        f.subset_samples([])
        while True:
            virtual = f.tell()
            try:
                rec = next(f)
            except StopIteration:
                return [(start, n) for _, start, n in runs]
            if runs and runs[-1][0] == rec.contig:
                runs[-1] = (rec.contig, runs[-1][1], runs[-1][2] + 1)
            else:
                runs.append((rec.contig, RecordStart(virtual >> 16, virtual & 0xFFFF), 1))


def test_files_counted_by_their_indexes(tmp_path):
    """Each contig of each file one partition: pysam's first record and count, numbered on."""
    paths = [
        str(bcfdata.write_bcf(bcfdata.random_cohort_vcf(n, 4, seed=n, contigs=("chr1", "chr2")), tmp_path / f"{n}.bcf"))
        for n in (120, 90, 150)
    ]
    counted = parallel.indexed_partitions(paths, workers=2)
    assert counted is not None
    expected, first = [], 0
    for path in paths:
        runs = _contig_runs(path)
        ends = [start for start, _ in runs[1:]] + [None]
        for (start, n), end in zip(runs, ends):
            expected.append((path, start, end, first, n))
            first += n
    assert len(expected) == 6  # two contigs a file
    assert [(c.path, c.start, c.end, c.first_index, c.n_records) for c in counted] == expected


def test_files_are_scanned_when_an_index_is_missing_or_a_file_too_large_a_share(tmp_path):
    small = [str(bcfdata.write_bcf(bcfdata.random_cohort_vcf(60, 4, seed=s), tmp_path / f"s{s}.bcf")) for s in (1, 2)]
    large = str(
        bcfdata.write_bcf(bcfdata.random_cohort_vcf(3000, 4, seed=3, contigs=("chr1",)), tmp_path / "large.bcf")
    )
    assert parallel.indexed_partitions([*small, large], workers=2) is None  # one contig, over half the bytes
    assert parallel.indexed_partitions(small, workers=2) is not None
    unindexed = str(bcfdata.write_bcf(bcfdata.random_cohort_vcf(60, 4, seed=4), tmp_path / "u.bcf", index=False))
    assert parallel.indexed_partitions([*small, unindexed], workers=1) is None
