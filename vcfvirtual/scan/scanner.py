"""One pass over a BCF: inflate, parse the header, walk every record.

The pass hands every inflated byte to a sink (the transcode cache) as it goes and keeps
only small per-record facts: the record's offset in the uncompressed stream, CHROM,
POS, rlen, the allele count and the GT ploidy. From those come the chunk byte ranges
and every dimension size the core arrays need, without a second pass.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import BinaryIO, Literal, NamedTuple, NoReturn

import numpy as np
from vcfvirtual_codec.bcf import bgzf, records

from .. import interrupts
from .._progress import byte_bar
from ..bcf.csi import RecordStart
from ..bcf.header import BCF_PREFIX_SIZE, BCFHeader, classify_prefix, parse_header_text, read_prefix
from ..errors import CorruptBCFError, HeaderError, NotBCFError
from ..io.sources import StorageOptions, open_source
from .kernel import count_records, declared_kinds, new_stats, scan_records, stats_keys
from .results import PartitionScan, RecordCollector, RecordCount, RecordSummary, RunWindow, ScanResult
from .sink import FileSink, NullSink, RecordSink, ScanStop, StreamLender

logger = logging.getLogger(__name__)

# Inflated bytes gathered before one call of the record kernel.
SCAN_BATCH = 8 * 1024 * 1024


class StreamPiece(NamedTuple):
    """Bytes of a source as read: a BGZF block, or a run of an uncompressed file."""

    offset: int  # in the file: the block's first compressed byte, or the run's first byte
    raw: bytes | memoryview | None  # the compressed block (None: uncompressed source, or a cut block)
    data: bytes | memoryview  # its inflated bytes (the bytes themselves for an uncompressed source)


# A BGZF source's blocks are handed on as the codec reads them (the same three fields):
# wrapping each of a 2 GB stream's ~32,000 blocks in a StreamPiece was a generator step
# and a tuple per block for nothing.
Piece = StreamPiece | bgzf.Block


def _open_stream(fileobj: BinaryIO, path: str, threads: int, start: int = 0) -> tuple[Iterator[Piece], bool]:
    """The pieces of a BGZF or uncompressed BCF from file offset ``start`` (a block's
    first byte, for BGZF), and whether it is compressed."""
    fileobj.seek(0)
    head = fileobj.read(2)
    if not head:
        raise NotBCFError(path, "file is empty")
    fileobj.seek(start)
    if head == bgzf.GZIP_MAGIC:
        return bgzf.read_blocks(fileobj, path, start=start, threads=threads), True

    def runs() -> Iterator[StreamPiece]:
        offset = start
        while chunk := fileobj.read(bgzf.READ_SIZE):
            yield StreamPiece(offset, None, chunk)
            offset += len(chunk)

    return runs(), False


class _RecordAccumulator:
    """Runs the record kernel over staged batches and folds what it finds per chunk."""

    def __init__(
        self,
        header: BCFHeader,
        path: str,
        summary: RecordFolder,
        sink: RecordSink,
        base: int | None = None,
    ):
        self.path = path
        self.summary = summary
        # The sink is told where records start, and how far the scan has got (every
        # record before that is known): a cache laid out by chunk cuts there.
        self.sink = sink
        self.n_samples = len(header.samples)
        self.n_contigs = len(header.contigs)
        self.gt_key = header.gt_key
        # Per dictionary key: (max values per vector, min int, max int), as bio2zarr summarises.
        n_keys = stats_keys(header)
        self.info_stats = new_stats(n_keys)
        self.fmt_stats = new_stats(n_keys)
        self.header = header
        self.declared = declared_kinds(header, n_keys)
        # htslib replaces an rlen of 2^31 or more (negative as int32) from REF and
        # INFO/END, which the scan reproduces, and from SVLEN and FORMAT/LEN, which it
        # does not: with those in the header, such a record is refused.
        self.rlen_fixup = (header.end_key, any(f.name in ("SVLEN", "LEN") for f in (*header.info, *header.formats)))
        # A sink that keeps the stream itself (the columns writer's window) lends the
        # unscanned bytes to walk in place: each inflated byte is then copied once, into
        # the sink (measured 0.46 s of the index's CPU on cohort A, 2 GB of records, for
        # the second copy). Otherwise inflated bytes are copied into this stage and
        # scanned there; the tail of a record cut by the stage's end moves to its front.
        self.lender: StreamLender | None = sink if isinstance(sink, StreamLender) else None
        self.stage = np.empty(0 if self.lender else SCAN_BATCH + bgzf.MAX_BLOCK_SIZE, dtype=np.uint8)
        self.fill = 0  # bytes not yet walked (in the stage, or the lender's from self.base)
        self.base = header.size if base is None else base  # stream offset of the first of them
        # Where the first record starts in the file, when the scan read the header itself.
        self.first_record: RecordStart | None = None
        self.stopped_at: int | None = None  # where a sink stopped the scan (ScanStop)
        # Counting only (a partition's first phase, handing nothing on): records are
        # hopped over, not checked and summarised (the tasks writing them do that).
        self.counting = isinstance(summary, RecordCount) and isinstance(sink, NullSink)

    def add(self, data: bytes | memoryview) -> None:
        """Stage inflated bytes, scanning the staged records whenever the stage fills."""
        n = len(data)
        if self.lender is not None:  # the sink has them already
            self.fill += n
            if self.fill >= SCAN_BATCH:
                self.scan_staged()
            return
        if self.fill + n > self.stage.shape[0]:
            self.scan_staged()
            if self.fill + n > self.stage.shape[0]:
                # One record longer than the stage: grow it so the record fits whole.
                grown = np.empty(max(2 * self.stage.shape[0], self.fill + n), dtype=np.uint8)
                grown[: self.fill] = self.stage[: self.fill]
                self.stage = grown
        self.stage[self.fill : self.fill + n] = np.frombuffer(data, dtype=np.uint8)
        self.fill += n

    def _key_detail(self, err: int, key: int) -> str:
        """Which key an unknown-key or type error concerns, as the header names it."""
        if key < 0 or err not in (
            records.ERR_UNKNOWN_KEY,
            records.ERR_UNKNOWN_FILTER,
            records.ERR_TYPE_MISMATCH,
            records.ERR_NULL_VALUES,
        ):
            return ""
        h = self.header
        names = {f.key: f"{f.category}/{f.name} (Type={f.type})" for f in (*h.info, *h.formats)}
        names.update({k: f"FILTER/{name}" for k, name in zip(h.filter_keys, h.filters)})
        return f": dictionary key {key}" + (f", declared as {names[key]}" if key in names else ", declared nowhere")

    def scan_staged(self, final: bool = False) -> None:
        """Walk the whole records staged so far; keep a trailing partial record."""
        buf = self.stage[: self.fill] if self.lender is None else self.lender.unscanned(self.base)
        if buf.shape[0] != self.fill:
            raise RuntimeError(f"the sink lent {buf.shape[0]} unscanned bytes, the scan expected {self.fill}")
        consumed_total = self._count(buf) if self.counting else self._scan(buf)
        rest = self.fill - consumed_total
        if self.lender is None:
            self.stage[:rest] = self.stage[consumed_total : self.fill].copy()
        self.fill = rest
        self.base += consumed_total
        self.sink.scanned_to(self.base)
        if final and rest:
            raise CorruptBCFError(
                self.path,
                f"file ends inside a BCF record ({rest} bytes of an incomplete record)",
                offset=self.base,
                hint="offset is in the uncompressed stream; the file is truncated",
            )

    def _scan(self, buf: np.ndarray) -> int:
        """Every record checked, its facts folded and handed on: the bytes consumed."""
        consumed_total = 0
        while True:
            view = buf[consumed_total:]
            # Capacity: no record is shorter than 32 bytes.
            cap = max(1, view.shape[0] // 32 + 1)
            chrom, pos, rlen, n_allele, ploidy = (np.empty(cap, np.int32) for _ in range(5))
            out = (np.empty(cap, np.int64), chrom, pos, rlen, n_allele, ploidy)
            k, consumed, err, err_pos, err_key = scan_records(
                view,
                self.n_samples,
                self.n_contigs,
                self.gt_key,
                self.base + consumed_total,
                *out,
                self.info_stats,
                self.fmt_stats,
                *self.declared,
                *self.rlen_fixup,
            )
            if err != records.OK:
                self._refuse(int(err), consumed_total + int(err_pos), int(err_key))
            self.summary.add(*(arr[:k] for arr in out))
            self.sink.records_scanned(out[0][:k])
            consumed_total += int(consumed)
            if k < cap:
                return consumed_total

    def _count(self, buf: np.ndarray) -> int:
        """The records only counted (a partition's first phase): the bytes consumed."""
        assert isinstance(self.summary, RecordCount)
        k, consumed, err, err_pos = count_records(buf, self.n_samples)
        if err != records.OK:
            self._refuse(int(err), int(err_pos), -1)
        self.summary.num_records += int(k)
        return int(consumed)

    def _refuse(self, err: int, at: int, key: int) -> NoReturn:
        raise CorruptBCFError(
            self.path,
            f"bad BCF record in the uncompressed stream: {records.ERROR_TEXT[err]}" + self._key_detail(err, key),
            offset=self.base + at,
            hint="offset is in the uncompressed stream",
        )


class _HeaderReader:
    """Gathers a stream's first bytes until the whole BCF header has arrived."""

    def __init__(self, path: str):
        self.path = path
        self.head = b""

    def feed(self, data: bytes | memoryview) -> tuple[BCFHeader | None, bytes]:
        """(header, the bytes after it) once the header is whole, else (None, b"")."""
        self.head += data
        head = self.head
        if len(head) < 16:
            return None, b""
        classify_prefix(head[:16], self.path)
        if len(head) < BCF_PREFIX_SIZE:
            return None, b""
        l_text = read_prefix(head, self.path)
        if len(head) < BCF_PREFIX_SIZE + l_text:
            return None, b""
        header = parse_header_text(
            head[BCF_PREFIX_SIZE : BCF_PREFIX_SIZE + l_text], self.path, BCF_PREFIX_SIZE + l_text
        )
        logger.info("%s: %d samples, %d contigs", self.path, len(header.samples), len(header.contigs))
        self.head = b""
        return header, head[BCF_PREFIX_SIZE + l_text :]

    def fail(self) -> NoReturn:
        """The stream ended before the header did."""
        if not self.head:
            raise NotBCFError(self.path, "file is empty (no BCF data)")
        classify_prefix(self.head[:16], self.path)
        raise HeaderError(self.path, "file ends inside the BCF header (truncated)")


RecordFolder = RecordSummary | RecordCollector | RecordCount | RunWindow


def _walk(
    path: str,
    pieces: Iterator[Piece],
    sink: RecordSink,
    begin: Callable[[BCFHeader], RecordFolder],
    header: BCFHeader | None = None,
    on_piece: Callable[[Piece, int], None] | None = None,
) -> tuple[BCFHeader, _RecordAccumulator]:
    """The one loop of every scan: hand each piece to ``sink``, read the header from the
    first ones (unless ``header`` is known: a partition inside the file, whose stream
    offsets then count from its first byte), and walk the records of the rest.

    ``begin(header)`` gives what the record facts are folded into; ``on_piece(piece,
    stream offset scanned to)`` follows the progress."""
    reader = _HeaderReader(path)
    acc = None if header is None else _RecordAccumulator(header, path, begin(header), sink, base=0)
    try:
        for piece in pieces:
            sink.add_block(piece.raw, piece.data)
            data = piece.data
            if acc is None:
                header, data = reader.feed(data)
                if header is not None:
                    acc = _RecordAccumulator(header, path, begin(header), sink)
                    acc.first_record = RecordStart(piece.offset, len(piece.data) - len(data))
            if acc is not None:
                acc.add(data)
            if on_piece is not None:
                on_piece(piece, 0 if acc is None else acc.base)
        if acc is None or header is None:
            reader.fail()
        acc.scan_staged(final=True)
    except ScanStop as stop:  # the sink has what it wanted: what was walked is the scan
        assert acc is not None and header is not None
        acc.stopped_at = stop.end
    return header, acc


def _open_input(path: str, storage_options: StorageOptions = None) -> BinaryIO:
    return open_source(path, storage_options)


def scan_bcf(
    path: str | os.PathLike,
    chunk_length_for: Callable[[BCFHeader], int],
    sink: RecordSink | None = None,
    progress: bool | None = None,
    threads: int = 0,
    fileobj: BinaryIO | None = None,
) -> ScanResult:
    """Inflate and walk a BCF once, handing every block to ``sink``.

    Parameters
    ----------
    path : str or os.PathLike
        The BCF (BGZF-compressed or not); with ``fileobj``, only its name in messages.
    chunk_length_for : callable
        ``chunk_length_for(header)`` gives the records per variants chunk, which the scan
        must know to reduce what it learns per chunk (and a sink to lay chunks out).
    sink : RecordSink, optional
        Gets every inflated byte and the record offsets (:mod:`vcfvirtual.scan.sink`);
        :class:`~vcfvirtual.scan.sink.FileSink` writes the uncompressed stream.
    progress : bool, optional
        Show a progress bar (None: when on a terminal).
    threads : int
        Inflate blocks on that many worker threads ahead of the scan. Off by default: on
        the 2-core benchmark machine it gained nothing (0.31 s serial, 0.30-0.33 s with
        1-3 threads for a 21 MB BCF), as the per-block Python work between GIL-free
        inflates serialises the threads.
    fileobj : file object, optional
        Read the BCF from this open file (e.g. fsspec's, for a URL), closed when done.

    Returns
    -------
    ScanResult
        What the pass learnt, reduced per variants chunk.

    Raises
    ------
    NotBCFError, HeaderError, CorruptBCFError
        The file cannot be read, is not a BCF, or a record is invalid (the error names
        its offset in the uncompressed stream).
    ValueError
        ``chunk_length_for`` gave less than 1.
    """
    path = os.fspath(path)
    if fileobj is None:
        fileobj = _open_input(path)
        total = os.fstat(fileobj.fileno()).st_size
    else:
        total = getattr(fileobj, "size", None) or 0  # an fsspec file knows its size
    sink = NullSink() if sink is None else sink
    with fileobj:
        pieces, compressed = _open_stream(fileobj, path, threads)
        last_piece: list[bytes | memoryview] = [b"x"]  # the last block read: BGZF's EOF block is empty

        def begin(header: BCFHeader) -> RecordSummary:
            chunk_length = int(chunk_length_for(header))
            if chunk_length < 1:
                raise ValueError(f"variants chunk length must be at least 1, got {chunk_length}")
            sink.header_parsed(header, chunk_length)
            return RecordSummary(chunk_length)

        bar = byte_bar("scan", total, progress)

        def on_piece(piece: Piece, scanned_to: int) -> None:
            # The compressed bytes handed to the scan, block by block: neither the file's
            # read position (it jumps by 4 MiB reads) nor the records scanned (they are
            # walked a staged window at a time) moves smoothly. update() redraws at most
            # every 0.1 s, so a call per block costs nothing that shows.
            last_piece[0] = piece.data
            bar.update(piece.offset + len(piece.raw or b"") - bar.n if compressed else len(piece.data))
            interrupts.raise_pending()  # a signal whose raise Python swallowed stops the scan here

        header, acc = _walk(path, pieces, sink, begin, on_piece=on_piece)
        if total:
            bar.update(total - bar.n)  # the EOF block and any bytes after the last record
        bar.close()
        has_eof = not compressed or not last_piece[0]
        if not has_eof:
            logger.warning("%s: no BGZF EOF block at the end; every record read is whole", path)
        assert isinstance(acc.summary, RecordSummary)
        return ScanResult(
            header=header,
            stream_size=acc.base,
            compressed=compressed,
            has_eof_block=has_eof,
            info_stats=acc.info_stats,
            format_stats=acc.fmt_stats,
            **acc.summary.arrays(),
        )


def read_header(path: str | os.PathLike, storage_options: StorageOptions = None, offset: int = 0) -> BCFHeader:
    """The header of a BCF, reading only the blocks that hold it.

    Parameters
    ----------
    path : str or os.PathLike
        The BCF (or its URL).
    storage_options : mapping, optional
        fsspec options for a URL.
    offset : int
        Where an uncompressed BCF stream starts in the file: a columns cache's first part
        holds the store's header after its own magic.

    Returns
    -------
    BCFHeader
        Its parsed header.

    Raises
    ------
    NotBCFError, HeaderError
        The file cannot be read, is not a BCF, or its header is damaged.
    """
    return _header_and_first_record(os.fspath(path), storage_options, offset)[0]


def read_first_record(path: str | os.PathLike, storage_options: StorageOptions = None) -> tuple[BCFHeader, RecordStart]:
    """A BCF's header and where its first record starts (the block holding the header's
    end, and the offset there), reading only the blocks that hold the header.

    Raises
    ------
    NotBCFError, HeaderError
        The file cannot be read, is not a BCF, or its header is damaged.
    """
    return _header_and_first_record(os.fspath(path), storage_options, 0)


def _header_and_first_record(path: str, storage_options: StorageOptions, offset: int) -> tuple[BCFHeader, RecordStart]:
    with _open_input(path, storage_options) as fileobj:
        pieces, _ = _open_stream(fileobj, path, 0, offset)
        reader = _HeaderReader(path)
        for piece in pieces:
            header, rest = reader.feed(piece.data)
            if header is not None:
                return header, RecordStart(piece.offset, len(piece.data) - len(rest))
        reader.fail()


def header_bytes(path: str | os.PathLike, size: int, storage_options: StorageOptions = None) -> bytes:
    """The first ``size`` bytes of a BCF's uncompressed stream (its header as stored,
    ``size`` being :attr:`BCFHeader.size`), inflating only the blocks that hold them.

    Raises
    ------
    NotBCFError, HeaderError
        The file cannot be read, or its stream is shorter than ``size``.
    """
    path = os.fspath(path)
    out = bytearray()
    with _open_input(path, storage_options) as fileobj:
        pieces, _ = _open_stream(fileobj, path, 0)
        for piece in pieces:
            out += piece.data[: size - len(out)]
            if len(out) == size:
                return bytes(out)
    raise HeaderError(path, "file ends inside the BCF header (truncated)")


def _bounded(
    pieces: Iterator[Piece],
    start: RecordStart | None,
    end: RecordStart | None,
    blocks: list[tuple[int, int, int]],
) -> Iterator[Piece]:
    """The pieces from ``start`` up to, not including, ``end``: the first and last blocks
    cut at the bounds (a cut block has no ``raw``); ``blocks`` gets each block read
    (offset, compressed size or 0, inflated size)."""
    for piece in pieces:
        offset, raw, data = piece
        blocks.append((offset, len(raw) if raw is not None else 0, len(data)))
        lo = start.within_block if start is not None and offset == start.block_offset else 0
        hi = len(data)
        if end is not None and offset >= end.block_offset:
            if offset > end.block_offset or end.within_block == 0:
                blocks.pop()  # wholly after the partition
                return
            hi = end.within_block
        if (lo, hi) != (0, len(data)):
            piece = StreamPiece(offset, None, memoryview(data)[lo:hi])  # a view, not a copy
        yield piece
        if end is not None and offset == end.block_offset:
            return


def scan_partition(
    path: str | os.PathLike,
    start: RecordStart | None = None,
    end: RecordStart | None = None,
    segment_path: str | os.PathLike | None = None,
    sink: RecordSink | None = None,
    storage_options: StorageOptions = None,
    header: BCFHeader | None = None,
    facts: RecordFolder | Literal["records", "counts"] = "records",
) -> PartitionScan:
    """Scan the records of a BCF between two record starts, as :func:`scan_bcf` does.

    Runs in worker processes. A partition must end exactly where a record starts.

    Parameters
    ----------
    path : str or os.PathLike
        The BCF; BGZF-compressed unless the partition is the whole file.
    start, end : RecordStart, optional
        The partition's first record (None: the file's first) and the record after its
        last (None: to the end of the file).
    segment_path : str or os.PathLike, optional
        Receives the partition's stream bytes, inflated: for a partition that starts the
        file, its header too.
    sink : RecordSink, optional
        Gets the partition's bytes and record offsets instead (counted from the
        partition's first byte; its ``header_parsed`` is not called).
    storage_options : mapping, optional
        fsspec options for a URL (read by range requests from ``start`` on).
    header : BCFHeader, optional
        The file's header, when the caller has parsed it already (with ``start``).
    facts : {"records", "counts"} or a folder
        What is kept of the records: every record's facts (``records``: the layouts
        that place records by their offsets), only their number and ranges
        (``counts``: the columns layout's first phase), or folded into the folder given
        (a task writing a run of chunks summarises them itself).

    Returns
    -------
    PartitionScan
        Its records' facts, offsets counted from the partition's first byte (for a
        partition that starts the file, stream offsets).

    Raises
    ------
    CorruptBCFError
        A record is invalid, or ``end`` falls inside a record ("ends inside a record").
    NotBCFError, HeaderError
        The file cannot be read or is not a BCF.
    """
    path = os.fspath(path)
    folder: RecordFolder | RecordCount
    if facts == "records":
        folder = RecordCollector()
    elif facts == "counts":
        folder = RecordCount()
    else:
        folder = facts
    blocks: list[tuple[int, int, int]] = []
    with _open_input(path, storage_options) as fileobj, contextlib.ExitStack() as stack:
        if sink is None:
            sink = NullSink()
        if segment_path is not None:
            sink = FileSink(stack.enter_context(open(segment_path, "wb")))
        if start is None:
            header = None
        elif header is None:
            # The header comes from the file's first blocks, then the scan moves to start
            # (in an uncompressed file, ``start.block_offset`` is one of the runs the
            # file's scan read, READ_SIZE bytes apart).
            header = read_header(path, storage_options)
        pieces, compressed = _open_stream(fileobj, path, 0, 0 if start is None else start.block_offset)
        header, acc = _walk(path, _bounded(pieces, start, end, blocks), sink, lambda _: folder, header)
    header_size = 0 if start is not None else header.size
    counted = isinstance(folder, RecordCount)
    return PartitionScan(
        header=header,
        records=folder.arrays() if isinstance(folder, RecordCollector) else None,
        stream_length=acc.base - header_size,
        blocks=np.array([] if counted else blocks, dtype=np.int64).reshape(-1, 3),
        compressed=compressed,
        # As scan_bcf: the file's last block must be BGZF's empty EOF block.
        has_eof_block=not compressed or end is not None or (bool(blocks) and blocks[-1][2] == 0),
        info_stats=acc.info_stats,
        format_stats=acc.fmt_stats,
        counts=folder.counts() if isinstance(folder, RecordCount) else None,
        first_record=start if start is not None else acc.first_record,
        stopped_at=acc.stopped_at,
    )
