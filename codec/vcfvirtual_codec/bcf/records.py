"""Compiled primitives over uncompressed BCF 2.2 record bytes.

Layout of one record (BCF spec, section 6.3): ``l_shared`` and ``l_indiv`` (uint32),
then the shared part (CHROM, POS, rlen, QUAL, n_allele_info, n_fmt_sample, ID, alleles,
FILTER, INFO) and the per-sample part (FORMAT fields, each a key, a type descriptor and
``n_sample`` vectors). Everything is little-endian. Values are "typed": a descriptor
byte whose low nibble is the type and high nibble the count, 15 meaning the real count
follows as a typed integer.

These functions run inside numba kernels (``nogil``) so that record walking never
costs a Python call per record, and decoding threads scale.
"""

from __future__ import annotations

import numba
import numpy as np

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

# Error codes returned by every kernel (the scan's and the codec's), translated into
# exceptions with the offset in Python: one table, so that no two meanings share a
# number. The values are kept as first assigned (messages may have recorded them).
OK = 0
ERR_SHORT_SHARED = 1  # l_shared smaller than the fixed part
ERR_OVERRUN = 2  # a typed value runs past its record
ERR_BAD_TYPE = 3  # unknown typed-value type code
ERR_SAMPLES = 4  # record sample count differs from the header
ERR_TRAILING = 5  # bytes left that do not form a whole record
ERR_COUNT = 6  # record count differs from what the codec was configured for
ERR_SHAPE = 7  # a record holds more values than the array's dimension (index and cache disagree)
ERR_UNKNOWN_KEY = 8  # an INFO/FORMAT key that the header does not define
ERR_UNKNOWN_FILTER = 9  # a FILTER key that the header does not define
ERR_TYPE_MISMATCH = 10  # values typed otherwise than the header's Type (e.g. floats in an Integer)
ERR_GT_VALUE = 11  # a GT value that encodes no allele: negative, yet neither missing nor end-of-vector
ERR_UNKNOWN_CONTIG = 12  # a CHROM index the header does not define
ERR_NEGATIVE_POS = 13  # POS below -1 (VCF POS 0 is -1); htslib reads it as a huge uint32
# Records htslib's bcf_record_check refuses (pysam raises), or whose value htslib derives
# in a way we do not reproduce. Fresh numbers, after every other list's.
ERR_ID_TYPE = 20  # ID not a character vector ("Invalid ID type", even a NULL of count 0)
ERR_NULL_VALUES = 21  # INFO/FORMAT value typed NULL with a count > 0 ("Invalid INFO type 0")
ERR_NO_REF = 22  # n_allele 0 ("No REF allele")
ERR_RLEN = 23  # rlen >= 2^31 where htslib's replacement needs SVLEN/LEN, or exceeds int32
ERR_SEGMENT = 30  # a columns-layout segment whose length disagrees with its counts and types

ERROR_TEXT = {
    ERR_SHORT_SHARED: "record's l_shared is smaller than the 24-byte fixed part",
    ERR_OVERRUN: "a typed value runs past the end of its record",
    ERR_BAD_TYPE: "unknown BCF typed-value type code",
    ERR_SAMPLES: "record's sample count differs from the header's",
    ERR_TRAILING: "data ends inside a record (truncated)",
    ERR_COUNT: "number of records differs from the index",
    ERR_SHAPE: "record holds more values than the array's dimension",
    ERR_UNKNOWN_KEY: "record uses an INFO/FORMAT key the header does not define",
    ERR_UNKNOWN_FILTER: "record uses a FILTER key the header does not define",
    ERR_TYPE_MISMATCH: "record holds values of another type than the header declares",
    ERR_GT_VALUE: "a GT value encodes no allele (negative, not missing or end-of-vector)",
    ERR_UNKNOWN_CONTIG: "record's CHROM is not a contig the header defines",
    ERR_NEGATIVE_POS: "record's POS is negative",
    ERR_ID_TYPE: "record's ID is not a character string (htslib: Invalid ID type)",
    ERR_NULL_VALUES: "an INFO/FORMAT value is typed NULL with a count above 0 (htslib: Invalid type 0)",
    ERR_NO_REF: "record has no REF allele (n_allele is 0)",
    ERR_SEGMENT: "segment's length disagrees with its value counts and types",
    ERR_RLEN: (
        "record's rlen is 2^31 or more; htslib replaces it from REF, END, SVLEN and FORMAT/LEN, "
        "and vcfvirtual only from REF and END (the header defines SVLEN or LEN), or the result "
        "exceeds int32"
    ),
}

# BCF's float sentinels (BCF spec, section 6.3.3) as int32 bit patterns: missing, and
# end-of-vector, which VCF Zarr also takes as its float fill.
FLOAT_MISSING_BITS = np.int32(0x7F800001)
FLOAT_END_BITS = np.int32(0x7F800002)

_njit = numba.njit(nogil=True, cache=True)


@_njit
def u32(buf, i):
    return (
        np.uint32(buf[i])
        | (np.uint32(buf[i + 1]) << np.uint32(8))
        | (np.uint32(buf[i + 2]) << np.uint32(16))
        | (np.uint32(buf[i + 3]) << np.uint32(24))
    )


@_njit
def i32(buf, i):
    return np.int32(u32(buf, i))


@_njit
def type_size(t):
    if t == BT_INT8 or t == BT_CHAR:
        return 1
    if t == BT_INT16:
        return 2
    if t == BT_INT32 or t == BT_FLOAT:
        return 4
    if t == BT_NULL:
        return 0
    return -1


@_njit
def read_int(buf, i, t):
    """Signed integer of BCF type ``t`` at ``buf[i]``."""
    if t == BT_INT8:
        return np.int64(np.int8(buf[i]))
    if t == BT_INT16:
        return np.int64(np.int16(np.uint16(buf[i]) | (np.uint16(buf[i + 1]) << np.uint16(8))))
    return np.int64(i32(buf, i))


@_njit
def typed_descriptor(buf, i, end):
    """Parse a typed-value descriptor at ``i``: returns (type, count, data_start).

    data_start is -1 when the descriptor itself is malformed or runs past ``end``.
    """
    if i >= end:
        return 0, 0, np.int64(-1)
    d = buf[i]
    t = np.int64(d & 0x0F)
    n = np.int64(d >> 4)
    i += 1
    if type_size(t) < 0:
        return t, n, np.int64(-1)
    if n == 15:
        if i >= end:
            return t, n, np.int64(-1)
        t2 = np.int64(buf[i] & 0x0F)
        s2 = type_size(t2)
        if t2 < BT_INT8 or t2 > BT_INT32 or i + 1 + s2 > end:
            return t, n, np.int64(-1)
        n = read_int(buf, i + 1, t2)
        i += 1 + s2
        if n < 0:
            return t, n, np.int64(-1)
    return t, n, np.int64(i)


@_njit
def record_length(buf, pos, end):
    """Total bytes of the record at ``pos`` (8 + l_shared + l_indiv), or a negative error."""
    if pos + 8 > end:
        return np.int64(-ERR_TRAILING)
    l_shared = np.int64(u32(buf, pos))
    l_indiv = np.int64(u32(buf, pos + 4))
    if l_shared < MIN_L_SHARED:
        return np.int64(-ERR_SHORT_SHARED)
    total = 8 + l_shared + l_indiv
    if pos + total > end:
        return np.int64(-ERR_TRAILING)
    return total


@numba.njit(nogil=True, cache=True)
def record_offsets(buf, limit):
    """Offsets of the whole records that must exactly fill ``buf``, at most ``limit``.

    Returns (offsets, count, error_code, error_position); ERR_COUNT when ``buf`` holds
    more than ``limit`` records.
    """
    offsets = np.empty(limit, dtype=np.int64)
    pos = np.int64(0)
    end = np.int64(buf.shape[0])
    k = 0
    while pos < end:
        if k >= limit:
            return offsets, k, ERR_COUNT, pos
        total = record_length(buf, pos, end)
        if total < 0:
            return offsets, k, -total, pos
        offsets[k] = pos
        k += 1
        pos += total
    return offsets[:k], k, OK, pos


@_njit
def skip_typed(buf, i, end):
    """Index just past the typed value at ``i``, or -1 when it overruns ``end``."""
    t, n, j = typed_descriptor(buf, i, end)
    if j < 0:
        return np.int64(-1)
    j += n * type_size(t)
    if j > end:
        return np.int64(-1)
    return j


@_njit
def format_start(buf, pos):
    """Start and end of the per-sample (FORMAT) part of the record at ``pos``."""
    l_shared = np.int64(u32(buf, pos))
    l_indiv = np.int64(u32(buf, pos + 4))
    start = pos + 8 + l_shared
    return start, start + l_indiv


@_njit
def find_format(buf, pos, key):
    """Locate FORMAT field ``key`` in the record at ``pos``.

    Returns (type, count per sample, data_start, error): data_start -1 when absent.
    """
    n_fmt = np.int64(buf[pos + OFF_N_FMT_SAMPLE + 3])
    n_sample = np.int64(u32(buf, pos + OFF_N_FMT_SAMPLE) & np.uint32(0xFFFFFF))
    j, end = format_start(buf, pos)
    for _ in range(n_fmt):
        k, kj = read_key(buf, j, end)
        if kj < 0:
            return 0, 0, np.int64(-1), ERR_OVERRUN
        t, n, d = typed_descriptor(buf, kj, end)
        if d < 0:
            return 0, 0, np.int64(-1), ERR_BAD_TYPE
        if t == BT_NULL and n > 0:  # htslib refuses the record; its bytes would be skipped as 0
            return 0, 0, np.int64(-1), ERR_NULL_VALUES
        size = type_size(t)
        nxt = d + n_sample * n * size
        if nxt > end:
            return 0, 0, np.int64(-1), ERR_OVERRUN
        if k == key:
            return t, n, d, OK
        j = nxt
    return 0, 0, np.int64(-1), OK


@_njit
def filter_start(buf, pos):
    """(index of the FILTER vector, end of shared part), index -1 on overrun.

    Reached by skipping the ID and the n_allele allele strings before it."""
    end = pos + 8 + np.int64(u32(buf, pos))
    n_allele = np.int64(u32(buf, pos + OFF_N_ALLELE_INFO) >> np.uint32(16))
    i = skip_typed(buf, pos + OFF_ID, end)
    for _ in range(n_allele):
        if i < 0:
            break
        i = skip_typed(buf, i, end)
    return i, end


@_njit
def info_start(buf, pos):
    """(index of the first INFO key, n_info, end of shared part), or index -1 on overrun."""
    n_info = np.int64(u32(buf, pos + OFF_N_ALLELE_INFO) & np.uint32(0xFFFF))
    i, end = filter_start(buf, pos)
    if i < 0:
        return np.int64(-1), n_info, end
    return skip_typed(buf, i, end), n_info, end


@_njit
def read_key(buf, i, end):
    """(key, next index) of a typed single-integer key, next -1 when malformed."""
    t, n, d = typed_descriptor(buf, i, end)
    if d < 0 or n != 1 or t < BT_INT8 or t > BT_INT32 or d + type_size(t) > end:
        return np.int64(-1), np.int64(-1)
    return read_int(buf, d, t), d + type_size(t)


@_njit
def find_info(buf, pos, key):
    """Locate INFO field ``key``: (type, count, data_start, error); data_start -1 if absent."""
    i, n_info, end = info_start(buf, pos)
    if i < 0:
        return 0, 0, np.int64(-1), ERR_OVERRUN
    for _ in range(n_info):
        k, j = read_key(buf, i, end)
        if j < 0:
            return 0, 0, np.int64(-1), ERR_OVERRUN
        t, n, d = typed_descriptor(buf, j, end)
        if d < 0 or d + n * type_size(t) > end:
            return 0, 0, np.int64(-1), ERR_OVERRUN
        if t == BT_NULL and n > 0:  # htslib refuses the record (see find_format)
            return 0, 0, np.int64(-1), ERR_NULL_VALUES
        if k == key:
            return t, n, d, OK
        i = d + n * type_size(t)
    return 0, 0, np.int64(-1), OK


@_njit
def n_sample(buf, pos):
    """The record's own sample count (24 bits of n_fmt_sample). FORMAT vectors are laid
    out by it, so reading another number of samples (an array's) would read past a field."""
    return np.int64(u32(buf, pos + OFF_N_FMT_SAMPLE) & np.uint32(0xFFFFFF))


@_njit
def int_sentinels(t):
    """(missing, vector_end) of BCF integer type ``t``."""
    if t == BT_INT8:
        return np.int64(-128), np.int64(-127)
    if t == BT_INT16:
        return np.int64(-32768), np.int64(-32767)
    return np.int64(-2147483648), np.int64(-2147483647)


@_njit
def count_parts(buf, d, n):
    """Comma-separated parts of the string in ``buf[d:d+n]`` (up to its first NUL)."""
    parts = 1
    for b in range(n):
        c = buf[d + b]
        if c == 0:
            break
        if c == 44:  # ","
            parts += 1
    return parts


@_njit
def update_stats(buf, t, n, d, n_vectors, stats, key, scalar_end_is_value=False):
    """Fold one field's values into ``stats[key] = (max_number, min, max)``.

    max_number counts values per vector, or comma-separated parts for strings, as
    bio2zarr does; min and max skip the missing and end-of-vector sentinels, except
    where ``scalar_end_is_value`` (a lone INFO value, see :func:`scalar_info_end_is_value`).
    """
    size = type_size(t)
    if t == BT_CHAR:
        for s in range(n_vectors):
            parts = count_parts(buf, d + s * n, n)
            if parts > stats[key, 0]:
                stats[key, 0] = parts
        return
    if n > stats[key, 0]:
        stats[key, 0] = n
    if t >= BT_INT8 and t <= BT_INT32:
        missing, vector_end = int_sentinels(t)
        for j in range(n_vectors * n):
            v = read_int(buf, d + j * size, t)
            if v == missing or (v == vector_end and not (scalar_end_is_value and scalar_info_end_is_value(t, n))):
                continue
            if v < stats[key, 1]:
                stats[key, 1] = v
            if v > stats[key, 2]:
                stats[key, 2] = v


@_njit
def scalar_info_end_is_value(t, n):
    """Whether a lone INFO integer equal to its type's end-of-vector sentinel is a value.

    htslib keeps a single INFO value as a plain integer (bcf_info_t.v1), with no
    end-of-vector meaning: pysam and bio2zarr read int8 0x81 as -127 and int16 0x8001
    as -32767. For int32 the value is bcf_int32_vector_end itself, which bio2zarr (the
    reference converter) stores as fill, so that one stays a sentinel."""
    return n == 1 and (t == BT_INT8 or t == BT_INT16)


@_njit
def htslib_rlen(buf, pos, end_key):
    """The rlen htslib uses for a record whose stored rlen is negative (2^31 or more).

    bcf_record_check replaces it (get_rlen): the longest of the REF allele (its typed
    length, padding included), and END - POS where a lone integer END lies past POS,
    else 1. ``end_key`` is INFO/END's dictionary key, or -1. (htslib also consults
    SVLEN for symbolic deletions and FORMAT/LEN for <*> alleles; the scan refuses such
    records instead.) Returns -1 when the record cannot be walked."""
    end = pos + 8 + np.int64(u32(buf, pos))
    pos0 = np.int64(i32(buf, pos + OFF_POS))  # -1 for VCF POS 0; below -1 is refused
    i = skip_typed(buf, pos + OFF_ID, end)
    if i < 0:
        return np.int64(-1)
    len_ref = np.int64(0)
    if np.int64(u32(buf, pos + OFF_N_ALLELE_INFO) >> np.uint32(16)) > 0:
        t, n, d = typed_descriptor(buf, i, end)
        if d < 0:
            return np.int64(-1)
        len_ref = n
    stop = np.int64(0)  # htslib's "end": 0 unless END is a lone, non-missing integer
    if end_key >= 0:
        i, n_info, end = info_start(buf, pos)
        if i < 0:
            return np.int64(-1)
        for _ in range(n_info):
            k, j = read_key(buf, i, end)
            if j < 0:
                return np.int64(-1)
            t, n, d = typed_descriptor(buf, j, end)
            if d < 0 or d + n * type_size(t) > end:
                return np.int64(-1)
            if k == end_key:  # htslib takes the first END
                if n == 1 and t >= BT_INT8 and t <= BT_INT32:
                    v = read_int(buf, d, t)
                    missing, _ = int_sentinels(t)
                    if v != missing:
                        stop = v
                break
            i = d + n * type_size(t)
    span = stop - pos0 if stop > pos0 else np.int64(1)
    return span if span > len_ref else len_ref
