"""What every cache layout provides (:class:`CacheLayout`), and the chunk byte ranges
they all produce, computed here only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..bcf.header import BCFHeader
from ..errors import OutputWriteError
from ..io.fingerprint import Fingerprint
from ..io.outputs import output_file, write_hint
from ..io.sources import StorageOptions
from ..scan.chunking import chunk_length_within
from ..scan.parallel import Facts, Merged
from ..scan.results import RunFacts, ScanResult
from ..scan.scanner import scan_bcf
from ..scan.sink import RecordSink
from .columns_join import StoredSegment
from .names import LayoutName, segment_name

ChunkLengthFor = Callable[[BCFHeader], int]
# Where a layout writes the cache: a local path (its temporary name, renamed into place
# when complete), or, for a cache made of parts only, the URL of its folder, under which
# each part is uploaded as it is written (an object store has no rename).
CacheTarget = Path | str

# Target size of one decoded call_genotype chunk, and the most variants per chunk, of the
# layouts that keep a record whole (raw, bgzf): a read decodes every sample of a chunk.
TARGET_CHUNK_BYTES = 64 * 1024 * 1024
MAX_CHUNK_LENGTH = 10_000


class ChunkBounds:
    """A layout's chunk length rule: as many variants as keep one chunk of every sample's
    genotypes within ``max_chunk_bytes``, at most ``max_chunk_length`` (at least
    MIN_CHUNK_LENGTH)."""

    max_chunk_bytes: int
    max_chunk_length: int
    # Variants per chunk of a BCF with no samples (no genotypes to bound).
    sites_only_chunk_length: int = MAX_CHUNK_LENGTH

    def chunk_length(self, n_samples: int, ploidy: int, itemsize: int = 1) -> int:
        """See :meth:`CacheLayout.chunk_length`."""
        return chunk_length_within(
            n_samples, ploidy, itemsize, self.max_chunk_bytes, self.max_chunk_length, self.sites_only_chunk_length
        )


class WholeRecordChunks(ChunkBounds):
    """The chunk bounds of the layouts that keep records whole (raw, bgzf), whose reads
    decode every sample's calls of a chunk: a decoded call_genotype chunk near 64 MiB."""

    max_chunk_bytes = TARGET_CHUNK_BYTES
    max_chunk_length = MAX_CHUNK_LENGTH
    # Records are kept whole: every sample in a chunk, rlen as the record stores it.
    samples_blocked = False
    rlen_resolved = False


@dataclass(frozen=True)
class SerialSource:
    """One BCF scanned once, serially, writing the cache as it goes.

    Parameters
    ----------
    path : str or Path
        The BCF (with ``fileobj``, only its name in messages).
    chunk_length_for : callable
        Records per variants chunk, given the header (called before any record).
    progress : bool or None
        Show a progress bar (None: when on a terminal).
    threads : int
        Threads inflating blocks ahead of the scan (0: none; see
        :func:`vcfvirtual.scan.scanner.scan_bcf`).
    fileobj : file object or None
        The BCF already open (a URL's stream).
    storage_options : mapping or None
        fsspec options for a cache written under a URL.
    """

    path: str | Path
    chunk_length_for: ChunkLengthFor
    progress: bool | None = None
    threads: int = 0
    fileobj: BinaryIO | None = None
    storage_options: StorageOptions = None

    def scan(self, sink: RecordSink) -> ScanResult:
        """Scan the BCF, handing every inflated byte to ``sink`` (a layout's writer)."""
        return scan_bcf(
            self.path,
            self.chunk_length_for,
            sink=sink,
            progress=self.progress,
            threads=self.threads,
            fileobj=self.fileobj,
        )


class ChunkRanges(NamedTuple):
    """Where each variants chunk is in the cache: ``offsets[k]`` and ``lengths[k]``
    (uint64) of chunk k."""

    offsets: np.ndarray
    lengths: np.ndarray


class SegmentRanges(NamedTuple):
    """Where each segment is in a cache that stores every array apart (the ``columns``
    layout): per segment name (``position``, ``info/DP``, ``format/GT``...), a
    :class:`ChunkRanges` whose arrays have shape ``(n_chunks,)``, or ``(n_chunks,
    n_blocks)`` for a FORMAT field cut into samples blocks; each segment's compressor
    (``zstd``, ``blosc``), and the samples per block (the samples chunk size as written:
    no wider than the samples there are), which the arrays reading them declare.

    The cache is a folder of parts (``parts``: their file names, :func:`~vcfvirtual.cache.names.part_name`), each
    holding the segments of a run of whole variants chunks, written by the worker that
    demultiplexed them; ``chunk_part[k]`` is the index in ``parts`` of the part holding
    chunk k, and its ranges are offsets in that part."""

    segments: dict[str, ChunkRanges]
    compressors: dict[str, str]
    samples_chunk_size: int
    parts: tuple[str, ...]
    chunk_part: np.ndarray  # (n_chunks,) int32
    # Each part's fingerprint, taken by the task that wrote it (so the caller reads none of
    # them back); empty when the caller wrote the cache itself.
    part_fingerprints: tuple[Fingerprint, ...] = ()
    # What the tasks that wrote the chunks learnt of them (a partitioned run, whose first
    # phase only counts records): region rows, ranges, statistics; None when the scan did.
    facts: RunFacts | None = None
    # Each GT block's complete count, as its segment's preamble has it (shaped like the GT
    # segment's ranges, ``(n_chunks, n_blocks)`` uint8): the alleles every call holds when
    # every call holds that many and none is missing, else 0. Where it is the arrays'
    # ploidy the block's call_genotype_mask is all False and its manifest leaves the chunk
    # out (zarr gives the fill value, False, reading nothing; bio2zarr's store writes no
    # such chunk). None: not known (no GT, or a store indexed before the counts were
    # carried); 0 in a row: that chunk's not known. Unknown chunks are referenced.
    gt_complete: np.ndarray | None = None
    # Each array's codec configuration version (by array name, not segment) as a store's
    # references record it, for ranges of an existing store's chunks alone (an append that
    # wrote none): its segments are still those that version was written for, so the
    # references written again keep it (an INFO array of segments stored before they were
    # rearranged stays version 1, which a codec older than the rearrangement reads). None:
    # chunks this version wrote, whose arrays take vcfvirtual_codec.spec.config_version's
    # (the newest, so at least that of any older chunk they are joined to).
    config_versions: Mapping[str, int] | None = None


GT_SEGMENT = segment_name("FORMAT", "GT")


def complete_counts(ranges: SegmentRanges) -> np.ndarray | None:
    """The GT blocks' complete counts of ``ranges`` (:attr:`SegmentRanges.gt_complete`),
    0 (not known) where they were not carried; None without a GT segment. For joining
    ranges of parts written apart, or a store's with new parts'."""
    gt = ranges.segments.get(GT_SEGMENT)
    if gt is None:
        return None
    if ranges.gt_complete is not None:
        return ranges.gt_complete
    return np.zeros(gt.offsets.shape, np.uint8)


# What a layout's writer returns: one range per variants chunk shared by every array
# (raw, bgzf), or each array's own (columns).
CacheRanges = ChunkRanges | SegmentRanges


def chunk_byte_ranges(chunk_starts: np.ndarray, end: int) -> ChunkRanges:
    """The byte range of each chunk: from its start to the next chunk's start.

    Parameters
    ----------
    chunk_starts : numpy.ndarray
        Offset in the cache where each chunk begins, ascending.
    end : int
        Offset where the last chunk ends.

    Returns
    -------
    ChunkRanges
        Offsets and lengths, uint64.
    """
    offsets = np.asarray(chunk_starts).astype(np.uint64)
    ends = np.append(offsets[1:], np.uint64(end))
    return ChunkRanges(offsets, ends - offsets)


def open_cache(tmp_cache: Path) -> AbstractContextManager[IO[Any]]:
    """The cache's temporary opened for writing, flushed to disk on success; OS errors
    made one :class:`~vcfvirtual.errors.OutputWriteError`.

    Parameters
    ----------
    tmp_cache : Path
        Where the cache is written until complete (renamed into place by the caller).

    Returns
    -------
    context manager
        Yielding the binary file.
    """
    return output_file(tmp_cache, "the cache", "cache_path=")


def local_target(target: CacheTarget) -> Path:
    """The local path of a layout that writes one file (staged locally, then uploaded,
    when its cache is named by URL: the plan never hands it a URL)."""
    if isinstance(target, str):
        raise ValueError(f"{target}: a one-file cache is written locally, then uploaded")
    return target


def make_parts_folder(tmp_cache: Path) -> None:
    """The folder of a cache made of parts, under its temporary name; an OS error made
    one :class:`~vcfvirtual.errors.OutputWriteError`."""
    try:
        tmp_cache.mkdir(exist_ok=True)
    except OSError as e:
        raise OutputWriteError(tmp_cache, f"cannot write the cache: {e.strerror}", hint=write_hint(e)) from None


@dataclass(frozen=True)
class Continuation:
    """Where an append's records go on from (``index --append``): the store's chunk
    length, how many parts it has (the new ones are numbered after them), and its last
    chunk when partial: its records (``lead_records``, which the first new chunk
    completes) and where each of its segments is, to be joined with the new records'
    (:mod:`vcfvirtual.cache.columns_join`)."""

    chunk_length: int
    first_part: int
    # The store's header, which every new part is planned from (a new file may declare
    # fewer fields): where it is stored, a cache's first part, after its magic.
    header_source: str
    header_offset: int
    lead_records: int = 0
    lead_segments: tuple[StoredSegment, ...] = ()


@dataclass(frozen=True)
class PartitionedRun:
    """Where a partitioned index runs its tasks: ``executor`` (a process pool, a Dask
    cluster's, or this process), running ``workers`` at once; ``progress`` as asked.
    ``renew`` gives a new process pool when a worker of this one died (which breaks a
    process pool; None: the executor recovers by itself, as Dask reschedules a dead
    worker's tasks, or cannot break). Inputs named by URL are read with
    ``storage_options``."""

    executor: Executor
    workers: int
    progress: bool | None
    renew: Callable[[], Executor] | None = None
    storage_options: StorageOptions = None  # fsspec options for inputs named by URL
    continuation: Continuation | None = None  # an append's: the records go on from a store
    # Runs a function in every worker process of a cluster that outlives the run (Dask's
    # Client.run); None for a pool that ends with it.
    on_workers: Callable[[Callable[[], None]], Any] | None = None


@dataclass(frozen=True)
class FilesRun:
    """Several files indexed in one pass, one after another (no workers): ``paths`` in
    store order, chunked by ``chunk_length_for`` their first header (or as
    ``continuation`` says, appending), read with ``storage_options``."""

    paths: tuple[str, ...]
    chunk_length_for: ChunkLengthFor
    progress: bool | None
    storage_options: StorageOptions = None
    continuation: Continuation | None = None


@runtime_checkable
class SinglePassLayout(Protocol):
    """A layout that writes several files' records in one pass (the columns layout):
    without workers, a first phase over the files would only read every record twice."""

    def write_files(self, files: FilesRun, tmp_cache: CacheTarget) -> tuple[ScanResult, CacheRanges]:
        """Scan ``files`` once, one after another, writing the cache to ``tmp_cache``.

        Raises
        ------
        HeaderError
            The files' headers are not compatible.
        OutputWriteError, NotBCFError, CorruptBCFError
            As :meth:`CacheLayout.write_serial`.
        """
        ...


class CacheLayout(Protocol):
    """One layout of the transcode cache: how it is written from one serial scan, and
    from partitions scanned apart. A new layout is one module implementing this and one
    entry in :data:`vcfvirtual.cache.layouts.LAYOUT_WRITERS`."""

    name: LayoutName
    # The cache's default file suffix (after the BCF's name).
    suffix: str
    # Whether partition workers must write their inflated stream bytes (segments) for
    # write_partitioned; otherwise it reads the source blocks (Merged.pieces) itself.
    needs_segments: bool
    # What the first phase of a partitioned run keeps of each record: every record's
    # facts (the caller places the chunks), or counts (the layout's tasks place them).
    facts: Facts
    # Its chunk length rule's bounds (ChunkBounds): a chunk of every sample's genotypes
    # within max_chunk_bytes, at most max_chunk_length variants; sites_only_chunk_length
    # variants when there are no samples.
    max_chunk_bytes: int
    max_chunk_length: int
    sites_only_chunk_length: int
    # Whether the cache is the uncompressed BCF stream itself: an uncompressed BCF then
    # serves as its own cache (zero copy).
    uncompressed_stream: bool
    # Whether the arrays with a samples dimension are chunked in samples blocks (the store
    # records samples_chunk_size); otherwise a chunk holds every sample.
    samples_blocked: bool
    # Whether the cache holds rlen as resolved from INFO/END when written, so that
    # variant_length's codec reads no END key.
    rlen_resolved: bool

    def chunk_records(self, f: BinaryIO, offset: int, size: int) -> int | None:
        """How many records the chunk at ``offset`` (``size`` bytes) of the cache open as
        ``f`` holds, read cheaply from the cache; None when that needs a decode.

        Raises
        ------
        OSError
            The cache cannot be read.
        """
        ...

    def chunk_length(self, n_samples: int, ploidy: int, itemsize: int = 1) -> int:
        """Variants per chunk unless asked otherwise, for records of ``n_samples`` calls
        of ``ploidy`` (genotypes of ``itemsize`` bytes each), within the bounds."""
        ...

    def write_serial(self, source: SerialSource, tmp_cache: CacheTarget) -> tuple[ScanResult, CacheRanges]:
        """Scan ``source`` once, writing the cache to ``tmp_cache`` as it goes.

        Parameters
        ----------
        source : SerialSource
            The BCF and how to scan it.
        tmp_cache : Path or str
            The cache's temporary name; a URL only for a layout made of parts.

        Returns
        -------
        tuple of (ScanResult, ChunkRanges or SegmentRanges)
            What the scan learnt, and where each chunk (or segment) is in the cache.

        Raises
        ------
        OutputWriteError
            The cache could not be written.
        NotBCFError, HeaderError, CorruptBCFError
            The input is not a readable BCF.
        """
        ...

    def write_partitioned(self, merged: Merged, tmp_cache: CacheTarget, run: PartitionedRun) -> CacheRanges:
        """Write the cache of partitions scanned apart and merged.

        Parameters
        ----------
        merged : Merged
            The merged scan, with the source pieces and (if ``needs_segments``) the
            partitions' segments, in stream order.
        tmp_cache : Path or str
            The cache's temporary name; a URL only for a layout made of parts.
        run : PartitionedRun
            Where the partitions were scanned: a layout may write its cache there too.

        Returns
        -------
        ChunkRanges or SegmentRanges
            Where each chunk (or segment) is in the cache.

        Raises
        ------
        OutputWriteError
            The cache could not be written.
        """
        ...
