# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Genotype kernels: call_genotype and call_genotype_phased from either layout through the
one row decoder (``gt.pxd``), and the local-allele arrays derived from decoded chunks.

Each genotype entry point returns ``(error code, byte offset)`` as the other kernels do;
the codes and their texts are :mod:`vcfvirtual_codec.bcf.records`'.
"""

import numpy as np

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint64_t

cimport vcfvirtual_codec._kernels.bcf as B
from vcfvirtual_codec._kernels.gt cimport AT_COUNT, AT_RECORD, AT_TYPE, gt_row, gt_t
from vcfvirtual_codec._kernels.layout cimport column_field, column_starts, locate

# GT_SHIFT of vcfvirtual_codec.columns: a shifted segment's int8 GT bytes were stored minus it.
cdef enum:
    GT_SHIFT = 2

# What a shifted segment's int8 GT bytes get back, for Python (tests check it is
# vcfvirtual_codec.columns.GT_SHIFT, what the writer subtracts).
SHIFT_ADDED = GT_SHIFT


cdef inline B.Bytes _ptr(const uint8_t[::1] buf) noexcept:
    return &buf[0] if buf.shape[0] else NULL


cdef uint8_t[:, ::1] _phase_rows(out_phased, Py_ssize_t rows, Py_ssize_t n_samples) except *:
    """The phased output as bytes (numpy bools are one byte, 0 or 1); no rows: alleles
    only. Its shape is checked here, as the kernels write without bounds checks."""
    cdef uint8_t[:, ::1] view = np.asarray(out_phased).view(np.uint8)
    if view.shape[0] and (view.shape[0] < rows or view.shape[1] != n_samples):
        raise ValueError(f"out_phased of shape {tuple(out_phased.shape)} for {rows} rows of {n_samples} samples")
    return view


def records_genotypes(const uint8_t[::1] buf, const int64_t[::1] offsets, int64_t gt_key,
                      gt_t[:, :, ::1] out_gt, out_phased, int64_t max_allele):
    """FORMAT/GT of the records at ``offsets`` into ``out_gt`` (rows, samples, ploidy) and
    ``out_phased`` (rows, samples; zero rows: alleles only); see gt.pxd's gt_row."""
    cdef int64_t n_samples = out_gt.shape[1], ploidy = out_gt.shape[2]
    cdef int64_t rows = offsets.shape[0], buf_len = buf.shape[0]
    cdef uint8_t[:, ::1] phased = _phase_rows(out_phased, rows, n_samples)
    cdef bint with_phase = phased.shape[0] > 0
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t k, pos, t, n, d, err = B.OK, at = 0
    if out_gt.shape[0] < rows:
        return B.ERR_SHAPE, 0
    with nogil:
        for k in range(rows):
            pos = offsets[k]
            t, n, d, err = locate(p, pos, gt_key, True, n_samples)
            if err != B.OK:
                at = pos
                break
            err, at = gt_row(p, buf_len, t, n, d, n_samples, ploidy, &out_gt[k, 0, 0],
                             &phased[k, 0] if with_phase else NULL, max_allele, 0)
            if err != B.OK:
                if at < 0:  # the record's count, type or values as a whole
                    at = pos
                break
    return err, at


def columns_genotypes(const uint8_t[::1] seg, int64_t n, gt_t[:, :, ::1] out_gt, out_phased,
                      int64_t max_allele, bint shifted=False):
    """A GT block segment of ``n`` records (a typed column; see vcfvirtual_codec.columns)
    into ``out_gt`` and ``out_phased`` as :func:`records_genotypes`. ``shifted``: the
    segment's int8 GT bytes were stored minus GT_SHIFT (demux ``gt_slot``)."""
    cdef int64_t n_samples = out_gt.shape[1], ploidy = out_gt.shape[2]
    cdef uint8_t[:, ::1] phased
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t k, t, c, err = B.OK, at = 0
    cdef uint8_t add = GT_SHIFT if shifted else 0
    if n < 0 or out_gt.shape[0] < n:
        return B.ERR_SHAPE, 0
    phased = _phase_rows(out_phased, n, n_samples)
    cdef bint with_phase = phased.shape[0] > 0
    starts_array = np.empty(n + 1, np.int64)
    cdef int64_t[::1] starts = starts_array
    with nogil:
        err, at = column_starts(p, seg.shape[0], n, n_samples, &starts[0])
        if err == B.OK:
            for k in range(n):
                t, c = column_field(p, n, k)
                err, at = gt_row(p, seg.shape[0], t, c, starts[k] if c >= 0 else -1, n_samples, ploidy,
                                 &out_gt[k, 0, 0], &phased[k, 0] if with_phase else NULL, max_allele, add)
                if err == B.OK:
                    continue
                if at == AT_COUNT:
                    at = 4 * k
                elif at == AT_TYPE:
                    err, at = B.ERR_TYPE_MISMATCH, 4 * n + k
                elif at == AT_RECORD:
                    at = starts[k]
                break
    return err, at


# -- local alleles (bio2zarr's call_LA, call_LAD, call_LPL) ---------------------------

ctypedef fused allele_t:
    int8_t
    int16_t
    int32_t
    int64_t

ctypedef fused value_t:
    int8_t
    int16_t
    int32_t
    int64_t


cdef uint64_t _FIRST_NEGATIVE = <uint64_t>1 << 63


def _check_rows(what, values, la):
    if values.shape[0] != la.shape[0] or values.shape[1] != la.shape[1]:
        raise ValueError(f"{what} of shape {tuple(values.shape)} for local alleles of shape {tuple(la.shape)}")


def local_alleles(const allele_t[:, :, ::1] gt, int8_t[:, :, ::1] out):
    """call_LA of diploid calls ``gt`` (rows, samples, 2; -1 missing, -2 fill): each call's
    distinct alleles, smaller first; -2 for a repeated allele, a missing one or none."""
    cdef Py_ssize_t i, calls = gt.shape[0] * gt.shape[1]
    cdef const allele_t* g
    cdef int8_t* o
    cdef uint64_t x, y, lo, hi
    if gt.shape[2] != 2 or out.shape[2] != 2:
        raise ValueError("local alleles are of diploid calls (2 alleles per call)")
    _check_rows("gt", gt, out)
    if calls == 0:
        return
    g = &gt[0, 0, 0]
    o = &out[0, 0, 0]
    with nogil:
        for i in range(calls):
            # As unsigned, a negative allele (missing, fill) is larger than any allele: the
            # smaller of the two is the first local allele unless both are negative, the
            # larger the second unless negative or the same. Branch-free: calls are random.
            x = <uint64_t><int64_t>g[2 * i]
            y = <uint64_t><int64_t>g[2 * i + 1]
            lo = x if x < y else y
            hi = x ^ y ^ lo
            o[2 * i] = <int8_t>lo if lo < _FIRST_NEGATIVE else -2
            o[2 * i + 1] = <int8_t>hi if hi < _FIRST_NEGATIVE and hi != lo else -2


cdef inline int64_t _at(const value_t[:, :, ::1] values, Py_ssize_t k, Py_ssize_t s, int64_t j) noexcept nogil:
    """values[k, s, j], or the fill (-2) past the field's width (bio2zarr's IndexError)."""
    return values[k, s, j] if j < values.shape[2] else -2


cdef inline int64_t _pl_index(int64_t a, int64_t b) noexcept nogil:
    """PL's index of genotype a/b (a <= b): the VCF's order, b(b+1)/2 + a."""
    return b * (b + 1) // 2 + a


def local_ad(const value_t[:, :, ::1] ad, const int8_t[:, :, ::1] la, value_t[:, :, ::1] out):
    """call_LAD: AD (rows, samples, alleles) at each call's local alleles, -2 elsewhere."""
    cdef Py_ssize_t k, s, j
    cdef int64_t a
    if la.shape[2] != 2 or out.shape[2] < 2:
        raise ValueError("call_LAD holds 2 local alleles per call")
    _check_rows("AD", ad, la)
    _check_rows("call_LAD", out, la)
    with nogil:
        for k in range(la.shape[0]):
            for s in range(la.shape[1]):
                for j in range(2):
                    a = la[k, s, j]
                    out[k, s, j] = <value_t>_at(ad, k, s, a) if a >= 0 else -2


def local_pl(const value_t[:, :, ::1] pl, const int8_t[:, :, ::1] la, value_t[:, :, ::1] out):
    """call_LPL: PL (rows, samples, genotypes) at the genotypes of each call's local alleles
    a <= b (aa, ab, bb; aa alone for one allele), -2 elsewhere."""
    cdef Py_ssize_t k, s
    cdef int64_t a, b
    if la.shape[2] != 2 or out.shape[2] < 3:
        raise ValueError("call_LPL holds 3 local genotypes per call")
    _check_rows("PL", pl, la)
    _check_rows("call_LPL", out, la)
    with nogil:
        for k in range(la.shape[0]):
            for s in range(la.shape[1]):
                a = la[k, s, 0]
                b = la[k, s, 1]
                out[k, s, 0] = <value_t>_at(pl, k, s, _pl_index(a, a)) if a >= 0 else -2
                out[k, s, 1] = <value_t>_at(pl, k, s, _pl_index(a, b)) if b >= 0 else -2
                out[k, s, 2] = <value_t>_at(pl, k, s, _pl_index(b, b)) if b >= 0 else -2
