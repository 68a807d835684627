"""Reversible byte transforms applied to a columns segment before it is compressed.

A transform rearranges a segment's decompressed bytes so that the compressor finds more
to remove, without changing their length: the preamble's length, the codec's bounds and
the kernels all see the segment as the format defines it, once the transform is undone
right after decompression. Each is named by a preamble flag
(:data:`vcfvirtual_codec.columns.FLAG_POSITION_DELTA`, ``FLAG_VALUE_PLANES``,
``FLAG_INFO_PLANES``).

Positions: a chunk's ``int32`` positions rise by small steps (sorted within a contig), so
they are stored as the differences from the value before (the first from 0, modulo 2^32
so that a new contig's smaller position round-trips), then cut into byte planes (every
difference's low byte, then every second byte...). The high planes are then almost all
zeros and the compressor stores them in a few bytes: on cohort A, 0.32 MB of positions
become 0.15 MB (``benchmarks/storage_encodings.py``). Vectorised numpy: ~10 us a chunk.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def position_deltas(values: np.ndarray) -> np.ndarray:
    """``4 n`` bytes of little-endian int32 positions -> their differences' byte planes."""
    if values.shape[0] % 4:
        raise ValueError(f"a positions segment holds 4 bytes a record, not {values.shape[0]} bytes")
    v = values.view("<u4")
    steps = np.empty_like(v)
    if v.shape[0]:
        steps[0] = v[0]
        np.subtract(v[1:], v[:-1], out=steps[1:])  # uint32: wraps, as the decode's sum does
    return np.ascontiguousarray(steps.view(np.uint8).reshape(-1, 4).T).reshape(-1)


def undo_position_deltas(planes: np.ndarray) -> None:
    """:func:`position_deltas` undone, in place on the decompressed segment's bytes."""
    if planes.shape[0] % 4:
        raise ValueError(f"a positions segment holds 4 bytes a record, not {planes.shape[0]} bytes")
    steps = np.ascontiguousarray(planes.reshape(4, -1).T).view("<u4").reshape(-1)
    # add.accumulate is cumsum without its dtype dispatch: ~5 us less a chunk of 1,000.
    np.add.accumulate(steps, out=planes.view("<u4"))


# FORMAT values: each record's values are ``count x samples`` numbers of the record's BCF
# type (int8, int16, int32, float32: BCF picks the narrowest integer type per record), so a
# segment's bytes mix widths. Within each record, values of 2 or 4 bytes are stored as byte
# planes (all values' low bytes, then the next...): small depths and likelihoods then leave
# high planes of zeros. Records of one layout (count and type) in a row are one numpy
# reshape, so the cost is per run of records, not per value (on cohort B's call_PL, 7.78 ->
# 7.20 MB at Zstd 3, 6.88 at Zstd 5, against bio2zarr's 7.07).
_TYPE_SIZE = np.zeros(256, np.int64)
_TYPE_SIZE[[1, 2, 3, 5, 7]] = [1, 2, 4, 4, 1]  # BCF int8, int16, int32, float32, char
_KNOWN_TYPE = np.zeros(256, bool)
_KNOWN_TYPE[[0, 1, 2, 3, 5, 7]] = True


def _value_runs(seg: np.ndarray, n: int, vectors: int) -> list[tuple[int, int, int, int]]:
    """(first byte, records, values a record, value size) of each run of consecutive
    records with one layout and values wider than a byte, in a typed column of ``n``
    records of ``vectors`` samples. ValueError where the counts and types do not account
    for the segment's bytes exactly."""
    if seg.shape[0] < 5 * n:
        raise ValueError(f"a typed column of {n} records holds {seg.shape[0]} bytes")
    counts = seg[: 4 * n].view("<i4").astype(np.int64)
    types = seg[4 * n : 5 * n]
    if not _KNOWN_TYPE[types].all():
        raise ValueError("a record's type code is not BCF's")
    sizes = _TYPE_SIZE[types]
    lengths = np.maximum(counts, 0) * sizes * vectors
    ends = 5 * n + np.cumsum(lengths)
    if (ends[-1] if n else 5 * n) != seg.shape[0]:
        raise ValueError(f"the records' values do not fill the segment's {seg.shape[0]} bytes")
    starts = ends - lengths
    cuts = np.flatnonzero((lengths[1:] != lengths[:-1]) | (sizes[1:] != sizes[:-1])) + 1
    bounds = [0, *cuts.tolist(), n]
    return [
        (int(starts[a]), b - a, int(lengths[a] // sizes[a]), int(sizes[a]))
        for a, b in zip(bounds, bounds[1:])
        if n and sizes[a] > 1 and lengths[a] > 0
    ]


_WORD: dict[int, np.dtype[np.unsignedinteger[Any]]] = {2: np.dtype("<u2"), 4: np.dtype("<u4")}


def value_planes(seg: np.ndarray, n: int, vectors: int) -> np.ndarray:
    """A FORMAT typed column's bytes with each record's wider values in byte planes
    (``seg`` itself where no record has any: int8 values, strings)."""
    runs = _value_runs(seg, n, vectors)
    if not runs:
        return seg
    out = seg.copy()
    for start, records, values, size in runs:
        words = seg[start : start + records * values * size].view(_WORD[size]).reshape(records, values)
        planes = out[start : start + records * values * size].reshape(records, size, values)
        for k in range(size):  # one plane at a time: contiguous loops, not a byte transpose
            planes[:, k, :] = words >> (8 * k)
    return out


def undo_value_planes(seg: np.ndarray, n: int, vectors: int) -> None:
    """:func:`value_planes` undone, in place on the decompressed segment's bytes."""
    for start, records, values, size in _value_runs(seg, n, vectors):
        span = seg[start : start + records * values * size]
        planes = span.reshape(records, size, values)
        # From the high plane down, shifting in place: no temporary per plane (5x faster
        # than or-ing shifted copies, ~1 ms per 6 MB of int16 values).
        words = planes[:, size - 1, :].astype(_WORD[size])
        for k in range(size - 2, -1, -1):
            words <<= 8
            words |= planes[:, k, :]
        span.view(_WORD[size]).reshape(records, values)[:] = words


# INFO values: a typed column of one vector per record, rearranged by a compiled kernel
# (_kernels/info_planes.pyx, whose docstring gives the layout): the types, the counts plus
# one in byte planes, the integer values in byte planes across the records, floats
# verbatim and each string's length beside its characters. On the sites-only cohort of
# benchmarks/wide_info.py (41 INFO fields) its INFO segments are 41.3 -> 37.2 MB
# (bio2zarr's arrays 37.65 MB); the undo costs ~0.1-0.2 ms a chunk of 10,000 records.
# The kernel is imported by the first INFO segment rearranged or put back, not with this
# module: a read of positions or genotypes never loads it (~0.3 ms of a fresh process).


def info_planes(seg: np.ndarray, n: int) -> np.ndarray:
    """An INFO typed column of ``n`` records, rearranged (same length). ValueError, naming
    the record, where its counts and types are not a typed column's."""
    from ._kernels import info_planes as _info

    out = np.empty_like(seg)
    err, at = _info.info_planes(seg, n, out)
    if err:
        raise ValueError(f"record {at}: {_info.ERRORS[err]}")
    return out


def undo_info_planes(seg: np.ndarray, n: int) -> None:
    """:func:`info_planes` undone, in place on the decompressed segment's bytes (through a
    copy: the rearrangement is no permutation a pass in place can undo). ValueError,
    naming the record, where the bytes are not the rearrangement of a typed column."""
    from ._kernels import info_planes as _info

    err, at = _info.undo_info_planes(seg.copy(), n, seg)
    if err:
        raise ValueError(f"record {at}: {_info.ERRORS[err]}")
