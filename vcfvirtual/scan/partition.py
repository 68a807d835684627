"""Where to cut a BGZF BCF so that each part starts exactly at a record.

Records run across BGZF blocks and carry no sync marker, so a part's first record must be
found. Two sources, in order of trust:

* the CSI index (``<bcf>.csi``, from ``bcftools index``): its bins and chunks hold virtual
  offsets of records;
* a block scan: BGZF block headers near the wanted cut are found by their magic and size
  fields (nothing before them is read), the blocks there inflated, and the first offset
  from which several consecutive records pass the scan's own record checks (lengths,
  sample count, contigs, declared keys, value types) is taken.

Either may be wrong (a stale index; bytes that happen to look like records). That costs
time only: each partition must end exactly where the next begins, and a file whose
partitions do not meet is scanned again whole (:func:`vcfvirtual.scan.parallel.scan_all`).
"""

from __future__ import annotations

import logging
import os
from typing import BinaryIO

import numpy as np
from vcfvirtual_codec.bcf import bgzf, records

from ..bcf.csi import RecordStart, csi_record_starts
from ..bcf.header import BCFHeader
from ..errors import VcfVirtualError
from ..io.remote import is_url
from ..io.sources import StorageOptions, open_source, source_size
from .kernel import declared_kinds, new_stats, scan_records
from .scanner import read_header

logger = logging.getLogger(__name__)

# Below this many compressed bytes per part, a worker's start-up costs more than it saves.
MIN_PARTITION_BYTES = 4 * 1024 * 1024
# Above it, more parts than asked: a part is one task of the columns layout's second
# phase (~40 s of CPU per compressed GB measured), which a dead worker's replacement
# does again, and which holds a worker the whole time (benchmarks/scale.py).
MAX_PARTITION_BYTES = 1024 * 1024 * 1024
# Consecutive records that must pass the checks from a guessed offset (fewer only when the
# data read ends first). Each record's checks rarely pass on bytes that are not a record
# (n_sample must equal the header's, CHROM and every key must be declared, types must
# fit), so four in a row make a false start very unlikely; a false one is caught anyway.
MIN_RECORDS = 4
# Inflated bytes searched for a record start after a cut's block.
SEARCH_BYTES = 2 * 1024 * 1024


def block_near(fileobj: BinaryIO, offset: int, size: int, path: str) -> int | None:
    """The first BGZF block starting at or after a file offset, told by its magic and
    by the next block starting where its size field says.

    Parameters
    ----------
    fileobj : file object
        The BGZF file, open for reading (seekable).
    offset, size : int
        Where to start looking, and the file's size.
    path : str
        The file's name, for messages.

    Returns
    -------
    int or None
        The block's file offset; None if no block starts after ``offset``.
    """
    window = 4 * bgzf.MAX_BLOCK_SIZE
    while offset < size:
        fileobj.seek(offset)
        buf = fileobj.read(window + 2 * bgzf.MAX_BLOCK_SIZE)
        at = 0
        while True:
            at = buf.find(b"\x1f\x8b\x08\x04", at)
            if at < 0 or at >= window:
                break
            try:
                length = bgzf.block_size(memoryview(buf), at, path, offset + at)
            except VcfVirtualError:
                at += 1
                continue
            nxt = at + length
            if offset + nxt == size or buf[nxt : nxt + 4] == b"\x1f\x8b\x08\x04":
                return offset + at
            at += 1
        offset += window
    return None


def _plausible(buf: np.ndarray, at: np.ndarray, n_samples: int, n_contigs: int) -> np.ndarray:
    """Whether a record could start at each offset ``at``, by its fixed fields: l_shared
    at least the fixed part, CHROM a declared contig, POS >= -1, at least one allele
    (REF), and either FORMAT fields for the header's samples or no per-sample bytes at
    all. Stricter than the scan (which follows htslib's reader): used only to guess."""

    def u32(offset: int) -> np.ndarray:
        b = [buf[at + offset + j].astype(np.uint32) for j in range(4)]
        return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)

    l_shared, l_indiv = u32(0), u32(4)
    chrom = u32(records.OFF_CHROM).view(np.int32)
    pos = u32(records.OFF_POS).view(np.int32)
    n_allele = u32(records.OFF_N_ALLELE_INFO) >> 16
    fmt_sample = u32(records.OFF_N_FMT_SAMPLE)
    n_fmt = fmt_sample >> 24
    ok = (l_shared >= records.OFF_ID - 8) & (chrom >= 0) & (chrom < n_contigs) & (pos >= -1) & (n_allele >= 1)
    ok &= ((n_fmt == 0) & (l_indiv == 0)) | ((n_fmt > 0) & ((fmt_sample & 0xFFFFFF) == n_samples))
    return ok


def _first_record_start(buf: np.ndarray, limit: int, header: BCFHeader, at_eof: bool = False) -> int:
    """First offset below ``limit`` from which MIN_RECORDS records pass the scan's checks
    and look plausible, or at least two covering half the bytes after it (records larger
    than the bytes read), or any that end exactly at the end of the file (``at_eof``: the
    data read is the rest of the file); -1 if none."""
    n_samples, n_contigs = len(header.samples), len(header.contigs)
    n_keys = max([f.key for f in (*header.info, *header.formats)] + list(header.filter_keys) + [0]) + 1
    kinds = declared_kinds(header, n_keys)
    stats = new_stats(n_keys), new_stats(n_keys)  # scratch: the kernel folds into them
    chrom, pos, rlen, n_allele, ploidy = (np.empty(MIN_RECORDS, np.int32) for _ in range(5))
    out = (np.empty(MIN_RECORDS, np.int64), chrom, pos, rlen, n_allele, ploidy)
    n = buf.shape[0]
    # A vectorised sieve over offsets first, so the full checks run on few; a window at a
    # time, as a record usually starts within the first block.
    limit = max(0, min(limit, n - records.OFF_ID))
    for lo, hi in ((0, bgzf.MAX_BLOCK_SIZE), (bgzf.MAX_BLOCK_SIZE, limit)):
        window = np.arange(lo, min(hi, limit), dtype=np.int64)
        at = _first_checked(
            buf, window[_plausible(buf, window, n_samples, n_contigs)], header, kinds, stats, out, at_eof
        )
        if at >= 0:
            return at
    return -1


def _first_checked(
    buf: np.ndarray,
    candidates: np.ndarray,
    header: BCFHeader,
    kinds: tuple[np.ndarray, np.ndarray, np.ndarray],
    stats: tuple[np.ndarray, np.ndarray],
    out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    at_eof: bool,
) -> int:
    n_samples, n_contigs = len(header.samples), len(header.contigs)
    n = buf.shape[0]
    for i in candidates.tolist():
        k, consumed, err, _, _ = scan_records(buf[i:], n_samples, n_contigs, header.gt_key, 0, *out, *stats, *kinds)
        whole = k == MIN_RECORDS or (k >= 2 and 2 * consumed >= n - i) or (at_eof and k >= 1 and i + consumed == n)
        if err != records.OK or not whole:
            continue
        if _plausible(buf, i + out[0][:k], n_samples, n_contigs).all():
            return i
    return -1


def find_record_start(path: str, fileobj: BinaryIO, block_offset: int, header: BCFHeader) -> RecordStart | None:
    """The first record starting in a block or after it, found by trying offsets with
    the record checks (within ``SEARCH_BYTES`` of inflated data).

    Parameters
    ----------
    path : str
        The BCF's name, for messages.
    fileobj : file object
        The BCF, open for reading (seekable).
    block_offset : int
        File offset of a BGZF block (see :func:`block_near`).
    header : BCFHeader
        The file's header, which the records must agree with.

    Returns
    -------
    RecordStart or None
        The record start found; None if none was (the caller cuts elsewhere).

    Raises
    ------
    CorruptBCFError
        A block there does not inflate.
    """
    fileobj.seek(block_offset)
    offsets, pieces, total = [], [], 0
    at_eof = True
    for block in bgzf.read_blocks(fileobj, path, start=block_offset):
        offsets.append(block.offset)
        pieces.append(block.data)
        total += len(block.data)
        if total >= SEARCH_BYTES:
            at_eof = False
            break
    if not total:
        return None
    buf = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    # Only starts in the first half: past it, too few bytes may remain to check a run.
    at = _first_record_start(buf, total if at_eof else max(1, total // 2), header, at_eof)
    if at < 0:
        return None
    ends = np.cumsum([len(p) for p in pieces])
    i = int(np.searchsorted(ends, at, side="right"))
    return RecordStart(offsets[i], int(at - (ends[i - 1] if i else 0)))


def plan_partitions(bcf_path: str, n: int, storage_options: StorageOptions = None) -> list[RecordStart]:
    """Record starts at which to cut a BCF into parts of about equal compressed size.

    From its CSI index when there is a usable one, else by a block scan. Either may be
    wrong; a partition that does not end where the next one starts is caught by the scan.

    Parameters
    ----------
    bcf_path : str or os.PathLike
        The BCF.
    n : int
        This many parts, fewer for files under ``MIN_PARTITION_BYTES`` a part, more for
        files over ``MAX_PARTITION_BYTES`` a part.
    storage_options : mapping, optional
        fsspec options for a URL (read only near the cuts, by range requests).

    Returns
    -------
    list of RecordStart
        Ascending cuts after the first record (the first part starts at it and is not
        listed); empty for a small or uncompressed file.

    Raises
    ------
    NotBCFError, HeaderError, CorruptBCFError
        The file is not a readable BGZF BCF.
    """
    bcf_path = os.fspath(bcf_path)
    size = source_size(bcf_path, storage_options)
    parts = min(max(n, -(-size // MAX_PARTITION_BYTES)), size // MIN_PARTITION_BYTES)
    if parts <= 1:
        return []
    with open_source(bcf_path, storage_options) as f:
        if f.read(2) != bgzf.GZIP_MAGIC:
            return []  # an uncompressed stream has no blocks to seek to
    targets = [size * i // parts for i in range(1, parts)]
    # A URL's index is not fetched: the block scan reads only near the cuts anyway.
    starts = None if is_url(bcf_path) else csi_record_starts(bcf_path)
    if starts:
        cuts = _nearest_after(starts, targets)
        logger.info("%s: %d partitions from its CSI index", bcf_path, len(cuts) + 1)
        return cuts
    header = read_header(bcf_path, storage_options)
    cuts = []
    with open_source(bcf_path, storage_options) as f:
        for target in targets:
            block = block_near(f, target, size, bcf_path)
            start = None if block is None else find_record_start(bcf_path, f, block, header)
            if start is not None and (not cuts or start.virtual_offset > cuts[-1].virtual_offset):
                cuts.append(start)
    logger.info("%s: %d partitions from a block scan", bcf_path, len(cuts) + 1)
    return cuts


def _nearest_after(starts: list[RecordStart], targets: list[int]) -> list[RecordStart]:
    """For each target offset, the first record start in a block at or after it."""
    blocks = np.array([s.block_offset for s in starts])
    cuts: list[RecordStart] = []
    for target in targets:
        i = int(np.searchsorted(blocks, target))
        if i < len(starts) and i > 0 and (not cuts or starts[i].virtual_offset > cuts[-1].virtual_offset):
            cuts.append(starts[i])
    return cuts
