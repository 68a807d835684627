"""One pass over a BCF: inflate, parse the header, walk every record.

The pass hands every inflated byte to a sink (the transcode cache) as it goes and keeps
only small per-record facts: the record's offset in the uncompressed stream, CHROM,
POS, rlen, the allele count and the GT ploidy. From those come the chunk byte ranges
and every dimension size the core arrays need, without a second pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numba
import numpy as np
from tqdm.auto import tqdm
from vcfvirtual_codec import bgzf, records

from .errors import CorruptBCFError, HeaderError, NotBCFError
from .header import BCF_PREFIX_SIZE, BCFHeader, classify_prefix, parse_header_text, read_prefix

logger = logging.getLogger(__name__)

# Inflated bytes gathered before one call of the record kernel.
SCAN_BATCH = 8 * 1024 * 1024
# Columns of a region row: chunk, contig, first POS, last POS, largest end, records.
REGION_COLUMNS = 6


@dataclasses.dataclass(frozen=True)
class ScanResult:
    """What one pass learns of a BCF, reduced per variants chunk as it goes, so memory
    stays flat whatever the number of records."""

    header: BCFHeader
    stream_size: int  # bytes of the uncompressed BCF stream (header + records)
    chunk_length: int  # records per variants chunk the summaries are for
    num_records: int
    chunk_offsets: np.ndarray  # int64, stream offset of each chunk's first record
    region_rows: np.ndarray  # (rows, 6) int64: one per (chunk, contig run), REGION_COLUMNS
    pos_range: tuple[int, int]  # smallest and largest POS, 1-based
    rlen_range: tuple[int, int]
    max_alleles: int
    max_ploidy: int  # GT values per sample (0: no GT anywhere)
    compressed: bool
    has_eof_block: bool
    info_stats: np.ndarray  # (n_keys, 3) int64: max number, min, max of INFO values by key
    format_stats: np.ndarray  # the same for FORMAT values


class RecordSummary:
    """Folds batches of per-record facts into per-chunk ones: chunk start offsets, the
    region index rows and the ranges that size dtypes and dimensions."""

    def __init__(self, chunk_length: int):
        self.chunk_length = chunk_length
        self.num_records = 0
        self.chunk_offsets: list[np.ndarray] = []
        self.region_rows: list[np.ndarray] = []
        self.pos_range = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
        self.rlen_range = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
        self.max_alleles = 0
        self.max_ploidy = 0

    def add(self, offset, chrom, pos, rlen, n_allele, ploidy) -> None:
        k = offset.shape[0]
        if k == 0:
            return
        index = self.num_records + np.arange(k, dtype=np.int64)
        self.num_records += k
        chunk = index // self.chunk_length
        self.chunk_offsets.append(offset[index % self.chunk_length == 0])
        pos1 = pos.astype(np.int64) + 1
        self.pos_range = (min(self.pos_range[0], int(pos1.min())), max(self.pos_range[1], int(pos1.max())))
        self.rlen_range = (min(self.rlen_range[0], int(rlen.min())), max(self.rlen_range[1], int(rlen.max())))
        self.max_alleles = max(self.max_alleles, int(n_allele.max()))
        self.max_ploidy = max(self.max_ploidy, int(ploidy.max()))
        # A region row ends where the chunk or the contig changes.
        last = np.ones(k, dtype=bool)
        last[:-1] = (chunk[1:] != chunk[:-1]) | (chrom[1:] != chrom[:-1])
        ends = np.nonzero(last)[0]
        starts = np.concatenate([[0], ends[:-1] + 1])
        rows = np.stack(
            [
                chunk[starts],
                chrom[starts].astype(np.int64),
                pos1[starts],
                pos1[ends],
                np.maximum.reduceat(pos1 + rlen.astype(np.int64) - 1, starts),
                ends - starts + 1,
            ],
            axis=1,
        )
        if self.region_rows:
            prev = self.region_rows[-1]
            if prev[-1, 0] == rows[0, 0] and prev[-1, 1] == rows[0, 1]:
                # The batch continues the previous batch's last run: one row, not two.
                merged = prev[-1].copy()
                merged[3] = rows[0, 3]
                merged[4] = max(merged[4], rows[0, 4])
                merged[5] += rows[0, 5]
                self.region_rows[-1] = np.concatenate([prev[:-1], merged[None]])
                rows = rows[1:]
        if rows.shape[0]:
            self.region_rows.append(rows)

    def arrays(self) -> dict:
        n = self.num_records
        return dict(
            chunk_length=self.chunk_length,
            num_records=n,
            chunk_offsets=np.concatenate(self.chunk_offsets) if n else np.empty(0, np.int64),
            region_rows=(np.concatenate(self.region_rows) if n else np.empty((0, REGION_COLUMNS), np.int64)),
            pos_range=self.pos_range if n else (0, 0),
            rlen_range=self.rlen_range if n else (0, 0),
            max_alleles=self.max_alleles,
            max_ploidy=self.max_ploidy,
        )


# What the header declares a dictionary key to be, per category (INFO, FORMAT), so the
# scan refuses records that htslib's bcf_record_check would call invalid ("Invalid INFO
# id") and values the codec would refuse at read time: undeclared keys, and values typed
# otherwise than the header's Type. One code per header Type; 0 means not declared.
KIND_NONE, KIND_INTEGER, KIND_FLOAT, KIND_FLAG, KIND_CHAR = 0, 1, 2, 3, 4
_KIND_OF_TYPE = {
    "Integer": KIND_INTEGER,
    "Float": KIND_FLOAT,
    "Flag": KIND_FLAG,
    "String": KIND_CHAR,
    "Character": KIND_CHAR,
}


def declared_kinds(header: BCFHeader, n_keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(INFO kind, FORMAT kind, FILTER declared) indexed by dictionary key."""
    info = np.zeros(n_keys, np.int8)
    fmt = np.zeros(n_keys, np.int8)
    filters = np.zeros(n_keys, np.bool_)
    for f in header.info:
        info[f.key] = _KIND_OF_TYPE.get(f.type, KIND_CHAR)
    for f in header.formats:
        fmt[f.key] = _KIND_OF_TYPE.get(f.type, KIND_CHAR)
    if header.gt_key >= 0:
        fmt[header.gt_key] = KIND_INTEGER  # GT is declared String but encoded as integers
    filters[list(header.filter_keys)] = True
    return info, fmt, filters


@numba.njit(nogil=True, cache=True)
def _type_fits(kind, t, n):
    """Whether values of BCF type ``t`` (``n`` per vector) may stand for header ``kind``,
    by the same rule the codec decodes with. Flags are not typed (writers differ)."""
    if n == 0 or kind == KIND_FLAG:
        return True
    if kind == KIND_INTEGER:
        return t >= records.BT_INT8 and t <= records.BT_INT32
    if kind == KIND_FLOAT:
        return t == records.BT_FLOAT
    return t == records.BT_CHAR


@numba.njit(nogil=True, cache=True)
def _field_stats(buf, pos, n_samples, gt_key, info_stats, fmt_stats, info_kind, fmt_kind):
    """Fold the record's INFO and FORMAT values into the per-key statistics.

    Returns (error code, dictionary key it concerns or -1). GT is skipped: its ploidy is
    read separately and its values never size a dtype, and on genotype data it is most
    of the bytes."""
    i, n_info, end = records.info_start(buf, pos)
    if i < 0:
        return records.ERR_OVERRUN, -1
    n_keys_info = info_stats.shape[0]
    for _ in range(n_info):
        key, j = records.read_key(buf, i, end)
        if j < 0:
            return records.ERR_OVERRUN, -1
        t, n, d = records.typed_descriptor(buf, j, end)
        if d < 0 or d + n * records.type_size(t) > end:
            return records.ERR_OVERRUN, key
        if t == records.BT_NULL and n > 0:  # htslib: "Invalid INFO type 0"
            return records.ERR_NULL_VALUES, key
        if key < 0 or key >= n_keys_info or info_kind[key] == KIND_NONE:
            return records.ERR_UNKNOWN_KEY, key
        if not _type_fits(info_kind[key], t, n):
            return records.ERR_TYPE_MISMATCH, key
        records.update_stats(buf, t, n, d, 1, info_stats, key, True)
        i = d + n * records.type_size(t)
    n_fmt = np.int64(buf[pos + records.OFF_N_FMT_SAMPLE + 3])
    j, end = records.format_start(buf, pos)
    n_keys_fmt = fmt_stats.shape[0]
    for _ in range(n_fmt):
        key, k = records.read_key(buf, j, end)
        if k < 0:
            return records.ERR_OVERRUN, -1
        t, n, d = records.typed_descriptor(buf, k, end)
        if d < 0 or d + n_samples * n * records.type_size(t) > end:
            return records.ERR_OVERRUN, key
        if t == records.BT_NULL and n > 0:  # htslib: "Invalid FORMAT type 0"
            return records.ERR_NULL_VALUES, key
        if key < 0 or key >= n_keys_fmt or fmt_kind[key] == KIND_NONE:
            return records.ERR_UNKNOWN_KEY, key
        if not _type_fits(fmt_kind[key], t, n):
            return records.ERR_TYPE_MISMATCH, key
        if key != gt_key:
            records.update_stats(buf, t, n, d, n_samples, fmt_stats, key)
        j = d + n_samples * n * records.type_size(t)
    return records.OK, -1


@numba.njit(nogil=True, cache=True)
def _check_filters(buf, pos, filter_declared):
    """(error code, key): every FILTER key of the record must be a declared FILTER."""
    i, end = records.filter_start(buf, pos)
    if i < 0:
        return records.ERR_OVERRUN, -1
    t, n, d = records.typed_descriptor(buf, i, end)
    size = records.type_size(t)
    if d < 0 or d + n * size > end:
        return records.ERR_OVERRUN, -1
    if n > 0 and (t < records.BT_INT8 or t > records.BT_INT32):
        return records.ERR_TYPE_MISMATCH, -1
    for j in range(n):
        key = records.read_int(buf, d + j * size, t)
        if key < 0 or key >= filter_declared.shape[0] or not filter_declared[key]:
            return records.ERR_UNKNOWN_FILTER, key
    return records.OK, -1


@numba.njit(nogil=True, cache=True)
def _alleles_are_strings(buf, pos):
    """Whether every allele is a typed character vector, as htslib requires (a NULL-typed
    allele would otherwise read as an empty string)."""
    end = pos + 8 + np.int64(records.u32(buf, pos))
    n_allele = np.int64(records.u32(buf, pos + records.OFF_N_ALLELE_INFO) >> np.uint32(16))
    i = records.skip_typed(buf, pos + records.OFF_ID, end)
    for _ in range(n_allele):
        if i < 0 or i >= end:
            return False
        t, n, d = records.typed_descriptor(buf, i, end)
        if d < 0 or t != records.BT_CHAR:
            return False
        i = records.skip_typed(buf, i, end)
    return True


@numba.njit(nogil=True, cache=True)
def _id_is_string(buf, pos):
    """Whether the ID is a typed character vector: htslib refuses any other type, even
    a NULL of count 0 ("Invalid ID type 0"), where a reader could take it for "."."""
    end = pos + 8 + np.int64(records.u32(buf, pos))
    t, n, d = records.typed_descriptor(buf, pos + records.OFF_ID, end)
    return d >= 0 and t == records.BT_CHAR


@numba.njit(nogil=True, cache=True)
def _record_rlen(buf, pos, end_key, rlen_needs_more):
    """(rlen as htslib reads it, error code). A stored rlen of 2^31 or more is negative
    as int32; htslib's bcf_record_check replaces it (see records.htslib_rlen)."""
    rlen = np.int64(records.i32(buf, pos + records.OFF_RLEN))
    if rlen >= 0:
        return rlen, records.OK
    if rlen_needs_more:
        return rlen, records.ERR_RLEN
    rlen = records.htslib_rlen(buf, pos, end_key)
    if rlen < 0:
        return rlen, records.ERR_OVERRUN
    if rlen > 2147483647:
        return rlen, records.ERR_RLEN
    return rlen, records.OK


@numba.njit(nogil=True, cache=True)
def _scan_kernel(
    buf,
    n_samples,
    n_contigs,
    gt_key,
    base,
    out_offset,
    out_chrom,
    out_pos,
    out_rlen,
    out_n_allele,
    out_ploidy,
    info_stats,
    fmt_stats,
    info_kind,
    fmt_kind,
    filter_declared,
    end_key=-1,
    rlen_needs_more=False,
):
    """Walk whole records in ``buf`` until it or the output capacity runs out.

    Returns (records written, bytes consumed, error code, error position, dictionary key
    the error concerns or -1).
    """
    cap = out_offset.shape[0]
    end = np.int64(buf.shape[0])
    pos = np.int64(0)
    k = 0
    while k < cap and pos < end:
        total = records.record_length(buf, pos, end)
        if total == -records.ERR_TRAILING:
            break  # the rest of this record arrives with the next batch
        if total < 0:
            return k, pos, -total, pos, -1
        n_sample = np.int64(records.u32(buf, pos + records.OFF_N_FMT_SAMPLE) & np.uint32(0xFFFFFF))
        n_fmt = buf[pos + records.OFF_N_FMT_SAMPLE + 3]
        if n_fmt > 0 and n_sample != n_samples:
            return k, pos, records.ERR_SAMPLES, pos, -1
        chrom = records.i32(buf, pos + records.OFF_CHROM)
        if chrom < 0 or chrom >= n_contigs:  # htslib refuses it too (bcf_record_check)
            return k, pos, records.ERR_UNKNOWN_CONTIG, pos, -1
        if records.i32(buf, pos + records.OFF_POS) < -1:
            return k, pos, records.ERR_NEGATIVE_POS, pos, -1
        if not _id_is_string(buf, pos):
            return k, pos, records.ERR_ID_TYPE, pos, -1
        if records.u32(buf, pos + records.OFF_N_ALLELE_INFO) >> np.uint32(16) == 0:  # "No REF allele"
            return k, pos, records.ERR_NO_REF, pos, -1
        if not _alleles_are_strings(buf, pos):  # htslib: "Invalid REF/ALT type"
            return k, pos, records.ERR_BAD_TYPE, pos, -1
        err, key = _check_filters(buf, pos, filter_declared)
        if err != records.OK:
            return k, pos, err, pos, key
        err, key = _field_stats(buf, pos, n_samples, gt_key, info_stats, fmt_stats, info_kind, fmt_kind)
        if err != records.OK:
            return k, pos, err, pos, key
        rlen, err = _record_rlen(buf, pos, end_key, rlen_needs_more)
        if err != records.OK:
            return k, pos, err, pos, -1
        out_offset[k] = base + pos
        out_chrom[k] = chrom
        out_pos[k] = records.i32(buf, pos + records.OFF_POS)
        out_rlen[k] = rlen
        out_n_allele[k] = np.int32(records.u32(buf, pos + records.OFF_N_ALLELE_INFO) >> np.uint32(16))
        ploidy = 0
        if gt_key >= 0 and n_fmt > 0:
            t, n, d, err = records.find_format(buf, pos, gt_key)
            if err != records.OK:
                return k, pos, err, pos, -1
            if d >= 0:
                ploidy = n
        out_ploidy[k] = ploidy
        k += 1
        pos += total
    return k, pos, records.OK, pos, -1


def new_stats(n_keys: int) -> np.ndarray:
    stats = np.zeros((n_keys, 3), dtype=np.int64)
    stats[:, 1] = np.iinfo(np.int64).max
    stats[:, 2] = np.iinfo(np.int64).min
    return stats


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


class RecordCollector:
    """Keeps per-record facts as they are, for a partition whose first record's index in
    the whole store is not known until the partitions before it are counted."""

    FIELDS = ("offset", "chrom", "pos", "rlen", "n_allele", "ploidy")

    def __init__(self):
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, *columns) -> None:
        if columns[0].shape[0]:
            self.parts.append(tuple(c.copy() for c in columns))

    def arrays(self) -> dict[str, np.ndarray]:
        if not self.parts:
            return {name: np.empty(0, np.int64 if name == "offset" else np.int32) for name in self.FIELDS}
        return {name: np.concatenate([p[i] for p in self.parts]) for i, name in enumerate(self.FIELDS)}


@dataclasses.dataclass(frozen=True)
class RecordStart:
    """Where a record begins in a BGZF file: the block holding its first byte, and that
    byte's offset in the block's inflated data (htslib's virtual offset, split)."""

    block_offset: int
    within_block: int

    @property
    def virtual_offset(self) -> int:
        return (self.block_offset << 16) | self.within_block


@dataclasses.dataclass(frozen=True)
class PartitionScan:
    """What scanning one partition (a run of consecutive records of one file) learns.

    Record offsets count from the partition's first record byte (where that byte lies in
    the file's stream is only known once every block before it is measured), or, for a
    partition that starts the file, are stream offsets."""

    header: BCFHeader
    header_bytes: bytes  # the file's header as stored in its stream (magic, l_text, text)
    records: dict[str, np.ndarray]  # RecordCollector.FIELDS
    stream_length: int  # bytes of records in the partition
    blocks: np.ndarray  # (n, 3) int64: compressed offset, compressed size (0: not BGZF), inflated size
    compressed: bool
    has_eof_block: bool  # meaningful for a file's last partition
    info_stats: np.ndarray
    format_stats: np.ndarray


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
