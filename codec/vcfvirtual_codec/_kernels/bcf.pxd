# cython: language_level=3
"""Primitives over uncompressed BCF 2.2 record bytes, inlined into every kernel.

Layout of one record (BCF spec, section 6.3): ``l_shared`` and ``l_indiv`` (uint32),
then the shared part (CHROM, POS, rlen, QUAL, n_allele_info, n_fmt_sample, ID, alleles,
FILTER, INFO) and the per-sample part (FORMAT fields, each a key, a type descriptor and
``n_sample`` vectors). Everything is little-endian. Values are "typed": a descriptor
byte whose low nibble is the type and high nibble the count, 15 meaning the real count
follows as a typed integer.

Every function takes a pointer and explicit ends and checks what it reads against
them: the kernels run without bounds checks, so these checks are what keeps a crafted
record from reading outside its chunk. The constants here are also
:mod:`vcfvirtual_codec.bcf.records`' (the Python tables); tests check they agree.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t

ctypedef const uint8_t* Bytes

cdef enum:
    # Typed-value type codes.
    BT_NULL = 0
    BT_INT8 = 1
    BT_INT16 = 2
    BT_INT32 = 3
    BT_FLOAT = 5
    BT_CHAR = 7
    # Offsets inside a record, counted from the start of l_shared.
    OFF_CHROM = 8
    OFF_POS = 12
    OFF_RLEN = 16
    OFF_QUAL = 20
    OFF_N_ALLELE_INFO = 24
    OFF_N_FMT_SAMPLE = 28
    OFF_ID = 32
    MIN_L_SHARED = 24
    # Error codes (meanings in vcfvirtual_codec.bcf.records.ERROR_TEXT).
    OK = 0
    ERR_SHORT_SHARED = 1
    ERR_OVERRUN = 2
    ERR_BAD_TYPE = 3
    ERR_SAMPLES = 4
    ERR_TRAILING = 5
    ERR_COUNT = 6
    ERR_SHAPE = 7
    ERR_UNKNOWN_KEY = 8
    ERR_UNKNOWN_FILTER = 9
    ERR_TYPE_MISMATCH = 10
    ERR_GT_VALUE = 11
    ERR_UNKNOWN_CONTIG = 12
    ERR_NEGATIVE_POS = 13
    ERR_ID_TYPE = 20
    ERR_NULL_VALUES = 21
    ERR_NO_REF = 22
    ERR_RLEN = 23
    ERR_SEGMENT = 30
    # BCF's float sentinels (BCF spec, section 6.3.3) as int32 bit patterns: missing, and
    # end-of-vector, which VCF Zarr also takes as its float fill.
    FLOAT_MISSING_BITS = 0x7F800001
    FLOAT_END_BITS = 0x7F800002


cdef inline uint32_t u32(Bytes buf, int64_t i) noexcept nogil:
    return (<uint32_t>buf[i] | (<uint32_t>buf[i + 1] << 8) | (<uint32_t>buf[i + 2] << 16)
            | (<uint32_t>buf[i + 3] << 24))


cdef inline int32_t i32(Bytes buf, int64_t i) noexcept nogil:
    return <int32_t>u32(buf, i)


cdef inline int64_t type_size(int64_t t) noexcept nogil:
    if t == BT_INT8 or t == BT_CHAR:
        return 1
    if t == BT_INT16:
        return 2
    if t == BT_INT32 or t == BT_FLOAT:
        return 4
    if t == BT_NULL:
        return 0
    return -1


cdef inline int64_t read_int(Bytes buf, int64_t i, int64_t t) noexcept nogil:
    """Signed integer of BCF type ``t`` at ``buf[i]``."""
    if t == BT_INT8:
        return <int8_t>buf[i]
    if t == BT_INT16:
        return <int16_t>(<uint16_t>buf[i] | (<uint16_t>buf[i + 1] << 8))
    return i32(buf, i)


cdef inline (int64_t, int64_t, int64_t) typed_descriptor(Bytes buf, int64_t i, int64_t end) noexcept nogil:
    """Parse a typed-value descriptor at ``i``: (type, count, data_start).

    data_start is -1 when the descriptor itself is malformed or runs past ``end``."""
    cdef int64_t t, n, t2, s2
    if i >= end:
        return 0, 0, -1
    t = buf[i] & 0x0F
    n = buf[i] >> 4
    i += 1
    if type_size(t) < 0:
        return t, n, -1
    if n == 15:
        if i >= end:
            return t, n, -1
        t2 = buf[i] & 0x0F
        s2 = type_size(t2)
        if t2 < BT_INT8 or t2 > BT_INT32 or i + 1 + s2 > end:
            return t, n, -1
        n = read_int(buf, i + 1, t2)
        i += 1 + s2
        if n < 0:
            return t, n, -1
    return t, n, i


cdef inline int64_t record_length(Bytes buf, int64_t pos, int64_t end) noexcept nogil:
    """Total bytes of the record at ``pos`` (8 + l_shared + l_indiv), or a negative error."""
    cdef int64_t l_shared, l_indiv, total
    if pos + 8 > end:
        return -ERR_TRAILING
    l_shared = u32(buf, pos)
    l_indiv = u32(buf, pos + 4)
    if l_shared < MIN_L_SHARED:
        return -ERR_SHORT_SHARED
    total = 8 + l_shared + l_indiv
    if pos + total > end:
        return -ERR_TRAILING
    return total


cdef inline int64_t skip_typed(Bytes buf, int64_t i, int64_t end) noexcept nogil:
    """Index just past the typed value at ``i``, or -1 when it overruns ``end``."""
    cdef int64_t t, n, j
    t, n, j = typed_descriptor(buf, i, end)
    if j < 0:
        return -1
    j += n * type_size(t)
    if j > end:
        return -1
    return j


cdef inline (int64_t, int64_t) format_start(Bytes buf, int64_t pos) noexcept nogil:
    """Start and end of the per-sample (FORMAT) part of the record at ``pos``."""
    cdef int64_t start = pos + 8 + <int64_t>u32(buf, pos)
    return start, start + <int64_t>u32(buf, pos + 4)


cdef inline int64_t n_sample(Bytes buf, int64_t pos) noexcept nogil:
    """The record's own sample count (24 bits of n_fmt_sample). FORMAT vectors are laid
    out by it, so reading another number of samples (an array's) would read past a field."""
    return u32(buf, pos + OFF_N_FMT_SAMPLE) & 0xFFFFFF


cdef inline (int64_t, int64_t) read_key(Bytes buf, int64_t i, int64_t end) noexcept nogil:
    """(key, next index) of a typed single-integer key, next -1 when malformed."""
    cdef int64_t t, n, d
    t, n, d = typed_descriptor(buf, i, end)
    if d < 0 or n != 1 or t < BT_INT8 or t > BT_INT32 or d + type_size(t) > end:
        return -1, -1
    return read_int(buf, d, t), d + type_size(t)


cdef inline (int64_t, int64_t, int64_t, int64_t) find_format(Bytes buf, int64_t pos, int64_t key) noexcept nogil:
    """Locate FORMAT field ``key`` in the record at ``pos``.

    Returns (type, count per sample, data_start, error): data_start -1 when absent."""
    cdef int64_t n_fmt = buf[pos + OFF_N_FMT_SAMPLE + 3]
    cdef int64_t samples = n_sample(buf, pos)
    cdef int64_t j, end, k, kj, t, n, d, nxt, f
    j, end = format_start(buf, pos)
    for f in range(n_fmt):
        k, kj = read_key(buf, j, end)
        if kj < 0:
            return 0, 0, -1, ERR_OVERRUN
        t, n, d = typed_descriptor(buf, kj, end)
        if d < 0:
            return 0, 0, -1, ERR_BAD_TYPE
        if t == BT_NULL and n > 0:  # htslib refuses the record; its bytes would be skipped as 0
            return 0, 0, -1, ERR_NULL_VALUES
        nxt = d + samples * n * type_size(t)
        if nxt > end:
            return 0, 0, -1, ERR_OVERRUN
        if k == key:
            return t, n, d, OK
        j = nxt
    return 0, 0, -1, OK


cdef inline (int64_t, int64_t) filter_start(Bytes buf, int64_t pos) noexcept nogil:
    """(index of the FILTER vector, end of shared part), index -1 on overrun.

    Reached by skipping the ID and the n_allele allele strings before it."""
    cdef int64_t end = pos + 8 + <int64_t>u32(buf, pos)
    cdef int64_t n_allele = u32(buf, pos + OFF_N_ALLELE_INFO) >> 16
    cdef int64_t i = skip_typed(buf, pos + OFF_ID, end)
    cdef int64_t a
    for a in range(n_allele):
        if i < 0:
            break
        i = skip_typed(buf, i, end)
    return i, end


cdef inline (int64_t, int64_t, int64_t) info_start(Bytes buf, int64_t pos) noexcept nogil:
    """(index of the first INFO key, n_info, end of shared part), or index -1 on overrun."""
    cdef int64_t n_info = u32(buf, pos + OFF_N_ALLELE_INFO) & 0xFFFF
    cdef int64_t i, end
    i, end = filter_start(buf, pos)
    if i < 0:
        return -1, n_info, end
    return skip_typed(buf, i, end), n_info, end


cdef inline (int64_t, int64_t, int64_t, int64_t) find_info(Bytes buf, int64_t pos, int64_t key) noexcept nogil:
    """Locate INFO field ``key``: (type, count, data_start, error); data_start -1 if absent."""
    cdef int64_t i, n_info, end, k, j, t, n, d, f
    i, n_info, end = info_start(buf, pos)
    if i < 0:
        return 0, 0, -1, ERR_OVERRUN
    for f in range(n_info):
        k, j = read_key(buf, i, end)
        if j < 0:
            return 0, 0, -1, ERR_OVERRUN
        t, n, d = typed_descriptor(buf, j, end)
        if d < 0 or d + n * type_size(t) > end:
            return 0, 0, -1, ERR_OVERRUN
        if t == BT_NULL and n > 0:  # htslib refuses the record (see find_format)
            return 0, 0, -1, ERR_NULL_VALUES
        if k == key:
            return t, n, d, OK
        i = d + n * type_size(t)
    return 0, 0, -1, OK


cdef inline (int64_t, int64_t) int_sentinels(int64_t t) noexcept nogil:
    """(missing, vector_end) of BCF integer type ``t``."""
    if t == BT_INT8:
        return -128, -127
    if t == BT_INT16:
        return -32768, -32767
    return -2147483648, -2147483647


cdef inline int64_t count_parts(Bytes buf, int64_t d, int64_t n) noexcept nogil:
    """Comma-separated parts of the string in ``buf[d:d+n]`` (up to its first NUL)."""
    cdef int64_t parts = 1, b
    cdef uint8_t c
    for b in range(n):
        c = buf[d + b]
        if c == 0:
            break
        if c == 44:  # ","
            parts += 1
    return parts


cdef inline bint scalar_info_end_is_value(int64_t t, int64_t n) noexcept nogil:
    """Whether a lone INFO integer equal to its type's end-of-vector sentinel is a value.

    htslib keeps a single INFO value as a plain integer (bcf_info_t.v1), with no
    end-of-vector meaning: pysam and bio2zarr read int8 0x81 as -127 and int16 0x8001
    as -32767. For int32 the value is bcf_int32_vector_end itself, which bio2zarr (the
    reference converter) stores as fill, so that one stays a sentinel."""
    return n == 1 and (t == BT_INT8 or t == BT_INT16)


cdef inline void update_stats(Bytes buf, int64_t t, int64_t n, int64_t d, int64_t n_vectors,
                              int64_t* stats, int64_t key, bint scalar_end_is_value) noexcept nogil:
    """Fold one field's values into ``stats[key] = (max_number, min, max)`` (rows of 3).

    max_number counts values per vector, or comma-separated parts for strings, as
    bio2zarr does; min and max skip the missing and end-of-vector sentinels, except
    where ``scalar_end_is_value`` (a lone INFO value, see scalar_info_end_is_value)."""
    cdef int64_t size = type_size(t)
    cdef int64_t s, parts, j, v, missing, vector_end
    cdef bint end_is_value
    stats = stats + 3 * key
    if t == BT_CHAR:
        for s in range(n_vectors):
            parts = count_parts(buf, d + s * n, n)
            if parts > stats[0]:
                stats[0] = parts
        return
    if n > stats[0]:
        stats[0] = n
    if t >= BT_INT8 and t <= BT_INT32:
        missing, vector_end = int_sentinels(t)
        end_is_value = scalar_end_is_value and scalar_info_end_is_value(t, n)
        for j in range(n_vectors * n):
            v = read_int(buf, d + j * size, t)
            if v == missing or (v == vector_end and not end_is_value):
                continue
            if v < stats[1]:
                stats[1] = v
            if v > stats[2]:
                stats[2] = v


cdef inline int64_t htslib_rlen(Bytes buf, int64_t pos, int64_t end_key) noexcept nogil:
    """The rlen htslib uses for a record whose stored rlen is negative (2^31 or more).

    bcf_record_check replaces it (get_rlen): the longest of the REF allele (its typed
    length, padding included), and END - POS where a lone integer END lies past POS,
    else 1. ``end_key`` is INFO/END's dictionary key, or -1. (htslib also consults
    SVLEN for symbolic deletions and FORMAT/LEN for <*> alleles; the scan refuses such
    records instead.) Returns -1 when the record cannot be walked."""
    cdef int64_t end = pos + 8 + <int64_t>u32(buf, pos)
    cdef int64_t pos0 = i32(buf, pos + OFF_POS)  # -1 for VCF POS 0; below -1 is refused
    cdef int64_t i = skip_typed(buf, pos + OFF_ID, end)
    cdef int64_t len_ref = 0, stop = 0, t, n, d, n_info, k, j, v, missing, vector_end, f, span
    if i < 0:
        return -1
    if (u32(buf, pos + OFF_N_ALLELE_INFO) >> 16) > 0:
        t, n, d = typed_descriptor(buf, i, end)
        if d < 0:
            return -1
        len_ref = n
    # htslib's "end": 0 unless END is a lone, non-missing integer
    if end_key >= 0:
        i, n_info, end = info_start(buf, pos)
        if i < 0:
            return -1
        for f in range(n_info):
            k, j = read_key(buf, i, end)
            if j < 0:
                return -1
            t, n, d = typed_descriptor(buf, j, end)
            if d < 0 or d + n * type_size(t) > end:
                return -1
            if k == end_key:  # htslib takes the first END
                if n == 1 and t >= BT_INT8 and t <= BT_INT32:
                    v = read_int(buf, d, t)
                    missing, vector_end = int_sentinels(t)
                    if v != missing:
                        stop = v
                break
            i = d + n * type_size(t)
    span = stop - pos0 if stop > pos0 else 1
    return span if span > len_ref else len_ref
