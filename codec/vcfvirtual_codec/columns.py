"""The ``columns`` cache layout: one compressed segment per array chunk, decoded here.

In the ``columns`` layout the index demultiplexes each variants chunk of BCF records
into segments, one per fixed column (CHROM, POS, rlen, QUAL, ID, alleles, FILTER), per
INFO key and per FORMAT key and samples block, and stores each as ONE byte range of the
cache: a 36-byte preamble (:data:`PREAMBLE`) then the segment compressed with numcodecs
Zstd or Blosc. A Zarr chunk of an array is exactly one such range, so reading
``variant_position`` inflates positions only, and ``call_genotype`` of some samples only
their block.

Segment byte formats (all little-endian; ``n`` = records in the chunk):

* contig, position, rlen: ``int32[n]`` (POS 0-based as stored; rlen already resolved as
  htslib reads it, by the index, which alone sees REF and INFO/END together). A position
  segment whose preamble has :data:`FLAG_POSITION_DELTA` holds those values' differences
  in byte planes (:mod:`vcfvirtual_codec.segment_transforms`), undone on decompression;
  likewise a FORMAT segment with :data:`FLAG_VALUE_PLANES` holds each record's values of 2
  or 4 bytes in byte planes, and an INFO segment with :data:`FLAG_INFO_PLANES` (the same
  bit, its meaning the segment kind's) its typed column rearranged (types, counts and
  integer values in byte planes, floats verbatim, each string's length beside its text;
  :func:`~vcfvirtual_codec.segment_transforms.info_planes`).
* qual: ``uint32[n]``, QUAL's float32 bits.
* alleles: ``int32 n_allele[n]``, ``int32 length[sum n_allele]`` (NUL padding
  included), the allele bytes.
* id, filter, each INFO key, each FORMAT key and samples block: a *typed column*,
  ``int32 count[n]`` (-1: the record lacks the field; a set Flag may have count 0),
  ``uint8 type[n]`` (BCF type code, 0 when absent), then per record its
  ``count * size(type)`` value bytes (FORMAT: ``count`` values per sample, times the
  block's samples) verbatim from BCF, BCF's sentinels kept; except int8 GT bytes, stored
  minus :data:`GT_SHIFT` when the preamble's flag says so (a reversible map that lets a
  bit-shuffling compressor store one bit plane per allele bit), or, in a block whose calls
  are all phased or none (:data:`FLAG_GT_ALLELES`), as the int8 alleles they decode to;
  such a block with :data:`FLAG_GT_PACKED` holds the same table, one byte of bits per
  value (1, 2 or 4), then the alleles packed into that many bits each.

Preamble flags: :data:`FLAG_GT_SHIFT` 1, :data:`FLAG_GT_ALL_PHASED` 2,
:data:`FLAG_GT_NONE_PHASED` 4, :data:`FLAG_POSITION_DELTA` 8, :data:`FLAG_VALUE_PLANES` 16,
:data:`FLAG_GT_ALLELES` 32, :data:`FLAG_GT_PACKED` 64; :data:`FLAG_INFO_PLANES` is 16 on an
INFO segment (each flag is allowed on the segment kinds named, so a bit may serve two kinds,
keeping bit 128 for a newer writer to say what this reader cannot read). A bit
this reader does not know is refused as a newer vcfvirtual's (:data:`KNOWN_FLAGS`); the
arrays whose segments may carry the newest flags have a configuration version an older
codec refuses when the array is opened (:func:`vcfvirtual_codec.spec.config_version`).

The kernels are the columns-layout entry points of the one decoder
(``_kernels/fields.pyx``): the value code that decodes whole records
(:mod:`vcfvirtual_codec.decode`), fed by walking the segment's typed column, so a chunk
decodes to the same values, dtype and padding as from whole records (bio2zarr's
semantics). Each returns ``(error code, byte offset in the segment)``; every read is checked against the
segment and every write against the output, whatever the bytes say.
"""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from isal import isal_zlib
from numcodecs import Blosc
from numcodecs.zstd import decompress as zstd_decompress

from ._kernels import fields as _fields
from ._kernels.fields import ERR_NARROW, SPAN_FILL, first_characters, int32_column, numeric, quality, string_spans
from ._kernels.fields import column_allele_spans as allele_spans
from ._kernels.fields import column_filters as filters
from ._kernels.fields import column_id_spans as id_spans
from .bcf import records as R
from .checks import (
    BYTES_PER_CLAIMED_SAMPLE,
    FLOAT32_FILL,
    as_bytes,
    check,
    checked_vlen_utf8,
    chunk_records_expected,
    decode_cost,
    inflate_limit,
    narrowed,
    paid_ceiling,
    refuse_over_ceiling,
    span_missing,
    within_budget,
)
from .errors import ChunkDecodeError
from .scratch import Scratch
from .segment_transforms import undo_info_planes, undo_position_deltas, undo_value_planes
from .spec import LOCAL_KINDS, ChunkSpec

if TYPE_CHECKING:
    from collections.abc import Buffer

# The preamble in front of every compressed segment: magic, segment kind code, flags,
# 0, BCF dictionary key (-1: a fixed column), records, samples block index, samples in
# the block (1 outside FORMAT), decompressed length, then the zlib CRC32 of the
# preamble's other 32 bytes followed by the compressed frame (:func:`segment_crc`).
# The magic is the segment format's version: "VVS1" segments (an older vcfvirtual's)
# carried the CRC32 of the decompressed bytes and are refused, not misread. "VVS3" adds
# the transforms a flag names (FLAG_POSITION_DELTA, FLAG_VALUE_PLANES): a "VVS2" segment
# is read as before (it has none), while a reader of "VVS2" alone refuses a "VVS3"
# segment by its magic rather than misread transformed bytes.
MAGIC = b"VVS3"
READ_MAGICS = (b"VVS2", MAGIC)
OLD_MAGICS = {b"VVS1": "its CRC32 covers the decompressed bytes"}
PREAMBLE = struct.Struct("<4sBBHiIIIQI")
# The preamble without its CRC: what the CRC covers ahead of the frame.
PREAMBLE_HEAD = struct.Struct("<4sBBHiIIIQ")
FLAG_GT_SHIFT = 1  # int8 GT bytes are stored minus GT_SHIFT
# What a GT block's calls are as a whole (the index writer's _gt_block), so that the mask and
# phased arrays are read without decompressing it: every call's second allele phased, or
# none's. The preamble's reserved field of a GT block holds its complete count: the number
# of alleles every call holds when none is missing, short or not an allele (0: not so).
FLAG_GT_ALL_PHASED = 2
FLAG_GT_NONE_PHASED = 4
GT_SHIFT = 2
# A GT block whose calls are all phased or none (one of the two flags above), every record
# holding int8 GT of the same count, stored as the alleles the codec decodes from it
# (int8: -1 missing, -2 past the call's end) instead of BCF's bytes: the phase bits say
# nothing the flag does not, so decoding is decompressing ("VVS3" segments only;
# :func:`alleles_block`). Never with FLAG_GT_SHIFT. Such a block compresses as small as its
# shifted bytes (Blosc bit-shuffle: 470,295 against 470,392 bytes on cohort A's chunk 5),
# and a call_genotype chunk is then a view of the decompressed segment: no pass over 20 MB
# in and 20 MB out (~2 ms a chunk of A, 15% of its decode).
FLAG_GT_ALLELES = 32
# An alleles block (with FLAG_GT_ALLELES only) whose values are packed into 1, 2 or 4 bits
# each (:mod:`vcfvirtual_codec._kernels.gt_bits`): after the table (4n bytes of counts, n of
# types), one byte of bits per value, then the values little-endian within each byte (value
# i at bit (i * bits) % 8 of byte (i * bits) // 8); a 1-bit value is the allele (0 or 1), a
# 2- or 4-bit one the allele plus 2 (0: -2 fill, 1: -1 missing). The block is then exactly
# 5n + 1 + ceil(values * bits / 8) bytes. :func:`packed_block` picks the fewest bits. On
# cohort A's chunk 5 (1,000 x 10,000 diploid calls, alleles 0/1: 1 bit), Blosc zstd 1
# compresses the packed bits (unshuffled) in 3.8 ms to 454,310 bytes, the int8 alleles
# (bit-shuffled) in 20 ms to 470,295, and decompresses them in 1.8 ms (+ ~1.6 ms
# unpacking) against 15.7 ms (CPU, load ~1.3; vcfvirtual/cache/columns.py PACKED_BLOSC).
FLAG_GT_PACKED = 64
PACKED_BITS = (1, 2, 4)
GT_FLAGS = FLAG_GT_SHIFT | FLAG_GT_ALL_PHASED | FLAG_GT_NONE_PHASED | FLAG_GT_ALLELES | FLAG_GT_PACKED
# A position segment stored as its differences' byte planes (segment_transforms.py),
# undone right after decompression ("VVS3" segments only).
FLAG_POSITION_DELTA = 8
# A FORMAT segment (not GT's) whose records' values of 2 or 4 bytes are stored in byte
# planes, record by record (segment_transforms.value_planes; "VVS3" segments only).
FLAG_VALUE_PLANES = 16
# An INFO segment whose typed column is rearranged for the compressor
# (segment_transforms.info_planes; "VVS3" segments only; configuration version 3). The
# bit of FLAG_VALUE_PLANES, which a FORMAT segment alone may carry: the segment's kind says
# which transform it names, and the flags byte's last free bit (128) stays free, so that a
# newer writer's segment is still refused as such (KNOWN_FLAGS).
FLAG_INFO_PLANES = FLAG_VALUE_PLANES
# Every flag this reader knows: another bit is a newer writer's, refused as such.
KNOWN_FLAGS = GT_FLAGS | FLAG_POSITION_DELTA | FLAG_VALUE_PLANES | FLAG_INFO_PLANES
SEGMENT_KINDS = {
    "contig": 0,
    "position": 1,
    "rlen": 2,
    "qual": 3,
    "id": 4,
    "alleles": 5,
    "filter": 6,
    "info": 7,
    "format": 8,
}
# The segment each array kind reads (several kinds share one segment).
SEGMENT_OF_KIND = {
    "contig": "contig",
    "position": "position",
    "length": "rlen",
    "quality": "qual",
    "id": "id",
    "id_mask": "id",
    "allele": "alleles",
    "filter": "filter",
    "info": "info",
    "format": "format",
    "genotype": "format",
    "genotype_phased": "format",
    "genotype_mask": "format",
}
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BLOSC_HEADER = 16
# Segments up to this decompressed size go into a fresh buffer rather than the codec's
# scratch (:mod:`vcfvirtual_codec.scratch`): below glibc's mmap threshold (128 KiB) an
# allocation reuses heap memory freed before, so the scratch would spare no page faults and
# lending it costs more (~5 us against ~0.3). Every fixed column's chunk of up to 16,384
# records (4 bytes a record) is one.
SMALL_SEGMENT = 64 << 10
# What only some arrays read is imported by their first chunk, not with this module (each
# ~0.3 ms of every fresh process): the GT kernels (_kernels.genotypes, _kernels.gt_bits) and
# the local alleles' derivation; a read of variant_position loads neither.


def segment_crc(head: Buffer, frame: Buffer) -> int:
    """The segment's CRC32: over the preamble's first 32 bytes, then the compressed frame.

    Over the compressed bytes rather than the decompressed ones: any stored damage (to a
    frame the decompressor would accept too) changes them as surely, and they are a
    fraction of the bytes (a GT segment compresses 20-40x; over the decompressed bytes the
    CRC was ~7% of a GT chunk's decode). Covering the preamble catches a changed field the
    configuration cannot tell from the right one (the GT shift flag, a block's records)."""
    crc: int = isal_zlib.crc32(frame, isal_zlib.crc32(head))
    return crc


def seal_segment(
    kind: int,
    flags: int,
    key: int,
    records: int,
    block: int,
    block_samples: int,
    length: int,
    frame: Buffer,
    complete_count: int = 0,
) -> bytes:
    """A segment as stored: its preamble (with :func:`segment_crc`) then ``frame``, the
    compressed bytes of ``length`` decompressed bytes. ``complete_count`` goes in the
    reserved field (a GT block's; 0 for every other segment)."""
    head = PREAMBLE_HEAD.pack(MAGIC, kind, flags, complete_count, key, records, block, block_samples, length)
    return head + segment_crc(head, frame).to_bytes(4, "little") + bytes(frame)


def _refuse(spec: ChunkSpec, problem: str, offset: int | None = None) -> ChunkDecodeError:
    return ChunkDecodeError(
        None,
        f"cannot decode {spec.array} chunk (columns layout): {problem}",
        offset=offset,
        hint="the cache may not match the references",
    )


class _Segment:
    """What a chunk's preamble says, checked against the array's configuration."""

    segment: str  # the segment kind's name (SEGMENT_KINDS) the array reads
    flags: int
    records: int
    block: int
    block_samples: int
    length: int  # decompressed
    crc: int
    complete_count: int  # a GT block's; 0 otherwise

    def __init__(self, data: np.ndarray, spec: ChunkSpec) -> None:
        if data.shape[0] < PREAMBLE.size:
            raise _refuse(spec, f"{data.shape[0]} bytes, shorter than a segment's {PREAMBLE.size}-byte preamble")
        fields = PREAMBLE.unpack_from(data)
        magic, kind, self.flags, pad, key, self.records, self.block, self.block_samples, self.length, self.crc = fields
        self.segment = segment = SEGMENT_OF_KIND[spec.kind]
        want_key = spec.key if segment in ("info", "format") else -1
        if magic in OLD_MAGICS:
            raise _refuse(
                spec,
                f"the segment is of the older format {magic!r} ({OLD_MAGICS[magic]}), this reader reads "
                f"{MAGIC!r}: index the BCF again to rewrite the cache",
                0,
            )
        if magic not in READ_MAGICS:
            raise _refuse(
                spec,
                f"segment magic is {magic!r}, this reader reads {b' and '.join(READ_MAGICS)!r} (a cache "
                "written by a newer vcfvirtual needs that version to read it)",
                0,
            )
        if kind != SEGMENT_KINDS[segment] or key != want_key:
            raise _refuse(
                spec,
                f"the segment is of kind {kind} key {key}, the array reads kind {SEGMENT_KINDS[segment]} "
                f"({segment}) key {want_key}",
                4,
            )
        if self.flags & ~KNOWN_FLAGS:
            raise _refuse(
                spec,
                f"preamble flags {self.flags} hold bits {self.flags & ~KNOWN_FLAGS} this reader does not know: "
                "the cache was written by a newer vcfvirtual; update vcfvirtual-codec to read it",
                5,
            )
        is_gt = spec.kind.startswith("genotype")
        both = FLAG_GT_ALL_PHASED | FLAG_GT_NONE_PHASED
        allowed = GT_FLAGS if is_gt else 0
        if segment == "position" and magic == MAGIC:
            allowed = FLAG_POSITION_DELTA
        elif segment == "format" and not is_gt and magic == MAGIC:
            allowed = FLAG_VALUE_PLANES
        elif segment == "info" and magic == MAGIC:
            allowed = FLAG_INFO_PLANES
        if self.flags & ~allowed or (not is_gt and pad) or self.flags & both == both or pad > spec.ploidy:
            raise _refuse(spec, f"preamble flags {self.flags} / reserved {pad} are not what the index writes", 5)
        alleles = self.flags & FLAG_GT_ALLELES
        if alleles and (magic != MAGIC or self.flags & FLAG_GT_SHIFT or not self.flags & both):
            # Alleles stand for BCF's bytes only where the block's phasing is one flag.
            raise _refuse(
                spec,
                f"preamble flags {self.flags}: a GT block of alleles is all phased or none, never shifted "
                f"(and only in a {MAGIC!r} segment)",
                5,
            )
        if self.flags & FLAG_GT_PACKED and not alleles:
            raise _refuse(spec, f"preamble flags {self.flags}: packed GT values are an alleles block's only", 5)
        self.complete_count = pad
        self._check_counts(spec)

    def _check_counts(self, spec: ChunkSpec) -> None:
        if spec.num_records == 0:
            raise _refuse(spec, "the configuration says the array has no records")
        last, expected = chunk_records_expected(spec)
        if self.records not in (spec.chunk_length, last) or self.records == 0:
            raise _refuse(spec, f"the segment holds {self.records} records, expected {expected}", 12)
        size = spec.samples_chunk_size
        if size:
            n_samples = max(spec.shape[0], 1)
            n_blocks = (n_samples - 1) // size + 1
            edge = n_samples - (n_blocks - 1) * size
            # A full block anywhere but possibly the last; the narrower edge block only last.
            fits = (self.block_samples == size and (self.block < n_blocks - 1 or edge == size)) or (
                self.block_samples == edge and self.block == n_blocks - 1
            )
            if not fits:
                raise _refuse(
                    spec,
                    f"the segment is samples block {self.block} of {self.block_samples} samples; the array's "
                    f"blocks are {size} samples ({n_blocks} blocks, the last {edge} wide)",
                    16,
                )
        elif (self.block, self.block_samples) != (0, 1):
            raise _refuse(
                spec, f"samples block {self.block} of {self.block_samples} samples in a non-sample segment", 16
            )


def _max_segment_length(spec: ChunkSpec, seg: _Segment) -> int | None:
    """The longest segment the format allows for this array's chunk, where it gives one:
    fixed columns hold 4 bytes a record; numeric typed columns a count and a type per
    record, then at most the array's width of values of at most 4 bytes per sample (the
    kernels refuse a longer count). None for the kinds whose values have no such bound
    (strings, IDs, alleles, FILTER keys, Flags)."""
    n = seg.records
    if spec.kind in ("contig", "position", "length", "quality"):
        return 4 * n
    numeric = spec.kind.startswith("genotype") or (
        spec.kind in ("info", "format") and spec.vcf_type in ("Integer", "Float")
    )
    if not numeric:
        return None
    if spec.kind.startswith("genotype"):
        width = spec.ploidy
    else:  # the values dimension, after the samples one of a FORMAT field
        width = spec.shape[-1] if len(spec.shape) == (2 if spec.kind == "format" else 1) else 1
    vectors = seg.block_samples if spec.samples_chunk_size else 1
    return 5 * n + n * max(width, 1) * 4 * vectors


def zstd_content_size(frame: np.ndarray) -> int | None:
    """The decompressed size a Zstandard frame header declares, or None (no frame, or the
    size not recorded). numcodecs' Zstd always records it."""
    if frame.shape[0] < 6 or bytes(frame[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = int(frame[4])
    single_segment = (descriptor >> 5) & 1
    field_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    if field_size == 0 or frame.shape[0] < at + field_size:
        return None
    size = int.from_bytes(bytes(frame[at : at + field_size]), "little")
    return size + 256 if field_size == 2 else size


def blosc_sizes(frame: np.ndarray) -> tuple[int | None, int | None]:
    """(decompressed, compressed) sizes a Blosc (1.x) frame header declares, or (None, None)."""
    if frame.shape[0] < _BLOSC_HEADER:
        return None, None
    nbytes, _, cbytes = struct.unpack_from("<III", bytes(frame[4:_BLOSC_HEADER]))
    return nbytes, cbytes


def _check_length(body: np.ndarray, seg: _Segment, spec: ChunkSpec) -> None:
    """The preamble's decompressed length, bounded before anything is allocated for it,
    and equal to what the compressed frame's header declares. The bound: what a chunk of
    the array's shape can need where the format gives one (the frame then decompresses
    into exactly that many bytes, Zstd and Blosc refusing more), else what the compressed
    bytes can honestly stand for (:func:`vcfvirtual_codec.checks.inflate_limit`). Past
    the ceiling, at most PAID_EXPANSION bytes per compressed byte either way."""
    shape_bound = _max_segment_length(spec, seg)
    ceiling = paid_ceiling(body.shape[0])
    if not body.shape[0]:
        limit, why = 0, "an empty frame holds nothing"
    elif shape_bound is not None:
        limit = min(shape_bound, ceiling)
        why = f"the most a chunk of {seg.records} records of the array's shape can hold is {shape_bound}"
    else:
        limit = min(inflate_limit(body.shape[0]), ceiling)
        why = f"{body.shape[0]} compressed bytes stand for at most {limit}"
    if seg.length > limit:
        raise _refuse(
            spec,
            f"the preamble claims {seg.length} decompressed bytes from {body.shape[0]}, more than "
            f"the array allows ({why}; at most {ceiling} for a segment of this size); refusing to allocate",
            24,
        )
    if spec.compressor == "zstd":
        declared = zstd_content_size(body)
    else:
        declared, compressed = blosc_sizes(body)
        if declared is not None and compressed != body.shape[0]:
            raise _refuse(spec, f"its Blosc frame says {compressed} bytes, the segment holds {body.shape[0]}")
    if declared != seg.length:
        what = "no readable frame header" if declared is None else f"{declared} bytes"
        raise _refuse(
            spec,
            f"the preamble says {seg.length} decompressed bytes, the {spec.compressor} frame {what}",
            PREAMBLE.size,
        )


def _check_gt_claims(seg: _Segment, spec: ChunkSpec) -> None:
    """What a GT block's preamble says of its calls (complete count, phase flags) against
    its length, before the summary answers from them without decompressing: a block whose
    every call holds ``count`` int8 alleles is exactly a count and a type per record and
    ``count`` bytes per call; one whose every call is (un)phased holds at least two int8
    alleles per call. A claim the length cannot back is refused, so that the summary's
    output is never larger than the segment the claim describes."""
    n, calls = seg.records, seg.records * seg.block_samples
    if seg.flags & FLAG_GT_PACKED:
        _check_packed_claims(seg, spec)
        return
    if seg.complete_count and seg.length != 5 * n + calls * seg.complete_count:
        raise _refuse(
            spec,
            f"the preamble says every call holds {seg.complete_count} alleles, but its {seg.length} "
            f"decompressed bytes cannot hold {calls} such calls of {n} records",
            6,
        )
    if seg.flags & (FLAG_GT_ALL_PHASED | FLAG_GT_NONE_PHASED) and not (
        5 * n + 2 * calls <= seg.length <= 5 * n + spec.ploidy * calls
    ):
        raise _refuse(
            spec,
            f"the preamble's phase flags say every call holds two alleles or more, but its {seg.length} "
            f"decompressed bytes cannot hold {calls} such calls of {n} records",
            5,
        )


def _check_packed_claims(seg: _Segment, spec: ChunkSpec) -> None:
    """:func:`_check_gt_claims` for a packed alleles block (:data:`FLAG_GT_PACKED`, always
    with a phase flag): its length is one a table, a bits byte and ``calls * count``
    values of 1, 2 or 4 bits can have, ``count`` the complete count where it is given,
    else any from 2 (a phase flag's) to the ploidy: solved for the count, not tried count
    by count (a crafted configuration's ploidy may be 2^31 - 1)."""
    n, calls = seg.records, seg.records * seg.block_samples
    lo, hi = (seg.complete_count,) * 2 if seg.complete_count else (2, spec.ploidy)
    payload = seg.length - 5 * n - 1
    if not any(_packed_count_fits(payload, calls * bits, lo, hi) for bits in PACKED_BITS):
        raise _refuse(
            spec,
            f"the preamble's flags say its {calls} calls of {n} records are packed alleles of "
            f"{seg.complete_count or 'two or more'} values, which {seg.length} decompressed bytes cannot hold",
            5,
        )


def _packed_count_fits(payload: int, bits_per_call: int, lo: int, hi: int) -> bool:
    """Whether a count ``c`` from ``lo`` to ``hi`` packs into exactly ``payload`` bytes
    at ``bits_per_call`` bits per call and value: ceil(c * bits_per_call / 8) == payload,
    that is 8 * (payload - 1) < c * bits_per_call <= 8 * payload."""
    least = max(lo, 8 * (payload - 1) // bits_per_call + 1)
    most = min(hi, 8 * payload // bits_per_call)
    return payload >= 1 and least <= most


def _check_crc(buf: np.ndarray, seg: _Segment, spec: ChunkSpec) -> None:
    """The stored segment (preamble head and compressed frame) against its CRC32, before
    the decompressor sees the frame. isal's CRC32 is zlib's checksum, ~10x faster."""
    if segment_crc(buf[: PREAMBLE_HEAD.size], buf[PREAMBLE.size :]) != seg.crc:
        raise _refuse(spec, "the segment fails its CRC32 (the cache is damaged)")


if TYPE_CHECKING:  # annotations only: a Literal costs ~50 us to make at import
    Transform = Literal["position deltas", "value planes", "INFO planes"]


class TransformUndoError(ValueError):
    """A flagged segment whose decompressed bytes the transform its flag names cannot be
    undone on (no writer made them): ``transform`` says which, ``problem`` what is wrong.
    Each reader of segments words it as its own error."""

    def __init__(self, transform: Transform, problem: str) -> None:
        super().__init__(f"{transform}: {problem}")
        self.transform: Transform = transform
        self.problem = problem


def undo_transforms(raw: np.ndarray, segment: str, flags: int, records: int, block_samples: int) -> None:
    """The transforms a segment's preamble flags name undone in place on its decompressed
    bytes ``raw``: position deltas (:data:`FLAG_POSITION_DELTA`), a FORMAT segment's value
    planes (:data:`FLAG_VALUE_PLANES`), an INFO segment's rearrangement
    (:data:`FLAG_INFO_PLANES`, the same bit: ``segment``, the kind's name in
    :data:`SEGMENT_KINDS`, says which). ``records`` and ``block_samples`` are the
    preamble's. Other flags (a GT block's) are left to the caller. The one place both the
    codec's decode and the append's join of a stored chunk undo them, in place (no copy
    but the INFO undo's own).

    Raises
    ------
    TransformUndoError
        A transform flag on a segment kind it is not defined for, or bytes the flagged
        transform cannot be undone on (a positions segment not 4 bytes a record, counts
        and types that do not account for the bytes).
    """
    if flags & FLAG_POSITION_DELTA:
        if segment != "position":
            raise TransformUndoError("position deltas", f"flag {FLAG_POSITION_DELTA} on a {segment} segment")
        if raw.shape[0] != 4 * records:
            raise TransformUndoError(
                "position deltas", f"a positions segment of {records} records holds {raw.shape[0]} bytes"
            )
        undo_position_deltas(raw)
    if flags & FLAG_VALUE_PLANES:  # FLAG_INFO_PLANES: the one bit, named by the kind
        if segment == "format":
            try:
                undo_value_planes(raw, records, block_samples)
            except ValueError as e:
                raise TransformUndoError("value planes", str(e)) from None
        elif segment == "info":
            try:
                undo_info_planes(raw, records)
            except ValueError as e:
                raise TransformUndoError("INFO planes", str(e)) from None
        else:
            raise TransformUndoError("value planes", f"flag {FLAG_VALUE_PLANES} on a {segment} segment")


def _decompress(body: np.ndarray, seg: _Segment, spec: ChunkSpec, out: np.ndarray) -> None:
    """The segment decompressed into ``out`` (the preamble's length, checked against the
    frame's header by :func:`_check_length`; Zstd and Blosc each check their output's
    size against it), its transforms undone."""
    # Zstd by numcodecs' module function, which its codec's decode calls after normalising
    # both buffers in Python (~4 us of a 1,000-row position chunk's 45); ours are flat
    # contiguous uint8 arrays already. Blosc (GT blocks: large, few) through its codec,
    # whose decode also refuses a frame past Blosc's 2 GiB buffer limit.
    try:
        if spec.compressor == "zstd":
            zstd_decompress(body, out)
        else:
            Blosc().decode(body, out)
    except (RuntimeError, ValueError) as e:
        raise _refuse(spec, f"the {spec.compressor} segment does not decompress ({e})", PREAMBLE.size) from None
    try:
        undo_transforms(out, seg.segment, seg.flags, seg.records, seg.block_samples)
    except TransformUndoError as e:
        if e.transform == "position deltas":  # the preamble's length (at byte 24) is wrong
            raise _refuse(spec, e.problem, 24) from None
        what = "INFO values" if e.transform == "INFO planes" else "values"
        raise _refuse(spec, f"its {what} cannot be put back in order ({e.problem})", PREAMBLE.size) from None


def _check_budget(spec: ChunkSpec, seg: _Segment, length: int, paid: int, summary: bool = False) -> None:
    """The codec's decode budget, with the segment standing for the records: a chunk whose
    output would dwarf its bytes decodes only if its block's samples justify it, and none
    past the ceiling (:func:`vcfvirtual_codec.checks.refuse_over_ceiling`). A GT summary
    allocates its boolean chunk alone (and the copy widened to the last block)."""
    cost = 2 * math.prod(spec.chunk_shape) if summary else decode_cost(spec)
    # A segment holds at least a count (and a type) per record, so a preamble claiming
    # more records than its bytes can hold is refused before any output exists.
    least = 4 * seg.records if spec.kind in ("contig", "position", "length", "quality", "allele") else 5 * seg.records
    if length < least:
        raise _refuse(spec, f"{length} bytes of segment cannot hold {seg.records} records")
    refuse_over_ceiling(spec, cost, paid, f"{length} bytes of segment")
    if within_budget(cost, length):
        return
    # As the codec's records claim their samples: a few values per sample of the block and
    # row, rows counted up to the array's records (a config's chunk_length may exceed them
    # legitimately, never by 2^30). What a field absent from every record reads (missing,
    # everywhere) is backed by nothing else; the ceiling bounds it.
    rows = min(spec.chunk_length, spec.num_records)
    if spec.samples_chunk_size and cost <= rows * seg.block_samples * BYTES_PER_CLAIMED_SAMPLE:
        return
    raise _refuse(
        spec,
        f"its configuration (chunk {list(spec.chunk_shape)}) would take {cost} bytes to decode "
        f"{length} bytes of segment; refusing to allocate",
    )


def decode_columns_chunk(data: Buffer, spec: ChunkSpec, scratch: Scratch | None = None) -> bytes | np.ndarray:
    """Decode one chunk of the ``columns`` layout: preamble, compressed segment.

    Parameters
    ----------
    data : bytes-like or numpy.ndarray
        The chunk's byte range in the cache.
    spec : ChunkSpec
        The array's codec configuration (``layout="columns"``).
    scratch : Scratch, optional
        The codec instance's working buffers, to decompress the segment into (a fresh
        buffer otherwise); nothing returned is a view of it. (A GT block of alleles
        decompresses into a buffer of its own, which call_genotype may be a view of.)

    Returns
    -------
    numpy.ndarray or bytes
        What :func:`vcfvirtual_codec.codec.decode_chunk` returns for the same values: the
        full chunk (:attr:`ChunkSpec.chunk_shape`; rows past the chunk's records and, in
        the last samples block, samples past its width hold the fill), numbers as the
        array's dtype, strings as ``vlen-utf8`` bytes.

    Raises
    ------
    ChunkDecodeError
        The preamble does not describe a segment of this array (kind, key, records,
        samples block, flags), the compressed bytes do not decompress to its length and
        CRC32, the decode would exceed the budget, or the segment's values are not what
        the configuration says.
    """
    buf = as_bytes(data)
    if spec.kind in LOCAL_KINDS:  # derived from the GT (and AD or PL) segments of the range
        from .local_alleles import decode_local_columns

        return decode_local_columns(buf, spec, decode_columns_chunk, PREAMBLE.size)
    seg = _Segment(buf, spec)
    body = buf[PREAMBLE.size :]
    _check_length(body, seg, spec)
    if spec.kind.startswith("genotype"):
        _check_gt_claims(seg, spec)
    _check_crc(buf, seg, spec)
    # The preamble's length, checked against the frame's, is what decompresses: the budget
    # is checked once, before anything is allocated.
    summary = _summary_answers(seg, spec)
    _check_budget(spec, seg, seg.length, paid=buf.shape[0], summary=summary)
    if summary:
        # The preamble's claims are covered by the CRC just checked: no decompress needed.
        return _genotype_summary(seg, spec)
    if seg.flags & FLAG_GT_ALLELES and not seg.flags & FLAG_GT_PACKED:
        # Into a buffer of its own, not the scratch: call_genotype may be a view of it.
        raw = np.empty(seg.length, np.uint8)
        _decompress(body, seg, spec, raw)
        return _decode_allele_block(raw, seg, spec)
    if seg.length <= SMALL_SEGMENT:
        return _decoded(body, seg, spec, np.empty(seg.length, np.uint8))
    with (scratch or Scratch()).lend(seg.length) as raw:
        return _decoded(body, seg, spec, raw)


def _decoded(body: np.ndarray, seg: _Segment, spec: ChunkSpec, raw: np.ndarray) -> bytes | np.ndarray:
    """The segment decompressed into ``raw`` (working bytes), then decoded into arrays of
    their own, none a view of ``raw``."""
    _decompress(body, seg, spec, raw)
    if spec.kind in ("info", "format"):
        return _decode_field(raw, seg, spec)
    if seg.flags & FLAG_GT_PACKED:
        return _decode_packed_block(raw, seg, spec)
    if spec.kind.startswith("genotype"):
        return _decode_genotypes(raw, seg, spec)
    return _decode_variant_column(raw, seg.records, spec)


def _record_starts(raw: np.ndarray, n: int, spec: ChunkSpec, what: str) -> np.ndarray:
    """Where each record's values start in a typed column of one vector per record (ID,
    FILTER, an INFO Flag), the column's types and length checked (the layout step's ``column_starts``)."""
    starts: np.ndarray
    starts, err, at = _fields.column_starts(raw, n, 1)
    check(err, at, spec, what)
    return starts


def _decode_variant_column(raw: np.ndarray, n: int, spec: ChunkSpec) -> bytes | np.ndarray:
    """The fixed columns: contig, position, length, quality, id (+mask), allele, filter."""
    kind, full = spec.kind, spec.chunk_shape
    if kind in ("contig", "position", "length"):
        values = np.full(full, -2, np.int64)
        err, at = int32_column(raw, n, 1 if kind == "position" else 0, values)
        check(err, at, spec, kind)
        return narrowed(values, np.dtype(spec.dtype), spec)
    if kind == "quality":
        out = np.full(full, FLOAT32_FILL, dtype="<f4")
        err, at = quality(raw, n, out.view("<u4"))
        check(err, at, spec, kind)
        return out
    if kind == "filter":
        flags = np.zeros(full, dtype=bool)
        column_of_key = np.asarray(spec.filter_columns, np.int64)
        err, at = filters(raw, n, _record_starts(raw, n, spec, kind), column_of_key, flags)
        check(err, at, spec, kind)
        return flags
    starts = np.zeros(full, np.int64)
    lengths = np.full(full, SPAN_FILL, np.int64)
    if kind == "allele":
        err, at = allele_spans(raw, n, starts, lengths)
    else:
        err, at = id_spans(raw, n, _record_starts(raw, n, spec, kind), starts, lengths)
    check(err, at, spec, kind)
    if kind == "id_mask":
        return span_missing(lengths)
    return checked_vlen_utf8(raw, starts, lengths, spec)


def _padded(block: np.ndarray, spec: ChunkSpec, fill: int | np.integer[Any]) -> np.ndarray:
    """A decoded samples block widened to the chunk's samples extent (the last, narrower
    block of an array), the extra samples holding the fill."""
    if block.shape[1] == spec.chunk_shape[1]:
        return block
    out = np.full(spec.chunk_shape, fill, dtype=block.dtype)
    out[:, : block.shape[1]] = block
    return out


def _summary_answers(seg: _Segment, spec: ChunkSpec) -> bool:
    """Whether the preamble says enough of a GT block's calls (FLAG_GT_ALL_PHASED,
    _NONE_PHASED, the complete count) to give this array's chunk without decompressing."""
    if spec.kind == "genotype_mask":
        return seg.complete_count == spec.ploidy
    return spec.kind == "genotype_phased" and bool(seg.flags & (FLAG_GT_ALL_PHASED | FLAG_GT_NONE_PHASED))


def _genotype_summary(seg: _Segment, spec: ChunkSpec) -> np.ndarray:
    """call_genotype_mask or call_genotype_phased of one samples block from what its
    preamble says of the block's calls (:func:`_summary_answers`), as
    :func:`_decode_genotypes` would decode them."""
    n, width = seg.records, seg.block_samples
    if spec.kind == "genotype_mask":
        mask = np.empty((spec.chunk_length, width, spec.ploidy), bool)
        mask[:n] = False
        mask[n:] = True  # rows past the records: fill, as the decode pads them
        return _padded(mask, spec, True)
    phased = np.empty((spec.chunk_length, width), bool)
    phased[:n] = bool(seg.flags & FLAG_GT_ALL_PHASED)
    phased[n:] = False
    return _padded(phased, spec, False)


def _decode_genotypes(raw: np.ndarray, seg: _Segment, spec: ChunkSpec) -> np.ndarray:
    """call_genotype, _phased or _mask of one samples block, as the codec decodes them."""
    from ._kernels.genotypes import columns_genotypes as genotypes

    kind, n, width = spec.kind, seg.records, seg.block_samples
    dtype = np.dtype(spec.dtype)
    gt_dtype = dtype.newbyteorder("<") if kind == "genotype" else np.dtype(np.int32)
    # Uninitialised: the kernel writes every value of the record rows; the rest is padded here.
    gt = np.empty((spec.chunk_length, width, spec.ploidy), gt_dtype)
    gt[n:] = -2
    if kind == "genotype_phased":
        phased = np.empty((spec.chunk_length, width), bool)
        phased[n:] = False
    else:
        phased = np.empty((0, 0), dtype=bool)  # alleles only: skip the phase bits
    shifted = bool(seg.flags & FLAG_GT_SHIFT)
    err, at = genotypes(raw, n, gt, phased, np.iinfo(gt_dtype).max, shifted)
    check(err, at, spec, kind)
    if kind == "genotype":
        return _padded(gt, spec, -2)
    if kind == "genotype_mask":
        return _padded(gt < 0, spec, True)  # missing or fill, as bio2zarr writes it
    return _padded(phased, spec, False)


def _allele_count(raw: np.ndarray, n: int, width: int, ploidy: int) -> int:
    """The values per call of an alleles GT block's table (packed or not): every record's
    type int8 and count the same, from 1 to ``ploidy``. ValueError if not."""
    length = raw.shape[0]
    if n < 1 or width < 1 or length < 5 * n:
        raise ValueError(f"{length} bytes cannot hold {n} records of {width} samples")
    counts = raw[: 4 * n].view("<i4")
    count = int(counts[0])
    if not 1 <= count <= ploidy or (counts != count).any():
        raise ValueError(f"its records' counts are not one count from 1 to the ploidy {ploidy}")
    if (raw[4 * n : 5 * n] != R.BT_INT8).any():
        raise ValueError("its records' types are not all int8")
    return count


def _allele_values(raw: np.ndarray, n: int, width: int, ploidy: int) -> np.ndarray:
    """The values of an alleles GT block (:data:`FLAG_GT_ALLELES`) of ``n`` records of
    ``width`` samples as int8 (records, samples, count), its table checked: every record's
    type int8 and count the same, at most ``ploidy``, and the values exactly that many.
    ValueError if not."""
    length = raw.shape[0]
    count = _allele_count(raw, n, width, ploidy)
    if length != 5 * n + n * width * count:
        raise ValueError(f"{length} bytes are not {n} records of {width} calls of {count} alleles")
    return raw[5 * n :].view(np.int8).reshape(n, width, count)


def _decode_allele_block(raw: np.ndarray, seg: _Segment, spec: ChunkSpec) -> np.ndarray:
    """call_genotype or call_genotype_mask of an alleles GT block: the decompressed values
    themselves (a view of ``raw``) when they fill the chunk as its dtype, else copied into
    the chunk padded with the fill (records past the block's, alleles past the count,
    samples past the last block's width) as :func:`_decode_genotypes` pads. No value is
    checked: the writer stored what the codec decodes, and the CRC32 covers them (a
    crafted block's values are the values it says, within int8: never outside the chunk)."""
    try:
        values = _allele_values(raw, seg.records, seg.block_samples, spec.ploidy)
    except ValueError as e:
        raise _refuse(spec, f"an alleles GT block: {e}", PREAMBLE.size) from None
    return _allele_chunk(values, spec)


def _allele_mask(spec: ChunkSpec, shape: tuple[int, ...], mask: np.ndarray | bool) -> np.ndarray:
    """call_genotype_mask's chunk of an alleles block's values of ``shape`` (records,
    samples, count) whose mask is ``mask``, padded True (fill) as bio2zarr writes it."""
    n, width, count = shape
    out = np.ones(spec.chunk_shape, bool)
    out[:n, :width, :count] = mask
    return out


def _allele_chunk(values: np.ndarray, spec: ChunkSpec) -> np.ndarray:
    """The chunk of int8 alleles ``values`` (records, samples, count), or their mask:
    themselves when they fill the chunk as its dtype, else padded."""
    n, width, count = values.shape
    full = spec.chunk_shape
    if spec.kind == "genotype_mask":
        return _allele_mask(spec, values.shape, values < 0)  # missing or fill
    dtype = np.dtype(spec.dtype).newbyteorder("<")
    if values.shape == full and dtype == values.dtype:
        return values
    out = np.full(full, -2, dtype)
    out[:n, :width, :count] = values
    return out


def _packed_table(raw: np.ndarray, n: int, width: int, ploidy: int) -> tuple[int, int]:
    """The values per call and bits per value of a packed alleles block
    (:data:`FLAG_GT_PACKED`), its table checked as an alleles block's and its length
    exactly the packed values'. ValueError if not."""
    from ._kernels.gt_bits import packed_size

    length = raw.shape[0]
    count = _allele_count(raw, n, width, ploidy)
    if length < 5 * n + 1:
        raise ValueError(f"{length} bytes cannot hold {n} records' table and the bits per value")
    bits = int(raw[5 * n])
    if bits not in PACKED_BITS:
        raise ValueError(f"its bits per value are {bits}, not 1, 2 or 4")
    if length != 5 * n + 1 + packed_size(n * width * count, bits):
        raise ValueError(f"{length} bytes are not {n} records of {width} calls of {count} alleles of {bits} bits")
    return count, bits


def _packed_alleles(raw: np.ndarray, n: int, width: int, ploidy: int, out: np.ndarray | None = None) -> np.ndarray:
    """The int8 alleles (records, samples, count) of a packed alleles block, unpacked into
    ``out`` when given (its shape must be theirs). ValueError if the block is not one."""
    from ._kernels.gt_bits import unpack

    count, bits = _packed_table(raw, n, width, ploidy)
    values = np.empty((n, width, count), np.int8) if out is None else out
    if values.shape != (n, width, count):
        raise ValueError(f"its values are {(n, width, count)}, not the {values.shape} asked for")
    unpack(raw[5 * n + 1 :], bits, values.reshape(-1))
    return values


def _decode_packed_block(raw: np.ndarray, seg: _Segment, spec: ChunkSpec) -> np.ndarray:
    """call_genotype or call_genotype_mask of a packed alleles block: unpacked straight
    into the chunk when the values fill it as int8, else into an array of their own then
    padded (:func:`_allele_chunk`). A 1-bit block's mask needs no unpacking: its values
    are 0 and 1, none missing. The arrays are at most the chunk (the table's count is at
    most the ploidy, its records and samples the preamble's): the decode budget checked
    against the chunk's shape bounds them, however few bytes the packed values are."""
    n, width = seg.records, seg.block_samples
    try:
        count, bits = _packed_table(raw, n, width, spec.ploidy)
        if spec.kind == "genotype_mask" and bits == 1:
            return _allele_mask(spec, (n, width, count), False)
        full = spec.chunk_shape
        direct = spec.kind == "genotype" and (n, width, count) == full and np.dtype(spec.dtype) == np.int8
        values = _packed_alleles(raw, n, width, spec.ploidy, np.empty(full, np.int8) if direct else None)
    except ValueError as e:
        raise _refuse(spec, f"a packed alleles GT block: {e}", PREAMBLE.size) from None
    return values if direct else _allele_chunk(values, spec)


def packed_block(alleles: np.ndarray, n: int, width: int, out: np.ndarray | None = None) -> np.ndarray | None:
    """An alleles GT block (:func:`alleles_block`) of ``n`` records of ``width`` samples
    rewritten as a packed one (:data:`FLAG_GT_PACKED`) of the fewest bits that hold its
    values (1: all 0 or 1; 2: -2..1; 4: -2..13), or None where none do (kept as it is).
    ``out``: a buffer to write it into (the result is then a view of it), if large
    enough. ValueError if the table is not an alleles block's."""
    from ._kernels.gt_bits import pack_fewest, packed_size

    values = _allele_values(alleles, n, width, 2**31 - 1).reshape(-1).view(np.uint8)
    room = 5 * n + 1 + packed_size(values.shape[0], 4)  # the widest packing's
    out = out[:room] if out is not None and out.shape[0] >= room else np.empty(room, np.uint8)
    bits = pack_fewest(values, out[5 * n + 1 :])
    if not bits:
        return None
    out[: 5 * n] = alleles[: 5 * n]
    out[5 * n] = bits
    return out[: 5 * n + 1 + packed_size(values.shape[0], bits)]


def unpacked_block(raw: np.ndarray, n: int, width: int) -> np.ndarray:
    """A packed alleles GT block (:func:`packed_block`) as the alleles block it packs: the
    same table, then the int8 values. ValueError if it is not one."""
    values = _packed_alleles(raw, n, width, 2**31 - 1)
    out = np.empty(5 * n + values.size, np.uint8)
    out[: 5 * n] = raw[: 5 * n]
    out[5 * n :] = values.reshape(-1).view(np.uint8)
    return out


def alleles_block(data: np.ndarray, n: int, width: int, out: np.ndarray | None = None) -> np.ndarray | None:
    """A GT block segment of ``n`` records of ``width`` samples (its int8 bytes stored minus
    GT_SHIFT, as the index's demux writes it) rewritten as an alleles block
    (:data:`FLAG_GT_ALLELES`): the same table, then the alleles this codec decodes from it
    (by its own kernel, so they are by construction what a shifted block decodes to).
    None where the block cannot be one: records of other types or counts, or values the
    decode refuses (kept shifted, for the decoder to refuse on read as before). ``out``: a
    buffer to write it into (the result is then a view of it), if large enough."""
    from ._kernels.genotypes import columns_genotypes as genotypes

    try:  # the same table an alleles block keeps (any count from 1 up)
        count = _allele_values(data, n, width, 2**31 - 1).shape[2]
    except ValueError:
        return None
    length = data.shape[0]
    out = out[:length] if out is not None and out.shape[0] >= length else np.empty(length, np.uint8)
    out[: 5 * n] = data[: 5 * n]
    alleles = out[5 * n :].view(np.int8).reshape(n, width, count)
    err, _ = genotypes(data, n, alleles, np.empty((0, 0), bool), np.iinfo(np.int8).max, True)
    return out if err == R.OK else None


def shifted_block(raw: np.ndarray, n: int, width: int, phased: bool) -> np.ndarray:
    """An alleles GT block (:func:`alleles_block`) of calls all ``phased`` or none, as
    shifted BCF bytes that decode to the same alleles and phasing: allele ``a`` as
    ``(a + 1) << 1`` (missing: 0), the phase bit on every allele after the first, an
    end-of-vector for -2; then minus GT_SHIFT. (A -2 second allele of an unphased block
    follows an end-of-vector, whose call's remainder is read as -2 whatever it holds: it
    is stored as missing, whose phase bit is clear.) What appending joins to new records.
    ValueError if the table is not an alleles block's."""
    values = _allele_values(raw, n, width, 2**31 - 1)
    wide = values.astype(np.int16)
    bcf = np.where(wide >= -1, (wide + 1) << 1, 0x81)
    if phased:
        bcf[:, :, 1:] |= 1
    elif values.shape[2] > 1:
        second = bcf[:, :, 1]
        second[second == 0x81] = 0x80
    out = raw.copy()
    out[5 * n :] = ((bcf - GT_SHIFT) & 0xFF).astype(np.uint8).ravel()
    return out


def _decode_field(raw: np.ndarray, seg: _Segment, spec: ChunkSpec) -> bytes | np.ndarray:
    """An INFO (records, [width]) or FORMAT block (records, block samples, [width]) field."""
    is_format = spec.kind == "format"
    n = seg.records
    n_vectors = seg.block_samples if is_format else 1
    vector = len(spec.shape) == (2 if is_format else 1)
    width = spec.shape[-1] if vector else 1
    inner = (spec.chunk_length, n_vectors, width)
    block = (spec.chunk_length, n_vectors, *spec.shape[1:]) if is_format else spec.chunk_shape
    if spec.vcf_type == "Flag":
        _record_starts(raw, n, spec, "Flag")  # the column's counts, types and length checked
        out = np.zeros(spec.chunk_length, dtype=bool)
        out[:n] = raw[: 4 * n].view("<i4") >= 0  # set where the record holds the key (any count)
        return out
    if spec.vcf_type in ("Integer", "Float"):
        is_float = spec.vcf_type == "Float"
        fill = R.FLOAT_END_BITS if is_float else -2
        dtype = np.dtype(spec.dtype)
        # Integers decode straight into the array's dtype when it is int8/int16/int32 (int64
        # through int32: BCF holds no wider value); floats as their int32 bits.
        narrow = not is_float and dtype.itemsize <= 4
        out_dtype = dtype.newbyteorder("<") if narrow else np.dtype(np.int32)
        values = np.empty(inner, out_dtype)
        values[n:] = fill  # the kernel writes every value of the record rows
        info = np.iinfo(out_dtype) if narrow else np.iinfo(np.int32)
        # bio2zarr reads a Number=1 INFO Float as a scalar, keeping a NaN value; in a
        # vector every NaN reads missing.
        keep_nan = is_float and not is_format and not vector
        err, at = numeric(raw, n, is_format, is_float, values, info.min, info.max, keep_nan)
        if err == ERR_NARROW:
            # Decoded again wide, so that narrowed() names the record and the value.
            values = np.full(inner, fill, dtype=np.int32)
            err, at = numeric(raw, n, is_format, is_float, values)
            check(err, at, spec, spec.vcf_type)
            narrowed(values, dtype, spec)
            raise _refuse(spec, f"record {at} holds a value outside the array's {dtype}")
        check(err, at, spec, spec.vcf_type)
        padded = _padded(values.reshape(block), spec, fill) if is_format else values.reshape(block)
        if is_float:
            return padded.view("<f4")
        return narrowed(padded, dtype, spec)
    starts = np.zeros(inner, np.int64)
    lengths = np.full(inner, SPAN_FILL, np.int64)
    err, at = string_spans(raw, n, starts, lengths, is_format)
    check(err, at, spec, spec.vcf_type)
    if is_format:
        starts = _padded(starts.reshape(block), spec, 0)
        lengths = _padded(lengths.reshape(block), spec, SPAN_FILL)
    if spec.vcf_type == "Character":
        chars = np.empty(starts.size, "<u4")
        first_characters(raw, starts.ravel(), lengths.ravel(), chars)
        return chars.reshape(spec.chunk_shape)
    return checked_vlen_utf8(raw, starts, lengths, spec)
