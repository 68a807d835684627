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
  (``records.htslib_rlen``, which needs REF and INFO/END, both at hand only in this pass).
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

The kernel reads each record byte at most twice: a locate pass walks descriptors only
(fixed part, ID, alleles, FILTER and INFO/FORMAT keys: O(fields) per record, never per
sample), sizes every segment exactly, then one copy pass moves every value byte once
(FORMAT blocks are contiguous sub-ranges of a field: one memcpy-like loop per
record, field and block). Memory: the input chunk, its segments (about the same size)
and the locate tables (24 bytes per record and field).

Errors are returned as ``(code, byte offset in buf)``, codes from ``vcfvirtual_codec.bcf.records``
(ERR_UNKNOWN_KEY for a key the slot maps do not cover); no read or write leaves ``buf`` or the
output whatever the bytes say.
"""

from __future__ import annotations

import numba
import numpy as np
from vcfvirtual_codec.bcf import records as R

# Subtracted from int8 GT bytes (see the module docstring); the codec adds it back.
from vcfvirtual_codec.columns import GT_SHIFT

SEG_CONTIG = 0
SEG_POSITION = 1
SEG_RLEN = 2
SEG_QUAL = 3
SEG_ID = 4
SEG_ALLELES = 5
SEG_FILTER = 6
N_FIXED_SEGMENTS = 7
FIXED_NAMES = ("contig", "position", "rlen", "qual", "id", "alleles", "filter")

# Columns of the locate tables.
_TYPE, _COUNT, _DATA = 0, 1, 2

_njit = numba.njit(nogil=True, cache=True)


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


@_njit
def _put_i32(out, p, value):
    v = np.uint32(np.int64(value) & 0xFFFFFFFF)
    out[p] = v & 0xFF
    out[p + 1] = (v >> 8) & 0xFF
    out[p + 2] = (v >> 16) & 0xFF
    out[p + 3] = (v >> 24) & 0xFF


@_njit
def demux_chunk(  # noqa: C901 - one loop per record (kernel)
    buf, offsets, info_slot, fmt_slot, n_info, n_fmt, n_samples, samples_chunk_size, end_key, gt_slot, scratch
):
    """Segments of one chunk: returns (out uint8, bounds int64, error code, error offset).

    ``offsets`` (int64) are the records' starts in ``buf``; ``info_slot``/``fmt_slot``
    (:func:`slot_maps`) map dictionary keys to segment slots; ``gt_slot``: FORMAT slot of
    GT, whose int8 values are stored minus GT_SHIFT (-1: none). ``scratch``: a uint8
    buffer reused for ``out`` when it is large enough (``out`` is then a view of it, valid
    until the caller reuses it): an index pass that allocates each chunk's output afresh
    pays a page fault per 4 KiB of it."""
    n = offsets.shape[0]
    if samples_chunk_size < 1:  # no block width to cut samples by
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), R.ERR_SHAPE, np.int64(0)
    nb = max(1, (n_samples + samples_chunk_size - 1) // samples_chunk_size)
    n_seg = N_FIXED_SEGMENTS + n_info + n_fmt * nb
    n_keys = info_slot.shape[0]
    empty = np.zeros(0, np.uint8)
    bounds = np.zeros(n_seg + 1, np.int64)
    sizes = np.zeros(n_seg, np.int64)
    # Locate tables: (type, count, data start) of each record's fields; -1 count = absent.
    id_loc = np.zeros((n, 2), np.int64)  # data start, length
    allele_loc = np.zeros((n, 2), np.int64)  # start of first allele descriptor, n_allele
    filt_loc = np.zeros((n, 1, 3), np.int64)  # 3-d as info_loc: one _typed_column specialisation
    info_loc = np.full((n, max(n_info, 1), 3), -1, np.int64)
    fmt_loc = np.full((n, max(n_fmt, 1), 3), -1, np.int64)
    rlens = np.zeros(n, np.int64)
    total_alleles = np.int64(0)
    for k in range(n):
        pos = offsets[k]
        if pos < 0 or pos + 32 > buf.shape[0]:
            return empty, bounds, R.ERR_TRAILING, pos
        l_shared = np.int64(R.u32(buf, pos))
        l_indiv = np.int64(R.u32(buf, pos + 4))
        if l_shared < R.MIN_L_SHARED:
            return empty, bounds, R.ERR_SHORT_SHARED, pos
        end = pos + 8 + l_shared
        rec_end = end + l_indiv
        if rec_end > buf.shape[0]:
            return empty, bounds, R.ERR_TRAILING, pos
        # rlen: htslib's replacement of a damaged one needs REF and END, both in this record.
        rlen = np.int64(R.i32(buf, pos + R.OFF_RLEN))
        if rlen < 0:
            rlen = R.htslib_rlen(buf, pos, end_key)
            if rlen < 0:
                return empty, bounds, R.ERR_OVERRUN, pos
            if rlen > 0x7FFFFFFF:
                return empty, bounds, R.ERR_RLEN, pos
        rlens[k] = rlen
        # ID
        t, c, d = R.typed_descriptor(buf, pos + R.OFF_ID, end)
        if d < 0 or d + c > end:
            return empty, bounds, R.ERR_OVERRUN, pos
        if t != R.BT_CHAR:
            return empty, bounds, R.ERR_ID_TYPE, pos
        id_loc[k, 0] = d
        id_loc[k, 1] = c
        sizes[SEG_ID] += c
        # alleles
        n_allele = np.int64(R.u32(buf, pos + R.OFF_N_ALLELE_INFO) >> np.uint32(16))
        if n_allele == 0:
            return empty, bounds, R.ERR_NO_REF, pos
        i = d + c
        allele_loc[k, 0] = i
        allele_loc[k, 1] = n_allele
        total_alleles += n_allele
        for _ in range(n_allele):
            t, c, d = R.typed_descriptor(buf, i, end)
            if d < 0 or d + c > end or t != R.BT_CHAR:
                return empty, bounds, R.ERR_OVERRUN, pos
            sizes[SEG_ALLELES] += c
            i = d + c
        # FILTER
        t, c, d = R.typed_descriptor(buf, i, end)
        size = R.type_size(t)
        if d < 0 or d + c * size > end or (c > 0 and (t < R.BT_INT8 or t > R.BT_INT32)):
            return empty, bounds, R.ERR_OVERRUN, pos
        filt_loc[k, 0, _TYPE] = t
        filt_loc[k, 0, _COUNT] = c
        filt_loc[k, 0, _DATA] = d
        sizes[SEG_FILTER] += c * size
        i = d + c * size
        # INFO
        n_info_rec = np.int64(R.u32(buf, pos + R.OFF_N_ALLELE_INFO) & np.uint32(0xFFFF))
        for _ in range(n_info_rec):
            key, j = R.read_key(buf, i, end)
            if j < 0:
                return empty, bounds, R.ERR_OVERRUN, pos
            t, c, d = R.typed_descriptor(buf, j, end)
            size = R.type_size(t)
            if d < 0 or d + c * size > end:
                return empty, bounds, R.ERR_OVERRUN, pos
            if t == R.BT_NULL and c > 0:
                return empty, bounds, R.ERR_NULL_VALUES, pos
            if key < 0 or key >= n_keys or info_slot[key] < 0:
                return empty, bounds, R.ERR_UNKNOWN_KEY, pos
            s = info_slot[key]
            if info_loc[k, s, _COUNT] < 0:  # htslib (find_info) takes a key's first value
                info_loc[k, s, _TYPE] = t
                info_loc[k, s, _COUNT] = c
                info_loc[k, s, _DATA] = d
                sizes[N_FIXED_SEGMENTS + s] += c * size
            i = d + c * size
        # FORMAT: every field is n_sample vectors; each samples block is a contiguous sub-range.
        n_fmt_rec = np.int64(buf[pos + R.OFF_N_FMT_SAMPLE + 3])
        n_sample_rec = np.int64(R.u32(buf, pos + R.OFF_N_FMT_SAMPLE) & np.uint32(0xFFFFFF))
        if n_fmt_rec > 0 and n_sample_rec != n_samples:
            return empty, bounds, R.ERR_SAMPLES, pos
        j = end
        for _ in range(n_fmt_rec):
            key, kj = R.read_key(buf, j, rec_end)
            if kj < 0:
                return empty, bounds, R.ERR_OVERRUN, pos
            t, c, d = R.typed_descriptor(buf, kj, rec_end)
            if d < 0:
                return empty, bounds, R.ERR_BAD_TYPE, pos
            if t == R.BT_NULL and c > 0:
                return empty, bounds, R.ERR_NULL_VALUES, pos
            size = R.type_size(t)
            nxt = d + n_sample_rec * c * size
            if nxt > rec_end:
                return empty, bounds, R.ERR_OVERRUN, pos
            if key < 0 or key >= n_keys or fmt_slot[key] < 0:
                return empty, bounds, R.ERR_UNKNOWN_KEY, pos
            f = fmt_slot[key]
            if fmt_loc[k, f, _COUNT] < 0:
                fmt_loc[k, f, _TYPE] = t
                fmt_loc[k, f, _COUNT] = c
                fmt_loc[k, f, _DATA] = d
                for b in range(nb):
                    s0 = b * samples_chunk_size
                    s1 = min(s0 + samples_chunk_size, n_samples)
                    sizes[N_FIXED_SEGMENTS + n_info + f * nb + b] += (s1 - s0) * c * size
            j = nxt
    # Segment sizes: headers plus the values counted above.
    for s in range(4):
        sizes[s] = 4 * n
    sizes[SEG_ID] += 5 * n
    sizes[SEG_ALLELES] += 4 * n + 4 * total_alleles
    for s in range(SEG_FILTER, n_seg):
        sizes[s] += 5 * n
    for s in range(n_seg):
        bounds[s + 1] = bounds[s] + sizes[s]
    if scratch.shape[0] >= bounds[n_seg]:
        out = scratch[: bounds[n_seg]]
    else:
        out = np.empty(bounds[n_seg], np.uint8)
    # Copy pass.
    for k in range(n):
        pos = offsets[k]
        # int64 values, as at every other call: one specialisation of _put_i32 to compile.
        _put_i32(out, bounds[SEG_CONTIG] + 4 * k, np.int64(R.i32(buf, pos + R.OFF_CHROM)))
        _put_i32(out, bounds[SEG_POSITION] + 4 * k, np.int64(R.i32(buf, pos + R.OFF_POS)))
        _put_i32(out, bounds[SEG_RLEN] + 4 * k, rlens[k])
        for b in range(4):
            out[bounds[SEG_QUAL] + 4 * k + b] = buf[pos + R.OFF_QUAL + b]
    # ID: typed column of chars.
    p = bounds[SEG_ID] + 5 * n
    for k in range(n):
        _put_i32(out, bounds[SEG_ID] + 4 * k, id_loc[k, 1])
        out[bounds[SEG_ID] + 4 * n + k] = R.BT_CHAR
        d = id_loc[k, 0]
        for b in range(id_loc[k, 1]):
            out[p + b] = buf[d + b]
        p += id_loc[k, 1]
    # Alleles: n_allele[n], lengths[total], bytes.
    q = bounds[SEG_ALLELES] + 4 * n  # lengths
    p = q + 4 * total_alleles  # bytes
    for k in range(n):
        _put_i32(out, bounds[SEG_ALLELES] + 4 * k, allele_loc[k, 1])
        i = allele_loc[k, 0]
        for _ in range(allele_loc[k, 1]):
            t, c, d = R.typed_descriptor(buf, i, buf.shape[0])
            _put_i32(out, q, c)
            q += 4
            for b in range(c):
                out[p + b] = buf[d + b]
            p += c
            i = d + c
    # FILTER, INFO and FORMAT blocks: typed columns. Every call passes the same argument
    # types (a whole 3-d table and its slot, int64 not literal ints), so numba compiles
    # _typed_column once rather than once per call site: a first index compiles less.
    none = np.int64(-1)  # no GT slot: FILTER and INFO are never shifted
    zero, one = np.int64(0), np.int64(1)
    _typed_column(buf, out, bounds[SEG_FILTER], filt_loc, zero, zero, one, zero, one, none)
    for s in range(n_info):
        _typed_column(buf, out, bounds[N_FIXED_SEGMENTS + s], info_loc, s, zero, one, zero, one, none)
    for f in range(n_fmt):
        for b in range(nb):
            s0 = b * samples_chunk_size
            s1 = min(s0 + samples_chunk_size, n_samples)
            start = bounds[N_FIXED_SEGMENTS + n_info + f * nb + b]
            _typed_column(buf, out, start, fmt_loc, f, s0, s1, one, n_samples, gt_slot)
    return out, bounds, R.OK, np.int64(0)


@_njit
def _typed_column(buf, out, start, locs, slot, s0, s1, per_sample, n_samples, gt_slot):
    """Write one typed column at ``out[start:]`` from the locate table ``locs[:, slot]``
    (type, count, data).

    With ``per_sample`` the field holds ``n_samples`` vectors of ``count`` values and only
    those of samples ``s0:s1`` are copied (one contiguous range per record). ``slot ==
    gt_slot``: int8 values are stored minus GT_SHIFT."""
    n = locs.shape[0]
    shift_gt = slot == gt_slot
    shift = np.uint8(GT_SHIFT)
    p = start + 5 * n
    for k in range(n):
        c = locs[k, slot, _COUNT]
        _put_i32(out, start + 4 * k, c)
        if c < 0:
            out[start + 4 * n + k] = 0
            continue
        t = locs[k, slot, _TYPE]
        out[start + 4 * n + k] = t
        width = c * R.type_size(t)
        d = locs[k, slot, _DATA]
        if per_sample:
            d += s0 * width
            m = (s1 - s0) * width
        else:
            m = width
        # Explicit loops over views clipped to both buffers: never past either, whatever
        # the table says. (A slice assignment, out[p:p+m] = buf[d:d+m], has numba compile
        # its shape-mismatch error, string formatting included: ~1 s of a first index.)
        src = buf[d : d + m]
        dst = out[p : p + m]
        todo = min(m, src.shape[0], dst.shape[0])
        if shift_gt and t == R.BT_INT8:
            # uint8 arithmetic wraps modulo 256 and vectorises, where the array expression
            # ``buf[...] - shift`` allocated a temporary per record and passed over the
            # bytes twice (3x slower on a 10,000-sample chunk).
            for b in range(todo):
                dst[b] = src[b] - shift
        else:
            for b in range(todo):
                dst[b] = src[b]
        p += m


@_njit
def gt_block_summary(seg, n, block_samples):
    """What a GT block segment (``demux_chunk``'s, int8 bytes stored minus GT_SHIFT) says
    of its calls as a whole, so that call_genotype_mask and call_genotype_phased can be
    read without decompressing it: ``(count, all_phased, none_phased)``.

    ``count``: the number of alleles every record holds, when every record holds GT as
    int8, that many for every sample, and no allele is missing, an end-of-vector or not an
    allele at all (a stored byte of 0x7E or more); else 0. ``all_phased`` / ``none_phased``:
    every record holds GT as int8 with at least two alleles, and the phase bit of every
    call's second allele (what the codec reads as phased) is set / clear. A segment shorter
    than its counts say claims nothing."""
    count = np.int64(-1)
    complete = True
    phase_known = True
    any_set = False
    any_clear = False
    p = 5 * n
    for k in range(n):
        c = np.int64(R.i32(seg, 4 * k))
        t = np.int64(seg[4 * n + k])
        if c <= 0:  # absent (missing calls) or empty (end-of-vector only)
            complete = False
            phase_known = False
            continue
        m = block_samples * c * R.type_size(t)
        if p + m > seg.shape[0]:  # not a block demux_chunk wrote: claim nothing, read no further
            return np.int64(0), False, False
        if t != R.BT_INT8:
            complete = False
            phase_known = False
            p += m
            continue
        if count < 0:
            count = c
        complete &= bool(c == count)
        phase_known &= bool(c >= 2)
        values = seg[p : p + m]  # sliced from 0 so that the reductions vectorise
        top = np.uint8(0)
        ors = np.uint8(0)
        ands = np.uint8(1)
        if c == 2:  # diploid calls: one pass over (first, second) allele pairs
            for s in range(block_samples):
                second = values[2 * s + 1]
                top = max(top, max(values[2 * s], second))
                ors |= second
                ands &= second
        else:
            for b in range(m):
                top = max(top, values[b])
            for s in range(block_samples if c > 2 else 0):
                ors |= values[s * c + 1]
                ands &= values[s * c + 1]
        # Stored minus 2: alleles 0..62 are 0x00..0x7D; a missing allele (0x00/0x01) wraps
        # to 0xFE/0xFF, int8 missing and end-of-vector (0x80, 0x81) become 0x7E, 0x7F, and
        # the bytes no allele makes (0x82..0xFF, refused by the codec) 0x80..0xFD.
        complete &= bool(top < 0x7E)
        if c >= 2:  # the phase bit (bit 0, which the shift keeps) of every second allele
            any_set |= bool(ors & 1)
            any_clear |= not bool(ands & 1)
        p += m
    complete_count = count if complete and count > 0 else np.int64(0)
    return complete_count, phase_known and not any_clear, phase_known and not any_set
