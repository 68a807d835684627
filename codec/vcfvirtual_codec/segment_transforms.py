"""Reversible byte transforms applied to a columns segment before it is compressed.

A transform rearranges a segment's decompressed bytes so that the compressor finds more
to remove, without changing their length: the preamble's length, the codec's bounds and
the kernels all see the segment as the format defines it, once the transform is undone
right after decompression. Each is named by a preamble flag
(:data:`vcfvirtual_codec.columns.FLAG_POSITION_DELTA`).

Positions: a chunk's ``int32`` positions rise by small steps (sorted within a contig), so
they are stored as the differences from the value before (the first from 0, modulo 2^32
so that a new contig's smaller position round-trips), then cut into byte planes (every
difference's low byte, then every second byte...). The high planes are then almost all
zeros and the compressor stores them in a few bytes: on cohort A, 0.32 MB of positions
become 0.15 MB (``benchmarks/storage_encodings.py``). Vectorised numpy: ~10 us a chunk.
"""

from __future__ import annotations

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
    np.cumsum(steps, dtype=np.uint32, out=planes.view("<u4"))
