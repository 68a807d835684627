"""The columns cache written by workers, one part per run of whole variants chunks.

A partitioned index runs in two phases. The first scans partitions (cut anywhere) and
merges what they learn (:func:`vcfvirtual.scan.parallel.merge`): every chunk's first
record's offset in the merged stream, and which source block holds each stream byte.
The second (here) cuts the chunks into runs, and a task per run reads its records again
from the sources (a second inflate: measured in ``docs/design.md``, "Indexing at biobank
scale"), demultiplexes and compresses them, and writes its own part of the cache
(``part-000123``, in the layout's single-file format: magic, BCF header, segments). A
task returns only its segments' byte ranges; the caller concatenates them.

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
from typing import IO, Any

import numpy as np

from ..bcf.csi import RecordStart
from ..bcf.header import BCFHeader
from ..errors import OutputWriteError
from ..io import remote
from ..io.fingerprint import Fingerprint
from ..io.outputs import TEMPORARY, temporary_name
from ..io.parts import part_url
from ..io.sources import StorageOptions
from ..scan.parallel import Merged, Piece
from ..scan.sink import RecordSink
from .base import ChunkRanges, Continuation, SegmentRanges, open_cache
from .columns_join import StoredSegment
from .names import PART_PREFIX, part_name

# Inflated bytes of records a run holds at most. A task's fixed costs (parsing the header:
# 0.06 s at 10^5 samples, 0.54 s at 5x10^5; a part's start) must stay small beside its
# work (~2 s of CPU per GiB of records), and its memory does not grow with it (it streams
# chunk by chunk); the caller asks for at least 2 x workers runs, so they balance.
RUN_BYTES = 4 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class Span:
    """The records of one source file a run reads: from the record at ``start`` up to the
    record at ``end`` (None: the file's end)."""

    path: str
    start: RecordStart
    end: RecordStart | None


@dataclass(frozen=True)
class RunTask:
    """One part to write: chunks ``first_chunk`` to ``first_chunk + n_chunks`` (their
    ``n_records`` records, ``n_bytes`` inflated bytes), read from ``spans`` in order."""

    part: str
    header_source: str  # the store's first file, whose header every part is planned from
    first_chunk: int
    n_chunks: int
    n_records: int
    n_bytes: int
    spans: tuple[Span, ...]
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
    """What a task returns: its part's segment ranges (offsets in the part) and fingerprint."""

    part: str
    ranges: SegmentRanges
    fingerprint: Fingerprint


def plan_runs(
    merged: Merged,
    n_runs: int,
    run_bytes: int = RUN_BYTES,
    storage_options: StorageOptions = None,
    continuation: Continuation | None = None,
) -> list[RunTask]:
    """Cut the merged stream's chunks into runs of whole chunks, each a task.

    Parameters
    ----------
    merged : Merged
        The partitions' merged scan and the source pieces, in stream order.
    n_runs : int
        Runs to cut at least (when there are as many chunks), of about equal bytes.
    run_bytes : int
        Inflated bytes per run at most, where more runs than ``n_runs`` are needed.
    storage_options : mapping, optional
        fsspec options for sources named by URL.
    continuation : Continuation, optional
        Appending: parts are numbered after the store's, none stores the header, and
        the first completes the store's partial last chunk (the merged scan's chunks
        then count from it: chunk 0 holds ``chunk_length - lead_records`` records).

    Returns
    -------
    list of RunTask
        In chunk order; together they cover every chunk once.
    """
    scan = merged.scan
    starts = np.asarray(scan.chunk_offsets, np.int64)
    n_chunks = starts.shape[0]
    if n_chunks == 0:
        return []
    bounds = np.append(starts, np.int64(scan.stream_size))
    first_byte = int(starts[0])
    total = int(scan.stream_size) - first_byte
    runs = max(1, min(n_chunks, max(n_runs, -(-total // max(1, run_bytes)))))
    # Chunk k goes to the run its first byte falls in, cutting the bytes in equal shares.
    cuts = np.searchsorted(bounds[:-1], first_byte + np.arange(1, runs, dtype=np.int64) * total // runs, side="left")
    edges = np.unique(np.concatenate([[0], cuts, [n_chunks]]))
    placer = _StreamPlacer(merged.pieces)
    chunk_length = int(scan.chunk_length)
    go_on = continuation or Continuation(chunk_length, 0, placer.paths[0], 0)
    lead = go_on.lead_records

    def records_before(chunk: int) -> int:  # the new records before chunk ``chunk``
        return min(max(chunk * chunk_length - lead, 0), int(scan.num_records))

    tasks = []
    for index, (lo, hi) in enumerate(zip(edges[:-1].tolist(), edges[1:].tolist())):
        start, end = int(bounds[lo]), int(bounds[hi])
        first = lo == 0 and lead > 0
        tasks.append(
            RunTask(
                part_name(go_on.first_part + index),
                go_on.header_source,
                lo,
                hi - lo,
                records_before(hi) - records_before(lo),
                end - start,
                placer.spans(start, end),
                storage_options,
                header_offset=go_on.header_offset,
                stores_header=continuation is None and lo == 0,
                lead_records=lead if first else 0,
                lead_segments=go_on.lead_segments if first else (),
            )
        )
    return tasks


class _StreamPlacer:
    """Where a merged stream offset is in the sources: the piece (source block) holding it."""

    def __init__(self, pieces: list[Piece]):
        self.pieces = pieces
        self.starts = np.array([p.stream_start for p in pieces], np.int64)
        ends = self.starts + np.array([p.hi - p.lo for p in pieces], np.int64)
        paths = [p.path for p in pieces]
        # Each file's pieces are consecutive: a file is its first piece's index on.
        first = [i for i in range(len(paths)) if i == 0 or paths[i] != paths[i - 1]]
        self.file_of = np.repeat(np.arange(len(first)), np.diff([*first, len(paths)]))
        self.paths = [paths[i] for i in first]
        self.file_end = ends[np.array([*first[1:], len(paths)]) - 1]

    def spans(self, start: int, end: int) -> tuple[Span, ...]:
        """The source spans holding stream bytes ``[start, end)``, each from a record's start."""
        out = []
        f = int(self.file_of[self._piece(start)])
        while start < end:
            stop = min(end, int(self.file_end[f]))
            last = stop == int(self.file_end[f])
            out.append(Span(self.paths[f], self._record_start(start), None if last else self._record_start(stop)))
            start, f = stop, f + 1
        return tuple(out)

    def _piece(self, offset: int) -> int:
        return int(np.searchsorted(self.starts, offset, side="right")) - 1

    def _record_start(self, offset: int) -> RecordStart:
        """The source position of stream ``offset`` (inside a file: a later file's first
        piece starts where the earlier file ends, so it is the one found there)."""
        piece = self.pieces[self._piece(offset)]
        return RecordStart(piece.offset, piece.lo + offset - piece.stream_start)


class PartSink:
    """A scan's sink that feeds a run's spans, one after another, to one writer, their
    offsets (each counted from its span's first byte) moved to the run's (``shift``:
    the run offset of the current span's first byte)."""

    def __init__(self, writer: RecordSink):
        self.writer = writer
        self.shift = 0

    def header_parsed(self, header: BCFHeader, chunk_length: int) -> None:
        pass  # a span's scan parses none: the writer was given the store's

    def add_block(self, raw: bytes | memoryview | None, data: bytes | memoryview) -> None:
        self.writer.add_block(None, data)

    def records_scanned(self, offsets: np.ndarray) -> None:
        self.writer.records_scanned(offsets + self.shift)

    def scanned_to(self, stream_offset: int) -> None:
        self.writer.scanned_to(stream_offset + self.shift)


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
    return SegmentRanges(segments, first.compressors, first.samples_chunk_size, names, chunk_part, fingerprints)


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
        with open_cache(tmp) as f:
            written = PartFile(f)
            yield written
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
