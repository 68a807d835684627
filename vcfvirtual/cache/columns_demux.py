"""Split one variants chunk of inflated BCF records into per-array segments (the ``columns`` cache layout).

Input: the inflated bytes of one variants chunk (whole BCF 2.2 records, as the ``raw``
cache holds them) and each record's offset in them. Output: one
``uint8`` buffer holding every segment of the chunk back to back, and ``bounds`` (int64,
``n_segments + 1``): segment ``s`` is ``out[bounds[s]:bounds[s + 1]]``. Each segment is
later compressed on its own and becomes one Zarr chunk's byte range.

Segments keep BCF's own typed encoding (sentinels, widths) so that dtype and width
decisions stay read-time; only the record interleaving is undone. ``n`` below is the
number of records in the chunk. All integers little-endian.

Segment slots (``N_FIXED_SEGMENTS + n_info + n_format * n_blocks`` in all):

* ``SEG_CONTIG``, ``SEG_POSITION``, ``SEG_RLEN``: ``int32[n]``. CHROM and POS as stored
  (POS 0-based). rlen as htslib reads it: a stored rlen of 2^31 or more is replaced here
  (htslib_rlen of the kernels' bcf.pxd, which needs REF and INFO/END, both at hand only in this pass).
* ``SEG_QUAL``: ``uint32[n]``, the float32 bit patterns of QUAL (missing NaN kept).
* ``SEG_ID``, ``SEG_FILTER``, and each INFO key (slot ``N_FIXED_SEGMENTS + info_slot``):
  a *typed column*::

      int32 count[n]     values in the record's vector; -1 when the record lacks
                         the field (a Flag that is set has count 0)
      uint8 type[n]      BCF type code (records.BT_*) of the vector, 0 when absent
      values             per record, count * type_size(type) bytes, verbatim from BCF

* ``SEG_ALLELES``::

      int32 n_allele[n]
      int32 length[sum(n_allele)]   each allele's typed char-vector length (NUL padding
                                    included, as stored)
      bytes                         the allele characters, concatenated

* each FORMAT key ``f`` and samples block ``b`` (slot ``N_FIXED_SEGMENTS + n_info +
  f * n_blocks + b``): a typed column whose ``count`` is the values *per sample* and whose
  values are, per record, the ``block_samples * count`` typed values of just the samples
  ``[b * samples_chunk_size, min((b + 1) * samples_chunk_size, n_samples))``. For GT
  that is the int8/int16 allele bytes of those samples, phase bits and sentinels kept,
  except one reversible byte map: in records whose GT is int8, each GT byte is stored
  minus 2 (mod 256) (``GT_SHIFT``). BCF writes allele ``a`` as ``(a + 1) << 1 | phased``,
  so alleles 0/1 are 0b01x/0b10x: two bit planes that change together, which a bit
  shuffle then compresses twice. Minus 2 gives 0b00x/0b01x (one plane per allele bit);
  missing 0x80 -> 0x7E, end-of-vector 0x81 -> 0x7F; the phase bit (bit 0) is unchanged.
  The decoder adds 2 back (decode.genotypes ``shifted``); measured in benchmarks/FINDINGS-columns.md.
  A block whose calls are all phased or none is then rewritten by the writer as the
  alleles it decodes to (columns.py ``_as_alleles``, the codec's FLAG_GT_ALLELES), and
  those alleles, when 4 bits or fewer hold them, packed into 1, 2 or 4 bits each
  (``_as_packed``, FLAG_GT_PACKED); the demux always writes the shifted bytes, which the
  block summary reads. The common block (biallelic, no missing call) gets its summary,
  alleles and 1-bit packing from one pass (``gt_block_encode``, ``_gt_block``). Every
  other transform of a segment (position deltas, value planes) is likewise the writer's,
  after the demux.

The kernel reads each record byte at most twice: a locate pass walks descriptors only
(fixed part, ID, alleles, FILTER and INFO/FORMAT keys: O(fields) per record, never per
sample), sizes every segment exactly, then one copy pass moves every value byte once
(FORMAT blocks are contiguous sub-ranges of a field: one memcpy-like loop per
record, field and block). Memory: the input chunk, its segments (about the same size)
and the locate tables (24 bytes per record and field). A call may write only some of the
segments (``select``: the columns writer demuxes a large chunk one samples block at a
time), or none (``scratch`` None: the bounds alone).

Errors are returned as ``(code, byte offset in buf)``, codes from ``vcfvirtual_codec.bcf.records``
(ERR_UNKNOWN_KEY for a key the slot maps do not cover); no read or write leaves ``buf`` or the
output whatever the bytes say.
"""

from __future__ import annotations

import numpy as np

# The kernels are compiled ahead of time (vcfvirtual_codec/_kernels/demux.pyx), and so
# are the slot numbers they write by; GT_SHIFT is what int8 GT bytes are stored minus
# (the codec's vcfvirtual_codec.columns.GT_SHIFT, which it adds back).
from vcfvirtual_codec._kernels.demux import (
    GT_SHIFT,
    N_FIXED_SEGMENTS,
    SEG_ALLELES,
    SEG_CONTIG,
    SEG_FILTER,
    SEG_ID,
    SEG_POSITION,
    SEG_QUAL,
    SEG_RLEN,
    clear_avx_upper,
    demux_chunk,
    gt_block_encode,
    gt_block_summary,
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
    "clear_avx_upper",
    "demux_chunk",
    "gt_block_encode",
    "gt_block_summary",
    "n_blocks",
    "slot_maps",
]

FIXED_NAMES = ("contig", "position", "rlen", "qual", "id", "alleles", "filter")  # by SEG_* slot


def n_blocks(n_samples: int, samples_chunk_size: int) -> int:
    return max(1, -(-n_samples // samples_chunk_size))


def slot_maps(info_keys: list[int], format_keys: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Dictionary key -> INFO slot and FORMAT slot (-1: no segment), in the given order."""
    size = max([*info_keys, *format_keys, -1]) + 1
    info_slot = np.full(size, -1, np.int32)
    fmt_slot = np.full(size, -1, np.int32)
    for i, k in enumerate(info_keys):
        info_slot[k] = i
    for i, k in enumerate(format_keys):
        fmt_slot[k] = i
    return info_slot, fmt_slot
