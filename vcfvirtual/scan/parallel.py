"""Several BCFs, or parts of one, scanned apart and merged into one store.

A partition is a run of consecutive records of one file. Partitions are scanned on their
own (in worker processes, or by a Dask cluster), each learning its records' facts with
offsets counted from its own first record. Merging puts them back in order: block sizes
place every partition in its file's stream, files follow one another with later headers
dropped (the store keeps the first file's header, so every file must be compatible
with it), and the per-record facts are folded per variants chunk exactly as one serial
scan would. The cache is then assembled from the source blocks with the same cuts, so a
partitioned run writes the same cache, byte for byte, as a serial run of the same
records.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import errno
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

import numpy as np

from .._progress import byte_bar
from ..bcf.csi import RecordStart, csi_contig_records
from ..bcf.header import BCFHeader, compatibility_problems
from ..errors import CorruptBCFError, HeaderError, OutputWriteError
from ..io.outputs import write_hint
from ..io.remote import is_url
from ..io.sources import StorageOptions, source_size
from .kernel import new_stats, stats_keys
from .partition import MAX_PARTITION_BYTES
from .results import REGION_COLUMNS, PartitionScan, RecordSummary, ScanResult, fold_stats
from .scanner import scan_partition

if TYPE_CHECKING:
    from tqdm import tqdm

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Partition:
    """Records of ``path`` from ``start`` (None: the first) up to ``end`` (None: the last)."""

    path: str
    start: RecordStart | None = None
    end: RecordStart | None = None
    # fsspec options when ``path`` is a URL (each worker reads its part by range requests).
    storage_options: StorageOptions = dataclasses.field(default=None, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Piece:
    """Stream bytes the cache is assembled from: ``inflated[lo:hi]`` of the source block
    at ``offset`` (``compressed_size`` 0: bytes of an uncompressed file), placed at
    ``stream_start`` of the merged stream."""

    path: str
    offset: int
    compressed_size: int
    inflated_size: int
    lo: int
    hi: int
    stream_start: int

    @property
    def whole(self) -> bool:
        return self.compressed_size > 0 and self.lo == 0 and self.hi == self.inflated_size


class Segment(NamedTuple):
    """A partition's inflated stream bytes, written by its worker: ``path`` from byte
    ``skip`` on (a later file's header is dropped) is its part of the merged stream."""

    path: Path
    skip: int


@dataclasses.dataclass(frozen=True)
class CountedPartition:
    """A partition as its first phase counted it: records ``first_index`` (among the
    run's records, every file's in order) to ``first_index + n_records``, from the record
    at ``start`` up to the record at ``end`` (None: the file's end) of ``path``."""

    path: str
    start: RecordStart
    end: RecordStart | None
    first_index: int
    n_records: int


@dataclasses.dataclass
class Merged:
    scan: ScanResult
    pieces: list[Piece]  # in stream order, for the BGZF cache
    segments: list[Segment]  # in stream order, for the raw cache (when segments were written)
    # The partitions, when only counted (Facts "counts": the columns layout, whose tasks
    # find their chunks' records themselves); the scan then has no per-chunk summaries.
    partitions: list[CountedPartition] = dataclasses.field(default_factory=list)


# What the first phase keeps of each record: every record's facts (the caller places the
# chunks: bgzf, raw), or their number and ranges only (columns: the tasks place them).
Facts = Literal["records", "counts"]


def split_files(
    paths: Sequence[str],
    plan_file: Callable[[str], list[RecordStart]] | None,
    storage_options: StorageOptions = None,
) -> list[Partition]:
    """The partitions of each file, in order.

    Parameters
    ----------
    paths : sequence of str
        The files, in store order.
    plan_file : callable or None
        ``plan_file(path)`` gives the record starts to cut a file at, ascending, after
        its first record; None: whole files.
    storage_options : mapping, optional
        fsspec options for paths that are URLs.

    Returns
    -------
    list of Partition
        Each file's partitions, first to last.
    """
    partitions: list[Partition] = []
    for path in paths:
        cuts: list[RecordStart | None] = [None, *(plan_file(path) if plan_file is not None else []), None]
        partitions.extend(Partition(os.fspath(path), a, b, storage_options) for a, b in zip(cuts[:-1], cuts[1:]))
    return partitions


# Errors that mean an output could not be written, not that an input could not be read.
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def _scan_task(partition: Partition, segment_path: Path | None, facts: Facts = "records") -> PartitionScan:
    """One partition's scan (module level, so worker processes can run it)."""
    try:
        scan = scan_partition(
            partition.path,
            partition.start,
            partition.end,
            segment_path=segment_path,
            storage_options=partition.storage_options,
            facts=facts,
        )
        # Only a file's first partition hands its header back (PartitionScan.header).
        return scan if partition.start is None else dataclasses.replace(scan, header=None)
    except OSError as e:
        # A raw-layout worker writes its records next to the cache: a full disk there is
        # the cache's failure, typed here so it travels back as one clear error.
        if segment_path is None or (e.errno not in _WRITE_ERRNOS and e.filename != os.fspath(segment_path)):
            raise
        raise OutputWriteError(
            segment_path, f"cannot write the cache (its parts, next to it): {e.strerror}", hint=write_hint(e)
        ) from None


class InlineExecutor(concurrent.futures.Executor):
    """Runs each task when submitted, in this process: one worker needs no pool."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # handed to the caller through the future, as a pool would
            future.set_exception(e)
        return future


@contextlib.contextmanager
def executor_for(workers: int, dask_client: Any = None) -> Iterator[concurrent.futures.Executor]:
    """Where partitions are scanned: a Dask client's cluster, local processes, or this
    process.

    Parameters
    ----------
    workers : int
        Local worker processes; 1: this process (no pool).
    dask_client : distributed.Client, optional
        Scan on its cluster instead.

    Yields
    ------
    concurrent.futures.Executor
        Stopped (its workers killed) if the block fails or is interrupted.
    """
    if dask_client is not None:
        yield dask_client.get_executor()
    elif workers > 1:
        # A fork starts workers at once, with the scanner's compiled kernels already
        # loaded (forkserver costs ~0.4 s re-importing them); but forking a process in
        # which other threads run can copy a lock one of them holds and deadlock, so
        # then workers come from a clean forkserver process instead.
        context: multiprocessing.context.BaseContext
        if threading.active_count() == 1:
            context = multiprocessing.get_context("fork")
        else:
            forkserver = multiprocessing.get_context("forkserver")
            forkserver.set_forkserver_preload(["vcfvirtual.scan.scanner"])
            context = forkserver
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_signals)
        try:
            yield pool
        except BaseException:
            # Interrupted (SIGTERM, Ctrl-C) or failed: stop the workers now rather than
            # wait for their parts, so the caller's cleanup runs at once and no worker
            # is still writing into the files it removes.
            _stop_workers(pool)
            raise
        pool.shutdown(wait=True)
    else:
        yield InlineExecutor()


# Forking workers runs Python code in both processes (logging's at-fork lock release,
# among others) where an exception raised by a signal handler is swallowed and leaves a
# lock held: the run carries on, deadlocks, and the signal is lost. A handler that raises
# (the command line's) asks hold_signal() first, and the signal is raised again once the
# workers are started.
_forking = 0
_held_signals: list[int] = []


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold signals whose handlers raise (:func:`hold_signal`) while the block forks workers."""
    global _forking
    _forking += 1
    try:
        yield
    finally:
        _forking -= 1
        if not _forking:
            while _held_signals:
                signal.raise_signal(_held_signals.pop(0))


def hold_signal(signum: int) -> bool:
    """Whether a signal handler that raises must wait: workers are being forked.

    Parameters
    ----------
    signum : int
        The signal being handled.

    Returns
    -------
    bool
        True when the handler must not act now; the signal is then raised again as
        soon as it may act.
    """
    if _forking:
        _held_signals.append(signum)
        return True
    return False


def _worker_signals() -> None:
    """Workers leave interruptions to the process that started them, which stops them
    and cleans up: Ctrl-C (sent to the whole terminal group) is ignored here, and SIGTERM
    ends a worker outright whatever handler it inherited at the fork."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_workers(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()  # they hold nothing to clean up: their parts are the caller's to delete
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(5)


Scanned = tuple[Partition, PartitionScan, "Path | None"]  # with its segment of inflated records


def scan_all(
    partitions: list[Partition],
    executor: concurrent.futures.Executor,
    segment_dir: Path | None,
    progress: bool | None = None,
    facts: Facts = "records",
) -> list[Scanned]:
    """Scan every partition; a file whose partitions do not join up is scanned again whole.

    A partition planned from a heuristic record start may begin in the middle of a
    record: the partition before it then cannot end there and fails. The file is then
    scanned as one partition, which is right by construction (and reports any real
    corruption with its true offset).

    Parameters
    ----------
    partitions : list of Partition
        From :func:`split_files`.
    executor : concurrent.futures.Executor
        From :func:`executor_for`.
    segment_dir : Path or None
        Where workers write their partitions' inflated bytes (``part-NNNNNN``); None: not written.
    progress : bool, optional
        Show a progress bar (None: when on a terminal).
    facts : {"records", "counts"}
        What each partition's scan keeps of its records (:data:`Facts`).

    Returns
    -------
    list of (Partition, PartitionScan, Path or None)
        In file and record order, with each partition's segment.

    Raises
    ------
    CorruptBCFError, NotBCFError, HeaderError
        A file is not a readable BCF.
    OutputWriteError
        A worker could not write its segment.
    """

    segments = [None if segment_dir is None else segment_dir / f"part-{i:06d}" for i in range(len(partitions))]
    results = _run_scans(partitions, executor, segments, progress, facts)
    by_file: dict[str, list[int]] = {}
    for i, p in enumerate(partitions):
        by_file.setdefault(p.path, []).append(i)
    out: list[Scanned] = []
    for path, indices in by_file.items():
        out.extend(_file_scans(path, [(partitions[i], results[i], segments[i]) for i in indices], facts))
    return out


PartitionOutcome = PartitionScan | CorruptBCFError | None


def _run_scans(
    partitions: list[Partition],
    executor: concurrent.futures.Executor,
    segments: list[Path | None],
    progress: bool | None,
    facts: Facts,
) -> list[PartitionOutcome]:
    """Each partition's scan, or the CorruptBCFError it ended with, in partition order."""
    file_sizes = {p.path: source_size(p.path, p.storage_options) for p in partitions}
    sizes = [_partition_bytes(p, file_sizes[p.path]) for p in partitions]

    def new_bar() -> tqdm:
        return byte_bar("scan", sum(sizes), progress)

    # In a pool, the bar is made once the workers are started: tqdm's monitor thread
    # must not exist at a fork. Inline, tasks run as they are submitted.
    bar = new_bar() if isinstance(executor, InlineExecutor) else None
    futures = {}
    with signals_held() if bar is None else contextlib.nullcontext():  # a pool forks its workers here
        for i, p in enumerate(partitions):
            futures[executor.submit(_scan_task, p, segments[i], facts)] = i
            if bar is not None:
                bar.update(sizes[i])
    inline_bar, bar = bar, bar or new_bar()
    results: list[PartitionOutcome] = [None] * len(partitions)
    try:
        for future in concurrent.futures.as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except CorruptBCFError as e:
                results[i] = e
            if inline_bar is None:
                bar.update(sizes[i])
    finally:
        for future in futures:
            future.cancel()
        bar.close()
    return results


def _file_scans(
    path: str, parts: list[tuple[Partition, PartitionOutcome, Path | None]], facts: Facts = "records"
) -> list[Scanned]:
    """One file's partitions as scanned, or the file scanned again whole (into its first
    partition's segment) when they do not join up. (Counted partitions have no block
    table to check that by: each ending exactly at the next one's first record, or
    failing, is what joins them, a partition that ends inside a record failing.)"""
    scans = [r for _, r, _ in parts if isinstance(r, PartitionScan)]
    errors = [r for _, r, _ in parts if isinstance(r, CorruptBCFError)]
    if errors and len(parts) == 1:
        raise errors[0]
    if len(scans) == len(parts) and (facts == "counts" or _joined_up(scans, [p for p, _, _ in parts])):
        return [(p, scan, segment) for (p, _, segment), scan in zip(parts, scans)]
    logger.warning("%s: partitions did not meet at record boundaries; scanning it whole", path)
    for _, _, segment in parts[1:]:
        if segment is not None:
            segment.unlink(missing_ok=True)
    whole, first = Partition(path, storage_options=parts[0][0].storage_options), parts[0][2]
    return [(whole, _scan_task(whole, first, facts), first)]


def _partition_bytes(p: Partition, size: int) -> int:
    """Compressed bytes a partition spans (of its file's ``size``), for the progress bar."""
    lo = p.start.block_offset if p.start else 0
    hi = p.end.block_offset if p.end else size
    return max(0, hi - lo)


def _joined_up(scans: list[PartitionScan], partitions: list[Partition]) -> bool:
    """Whether each partition ends where the next one's first record starts."""
    if len(scans) == 1:
        return True
    starts = _block_stream_starts(scans)
    position = scans[0].file_header.size + scans[0].stream_length
    for scan, part in zip(scans[1:], partitions[1:]):
        assert part.start is not None  # only a file's first partition starts at its first record
        begin = starts[part.start.block_offset] + part.start.within_block
        if begin != position:
            return False
        position = begin + scan.stream_length
    return True


def _file_blocks(scans: list[PartitionScan]) -> np.ndarray:
    """The blocks of one file, from its partitions' scans: (offset, csize, isize), sorted."""
    blocks = np.concatenate([s.blocks for s in scans])
    _, first = np.unique(blocks[:, 0], return_index=True)
    return blocks[np.sort(first)]


def _block_stream_starts(scans: list[PartitionScan]) -> dict[int, int]:
    """Stream offset of each block's first inflated byte, by the block's file offset."""
    blocks = _file_blocks(scans)
    starts = np.concatenate([[0], np.cumsum(blocks[:, 2])[:-1]])
    return dict(zip(blocks[:, 0].tolist(), starts.tolist()))


def check_compatible(headers: list[tuple[str, BCFHeader]]) -> None:
    """Refuse files whose records cannot be read with the first file's header.

    Parameters
    ----------
    headers : list of (str, BCFHeader)
        Each file's name and header, the first file first.

    Raises
    ------
    HeaderError
        Naming the first file that differs and how.
    """
    first_path, first = headers[0]
    for path, header in headers[1:]:
        problems = compatibility_problems(first, header)
        if problems:
            more = f" (and {len(problems) - 1} more differences)" if len(problems) > 1 else ""
            raise HeaderError(
                path,
                f"cannot join {first_path} in one store: {problems[0]}{more}",
                hint="files indexed together must have the same samples, contigs and field definitions, "
                "as files split from one BCF by region do; bcftools concat can join others first",
            )


def _files_checked(scanned: list[Scanned]) -> dict[str, list[Scanned]]:
    """Partition scans grouped by file, in order, the files' headers checked compatible."""
    files: dict[str, list[Scanned]] = {}
    for item in scanned:
        files.setdefault(item[0].path, []).append(item)
    check_compatible([(path, items[0][1].file_header) for path, items in files.items()])
    return files


def merge(scanned: list[Scanned], chunk_length: int, lead: int = 0) -> Merged:
    """Fold partition scans into what one serial scan of their records learns.

    Parameters
    ----------
    scanned : list of (Partition, PartitionScan, Path or None)
        In file and record order, as :func:`scan_all` returns them.
    chunk_length : int
        Records per variants chunk.
    lead : int
        Records of the first chunk that are already stored (appending to a store whose
        last chunk is partial): the records complete it first.

    Returns
    -------
    Merged
        The merged scan, the source pieces the BGZF cache is assembled from and the
        segments the raw cache is joined from, in stream order.

    Raises
    ------
    HeaderError
        The files' headers are not compatible (:func:`check_compatible`).
    """
    files = _files_checked(scanned)
    first_scan = scanned[0][1]
    summary = RecordSummary(chunk_length, lead)
    first_path = scanned[0][0].path
    info_stats = new_stats(first_scan.info_stats.shape[0])
    format_stats = new_stats(first_scan.format_stats.shape[0])
    pieces: list[Piece] = []
    merged_end = 0  # merged stream offset where the next file's records go
    for file_index, (path, items) in enumerate(files.items()):
        scans = [scan for _, scan, _ in items]
        header_size = scans[0].file_header.size
        # A file's own stream offset s lands at s + shift in the merged stream: the first
        # file keeps its header, later files' headers are dropped.
        shift = 0 if file_index == 0 else merged_end - header_size
        starts = _block_stream_starts(scans)
        for part, scan, _ in items:
            first_byte = 0 if part.start is None else starts[part.start.block_offset] + part.start.within_block
            rec = scan.records
            assert rec is not None, "merge() takes every record's facts; count_merge() counted ones"
            summary.add(
                rec["offset"] + (first_byte + shift),
                rec["chrom"],
                rec["pos"],
                rec["rlen"],
                rec["n_allele"],
                rec["ploidy"],
            )
            fold_stats(info_stats, scan.info_stats)
            fold_stats(format_stats, scan.format_stats)
        blocks = _file_blocks(scans)
        for offset, csize, isize in blocks.tolist():
            block_start = starts[offset]
            lo = 0 if file_index == 0 else max(0, header_size - block_start)
            if isize == 0 or lo >= isize:
                continue  # empty (the EOF marker), or wholly inside a dropped header
            pieces.append(Piece(path, offset, csize, isize, lo, isize, block_start + lo + shift))
        merged_end = int(blocks[:, 2].sum()) + shift
    result = ScanResult(
        header=first_scan.file_header,
        stream_size=merged_end,
        compressed=all(scan.compressed for _, scan, _ in scanned),
        has_eof_block=all(items[-1][1].has_eof_block for items in files.values()),
        info_stats=info_stats,
        format_stats=format_stats,
        **summary.arrays(),
    )
    segments = [
        # A file's first partition holds its header: the merged stream keeps the first file's only.
        Segment(seg, scan.file_header.size if part.start is None and part.path != first_path else 0)
        for part, scan, seg in scanned
        if seg is not None
    ]
    return Merged(result, pieces, segments)


# How far past a worker's share of the bytes the largest file may be, read whole.
SHARE_SLACK = 1.25


def indexed_partitions(paths: Sequence[str], workers: int) -> list[CountedPartition] | None:
    """Each contig of each file as one partition, counted by the file's CSI index (its
    pseudo-bins: each contig's first record and its records), when every file is local
    with a usable index and no contig holds much more than one worker's share of the bytes
    (so whole contigs keep the workers busy) nor more than a partition may
    (``MAX_PARTITION_BYTES``): the first phase would then only count what the indexes
    count already, reading every record once more. None otherwise.

    A count the index got wrong is caught by the task reading the records (it counts
    what it reads), which fails the run; the caller then counts by scanning
    (:func:`vcfvirtual.cache.write.write_cache_partitioned`)."""
    if any(is_url(p) for p in paths):
        return None
    units: list[tuple[str, RecordStart, RecordStart | None, int, int]] = []  # path, start, end, count, bytes
    for path in paths:
        contigs = csi_contig_records(path)
        if contigs is None:
            return None
        size = os.path.getsize(path)
        ends: list[RecordStart | None] = [c.start for c in contigs[1:]] + [None]
        for contig, end in zip(contigs, ends):
            span = (end.block_offset if end is not None else size) - contig.start.block_offset
            units.append((path, contig.start, end, contig.count, span))
        if not contigs:  # no records: still a source, its header checked
            units.append((path, RecordStart(0, 0), None, 0, 0))
    largest, total = max(u[4] for u in units), sum(u[4] for u in units)
    # Whole contigs take as long as the largest; counting first then cutting even runs
    # costs ~1.4x the CPU of one pass (a second inflate, measured on GT-only cohorts):
    # whole contigs are faster unless the largest is well past a worker's share.
    if largest * workers > SHARE_SLACK * total or largest > MAX_PARTITION_BYTES:
        return None
    out = []
    first_index = 0
    for path, start, end, count, _ in units:
        out.append(CountedPartition(path, start, end, first_index, count))
        first_index += count
    logger.info(
        "%d files counted by their CSI indexes: %d records in %d contigs, no counting scan",
        len(paths),
        first_index,
        len(out),
    )
    return out


def counted_merge(
    header: BCFHeader,
    partitions: list[CountedPartition],
    chunk_length: int,
    *,
    stream_size: int = 0,
    compressed: bool = True,
    has_eof_block: bool = True,
) -> Merged:
    """The store's scan before its tasks run, from partitions counted (by their indexes,
    or by :func:`count_merge`'s first phase): its records' number. The tasks learn the
    rest (:class:`~vcfvirtual.scan.results.RunFacts`). ``stream_size`` (0: not learnt),
    ``compressed`` and ``has_eof_block`` are what the count saw; nothing past the tasks
    reads them (a CSI index is of a BGZF file; the columns cache copies no block)."""
    n_keys = stats_keys(header)
    result = ScanResult(
        header=header,
        stream_size=stream_size,
        chunk_length=chunk_length,
        num_records=sum(p.n_records for p in partitions),
        chunk_offsets=np.empty(0, np.int64),  # not known here: the tasks find their chunks' records
        region_rows=np.empty((0, REGION_COLUMNS), np.int64),  # made by the tasks
        pos_range=(0, 0),
        rlen_range=(0, 0),
        max_alleles=0,
        max_ploidy=0,
        compressed=compressed,
        has_eof_block=has_eof_block,
        info_stats=new_stats(n_keys),
        format_stats=new_stats(n_keys),
    )
    return Merged(result, [], [], partitions)


def count_merge(scanned: list[Scanned], chunk_length: int) -> Merged:
    """Fold counted partition scans (``facts="counts"``: records hopped over, only
    counted) into the partitions in record order, and the store's scan but what its tasks
    learn (:func:`counted_merge`): what the caller keeps grows with the partitions, not
    the records.

    Raises
    ------
    HeaderError
        The files' headers are not compatible (:func:`check_compatible`).
    """
    files = _files_checked(scanned)
    partitions: list[CountedPartition] = []
    first_index = 0
    for part, scan, _ in scanned:
        assert scan.counts is not None and scan.first_record is not None, "count_merge() takes counted scans"
        partitions.append(
            CountedPartition(part.path, scan.first_record, part.end, first_index, scan.counts.num_records)
        )
        first_index += scan.counts.num_records
    header = scanned[0][1].file_header
    return counted_merge(
        header,
        partitions,
        chunk_length,
        stream_size=header.size + sum(scan.stream_length for _, scan, _ in scanned),
        compressed=all(scan.compressed for _, scan, _ in scanned),
        has_eof_block=all(items[-1][1].has_eof_block for items in files.values()),
    )
