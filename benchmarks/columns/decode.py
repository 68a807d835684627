"""Decode ``demux`` segments (see demux.py for their byte formats) into VCF Zarr chunks.

Each kernel takes one (already decompressed) segment and the number of records ``n`` its
chunk holds, and fills a preallocated output of the *full* chunk shape, as
``vcfvirtual_codec.decode`` does from whole records; values and sentinels follow that
module exactly (bio2zarr's semantics): integers -1 missing / -2 fill, floats as bit
patterns 0x7F800001 missing / 0x7F800002 fill, call_genotype -1 missing / -2 fill,
phasing from the second allele's low bit. Kernels return ``(error code, byte offset in
the segment)``; every read is bounds-checked against the segment, every write against
the output, so a damaged segment fails with ERR_SEGMENT/ERR_OVERRUN rather than reading
elsewhere.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compat import ERR_GT_VALUE, ERR_SHAPE, FLOAT_END_BITS, FLOAT_MISSING_BITS, SPAN_MISSING
from ._compat import records as R
from .demux import GT_SHIFT

# A segment whose length disagrees with its header (counts, types, n).
ERR_SEGMENT = 30

_njit = numba.njit(nogil=True, cache=True)


@_njit
def int32_column(seg, n, add, out):
    """``int32[n]`` segment (contig, position, rlen) plus ``add`` into ``out[:n]``.

    POS below -1 is refused as the codec does (htslib reads POS unsigned)."""
    if seg.shape[0] != 4 * n or out.shape[0] < n:
        return ERR_SEGMENT, np.int64(0)
    for k in range(n):
        v = np.int64(R.i32(seg, 4 * k))
        if add == 1 and v < -1:
            return R.ERR_NEGATIVE_POS, np.int64(4 * k)
        out[k] = v + add
    return R.OK, np.int64(0)


@_njit
def quality(seg, n, out_bits):
    """QUAL bits into ``out_bits`` (uint32 view of the float32 chunk); a NaN other than
    missing becomes the quiet NaN htslib's readers return, as the codec does."""
    if seg.shape[0] != 4 * n or out_bits.shape[0] < n:
        return ERR_SEGMENT, np.int64(0)
    for k in range(n):
        bits = R.u32(seg, 4 * k)
        if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0 and bits != 0x7F800001:
            bits |= 0x400000
        out_bits[k] = bits
    return R.OK, np.int64(0)


@_njit
def column_starts(seg, n, n_vectors):
    """Start of each record's values in a typed column, and the column's checked length.

    Returns (starts int64[n + 1], error, offset); ``n_vectors`` is the block's samples for a
    FORMAT block, 1 otherwise."""
    starts = np.zeros(n + 1, np.int64)
    if seg.shape[0] < 5 * n:
        return starts, ERR_SEGMENT, np.int64(0)
    p = np.int64(5 * n)
    for k in range(n):
        starts[k] = p
        c = np.int64(R.i32(seg, 4 * k))
        if c < 0:
            continue
        size = R.type_size(np.int64(seg[4 * n + k]))
        if size < 0:
            return starts, R.ERR_BAD_TYPE, np.int64(4 * n + k)
        p += c * size * n_vectors
        if p > seg.shape[0]:
            return starts, ERR_SEGMENT, np.int64(4 * k)
    starts[n] = p
    if p != seg.shape[0]:
        return starts, ERR_SEGMENT, p
    return starts, R.OK, np.int64(0)


@_njit
def _gt_int(seg, i, t, shifted):
    """A GT value of type ``t``; int8 values of a shifted segment get GT_SHIFT back."""
    if shifted and t == R.BT_INT8:
        return np.int64(np.int8(np.uint8((seg[i] + GT_SHIFT) & 0xFF)))
    return R.read_int(seg, i, t)


@_njit
def genotypes(seg, n, out_gt, out_phased, max_allele, shifted=False):  # noqa: C901 - one loop per record (kernel)
    """A GT block segment into call_genotype (n_rows, block_samples, ploidy) and
    call_genotype_phased (same rows and samples; zero rows: alleles only).

    ``shifted``: the segment's int8 GT bytes were stored minus GT_SHIFT (demux ``gt_slot``)."""
    add = np.uint8(GT_SHIFT if shifted else 0)
    n_samples = out_gt.shape[1]
    ploidy = out_gt.shape[2]
    if out_gt.shape[0] < n:
        return ERR_SHAPE, np.int64(0)
    starts, err, at = column_starts(seg, n, n_samples)
    if err != R.OK:
        return err, at
    with_phase = out_phased.shape[0] > 0
    flat_gt = out_gt.reshape(out_gt.shape[0], n_samples * ploidy)
    for k in range(n):
        c = np.int64(R.i32(seg, 4 * k))
        t = np.int64(seg[4 * n + k])
        d = starts[k]
        if c < 0:
            out_gt[k, :, :] = -1
            if with_phase:
                out_phased[k, :] = ploidy == 1
            continue
        if c > ploidy:
            return ERR_SHAPE, np.int64(4 * k)
        if c == 0:
            out_gt[k, :, :] = -2
            if with_phase:
                out_phased[k, :] = False
            continue
        if t < R.BT_INT8 or t > R.BT_INT32:
            return R.ERR_BAD_TYPE, np.int64(4 * n + k)
        if t == R.BT_INT8 and c == ploidy:
            # The common case, branch-free so LLVM vectorises it (as the codec's kernel).
            # Index a slice from 0: with seg[d + i] numba's negative-index wraparound
            # check (d + i may be negative as far as LLVM knows) blocks vectorisation,
            # measured 4x slower (2.3 vs 8.9 GB/s).
            src = seg[d : d + n_samples * c]
            row = flat_gt[k]
            too_big = False
            negative = False
            any_end = False
            for i in range(src.shape[0]):
                b = np.uint8(src[i] + add)
                value = (np.int64(np.int8(b)) >> 1) - 1
                negative |= b > 0x81
                any_end |= b == 0x81
                value = np.int64(-1) if b == 0x80 else (np.int64(-2) if b == 0x81 else value)
                too_big |= value > max_allele
                row[i] = value
            early_end = False
            if any_end:
                for s in range(n_samples):
                    for a in range(c - 1):
                        early_end |= np.uint8(seg[d + s * c + a] + add) == 0x81
            if not early_end:
                if negative:
                    return ERR_GT_VALUE, d
                if too_big:
                    return ERR_SHAPE, d
                if with_phase:
                    for s in range(n_samples):
                        out_phased[k, s] = c < 2 or (seg[d + s * c + 1] & 1) == 1
                continue
        size = R.type_size(t)
        missing, vector_end = R.int_sentinels(t)
        for s in range(n_samples):
            base = d + s * c * size
            ended = False
            for a in range(ploidy):
                if a >= c or ended:
                    out_gt[k, s, a] = -2
                    continue
                raw = _gt_int(seg, base + a * size, t, shifted)
                if raw == vector_end:
                    out_gt[k, s, a] = -2
                    ended = True
                elif raw == missing:
                    out_gt[k, s, a] = -1
                elif raw < 0:
                    return ERR_GT_VALUE, base + a * size
                else:
                    value = (raw >> 1) - 1
                    if value > max_allele:
                        return ERR_SHAPE, base + a * size
                    out_gt[k, s, a] = value
            if with_phase:
                if c >= 2:
                    out_phased[k, s] = (_gt_int(seg, base + size, t, shifted) & 1) == 1
                else:
                    out_phased[k, s] = True
    return R.OK, np.int64(0)


@_njit
def numeric(seg, n, is_format, is_float, out):  # noqa: C901 - one loop per record (kernel)
    """An INFO segment (out: rows, 1, width) or a FORMAT block segment (rows, block
    samples, width) of Integer/Float values into int32 (floats as bits), as the codec's
    ``field_numeric``: absent -> missing; past the record's count -> fill; after an
    end-of-vector -> fill (ints) or missing (floats); INFO "." -> missing in every slot."""
    n_vectors = out.shape[1]
    width = out.shape[2]
    if out.shape[0] < n:
        return ERR_SHAPE, np.int64(0)
    starts, err, at = column_starts(seg, n, n_vectors)
    if err != R.OK:
        return err, at
    missing_out = FLOAT_MISSING_BITS if is_float else np.int32(-1)
    fill_out = FLOAT_END_BITS if is_float else np.int32(-2)
    for k in range(n):
        c = np.int64(R.i32(seg, 4 * k))
        t = np.int64(seg[4 * n + k])
        d = starts[k]
        if c < 0:
            out[k, :, :] = missing_out
            continue
        if c > width:
            return ERR_SHAPE, np.int64(4 * k)
        if is_float:
            if t != R.BT_FLOAT and c > 0:
                return R.ERR_BAD_TYPE, np.int64(4 * n + k)
        elif c > 0 and (t < R.BT_INT8 or t > R.BT_INT32):
            return R.ERR_BAD_TYPE, np.int64(4 * n + k)
        size = R.type_size(t)
        missing, vector_end = R.int_sentinels(t)
        if (
            not is_format
            and c == 1
            and width > 1
            and ((R.i32(seg, d) == FLOAT_MISSING_BITS) if is_float else (R.read_int(seg, d, t) == missing))
        ):
            out[k, 0, :] = missing_out
            continue
        if not is_float and t == R.BT_INT8 and c == width and is_format:
            # Common FORMAT case (DP, AD, GQ as int8 of the full width): no end-of-vector
            # bookkeeping unless one is seen, so the loop vectorises.
            flat = out[k].reshape(n_vectors * width)
            src = seg[d : d + n_vectors * width]  # sliced for vectorisation, as in genotypes
            any_end = False
            for i in range(src.shape[0]):
                v = np.int32(np.int8(src[i]))
                any_end |= v == -127
                flat[i] = np.int32(-1) if v == -128 else (np.int32(-2) if v == -127 else v)
            if not any_end:
                continue
        for s in range(n_vectors):
            base = d + s * c * size
            ended = False
            for j in range(width):
                if j >= c:
                    out[k, s, j] = fill_out
                elif ended:
                    out[k, s, j] = missing_out if is_float else fill_out
                elif is_float:
                    bits = R.i32(seg, base + 4 * j)
                    is_nan = (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0
                    out[k, s, j] = missing_out if is_nan else bits
                    ended = bits == FLOAT_END_BITS
                else:
                    v = R.read_int(seg, base + j * size, t)
                    if v == missing:
                        out[k, s, j] = -1
                    elif v == vector_end and (is_format or not R.scalar_info_end_is_value(t, c)):
                        out[k, s, j] = -2
                        ended = True
                    else:
                        out[k, s, j] = v
    return R.OK, np.int64(0)


@_njit
def flag(seg, n, out):
    """An INFO Flag segment: set where the record holds the key."""
    if seg.shape[0] < 5 * n:
        return ERR_SEGMENT, np.int64(0)
    for k in range(n):
        out[k] = R.i32(seg, 4 * k) >= 0
    return R.OK, np.int64(0)


@_njit
def filters(seg, n, column_of_key, out):
    """The FILTER segment into variant_filter (rows, filters)."""
    starts, err, at = column_starts(seg, n, 1)
    if err != R.OK:
        return err, at
    n_columns = column_of_key.shape[0]
    for c in range(n_columns):
        if column_of_key[c] >= out.shape[1]:
            return R.ERR_UNKNOWN_FILTER, np.int64(0)
    for k in range(n):
        c = np.int64(R.i32(seg, 4 * k))
        t = np.int64(seg[4 * n + k])
        if c > 0 and (t < R.BT_INT8 or t > R.BT_INT32):
            return R.ERR_BAD_TYPE, np.int64(4 * n + k)
        size = R.type_size(t)
        for j in range(max(c, 0)):
            key = R.read_int(seg, starts[k] + j * size, t)
            if key < 0 or key >= n_columns or column_of_key[key] < 0:
                return R.ERR_UNKNOWN_FILTER, starts[k] + j * size
            out[k, column_of_key[key]] = True
    return R.OK, np.int64(0)


@_njit
def id_spans(seg, n, starts_out, lengths_out):
    """The ID segment as (start, length) spans into the segment: "." or "" -> missing."""
    starts, err, at = column_starts(seg, n, 1)
    if err != R.OK:
        return err, at
    for k in range(n):
        c = np.int64(R.i32(seg, 4 * k))
        if c < 0 or seg[4 * n + k] != R.BT_CHAR:
            return R.ERR_ID_TYPE, np.int64(4 * k)
        d = starts[k]
        length = np.int64(0)
        while length < c and seg[d + length] != 0:
            length += 1
        if length == 0 or (length == 1 and seg[d] == 46):
            starts_out[k] = 0
            lengths_out[k] = SPAN_MISSING
        else:
            starts_out[k] = d
            lengths_out[k] = length
    return R.OK, np.int64(0)


@_njit
def allele_spans(seg, n, starts_out, lengths_out):
    """The alleles segment as spans (rows, max alleles); unused slots keep the caller's fill."""
    if seg.shape[0] < 4 * n:
        return ERR_SEGMENT, np.int64(0)
    total = np.int64(0)
    for k in range(n):
        a = np.int64(R.i32(seg, 4 * k))
        if a < 1:
            return R.ERR_NO_REF, np.int64(4 * k)
        if a > starts_out.shape[1]:
            return ERR_SHAPE, np.int64(4 * k)
        total += a
    q = np.int64(4 * n)
    p = q + 4 * total
    if p > seg.shape[0]:
        return ERR_SEGMENT, np.int64(0)
    for k in range(n):
        for a in range(np.int64(R.i32(seg, 4 * k))):
            c = np.int64(R.i32(seg, q))
            q += 4
            if c < 0 or p + c > seg.shape[0]:
                return ERR_SEGMENT, q - 4
            length = np.int64(0)
            while length < c and seg[p + length] != 0:
                length += 1
            starts_out[k, a] = p
            lengths_out[k, a] = length
            p += c
    if p != seg.shape[0]:
        return ERR_SEGMENT, p
    return R.OK, np.int64(0)


@_njit
def string_spans(seg, n, starts_out, lengths_out):
    """An INFO String segment (spans: rows, 1, width) or a FORMAT String block segment
    (rows, block samples, width) as comma-separated parts, as the codec's
    ``field_string_spans``: absent -> "." in every slot; parts past a value's own count
    keep the caller's fill ("" spans); parts past the width are dropped."""
    n_vectors = starts_out.shape[1]
    width = starts_out.shape[2]
    if starts_out.shape[0] < n:
        return ERR_SHAPE, np.int64(0)
    starts, err, at = column_starts(seg, n, n_vectors)
    if err != R.OK:
        return err, at
    for k in range(n):
        c = np.int64(R.i32(seg, 4 * k))
        if c < 0:
            lengths_out[k, :, :] = SPAN_MISSING
            continue
        if c > 0 and seg[4 * n + k] != R.BT_CHAR:
            return R.ERR_BAD_TYPE, np.int64(4 * n + k)
        for s in range(n_vectors):
            base = starts[k] + s * c
            part = 0
            part_start = base
            b = 0
            while b <= c and part < width:
                at_end = b == c or seg[base + b] == 0
                if at_end or seg[base + b] == 44:  # ","
                    starts_out[k, s, part] = part_start
                    lengths_out[k, s, part] = base + b - part_start
                    part += 1
                    part_start = base + b + 1
                    if at_end:
                        break
                b += 1
    return R.OK, np.int64(0)
