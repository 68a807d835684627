"""What a scan hands on: per-chunk summaries of one pass (``ScanResult``) and of one
partition (``PartitionScan``), folded from per-record facts as the scan goes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..bcf.csi import RecordStart
from ..bcf.header import BCFHeader

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

    def __init__(self, chunk_length: int, lead: int = 0):
        self.chunk_length = chunk_length
        # Records already in the first chunk (a store being appended to: its last, partial
        # chunk), which these records complete: chunk 0 then holds chunk_length - lead of them.
        self.lead = lead
        self.num_records = 0
        self.chunk_offsets: list[np.ndarray] = []
        self.region_rows: list[np.ndarray] = []
        self.pos_range = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
        self.rlen_range = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
        self.max_alleles = 0
        self.max_ploidy = 0

    def add(
        self,
        offset: np.ndarray,
        chrom: np.ndarray,
        pos: np.ndarray,
        rlen: np.ndarray,
        n_allele: np.ndarray,
        ploidy: np.ndarray,
    ) -> None:
        """Fold the next records, in stream order.

        Parameters
        ----------
        offset : numpy.ndarray
            int64 stream offset of each record.
        chrom, pos, rlen, n_allele, ploidy : numpy.ndarray
            int32 contig id, 0-based POS, rlen, allele count and GT values per sample.
        """
        k = offset.shape[0]
        if k == 0:
            return
        index = self.num_records + np.arange(k, dtype=np.int64)
        starts_chunk = (index + self.lead) % self.chunk_length == 0
        if self.num_records == 0:
            starts_chunk[0] = True  # the first record starts chunk 0, led or not
        self.num_records += k
        chunk = (index + self.lead) // self.chunk_length
        self.chunk_offsets.append(offset[starts_chunk])
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
        if self.region_rows:  # the batch may continue the previous batch's last run
            self.region_rows[-1], rows = continue_rows(self.region_rows[-1], rows)
        if rows.shape[0]:
            self.region_rows.append(rows)

    def counts(self) -> RecordCounts:
        """Its records' number and ranges (:class:`RecordCounts`)."""
        n = self.num_records
        return RecordCounts(
            n, self.pos_range if n else (0, 0), self.rlen_range if n else (0, 0), self.max_alleles, self.max_ploidy
        )

    def arrays(self) -> dict:
        """The summaries so far, as :class:`ScanResult` fields.

        Returns
        -------
        dict
            ``chunk_length``, ``num_records``, ``chunk_offsets``, ``region_rows``,
            ``pos_range``, ``rlen_range``, ``max_alleles``, ``max_ploidy``.
        """
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


def continue_rows(before: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Region rows that follow ``before``'s records: when the first continues the last
    row's (chunk, contig) run, the two are one row (the later last POS, the larger
    end, both counts), in ``before``; (``before``, the rows left)."""
    if not (before.shape[0] and rows.shape[0]) or tuple(before[-1, :2]) != tuple(rows[0, :2]):
        return before, rows
    merged = before[-1].copy()
    merged[3] = rows[0, 3]
    merged[4] = max(merged[4], rows[0, 4])
    merged[5] += rows[0, 5]
    return np.concatenate([before[:-1], merged[None]]), rows[1:]


class RecordCollector:
    """Keeps per-record facts as they are, for a partition whose first record's index in
    the whole store is not known until the partitions before it are counted."""

    FIELDS = ("offset", "chrom", "pos", "rlen", "n_allele", "ploidy")

    def __init__(self):
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, *columns: np.ndarray) -> None:
        """Keep the next records' facts (copied), one array per ``FIELDS`` entry.

        Parameters
        ----------
        *columns : numpy.ndarray
            As :meth:`RecordSummary.add` takes them.
        """
        if columns[0].shape[0]:
            self.parts.append(tuple(c.copy() for c in columns))

    def arrays(self) -> dict[str, np.ndarray]:
        """Every record's facts, by ``FIELDS`` name.

        Returns
        -------
        dict of str to numpy.ndarray
            One array per field (int64 offsets, int32 others), in record order.
        """
        if not self.parts:
            return {name: np.empty(0, np.int64 if name == "offset" else np.int32) for name in self.FIELDS}
        return {name: np.concatenate([p[i] for p in self.parts]) for i, name in enumerate(self.FIELDS)}


class RecordCount:
    """Records counted, and the ranges that size dtypes and dimensions as folded from
    other counts (:meth:`fold`). A partition's first phase counts its records only (the
    columns layout: the tasks that write them learn their ranges, :class:`RunFacts`), so
    it hands back a few numbers, whatever its records."""

    def __init__(self) -> None:
        self.num_records = 0
        self.pos_range = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
        self.rlen_range = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
        self.max_alleles = 0
        self.max_ploidy = 0

    def add(self, *columns: np.ndarray) -> None:
        """Count the next records (given as :meth:`RecordSummary.add` takes them; the
        counting scan hops over records and adds to ``num_records`` itself)."""
        self.num_records += columns[0].shape[0]

    def fold(self, counts: RecordCounts) -> None:
        """Fold in another partition's counts."""
        if not counts.num_records:
            return
        self.num_records += counts.num_records
        self.pos_range = (min(self.pos_range[0], counts.pos_range[0]), max(self.pos_range[1], counts.pos_range[1]))
        self.rlen_range = (
            min(self.rlen_range[0], counts.rlen_range[0]),
            max(self.rlen_range[1], counts.rlen_range[1]),
        )
        self.max_alleles = max(self.max_alleles, counts.max_alleles)
        self.max_ploidy = max(self.max_ploidy, counts.max_ploidy)

    def counts(self) -> RecordCounts:
        """What was folded (ranges (0, 0) without records)."""
        n = self.num_records
        return RecordCounts(
            n, self.pos_range if n else (0, 0), self.rlen_range if n else (0, 0), self.max_alleles, self.max_ploidy
        )


@dataclasses.dataclass(frozen=True)
class RecordCounts:
    """A partition's records as :class:`RecordCount` folds them."""

    num_records: int
    pos_range: tuple[int, int]
    rlen_range: tuple[int, int]
    max_alleles: int
    max_ploidy: int


class RunWindow:
    """Folds into ``summary`` only the records ``skip`` to ``skip + limit`` of those it is
    given: a task writing a run of chunks reads from a partition's start, past records of
    the run before it, and may read records of the run after it before it stops."""

    def __init__(self, summary: RecordSummary, skip: int, limit: int):
        self.summary = summary
        self.skip = skip
        self.limit = limit
        self.seen = 0

    def add(self, *columns: np.ndarray) -> None:
        k = columns[0].shape[0]
        lo = min(max(self.skip - self.seen, 0), k)
        hi = min(max(self.skip + self.limit - self.seen, 0), k)
        self.seen += k
        if hi > lo:
            self.summary.add(*(c[lo:hi] for c in columns))


@dataclasses.dataclass(frozen=True)
class PartitionScan:
    """What scanning one partition (a run of consecutive records of one file) learns.

    Record offsets count from the partition's first record byte (where that byte lies in
    the file's stream is only known once every block before it is measured), or, for a
    partition that starts the file, are stream offsets (its segment, when written,
    starts with the file's header)."""

    # The file's header: from its first partition only (a worker drops it from the
    # others': at 5x10^5 samples it is 10 MB pickled back per task, for nothing).
    header: BCFHeader | None
    # RecordCollector.FIELDS, every record's facts; None when only counted (``counts``).
    records: dict[str, np.ndarray] | None
    stream_length: int  # bytes of records in the partition
    # (n, 3) int64: compressed offset, compressed size (0: not BGZF), inflated size; none
    # when only counted.
    blocks: np.ndarray
    compressed: bool
    has_eof_block: bool  # meaningful for a file's last partition
    info_stats: np.ndarray
    format_stats: np.ndarray
    counts: RecordCounts | None = None  # when only counted
    # Where its first record starts (a file's first partition: past the header).
    first_record: RecordStart | None = None
    # Where its sink stopped it (ScanStop: in the sink's offsets), when it did.
    stopped_at: int | None = None

    @property
    def file_header(self) -> BCFHeader:
        """The header of the file (of its first partition's scan)."""
        if self.header is None:
            raise ValueError("a partition after the file's first carries no header")
        return self.header


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """What the tasks writing a run of chunks learnt of the records they read: their
    chunks' region rows (the store's chunk numbers), and the ranges and statistics that
    size dtypes and widths. A task may read a few records of the runs beside its own
    (from its partition's start, up to where it stops): they are records of the store
    too, so what is folded over them is the store's as well."""

    region_rows: np.ndarray
    counts: RecordCounts
    info_stats: np.ndarray
    format_stats: np.ndarray

    @classmethod
    def fold(cls, facts: list[RunFacts]) -> RunFacts:
        """The runs' facts as one (region rows in the order given)."""
        total = RecordCount()
        info, fmt = facts[0].info_stats.copy(), facts[0].format_stats.copy()
        for f in facts:
            total.fold(f.counts)
            fold_stats(info, f.info_stats)
            fold_stats(fmt, f.format_stats)
        return cls(np.concatenate([f.region_rows for f in facts]), total.counts(), info, fmt)

    def into(self, scan: ScanResult) -> ScanResult:
        """``scan`` with these facts (its records' number kept)."""
        c = self.counts
        return dataclasses.replace(
            scan,
            region_rows=self.region_rows,
            pos_range=c.pos_range,
            rlen_range=c.rlen_range,
            max_alleles=c.max_alleles,
            max_ploidy=c.max_ploidy,
            info_stats=self.info_stats,
            format_stats=self.format_stats,
        )


def fold_stats(into: np.ndarray, stats: np.ndarray) -> None:
    """Combine per-key (max count, min, max) summaries in place; a later file declares
    at most the first file's keys (checked when indexed together), so its table is no
    longer than ``into``."""
    n = stats.shape[0]
    into[:n, 0] = np.maximum(into[:n, 0], stats[:, 0])
    into[:n, 1] = np.minimum(into[:n, 1], stats[:, 1])
    into[:n, 2] = np.maximum(into[:n, 2], stats[:, 2])
