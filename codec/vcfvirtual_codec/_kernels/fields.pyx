# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Field kernels of both layouts: numbers, strings, filters, flags and the fixed columns.

Each value is decoded by the one value code of ``values.pxd``, fed per record by the
layout step of ``layout.pxd``: ``records_*`` entry points walk the records of a bgzf/raw
chunk (``locate``), ``column_*`` ones a columns-layout segment (``column_starts``,
``column_field``). They fill preallocated outputs of the full chunk shape (rows past the
last record keep the caller's fill) and return ``(error code, byte offset)``, the codes
and their texts being :mod:`vcfvirtual_codec.bcf.records`'. Records name the record's
offset on an error; segments the offset of the count, type or value at fault.

Every output's shape is checked against the records before a loop writes without
bounds checks; what the loops read is bounded by the layout step's checks.
"""

import numpy as np

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

cimport vcfvirtual_codec._kernels.bcf as B
cimport vcfvirtual_codec._kernels.values as V
from vcfvirtual_codec._kernels.layout cimport column_field, column_starts as walk_column, locate

SPAN_FILL = V.SPAN_FILL
SPAN_MISSING = V.SPAN_MISSING
ERR_NARROW = V.ERR_NARROW

cdef enum:
    INT32_MIN = -2147483648
    INT32_MAX = 2147483647


cdef inline B.Bytes _ptr(const uint8_t[::1] buf) noexcept nogil:
    return &buf[0] if buf.shape[0] else NULL


cdef uint8_t[:, ::1] _bool_rows(out, Py_ssize_t rows) except *:
    """A boolean output (rows, columns) as bytes (numpy bools are one byte, 0 or 1), its
    rows checked: the kernels write without bounds checks."""
    cdef uint8_t[:, ::1] view = np.asarray(out).view(np.uint8)
    if view.shape[0] < rows:
        raise ValueError(f"an output of {view.shape[0]} rows for {rows} records")
    return view


# -- the layout step, for Python callers --------------------------------------------------


def column_starts(const uint8_t[::1] seg, int64_t n, int64_t n_vectors):
    """Start of each record's values in a typed column, and the column's checked length.

    Returns (starts int64[n + 1], error, offset); ``n_vectors`` is the block's samples for
    a FORMAT block, 1 otherwise."""
    starts_array = np.zeros(max(n, 0) + 1, np.int64)
    cdef int64_t[::1] starts = starts_array
    cdef int64_t err, at
    with nogil:
        err, at = walk_column(_ptr(seg), seg.shape[0], n, n_vectors, &starts[0])
    return starts_array, err, at


cdef inline (int64_t, int64_t) _starts(B.Bytes seg, int64_t length, int64_t n, int64_t n_vectors,
                                       int64_t[::1] starts) noexcept nogil:
    return walk_column(seg, length, n, n_vectors, &starts[0])


# -- Integer / Float ------------------------------------------------------------------


cdef (int64_t, int64_t) _records_numeric(B.Bytes buf, int64_t buf_len, const int64_t[::1] offsets,
                                         int64_t key, bint is_format, bint is_float,
                                         V.out_int[:, :, ::1] out, bint keep_nan) noexcept nogil:
    cdef int64_t n_vectors = out.shape[1], width = out.shape[2], per = n_vectors * width
    cdef int64_t k, pos, t, n, d, err
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        t, n, d, err = locate(buf, pos, key, is_format, n_vectors)
        if err == B.OK:
            err = V.numeric_row(buf, buf_len, t, n, d, is_format, is_float, &out[0, 0, 0] + k * per,
                                n_vectors, width, INT32_MIN, INT32_MAX, keep_nan)
        if err != B.OK:
            return err, pos
    return B.OK, 0


def field_numeric(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t key, bint is_format,
                  bint is_float, V.out_int[:, :, ::1] out, bint keep_nan=False):
    """INFO or FORMAT Integer/Float values of the records at ``offsets`` into ``out``
    (records, samples or 1, width), int32 (floats as their bits); see values.numeric_row
    (``keep_nan``: a Number=1 INFO Float's NaN values kept)."""
    if out.shape[0] < offsets.shape[0] or (is_float and sizeof(V.out_int) != 4):
        return B.ERR_SHAPE, 0
    cdef int64_t err = B.OK, at = 0
    # A row of no values (no samples, or width 0) is still checked: nothing is written.
    with nogil:
        err, at = _records_numeric(_ptr(buf), buf.shape[0], offsets, key, is_format, is_float, out, keep_nan)
    return err, at


cdef (int64_t, int64_t) _column_numeric(B.Bytes seg, int64_t length, int64_t n, bint is_format,
                                        bint is_float, V.out_int[:, :, ::1] out, int32_t lo, int32_t hi,
                                        int64_t[::1] starts, bint keep_nan) noexcept nogil:
    cdef int64_t n_vectors = out.shape[1], width = out.shape[2], per = n_vectors * width
    cdef int64_t k, t, c, d, err, at
    err, at = _starts(seg, length, n, n_vectors, starts)
    if err != B.OK:
        return err, at
    for k in range(n):
        t, c = column_field(seg, n, k)
        d = starts[k] if c >= 0 else -1
        err = V.numeric_row(seg, length, t, c, d, is_format, is_float, &out[0, 0, 0] + k * per,
                            n_vectors, width, lo, hi, keep_nan)
        if err == B.ERR_SHAPE:
            return err, 4 * k
        if err == B.ERR_BAD_TYPE:
            return B.ERR_TYPE_MISMATCH, 4 * n + k
        if err == V.ERR_NARROW:
            return err, k  # the record, for the caller's message
        if err != B.OK:
            return err, 4 * k
    return B.OK, 0


def numeric(const uint8_t[::1] seg, int64_t n, bint is_format, bint is_float, V.out_int[:, :, ::1] out,
            int32_t lo=-2147483648, int32_t hi=2147483647, bint keep_nan=False):
    """An INFO segment (out: rows, 1, width) or a FORMAT block segment (rows, block
    samples, width) of Integer/Float values, as field_numeric decodes records. Integers
    may go straight into a narrower ``out`` (int8, int16: the array's dtype); a value
    outside ``[lo, hi]`` then returns ERR_NARROW (offset: the record), never a wrapped
    value."""
    cdef int64_t err = B.OK, at = 0
    if out.shape[0] < n or (is_float and sizeof(V.out_int) != 4):
        return B.ERR_SHAPE, 0
    cdef int64_t[::1] starts = np.zeros(max(n, 0) + 1, np.int64)
    with nogil:
        err, at = _column_numeric(_ptr(seg), seg.shape[0], n, is_format, is_float, out, lo, hi, starts, keep_nan)
    return err, at


# -- strings ----------------------------------------------------------------------------


def field_string_spans(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t key, bint is_format,
                       int64_t[:, :, ::1] starts, int64_t[:, :, ::1] lengths):
    """Comma-separated parts of INFO/FORMAT strings of the records at ``offsets`` as spans
    (records, samples or 1, width); see values.string_row."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t n_vectors = starts.shape[1], width = starts.shape[2]
    cdef int64_t k, pos = 0, t, n, d, err = B.OK
    if (starts.shape[0] < offsets.shape[0] or lengths.shape[0] < offsets.shape[0]
            or lengths.shape[1] != n_vectors or lengths.shape[2] != width):
        return B.ERR_SHAPE, 0
    with nogil:
        for k in range(offsets.shape[0]):
            pos = offsets[k]
            t, n, d, err = locate(p, pos, key, is_format, n_vectors)
            if err == B.OK:
                err = V.string_row(p, t, n, d, is_format, n_vectors, width, &starts[k, 0, 0], &lengths[k, 0, 0])
            if err != B.OK:
                break
    return err, (pos if err != B.OK else 0)


def string_spans(const uint8_t[::1] seg, int64_t n, int64_t[:, :, ::1] starts_out,
                 int64_t[:, :, ::1] lengths_out, bint is_format=True):
    """An INFO String segment (spans: rows, 1, width) or a FORMAT String block segment
    (rows, block samples, width) as comma-separated parts, as field_string_spans decodes
    records."""
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t n_vectors = starts_out.shape[1], width = starts_out.shape[2]
    cdef int64_t k, t, c, d, err = B.OK, at = 0
    if (starts_out.shape[0] < n or lengths_out.shape[0] < n
            or lengths_out.shape[1] != n_vectors or lengths_out.shape[2] != width):
        return B.ERR_SHAPE, 0
    starts_array = np.zeros(max(n, 0) + 1, np.int64)
    cdef int64_t[::1] starts = starts_array
    with nogil:
        err, at = _starts(p, seg.shape[0], n, n_vectors, starts)
        if err == B.OK:
            for k in range(n):
                t, c = column_field(p, n, k)
                d = starts[k] if c >= 0 else -1
                err = V.string_row(p, t, c, d, is_format, n_vectors, width, &starts_out[k, 0, 0],
                                   &lengths_out[k, 0, 0])
                if err != B.OK:
                    err, at = B.ERR_TYPE_MISMATCH, 4 * n + k
                    break
    return err, at


def id_spans(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t[::1] starts, int64_t[::1] lengths):
    """Each record's ID as a span; "" or "." is missing."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t k, pos = 0, end, t, n, d, err = B.OK
    if starts.shape[0] < offsets.shape[0] or lengths.shape[0] < offsets.shape[0]:
        return B.ERR_SHAPE, 0
    with nogil:
        for k in range(offsets.shape[0]):
            pos = offsets[k]
            end = pos + 8 + <int64_t>B.u32(p, pos)
            t, n, d = B.typed_descriptor(p, pos + B.OFF_ID, end)
            # htslib refuses any other type, even a NULL of count 0
            if d >= 0 and t != B.BT_CHAR:
                err = B.ERR_ID_TYPE
                break
            if d < 0 or d + n > end:
                err = B.ERR_OVERRUN
                break
            V.id_span(p, d, n, &starts[k], &lengths[k])
    return err, (pos if err != B.OK else 0)


def column_id_spans(const uint8_t[::1] seg, int64_t n, const int64_t[::1] starts, int64_t[::1] starts_out,
                    int64_t[::1] lengths_out):
    """The ID segment (its records' ``starts``, from column_starts) as spans into the
    segment: "." or "" -> missing."""
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t k, t, c, err = B.OK, at = 0
    if starts.shape[0] < n or starts_out.shape[0] < n or lengths_out.shape[0] < n:
        return B.ERR_SHAPE, 0
    with nogil:
        for k in range(n):
            t, c = column_field(p, n, k)
            if c < 0 or t != B.BT_CHAR:
                err, at = B.ERR_ID_TYPE, 4 * k
                break
            V.id_span(p, starts[k], c, &starts_out[k], &lengths_out[k])
    return err, at


def allele_spans(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t[:, ::1] starts,
                 int64_t[:, ::1] lengths):
    """Each record's alleles as spans (records, alleles); unused slots keep the caller's
    fill."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t max_alleles = starts.shape[1]
    cdef int64_t k, a, pos = 0, end, n_allele, i, t, n, d, err = B.OK
    if (starts.shape[0] < offsets.shape[0] or lengths.shape[0] < offsets.shape[0]
            or lengths.shape[1] != max_alleles):
        return B.ERR_SHAPE, 0
    with nogil:
        for k in range(offsets.shape[0]):
            pos = offsets[k]
            end = pos + 8 + <int64_t>B.u32(p, pos)
            n_allele = B.u32(p, pos + B.OFF_N_ALLELE_INFO) >> 16
            if n_allele > max_alleles:
                err = B.ERR_SHAPE
                break
            if n_allele == 0:  # htslib: "No REF allele"
                err = B.ERR_NO_REF
                break
            i = B.skip_typed(p, pos + B.OFF_ID, end)
            for a in range(n_allele):
                if i < 0:
                    break
                t, n, d = B.typed_descriptor(p, i, end)
                if d < 0 or t != B.BT_CHAR or d + n > end:
                    i = -1
                    break
                starts[k, a] = d
                lengths[k, a] = V.nul_length(p, d, n)
                i = d + n
            if i < 0:
                err = B.ERR_OVERRUN
                break
    return err, (pos if err != B.OK else 0)


def column_allele_spans(const uint8_t[::1] seg, int64_t n, int64_t[:, ::1] starts_out,
                        int64_t[:, ::1] lengths_out):
    """The alleles segment (``int32 n_allele[n]``, ``int32 length[sum]``, the bytes) as
    spans (rows, max alleles); unused slots keep the caller's fill."""
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t length = seg.shape[0], max_alleles = starts_out.shape[1]
    cdef int64_t total = 0, k, a, n_allele, q, c, pos, err = B.OK, at = 0
    if (starts_out.shape[0] < n or lengths_out.shape[0] < n or lengths_out.shape[1] != max_alleles):
        return B.ERR_SHAPE, 0
    if length < 4 * n:
        return B.ERR_SEGMENT, 0
    with nogil:
        for k in range(n):
            n_allele = B.i32(p, 4 * k)
            if n_allele < 1:
                err, at = B.ERR_NO_REF, 4 * k
                break
            if n_allele > max_alleles:
                err, at = B.ERR_SHAPE, 4 * k
                break
            total += n_allele
    if err != B.OK:
        return err, at
    q = 4 * n
    pos = q + 4 * total
    if pos > length:
        return B.ERR_SEGMENT, 0
    with nogil:
        for k in range(n):
            n_allele = B.i32(p, 4 * k)
            for a in range(n_allele):
                c = B.i32(p, q)
                q += 4
                if c < 0 or pos + c > length:
                    err, at = B.ERR_SEGMENT, q - 4
                    break
                starts_out[k, a] = pos
                lengths_out[k, a] = V.nul_length(p, pos, c)
                pos += c
            if err != B.OK:
                break
    if err != B.OK:
        return err, at
    if pos != length:
        return B.ERR_SEGMENT, pos
    return B.OK, 0


# -- FILTER and Flag --------------------------------------------------------------------


def filters(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] column_of_key, out):
    """Set ``out[k, column]`` for every FILTER key of record k; see values.filter_row."""
    cdef uint8_t[:, ::1] flags = _bool_rows(out, offsets.shape[0])
    cdef B.Bytes p = _ptr(buf)
    cdef const int64_t* columns = &column_of_key[0] if column_of_key.shape[0] else NULL
    cdef int64_t n_columns = column_of_key.shape[0]
    cdef int64_t k, pos = 0, i, end, t, n, d, size, err = B.OK
    if not V.filter_columns_fit(columns, n_columns, flags.shape[1]):
        return B.ERR_UNKNOWN_FILTER, 0
    with nogil:
        for k in range(offsets.shape[0]):
            pos = offsets[k]
            i, end = B.filter_start(p, pos)
            if i < 0:
                err = B.ERR_OVERRUN
                break
            t, n, d = B.typed_descriptor(p, i, end)
            size = B.type_size(t)
            if d < 0 or d + n * size > end:
                err = B.ERR_OVERRUN
                break
            err = V.filter_row(p, t, n, d, columns, n_columns, &flags[k, 0])[0]
            if err != B.OK:
                if err == B.ERR_BAD_TYPE:
                    err = B.ERR_OVERRUN
                break
    return err, (pos if err != B.OK else 0)


def column_filters(const uint8_t[::1] seg, int64_t n, const int64_t[::1] starts,
                   const int64_t[::1] column_of_key, out):
    """The FILTER segment (its records' ``starts``, from column_starts) into
    variant_filter (rows, filters)."""
    cdef uint8_t[:, ::1] flags = _bool_rows(out, n)
    cdef B.Bytes p = _ptr(seg)
    cdef const int64_t* columns = &column_of_key[0] if column_of_key.shape[0] else NULL
    cdef int64_t n_columns = column_of_key.shape[0]
    cdef int64_t k, t, c, err = B.OK, at = 0, j
    if starts.shape[0] < n:
        return B.ERR_SHAPE, 0
    if not V.filter_columns_fit(columns, n_columns, flags.shape[1]):
        return B.ERR_UNKNOWN_FILTER, 0
    with nogil:
        for k in range(n):
            t, c = column_field(p, n, k)
            err, j = V.filter_row(p, t, c if c > 0 else 0, starts[k], columns, n_columns, &flags[k, 0])
            if err == B.ERR_BAD_TYPE:
                err, at = B.ERR_TYPE_MISMATCH, 4 * n + k
                break
            if err != B.OK:
                at = starts[k] + j * B.type_size(t)
                break
    return err, at


def info_flag(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t key, out):
    """Whether each record holds INFO ``key`` (a Flag: any count)."""
    cdef uint8_t[::1] flags = np.asarray(out).view(np.uint8)
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t k, pos = 0, t, n, d, err = B.OK
    if flags.shape[0] < offsets.shape[0]:
        return B.ERR_SHAPE, 0
    with nogil:
        for k in range(offsets.shape[0]):
            pos = offsets[k]
            t, n, d, err = B.find_info(p, pos, key)
            if err != B.OK:
                break
            flags[k] = d >= 0
    return err, (pos if err != B.OK else 0)


# -- fixed columns ----------------------------------------------------------------------


def fixed_int32(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t field_offset, int32_t[::1] out):
    """The int32 at ``field_offset`` of each record (CHROM, POS)."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t k
    if out.shape[0] < offsets.shape[0]:
        raise ValueError(f"an output of {out.shape[0]} rows for {offsets.shape[0]} records")
    with nogil:
        for k in range(offsets.shape[0]):
            out[k] = B.i32(p, offsets[k] + field_offset)


def lengths(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t end_key, int64_t[::1] out):
    """rlen of each record as htslib reads it: a stored rlen of 2^31 or more (negative as
    int32) is replaced as bcf_record_check does (bcf.htslib_rlen), never wrapped."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t k, pos = 0, rlen, err = B.OK
    if out.shape[0] < offsets.shape[0]:
        return B.ERR_SHAPE, 0
    with nogil:
        for k in range(offsets.shape[0]):
            pos = offsets[k]
            rlen = B.i32(p, pos + B.OFF_RLEN)
            if rlen < 0:
                rlen = B.htslib_rlen(p, pos, end_key)
                if rlen < 0:
                    err = B.ERR_OVERRUN
                    break
            out[k] = rlen
    return err, (pos if err != B.OK else 0)


def fixed_bytes4(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t field_offset, uint8_t[::1] out_u8):
    """Copy 4 raw bytes per record (QUAL: the float's bit pattern, missing NaN kept)."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t k, b, at
    if out_u8.shape[0] < 4 * offsets.shape[0]:
        raise ValueError(f"an output of {out_u8.shape[0]} bytes for {offsets.shape[0]} records")
    with nogil:
        for k in range(offsets.shape[0]):
            at = offsets[k] + field_offset
            for b in range(4):
                out_u8[4 * k + b] = p[at + b]


def int32_column(const uint8_t[::1] seg, int64_t n, int64_t add, int64_t[::1] out):
    """``int32[n]`` segment (contig, position, rlen) plus ``add`` into ``out[:n]`` (int64,
    so that POS 0x7FFFFFFF + 1 does not wrap). POS below -1 is refused as the records'
    decode does (htslib reads POS unsigned)."""
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t k, v, err = B.OK
    if seg.shape[0] != 4 * n or out.shape[0] < n:
        return B.ERR_SEGMENT, 0
    with nogil:
        for k in range(n):
            v = B.i32(p, 4 * k)
            if add == 1 and v < -1:
                err = B.ERR_NEGATIVE_POS
                break
            out[k] = v + add
    return err, (4 * k if err != B.OK else 0)


def quality(const uint8_t[::1] seg, int64_t n, uint32_t[::1] out_bits):
    """QUAL bits into ``out_bits`` (uint32 view of the float32 chunk); a NaN other than
    missing becomes the quiet NaN htslib's readers return, as the records' decode does."""
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t k
    cdef uint32_t bits
    if seg.shape[0] != 4 * n or out_bits.shape[0] < n:
        return B.ERR_SEGMENT, 0
    with nogil:
        for k in range(n):
            bits = B.u32(p, 4 * k)
            if V.is_nan_bits(<int32_t>bits) and bits != B.FLOAT_MISSING_BITS:
                bits |= 0x400000
            out_bits[k] = bits
    return B.OK, 0


# -- spans to values ---------------------------------------------------------------------


cdef inline void _put_u32(uint8_t* out, int64_t pos, int64_t value) noexcept nogil:
    out[pos] = value & 0xFF
    out[pos + 1] = (value >> 8) & 0xFF
    out[pos + 2] = (value >> 16) & 0xFF
    out[pos + 3] = (value >> 24) & 0xFF


def vlen_utf8(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths):
    """Serialise spans as numcodecs/zarr ``vlen-utf8``: item count, then (length, bytes)."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t n_items = starts.shape[0], size = 4 + 4 * n_items, j, n, pos
    if lengths.shape[0] != n_items:
        raise ValueError(f"{lengths.shape[0]} lengths for {n_items} starts")
    for j in range(n_items):
        if lengths[j] > 0:
            size += lengths[j]
        elif lengths[j] == V.SPAN_MISSING:
            size += 1
    out_array = np.empty(size, np.uint8)
    cdef uint8_t[::1] out = out_array
    cdef uint8_t* o = &out[0]
    with nogil:
        _put_u32(o, 0, n_items)
        pos = 4
        for j in range(n_items):
            n = lengths[j]
            if n == V.SPAN_MISSING:
                _put_u32(o, pos, 1)
                o[pos + 4] = 46  # "."
                pos += 5
            elif n <= 0:
                _put_u32(o, pos, 0)
                pos += 4
            else:
                _put_u32(o, pos, n)
                pos += 4
                memcpy(o + pos, p + starts[j], n)
                pos += n
    return out_array


def first_invalid_utf8(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths):
    """Index of the first span whose bytes are not strict UTF-8 (as Python decodes it:
    no overlong forms, surrogates or code points past U+10FFFF), or -1.

    The vlen-utf8 step after the codec decodes every string; checking here turns a
    damaged or non-UTF-8 string into a ChunkDecodeError instead of a UnicodeDecodeError
    deep inside zarr."""
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t j, i, e, step, bad = -1
    cdef uint32_t value
    if lengths.shape[0] != starts.shape[0]:
        raise ValueError(f"{lengths.shape[0]} lengths for {starts.shape[0]} starts")
    with nogil:
        for j in range(starts.shape[0]):
            i = starts[j]
            e = i + lengths[j]  # SPAN_FILL/SPAN_MISSING lengths are negative: nothing to read
            while i < e:
                if p[i] < 0x80:
                    i += 1
                    continue
                step = V.utf8_char(p, i, e, &value)
                if step == 0:
                    break
                i += step
            if i < e:
                bad = j
                break
    return bad


def first_characters(const uint8_t[::1] seg, const int64_t[::1] starts, const int64_t[::1] lengths,
                     uint32_t[::1] out):
    """Character values (``<U1`` as UTF-32 code points) from string spans: a value's
    first character ("\\ufffd" when its bytes do not start with a whole UTF-8 character,
    as Python's ``errors="replace"``), "." when missing, "" (0) as fill."""
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t j, length
    cdef uint32_t value
    if lengths.shape[0] != starts.shape[0] or out.shape[0] < starts.shape[0]:
        raise ValueError(f"{starts.shape[0]} starts, {lengths.shape[0]} lengths, {out.shape[0]} outputs")
    with nogil:
        for j in range(starts.shape[0]):
            length = lengths[j]
            if length == V.SPAN_MISSING:
                out[j] = 46
            elif length <= 0:
                out[j] = 0
            elif V.utf8_char(p, starts[j], starts[j] + length, &value):
                out[j] = value
            else:
                out[j] = 0xFFFD
