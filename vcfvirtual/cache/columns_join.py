"""Joining a stored partial chunk to the records that complete it (``index --append``).

A store's last variants chunk is partial unless its records are a multiple of the chunk
length. Appending files, their first records complete that chunk: Zarr's chunks are
regular, so the grown store's chunk k must hold records ``[k*N, (k+1)*N)`` whatever file
they came from. Rather than read the old records again from a BCF that may be gone, the
task writing the first new part reads the old chunk's segments from the cache (each
checked: preamble, CRC32, decompressed length), and joins each to the same segment of
the new records: the segment formats (:mod:`vcfvirtual_codec.columns`) are per-record
columns, so two of them concatenate column by column. The joined chunk goes in the new
part; the old part is left as it is (its partial chunk is then referenced no more).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numcodecs import Blosc, Zstd
from vcfvirtual_codec import columns as codec_columns
from vcfvirtual_codec.checks import inflate_limit

from ..errors import StaleCacheError
from ..io.parts import part_url
from ..io.sources import StorageOptions, open_source

PREAMBLE = codec_columns.PREAMBLE
KIND = codec_columns.SEGMENT_KINDS
KIND_NAME = {code: name for name, code in KIND.items()}  # a preamble's kind code -> its name
# Segments of one int32 (qual: uint32) per record.
_FIXED_WIDTH = (KIND["contig"], KIND["position"], KIND["rlen"], KIND["qual"])
_DECODERS = {"zstd": Zstd(), "blosc": Blosc()}


@dataclass(frozen=True)
class StoredSegment:
    """One segment of a stored chunk: its name (``position``, ``format/GT``...) and
    samples block, where it is (a part's path or URL, byte range), and what the writer
    planned for it (kind code, dictionary key, samples in the block, GT shift flag,
    compressor), which its preamble must say."""

    name: str
    block: int
    location: str
    offset: int
    length: int
    kind: int
    key: int
    width: int
    shifted: bool
    compressor: str


def read_payload(segment: StoredSegment, records: int, storage_options: StorageOptions = None) -> np.ndarray:
    """The decompressed bytes of a stored segment of ``records`` records, checked.

    Raises
    ------
    StaleCacheError
        The bytes are not that segment as the index wrote it (another preamble, a failed
        CRC32, a frame that does not decompress to its length): the cache changed.
    """
    with open_source(segment.location, storage_options) as f:
        f.seek(segment.offset)
        data = f.read(segment.length)
    return payload_of(data, segment, records)


def payload_of(data: bytes, segment: StoredSegment, records: int) -> np.ndarray:
    """:func:`read_payload` on bytes already read (pure)."""
    where = f"{segment.location} at {segment.offset}"

    def stale(problem: str) -> StaleCacheError:
        return StaleCacheError(
            segment.location,
            f"segment {segment.name} (block {segment.block}) at {segment.offset}: {problem}",
            hint="the cache does not match its references: index the files again",
        )

    if len(data) != segment.length or len(data) < PREAMBLE.size:
        raise stale(f"{len(data)} bytes where the references say {segment.length}")
    magic, kind, flags, _, key, n, block, width, length, crc = PREAMBLE.unpack_from(data)
    want = (segment.kind, segment.key, records, segment.block, segment.width)
    if magic not in codec_columns.READ_MAGICS or (kind, key, n, block, width) != want:
        raise stale(f"its preamble says {(magic, kind, key, n, block, width)}, expected {want}")
    problem = _flags_problem(flags, magic, kind, length, n, segment.shifted)
    if problem:
        raise stale(problem)
    head, frame = data[: PREAMBLE.size - 4], data[PREAMBLE.size :]
    if codec_columns.segment_crc(head, frame) != crc:
        raise stale("it fails its CRC32")
    # Nothing is allocated past what the compressed bytes can honestly stand for, and the
    # frame must decompress to exactly the preamble's length (as the codec decodes it).
    body = np.frombuffer(frame, np.uint8)
    if length > inflate_limit(body.shape[0]):
        raise stale(f"its preamble claims {length} bytes from {body.shape[0]} compressed; refusing to allocate")
    declared = (
        codec_columns.zstd_content_size(body) if segment.compressor == "zstd" else codec_columns.blosc_sizes(body)[0]
    )
    if declared != length:
        raise stale(f"its frame declares {declared} bytes, its preamble {length} ({where})")
    raw = np.empty(length, np.uint8)
    try:
        _DECODERS[segment.compressor].decode(body, raw)
    except (RuntimeError, ValueError, KeyError) as e:
        raise stale(f"it does not decompress to its length ({e})") from None
    try:
        return _transforms_undone(raw, kind, flags, n, width)
    except ValueError as e:
        raise stale(f"its values cannot be put back ({e})") from None


def _flags_problem(flags: int, magic: bytes, kind: int, length: int, n: int, shifted: bool) -> str | None:
    """What is wrong with a stored segment's flags, against the plan's GT shift flag
    (``shifted``: a GT block's), or None."""
    cc = codec_columns
    # A GT block is stored shifted, or (all phased or none) as its alleles: joined as
    # shifted bytes either way (_transforms_undone), which the writer turns into alleles
    # again where the joined block's calls allow it.
    if bool(flags & (cc.FLAG_GT_SHIFT | cc.FLAG_GT_ALLELES)) != shifted:
        return "its GT shift flag is not the one this version writes"
    phase = flags & (cc.FLAG_GT_ALL_PHASED | cc.FLAG_GT_NONE_PHASED)
    alleles = flags & cc.FLAG_GT_ALLELES and not (
        flags & cc.FLAG_GT_SHIFT or magic != cc.MAGIC or phase not in (cc.FLAG_GT_ALL_PHASED, cc.FLAG_GT_NONE_PHASED)
    )
    # A store written before positions were stored as differences (segment format "VVS2")
    # is appended to as it is: its last chunk's positions are read plain, written anew.
    delta = flags & cc.FLAG_POSITION_DELTA and (kind != KIND["position"] or magic != cc.MAGIC or length != 4 * n)
    # The one bit names a FORMAT segment's value planes and an INFO segment's rearrangement
    # (a store written before INFO segments were rearranged is appended to as it is).
    planes = flags & cc.FLAG_VALUE_PLANES and (
        kind not in (KIND["format"], KIND["info"]) or shifted or magic != cc.MAGIC
    )
    # Packed values (FLAG_GT_PACKED) are an alleles block's only.
    packed = flags & cc.FLAG_GT_PACKED and not flags & cc.FLAG_GT_ALLELES
    if (flags & cc.FLAG_GT_ALLELES and not alleles) or delta or planes or packed:
        return f"its flags {flags} are not what the index writes for this segment"
    return None


def _transforms_undone(raw: np.ndarray, kind: int, flags: int, n: int, width: int) -> np.ndarray:
    """A decompressed segment's bytes as the demux made them: positions summed back,
    value planes and INFO columns put back in order (as the codec undoes them:
    :func:`vcfvirtual_codec.columns.undo_transforms`), an alleles GT block (its values
    unpacked first if they are packed into bits) as shifted BCF bytes. ValueError
    (:class:`~vcfvirtual_codec.columns.TransformUndoError` naming the transform) for
    bytes no transform of the index made."""
    codec_columns.undo_transforms(raw, KIND_NAME[kind], flags, n, width)
    if flags & codec_columns.FLAG_GT_PACKED:
        raw = codec_columns.unpacked_block(raw, n, width)
    if flags & codec_columns.FLAG_GT_ALLELES:
        return codec_columns.shifted_block(raw, n, width, bool(flags & codec_columns.FLAG_GT_ALL_PHASED))
    return raw


def join_payloads(kind: int, first: np.ndarray, first_n: int, second: np.ndarray, second_n: int) -> np.ndarray:
    """The segment of ``first_n`` then ``second_n`` records, from the two segments of the
    same kind (decompressed): every per-record column of the format concatenated.

    Raises
    ------
    ValueError
        A segment shorter than its records' columns (never for segments the index wrote).
    """
    if kind in _FIXED_WIDTH:
        return np.concatenate([first, second])
    if kind == KIND["alleles"]:
        return _concatenate_columns([_allele_columns(first, first_n), _allele_columns(second, second_n)])
    return _concatenate_columns([_typed_columns(first, first_n), _typed_columns(second, second_n)])


def _typed_columns(seg: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """A typed column's parts: ``int32 count[n]``, ``uint8 type[n]``, the values."""
    if seg.shape[0] < 5 * n:
        raise ValueError(f"a segment of {n} records holds {seg.shape[0]} bytes")
    return seg[: 4 * n], seg[4 * n : 5 * n], seg[5 * n :]


def _allele_columns(seg: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """The alleles segment's parts: ``int32 n_allele[n]``, ``int32 length[sum]``, the bytes."""
    if seg.shape[0] < 4 * n:
        raise ValueError(f"an alleles segment of {n} records holds {seg.shape[0]} bytes")
    total = int(seg[: 4 * n].view("<i4").astype(np.int64).sum())
    if total < 0 or seg.shape[0] < 4 * (n + total):
        raise ValueError(f"an alleles segment of {n} records claims {total} alleles")
    return seg[: 4 * n], seg[4 * n : 4 * (n + total)], seg[4 * (n + total) :]


def _concatenate_columns(pair: Sequence[tuple[np.ndarray, ...]]) -> np.ndarray:
    first, second = pair
    return np.concatenate([part for column in zip(first, second) for part in column])


def location_of(cache_url: str, part: str) -> str:
    """A part's location for :func:`open_source`: a local path for a ``file://`` cache."""
    url = part_url(cache_url, part)
    return url.removeprefix("file://") if url.startswith("file://") else url
