"""The scan hands its sink every inflated byte and every record start; partition scans
cover exactly the records between their bounds. Oracles: Python's gzip/zlib for the
inflated stream, the BCF specification's record lengths (walked by hand in
``bcf_spec``) for record offsets, and htslib (pysam) for record counts, positions and
virtual offsets."""

from __future__ import annotations

import numpy as np
import pysam
import pytest

from vcfvirtual.bcf.csi import RecordStart
from vcfvirtual.bcf.header import BCFHeader
from vcfvirtual.errors import CorruptBCFError, NotBCFError
from vcfvirtual.scan.scanner import read_header, scan_bcf, scan_partition
from vcfvirtual.scan.sink import FileSink, RecordSink

from .. import bcf_spec


class Recorder:
    """A sink keeping every call, to check what the scan hands over."""

    def __init__(self) -> None:
        self.blocks: list[tuple[bytes | None, bytes]] = []
        self.headers: list[tuple[BCFHeader, int]] = []
        self.offsets: list[int] = []
        self.scanned: list[int] = []

    def header_parsed(self, header: BCFHeader, chunk_length: int) -> None:
        self.headers.append((header, chunk_length))

    def add_block(self, raw, data) -> None:
        self.blocks.append((None if raw is None else bytes(raw), bytes(data)))

    def records_scanned(self, offsets: np.ndarray) -> None:
        # Every record handed over lies before what the scan later says it scanned to.
        assert not self.scanned or offsets.size == 0 or offsets[0] >= self.scanned[-1]
        self.offsets.extend(offsets.tolist())

    def scanned_to(self, stream_offset: int) -> None:
        self.scanned.append(stream_offset)


def _recorder_is_a_sink(sink: RecordSink) -> None:
    """Checked by mypy: the recorder satisfies the declared protocol."""


_recorder_is_a_sink(Recorder())


def pysam_positions(bcf) -> list[int]:
    with pysam.VariantFile(str(bcf)) as f:
        return [rec.pos for rec in f]


def virtual_offsets(bcf) -> list[int]:
    """htslib's virtual offset of each record: tell() before reading it."""
    out = []
    with pysam.VariantFile(str(bcf)) as f:
        f.subset_samples([])
        while True:
            virtual = f.tell()
            try:
                next(f)
            except StopIteration:
                return out
            out.append(virtual)


@pytest.fixture(scope="module")
def uncompressed_bcf(cohort_bcf, tmp_path_factory):
    """The cohort's stream with no BGZF at all (htslib's -Ou still writes BGZF blocks)."""
    path = tmp_path_factory.mktemp("plain") / "cohort.u.bcf"
    path.write_bytes(bcf_spec.inflate(cohort_bcf))
    return path


@pytest.mark.parametrize("which", ["cohort_bcf", "uncompressed_bcf"])
def test_sink_receives_every_inflated_byte_and_record(which, request):
    bcf = request.getfixturevalue(which)
    stream = bcf_spec.inflate(bcf)
    sink = Recorder()
    scan = scan_bcf(bcf, lambda header: 7, sink=sink, progress=False)

    assert b"".join(data for _, data in sink.blocks) == stream
    if which == "cohort_bcf":
        # Each block as read: its compressed bytes are the file's gzip members.
        members = bcf_spec.gzip_members(bcf)
        assert [data for _, data in members] == [data for _, data in sink.blocks]
        whole = bcf.read_bytes()
        ends = [offset for offset, _ in members[1:]] + [len(whole)]
        assert [raw for raw, _ in sink.blocks] == [whole[o:e] for (o, _), e in zip(members, ends)]
    else:
        assert all(raw is None for raw, _ in sink.blocks)

    assert len(sink.headers) == 1
    header, chunk_length = sink.headers[0]
    assert (header.size, chunk_length) == (bcf_spec.header_size(stream), 7)
    expected = bcf_spec.record_offsets(stream)
    assert sink.offsets == expected
    assert sink.scanned == sorted(sink.scanned) and sink.scanned[-1] == len(stream)

    positions = pysam_positions(bcf)
    assert scan.num_records == len(positions) == len(expected)
    assert scan.chunk_offsets.tolist() == expected[::7]
    assert scan.pos_range == (min(positions), max(positions))  # 1-based, as pysam's pos
    assert scan.stream_size == len(stream)
    assert scan.compressed == (which == "cohort_bcf") and scan.has_eof_block


def test_file_sink_writes_the_uncompressed_stream(cohort_bcf, tmp_path):
    out = tmp_path / "stream.bcf"
    with open(out, "wb") as f:
        scan_bcf(cohort_bcf, lambda header: 100, sink=FileSink(f), progress=False)
    assert out.read_bytes() == bcf_spec.inflate(cohort_bcf)
    assert pysam_positions(out) == pysam_positions(cohort_bcf)  # htslib reads it too


def test_read_header_is_htslibs(cohort_bcf):
    header = read_header(cohort_bcf)
    with pysam.VariantFile(str(cohort_bcf)) as f:
        assert list(header.samples) == list(f.header.samples)
        assert list(header.contigs) == list(f.header.contigs)
    assert header.size == bcf_spec.header_size(bcf_spec.inflate(cohort_bcf))


def test_chunk_length_below_one_is_refused(small_bcf):
    with pytest.raises(ValueError, match="at least 1"):
        scan_bcf(small_bcf, lambda header: 0, progress=False)


def test_truncated_and_empty_files_are_typed_errors(cohort_bcf, tmp_path):
    stream = bcf_spec.inflate(cohort_bcf)
    offsets = bcf_spec.record_offsets(stream)
    cut = tmp_path / "cut.bcf"
    cut.write_bytes(stream[: offsets[10] + 20])  # inside the 11th record
    with pytest.raises(CorruptBCFError, match="ends inside a BCF record") as info:
        scan_bcf(cut, lambda header: 5, progress=False)
    assert info.value.offset == offsets[10]
    empty = tmp_path / "empty.bcf"
    empty.write_bytes(b"")
    with pytest.raises(NotBCFError, match="empty"):
        scan_bcf(empty, lambda header: 5, progress=False)


def test_partitions_cover_their_records(cohort_bcf, tmp_path):
    stream = bcf_spec.inflate(cohort_bcf)
    expected = bcf_spec.record_offsets(stream)
    virtual = virtual_offsets(cohort_bcf)
    assert len(virtual) == len(expected)
    # Cuts at htslib's own record starts: a third and two thirds of the way.
    cuts = [len(virtual) // 3, 2 * len(virtual) // 3]
    bounds = [None, *(RecordStart(virtual[i] >> 16, virtual[i] & 0xFFFF) for i in cuts), None]
    firsts = [0, *cuts, len(virtual)]
    for k, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        segment = tmp_path / f"part-{k}"
        part = scan_partition(cohort_bcf, start, end, segment_path=segment)
        lo, hi = firsts[k], firsts[k + 1]
        assert part.records["offset"].shape[0] == hi - lo
        # Offsets are stream offsets for the first partition, from the partition's first
        # record byte for the others.
        origin = 0 if start is None else bcf_spec.stream_offset(cohort_bcf, start.virtual_offset)
        assert (part.records["offset"] + origin).tolist() == expected[lo:hi]
        stream_end = len(stream) if end is None else bcf_spec.stream_offset(cohort_bcf, end.virtual_offset)
        assert segment.read_bytes() == stream[origin:stream_end]
        assert part.stream_length == stream_end - (origin if start is not None else bcf_spec.header_size(stream))
        with pysam.VariantFile(str(cohort_bcf)) as f:
            positions = [rec.pos for rec in f][lo:hi]
        assert (part.records["pos"] + 1).tolist() == positions


def test_a_partition_ending_inside_a_record_is_refused(cohort_bcf):
    virtual = virtual_offsets(cohort_bcf)
    inside = virtual[100] + 3  # three bytes into record 100, in the same block
    if (inside & 0xFFFF) < 3:
        pytest.skip("record 100 starts a block")
    with pytest.raises(CorruptBCFError, match="incomplete record"):
        scan_partition(cohort_bcf, None, RecordStart(inside >> 16, inside & 0xFFFF))
