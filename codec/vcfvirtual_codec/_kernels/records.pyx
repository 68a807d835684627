# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Record framing, and the BCF primitives of ``bcf.pxd`` callable from Python.

The kernels inline the primitives; these wrappers exist so that tests can check each
primitive on hand-written bytes (the BCF spec's layouts), and so that the Python side
can read the constants the compiled code was built with.
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t

cimport vcfvirtual_codec._kernels.bcf as B


cdef inline B.Bytes _ptr(const uint8_t[::1] buf) noexcept:
    return &buf[0] if buf.shape[0] else NULL


def constants():
    """The constants this module was compiled with, by name (checked against the
    Python tables of vcfvirtual_codec.bcf.records)."""
    return {
        "BT_NULL": B.BT_NULL, "BT_INT8": B.BT_INT8, "BT_INT16": B.BT_INT16, "BT_INT32": B.BT_INT32,
        "BT_FLOAT": B.BT_FLOAT, "BT_CHAR": B.BT_CHAR,
        "OFF_CHROM": B.OFF_CHROM, "OFF_POS": B.OFF_POS, "OFF_RLEN": B.OFF_RLEN, "OFF_QUAL": B.OFF_QUAL,
        "OFF_N_ALLELE_INFO": B.OFF_N_ALLELE_INFO, "OFF_N_FMT_SAMPLE": B.OFF_N_FMT_SAMPLE,
        "OFF_ID": B.OFF_ID, "MIN_L_SHARED": B.MIN_L_SHARED,
        "OK": B.OK, "ERR_SHORT_SHARED": B.ERR_SHORT_SHARED, "ERR_OVERRUN": B.ERR_OVERRUN,
        "ERR_BAD_TYPE": B.ERR_BAD_TYPE, "ERR_SAMPLES": B.ERR_SAMPLES, "ERR_TRAILING": B.ERR_TRAILING,
        "ERR_COUNT": B.ERR_COUNT, "ERR_SHAPE": B.ERR_SHAPE, "ERR_UNKNOWN_KEY": B.ERR_UNKNOWN_KEY,
        "ERR_UNKNOWN_FILTER": B.ERR_UNKNOWN_FILTER, "ERR_TYPE_MISMATCH": B.ERR_TYPE_MISMATCH,
        "ERR_GT_VALUE": B.ERR_GT_VALUE, "ERR_UNKNOWN_CONTIG": B.ERR_UNKNOWN_CONTIG,
        "ERR_NEGATIVE_POS": B.ERR_NEGATIVE_POS, "ERR_ID_TYPE": B.ERR_ID_TYPE,
        "ERR_NULL_VALUES": B.ERR_NULL_VALUES, "ERR_NO_REF": B.ERR_NO_REF, "ERR_RLEN": B.ERR_RLEN,
        "ERR_SEGMENT": B.ERR_SEGMENT,
        "FLOAT_MISSING_BITS": B.FLOAT_MISSING_BITS, "FLOAT_END_BITS": B.FLOAT_END_BITS,
    }


def record_offsets(const uint8_t[::1] buf, int64_t limit):
    """Offsets of the whole records that must exactly fill ``buf``, at most ``limit``.

    Returns (offsets, count, error_code, error_position); ERR_COUNT when ``buf`` holds
    more than ``limit`` records."""
    offsets_array = np.empty(max(limit, 0), dtype=np.int64)
    cdef int64_t[::1] offsets = offsets_array
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t pos = 0, end = buf.shape[0], k = 0, total
    with nogil:
        while pos < end:
            if k >= limit:
                break
            total = B.record_length(p, pos, end)
            if total < 0:
                break
            offsets[k] = pos
            k += 1
            pos += total
    if pos < end:
        if k >= limit:
            return offsets_array, k, B.ERR_COUNT, pos
        return offsets_array, k, -B.record_length(p, pos, end), pos
    return offsets_array[:k], k, B.OK, pos


# -- the primitives, one wrapper each (for tests) ------------------------------------


def u32(const uint8_t[::1] buf, int64_t i):
    return B.u32(_ptr(buf), i)


def i32(const uint8_t[::1] buf, int64_t i):
    return B.i32(_ptr(buf), i)


def type_size(int64_t t):
    return B.type_size(t)


def read_int(const uint8_t[::1] buf, int64_t i, int64_t t):
    return B.read_int(_ptr(buf), i, t)


def typed_descriptor(const uint8_t[::1] buf, int64_t i, int64_t end):
    return B.typed_descriptor(_ptr(buf), i, end)


def record_length(const uint8_t[::1] buf, int64_t pos, int64_t end):
    return B.record_length(_ptr(buf), pos, end)


def skip_typed(const uint8_t[::1] buf, int64_t i, int64_t end):
    return B.skip_typed(_ptr(buf), i, end)


def format_start(const uint8_t[::1] buf, int64_t pos):
    return B.format_start(_ptr(buf), pos)


def find_format(const uint8_t[::1] buf, int64_t pos, int64_t key):
    return B.find_format(_ptr(buf), pos, key)


def filter_start(const uint8_t[::1] buf, int64_t pos):
    return B.filter_start(_ptr(buf), pos)


def info_start(const uint8_t[::1] buf, int64_t pos):
    return B.info_start(_ptr(buf), pos)


def read_key(const uint8_t[::1] buf, int64_t i, int64_t end):
    return B.read_key(_ptr(buf), i, end)


def find_info(const uint8_t[::1] buf, int64_t pos, int64_t key):
    return B.find_info(_ptr(buf), pos, key)


def n_sample(const uint8_t[::1] buf, int64_t pos):
    return B.n_sample(_ptr(buf), pos)


def int_sentinels(int64_t t):
    return B.int_sentinels(t)


def count_parts(const uint8_t[::1] buf, int64_t d, int64_t n):
    return B.count_parts(_ptr(buf), d, n)


def update_stats(const uint8_t[::1] buf, int64_t t, int64_t n, int64_t d, int64_t n_vectors,
                 int64_t[:, ::1] stats, int64_t key, bint scalar_end_is_value=False):
    if not 0 <= key < stats.shape[0] or stats.shape[1] != 3:
        raise IndexError(f"stats row {key} of a {stats.shape[0]}x{stats.shape[1]} table")
    B.update_stats(_ptr(buf), t, n, d, n_vectors, &stats[0, 0], key, scalar_end_is_value)


def scalar_info_end_is_value(int64_t t, int64_t n):
    return B.scalar_info_end_is_value(t, n)


def htslib_rlen(const uint8_t[::1] buf, int64_t pos, int64_t end_key):
    return B.htslib_rlen(_ptr(buf), pos, end_key)
