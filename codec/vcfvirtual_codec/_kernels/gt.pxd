# cython: language_level=3
"""The genotype row decoder of the one decoder: one record's typed FORMAT/GT vector
(type, count, data start, as the layout step finds it) into its row of call_genotype
(alleles: -1 missing, -2 fill) and of call_genotype_phased.

Both layouts call this same function: the records of a bgzf/raw chunk (``locate``) and a
columns-layout GT block (``column_starts``), whose int8 bytes may be stored minus
GT_SHIFT (``add`` puts the shift back as each byte is read).
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memset

cimport vcfvirtual_codec._kernels.bcf as B

ctypedef fused gt_t:
    int8_t
    int16_t
    int32_t

cdef enum:
    # Where a row's error lies when it is not one value's byte offset (offsets are >= 0):
    # each layout names these its own way (the record, or the column's count or type).
    AT_RECORD = -1
    AT_COUNT = -2
    AT_TYPE = -3


cdef inline int64_t gt_int(B.Bytes buf, int64_t i, int64_t t, uint8_t add) noexcept nogil:
    """A GT value of type ``t``; int8 bytes get ``add`` back (a shifted columns segment)."""
    if t == B.BT_INT8:
        return <int8_t><uint8_t>(buf[i] + add)
    return B.read_int(buf, i, t)


cdef inline void fill_row(gt_t* row, uint8_t* phased, int64_t n_samples, int64_t ploidy,
                          gt_t value, bint phase) noexcept nogil:
    cdef int64_t i
    for i in range(n_samples * ploidy):
        row[i] = value
    if phased != NULL:
        memset(phased, phase, n_samples)


cdef inline (int64_t, int64_t, bint) int8_row(B.Bytes src, int64_t m, gt_t* row, uint8_t add,
                                              int64_t max_allele) noexcept nogil:
    """The common case's loop: ``m`` int8 GT bytes one to one onto ``row``, branch-free
    over uint8 so that the compiler packs 16 bytes per SSE2 instruction. A byte below 0x80
    is allele (b >> 1) - 1 (-1 for 0 and 1, missing): the first loop writes that alone,
    and a max reduction says whether any byte is 0x80 or more. Only then is the row
    written again with the sentinels (0x80 missing: 0x7F - b = -1; 0x81 end-of-vector:
    -2) and scanned for ends and negative values (above 0x81): both are rare, and keeping
    them out of the first loop halves its instructions. Returns (error, 0, any end seen)."""
    cdef uint8_t top = 0, b, high
    cdef int64_t i
    cdef bint negative = False, any_end = False, too_big = False
    for i in range(m):
        b = <uint8_t>(src[i] + add)
        top = b if b > top else top
        row[i] = <gt_t><int8_t><uint8_t>((b >> 1) - 1)
    if top >= 0x80:
        for i in range(m):
            b = <uint8_t>(src[i] + add)
            high = <uint8_t>(0 - (b >> 7))  # 0xFF for b >= 0x80, else 0
            row[i] = <gt_t><int8_t>((<uint8_t>((b >> 1) - 1) & ~high) | (<uint8_t>(0x7F - b) & high))
            negative |= b > 0x81
            any_end |= b == 0x81
    # Alleles of int8 bytes are at most 62: only a bound below that can be passed.
    if max_allele < 62:
        for i in range(m):
            b = <uint8_t>(src[i] + add)
            too_big |= b < 0x80 and (<int64_t>(b >> 1) - 1) > max_allele
    if negative:
        return B.ERR_GT_VALUE, AT_RECORD, any_end
    if too_big:
        return B.ERR_SHAPE, AT_RECORD, any_end
    return B.OK, 0, any_end


cdef inline bint early_end(B.Bytes src, int64_t n_samples, int64_t n, uint8_t add) noexcept nogil:
    """Whether an end-of-vector stands before some call's last slot (a haploid call in a
    diploid record): what follows it is then padding, for the general loop."""
    cdef int64_t s, a
    cdef bint found = False
    for s in range(n_samples):
        for a in range(n - 1):
            found |= <uint8_t>(src[s * n + a] + add) == 0x81
    return found


cdef inline (int64_t, int64_t) general_row(B.Bytes buf, int64_t t, int64_t n, int64_t d,
                                           int64_t n_samples, int64_t ploidy, gt_t* row,
                                           uint8_t* phased, int64_t max_allele,
                                           uint8_t add) noexcept nogil:
    """Any integer type and count: value by value, a call ending at its end-of-vector."""
    cdef int64_t size = B.type_size(t)
    cdef int64_t missing, vector_end, s, a, base, raw, value
    cdef bint ended
    missing, vector_end = B.int_sentinels(t)
    for s in range(n_samples):
        base = d + s * n * size
        ended = False
        for a in range(ploidy):
            if a >= n or ended:
                row[s * ploidy + a] = -2
                continue
            raw = gt_int(buf, base + a * size, t, add)
            if raw == vector_end:
                # The call ends here: htslib ignores whatever follows in the vector.
                row[s * ploidy + a] = -2
                ended = True
            elif raw == missing:
                row[s * ploidy + a] = -1
            elif raw < 0:
                return B.ERR_GT_VALUE, base + a * size
            else:
                value = (raw >> 1) - 1
                if value > max_allele:
                    return B.ERR_SHAPE, base + a * size
                row[s * ploidy + a] = <gt_t>value
        if phased != NULL:
            phased[s] = n < 2 or (gt_int(buf, base + size, t, add) & 1) == 1
    return B.OK, 0


cdef inline void phase_bits(B.Bytes src, int64_t n_samples, int64_t n, uint8_t* phased) noexcept nogil:
    """Each call's phase of ``n`` int8 values per sample: its second value's low bit (the
    shift is even, so a shifted byte's low bit is the value's)."""
    cdef int64_t s
    if n < 2:
        memset(phased, 1, n_samples)
        return
    if n == 2:  # diploid: a constant stride, which the compiler vectorises
        for s in range(n_samples):
            phased[s] = src[2 * s + 1] & 1
        return
    for s in range(n_samples):
        phased[s] = src[s * n + 1] & 1


cdef inline (int64_t, int64_t) gt_row(B.Bytes buf, int64_t buf_len, int64_t t, int64_t n, int64_t d,
                                      int64_t n_samples, int64_t ploidy, gt_t* row, uint8_t* phased,
                                      int64_t max_allele, uint8_t add) noexcept nogil:
    """One record's GT (type ``t``, ``n`` values per sample at ``buf[d:]``, d < 0: absent)
    into ``row`` (n_samples x ploidy alleles) and ``phased`` (n_samples; NULL: alleles only).

    A call is phased when its second allele carries the phase bit, as htslib prints it. A
    haploid call is phased: in a record of higher ploidy its second slot is end-of-vector,
    whose low bit is set (so bio2zarr reads it phased too); in a record of ploidy 1 htslib
    (pysam) calls it phased and bio2zarr forces it for all-haploid data. A record without
    GT is all missing, and unphased unless the dataset is all haploid (bio2zarr marks
    those phased). An allele index above ``max_allele`` (what the output dtype holds) is
    an error, never a wrapped value. Every value of the row is written.

    Returns (error, offset): a value's byte offset, or AT_RECORD / AT_COUNT / AT_TYPE."""
    cdef int64_t err, at
    cdef bint any_end
    if d < 0:
        fill_row(row, phased, n_samples, ploidy, <gt_t>-1, ploidy == 1)
        return B.OK, 0
    if n > ploidy:
        return B.ERR_SHAPE, AT_COUNT
    if n == 0:
        # GT present with no values (typed NULL, count 0, which htslib accepts): every
        # call is empty, as pysam reads it (()), and so unphased.
        fill_row(row, phased, n_samples, ploidy, <gt_t>-2, False)
        return B.OK, 0
    if t < B.BT_INT8 or t > B.BT_INT32:
        return B.ERR_BAD_TYPE, AT_TYPE
    if d + n_samples * n * B.type_size(t) > buf_len:
        return B.ERR_OVERRUN, AT_RECORD
    if t == B.BT_INT8 and n == ploidy:
        # The common case (allele indices < 63, every call the same ploidy): most of a
        # genotype chunk's decode time.
        err, at, any_end = int8_row(buf + d, n_samples * n, row, add, max_allele)
        if not (any_end and early_end(buf + d, n_samples, n, add)):
            if err == B.OK and phased != NULL:
                phase_bits(buf + d, n_samples, n, phased)
            return err, at
    return general_row(buf, t, n, d, n_samples, ploidy, row, phased, max_allele, add)
