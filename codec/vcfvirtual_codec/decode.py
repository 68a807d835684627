"""Compiled kernels that turn the records of one chunk into VCF Zarr values.

Each kernel takes the chunk's bytes and the offsets of its records and fills
preallocated output arrays of the *full* chunk shape; rows past the last record keep
the fill the caller put there. Kernels return ``(error_code, byte_position)`` so that
Python can raise a typed error naming where the bytes stop making sense; the codes and
their texts are :mod:`vcfvirtual_codec.bcf.records`' (``ERR_*``, ``ERROR_TEXT``).
"""

from __future__ import annotations

import numba
import numpy as np

from ._kernels.genotypes import records_genotypes
from .bcf import records as R

_njit = numba.njit(nogil=True, cache=True)

# Span lengths with a special meaning in string kernels.
SPAN_FILL = -1  # the empty string "" (VCF Zarr fill)
SPAN_MISSING = -2  # the string "." (VCF Zarr missing)


@_njit
def fixed_int32(buf, offsets, field_offset, out):
    for k in range(offsets.shape[0]):
        out[k] = R.i32(buf, offsets[k] + field_offset)


@_njit
def lengths(buf, offsets, end_key, out):
    """rlen of each record as htslib reads it: a stored rlen of 2^31 or more (negative
    as int32) is replaced as bcf_record_check does (records.htslib_rlen), never wrapped."""
    for k in range(offsets.shape[0]):
        rlen = np.int64(R.i32(buf, offsets[k] + R.OFF_RLEN))
        if rlen < 0:
            rlen = R.htslib_rlen(buf, offsets[k], end_key)
            if rlen < 0:
                return R.ERR_OVERRUN, offsets[k]
        out[k] = rlen
    return R.OK, np.int64(0)


@_njit
def fixed_bytes4(buf, offsets, field_offset, out_u8):
    """Copy 4 raw bytes per record (QUAL: the float's bit pattern, missing NaN kept)."""
    for k in range(offsets.shape[0]):
        p = offsets[k] + field_offset
        for b in range(4):
            out_u8[4 * k + b] = buf[p + b]


@numba.njit(nogil=True, cache=True)
def _string_span(buf, i, end):
    """(start, length, next) of the typed string at ``i``; length excludes NUL padding."""
    t, n, d = R.typed_descriptor(buf, i, end)
    if d < 0 or t != R.BT_CHAR:  # htslib refuses any other type, even a NULL of count 0
        return np.int64(-1), np.int64(-1), np.int64(-1)
    if d + n > end:
        return np.int64(-1), np.int64(-1), np.int64(-1)
    length = np.int64(0)
    while length < n and buf[d + length] != 0:
        length += 1
    return d, length, d + n


@_njit
def id_spans(buf, offsets, starts, lengths):
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        end = pos + 8 + np.int64(R.u32(buf, pos))
        s, n, nxt = _string_span(buf, pos + R.OFF_ID, end)
        if nxt < 0:
            t, _, d = R.typed_descriptor(buf, pos + R.OFF_ID, end)
            return (R.ERR_ID_TYPE if d >= 0 and t != R.BT_CHAR else R.ERR_OVERRUN), pos
        if n == 0 or (n == 1 and buf[s] == 46):  # empty or "."
            starts[k] = 0
            lengths[k] = SPAN_MISSING
        else:
            starts[k] = s
            lengths[k] = n
    return R.OK, np.int64(0)


@_njit
def allele_spans(buf, offsets, starts, lengths):
    """Fill (records, alleles) spans; unused allele slots stay SPAN_FILL."""
    max_alleles = starts.shape[1]
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        end = pos + 8 + np.int64(R.u32(buf, pos))
        n_allele = np.int64(R.u32(buf, pos + R.OFF_N_ALLELE_INFO) >> np.uint32(16))
        if n_allele > max_alleles:
            return R.ERR_SHAPE, pos
        if n_allele == 0:  # htslib: "No REF allele"
            return R.ERR_NO_REF, pos
        i = R.skip_typed(buf, pos + R.OFF_ID, end)
        if i < 0:
            return R.ERR_OVERRUN, pos
        for a in range(n_allele):
            s, n, nxt = _string_span(buf, i, end)
            if nxt < 0:
                return R.ERR_OVERRUN, pos
            starts[k, a] = s
            lengths[k, a] = n
            i = nxt
    return R.OK, np.int64(0)


@numba.njit(nogil=True, cache=True)
def _put_u32(out, p, value):
    out[p] = value & 0xFF
    out[p + 1] = (value >> 8) & 0xFF
    out[p + 2] = (value >> 16) & 0xFF
    out[p + 3] = (value >> 24) & 0xFF


@_njit
def vlen_utf8(buf, starts, lengths):
    """Serialise spans as numcodecs/zarr ``vlen-utf8``: item count, then (length, bytes)."""
    n_items = starts.shape[0]
    size = 4 + 4 * n_items
    for j in range(n_items):
        if lengths[j] > 0:
            size += lengths[j]
        elif lengths[j] == SPAN_MISSING:
            size += 1
    out = np.empty(size, dtype=np.uint8)
    # int64 positions and values at every call (no literal 0, 1 or 4): numba compiles
    # _put_u32 once, where literals made it compile seven variants on a first read.
    zero, one = np.int64(0), np.int64(1)
    _put_u32(out, zero, np.int64(n_items))
    p = np.int64(4)
    for j in range(n_items):
        n = lengths[j]
        if n == SPAN_MISSING:
            _put_u32(out, p, one)
            out[p + 4] = 46  # "."
            p += 5
        elif n <= 0:
            _put_u32(out, p, zero)
            p += 4
        else:
            _put_u32(out, p, np.int64(n))
            p += 4
            s = starts[j]
            for b in range(n):
                out[p + b] = buf[s + b]
            p += n
    return out


@_njit
def filters(buf, offsets, column_of_key, out):
    """Set ``out[k, column]`` for every FILTER key of record k."""
    n_columns = column_of_key.shape[0]
    # The column map comes from the codec configuration: a column past the output's
    # filter dimension would write outside it.
    for c in range(n_columns):
        if column_of_key[c] >= out.shape[1]:
            return R.ERR_UNKNOWN_FILTER, np.int64(0)
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        i, end = R.filter_start(buf, pos)
        if i < 0:
            return R.ERR_OVERRUN, pos
        t, n, d = R.typed_descriptor(buf, i, end)
        size = R.type_size(t)
        if d < 0 or d + n * size > end or (n > 0 and (t < R.BT_INT8 or t > R.BT_INT32)):
            return R.ERR_OVERRUN, pos
        for j in range(n):
            key = R.read_int(buf, d + j * size, t)
            if key < 0 or key >= n_columns or column_of_key[key] < 0:
                return R.ERR_UNKNOWN_FILTER, pos  # the header (and filter_id) lacks it
            out[k, column_of_key[key]] = True
    return R.OK, np.int64(0)


@numba.njit(nogil=True, cache=True)
def _locate(buf, pos, key, is_format, n_vectors):
    """Field ``key`` of the record at ``pos``: (type, count, data_start, error), data_start
    -1 when absent. A FORMAT field of a record whose own sample count is not the array's
    ``n_vectors`` is ERR_SAMPLES: its vectors are laid out by the record's count."""
    if not is_format:
        return R.find_info(buf, pos, key)
    t, n, d, err = R.find_format(buf, pos, key)
    if err == R.OK and d >= 0 and R.n_sample(buf, pos) != n_vectors:
        return t, n, d, R.ERR_SAMPLES
    return t, n, d, err


# FORMAT/GT of the records, compiled (_kernels/genotypes.pyx): the row decoder it shares
# with the columns layout is _kernels/gt.pxd.
genotypes = records_genotypes


@_njit
def field_numeric(buf, offsets, key, is_format, is_float, out):  # noqa: C901 - one loop per record (kernel)
    """INFO or FORMAT Integer/Float values into ``out`` (records, samples or 1, width).

    Integers: -1 missing, -2 end-of-vector and padding. Floats are written as their
    bit patterns: a value or a whole field that is absent reads 0x7F800001 (missing),
    padding past the record's own width 0x7F800002 (fill). Any NaN inside the record's
    width (end-of-vector, or a NaN value) reads as missing, which is how bio2zarr
    stores it. An INFO field holding the single value "." reads missing in every slot.
    """
    n_vectors = out.shape[1]
    width = out.shape[2]
    missing_out = R.FLOAT_MISSING_BITS if is_float else np.int32(-1)
    fill_out = R.FLOAT_END_BITS if is_float else np.int32(-2)
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        t, n, d, err = _locate(buf, pos, key, is_format, n_vectors)
        if err != R.OK:
            return err, pos
        if d < 0:
            out[k, :, :] = missing_out
            continue
        if n > width:
            return R.ERR_SHAPE, pos
        if is_float:
            if t != R.BT_FLOAT and n > 0:
                return R.ERR_BAD_TYPE, pos
        elif n > 0 and (t < R.BT_INT8 or t > R.BT_INT32):
            return R.ERR_BAD_TYPE, pos
        size = R.type_size(t)
        missing, vector_end = R.int_sentinels(t)
        # An INFO value written "." (one missing value) means the whole value is missing,
        # not one value short of its count: every slot reads missing, as bio2zarr stores
        # it. A FORMAT "." keeps missing-then-fill, as bio2zarr does.
        if (
            not is_format
            and n == 1
            and width > 1
            and d + size <= buf.shape[0]
            and ((R.i32(buf, d) == R.FLOAT_MISSING_BITS) if is_float else (R.read_int(buf, d, t) == missing))
        ):
            out[k, 0, :] = missing_out
            continue
        for s in range(n_vectors):
            base = d + s * n * size
            # htslib ends a vector at its end-of-vector value: nothing after it is a value,
            # whatever its bytes say. Within the record's width bio2zarr stores the float
            # slots as missing (the end-of-vector NaN) and the integer ones as fill.
            ended = False
            for j in range(width):
                if j >= n:
                    out[k, s, j] = fill_out
                elif ended:
                    out[k, s, j] = missing_out if is_float else fill_out
                elif is_float:
                    bits = R.i32(buf, base + 4 * j)
                    # Any NaN in the values (end-of-vector, or a "nan" written in the VCF)
                    # is stored as missing, as bio2zarr does; infinities are values.
                    is_nan = (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0
                    out[k, s, j] = missing_out if is_nan else bits
                    ended = bits == R.FLOAT_END_BITS
                else:
                    v = R.read_int(buf, base + j * size, t)
                    if v == missing:
                        out[k, s, j] = -1
                    elif v == vector_end and (is_format or not R.scalar_info_end_is_value(t, n)):
                        out[k, s, j] = -2
                        ended = True
                    else:
                        out[k, s, j] = v
    return R.OK, np.int64(0)


@_njit
def info_flag(buf, offsets, key, out):
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        t, n, d, err = R.find_info(buf, pos, key)
        if err != R.OK:
            return err, pos
        out[k] = d >= 0
    return R.OK, np.int64(0)


@_njit
def field_string_spans(buf, offsets, key, is_format, starts, lengths):
    """Comma-separated parts of INFO/FORMAT strings as spans (records, samples or 1, width).

    A field absent from a record is "." in every slot, and so is an INFO key given
    without a value (``...;KEY;...``, or ``KEY=``: no characters; htslib prints both as
    the bare key and pysam reads no value); parts past a value's own count are ""
    (fill); parts past the width are dropped (only the single-value case).
    """
    n_vectors = starts.shape[1]
    width = starts.shape[2]
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        t, n, d, err = _locate(buf, pos, key, is_format, n_vectors)
        if err != R.OK:
            return err, pos
        if d < 0 or (n == 0 and not is_format):
            lengths[k, :, :] = SPAN_MISSING
            continue
        if n > 0 and t != R.BT_CHAR:
            return R.ERR_BAD_TYPE, pos
        for s in range(n_vectors):
            base = d + s * n
            part = 0
            part_start = base
            b = 0
            while b <= n and part < width:
                at_end = b == n or buf[base + b] == 0
                if at_end or buf[base + b] == 44:
                    starts[k, s, part] = part_start
                    lengths[k, s, part] = base + b - part_start
                    part += 1
                    part_start = base + b + 1
                    if at_end:
                        break
                b += 1
    return R.OK, np.int64(0)


@_njit
def first_invalid_utf8(buf, starts, lengths):
    """Index of the first span whose bytes are not strict UTF-8 (as Python decodes it:
    no overlong forms, surrogates or code points past U+10FFFF), or -1.

    The vlen-utf8 step after the codec decodes every string; checking here turns a
    damaged or non-UTF-8 string into a ChunkDecodeError instead of a UnicodeDecodeError
    deep inside zarr."""
    for j in range(starts.shape[0]):
        i = starts[j]
        e = i + lengths[j]  # SPAN_FILL/SPAN_MISSING lengths are negative: nothing to read
        while i < e:
            c = buf[i]
            if c < 0x80:
                i += 1
                continue
            lo, hi, need = 0x80, 0xBF, 0
            if 0xC2 <= c <= 0xDF:
                need = 1
            elif c == 0xE0:
                need, lo = 2, 0xA0
            elif (0xE1 <= c <= 0xEC) or c == 0xEE or c == 0xEF:
                need = 2
            elif c == 0xED:
                need, hi = 2, 0x9F
            elif c == 0xF0:
                need, lo = 3, 0x90
            elif 0xF1 <= c <= 0xF3:
                need = 3
            elif c == 0xF4:
                need, hi = 3, 0x8F
            else:
                return j
            if i + need >= e:  # the sequence runs past the value
                return j
            b = buf[i + 1]
            if b < lo or b > hi:
                return j
            for m in range(2, need + 1):
                if buf[i + m] < 0x80 or buf[i + m] > 0xBF:
                    return j
            i += need + 1
    return -1
