"""Layout ``columns``: every array of a variants chunk stored apart, compressed on its own.

The scan's inflated records are gathered one variants chunk at a time, split into
segments (:mod:`vcfvirtual.cache.columns_demux`: one per fixed column, per INFO key, per
FORMAT key and samples block) and each segment is written as a 36-byte preamble followed
by its compressed bytes. One segment is one Zarr chunk's byte range, so a read of
``variant_position`` or of ten samples' genotypes touches only those bytes.

File: ``FILE_MAGIC``, the BCF header as stored in the stream (magic, ``l_text``, text),
then the segments, chunk after chunk. Formats and measurements:
``benchmarks/FINDINGS-columns.md``; the interface with the codec: the preamble
(``PREAMBLE``), the kind codes (``KIND_CODES``) and the compressors (``COMPRESSORS``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import BrokenExecutor, Executor, Future, ThreadPoolExecutor, as_completed, wait
from typing import IO, TYPE_CHECKING, Any, BinaryIO

import numpy as np
from numcodecs import Blosc, Zstd
from vcfvirtual_codec import columns as codec_columns
from vcfvirtual_codec.bcf import records
from vcfvirtual_codec.segment_transforms import info_planes, position_deltas, value_planes

from .._progress import byte_bar, phase, record_bar
from ..bcf.csi import RecordStart
from ..bcf.fields import EVERY_FIELD, FieldChoice, map_fields
from ..bcf.header import BCFHeader
from ..errors import CorruptBCFError, StaleCacheError, VcfVirtualError
from ..io.outputs import COLUMNS_CACHE_MAGIC, COLUMNS_CACHE_SUFFIX
from ..io.sources import StorageOptions, source_size
from ..scan.kernel import new_stats, stats_keys
from ..scan.parallel import Facts, Merged, check_compatible, signals_held
from ..scan.results import PartitionScan, RecordSummary, RunFacts, RunWindow, ScanResult, fold_stats
from ..scan.scanner import header_bytes, read_first_record, read_header, scan_partition
from . import columns_demux as demux
from . import columns_join
from . import columns_parts as parts
from .base import (
    CacheTarget,
    ChunkBounds,
    ChunkRanges,
    FilesRun,
    PartitionedRun,
    SegmentRanges,
    SerialSource,
    make_parts_folder,
)
from .columns_join import StoredSegment
from .names import LayoutName, effective_samples_chunk_size, part_name, segment_name

if TYPE_CHECKING:
    from tqdm import tqdm

logger = logging.getLogger(__name__)

FILE_MAGIC = COLUMNS_CACHE_MAGIC
# The segment format is the codec's (it reads what this writes): preamble, flags and kind
# codes come from there.
PREAMBLE = codec_columns.PREAMBLE
FLAG_GT_SHIFTED = codec_columns.FLAG_GT_SHIFT  # int8 GT bytes stored minus GT_SHIFT
FLAG_GT_ALL_PHASED = codec_columns.FLAG_GT_ALL_PHASED
FLAG_GT_NONE_PHASED = codec_columns.FLAG_GT_NONE_PHASED
FLAG_GT_ALLELES = codec_columns.FLAG_GT_ALLELES
FLAG_GT_PACKED = codec_columns.FLAG_GT_PACKED
FLAG_POSITION_DELTA = codec_columns.FLAG_POSITION_DELTA
FLAG_VALUE_PLANES = codec_columns.FLAG_VALUE_PLANES
FLAG_INFO_PLANES = codec_columns.FLAG_INFO_PLANES
KIND_CODES = codec_columns.SEGMENT_KINDS
DEFAULT_SAMPLES_CHUNK_SIZE = 10_000  # bio2zarr's default
# The layout chunks the samples too, so a read decodes one samples block of a variants
# chunk, never the whole row: its variants chunks are bio2zarr's 1,000 (a first 1,000
# rows, a region, variant_position cost no more chunks than bio2zarr's store), unless one
# chunk of all samples' calls would pass MAX_CHUNK_BYTES, which bounds the index pass's
# memory (it holds a variants chunk of every sample, and two samples blocks of its
# segments: ~0.5 GB peak RSS at 100,000 samples x 1,000 variants).
CHUNK_LENGTH = 1_000
MAX_CHUNK_BYTES = 256 * 1024 * 1024
# A BCF with no samples (sites only) has no genotype matrix to bound, and 1,000 records
# make chunks of ~4 KB an array: every chunk pays a segment's preamble, a compressor's
# set-up on write and read, a reference, zarr's per-chunk dispatch (~0.8 ms) and, remote,
# a request. Its chunks are 10,000 variants (as the raw and bgzf layouts' bound). On the
# sites-only cohort of docs/benchmarks.md (327,359 sites, 41 INFO fields): index CPU 5.9
# -> 3.1 s, cache 45.1 -> 43.0 MB, references 980 -> 135 KB, and a fresh process reading
# variant_AF 0.78x the time it took at 1,000 (1.38x `bcftools query`, from 1.92x).
SITES_ONLY_CHUNK_LENGTH = 10_000
# Compressor of each segment (benchmarks/storage_encodings.py, docs/benchmarks.md "Storage
# per array"): GT, most of the bytes, with Blosc bit-shuffle (the shift makes each allele
# bit one bit plane) and Zstd level 1 over 4 MiB blocks. Blosc's own block size for a
# level-1 Zstd is small; 4 MiB blocks give Zstd whole runs of a plane: on cohort A the GT
# segments are 48 MB against 90 MB with lz4 level 9 (the encoding before, and 55 MB with
# bio2zarr's Blosc zstd level 7 and its block size), compressed about as fast (0.10 vs
# 0.08 s of CPU per 140 MB; level 5 would be 0.36 s) and decompressed as fast. A reader of
# any version decodes it: a Blosc frame names its codec and block size. The rest with
# Zstd 3 (IDs 0.20 -> 0.07 MB on A against Zstd 1; these segments are small, so the level
# costs little time).
GT_BLOCK_SIZE = 4 * 1024 * 1024
COMPRESSORS = {
    "blosc": Blosc(cname="zstd", clevel=1, shuffle=Blosc.BITSHUFFLE, blocksize=GT_BLOCK_SIZE),
    "zstd": Zstd(level=3),
}
# A GT block of packed alleles (FLAG_GT_PACKED) in a "blosc" segment: Blosc zstd 1 over
# 4 MiB blocks, not shuffled (the bits of a byte are already 8, 4 or 2 calls' alleles).
# Measured (CPU ms, one thread, load ~1.3) on cohort A's chunk 5 (1,000 x 10,000 diploid):
#   values                            packed  BITSHUFFLE: bytes, compress, decompress   NOSHUFFLE
#   A's own (0/1)                     1 bit   454,310  5.1  2.3                        454,310  3.8  1.8
#   + 1% calls missing (random)       2 bits  1,052,868  17.9  8.5                     717,813  10.7  4.4
#   + 5% calls missing                2 bits  2,030,331  21.0  8.2                     1,207,248  17.2  6.8
#   + 1% missing, 10% records' alt    4 bits  1,213,509  28.3  12.1                    1,026,846  20.8  8.7
#     alleles 1..5
# (the same blocks' int8 alleles bit-shuffled, as before: 470,295 / 1,837,868 / 4,535,356 /
# 1,965,554 bytes, compressed in 20 / 48 / 73 / 54 ms). NOSHUFFLE wins at every width.
PACKED_BLOSC = Blosc(cname="zstd", clevel=1, shuffle=Blosc.NOSHUFFLE, blocksize=GT_BLOCK_SIZE)
# FORMAT fields other than GT, their values in byte planes: Zstd 5 (a "zstd" frame as the
# references say; the level is the writer's alone). On cohort B against Zstd 3: call_PL
# 7.20 -> 6.88 MB, call_AD 6.19 -> 5.84, call_GQ 3.87 -> 3.92 (bio2zarr's 7.07, 5.83,
# 3.91), at ~1.5x the compress CPU of level 3 (0.25 s per 38 MB of PL).
FORMAT_VALUES_ZSTD = Zstd(level=5)
# INFO fields, rearranged (FLAG_INFO_PLANES): Zstd 5, and 7 for strings (a segment whose
# types include char). On the sites-only cohort of benchmarks/wide_info.py (ours / bio2zarr's
# MB per field): Integer 0.77 / 0.78, Number=2 Integer 1.44 / 1.50, Float 1.175 / 1.168, AF
# 1.006 / 1.105, String 0.301 / 0.316 (at Zstd 5: 0.327), Flag 0.042 / 0.052. Level 7
# for every field would cost ~1.3 s of compress CPU for the cohort's 41 fields against
# 0.6 at 5 and 0.3 at 3 (whose AF is 1.150 MB), for 0.08 MB.
INFO_ZSTD = Zstd(level=5)
INFO_TEXT_ZSTD = Zstd(level=7)
COMPRESS_THREADS = 2
# A chunk of up to this size of records is demuxed whole, into one of two segment buffers
# used in turn (its segments compressed while the next chunk is read into the other); a
# larger one a samples block at a time (ColumnsWriter._emit). Whole, a chunk's segments are
# held twice (this chunk's and the last's): at most ~80 MB here, where a chunk of 100,000
# samples x 1,000 variants (200 MB) would hold ~500 MB. Below it, groups would save little
# and cost a few Python calls per block; the kernel's time is the same either way (an extra
# locate of 1,000 records is 0.05 ms). Cohort A's chunks (10,000 samples x 1,000, 20 MB)
# stay whole.
WHOLE_CHUNK_MAX_BYTES = 32 * 1024 * 1024
# The least the records' window grows by (ColumnsWriter.add_block).
WINDOW_STEP = 16 * 1024 * 1024


GT_SEGMENT = segment_name("FORMAT", "GT")


def compressor_of(segment: str, gt_name: str = GT_SEGMENT) -> str:
    """``blosc`` for GT's segments, ``zstd`` for every other."""
    return "blosc" if segment == gt_name else "zstd"


# FORMAT fields whose segments lie beside GT's with local alleles, in this order (before
# GT, after GT): call_LAD's chunk is then the range AD..GT, call_LPL's GT..PL.
LOCAL_NEIGHBOURS = ("AD", "PL")


class SegmentPlan:
    """The segments of one header's chunks, in the order the demux writes them: each
    one's name (``position``, ``info/DP``, ``format/GT``), samples block, and preamble
    identity; and the order they are written to the cache (``write_order``: the demux's,
    or with ``local_alleles`` each samples block's AD, GT and PL segments together)."""

    def __init__(
        self,
        header: BCFHeader,
        samples_chunk_size: int,
        local_alleles: bool = False,
        field_choice: FieldChoice = EVERY_FIELD,
    ):
        self.n_samples = len(header.samples)
        self.samples_chunk_size = effective_samples_chunk_size(samples_chunk_size, self.n_samples)
        self.n_blocks = demux.n_blocks(self.n_samples, self.samples_chunk_size)
        self.info_slot, self.fmt_slot = demux.slot_maps([f.key for f in header.info], [f.key for f in header.formats])
        self.n_info = len(header.info)
        self.n_format = len(header.formats)
        self.end_key = header.end_key
        self.gt_slot = next((i for i, f in enumerate(header.formats) if f.name == "GT"), -1)
        # (name, block, kind code, key, block samples, flags, compressor) per segment.
        self.segments: list[tuple[str, int, int, int, int, int, str]] = []
        for name in demux.FIXED_NAMES:
            # Positions as their differences' byte planes (segment_transforms.py).
            flags = FLAG_POSITION_DELTA if name == "position" else 0
            self.segments.append((name, 0, KIND_CODES[name], -1, 1, flags, compressor_of(name)))
        for f in header.info:
            # Every INFO field's typed column rearranged (segment_transforms.info_planes).
            info = (segment_name("INFO", f.name), 0, KIND_CODES["info"], f.key, 1, FLAG_INFO_PLANES, "zstd")
            self.segments.append(info)
        for slot, f in enumerate(header.formats):
            name = segment_name("FORMAT", f.name)
            # GT shifted; every other FORMAT field's wider values in byte planes.
            flags = FLAG_GT_SHIFTED if slot == self.gt_slot else FLAG_VALUE_PLANES
            for b in range(self.n_blocks):
                width = min(self.samples_chunk_size, self.n_samples - b * self.samples_chunk_size)
                self.segments.append((name, b, KIND_CODES["format"], f.key, width, flags, compressor_of(name)))
        # The demux still splits every field (its slots cover the header's keys); the
        # segments of a field left out are neither compressed nor written.
        field_map = map_fields([f.name for f in header.info], [f.name for f in header.formats], field_choice)
        omitted = {segment_name(*ident.split("/", 1)) for ident in field_map.omitted}
        self.kept = [s for s, segment in enumerate(self.segments) if segment[0] not in omitted]
        self.write_order = list(range(len(self.segments)))
        if local_alleles and self.gt_slot >= 0:  # without GT there is nothing to put beside it
            self.write_order = self._local_order()
        kept = set(self.kept)
        self.write_order = [s for s in self.write_order if s in kept]
        # What the demux writes (segments of fields left out: not even copied): every kept
        # segment at once (``whole``), or a group at a time (``groups``: the variant-level
        # segments, then each samples block's FORMAT segments), flags for the kernel.
        self.whole = self._selection(self.kept)
        by_block: list[list[int]] = [[] for _ in range(self.n_blocks + 1)]
        for s in self.kept:
            name, block, kind = self.segments[s][:3]
            by_block[block + 1 if kind == KIND_CODES["format"] else 0].append(s)
        self.groups = [self._selection(g) for g in by_block if g]

    def _local_order(self) -> list[int]:
        """Segment indices in the order written with local alleles: each block's AD, GT and
        PL segments one after another (in the first GT block's place), the rest as the
        demux writes them. One byte range then holds what a call_LAD or call_LPL chunk needs."""
        index = {(s[0], s[1]): i for i, s in enumerate(self.segments)}
        ad, pl = (segment_name("FORMAT", name) for name in LOCAL_NEIGHBOURS)
        grouped = [
            index[(name, b)] for b in range(self.n_blocks) for name in (ad, GT_SEGMENT, pl) if (name, b) in index
        ]
        order: list[int] = []
        for i, segment in enumerate(self.segments):
            if segment[0] in (ad, GT_SEGMENT, pl):
                if segment[0] == GT_SEGMENT and segment[1] == 0:
                    order.extend(grouped)
                continue
            order.append(i)
        return order

    def _selection(self, segments: list[int]) -> np.ndarray:
        """The demux's flags (uint8, one per segment) selecting ``segments``."""
        flags = np.zeros(len(self.segments), np.uint8)
        flags[segments] = 1
        return flags

    def demux(
        self, buf: np.ndarray, offsets: np.ndarray, scratch: np.ndarray | None, select: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, int, int]:
        """The chunk's segments (:func:`~vcfvirtual.cache.columns_demux.demux_chunk` with
        this plan's slots and blocks): (bytes, bounds, error code, error offset); those
        flagged in ``select`` (``whole``, one of ``groups``; None: all), or with
        ``scratch`` None only their bounds (sizes) and the records checked."""
        segs, bounds, err, at = demux.demux_chunk(
            buf,
            offsets,
            self.info_slot,
            self.fmt_slot,
            self.n_info,
            self.n_format,
            self.n_samples,
            self.samples_chunk_size,
            self.end_key,
            self.gt_slot,
            scratch,
            select,
        )
        return segs, bounds, int(err), int(at)

    def names(self) -> dict[str, bool]:
        """Each segment name written, and whether it is cut into samples blocks."""
        return {self.segments[s][0]: self.segments[s][2] == KIND_CODES["format"] for s in self.kept}


def _encode(job: tuple[np.ndarray, int, int, int, int, int, int, str]) -> bytes:
    """One segment's preamble and compressed bytes (the codec's seal: the CRC32 covers the
    preamble and the compressed frame); a GT block's preamble also says what its calls are
    as a whole (:func:`_gt_block`)."""
    data, kind, flags, key, n, block, width, compressor = job
    # The previous segment's seal (ISA-L's crc32) left this thread's AVX upper halves dirty,
    # which makes the compressors' SSE code wait on them (demux.clear_avx_upper).
    demux.clear_avx_upper()
    complete_count = 0
    if flags & FLAG_GT_SHIFTED:
        data, flags, complete_count, bits = _gt_block(data, n, width, flags)
        codec = PACKED_BLOSC if bits and compressor == "blosc" else COMPRESSORS[compressor]
    else:
        codec = COMPRESSORS[compressor]
    if flags & FLAG_POSITION_DELTA:
        data = position_deltas(data)
    if flags & FLAG_VALUE_PLANES and kind == KIND_CODES["format"]:
        try:
            data, codec = value_planes(data, n, width), FORMAT_VALUES_ZSTD
        except ValueError:
            # Values the demux passed that are no BCF type: stored as they are, unflagged,
            # for the codec to refuse on read with the record named, as before planes.
            flags &= ~FLAG_VALUE_PLANES
    if flags & FLAG_INFO_PLANES and kind == KIND_CODES["info"]:  # the bit of FORMAT's value planes
        data, flags, codec = _as_info_planes(data, n, flags)
    frame = codec.encode(data)
    return codec_columns.seal_segment(
        kind, flags, key, n, block, width, data.shape[0], frame, complete_count=complete_count
    )


def _as_info_planes(data: np.ndarray, n: int, flags: int) -> tuple[np.ndarray, int, Zstd]:
    """An INFO segment rearranged (FLAG_INFO_PLANES) and its compressor; as it is and
    unflagged where its table is no typed column's (values the demux passed that are no
    BCF type), for the codec to refuse on read with the record named."""
    try:
        planes = info_planes(data, n)
    except ValueError:
        return data, flags & ~FLAG_INFO_PLANES, COMPRESSORS["zstd"]
    text = bool((planes[:n] == records.BT_CHAR).any())  # the types come first
    return planes, flags, INFO_TEXT_ZSTD if text else INFO_ZSTD


# Each compression thread's buffer for a GT block rewritten as alleles (_as_alleles),
# reused block after block: a fresh 20 MB array per block costs its page faults again.
_alleles_buffer = threading.local()


def _as_alleles(data: np.ndarray, n: int, width: int, flags: int) -> tuple[np.ndarray, int]:
    """A shifted GT block whose calls are all phased or none stored as the alleles the
    codec decodes from it (codec_columns.alleles_block: FLAG_GT_ALLELES, the shift flag
    cleared), so that reading it is decompressing alone; where it cannot be (records of
    other counts or types), or its phasing is mixed, as it is. ~2 ms of CPU a 20 MB block
    (one pass of the codec's GT kernel), on the compression threads."""
    if not flags & (FLAG_GT_ALL_PHASED | FLAG_GT_NONE_PHASED):
        return data, flags
    buffer = getattr(_alleles_buffer, "array", None)
    if buffer is None or buffer.shape[0] < data.shape[0]:
        buffer = _alleles_buffer.array = np.empty(data.shape[0], np.uint8)
    alleles = codec_columns.alleles_block(data, n, width, buffer)
    if alleles is None:
        return data, flags
    return alleles, (flags & ~FLAG_GT_SHIFTED) | FLAG_GT_ALLELES


# Each compression thread's buffer for an alleles block packed into bits (_as_packed).
_packed_buffer = threading.local()


def _as_packed(data: np.ndarray, n: int, width: int, flags: int) -> tuple[np.ndarray, int, int]:
    """An alleles GT block stored as its values packed into the fewest bits that hold
    them (codec_columns.packed_block: FLAG_GT_PACKED), and those bits; as it is (bits 0)
    where no width does (an allele above 13) or it is no alleles block. One pass packs a
    20 MB block at 1 bit and finds its width (~2.2 ms; a block of 2 or 4 bits is packed
    again): a pass of its own, the alleles rewrite being the codec's GT kernel, which
    knows nothing of widths. The whole encode of A's chunk 5 block: 10.1 against 23.0 ms."""
    if not flags & FLAG_GT_ALLELES:
        return data, flags, 0
    buffer = getattr(_packed_buffer, "array", None)
    if buffer is None or buffer.shape[0] < data.shape[0]:
        # Packed, the block is never longer than its alleles (at 4 bits, half of them + 1).
        buffer = _packed_buffer.array = np.empty(data.shape[0] + 1, np.uint8)
    packed = codec_columns.packed_block(data, n, width, buffer)
    if packed is None:
        return data, flags, 0
    return packed, flags | FLAG_GT_PACKED, int(packed[5 * n])


def _gt_block(data: np.ndarray, n: int, width: int, flags: int) -> tuple[np.ndarray, int, int, int]:
    """A shifted GT block as it is stored: its bytes, flags, the preamble's complete-count
    field and the bits per value of its packing (0: not packed).

    The flags and count say what its calls are as a whole, so that the codec gives
    call_genotype_mask and call_genotype_phased without decompressing the block: every call
    holds the same number of alleles, none missing (mask all False), or all calls are
    phased, or none (bio2zarr's store has each as a small array of its own). A block whose
    calls are all phased or none is stored as the alleles the codec decodes from it
    (:func:`_as_alleles`), packed into the fewest bits that hold them (:func:`_as_packed`).
    demux.gt_block_encode does all of that in one pass for the blocks of one int8 count
    whose alleles fit 1, 2 or 4 bits: alleles 0/1 with no missing call (1 bit; 0.9 ms a
    20 MB block of cohort A), and with missing calls, haploid calls padded by ends (2 bits)
    or alleles up to 13 (4 bits; ~2 ms a 20 MB block with 1% of its calls missing, against
    5.4 ms for the summary, the alleles and the packing one after another). Any other (an
    allele of 14 or more, a value after an end in its call, records of other counts or
    types, mixed phasing) goes through the codec's functions, its summary from that same
    pass; either way the bytes are the same."""
    buffer = getattr(_packed_buffer, "array", None)
    if buffer is None or buffer.shape[0] < data.shape[0] + 1:
        buffer = _packed_buffer.array = np.empty(data.shape[0] + 1, np.uint8)
    count, all_phased, none_phased, packed_length = demux.gt_block_encode(data, n, width, buffer)
    flags |= FLAG_GT_ALL_PHASED if all_phased else 0
    flags |= FLAG_GT_NONE_PHASED if none_phased else 0
    if packed_length:
        bits = int(buffer[5 * n])  # the bits byte after the table: 1, 2 or 4
        return buffer[:packed_length], (flags & ~FLAG_GT_SHIFTED) | FLAG_GT_ALLELES | FLAG_GT_PACKED, count, bits
    data, flags = _as_alleles(data, n, width, flags)
    data, flags, bits = _as_packed(data, n, width, flags)
    return data, flags, count, bits


class ColumnsWriter:
    """A scan's sink (:class:`~vcfvirtual.scan.sink.RecordSink`) writing the columns cache.

    It holds the inflated stream from the current chunk's first record on; once the scan
    has passed the next chunk's first record, the chunk is whole: it is demuxed,
    compressed (on ``threads`` threads: the compressors release the GIL) and appended.
    Memory: one chunk of records, two groups of segments (one being compressed while the
    next is demuxed: a chunk of up to WHOLE_CHUNK_MAX_BYTES of records is one group, a
    larger one's are a samples block each, see :meth:`_emit`) and one chunk's compressed
    bytes; on cohort C (100,000 samples x 1,000 variants) 196 MiB of records and two 22 MiB
    blocks, a 492-528 MB peak RSS for the whole index.
    """

    def __init__(
        self,
        fileobj: IO[Any],
        path: str,
        layout: ColumnsLayout,
        threads: int = COMPRESS_THREADS,
    ):
        self.fileobj = fileobj
        self.path = path
        self.layout = layout  # its samples blocks, local alleles and fields chosen
        self.pool = ThreadPoolExecutor(max(1, threads))
        self.plan: SegmentPlan | None = None
        self.chunk_length = 0
        # The stream from the current chunk's first byte to the last byte received, in one
        # buffer reused chunk after chunk (the demux reads a chunk as one array; a fresh one
        # per chunk costs a page fault per 4 KiB).
        self.window = np.empty(0, np.uint8)
        self.window_start = 0  # stream offset of window[0]
        self.window_len = 0
        self.offsets: list[np.ndarray] = []  # record starts not yet written, by batch
        self.n_offsets = 0
        self.records_seen = 0
        # The demux's output, likewise: two, used in turn, each reused once the
        # compressions reading it (``busy``) are done. A small chunk's segments are demuxed
        # into one as a whole and compressed while the scan reads the next chunk; a large
        # chunk's a group at a time (_emit), one group compressed while the next is demuxed.
        self.scratch = [np.empty(0, np.uint8), np.empty(0, np.uint8)]
        self.busy: list[list[Future[bytes]]] = [[], []]
        self.turn = 0
        # The previous chunk's compressions, in the order written: (segment index, its bytes).
        self.in_flight: list[tuple[int, Future[bytes]]] = []
        self.written = 0
        # Per segment: one (offset, length, complete count) per chunk (FORMAT: per chunk
        # and block).
        self.ranges: list[list[tuple[int, int, int]]] = []
        # Appending: the store's partial last chunk, which the first chunk written here
        # completes: its records, and its segments' decompressed bytes by segment index.
        self.lead_records = 0
        self.lead: dict[int, np.ndarray] | None = None

    def header_parsed(self, header: BCFHeader, chunk_length: int) -> None:
        self.start_part(header, self._take(0, header.size).tobytes(), chunk_length)
        self._drop(header.size)

    def start_part(
        self,
        header: BCFHeader,
        stored_header: bytes,
        chunk_length: int,
        lead: tuple[int, tuple[StoredSegment, ...]] = (0, ()),
        storage_options: StorageOptions = None,
    ) -> None:
        """Begin the part with its magic and the store's header as stored (``stored_header``:
        the stream's first ``header.size`` bytes), its chunks ``chunk_length`` records
        each. A serial scan's part starts where the header ends; a run's (a partitioned
        index) at its first record, stream offset 0. ``lead``: appending, the records and
        segments of the store's partial last chunk, which the first chunk completes (read
        here, checked, with ``storage_options`` for a cache named by URL)."""
        if chunk_length < 1:
            raise VcfVirtualError(self.path, "the columns layout needs the variants chunk size before the records")
        self.chunk_length = chunk_length
        layout = self.layout
        self.plan = SegmentPlan(header, layout.samples_chunk_size, layout.local_alleles, layout.field_choice)
        self.ranges = [[] for _ in self.plan.segments]
        if lead[0]:
            self.lead_records, self.lead = lead[0], self._lead_payloads(lead[1], lead[0], storage_options)
        self._write(FILE_MAGIC)
        self._write(stored_header)

    def _lead_payloads(
        self, stored: tuple[StoredSegment, ...], records: int, storage_options: StorageOptions
    ) -> dict[int, np.ndarray]:
        """The stored partial chunk's segments, decompressed, by this plan's segment index:
        one for every segment written (the store was written with this plan's fields)."""
        plan = self.plan
        assert plan is not None
        index = {(plan.segments[s][0], plan.segments[s][1]): s for s in plan.write_order}
        found = {(seg.name, seg.block): seg for seg in stored}
        if set(found) != set(index):
            missing = sorted(set(index) - set(found)) or sorted(set(found) - set(index))
            raise VcfVirtualError(self.path, f"the store's last chunk and the new records differ in segments {missing}")
        return {index[key]: columns_join.read_payload(seg, records, storage_options) for key, seg in found.items()}

    def _joined(self, data: dict[int, np.ndarray], n: int) -> dict[int, np.ndarray]:
        """Each segment of the store's partial chunk joined to the same segment of the
        ``n`` records that complete it. A stored segment whose columns do not hold its
        records (its CRC32 and length passed: a cache made to pass them) is refused."""
        plan, lead = self.plan, self.lead
        assert plan is not None and lead is not None
        try:
            # Each stored segment dropped once joined (_emit joins a group at a time).
            return {
                s: columns_join.join_payloads(plan.segments[s][2], lead.pop(s), self.lead_records, d, n)
                for s, d in data.items()
            }
        except ValueError as e:
            raise StaleCacheError(
                self.path, f"the store's last chunk cannot be completed: {e}", hint="index the files again"
            ) from None

    def _chunk_records(self) -> int:
        """Records of the next chunk to emit: the first completes a stored partial chunk."""
        return self.chunk_length - self.lead_records if self.lead is not None else self.chunk_length

    def add_block(self, raw: bytes | memoryview | None, data: bytes | memoryview) -> None:
        n = len(data)
        if self.window_len + n > self.window.shape[0]:
            # In place (realloc: a large buffer's pages are remapped, not copied and faulted
            # in again): growing to one 81 MB chunk took 0.5-0.8 s by copies, 0.2 s so.
            # No view of the window outlives the call that took it (_take). By an eighth, not
            # doubled: numpy fills what it adds with zeros, so all of it is resident (on C, a
            # 196 MiB chunk and its next records held 255 MiB doubled, 205 MiB so). At least
            # WINDOW_STEP, so that the first chunk's window does not grow dozens of times
            # (while small enough for the heap, realloc copies it).
            grown = self.window.shape[0] + max(self.window.shape[0] // 8, WINDOW_STEP)
            self.window.resize(max(self.window_len + n, grown), refcheck=False)
        self.window[self.window_len : self.window_len + n] = np.frombuffer(data, np.uint8)
        self.window_len += n

    def records_scanned(self, offsets: np.ndarray) -> None:
        self.offsets.append(np.asarray(offsets, np.int64))
        self.n_offsets += len(offsets)
        self.records_seen += len(offsets)

    def scanned_to(self, stream_offset: int) -> None:
        # A chunk is whole once the next chunk's first record is known (its end).
        if self.n_offsets <= self._chunk_records():
            return
        pending = np.concatenate(self.offsets)
        done = 0
        while pending.shape[0] - done > (size := self._chunk_records()):
            end = int(pending[done + size])
            self._emit(pending[done : done + size], end)
            done += size
        self.offsets = [pending[done:]]
        self.n_offsets = pending.shape[0] - done

    def close(self, stream_size: int) -> None:
        """Write the last chunk (its records end at the stream's end)."""
        if self.n_offsets:
            self._emit(np.concatenate(self.offsets), stream_size)
        self.offsets, self.n_offsets = [], 0
        self.flush()

    def segment_ranges(self, n_chunks: int, part: str) -> SegmentRanges:
        """Each segment name's ranges, ``(n_chunks,)`` or ``(n_chunks, n_blocks)`` (uint64),
        every chunk in the one part ``part`` this writer wrote, and the GT blocks'
        complete counts (:attr:`~vcfvirtual.cache.base.SegmentRanges.gt_complete`)."""
        assert self.plan is not None
        grouped: dict[str, list[list[tuple[int, int, int]]]] = {}
        for s in self.plan.kept:
            grouped.setdefault(self.plan.segments[s][0], []).append(self.ranges[s])
        out = {}
        gt_complete = None
        blocked = self.plan.names()
        for name, per_block in grouped.items():
            table = np.asarray(per_block, np.uint64).reshape(len(per_block), n_chunks, 3).transpose(1, 0, 2)
            if not blocked[name]:
                table = table[:, 0]
            out[name] = ChunkRanges(np.ascontiguousarray(table[..., 0]), np.ascontiguousarray(table[..., 1]))
            if name == GT_SEGMENT:
                gt_complete = table[..., 2].astype(np.uint8)
        compressors = {segment[0]: segment[6] for segment in self.plan.segments}
        return SegmentRanges(
            out,
            compressors,
            self.plan.samples_chunk_size,
            (part,),
            np.zeros(n_chunks, np.int32),
            gt_complete=gt_complete,
        )

    def _write(self, data: bytes) -> None:
        self.fileobj.write(data)
        self.written += len(data)

    def _take(self, start: int, end: int) -> np.ndarray:
        """Stream bytes ``[start, end)``: a view of the window, valid until :meth:`_drop`."""
        lo, hi = start - self.window_start, end - self.window_start
        if lo < 0 or hi > self.window_len:
            raise CorruptBCFError(
                self.path, "the stream ended inside a record", offset=self.window_start + self.window_len
            )
        return self.window[lo:hi]

    def _drop(self, end: int) -> None:
        """Forget the stream before ``end``: the bytes after it (part of the next chunk)
        move to the window's start."""
        keep = self.window_len - (end - self.window_start)
        self.window[:keep] = self.window[end - self.window_start : self.window_len]
        self.window_start, self.window_len = end, keep

    def unscanned(self, start: int) -> np.ndarray:
        """The stream from ``start`` to the last byte received (:class:`~vcfvirtual.scan.sink.StreamLender`):
        the scan walks the records in the window, valid until the next ``add_block`` or ``scanned_to``."""
        return self._take(start, self.window_start + self.window_len)

    def skip_to(self, offset: int) -> None:
        """Forget the stream before ``offset``, the first record of the run's first chunk
        (the bytes before are records of the run before, read past)."""
        self._drop(offset)

    def _make_room(self, need: int, room: int) -> None:
        """A segment buffer (the turn's) of at least ``need`` bytes: if short, the old one
        freed before one of ``room`` is made. Left to itself the demux allocates a buffer of
        exactly what it needs when the one it is given is short, while the old one still
        lives: on C (100,000 samples) every chunk a little larger than the largest before
        held two 190 MB buffers at once, when chunks were demuxed whole. Pages never written
        cost no memory, so the headroom is free."""
        if self.scratch[self.turn].shape[0] < need:
            self.scratch[self.turn] = np.empty(0, np.uint8)
            self.scratch[self.turn] = np.empty(room, np.uint8)

    def _emit(self, offsets: np.ndarray, end: int) -> None:
        """Demux, compress and append the chunk whose records start at ``offsets`` and end at ``end``.

        A chunk of up to WHOLE_CHUNK_MAX_BYTES of records is demuxed whole, in one call, into
        one segment buffer. A larger one a group of segments at a time (the variant-level
        columns, then each samples block's FORMAT segments: ~20 MB at 100,000 samples x
        1,000 variants, against ~200 MB for the whole chunk), each group into the buffer
        not used by the group before: the pass then holds the chunk's records and two
        groups' segments, not the records and their segments twice over. Either way a
        group is compressed while the next is demuxed (or, the chunk's last, while the scan
        reads the next chunk), and a buffer is reused once the compressions reading it are
        done. Every segment's bytes are the same either way; the segments are made in
        another order, and written in the same one (``write_order``)."""
        plan = self.plan
        assert plan is not None
        start = int(offsets[0])
        buf = self._take(start, end)
        rel = offsets - start
        n = offsets.shape[0]
        total = n + (self.lead_records if self.lead is not None else 0)
        chunk_bytes = end - start
        if chunk_bytes <= WHOLE_CHUNK_MAX_BYTES:
            # The segments' size, guessed: they may pass the records' by the counts and
            # type codes (5 bytes a record per segment: ~1.2x for a sites-only, 41-INFO-field
            # BCF); if short, the demux makes a buffer of its own, kept for the chunks after.
            guess = chunk_bytes + chunk_bytes // 8 + (1 << 20)
            groups = [(plan.whole, guess, guess + chunk_bytes // 8)]
        else:
            groups = self._group_sizes(buf, rel, start)
            self.turn = 0  # a chunk of one large group (sites-only) then uses one buffer only
        futures: dict[int, Future[bytes]] = {}
        for g, (select, need, room) in enumerate(groups):
            wait(self.busy[self.turn])  # the compressions still reading this buffer
            self._make_room(need, room)
            data = self._demux_group(buf, rel, start, select)
            if g == 0:
                self.flush()  # the previous chunk's segments are written before these
            if self.lead is not None:  # the store's partial chunk, completed by these records
                data = self._joined(data, n)
            submitted = {s: self.pool.submit(_encode, (d, *_job(plan.segments[s], total))) for s, d in data.items()}
            self.busy[self.turn] = list(submitted.values())
            futures.update(submitted)
            self.turn = 1 - self.turn
        self._drop(end)  # every byte of the chunk is in its segments now
        self.lead = None
        self.in_flight = [(s, futures[s]) for s in plan.write_order]

    def _group_sizes(self, buf: np.ndarray, offsets: np.ndarray, start: int) -> list[tuple[np.ndarray, int, int]]:
        """A large chunk's groups of segments (the plan's ``groups``), each with the bytes
        its segments take and the room to make for it (an eighth more: the next chunks'
        groups are then rarely larger), from the demux's sizes (the records are checked
        here, before any group is demuxed)."""
        plan = self.plan
        assert plan is not None
        _, bounds, err, at = plan.demux(buf, offsets, None)
        if err:
            raise self._corrupt(err, start + at)
        sizes = np.diff(bounds)
        groups = []
        for select in plan.groups:
            need = int(sizes[select.view(bool)].sum())
            groups.append((select, need, need + need // 8 + (1 << 20)))
        return groups

    def _demux_group(
        self, buf: np.ndarray, offsets: np.ndarray, start: int, select: np.ndarray
    ) -> dict[int, np.ndarray]:
        """The segments ``select`` flags, demuxed into the turn's buffer: views of it by segment index."""
        plan = self.plan
        assert plan is not None
        segs, bounds, err, at = plan.demux(buf, offsets, self.scratch[self.turn], select)
        if err:
            raise self._corrupt(err, start + at)
        if segs.shape[0] > self.scratch[self.turn].shape[0]:
            self.scratch[self.turn] = segs
        return {int(s): segs[bounds[s] : bounds[s + 1]] for s in np.flatnonzero(select)}

    def _corrupt(self, err: int, offset: int) -> CorruptBCFError:
        return CorruptBCFError(
            self.path, f"cannot split the record into columns: {records.ERROR_TEXT[int(err)]}", offset=offset
        )

    def flush(self) -> None:
        """Append the segments still being compressed, in order."""
        in_flight, self.in_flight = self.in_flight, []
        for s, future in in_flight:
            blob = future.result()
            # With its range, the complete count _encode sealed in the preamble (a GT
            # block's; 0 for every other segment): SegmentRanges.gt_complete.
            self.ranges[s].append((self.written, len(blob), PREAMBLE.unpack_from(blob)[3]))
            self._write(blob)


def _job(segment: tuple[str, int, int, int, int, int, str], n: int) -> tuple[int, int, int, int, int, int, str]:
    """What :func:`_encode` needs of a planned segment besides its bytes."""
    _, block, kind, key, width, flags, compressor = segment
    return kind, flags, key, n, block, width, compressor


class ColumnsLayout(ChunkBounds):
    """The columns cache, written as the scan reads, or from the partitions' segments."""

    name: LayoutName = "columns"
    suffix = COLUMNS_CACHE_SUFFIX  # no BCF: its name says what it is
    # A partitioned run's tasks each write a part: a run of whole chunks read again from
    # the sources (columns_parts), the segments a serial run writes, cut between chunks.
    needs_segments = False  # its tasks read the sources again
    facts: Facts = "counts"  # its tasks find their chunks' records, and summarise them
    max_chunk_bytes = MAX_CHUNK_BYTES
    max_chunk_length = CHUNK_LENGTH
    sites_only_chunk_length = SITES_ONLY_CHUNK_LENGTH
    uncompressed_stream = False
    samples_blocked = True
    rlen_resolved = True  # from END, as the demux writes each chunk

    def __init__(
        self,
        samples_chunk_size: int = DEFAULT_SAMPLES_CHUNK_SIZE,
        local_alleles: bool = False,
        field_choice: FieldChoice = EVERY_FIELD,
    ):
        self.samples_chunk_size = samples_chunk_size
        # Each samples block's AD, GT and PL segments written together (SegmentPlan).
        self.local_alleles = local_alleles
        self.field_choice = field_choice

    def chunk_records(self, f: BinaryIO, offset: int, size: int) -> int | None:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.chunk_records`: the count its
        first segment's preamble records (-1 for bytes that are no segment)."""
        f.seek(offset)
        data = f.read(PREAMBLE.size)
        fields = PREAMBLE.unpack_from(data) if len(data) == PREAMBLE.size else None
        return int(fields[5]) if fields and fields[0] in codec_columns.READ_MAGICS else -1

    def write_serial(self, source: SerialSource, tmp_cache: CacheTarget) -> tuple[ScanResult, SegmentRanges]:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_serial`: one part, in a
        local folder or uploaded as it is written under a URL."""
        part = part_name(0)
        folder = _parts_folder(tmp_cache)
        with parts.part_file(folder, part, source.storage_options) as output:
            writer = ColumnsWriter(output.file, str(source.path), self)
            try:
                scan = source.scan(writer)
                with phase("compress", source.progress):  # the chunks still in the compression pool
                    writer.close(scan.stream_size)
            finally:
                writer.pool.shutdown()
        assert output.fingerprint is not None
        n_chunks = len(scan.chunk_offsets)
        logger.info("%s: %d chunks of %d segments written", source.path, n_chunks, len(writer.ranges))
        return scan, writer.segment_ranges(n_chunks, part)._replace(part_fingerprints=(output.fingerprint,))

    def write_files(self, files: FilesRun, tmp_cache: CacheTarget) -> tuple[ScanResult, SegmentRanges]:
        """See :meth:`vcfvirtual.cache.base.SinglePassLayout.write_files`: the files' records
        in one pass, one file after another, into one part, as a serial run writes one
        file's (no first phase: without workers it would only read every record twice)."""
        go_on = files.continuation
        headers = [(path, *read_first_record(path, files.storage_options)) for path in files.paths]
        check_compatible([(path, header) for path, header, _ in headers])
        header = headers[0][1]
        length = go_on.chunk_length if go_on else int(files.chunk_length_for(header))
        if length < 1:
            raise ValueError(f"variants chunk length must be at least 1, got {length}")
        summary = RecordSummary(length, go_on.lead_records if go_on else 0)
        part = part_name(go_on.first_part if go_on else 0)
        folder = _parts_folder(tmp_cache)
        with parts.part_file(folder, part, files.storage_options) as output:
            writer = ColumnsWriter(output.file, files.paths[0], self)
            try:
                if go_on is None:
                    stored = header_bytes(files.paths[0], header.size, files.storage_options)
                    writer.start_part(header, stored, length)
                else:
                    store_header = read_header(go_on.header_source, files.storage_options, go_on.header_offset)
                    lead = (go_on.lead_records, go_on.lead_segments)
                    writer.start_part(store_header, EMPTY_HEADER, length, lead, files.storage_options)
                scans = _scan_files(headers, writer, summary, files)
                with phase("compress", files.progress):  # the chunks still in the compression pool
                    end = sum(scan.stream_length for scan in scans)
                    writer.scanned_to(end)
                    writer.close(end)
            finally:
                writer.pool.shutdown()
        assert output.fingerprint is not None
        scan = _files_scan(header, scans, summary)
        if go_on is not None and not scan.num_records:  # appending no records: no part
            parts.remove_parts(folder, [part], files.storage_options)
            return scan, SegmentRanges({}, {}, self.samples_chunk_size, (), np.zeros(0, np.int32))
        n_chunks = -(-(scan.num_records + summary.lead) // length) if scan.num_records else 0
        logger.info("%d files: %d chunks written as one part", len(files.paths), n_chunks)
        return scan, writer.segment_ranges(n_chunks, part)._replace(part_fingerprints=(output.fingerprint,))

    def write_partitioned(self, merged: Merged, tmp_cache: CacheTarget, run: PartitionedRun) -> SegmentRanges:
        """See :meth:`vcfvirtual.cache.base.CacheLayout.write_partitioned`: tasks on
        ``executor`` write one part each, a run of whole chunks read again from the
        sources (:mod:`vcfvirtual.cache.columns_parts`); this process only plans the runs
        and joins their ranges."""
        scan = merged.scan
        tasks = parts.plan_runs(merged, storage_options=run.storage_options, continuation=run.continuation)
        folder = _parts_folder(tmp_cache)
        if not tasks and run.continuation is not None:  # appending no records: no part
            return SegmentRanges({}, {}, self.samples_chunk_size, (), np.zeros(0, np.int32))
        if not tasks:  # no records: one part with the header, as a serial run writes
            return self._empty_part(merged, folder, run)
        done: dict[str, parts.RunResult] = {}
        bar = record_bar("write parts", sum(t.n_records for t in tasks), run.progress)
        try:
            executor = run.executor
            while broken := self._run_tasks(
                [t for t in tasks if t.part not in done], executor, folder, scan, done, bar
            ):
                # A worker process died (killed, out of memory): the pool is lost with the
                # tasks it held. Theirs are written again by new processes, once; a part
                # already written is replaced whole (written aside, then renamed).
                if run.renew is None or executor is not run.executor:
                    raise broken
                logger.warning("a worker died (%s): its parts are written again by new worker processes", broken)
                executor = run.renew()
        except BaseException:
            # A folder under a URL is not renamed into place: the parts written go now.
            parts.remove_parts(folder, [t.part for t in tasks], run.storage_options)
            raise
        finally:
            bar.close()
            release_spare_buffers()  # those this process kept, when it ran tasks itself
            if run.on_workers is not None:
                # A cluster's workers outlive the run: the buffers they kept between tasks
                # (hundreds of MB at 10^5 samples) go now.
                with contextlib.suppress(Exception):
                    run.on_workers(release_spare_buffers)
        results = [done[t.part] for t in tasks]
        parts.remove_leftovers(folder)
        logger.info(
            "%d chunks written by %d tasks as %d parts", sum(t.n_chunks for t in tasks), len(tasks), len(results)
        )
        return parts.join_runs(results)

    def _run_tasks(
        self,
        tasks: list[parts.RunTask],
        executor: Executor,
        folder: str,
        scan: ScanResult,
        done: dict[str, parts.RunResult],
        bar: tqdm,
    ) -> BrokenExecutor | None:
        """Run ``tasks`` on ``executor``, each result into ``done``; the pool's breakage
        if a worker died (other failures are raised)."""
        # A pool forks its workers as tasks are submitted (a renewed pool here, first).
        with signals_held():
            futures = {executor.submit(write_run, t, folder, scan.chunk_length, self): t for t in tasks}
        broken = None
        for future in as_completed(futures):
            try:
                done[futures[future].part] = future.result()
            except BrokenExecutor as e:
                broken = e
                continue
            except BaseException:
                # The run is given up (the caller may run it again, counted another way,
                # into the same folder): none of its tasks may still be writing a part then.
                # A task left running truncated a part the second run had written (a CSI
                # index that counted wrong, test_parallel).
                for pending in futures:
                    pending.cancel()
                wait(futures)
                raise
            bar.update(futures[future].n_records)
        return broken

    def _empty_part(self, merged: Merged, folder: str, run: PartitionedRun) -> SegmentRanges:
        scan = merged.scan
        part = part_name(0)
        source = merged.partitions[0].path if merged.partitions else folder
        with parts.part_file(folder, part, run.storage_options) as output:
            writer = ColumnsWriter(output.file, source, self)
            try:
                stored = header_bytes(source, scan.header.size, run.storage_options)
                writer.start_part(scan.header, stored, scan.chunk_length)
                writer.close(0)
            finally:
                writer.pool.shutdown()
        assert output.fingerprint is not None
        return writer.segment_ranges(0, part)._replace(part_fingerprints=(output.fingerprint,))


# A PartSink's limit that no run reaches: every record of the files.
EVERY_RECORD = 1 << 62

# The stored header of every part but the first: the BCF magic and an empty text.
EMPTY_HEADER = b"BCF\x02\x02" + bytes(4)


class _SpareBuffers:
    """A worker process's window and segment buffers, kept from one run's task to the
    next: a fresh ColumnsWriter grows and faults in its buffers anew (three of up to
    200 MB each at 10^5 samples x 1,000 variants), which the serial writer pays once.
    One set per process (a task takes it, or new buffers if another thread holds it);
    :func:`release_spare_buffers` drops it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spare: tuple[np.ndarray, list[np.ndarray]] | None = None

    def lend(self, writer: ColumnsWriter) -> None:
        with self.lock:
            spare, self.spare = self.spare, None
        if spare is not None:
            writer.window, writer.scratch = spare

    def keep(self, writer: ColumnsWriter) -> None:
        with self.lock:
            self.spare = (writer.window, writer.scratch)


_SPARE = _SpareBuffers()


def release_spare_buffers() -> None:
    """Drop the buffers kept between tasks in this process (the caller, once its own
    tasks are done: an index run in a notebook must not hold them after)."""
    with _SPARE.lock:
        _SPARE.spare = None


def _parts_folder(target: CacheTarget) -> str:
    """The folder the parts go in: a URL as it is, a local temporary made now and named
    absolutely (workers need not share the caller's working directory)."""
    if isinstance(target, str):
        return target
    make_parts_folder(target)
    return os.path.abspath(target)


def write_run(task: parts.RunTask, folder: str, chunk_length: int, layout: ColumnsLayout) -> parts.RunResult:
    """Write one part of the cache folder ``folder`` (a path or a URL): the task's
    records, read from its spans, demultiplexed and compressed (module level, so worker
    processes and Dask run it), and summarised per chunk (its region rows). The part
    appears only whole (:func:`~vcfvirtual.cache.columns_parts.part_file`): a task run
    twice writes it once.

    Raises
    ------
    CorruptBCFError
        The spans did not hold the records the first phase counted there.
    OutputWriteError
        The part could not be written.
    """
    first = task.spans[0].path
    summary = RecordSummary(chunk_length, task.lead_records)
    with parts.part_file(folder, task.part, task.storage_options) as output:
        # One compression thread: the other workers have the other cores.
        writer = ColumnsWriter(output.file, first, layout, threads=1)
        _SPARE.lend(writer)
        try:
            # The store's header, read here rather than sent: at 10^5 samples it is megabytes.
            header = read_header(task.header_source, task.storage_options, task.header_offset)
            # Only the first part stores it (as a serial run's one part does); the others
            # an empty one, or a folder of parts at 10^5 samples pays ~1.7 MB a part.
            stored = EMPTY_HEADER
            if task.stores_header:
                stored = header_bytes(task.header_source, header.size, task.storage_options)
            lead = (task.lead_records, task.lead_segments)
            writer.start_part(header, stored, chunk_length, lead, task.storage_options)
            end, stats = _read_spans(task, header, writer, RunWindow(summary, task.skip, task.n_records))
            if writer.records_seen != task.n_records:
                raise CorruptBCFError(
                    first,
                    f"{task.part}: read {writer.records_seen} records where the scan counted "
                    f"{task.n_records}; did an input change during the run?",
                )
            writer.scanned_to(end)
            writer.close(end)
        finally:
            writer.pool.shutdown()
            _SPARE.keep(writer)
    assert output.fingerprint is not None
    rows = summary.arrays()["region_rows"]
    rows[:, 0] += task.first_chunk
    facts = RunFacts(rows, summary.counts(), *stats)
    return parts.RunResult(task.part, writer.segment_ranges(task.n_chunks, task.part), output.fingerprint, facts)


def _read_spans(
    task: parts.RunTask, header: BCFHeader, writer: ColumnsWriter, facts: RunWindow
) -> tuple[int, tuple[np.ndarray, np.ndarray]]:
    """Feed the task's records to ``writer`` (and their facts to ``facts``), span after
    span, stopping once it has them: where its last record ends, in the run's offsets,
    and the INFO and FORMAT value statistics of every record read."""
    sink = parts.PartSink(writer, task.skip, task.n_records)
    n_keys = stats_keys(header)
    info, fmt = new_stats(n_keys), new_stats(n_keys)
    for span in task.spans:
        known = header
        if span.path != task.header_source:
            # Another file's records, read with its own header: it must have the store's
            # samples and keys (a run taking counts from indexes is its first check).
            known = read_header(span.path, task.storage_options)
            check_compatible([(task.header_source, header), (span.path, known)])
        scanned = scan_partition(
            span.path,
            span.start,
            span.end,
            sink=sink,
            storage_options=task.storage_options,
            header=known,
            facts=facts,
        )
        fold_stats(info, scanned.info_stats)
        fold_stats(fmt, scanned.format_stats)
        if scanned.stopped_at is not None:
            return scanned.stopped_at, (info, fmt)
        sink.shift += scanned.stream_length
    return sink.shift, (info, fmt)


def _scan_files(
    headers: list[tuple[str, BCFHeader, RecordStart]], writer: ColumnsWriter, summary: RecordSummary, files: FilesRun
) -> list[PartitionScan]:
    """Each file's records, from its first, to ``writer`` (as one stream) and ``summary``."""
    sink = parts.PartSink(writer, 0, EVERY_RECORD)
    scans = []
    sizes = [source_size(p, files.storage_options) for p in files.paths]  # a request each for a URL
    bar = byte_bar("scan", sum(sizes), files.progress)
    try:
        for (path, header, first), size in zip(headers, sizes, strict=True):
            scanned = scan_partition(
                path, first, None, sink=sink, storage_options=files.storage_options, header=header, facts=summary
            )
            sink.shift += scanned.stream_length
            scans.append(scanned)
            bar.update(size)
    finally:
        bar.close()
    return scans


def _files_scan(header: BCFHeader, scans: list[PartitionScan], summary: RecordSummary) -> ScanResult:
    """The files' scan as one: the first file's header, every file's records."""
    info_stats, format_stats = scans[0].info_stats.copy(), scans[0].format_stats.copy()
    for scan in scans[1:]:
        fold_stats(info_stats, scan.info_stats)
        fold_stats(format_stats, scan.format_stats)
    return ScanResult(
        header=header,
        stream_size=header.size + sum(scan.stream_length for scan in scans),
        compressed=all(scan.compressed for scan in scans),
        has_eof_block=all(scan.has_eof_block for scan in scans),
        info_stats=info_stats,
        format_stats=format_stats,
        # The records' stream offsets were the files' own (the writer, not the scan, joins
        # the files into one stream): nothing reads them past the writer.
        **{**summary.arrays(), "chunk_offsets": np.empty(0, np.int64)},
    )
