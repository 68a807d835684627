"""Runs of whole chunks for the tasks writing the columns cache's parts: which chunks and
records each covers, how many records it reads past, and where in which source file it
starts, worked out by hand from made-up partition counts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from vcfvirtual.bcf.csi import RecordStart
from vcfvirtual.cache.base import ChunkRanges, Continuation, SegmentRanges
from vcfvirtual.cache.columns_join import StoredSegment
from vcfvirtual.cache.columns_parts import PartSink, RunComplete, RunResult, Span, join_runs, plan_runs
from vcfvirtual.io.fingerprint import Fingerprint
from vcfvirtual.scan.parallel import CountedPartition, Merged
from vcfvirtual.scan.results import RecordCounts, RecordSummary, RunFacts, RunWindow

A = RecordStart  # (block offset, offset in the block)


def merged(partitions, n_records, chunk_length=10) -> Merged:
    scan = SimpleNamespace(num_records=n_records, chunk_length=chunk_length)
    counted = [CountedPartition(path, start, end, first, n) for path, start, end, first, n in partitions]
    return Merged(scan, [], [], counted)  # type: ignore[arg-type]


# a.bcf cut in two partitions (12 and 13 records), then b.bcf whole (10): 35 records,
# chunks of 10 start at records 0, 10, 20 and 30.
TWO_FILES = [
    ("a.bcf", A(0, 100), A(300, 50), 0, 12),
    ("a.bcf", A(300, 50), None, 12, 13),
    ("b.bcf", A(0, 150), None, 25, 10),
]


def test_a_run_per_partition_a_chunk_starts_in_reading_on_to_its_last_chunks_end():
    tasks = plan_runs(merged(TWO_FILES, 35))
    assert [(t.part, t.first_chunk, t.n_chunks, t.skip, t.n_records) for t in tasks] == [
        ("part-000000", 0, 2, 0, 20),  # chunk 1 ends in a.bcf's second partition
        ("part-000001", 2, 1, 8, 10),  # chunk 2 starts 8 records into it
        ("part-000002", 3, 1, 5, 5),  # chunk 3: 5 records into b.bcf, to its end
    ]
    assert tasks[0].spans == (Span("a.bcf", A(0, 100), None),)  # a file's partitions: one span
    assert tasks[1].spans == (Span("a.bcf", A(300, 50), None), Span("b.bcf", A(0, 150), None))
    assert tasks[2].spans == (Span("b.bcf", A(0, 150), None),)
    assert [t.stores_header for t in tasks] == [True, False, False]
    assert {t.header_source for t in tasks} == {"a.bcf"}


def test_a_partition_no_chunk_starts_in_is_read_by_the_run_before():
    # 25, 3 and 12 records: chunk 3 (record 30) starts 2 records into the third partition.
    parts = [
        ("a.bcf", A(0, 9), A(10, 0), 0, 25),
        ("a.bcf", A(10, 0), A(20, 4), 25, 3),
        ("a.bcf", A(20, 4), None, 28, 12),
    ]
    tasks = plan_runs(merged(parts, 40))
    assert [(t.first_chunk, t.n_chunks, t.skip, t.n_records, t.spans) for t in tasks] == [
        (0, 3, 0, 30, (Span("a.bcf", A(0, 9), None),)),
        (3, 1, 2, 10, (Span("a.bcf", A(20, 4), None),)),
    ]


def test_no_records_no_runs():
    assert plan_runs(merged([("a.bcf", A(0, 9), None, 0, 0)], 0)) == []


def test_joined_ranges_name_each_chunks_part():
    def result(part, offsets, size):
        ranges = SegmentRanges(
            {"position": ChunkRanges(np.array(offsets, np.uint64), np.array([5] * len(offsets), np.uint64))},
            {"position": "zstd"},
            1,
            (part,),
            np.zeros(len(offsets), np.int32),
        )
        rows = np.array([[c, 0, 1, 2, 2, 1] for c in offsets], np.int64)
        stats = np.array([[len(offsets), 0, size]], np.int64)
        facts = RunFacts(rows, RecordCounts(len(offsets), (1, size), (1, 1), 2, 2), stats, stats)
        return RunResult(part, ranges, Fingerprint(size, 0, None), facts)

    joined = join_runs([result("part-000000", [10, 20], 30), result("part-000001", [10], 15)])
    assert joined.parts == ("part-000000", "part-000001")
    assert joined.chunk_part.tolist() == [0, 0, 1]
    assert joined.segments["position"].offsets.tolist() == [10, 20, 10]
    assert [f.size for f in joined.part_fingerprints] == [30, 15]
    assert joined.facts is not None and joined.facts.region_rows[:, 0].tolist() == [10, 20, 10]
    # Ranges and statistics folded over both runs: POS from 1 to the larger run's 30.
    assert joined.facts.counts.pos_range == (1, 30) and joined.facts.info_stats.tolist() == [[2, 0, 30]]


def test_an_append_numbers_parts_after_the_stores_and_completes_its_last_chunk():
    # The store has 3 parts and its last chunk holds 4 of 10 records: the new records'
    # chunk 0 is 6 of them, then 10 each (35 new records in partitions of 16 and 19:
    # chunk 2 starts at new record 16, the second partition's first).
    lead = (StoredSegment("position", 0, "store/part-000002", 70, 30, 1, -1, 1, False, "zstd"),)
    go_on = Continuation(10, 3, "store/part-000000", 8, 4, lead)
    parts = [("n.bcf", A(0, 9), A(7, 3), 0, 16), ("n.bcf", A(7, 3), None, 16, 19)]
    tasks = plan_runs(merged(parts, 35), continuation=go_on)
    assert [(t.part, t.first_chunk, t.n_chunks, t.skip, t.n_records) for t in tasks] == [
        ("part-000003", 0, 2, 0, 16),
        ("part-000004", 2, 2, 0, 19),
    ]
    assert [(t.lead_records, t.lead_segments) for t in tasks] == [(4, lead), (0, ())]
    assert {(t.header_source, t.header_offset, t.stores_header) for t in tasks} == {("store/part-000000", 8, False)}


class _Writer:
    """Records what a PartSink hands the columns writer."""

    def __init__(self):
        self.offsets: list[int] = []
        self.skipped_to: list[int] = []

    def add_block(self, raw, data):
        pass

    def records_scanned(self, offsets):
        self.offsets += offsets.tolist()

    def scanned_to(self, offset):
        pass

    def skip_to(self, offset):
        self.skipped_to.append(offset)


def test_a_part_sink_reads_past_the_run_before_and_stops_after_its_records():
    writer = _Writer()
    sink = PartSink(writer, skip=3, n_records=4)
    sink.records_scanned(np.array([0, 10, 20], np.int64))  # the run before's
    assert writer.offsets == [] and writer.skipped_to == []
    sink.records_scanned(np.array([30, 40], np.int64))
    assert writer.skipped_to == [30] and writer.offsets == [30, 40]
    sink.shift = 100  # the next span starts at run offset 100
    with pytest.raises(RunComplete) as done:
        sink.records_scanned(np.array([0, 5, 9], np.int64))
    assert writer.offsets == [30, 40, 100, 105] and done.value.end == 109


def test_a_run_window_folds_only_the_runs_records():
    summary = RecordSummary(2)
    window = RunWindow(summary, skip=1, limit=3)
    for pos in ([5, 6], [7, 8, 9]):
        n = len(pos)
        window.add(
            np.zeros(n, np.int64),
            np.zeros(n, np.int32),
            np.array(pos, np.int32),
            np.ones(n, np.int32),
            np.full(n, 2, np.int32),
            np.full(n, 2, np.int32),
        )
    rows = summary.arrays()["region_rows"]
    # Records at POS 6, 7, 8 (0-based): chunk 0 holds the first two, chunk 1 the third.
    assert rows.tolist() == [[0, 0, 7, 8, 8, 2], [1, 0, 9, 9, 9, 1]]
