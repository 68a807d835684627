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
from typing import BinaryIO

import numpy as np
from tqdm.auto import tqdm
from vcfvirtual_codec.bcf import bgzf, records

from ..bcf.csi import RecordStart
from ..bcf.header import BCF_PREFIX_SIZE, BCFHeader, classify_prefix, parse_header_text, read_prefix
from ..errors import CorruptBCFError, HeaderError, NotBCFError
from .kernel import _scan_kernel, declared_kinds, new_stats
from .results import PartitionScan, RecordCollector, RecordSummary, ScanResult

logger = logging.getLogger(__name__)

# Inflated bytes gathered before one call of the record kernel.
SCAN_BATCH = 8 * 1024 * 1024


def _open_stream(fileobj: BinaryIO, path, threads: int) -> tuple[Iterator[tuple], bool, Callable[[], bool]]:
    """``(compressed block or None, inflated bytes)`` pairs over a BGZF or uncompressed
    BCF, plus whether it is compressed.

    The third value tells, once the iterator is exhausted, whether the BGZF EOF block
    was the last block.
    """
    head = fileobj.read(2)
    fileobj.seek(0)
    if not head:
        raise NotBCFError(path, "file is empty")
    if head == bgzf.GZIP_MAGIC:
        state = {"last_empty": False}

        def inflated():
            for block in bgzf.read_blocks(fileobj, path, threads=threads):
                state["last_empty"] = not block.data
                yield block.raw, block.data

        return inflated(), True, lambda: state["last_empty"]

    def raw():
        while chunk := fileobj.read(bgzf.READ_SIZE):
            yield None, chunk

    return raw(), False, lambda: True


class _RecordAccumulator:
    """Runs the record kernel over staged batches and folds what it finds per chunk."""

    def __init__(self, header: BCFHeader, path, summary, sink=None, base: int | None = None):
        self.path = path
        self.summary = summary
        # A sink that lays records out by chunk (the BGZF cache) is told where records
        # start, and how far the scan has got (every record before that is known).
        self.on_records = getattr(sink, "records_scanned", None)
        self.on_scanned_to = getattr(sink, "scanned_to", None)
        self.n_samples = len(header.samples)
        self.n_contigs = len(header.contigs)
        self.gt_key = header.gt_key
        # Per dictionary key: (max values per vector, min int, max int), as bio2zarr summarises.
        n_keys = max([f.key for f in (*header.info, *header.formats)] + list(header.filter_keys) + [0]) + 1
        self.info_stats = new_stats(n_keys)
        self.fmt_stats = new_stats(n_keys)
        self.header = header
        self.declared = declared_kinds(header, n_keys)
        # htslib replaces an rlen of 2^31 or more (negative as int32) from REF and
        # INFO/END, which the scan reproduces, and from SVLEN and FORMAT/LEN, which it
        # does not: with those in the header, such a record is refused.
        self.rlen_fixup = (header.end_key, any(f.name in ("SVLEN", "LEN") for f in (*header.info, *header.formats)))
        # Inflated bytes are copied once, into this stage, and scanned in place; the
        # tail of a record cut by the stage's end moves to its front.
        self.stage = np.empty(SCAN_BATCH + bgzf.MAX_BLOCK_SIZE, dtype=np.uint8)
        self.fill = 0
        self.base = header.size if base is None else base  # stream offset of stage[0]

    def add(self, data) -> None:
        """Stage inflated bytes, scanning the staged records whenever the stage fills."""
        n = len(data)
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
        buf = self.stage[: self.fill]
        consumed_total = 0
        while True:
            view = buf[consumed_total:]
            # Capacity: no record is shorter than 32 bytes.
            cap = max(1, view.shape[0] // 32 + 1)
            out = [np.empty(cap, np.int64)] + [np.empty(cap, np.int32) for _ in range(5)]
            k, consumed, err, err_pos, err_key = _scan_kernel(
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
                raise CorruptBCFError(
                    self.path,
                    f"bad BCF record in the uncompressed stream: {records.ERROR_TEXT[err]}"
                    + self._key_detail(err, int(err_key)),
                    offset=self.base + consumed_total + int(err_pos),
                    hint="offset is in the uncompressed stream",
                )
            self.summary.add(*(arr[:k] for arr in out))
            if self.on_records is not None:
                self.on_records(out[0][:k])
            consumed_total += int(consumed)
            if k < cap:
                break
        rest = self.fill - consumed_total
        self.stage[:rest] = self.stage[consumed_total : self.fill].copy()
        self.fill = rest
        self.base += consumed_total
        if self.on_scanned_to is not None:
            self.on_scanned_to(self.base)
        if final and rest:
            raise CorruptBCFError(
                self.path,
                f"file ends inside a BCF record ({rest} bytes of an incomplete record)",
                offset=self.base,
                hint="offset is in the uncompressed stream; the file is truncated",
            )


class _HeaderReader:
    """Gathers a stream's first bytes until the whole BCF header has arrived."""

    def __init__(self, path):
        self.path = path
        self.head = b""
        self.header_bytes = b""

    def feed(self, data) -> tuple[BCFHeader | None, bytes]:
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
        self.header_bytes = head[: BCF_PREFIX_SIZE + l_text]
        return header, head[BCF_PREFIX_SIZE + l_text :]

    def fail(self):
        """The stream ended before the header did."""
        if not self.head:
            raise NotBCFError(self.path, "file is empty (no BCF data)")
        classify_prefix(self.head[:16], self.path)
        raise HeaderError(self.path, "file ends inside the BCF header (truncated)")


def scan_bcf(
    path: str | os.PathLike,
    chunk_length_for: Callable[[BCFHeader], int],
    sink=None,
    progress: bool | None = None,
    threads: int = 0,
    fileobj: BinaryIO | None = None,
) -> ScanResult:
    """Inflate and walk ``path`` once, handing every block to ``sink``.

    ``chunk_length_for(header)`` gives the records per variants chunk, which the scan
    must know to reduce what it learns per chunk (and the BGZF cache to lay chunks out).

    A sink with ``add_block(compressed_block_or_None, inflated)`` gets each block as read
    (the chunk-aligned cache reuses the compressed bytes); any other sink is a binary
    file that gets the uncompressed stream. ``threads`` > 0 inflate blocks on worker
    threads ahead of the scan. Off by default: on the 2-core benchmark machine it gained
    nothing (0.31 s serial, 0.30-0.33 s with 1-3 threads for a 21 MB BCF), as the
    per-block Python work between GIL-free inflates serialises the threads. ``fileobj``
    reads the BCF from an open file (e.g. fsspec's, for a URL), closed when done;
    ``path`` then only names it in messages.
    """
    path = os.fspath(path)
    if fileobj is None:
        try:
            fileobj = open(path, "rb")
        except OSError as e:
            raise NotBCFError(path, f"cannot open: {e.strerror}") from None
        total = os.fstat(fileobj.fileno()).st_size
    else:
        total = getattr(fileobj, "size", None) or 0  # an fsspec file knows its size
    with fileobj:
        stream, compressed, ended_with_eof = _open_stream(fileobj, path, threads)
        add_block = getattr(sink, "add_block", None)
        write = None if add_block is not None or sink is None else sink.write
        bar = tqdm(
            total=total, unit="B", unit_scale=True, desc="index", disable=None if progress is None else not progress
        )
        reader = _HeaderReader(path)
        header = None
        acc = None
        scanned_at = 0  # acc.base when the progress bar last moved
        for raw_block, data in stream:
            if add_block is not None:
                add_block(raw_block, data)
            elif write is not None:
                write(data)
            bar.update(len(data) if not compressed else 0)
            if header is None:
                header, data = reader.feed(data)
                if header is None:
                    continue
                chunk_length = int(chunk_length_for(header))
                if chunk_length < 1:
                    raise ValueError(f"variants chunk length must be at least 1, got {chunk_length}")
                if hasattr(sink, "header_parsed"):
                    sink.header_parsed(header, chunk_length)
                acc = _RecordAccumulator(header, path, RecordSummary(chunk_length), sink)
            acc.add(data)
            if compressed and acc.base != scanned_at:
                scanned_at = acc.base
                bar.n = fileobj.tell()
                bar.refresh()
        if header is None:
            reader.fail()
        acc.scan_staged(final=True)
        bar.n = total
        bar.close()
        has_eof = ended_with_eof()
        if compressed and not has_eof:
            logger.warning("%s: no BGZF EOF block at the end; every record read is whole", path)
        return ScanResult(
            header=header,
            stream_size=acc.base,
            compressed=compressed,
            has_eof_block=has_eof,
            info_stats=acc.info_stats,
            format_stats=acc.fmt_stats,
            **acc.summary.arrays(),
        )


def read_header(path) -> BCFHeader:
    """The header of a BCF, reading only the blocks that hold it."""
    path = os.fspath(path)
    with open(path, "rb") as fileobj:
        stream, _, _ = _open_stream(fileobj, path, 0)
        reader = _HeaderReader(path)
        for _raw, data in stream:
            header, _ = reader.feed(data)
            if header is not None:
                return header
        reader.fail()


def scan_partition(
    path: str | os.PathLike,
    start: RecordStart | None = None,
    end: RecordStart | None = None,
    segment_path: str | os.PathLike | None = None,
) -> PartitionScan:
    """Scan the records of ``path`` from ``start`` (default: the first record) up to, not
    including, ``end`` (default: the end of the file), with the same checks as
    :func:`scan_bcf`. ``segment_path`` receives the partition's record bytes, inflated.

    A partition must end exactly where a record starts: if ``end`` is inside a record, a
    :class:`CorruptBCFError` says the data ends inside a record. Runs in worker processes.
    """
    path = os.fspath(path)
    try:
        fileobj = open(path, "rb")
    except OSError as e:
        raise NotBCFError(path, f"cannot open: {e.strerror}") from None
    collector = RecordCollector()
    blocks: list[tuple[int, int, int]] = []
    with fileobj, contextlib.ExitStack() as stack:
        segment = stack.enter_context(open(segment_path, "wb")) if segment_path is not None else None
        stream, compressed, _ = _open_stream(fileobj, path, 0)
        reader = _HeaderReader(path)
        header = None
        if start is not None:
            if not compressed:
                raise ValueError("only a BGZF-compressed BCF can start a partition inside the file")
            # The header is read from the file's first blocks, then the scan moves to start.
            for _raw, data in stream:
                header, _ = reader.feed(data)
                if header is not None:
                    break
            else:
                reader.fail()
            fileobj.seek(start.block_offset)
            stream = ((b.raw, b.data, b.offset) for b in bgzf.read_blocks(fileobj, path, start=start.block_offset))
        else:
            stream = _with_offsets(stream)
        # Offsets count from the partition's first record, or, for a partition that starts
        # the file, from the file's first byte (so errors name true stream offsets).
        acc = None
        if header is not None:
            acc = _RecordAccumulator(header, path, collector, sink=None, base=0)
        length = 0
        for raw_block, data, offset in stream:
            blocks.append((offset, len(raw_block) if raw_block is not None else 0, len(data)))
            lo = start.within_block if start is not None and offset == start.block_offset else 0
            hi = len(data)
            if end is not None and offset >= end.block_offset:
                if offset > end.block_offset or end.within_block == 0:
                    blocks.pop()  # wholly after the partition
                    break
                hi = end.within_block
            data = memoryview(data)[lo:hi]
            if acc is None:
                header, data = reader.feed(bytes(data))
                if header is None:
                    continue
                acc = _RecordAccumulator(header, path, collector, sink=None)
            if segment is not None:
                segment.write(data)
            length += len(data)
            acc.add(data)
            if end is not None and offset == end.block_offset:
                break
        if acc is None:
            reader.fail()
        acc.scan_staged(final=True)
    return PartitionScan(
        header=header,
        header_bytes=reader.header_bytes,
        records=collector.arrays(),
        stream_length=length,
        blocks=np.array(blocks, dtype=np.int64).reshape(-1, 3),
        compressed=compressed,
        # As scan_bcf: the file's last block must be BGZF's empty EOF block.
        has_eof_block=not compressed or end is not None or (bool(blocks) and blocks[-1][2] == 0),
        info_stats=acc.info_stats,
        format_stats=acc.fmt_stats,
    )


def _with_offsets(stream):
    """(raw, data, offset) from _open_stream's (raw, data): for BGZF the block's file
    offset, for an uncompressed file the piece's."""
    offset = 0
    for raw, data in stream:
        yield raw, data, offset
        offset += len(raw) if raw is not None else len(data)
