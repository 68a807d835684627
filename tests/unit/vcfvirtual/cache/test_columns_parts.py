"""Runs of whole chunks for the tasks writing the columns cache's parts: which chunks,
records and bytes each covers, and where in which source file each starts and stops,
worked out by hand from a made-up block table of two files."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from vcfvirtual.bcf.csi import RecordStart
from vcfvirtual.cache.base import ChunkRanges, Continuation, SegmentRanges
from vcfvirtual.cache.columns_join import StoredSegment
from vcfvirtual.cache.columns_parts import RunResult, Span, join_runs, plan_runs
from vcfvirtual.io.fingerprint import Fingerprint
from vcfvirtual.scan.parallel import Merged, Piece

# File a.bcf: a 100-byte header, then three blocks of 1,000 inflated bytes (stream 0-3000).
# File b.bcf: its 150-byte header dropped from its first block, then one more block
# (stream 3000-4850).
PIECES = [
    Piece("a.bcf", 0, 300, 1000, 0, 1000, 0),
    Piece("a.bcf", 300, 310, 1000, 0, 1000, 1000),
    Piece("a.bcf", 610, 290, 1000, 0, 1000, 2000),
    Piece("b.bcf", 0, 305, 1000, 150, 1000, 3000),
    Piece("b.bcf", 305, 300, 1000, 0, 1000, 3850),
]


def merged(chunk_offsets, n_records=35, chunk_length=10, stream_size=4850) -> Merged:
    scan = SimpleNamespace(
        chunk_offsets=np.array(chunk_offsets, np.int64),
        stream_size=stream_size,
        num_records=n_records,
        chunk_length=chunk_length,
    )
    return Merged(scan, PIECES, [])  # type: ignore[arg-type]


def test_two_runs_cut_at_the_chunk_nearest_half_the_bytes():
    tasks = plan_runs(merged([100, 1500, 2900, 3700]), 2)
    assert [(t.part, t.first_chunk, t.n_chunks, t.n_records, t.n_bytes) for t in tasks] == [
        ("part-000000", 0, 2, 20, 2800),
        ("part-000001", 2, 2, 15, 1950),
    ]
    assert tasks[0].spans == (Span("a.bcf", RecordStart(0, 100), RecordStart(610, 900)),)
    # The second run ends a.bcf, then reads b.bcf from its first record to its end.
    assert tasks[1].spans == (
        Span("a.bcf", RecordStart(610, 900), None),
        Span("b.bcf", RecordStart(0, 150), None),
    )
    assert {t.header_source for t in tasks} == {"a.bcf"}


def test_a_chunk_starting_a_block_starts_at_its_first_byte():
    tasks = plan_runs(merged([100, 2000, 3850], n_records=25), 3)
    assert [t.spans[0].start for t in tasks] == [RecordStart(0, 100), RecordStart(610, 0), RecordStart(305, 0)]
    assert tasks[0].spans[0].end == RecordStart(610, 0)
    assert tasks[1].spans == (
        Span("a.bcf", RecordStart(610, 0), None),
        Span("b.bcf", RecordStart(0, 150), RecordStart(305, 0)),
    )
    assert [t.n_records for t in tasks] == [10, 10, 5]


def test_never_more_runs_than_chunks_and_none_without_records():
    assert len(plan_runs(merged([100, 2900]), 8)) == 2
    assert plan_runs(merged([], n_records=0, stream_size=100), 4) == []


def test_runs_are_bounded_in_bytes_when_workers_are_few():
    tasks = plan_runs(merged([100, 1500, 2900, 3700]), 1, run_bytes=1000)
    assert [t.n_chunks for t in tasks] == [1, 1, 1, 1]


def test_joined_ranges_name_each_chunks_part():
    def result(part, offsets, size):
        ranges = SegmentRanges(
            {"position": ChunkRanges(np.array(offsets, np.uint64), np.array([5] * len(offsets), np.uint64))},
            {"position": "zstd"},
            1,
            (part,),
            np.zeros(len(offsets), np.int32),
        )
        return RunResult(part, ranges, Fingerprint(size, 0, None))

    joined = join_runs([result("part-000000", [10, 20], 30), result("part-000001", [10], 15)])
    assert joined.parts == ("part-000000", "part-000001")
    assert joined.chunk_part.tolist() == [0, 0, 1]
    assert joined.segments["position"].offsets.tolist() == [10, 20, 10]
    assert [f.size for f in joined.part_fingerprints] == [30, 15]


def test_an_append_numbers_parts_after_the_stores_and_completes_its_last_chunk():
    # The store has 3 parts and its last chunk holds 4 of 10 records: the new records'
    # chunk 0 is 6 of them, then 10 each (35 new records: 6 + 10 + 10 + 9).
    lead = (StoredSegment("position", 0, "store/part-000002", 70, 30, 1, -1, 1, False, "zstd"),)
    go_on = Continuation(10, 3, "store/part-000000", 8, 4, lead)
    tasks = plan_runs(merged([100, 1500, 2900, 3700]), 2, continuation=go_on)
    assert [(t.part, t.first_chunk, t.n_chunks, t.n_records) for t in tasks] == [
        ("part-000003", 0, 2, 16),
        ("part-000004", 2, 2, 19),
    ]
    assert [(t.lead_records, t.lead_segments) for t in tasks] == [(4, lead), (0, ())]
    assert {(t.header_source, t.header_offset, t.stores_header) for t in tasks} == {("store/part-000000", 8, False)}


def test_only_a_new_caches_first_part_stores_the_header():
    assert [t.stores_header for t in plan_runs(merged([100, 1500, 2900, 3700]), 2)] == [True, False]
