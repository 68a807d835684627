# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""An INFO typed column rearranged for the compressor (the columns layout's FLAG_INFO_PLANES).

A typed column of ``n`` records (``int32 count[n]``, ``uint8 type[n]``, then each record's
``count`` values of its type) becomes, at the same length:

1. ``type[n]``;
2. ``count + 1`` (as uint32, so that -1, absent, is 0) of every record whose type is not
   char (7), as 4 byte planes: every such record's low byte, then every second byte...;
3. the integer values (int8, int16, int32) of every record in order, as byte planes: byte 0
   of every integer value, then byte 1 of those of 2 or 4 bytes, then bytes 2 and 3 of
   those of 4;
4. in record order, each float record's values verbatim and each char record's
   ``count + 1`` (4 bytes, little-endian) followed by its characters.

Why (measured on the sites-only cohort of benchmarks/wide_info.py, Zstd 7): integers differ
between records in their high bytes only by sign and magnitude, so their planes shrink
(INFO/I0 0.91 -> 0.78 MB, bio2zarr's Blosc-shuffled int32 0.78); counts are 1 (or -1)
record after record, so their planes are runs; floats' bytes stay together (AF, 4 decimals,
repeats whole values a compressor matches: its planes were 10% larger); a string's length
stays beside its text, both the same whenever the word is (INFO/S0 0.52 -> 0.34 MB).

Undoing it needs the table first: the types plane says which records' counts are in the
planes and which beside their characters, and the counts where each plane starts. Every
read is checked against the input's length and every write against the output's: a
crafted segment returns an error code, never reads or writes outside either.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

# Error codes, returned with the record they concern (n: the column as a whole).
cdef enum:
    OK = 0
    ERR_TYPE = 1  # a type code that is not BCF's int8, int16, int32, float32 or char (or 0)
    ERR_COUNT = 2  # a count below -1, or larger than the segment
    ERR_LENGTH = 3  # the counts and types do not account for the segment's bytes exactly
    ERR_OUT = 4  # the output is not the input's length
    CHAR = 7  # BCF's char type

ERRORS = {
    ERR_TYPE: "a record's type code is not BCF's",
    ERR_COUNT: "a record's count is below -1 or beyond the segment",
    ERR_LENGTH: "the records' counts and types do not account for the segment's bytes",
    ERR_OUT: "the output is not the segment's length",
}


# Bytes per value of each BCF type code (0 for an absent record's 0), -1 where none.
cdef int _SIZES[256]


cdef void _build_sizes() noexcept:
    cdef int t
    for t in range(256):
        _SIZES[t] = -1
    _SIZES[0] = 0
    _SIZES[1] = 1
    _SIZES[2] = 2
    _SIZES[3] = 4
    _SIZES[5] = 4
    _SIZES[CHAR] = 1


_build_sizes()


cdef inline int _size(uint8_t t) noexcept nogil:
    return _SIZES[t]


cdef inline bint _integer(uint8_t t) noexcept nogil:
    return t == 1 or t == 2 or t == 3


cdef inline uint32_t _u32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0]) | (<uint32_t>p[1]) << 8 | (<uint32_t>p[2]) << 16 | (<uint32_t>p[3]) << 24


cdef inline void _put32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = v & 0xFF
    p[1] = (v >> 8) & 0xFF
    p[2] = (v >> 16) & 0xFF
    p[3] = (v >> 24) & 0xFF


cdef inline int32_t _plane_count(const uint8_t* planes, Py_ssize_t at, Py_ssize_t m) noexcept nogil:
    """The count (its stored ``count + 1`` minus 1) at column ``at`` of 4 planes of ``m``."""
    return <int32_t>(
        (<uint32_t>planes[at])
        | (<uint32_t>planes[at + m]) << 8
        | (<uint32_t>planes[at + 2 * m]) << 16
        | (<uint32_t>planes[at + 3 * m]) << 24
    ) - 1


cdef int _forward(const uint8_t* seg, Py_ssize_t length, Py_ssize_t n, uint8_t* out, Py_ssize_t* at) noexcept nogil:
    cdef Py_ssize_t i, j = 0, m = 0
    cdef int64_t total = 0, ints = 0, wide = 0, words = 0, count, size, src, tail, v, isint
    cdef int64_t p0, p1, p2, p3
    cdef int32_t c
    cdef uint32_t stored
    cdef uint8_t t
    cdef bint bad = False
    for i in range(n):  # pass 1: the table checked (branch-free), and where each part starts
        c = <int32_t>_u32(&seg[4 * i])
        t = seg[4 * n + i]
        size = _size(t)
        bad |= (size < 0) | (c < -1) | (c > length)
        count = c if c > 0 else 0
        isint = _integer(t)
        total += count * size
        m += t != CHAR
        ints += count * isint
        wide += count * (isint & (size >= 2))
        words += count * (isint & (size == 4))
    if bad:  # the first record at fault, named
        for i in range(n):
            at[0] = i
            c = <int32_t>_u32(&seg[4 * i])
            if _size(seg[4 * n + i]) < 0:
                return ERR_TYPE
            if c < -1 or c > length:
                return ERR_COUNT
    at[0] = n
    if 5 * n + total != length:  # each count at most the length: the sum cannot overflow
        return ERR_LENGTH
    # Cursors as scalars (kept in registers through the loop).
    p0 = n + 4 * m
    p1 = p0 + ints
    p2 = p1 + wide
    p3 = p2 + words
    tail = p3 + words
    src = 5 * n
    memcpy(out, &seg[4 * n], n)  # the types
    for i in range(n):  # pass 2: each record's bytes to their places (they fit exactly)
        c = <int32_t>_u32(&seg[4 * i])
        t = seg[4 * n + i]
        size = _size(t)
        count = c if c > 0 else 0
        stored = <uint32_t>(<int64_t>c + 1)
        if t == CHAR:
            _put32(&out[tail], stored)
            tail += 4
        else:
            out[n + j] = stored & 0xFF
            out[n + m + j] = (stored >> 8) & 0xFF
            out[n + 2 * m + j] = (stored >> 16) & 0xFF
            out[n + 3 * m + j] = (stored >> 24) & 0xFF
            j += 1
        if t == 3:
            for v in range(count):
                out[p0] = seg[src]
                out[p1] = seg[src + 1]
                out[p2] = seg[src + 2]
                out[p3] = seg[src + 3]
                p0 += 1
                p1 += 1
                p2 += 1
                p3 += 1
                src += 4
        elif t == 2:
            for v in range(count):
                out[p0] = seg[src]
                out[p1] = seg[src + 1]
                p0 += 1
                p1 += 1
                src += 2
        elif t == 1:
            memcpy(&out[p0], &seg[src], count)
            p0 += count
            src += count
        elif count * size:
            memcpy(&out[tail], &seg[src], count * size)
            tail += count * size
            src += count * size
    return OK


cdef inline int32_t _get32(const uint8_t* p) noexcept nogil:
    return <int32_t>_u32(p)


cdef int _first_bad_type(const uint8_t* types, Py_ssize_t n, Py_ssize_t* at) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if _size(types[i]) < 0:
            at[0] = i
            return ERR_TYPE
    return OK


cdef bint _one_type(const uint8_t* types, Py_ssize_t n) noexcept nogil:
    """Whether every record's type is one code, or 0 (absent)."""
    cdef uint8_t first = 0, other = 0
    cdef Py_ssize_t i
    for i in range(n):
        first |= types[i]
    for i in range(n):
        other |= (types[i] != 0) & (types[i] != first)
    return not other


cdef int _table(const uint8_t* planes, Py_ssize_t length, Py_ssize_t n, Py_ssize_t m, uint8_t* out,
                int64_t* sums, Py_ssize_t* at) noexcept nogil:
    """Pass 1 of the undo: the types and the planes' counts written to the output's table
    (a char record's count is beside its text: written in pass 2), and the sums that say
    where each part starts: sums[0..3] the integer planes' lengths, sums[4] the float bytes.
    Branch-free over the records (an error is located after, by a second look)."""
    cdef Py_ssize_t i, j = 0
    cdef int64_t ints = 0, wide = 0, words = 0, floats = 0, count = 0, size, isint
    cdef int32_t c
    cdef uint8_t t
    cdef bint bad = False
    memcpy(&out[4 * n], planes, n)
    if m == n and _one_type(planes, n):
        # The common column: one type throughout (absent records aside), no char. Only the
        # counts vary: a short loop, then the sums by the type.
        t = 0
        for i in range(n):
            c = _plane_count(planes, n + i, n)
            bad |= (c < -1) | (c > length)
            _put32(&out[4 * i], <uint32_t>c)
            count += (c if c > 0 else 0) * (planes[i] != 0)  # type 0 holds no values, whatever its count
            t |= planes[i]
        size = _size(t)
        if _integer(t):
            ints = count
            wide = count if size >= 2 else 0
            words = count if size == 4 else 0
        else:
            floats = count * size
    else:
        # The planes hold every record's count but a char record's (j: the plane's record;
        # j == i where there is none).
        for i in range(n):
            t = planes[i]
            if t == CHAR:
                continue
            c = _plane_count(planes, n + j, m)
            j += 1
            bad |= (c < -1) | (c > length)
            _put32(&out[4 * i], <uint32_t>c)
            count = c if c > 0 else 0
            size = _size(t)
            isint = _integer(t)
            ints += count * isint
            wide += count * (isint & (size >= 2))
            words += count * (isint & (size == 4))
            floats += count * size * (1 - isint)
    if bad:  # the first record whose count is out of range
        j = 0
        for i in range(n):
            if planes[i] != CHAR:
                c = _plane_count(planes, n + j, m)
                j += 1
                if c < -1 or c > length:
                    at[0] = i
                    return ERR_COUNT
    sums[0] = ints
    sums[1] = wide
    sums[2] = words
    sums[3] = words
    sums[4] = floats
    at[0] = n
    if ints + wide + 2 * words + floats > length:
        return ERR_LENGTH
    return OK


cdef int _backward(const uint8_t* planes, Py_ssize_t length, Py_ssize_t n, uint8_t* out, Py_ssize_t* at) noexcept nogil:
    cdef Py_ssize_t i, k, m = 0
    cdef int64_t count, size, dst, tail, v, values
    cdef int64_t p0, p1, p2, p3
    cdef int64_t sums[5]
    cdef int32_t c
    cdef uint8_t t
    cdef int err, chars = 0
    for i in range(n):
        chars += planes[i] == CHAR
        if _size(planes[i]) < 0:
            return _first_bad_type(planes, n, at)
    m = n - chars
    # 5n >= n + 4m: the count planes lie within the input.
    err = _table(planes, length, n, m, out, sums, at)
    if err:
        return err
    # The integer planes' cursors as scalars (kept in registers through the loop below).
    p0 = n + 4 * m
    p1 = p0 + sums[0]
    p2 = p1 + sums[1]
    p3 = p2 + sums[2]
    tail = p3 + sums[3]
    at[0] = n
    if tail > length:
        return ERR_LENGTH
    values = length - 5 * n
    if chars == 0 and sums[0] == 0:
        # Floats (and absent records) only: the values are the tail, verbatim.
        if sums[4] != values or tail + values != length:
            return ERR_LENGTH
        memcpy(&out[5 * n], &planes[tail], values)
        return OK
    dst = 5 * n
    for i in range(n):  # pass 2: each record's values back in place
        at[0] = i
        t = planes[i]
        size = _size(t)
        if t == CHAR:
            if tail + 4 > length:
                return ERR_LENGTH
            c = _get32(&planes[tail]) - 1
            tail += 4
            if c < -1 or c > length:
                return ERR_COUNT
            _put32(&out[4 * i], <uint32_t>c)
        else:
            c = _get32(&out[4 * i])  # written by pass 1, its range checked there
        # An absent record (type 0) holds no values whatever its count says: not looped
        # over, or a crafted column of such counts would take n x length steps.
        count = c if c > 0 and size > 0 else 0
        if dst + count * size > length:
            return ERR_LENGTH
        if t <= 3:  # integers (or an absent record's none): from the planes, which pass 1 bounded
            for v in range(count):
                if dst + 4 <= length and p3 < length:
                    # All four planes' next bytes, whatever the size (p0 <= p1 <= p2 <= p3:
                    # within the input); the bytes past the value are the next values' to overwrite.
                    out[dst] = planes[p0]
                    out[dst + 1] = planes[p1]
                    out[dst + 2] = planes[p2]
                    out[dst + 3] = planes[p3]
                    p0 += 1
                    p1 += size >= 2
                    p2 += size == 4
                    p3 += size == 4
                else:  # the column's last bytes: exactly the value's
                    out[dst] = planes[p0]
                    p0 += 1
                    if size >= 2:
                        out[dst + 1] = planes[p1]
                        p1 += 1
                    if size == 4:
                        out[dst + 2] = planes[p2]
                        out[dst + 3] = planes[p3]
                        p2 += 1
                        p3 += 1
                dst += size
        elif count * size:
            if tail + count * size > length:
                return ERR_LENGTH
            memcpy(&out[dst], &planes[tail], count * size)
            tail += count * size
            dst += count * size
    at[0] = n
    if dst != length or tail != length:
        return ERR_LENGTH
    return OK


cdef enum:
    _WALK = -1  # _shapes: the column must be walked


cdef int _shapes(Py_ssize_t length, Py_ssize_t n, Py_ssize_t out_length) noexcept:
    """What both directions answer before walking a column of ``n`` records in ``length``
    bytes into ``out_length``: ERR_OUT, ERR_LENGTH (fewer bytes than the table), OK for an
    empty column, else _WALK."""
    if out_length != length:
        return ERR_OUT
    if n < 0 or length < 5 * n:
        return ERR_LENGTH
    if n == 0:
        return OK if length == 0 else ERR_LENGTH
    return _WALK


def info_planes(const uint8_t[::1] seg, Py_ssize_t n, uint8_t[::1] out):
    """``seg``, a typed column of ``n`` records, rearranged into ``out`` (its length).
    Returns (error code, record): ERR_TYPE, ERR_COUNT or ERR_LENGTH where the column is
    not one (``out`` then undefined)."""
    cdef Py_ssize_t at = 0
    cdef int err = _shapes(seg.shape[0], n, out.shape[0])
    if err != _WALK:
        return err, 0
    with nogil:
        err = _forward(&seg[0], seg.shape[0], n, &out[0], &at)
    return err, (at if err else 0)


def undo_info_planes(const uint8_t[::1] planes, Py_ssize_t n, uint8_t[::1] out):
    """:func:`info_planes` undone: the typed column of ``n`` records into ``out`` (the
    input's length). Returns (error code, record) where ``planes`` is not the
    rearrangement of one (a table that does not add up, a count outside the bytes)."""
    cdef Py_ssize_t at = 0
    cdef int err = _shapes(planes.shape[0], n, out.shape[0])
    if err != _WALK:
        return err, 0
    with nogil:
        err = _backward(&planes[0], planes.shape[0], n, &out[0], &at)
    return err, (at if err else 0)
