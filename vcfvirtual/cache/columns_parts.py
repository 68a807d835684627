"""The columns cache written by workers, one part per run of whole variants chunks.

A partitioned index runs in two phases. The first scans partitions (cut anywhere) and
only counts their records (:func:`vcfvirtual.scan.parallel.count_merge`: a few numbers a
partition, so the caller's memory grows with the partitions and chunks, not the
records). The second (here) cuts the chunks into runs, one per partition a chunk starts
in, and a task per run reads its records again from the sources (a second inflate:
measured in ``docs/design.md``, "Indexing at biobank scale"): from its partition's
start, past the records of the run before (fewer than a chunk), then on until its last
chunk is whole. It demultiplexes and compresses them, writes its own part of the cache
(``part-000123``, in the layout's single-file format: magic, BCF header, segments), and
returns its segments' byte ranges and its chunks' region rows; the caller concatenates them.

Runs are whole chunks, so every chunk is in one part and the parts are the segments a
serial run writes, cut between chunks. A part is written under a temporary name and
renamed when complete, so a task run twice (a retried worker) writes it once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from ..bcf.csi import RecordStart
from ..bcf.header import BCFHeader
from ..errors import OutputWriteError
from ..io import remote
from ..io.fingerprint import Fingerprint
from ..io.outputs import TEMPORARY, temporary_name
from ..io.parts import is_part_name, part_url
from ..io.sources import StorageOptions
from ..scan.parallel import CountedPartition, Merged
from ..scan.results import RunFacts
from ..scan.sink import RecordSink, ScanStop
from .base import ChunkRanges, Continuation, SegmentRanges, complete_counts, open_cache
from .columns_join import StoredSegment
from .names import PART_PREFIX, part_name


@dataclass(frozen=True)
class Span:
    """The records of one source file a run reads: from the record at ``start`` up to the
    record at ``end`` (None: the file's end)."""

    path: str
    start: RecordStart
    end: RecordStart | None


@dataclass(frozen=True)
class RunTask:
    """One part to write: chunks ``first_chunk`` to ``first_chunk + n_chunks``, their
    ``n_records`` records read from ``spans`` in order, past the first ``skip`` records
    there (those of the run before), stopping once they are read."""

    part: str
    header_source: str  # the store's first file, whose header every part is planned from
    first_chunk: int
    n_chunks: int
    n_records: int
    spans: tuple[Span, ...]
    skip: int = 0
    # fsspec options for spans of URLs, which the task reads by range requests.
    storage_options: StorageOptions = field(default=None, compare=False, repr=False)
    # Where the BCF stream of header_source starts (appending: the store's first part's header).
    header_offset: int = 0
    # Whether the part stores the header (the cache's first part does; the others an empty one).
    stores_header: bool = False
    # Appending: the store's partial last chunk, which this run's first chunk completes
    # (its records, and its segments to join the new records' to).
    lead_records: int = 0
    lead_segments: tuple[StoredSegment, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """What a task returns: its part's segment ranges (offsets in the part), fingerprint,
    and what it learnt of its records (:class:`~vcfvirtual.scan.results.RunFacts`)."""

    part: str
    ranges: SegmentRanges
    fingerprint: Fingerprint
    facts: RunFacts


def plan_runs(
    merged: Merged, storage_options: StorageOptions = None, continuation: Continuation | None = None
) -> list[RunTask]:
    """Cut the chunks into runs of whole chunks, one per partition a chunk starts in.

    The first phase only counted each partition's records, so a run starts reading at
    the start of the partition its first chunk starts in, passes the records before it
    (fewer than a chunk's), and reads on, into the partitions (and files) after, until its
    last chunk is whole. The runs are about the partitions' sizes, which the partition
    plan balanced; no record's offset is ever sent to this process.

    Parameters
    ----------
    merged : Merged
        The counted partitions (:func:`vcfvirtual.scan.parallel.count_merge`).
    storage_options : mapping, optional
        fsspec options for sources named by URL.
    continuation : Continuation, optional
        Appending: parts are numbered after the store's, none stores the header, and
        the first completes the store's partial last chunk (chunk 0 then holds
        ``chunk_length - lead_records`` new records).

    Returns
    -------
    list of RunTask
        In chunk order; together they cover every chunk once.
    """
    scan = merged.scan
    length, n_records = int(scan.chunk_length), int(scan.num_records)
    go_on = continuation or Continuation(length, 0, merged.partitions[0].path if merged.partitions else "", 0)
    lead = go_on.lead_records
    n_chunks = -(-(n_records + lead) // length) if n_records else 0
    partitions = [p for p in merged.partitions if p.n_records]
    # The chunk each partition's first record is in; a run starts at the first chunk
    # starting in a partition (the very first run at chunk 0, which may be led).
    firsts = [0] + [-(-(p.first_index + lead) // length) for p in partitions[1:]]
    starts = sorted({c for c in firsts if c < n_chunks})
    edges = [*starts, n_chunks]

    def record(chunk: int) -> int:  # the new records before chunk ``chunk``
        return min(max(chunk * length - lead, 0), n_records)

    tasks = []
    for index, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        a, b = record(lo), record(hi)
        # The last partition starting at or before the run's first record, and those after
        # it holding any of its records.
        first = max(i for i, p in enumerate(partitions) if p.first_index <= a)
        held = [p for p in partitions[first:] if p.first_index < b]
        led = index == 0 and lead > 0
        tasks.append(
            RunTask(
                part_name(go_on.first_part + index),
                go_on.header_source,
                lo,
                hi - lo,
                b - a,
                _spans(held),
                skip=a - held[0].first_index,
                storage_options=storage_options,
                header_offset=go_on.header_offset,
                stores_header=continuation is None and lo == 0,
                lead_records=lead if led else 0,
                lead_segments=go_on.lead_segments if led else (),
            )
        )
    return tasks


def _spans(partitions: list[CountedPartition]) -> tuple[Span, ...]:
    """Consecutive partitions as spans: one per file (a file's partitions are one run of its records)."""
    out: list[Span] = []
    for p in partitions:
        if out and out[-1].path == p.path:
            out[-1] = Span(p.path, out[-1].start, p.end)
        else:
            out.append(Span(p.path, p.start, p.end))
    return tuple(out)


class RunComplete(ScanStop):
    """Raised by :class:`PartSink` once the run has its records, ending the span's scan:
    ``end`` is where its last record ends (the next record's start, in the run's offsets)."""


class PartSink:
    """A scan's sink that feeds a run's records, across its spans, to one writer: past the
    first ``skip`` records (the run before's: their bytes dropped from the writer), then
    ``n_records`` records, raising :class:`RunComplete` once the record after them is seen.
    Offsets move to the run's (``shift``: the run offset of the current span's first byte)."""

    def __init__(self, writer: ColumnsWriterLike, skip: int, n_records: int):
        self.writer = writer
        self.skip = skip
        self.passing = skip > 0  # until the first record kept: the bytes before it are dropped
        self.left = n_records
        self.shift = 0

    def header_parsed(self, header: BCFHeader, chunk_length: int) -> None:
        pass  # a span's scan parses none: the writer was given the store's

    def add_block(self, raw: bytes | memoryview | None, data: bytes | memoryview) -> None:
        self.writer.add_block(None, data)

    def records_scanned(self, offsets: np.ndarray) -> None:
        if self.passing:
            passed = min(self.skip, offsets.shape[0])
            self.skip -= passed
            offsets = offsets[passed:]
            if not offsets.shape[0]:
                return
            self.passing = False
            self.writer.skip_to(int(offsets[0]) + self.shift)  # the bytes before are the run before's
        take = min(self.left, offsets.shape[0])
        if take:
            self.writer.records_scanned(offsets[:take] + self.shift)
            self.left -= take
        if take < offsets.shape[0]:
            raise RunComplete(int(offsets[take]) + self.shift)

    def scanned_to(self, stream_offset: int) -> None:
        self.writer.scanned_to(stream_offset + self.shift)


class ColumnsWriterLike(RecordSink, Protocol):
    """What :class:`PartSink` needs of the columns writer: a sink that can forget the
    bytes before a record."""

    def skip_to(self, offset: int) -> None: ...


def join_runs(results: list[RunResult]) -> SegmentRanges:
    """The cache's segment ranges from its parts', in chunk order.

    Parameters
    ----------
    results : list of RunResult
        One per part, in chunk order.

    Returns
    -------
    SegmentRanges
        Each chunk's ranges in its part, and which part (``chunk_part``).
    """
    first = results[0].ranges
    segments = {
        name: ChunkRanges(
            np.concatenate([r.ranges.segments[name].offsets for r in results]),
            np.concatenate([r.ranges.segments[name].lengths for r in results]),
        )
        for name in first.segments
    }
    counts = [r.ranges.chunk_part.shape[0] for r in results]
    chunk_part = np.repeat(np.arange(len(results), dtype=np.int32), counts)
    names = tuple(r.part for r in results)
    fingerprints = tuple(r.fingerprint for r in results)
    facts = RunFacts.fold([r.facts for r in results])
    # Every part has GT's segments or none does (one plan); a part's counts not carried read as 0.
    counts = [c for r in results if (c := complete_counts(r.ranges)) is not None]
    gt_complete = np.concatenate(counts) if len(counts) == len(results) else None
    return SegmentRanges(
        segments, first.compressors, first.samples_chunk_size, names, chunk_part, fingerprints, facts, gt_complete
    )


class PartFile:
    """A part being written (``file``), and once it is whole, its ``fingerprint``."""

    def __init__(self, file: IO[Any]):
        self.file = file
        self.fingerprint: Fingerprint | None = None


@contextlib.contextmanager
def part_file(folder: str, part: str, storage_options: StorageOptions = None) -> Iterator[PartFile]:
    """``part`` of the cache folder ``folder`` (a path, or a URL), open for writing; it
    appears under its name only whole, so a task run twice writes it once and a failed
    one leaves nothing under it.

    A local part is written under a temporary name, flushed and renamed. An object
    store's part is uploaded as it is written (fsspec's multipart upload: the worker holds
    a few blocks, not the part) and shows only once the upload completes; a failed one is
    discarded.

    Raises
    ------
    OutputWriteError
        The part could not be written.
    """
    if not remote.is_url(folder):
        final = Path(folder) / part
        tmp = temporary_name(final)
        try:
            with open_cache(tmp) as f:
                written = PartFile(f)
                yield written
        except BaseException:
            tmp.unlink(missing_ok=True)  # in a store's folder (appending), nothing else would
            raise
        os.replace(tmp, final)
        written.fingerprint = Fingerprint.of(final)
        return
    url = part_url(folder, part)  # as the readers join them
    fs, path = remote.filesystem(url, dict(storage_options or {}))
    try:
        f = fs.open(path, "wb")
    except Exception as e:  # noqa: BLE001 - the remote library's own (botocore, aiohttp...)
        raise OutputWriteError(url, f"cannot write the cache part: {type(e).__name__}: {e}") from None
    written = PartFile(f)
    try:
        yield written
        f.close()  # completes the upload: the object appears now
    except BaseException as e:
        with contextlib.suppress(Exception):
            f.discard() if hasattr(f, "discard") else f.close()
        with contextlib.suppress(Exception):
            fs.rm_file(path)
        if isinstance(e, OSError):
            raise OutputWriteError(url, f"cannot write the cache part: {e}") from None
        raise
    written.fingerprint = remote.fingerprint(url, dict(storage_options or {}))


def remove_parts(folder: str, names: list[str], storage_options: StorageOptions = None) -> None:
    """Remove the parts ``names`` a failed run wrote in the cache folder ``folder`` (best
    effort: the run's own error is the one to report): under a URL, or in a local folder
    that already held a store's parts (appending; a new local folder is a temporary its
    caller removes whole)."""
    for name in names:
        with contextlib.suppress(Exception):
            if remote.is_url(folder):
                remote.remove(part_url(folder, name), dict(storage_options or {}))
            else:
                os.unlink(os.path.join(folder, name))


def remove_other_parts(folder: str, keep: tuple[str, ...], storage_options: StorageOptions = None) -> list[str]:
    """Remove the parts of the cache folder under a URL that are not ``keep``: those of
    the cache a run with ``--force`` replaced in place, when it had more parts (a local
    folder is replaced whole). Only ``part-NNNNNN`` objects are touched. Returns the
    names removed."""
    fs, path = remote.filesystem(folder, dict(storage_options or {}))
    try:
        names = [name.rstrip("/").rsplit("/", 1)[-1] for name in fs.ls(path, detail=False)]
    except FileNotFoundError:
        return []
    stale = [name for name in names if is_part_name(name) and name not in keep]
    remove_parts(folder, stale, storage_options)
    return stale


def remove_leftovers(folder: str) -> None:
    """Remove what a killed worker left in a local cache folder: a part it was writing,
    under its temporary name (the part itself was written again by another task). Only
    names this module makes (``.part-NNNNNN.tmp-PID``) are removed, in the run's own
    temporary folder."""
    if remote.is_url(folder):
        return  # an object store's unfinished upload shows no object
    for name in os.listdir(folder):
        if name.startswith("." + PART_PREFIX) and f".{TEMPORARY}-" in name:  # temporary_name's
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
