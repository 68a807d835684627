"""The demux kernel, now in the package (``vcfvirtual.cache.columns_demux``, whose docstring
gives the segment byte formats); re-exported for the prototype's scripts and tests, with its
old defaults (no GT shift, no scratch buffer)."""

from __future__ import annotations

import numpy as np

from vcfvirtual.cache import columns_demux as _package
from vcfvirtual.cache.columns_demux import (
    FIXED_NAMES,
    GT_SHIFT,
    N_FIXED_SEGMENTS,
    SEG_ALLELES,
    SEG_CONTIG,
    SEG_FILTER,
    SEG_ID,
    SEG_POSITION,
    SEG_QUAL,
    SEG_RLEN,
    n_blocks,
    slot_maps,
)

__all__ = [
    "FIXED_NAMES",
    "GT_SHIFT",
    "N_FIXED_SEGMENTS",
    "SEG_ALLELES",
    "SEG_CONTIG",
    "SEG_FILTER",
    "SEG_ID",
    "SEG_POSITION",
    "SEG_QUAL",
    "SEG_RLEN",
    "demux_chunk",
    "n_blocks",
    "slot_maps",
]

_NO_SCRATCH = np.zeros(0, np.uint8)  # never large enough: each chunk gets its own output


def demux_chunk(
    buf, offsets, info_slot, fmt_slot, n_info, n_fmt, n_samples, samples_chunk_size, end_key, gt_slot=-1, scratch=None
):
    """:func:`vcfvirtual.cache.columns_demux.demux_chunk` with the prototype's defaults."""
    return _package.demux_chunk(
        buf,
        offsets,
        info_slot,
        fmt_slot,
        n_info,
        n_fmt,
        n_samples,
        samples_chunk_size,
        end_key,
        gt_slot,
        _NO_SCRATCH if scratch is None else scratch,
    )
