# cython: language_level=3
"""The value decoders of the one decoder: one record's typed values into its output row.

Whatever the layout (the records of a bgzf/raw chunk, found by ``layout.locate``; or a
columns-layout segment, walked by ``layout.column_starts``), a record's field reaches
these functions as (type, count, data start) over the same typed BCF bytes, and each
writes that record's row of the output. The layouts differ only in how they frame the
records and in what byte offset they name on an error, so each function returns a
status (``B.OK``, ``B.ERR_SHAPE``, ``B.ERR_BAD_TYPE``, ...) and leaves the offset to its
caller. A field absent from the record is ``d = -1``.

Semantics are bio2zarr's (VCF Zarr): integers -1 missing and -2 fill; floats as their
int32 bit patterns, 0x7F800001 missing and 0x7F800002 fill; strings as (start, length)
spans into the bytes, SPAN_MISSING (".") and SPAN_FILL ("").
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t

cimport vcfvirtual_codec._kernels.bcf as B

cdef enum:
    # Span lengths with a special meaning (vcfvirtual_codec.decode re-exports them).
    SPAN_FILL = -1  # the empty string "" (VCF Zarr fill)
    SPAN_MISSING = -2  # the string "." (VCF Zarr missing)
    # numeric_row's status for an Integer value outside the output's [lo, hi]: the caller
    # decodes again into int32 for a message naming the record and value. Outside the
    # ERR_* codes of bcf.pxd, which are bare integers shared with Python.
    ERR_NARROW = 255

# Integer outputs: the array's own dtype where it is at most int32 (floats: int32 bits).
ctypedef fused out_int:
    int8_t
    int16_t
    int32_t


cdef inline bint is_nan_bits(int32_t bits) noexcept nogil:
    """A float32 NaN (any payload: BCF's missing and end-of-vector are NaNs); infinities
    are values."""
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0


cdef inline bint full_width_values(B.Bytes src, int64_t t, int64_t m, out_int* flat,
                                   int32_t lo, int32_t hi) noexcept nogil:
    """The ``m`` values of BCF type ``t`` at ``src`` into ``flat``: missing -> -1, and
    end-of-vector -> -2 (ints; floats keep their bits, NaNs made missing). True when that
    is the whole answer: no end-of-vector and (ints) every value within ``[lo, hi]``.
    False leaves the record to numeric_row's general loop, which decodes it again.

    The common FORMAT case (DP, AD, GQ, PL of the array's full width): one pass with no
    per-value branch (selects and and/or accumulators only), so gcc vectorises it."""
    cdef uint8_t ok = 1
    cdef int64_t i
    cdef int32_t v
    if t == B.BT_INT8:
        for i in range(m):
            v = <int8_t>src[i]
            ok &= ((v != -127) & (v >= lo) & (v <= hi)) | (v == -128)
            # Outside [lo, hi] the value written wraps; the record is then refused, not kept.
            flat[i] = <out_int>(-1 if v == -128 else (-2 if v == -127 else v))
    elif t == B.BT_INT16:
        for i in range(m):
            v = <int16_t>(<uint16_t>src[2 * i] | (<uint16_t>src[2 * i + 1] << 8))
            ok &= ((v != -32767) & (v >= lo) & (v <= hi)) | (v == -32768)
            flat[i] = <out_int>(-1 if v == -32768 else (-2 if v == -32767 else v))
    elif t == B.BT_INT32:
        for i in range(m):
            v = B.i32(src, 4 * i)
            ok &= ((v != -2147483647) & (v >= lo) & (v <= hi)) | (v == <int32_t>-2147483648)
            flat[i] = <out_int>(-1 if v == <int32_t>-2147483648 else (-2 if v == -2147483647 else v))
    elif t == B.BT_FLOAT:
        for i in range(m):
            v = B.i32(src, 4 * i)
            ok &= v != B.FLOAT_END_BITS
            flat[i] = <out_int>(B.FLOAT_MISSING_BITS if is_nan_bits(v) else v)
    else:
        return False
    return ok != 0


cdef inline void fill_row(out_int* row, int64_t m, out_int value) noexcept nogil:
    cdef int64_t i
    for i in range(m):
        row[i] = value


cdef inline int64_t numeric_row(B.Bytes buf, int64_t buf_len, int64_t t, int64_t n, int64_t d,
                                bint is_format, bint is_float, out_int* row, int64_t n_vectors,
                                int64_t width, int32_t lo, int32_t hi) noexcept nogil:
    """One record's INFO (``n_vectors`` 1) or FORMAT Integer/Float values (``n`` per vector,
    type ``t``, at ``buf[d:]``) into ``row`` (n_vectors x width). Returns B.OK, B.ERR_SHAPE
    (more values than the width), B.ERR_BAD_TYPE (not the array's type) or ERR_NARROW.

    Integers: -1 missing, -2 end-of-vector and padding. Floats are written as their bit
    patterns: a value or a whole field that is absent reads missing, padding past the
    record's own width fill. Any NaN inside the record's width (end-of-vector, or a NaN
    value) reads as missing, which is how bio2zarr stores it. An INFO field holding the
    single value "." reads missing in every slot. An Integer outside ``[lo, hi]`` (the
    output's dtype) is ERR_NARROW, never a wrapped value."""
    cdef out_int missing_out = <out_int>(B.FLOAT_MISSING_BITS if is_float else -1)
    cdef out_int fill_out = <out_int>(B.FLOAT_END_BITS if is_float else -2)
    cdef int64_t size, missing, vector_end, s, j, base, v
    cdef int32_t bits
    cdef bint ended, end_is_value
    cdef out_int* out
    if d < 0:
        fill_row(row, n_vectors * width, missing_out)
        return B.OK
    if n > width:
        return B.ERR_SHAPE
    if is_float:
        if t != B.BT_FLOAT and n > 0:
            return B.ERR_BAD_TYPE
    elif n > 0 and (t < B.BT_INT8 or t > B.BT_INT32):
        return B.ERR_BAD_TYPE
    size = B.type_size(t)
    missing, vector_end = B.int_sentinels(t)
    # An INFO value written "." (one missing value) means the whole value is missing, not
    # one value short of its count: every slot reads missing, as bio2zarr stores it. A
    # FORMAT "." keeps missing-then-fill, as bio2zarr does.
    if (not is_format and n == 1 and width > 1 and d + size <= buf_len
            and ((B.i32(buf, d) == B.FLOAT_MISSING_BITS) if is_float else (B.read_int(buf, d, t) == missing))):
        fill_row(row, width, missing_out)
        return B.OK
    if n == width and is_format and n_vectors * width > 0:
        # The common FORMAT case: no end-of-vector bookkeeping unless one is seen; a record
        # that holds one (or a value outside [lo, hi]) is decoded again below.
        if full_width_values(buf + d, t, n_vectors * width, row, lo, hi):
            return B.OK
    # htslib ends a vector at its end-of-vector value: nothing after it is a value,
    # whatever its bytes say. Within the record's width bio2zarr stores the float slots
    # as missing (the end-of-vector NaN) and the integer ones as fill.
    end_is_value = not is_format and B.scalar_info_end_is_value(t, n)
    for s in range(n_vectors):
        base = d + s * n * size
        out = row + s * width
        ended = False
        for j in range(width):
            if j >= n:
                out[j] = fill_out
            elif ended:
                out[j] = missing_out if is_float else fill_out
            elif is_float:
                bits = B.i32(buf, base + 4 * j)
                out[j] = missing_out if is_nan_bits(bits) else <out_int>bits
                ended = bits == B.FLOAT_END_BITS
            else:
                v = B.read_int(buf, base + j * size, t)
                if v == missing:
                    out[j] = -1
                elif v == vector_end and not end_is_value:
                    out[j] = -2
                    ended = True
                elif v < lo or v > hi:
                    return ERR_NARROW
                else:
                    out[j] = <out_int>v
    return B.OK


cdef inline int64_t nul_length(B.Bytes buf, int64_t d, int64_t n) noexcept nogil:
    """Length of the string in ``buf[d:d+n]`` without its NUL padding."""
    cdef int64_t length = 0
    while length < n and buf[d + length] != 0:
        length += 1
    return length


cdef inline void id_span(B.Bytes buf, int64_t d, int64_t n, int64_t* start, int64_t* length) noexcept nogil:
    """The ID string in ``buf[d:d+n]`` as a span; "" or "." is missing."""
    cdef int64_t m = nul_length(buf, d, n)
    if m == 0 or (m == 1 and buf[d] == 46):  # "."
        start[0] = 0
        length[0] = SPAN_MISSING
    else:
        start[0] = d
        length[0] = m


cdef inline int64_t string_row(B.Bytes buf, int64_t t, int64_t n, int64_t d, bint is_format,
                               int64_t n_vectors, int64_t width, int64_t* starts,
                               int64_t* lengths) noexcept nogil:
    """One record's INFO or FORMAT String values (``n`` characters per vector) as spans of
    their comma-separated parts into ``starts``/``lengths`` (n_vectors x width). Returns
    B.OK or B.ERR_BAD_TYPE.

    A field absent from the record is "." in every slot, and so is an INFO key given
    without a value (``...;KEY;...``, or ``KEY=``: no characters; htslib prints both as
    the bare key and pysam reads no value); parts past a value's own count keep the
    caller's fill (""); parts past the width are dropped (only the single-value case)."""
    cdef int64_t s, j, base, part, part_start, b
    cdef bint at_end
    if d < 0 or (n == 0 and not is_format):
        for j in range(n_vectors * width):
            lengths[j] = SPAN_MISSING
        return B.OK
    if n > 0 and t != B.BT_CHAR:
        return B.ERR_BAD_TYPE
    for s in range(n_vectors):
        base = d + s * n
        part = 0
        part_start = base
        b = 0
        while b <= n and part < width:
            at_end = b == n or buf[base + b] == 0
            if at_end or buf[base + b] == 44:  # ","
                starts[s * width + part] = part_start
                lengths[s * width + part] = base + b - part_start
                part += 1
                part_start = base + b + 1
                if at_end:
                    break
            b += 1
    return B.OK


cdef inline bint filter_columns_fit(const int64_t* column_of_key, int64_t n_columns,
                                    int64_t out_width) noexcept nogil:
    """Whether every column of the FILTER map lies inside the output. The map comes from
    the codec configuration: a column past the output's filter dimension would write
    outside it."""
    cdef int64_t c
    for c in range(n_columns):
        if column_of_key[c] >= out_width:
            return False
    return True


cdef inline (int64_t, int64_t) filter_row(B.Bytes buf, int64_t t, int64_t n, int64_t d,
                                          const int64_t* column_of_key, int64_t n_columns,
                                          uint8_t* out) noexcept nogil:
    """Set ``out[column]`` for each of the record's ``n`` FILTER keys (type ``t`` at
    ``buf[d:]``): (status, index of the value at fault). B.ERR_BAD_TYPE when the keys are
    not integers, B.ERR_UNKNOWN_FILTER for a key the header (and filter_id) lacks."""
    cdef int64_t size = B.type_size(t)
    cdef int64_t j, key
    if n > 0 and (t < B.BT_INT8 or t > B.BT_INT32):
        return B.ERR_BAD_TYPE, 0
    for j in range(n):
        key = B.read_int(buf, d + j * size, t)
        if key < 0 or key >= n_columns or column_of_key[key] < 0:
            return B.ERR_UNKNOWN_FILTER, j
        out[column_of_key[key]] = 1
    return B.OK, 0


cdef inline int64_t utf8_char(B.Bytes buf, int64_t i, int64_t e, uint32_t* value) noexcept nogil:
    """The bytes of the whole UTF-8 character at ``buf[i]`` (before ``e``), its code point
    in ``value``; 0 when ``buf[i:e]`` starts none, as Python's strict decoder judges it:
    no overlong forms, surrogates or code points past U+10FFFF."""
    cdef uint32_t c = buf[i], b
    cdef uint32_t lo = 0x80, hi = 0xBF
    cdef int64_t need, m
    if c < 0x80:
        value[0] = c
        return 1
    if 0xC2 <= c <= 0xDF:
        need, c = 1, c & 0x1F
    elif c == 0xE0:
        need, lo, c = 2, 0xA0, c & 0x0F
    elif (0xE1 <= c <= 0xEC) or c == 0xEE or c == 0xEF:
        need, c = 2, c & 0x0F
    elif c == 0xED:
        need, hi, c = 2, 0x9F, c & 0x0F
    elif c == 0xF0:
        need, lo, c = 3, 0x90, c & 0x07
    elif 0xF1 <= c <= 0xF3:
        need, c = 3, c & 0x07
    elif c == 0xF4:
        need, hi, c = 3, 0x8F, c & 0x07
    else:
        return 0
    if i + need >= e:  # the sequence runs past the value
        return 0
    for m in range(1, need + 1):
        b = buf[i + m]
        if (m == 1 and (b < lo or b > hi)) or (m > 1 and (b < 0x80 or b > 0xBF)):
            return 0
        c = (c << 6) | (b & 0x3F)
    value[0] = c
    return need + 1
