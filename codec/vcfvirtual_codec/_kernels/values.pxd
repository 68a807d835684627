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
from libc.string cimport memchr

cimport vcfvirtual_codec._kernels.bcf as B

cdef extern from *:
    """
    /* Little-endian loads that the loop vectoriser sees as plain loads. bcf.pxd's u32
       assembles bytes with shifts, which gcc merges into one load only after it has
       vectorised (or given up on) the loop: in the full-width loops below that made
       int16/int32/float values 2-3x slower. On a big-endian host the bytes are assembled. */
    #include <string.h>
    static inline int16_t vv_load_i16(const uint8_t *p) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        int16_t v; memcpy(&v, p, 2); return v;
    #else
        return (int16_t)((uint16_t)p[0] | ((uint16_t)p[1] << 8));
    #endif
    }
    static inline int32_t vv_load_i32(const uint8_t *p) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        int32_t v; memcpy(&v, p, 4); return v;
    #else
        return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
    #endif
    }
    """
    int16_t load_i16 "vv_load_i16"(const uint8_t* p) noexcept nogil
    int32_t load_i32 "vv_load_i32"(const uint8_t* p) noexcept nogil


cdef enum:
    # Span lengths with a special meaning (vcfvirtual_codec.decode re-exports them).
    SPAN_FILL = -1  # the empty string "" (VCF Zarr fill)
    SPAN_MISSING = -2  # the string "." (VCF Zarr missing)
    # numeric_row's status for an Integer value outside the output's [lo, hi]: the caller
    # decodes again into int32 for a message naming the record and value. Outside the
    # ERR_* codes of bcf.pxd, which are bare integers shared with Python.
    ERR_NARROW = 255

# BCF integer types, as sources.
ctypedef fused src_int:
    int8_t
    int16_t
    int32_t

# Integer outputs: the array's own dtype where it is at most int32 (floats: int32 bits).
ctypedef fused out_int:
    int8_t
    int16_t
    int32_t


cdef inline bint is_nan_bits(int32_t bits) noexcept nogil:
    """A float32 NaN (any payload: BCF's missing and end-of-vector are NaNs); infinities
    are values."""
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0


cdef enum:
    # What full_width_values found besides values.
    WIDE_DONE = 0  # every value decoded
    WIDE_ENDS = 1  # end-of-vector values too: end_fixup finishes the record
    WIDE_OTHER = 2  # a value outside [lo, hi], or not a number type: the general loop decides


cdef inline int64_t full_width_values(B.Bytes src, int64_t t, int64_t m, out_int* flat,
                                      int32_t lo, int32_t hi) noexcept nogil:
    """The ``m`` values of BCF type ``t`` at ``src`` into ``flat``: missing -> -1, and
    end-of-vector -> -2 (ints; floats keep their bits, NaNs made missing).

    The common FORMAT case (DP, AD, GQ, PL of the array's full width): one pass with no
    per-value branch (selects and or-accumulators only), so gcc vectorises it. Returns
    WIDE_DONE, WIDE_ENDS (the values after an end-of-vector are still to be made fill),
    or WIDE_OTHER (an integer outside ``[lo, hi]``, whose written value wrapped)."""
    cdef uint8_t ends = 0, bad = 0
    cdef int64_t i
    cdef int8_t v8
    cdef int16_t v16
    cdef int32_t v
    # The sentinels as typed constants: compared with untyped literals, Cython's C widens
    # the values to long and gcc's vector lanes with them.
    cdef int8_t miss8 = -128, end8 = -127, one8 = -1, two8 = -2
    cdef int16_t miss16 = -32768, end16 = -32767, one16 = -1, two16 = -2
    cdef int32_t miss32 = -2147483648, end32 = -2147483647, one32 = -1, two32 = -2
    cdef int32_t float_miss = B.FLOAT_MISSING_BITS, float_end = B.FLOAT_END_BITS
    # [lo, hi] in the source's own width, so that the comparisons stay in its lanes.
    cdef int8_t lo8 = <int8_t>(lo if lo > -128 else -128), hi8 = <int8_t>(hi if hi < 127 else 127)
    cdef int16_t lo16 = <int16_t>(lo if lo > -32768 else -32768), hi16 = <int16_t>(hi if hi < 32767 else 32767)
    if t == B.BT_INT8:
        # All in int8 lanes (16 values per SSE2 instruction), widened only as stored; the
        # range check cannot reject a sentinel (lo8/hi8 may cut into them).
        for i in range(m):
            v8 = <int8_t>src[i]
            ends |= v8 == end8
            bad |= ((v8 < lo8) | (v8 > hi8)) & (v8 != miss8) & (v8 != end8)
            flat[i] = <out_int>(one8 if v8 == miss8 else (two8 if v8 == end8 else v8))
    elif t == B.BT_INT16:
        for i in range(m):
            v16 = load_i16(src + 2 * i)
            ends |= v16 == end16
            bad |= ((v16 < lo16) | (v16 > hi16)) & (v16 != miss16) & (v16 != end16)
            flat[i] = <out_int>(one16 if v16 == miss16 else (two16 if v16 == end16 else v16))
    elif t == B.BT_INT32:
        for i in range(m):
            v = load_i32(src + 4 * i)
            ends |= v == end32
            bad |= ((v < lo) | (v > hi)) & (v != miss32) & (v != end32)
            flat[i] = <out_int>(one32 if v == miss32 else (two32 if v == end32 else v))
    elif t == B.BT_FLOAT:
        for i in range(m):
            v = load_i32(src + 4 * i)
            ends |= v == float_end
            flat[i] = <out_int>(float_miss if is_nan_bits(v) else v)
    else:
        return WIDE_OTHER
    if bad:
        return WIDE_OTHER
    return WIDE_ENDS if ends else WIDE_DONE


cdef inline bint is_end(B.Bytes src, int64_t i, int64_t t) noexcept nogil:
    """Whether value ``i`` of BCF type ``t`` at ``src`` is the end-of-vector sentinel."""
    if t == B.BT_INT8:
        return src[i] == 0x81
    if t == B.BT_INT16:
        return src[2 * i] == 0x01 and src[2 * i + 1] == 0x80
    if t == B.BT_FLOAT:
        return B.i32(src, 4 * i) == B.FLOAT_END_BITS
    return B.i32(src, 4 * i) == -2147483647


cdef inline bint any_end(B.Bytes src, int64_t i, int64_t k, int64_t t) noexcept nogil:
    """Whether values ``i .. i+k`` of type ``t`` (int16, int32 or float) hold an
    end-of-vector: an or-reduction per type, which gcc vectorises."""
    cdef uint8_t found = 0
    cdef int64_t j
    if t == B.BT_INT16:
        for j in range(i, i + k):
            found |= load_i16(src + 2 * j) == -32767
    elif t == B.BT_FLOAT:
        for j in range(i, i + k):
            found |= load_i32(src + 4 * j) == B.FLOAT_END_BITS
    else:
        for j in range(i, i + k):
            found |= load_i32(src + 4 * j) == -2147483647
    return found != 0


cdef inline void end_fixup(B.Bytes src, int64_t t, int64_t m, int64_t width, out_int* flat,
                           out_int after) noexcept nogil:
    """After full_width_values (WIDE_ENDS): every slot from an end-of-vector to its
    vector's end (the end itself included) becomes ``after``: htslib ends a vector there,
    so what follows is no value. Ends are searched for a block at a time (int8: memchr),
    and only the few vectors holding one are written again."""
    cdef int64_t i = 0, block_end, stop
    cdef const uint8_t* at
    while i < m:
        if t == B.BT_INT8:
            at = <const uint8_t*>memchr(src + i, 0x81, m - i)
            if at == NULL:
                return
            i = at - src
        else:
            block_end = i + 32 if i + 32 < m else m
            if not any_end(src, i, block_end - i, t):
                i = block_end
                continue
            while i < block_end and not is_end(src, i, t):
                i += 1
            if i == block_end:
                continue
        stop = (i // width + 1) * width
        while i < stop:
            flat[i] = after
            i += 1


cdef inline void fill_row(out_int* row, int64_t m, out_int value) noexcept nogil:
    cdef int64_t i
    for i in range(m):
        row[i] = value


cdef inline src_int load_src(B.Bytes p, int64_t j, src_int like) noexcept nogil:
    """Value ``j`` of the source type (``like`` only selects it)."""
    if src_int is int8_t:
        return <int8_t>p[j]
    elif src_int is int16_t:
        return load_i16(p + 2 * j)
    else:
        return load_i32(p + 4 * j)


cdef inline int64_t int_vectors(B.Bytes p, int64_t n, int64_t n_vectors, int64_t width, out_int* row,
                                bint end_is_value, int32_t lo, int32_t hi, src_int missing,
                                src_int vector_end) noexcept nogil:
    """``n_vectors`` vectors of ``n`` integers (of the type of ``missing``) into rows of
    ``width`` slots: -1 missing; the end-of-vector (unless ``end_is_value``) and every slot
    after it -2. B.OK, or ERR_NARROW for a value (before any end) outside ``[lo, hi]``.
    One specialisation per source type, so the loop holds no type switch."""
    cdef int64_t s, j
    cdef src_int v
    cdef out_int* out
    for s in range(n_vectors):
        out = row + s * width
        j = 0
        while j < n:
            v = load_src(p, s * n + j, missing)
            if v == vector_end and not end_is_value:
                break  # htslib ends the vector here, whatever the bytes after it say
            if v == missing:
                out[j] = -1
            elif v < lo or v > hi:
                return ERR_NARROW
            else:
                out[j] = <out_int>v
            j += 1
        while j < width:
            out[j] = -2
            j += 1
    return B.OK


cdef inline void float_vector(B.Bytes p, int64_t n, int64_t width, out_int* out, bint keep_nan) noexcept nogil:
    """One vector of ``n`` float32 values (as bits) into ``width`` slots: any NaN missing
    (bio2zarr's reading of a vector), or with ``keep_nan`` (a Number=1 INFO field, which
    bio2zarr reads as a scalar) a NaN other than missing kept, quieted as htslib's readers
    return it; from an end-of-vector to the record's count missing (the end-of-vector
    NaN), past the count fill."""
    cdef int64_t j = 0
    cdef int32_t bits
    while j < n:
        bits = B.i32(p, 4 * j)
        if bits == B.FLOAT_END_BITS:
            break
        if is_nan_bits(bits) and (bits == B.FLOAT_MISSING_BITS or not keep_nan):
            bits = B.FLOAT_MISSING_BITS
        elif is_nan_bits(bits):
            bits = bits | 0x400000
        out[j] = <out_int>bits
        j += 1
    while j < n:
        out[j] = <out_int>B.FLOAT_MISSING_BITS
        j += 1
    while j < width:
        out[j] = <out_int>B.FLOAT_END_BITS
        j += 1


cdef inline int64_t numeric_row(B.Bytes buf, int64_t buf_len, int64_t t, int64_t n, int64_t d,
                                bint is_format, bint is_float, out_int* row, int64_t n_vectors,
                                int64_t width, int32_t lo, int32_t hi, bint keep_nan=False) noexcept nogil:
    """One record's INFO (``n_vectors`` 1) or FORMAT Integer/Float values (``n`` per vector,
    type ``t``, at ``buf[d:]``) into ``row`` (n_vectors x width). Returns B.OK, B.ERR_SHAPE
    (more values than the width), B.ERR_BAD_TYPE (not the array's type) or ERR_NARROW.

    Integers: -1 missing, -2 end-of-vector and padding. Floats are written as their bit
    patterns: a value or a whole field that is absent reads missing, padding past the
    record's own width fill. Any NaN inside the record's width (end-of-vector, or a NaN
    value) reads as missing, which is how bio2zarr stores it, except with ``keep_nan``
    (see float_vector). An INFO field holding the
    single value "." reads missing in every slot. An Integer outside ``[lo, hi]`` (the
    output's dtype) is ERR_NARROW, never a wrapped value."""
    cdef out_int missing_out = <out_int>(B.FLOAT_MISSING_BITS if is_float else -1)
    cdef int64_t size, s, wide
    cdef bint end_is_value
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
    # An INFO value written "." (one missing value) means the whole value is missing, not
    # one value short of its count: every slot reads missing, as bio2zarr stores it. A
    # FORMAT "." keeps missing-then-fill, as bio2zarr does.
    if (not is_format and n == 1 and width > 1 and d + size <= buf_len
            and ((B.i32(buf, d) == B.FLOAT_MISSING_BITS) if is_float
                 else (B.read_int(buf, d, t) == B.int_sentinels(t)[0]))):
        fill_row(row, width, missing_out)
        return B.OK
    if n == width and is_format and n_vectors * width > 0:
        # The common FORMAT case: values decoded in one vectorised pass, then the few
        # vectors an end-of-vector cuts short; anything else is decoded again below.
        wide = full_width_values(buf + d, t, n_vectors * width, row, lo, hi)
        if wide == WIDE_DONE:
            return B.OK
        if wide == WIDE_ENDS:
            end_fixup(buf + d, t, n_vectors * width, width, row,
                      missing_out if is_float else <out_int>-2)
            return B.OK
    # Within the record's width bio2zarr stores the float slots after an end-of-vector as
    # missing (the end-of-vector NaN) and the integer ones as fill; a lone INFO int8 or
    # int16 end-of-vector is a value (scalar_info_end_is_value).
    end_is_value = not is_format and B.scalar_info_end_is_value(t, n)
    if is_float:
        for s in range(n_vectors):
            float_vector(buf + d + s * n * size, n, width, row + s * width, keep_nan)
        return B.OK
    if t == B.BT_INT8 or n == 0:
        return int_vectors(buf + d, n, n_vectors, width, row, end_is_value, lo, hi, <int8_t>-128, <int8_t>-127)
    if t == B.BT_INT16:
        return int_vectors(buf + d, n, n_vectors, width, row, end_is_value, lo, hi, <int16_t>-32768, <int16_t>-32767)
    return int_vectors(buf + d, n, n_vectors, width, row, end_is_value, lo, hi, <int32_t>-2147483648,
                       <int32_t>-2147483647)


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
