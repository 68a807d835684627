"""One pass over a BCF: inflate, parse the header, walk every record.

The pass hands every inflated byte to a sink (the transcode cache) as it goes and keeps
only small per-record facts: the record's offset in the uncompressed stream, CHROM,
POS, rlen, the allele count and the GT ploidy. From those come the chunk byte ranges
and every dimension size the core arrays need, without a second pass.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numba
import numpy as np
from tqdm.auto import tqdm

from . import bgzf, records
from .errors import CorruptBCFError, HeaderError, NotBCFError
from .header import BCF_PREFIX_SIZE, BCFHeader, classify_prefix, parse_header_text, read_prefix

logger = logging.getLogger(__name__)

# Inflated bytes gathered before one call of the record kernel.
SCAN_BATCH = 8 * 1024 * 1024
RECORD_FIELDS = ("offset", "chrom", "pos", "rlen", "n_allele", "ploidy")


@dataclasses.dataclass(frozen=True)
class ScanResult:
    header: BCFHeader
    stream_size: int  # bytes of the uncompressed BCF stream (header + records)
    offset: np.ndarray  # int64, stream offset of each record
    chrom: np.ndarray  # int32 contig index
    pos: np.ndarray  # int32, 0-based as in BCF
    rlen: np.ndarray  # int32
    n_allele: np.ndarray  # int32
    ploidy: np.ndarray  # int32, GT values per sample in the record (0: no GT)
    compressed: bool
    has_eof_block: bool
    info_stats: np.ndarray  # (n_keys, 3) int64: max number, min, max of INFO values by key
    format_stats: np.ndarray  # the same for FORMAT values

    @property
    def num_records(self) -> int:
        return int(self.offset.shape[0])


@numba.njit(nogil=True, cache=True)
def _field_stats(buf, pos, n_samples, gt_key, info_stats, fmt_stats, info_defined, fmt_defined):
    """Fold the record's INFO and FORMAT values into the per-key statistics.

    A key the header does not define as INFO (resp. FORMAT) is refused, as htslib's
    bcf_record_check refuses it: its values could not be typed or named.

    GT is skipped: its ploidy is read separately and its values never size a dtype,
    and on genotype data it is most of the bytes."""
    i, n_info, end = records.info_start(buf, pos)
    if i < 0:
        return records.ERR_OVERRUN
    n_keys_info = info_stats.shape[0]
    for _ in range(n_info):
        key, j = records.read_key(buf, i, end)
        if j < 0:
            return records.ERR_OVERRUN
        t, n, d = records.typed_descriptor(buf, j, end)
        if d < 0 or d + n * records.type_size(t) > end:
            return records.ERR_OVERRUN
        if key < 0 or key >= n_keys_info or not info_defined[key]:
            return records.ERR_UNKNOWN_KEY
        records.update_stats(buf, t, n, d, 1, info_stats, key)
        i = d + n * records.type_size(t)
    n_fmt = np.int64(buf[pos + records.OFF_N_FMT_SAMPLE + 3])
    j, end = records.format_start(buf, pos)
    n_keys_fmt = fmt_stats.shape[0]
    for _ in range(n_fmt):
        key, k = records.read_key(buf, j, end)
        if k < 0:
            return records.ERR_OVERRUN
        t, n, d = records.typed_descriptor(buf, k, end)
        if d < 0 or d + n_samples * n * records.type_size(t) > end:
            return records.ERR_OVERRUN
        if key < 0 or key >= n_keys_fmt or not fmt_defined[key]:
            return records.ERR_UNKNOWN_KEY
        if key != gt_key:
            records.update_stats(buf, t, n, d, n_samples, fmt_stats, key)
        j = d + n_samples * n * records.type_size(t)
    return records.OK


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
def _scan_kernel(buf, n_samples, n_contigs, gt_key, base, out_offset, out_chrom, out_pos, out_rlen,
                 out_n_allele, out_ploidy, info_stats, fmt_stats, info_defined, fmt_defined):
    """Walk whole records in ``buf`` until it or the output capacity runs out.

    Returns (records written, bytes consumed, error code, error position).
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
            return k, pos, -total, pos
        n_sample = np.int64(records.u32(buf, pos + records.OFF_N_FMT_SAMPLE) & np.uint32(0xFFFFFF))
        n_fmt = buf[pos + records.OFF_N_FMT_SAMPLE + 3]
        if n_fmt > 0 and n_sample != n_samples:
            return k, pos, records.ERR_SAMPLES, pos
        chrom = records.i32(buf, pos + records.OFF_CHROM)
        if chrom < 0 or chrom >= n_contigs:  # htslib refuses it too (bcf_record_check)
            return k, pos, records.ERR_UNKNOWN_CONTIG, pos
        if records.i32(buf, pos + records.OFF_POS) < -1:
            return k, pos, records.ERR_NEGATIVE_POS, pos
        if not _alleles_are_strings(buf, pos):  # htslib: "Invalid REF/ALT type"
            return k, pos, records.ERR_BAD_TYPE, pos
        err = _field_stats(buf, pos, n_samples, gt_key, info_stats, fmt_stats, info_defined, fmt_defined)
        if err != records.OK:
            return k, pos, err, pos
        out_offset[k] = base + pos
        out_chrom[k] = chrom
        out_pos[k] = records.i32(buf, pos + records.OFF_POS)
        out_rlen[k] = records.i32(buf, pos + records.OFF_RLEN)
        out_n_allele[k] = np.int32(records.u32(buf, pos + records.OFF_N_ALLELE_INFO) >> np.uint32(16))
        ploidy = 0
        if gt_key >= 0 and n_fmt > 0:
            t, n, d, err = records.find_format(buf, pos, gt_key)
            if err != records.OK:
                return k, pos, err, pos
            if d >= 0:
                ploidy = n
        out_ploidy[k] = ploidy
        k += 1
        pos += total
    return k, pos, records.OK, pos


def new_stats(n_keys: int) -> np.ndarray:
    stats = np.zeros((n_keys, 3), dtype=np.int64)
    stats[:, 1] = np.iinfo(np.int64).max
    stats[:, 2] = np.iinfo(np.int64).min
    return stats


def _open_stream(fileobj: BinaryIO, path) -> tuple[Iterator[bytes], bool, Callable[[], bool]]:
    """Inflated-byte iterator over a BGZF or uncompressed BCF, plus whether it is compressed.

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
            for _, data in bgzf.iter_blocks(fileobj, path):
                state["last_empty"] = not data
                if data:
                    yield data

        return inflated(), True, lambda: state["last_empty"]

    def raw():
        while chunk := fileobj.read(bgzf.READ_SIZE):
            yield chunk

    return raw(), False, lambda: True


class _RecordAccumulator:
    """Runs the record kernel over batches and keeps the per-record facts."""

    def __init__(self, header: BCFHeader, path, sink=None):
        self.path = path
        # A sink that lays records out by chunk (the BGZF cache) is told where records start.
        self.on_records = getattr(sink, "records_scanned", None)
        self.n_samples = len(header.samples)
        self.n_contigs = len(header.contigs)
        self.gt_key = header.gt_key
        self.parts: dict[str, list[np.ndarray]] = {f: [] for f in RECORD_FIELDS}
        # Per dictionary key: (max values per vector, min int, max int), as bio2zarr summarises.
        n_keys = max([f.key for f in (*header.info, *header.formats)] + list(header.filter_keys) + [0]) + 1
        self.info_stats = new_stats(n_keys)
        self.fmt_stats = new_stats(n_keys)
        self.info_defined = np.zeros(n_keys, dtype=np.bool_)
        self.info_defined[[f.key for f in header.info]] = True
        self.fmt_defined = np.zeros(n_keys, dtype=np.bool_)
        self.fmt_defined[[f.key for f in header.formats]] = True
        self.pending = b""
        self.base = header.size  # stream offset of pending[0]

    def feed(self, data: bytes, final: bool = False) -> None:
        buf = np.frombuffer(self.pending + data if self.pending else data, dtype=np.uint8)
        consumed_total = 0
        while True:
            view = buf[consumed_total:]
            # Capacity: no record is shorter than 32 bytes.
            cap = max(1, view.shape[0] // 32 + 1)
            out = [np.empty(cap, np.int64)] + [np.empty(cap, np.int32) for _ in range(5)]
            k, consumed, err, err_pos = _scan_kernel(
                view, self.n_samples, self.n_contigs, self.gt_key, self.base + consumed_total, *out,
                self.info_stats, self.fmt_stats, self.info_defined, self.fmt_defined,
            )
            if err != records.OK:
                raise CorruptBCFError(
                    self.path,
                    f"bad BCF record in the uncompressed stream: {records.ERROR_TEXT[err]}",
                    offset=self.base + consumed_total + int(err_pos),
                    hint="offset is in the uncompressed stream",
                )
            for name, arr in zip(RECORD_FIELDS, out):
                self.parts[name].append(arr[:k])
            if self.on_records is not None:
                self.on_records(out[0][:k])
            consumed_total += int(consumed)
            if k < cap:
                break
        rest = buf[consumed_total:].tobytes()
        self.base += consumed_total
        self.pending = rest
        if final and rest:
            raise CorruptBCFError(
                self.path,
                f"file ends inside a BCF record ({len(rest)} bytes of an incomplete record)",
                offset=self.base,
                hint="offset is in the uncompressed stream; the file is truncated",
            )

    def arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for name in RECORD_FIELDS:
            dtype = np.int64 if name == "offset" else np.int32
            parts = self.parts[name]
            out[name] = np.concatenate(parts) if parts else np.empty(0, dtype)
        return out


def scan_bcf(path: str | os.PathLike, sink: BinaryIO | None = None, progress: bool | None = None) -> ScanResult:
    """Inflate and walk ``path`` once, writing the uncompressed stream to ``sink``."""
    path = os.fspath(path)
    try:
        fileobj = open(path, "rb")
    except OSError as e:
        raise NotBCFError(path, f"cannot open: {e.strerror}") from None
    with fileobj:
        total = os.fstat(fileobj.fileno()).st_size
        stream, compressed, ended_with_eof = _open_stream(fileobj, path)
        bar = tqdm(total=total, unit="B", unit_scale=True, desc="index", disable=None if progress is None else not progress)
        head = b""
        header = None
        acc = None
        batch: list[bytes] = []
        batch_size = 0
        for data in stream:
            if sink is not None:
                sink.write(data)
            bar.update(len(data) if not compressed else 0)
            if header is None:
                head += data
                if len(head) < 16:
                    continue
                classify_prefix(head[:16], path)
                if len(head) < BCF_PREFIX_SIZE:
                    continue
                l_text = read_prefix(head, path)
                if len(head) < BCF_PREFIX_SIZE + l_text:
                    continue
                header = parse_header_text(head[BCF_PREFIX_SIZE : BCF_PREFIX_SIZE + l_text], path,
                                           BCF_PREFIX_SIZE + l_text)
                logger.info("%s: %d samples, %d contigs", path, len(header.samples), len(header.contigs))
                if hasattr(sink, "header_parsed"):
                    sink.header_parsed(header)
                acc = _RecordAccumulator(header, path, sink)
                data = head[BCF_PREFIX_SIZE + l_text :]
                head = b""
            batch.append(data)
            batch_size += len(data)
            if batch_size >= SCAN_BATCH:
                acc.feed(b"".join(batch))
                if compressed:
                    bar.n = fileobj.tell()
                    bar.refresh()
                batch, batch_size = [], 0
        if header is None:
            if not head:
                raise NotBCFError(path, "file is empty (no BCF data)")
            classify_prefix(head[:16], path)
            raise HeaderError(path, "file ends inside the BCF header (truncated)")
        acc.feed(b"".join(batch), final=True)
        bar.n = total
        bar.close()
        arrays = acc.arrays()
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
            **arrays,
        )
