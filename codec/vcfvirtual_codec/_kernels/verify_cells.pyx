# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""vcfvirtual verify's expected values: htslib's raw FORMAT values of a block of records
(every sample's, as ``bcf_get_format_values`` gives them) decoded the way pysam decodes
one call, for the whole block at once (vcfvirtual.verify holds the rest).

Inputs are whole numpy arrays whose shapes the loops take their bounds from; every
output is checked to have the shape the loops write.
"""

import numpy as np

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t

cdef enum:
    INT_MISSING = -1  # VCF Zarr's missing integer, and pysam's None as an allele
    INT_FILL = -2  # VCF Zarr's fill beyond a vector's values
    FLOAT_MISSING_BITS = 0x7F800001
    FLOAT_FILL_BITS = 0x7F800002
    FLOAT_VECTOR_END_BITS = 0x7F800002  # htslib's float end-of-vector (bcf_float_vector_end)

cdef int32_t INT32_MISSING = -2147483647 - 1
cdef int32_t INT32_VECTOR_END = -2147483647

ctypedef fused allele_t:
    int8_t
    int16_t
    int32_t
    int64_t


cdef _bools(a, tuple shape, str name):
    """A bool array of ``shape`` as bytes (typed memoryviews do not take numpy's bool)."""
    a = np.asarray(a)
    if a.shape != shape or a.dtype != np.bool_ or not a.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous bool array of shape {shape}, got {a.dtype} {a.shape}")
    return a.reshape(-1).view(np.uint8)


def decode_genotypes(const int32_t[:, :, ::1] raw, const int64_t[::1] n_alleles, present,
                      allele_t[:, :, ::1] gt, phased, overflow, int64_t max_allele):
    """Each call as pysam reads it: values up to the first vector end; a raw missing
    value, or an allele index outside [0, n_alleles), is -1 (pysam's None); -2 beyond the
    call's values. Phased when the call has a value and every value after the first (raw
    missing values aside) carries the phase bit, so a haploid call is phased. A record
    without GT reads as all missing and unphased (VCF Zarr 0.3: "false if unphased (or
    not present)"); a call longer than the store's ploidy, or an allele the store's dtype
    cannot hold, is an overflow.

    ``raw`` (records, samples, width) int32; ``n_alleles`` and ``present`` per record;
    ``gt`` (records, samples, ploidy) of a signed integer dtype; ``phased`` and
    ``overflow`` (records, samples) bool, written."""
    cdef int64_t n = raw.shape[0], s = raw.shape[1], w = raw.shape[2], ploidy = gt.shape[2]
    if gt.shape[0] != n or gt.shape[1] != s or n_alleles.shape[0] != n:
        raise ValueError("decode_genotypes: gt and n_alleles must match raw's records and samples")
    cdef const uint8_t[::1] has = _bools(present, (n,), "present")
    cdef uint8_t[::1] ph = _bools(phased, (n, s), "phased")
    cdef uint8_t[::1] over = _bools(overflow, (n, s), "overflow")
    cdef int64_t i, j, k, length, a
    cdef int32_t v
    cdef bint counted, unphased, big
    with nogil:
        for i in range(n):
            for j in range(s):
                if not has[i]:
                    for k in range(ploidy):
                        gt[i, j, k] = INT_MISSING
                    continue
                length = 0
                counted = False
                unphased = False
                big = False
                for k in range(w):
                    v = raw[i, j, k]
                    if v == INT32_VECTOR_END:
                        break
                    length += 1
                    if v != INT32_MISSING:
                        counted = True
                        if k > 0 and (v & 1) == 0:
                            unphased = True
                    if k < ploidy:
                        a = -1 if v == INT32_MISSING else (v >> 1) - 1
                        if a < 0 or a >= n_alleles[i]:
                            a = INT_MISSING
                        if a > max_allele:
                            big = True
                            a = INT_MISSING
                        gt[i, j, k] = <allele_t>a
                for k in range(length, ploidy):
                    gt[i, j, k] = INT_FILL
                if length > ploidy or big:
                    over[i * s + j] = True
                    for k in range(ploidy):
                        gt[i, j, k] = INT_MISSING
                ph[i * s + j] = counted and not unphased


def decode_cells(const int32_t[:, :, ::1] raw, int64_t[:, :, ::1] values, present, const int64_t[::1] count,
                  bint scalar, bint fill_beyond, bint is_float, int64_t[:, ::1] n_items, overflow):
    """One numeric FORMAT field of every call of a block, as pysam reads one call's value:
    values up to the first vector end (a raw missing one missing); a call with no value
    is one missing value when the field is scalar, ``count`` missing values when it has
    a count, none otherwise. ``values`` (records, samples, width; width 1 for a scalar
    array) gets the values, and beyond a call's values the fill (``fill_beyond``) or
    missing; ``n_items`` each call's value count; a call with more values than the width
    is an overflow. Float values are handled as their bits (int32, kept sign-extended
    in ``values``)."""
    cdef int64_t n = raw.shape[0], s = raw.shape[1], c = raw.shape[2], width = values.shape[2]
    if (values.shape[0] != n or values.shape[1] != s or n_items.shape[0] != n or n_items.shape[1] != s
            or count.shape[0] != n):
        raise ValueError("decode_cells: values, n_items and count must match raw's records and samples")
    cdef const uint8_t[::1] has = _bools(present, (n,), "present")
    cdef uint8_t[::1] over = _bools(overflow, (n, s), "overflow")
    cdef int32_t end = <int32_t>FLOAT_VECTOR_END_BITS if is_float else INT32_VECTOR_END
    cdef int64_t missing = FLOAT_MISSING_BITS if is_float else INT_MISSING
    cdef int64_t fill = FLOAT_FILL_BITS if is_float else INT_FILL
    cdef int64_t i, j, k, length, items
    cdef int32_t v
    cdef uint32_t bits
    with nogil:
        for i in range(n):
            if not has[i]:
                continue
            for j in range(s):
                length = 0
                while length < c and raw[i, j, length] != end:
                    length += 1
                items = length
                if length == 0:
                    items = 1 if scalar else max(count[i], 0)
                n_items[i, j] = items
                if items > width:
                    over[i * s + j] = True
                    continue
                for k in range(width):
                    if k < length:
                        v = raw[i, j, k]
                        if is_float:
                            # Any NaN (htslib's missing or another) reads as missing.
                            bits = <uint32_t>v
                            if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0:
                                values[i, j, k] = FLOAT_MISSING_BITS
                            else:
                                values[i, j, k] = v
                        else:
                            values[i, j, k] = INT_MISSING if v == INT32_MISSING else v
                    elif k < items or not fill_beyond:
                        values[i, j, k] = missing
                    else:
                        values[i, j, k] = fill
