# cython: language_level=3
"""The layout step of the one decoder: where each record's value of a field lies.

A chunk reaches the value kernels in one of two layouts: the records of a bgzf/raw
chunk (a field found by walking the record, ``locate``), or a columns-layout segment
(counts, types, then values, one record after another: ``column_starts``). Either
gives, per record, (type, count, data start); the value kernels then read the same
typed bytes whatever the layout.
"""

from libc.stdint cimport int64_t, uint8_t

cimport vcfvirtual_codec._kernels.bcf as B


cdef inline (int64_t, int64_t, int64_t, int64_t) locate(B.Bytes buf, int64_t pos, int64_t key,
                                                        bint is_format, int64_t n_vectors) noexcept nogil:
    """Field ``key`` of the record at ``pos``: (type, count, data_start, error), data_start
    -1 when absent. A FORMAT field of a record whose own sample count is not the array's
    ``n_vectors`` is ERR_SAMPLES: its vectors are laid out by the record's count."""
    cdef int64_t t, n, d, err
    if not is_format:
        return B.find_info(buf, pos, key)
    t, n, d, err = B.find_format(buf, pos, key)
    if err == B.OK and d >= 0 and B.n_sample(buf, pos) != n_vectors:
        return t, n, d, B.ERR_SAMPLES
    return t, n, d, err


cdef inline (int64_t, int64_t) column_starts(B.Bytes seg, int64_t length, int64_t n, int64_t n_vectors,
                                             int64_t* starts) noexcept nogil:
    """Fill ``starts[0..n]`` with where each record's values begin in a typed column of
    ``length`` bytes (``n`` int32 counts, ``n`` type codes, then the values), and check the
    column's length. Returns (error, offset). ``n_vectors`` is the block's samples for a
    FORMAT block, 1 otherwise. A negative count is an absent field (no values)."""
    cdef int64_t p = 5 * n, k, c, size
    if length < 5 * n:
        return B.ERR_SEGMENT, 0
    for k in range(n):
        starts[k] = p
        c = B.i32(seg, 4 * k)
        if c < 0:
            continue
        size = B.type_size(seg[4 * n + k])
        if size < 0:
            return B.ERR_BAD_TYPE, 4 * n + k
        p += c * size * n_vectors
        if p > length:
            return B.ERR_SEGMENT, 4 * k
    starts[n] = p
    if p != length:
        return B.ERR_SEGMENT, p
    return B.OK, 0


cdef inline (int64_t, int64_t) column_field(B.Bytes seg, int64_t n, int64_t k) noexcept nogil:
    """(type, count) of record ``k`` in a checked typed column of ``n`` records."""
    return seg[4 * n + k], B.i32(seg, 4 * k)
