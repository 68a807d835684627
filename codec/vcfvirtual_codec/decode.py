"""Compiled kernels that turn the records of one chunk into VCF Zarr values.

Each kernel takes the chunk's bytes and the offsets of its records and fills
preallocated output arrays of the *full* chunk shape; rows past the last record keep
the fill the caller put there. Kernels return ``(error_code, byte_position)`` so that
Python can raise a typed error naming where the bytes stop making sense; the codes and
their texts are :mod:`vcfvirtual_codec.bcf.records`' (``ERR_*``, ``ERROR_TEXT``).

The field kernels are the records-layout entry points of the one decoder
(``_kernels/fields.pyx``): the same value code as the columns layout
(:mod:`vcfvirtual_codec.columns`), fed by locating each record's field.
"""

from __future__ import annotations

import numba
import numpy as np

from ._kernels.fields import (
    SPAN_FILL,
    SPAN_MISSING,
    allele_spans,
    field_numeric,
    field_string_spans,
    filters,
    first_invalid_utf8,
    fixed_bytes4,
    fixed_int32,
    id_spans,
    info_flag,
    lengths,
    vlen_utf8,
)
from .bcf import records as R

__all__ = [
    "SPAN_FILL",
    "SPAN_MISSING",
    "allele_spans",
    "field_numeric",
    "field_string_spans",
    "filters",
    "first_invalid_utf8",
    "fixed_bytes4",
    "fixed_int32",
    "genotypes",
    "id_spans",
    "info_flag",
    "lengths",
    "vlen_utf8",
]

_njit = numba.njit(nogil=True, cache=True)


@_njit
def genotypes(buf, offsets, gt_key, out_gt, out_phased, max_allele):  # noqa: C901 - one loop per record (kernel)
    """Decode FORMAT/GT into alleles (-1 missing, -2 fill) and per-call phasing.

    A call is phased when its second allele carries the phase bit, as htslib prints
    it. A haploid call is phased: in a record of higher ploidy its second slot is
    end-of-vector, whose low bit is set (so bio2zarr reads it phased too); in a record
    of ploidy 1 htslib (pysam) calls it phased and bio2zarr forces it for all-haploid
    data. A record without GT is all missing, and unphased unless the dataset is
    all haploid (bio2zarr marks those phased). An allele index above ``max_allele``
    (what ``out_gt``'s dtype holds) is an error, never a wrapped value. Every value of
    the first ``len(offsets)`` rows is written, so the caller need not pre-fill them.
    """
    n_samples = out_gt.shape[1]
    ploidy = out_gt.shape[2]
    flat_gt = out_gt.reshape(out_gt.shape[0], n_samples * ploidy)
    # An out_phased with no rows means the caller wants alleles only.
    with_phase = out_phased.shape[0] > 0
    for k in range(offsets.shape[0]):
        pos = offsets[k]
        t, n, d, err = R.find_format(buf, pos, gt_key)
        if err != R.OK:
            return err, pos
        if d >= 0 and R.n_sample(buf, pos) != n_samples:
            return R.ERR_SAMPLES, pos
        if d < 0:
            out_gt[k, :, :] = -1
            # bio2zarr marks every call of an all-haploid dataset phased, even absent ones.
            if with_phase:
                out_phased[k, :] = ploidy == 1
            continue
        if n > ploidy:
            return R.ERR_SHAPE, pos
        if n == 0:
            # GT present with no values (typed NULL, count 0, which htslib accepts):
            # every call is empty, as pysam reads it (()), and so unphased.
            out_gt[k, :, :] = -2
            if with_phase:
                out_phased[k, :] = False
            continue
        if t < R.BT_INT8 or t > R.BT_INT32:
            return R.ERR_BAD_TYPE, pos
        if t == R.BT_INT8 and n == ploidy:
            # The common case (allele indices < 63, every call the same ploidy): the
            # record's GT bytes map one to one onto its row, branch-free so LLVM can
            # vectorise; this loop is most of a genotype chunk's decode time.
            if d + n_samples * n > buf.shape[0]:
                return R.ERR_OVERRUN, pos
            row = flat_gt[k]
            too_big = False
            negative = False
            any_end = False
            for i in range(n_samples * n):
                b = buf[d + i]
                value = (np.int64(np.int8(b)) >> 1) - 1
                # 0x80 missing, 0x81 end-of-vector; any other byte >= 0x80 is negative.
                negative |= b > 0x81
                any_end |= b == 0x81
                value = np.int64(-1) if b == 0x80 else (np.int64(-2) if b == 0x81 else value)
                too_big |= value > max_allele
                row[i] = value
            # An end-of-vector before a call's last slot (a haploid call in a diploid
            # record): what follows it is padding, which the general loop below handles.
            # Checked apart, and only when an end was seen, to keep the loop above free
            # of per-byte division so it vectorises.
            early_end = False
            if any_end:
                for s in range(n_samples):
                    for a in range(n - 1):
                        early_end |= buf[d + s * n + a] == 0x81
            if not early_end:
                if negative:
                    return R.ERR_GT_VALUE, pos
                if too_big:
                    return R.ERR_SHAPE, pos
                if with_phase:
                    for s in range(n_samples):
                        out_phased[k, s] = n < 2 or (buf[d + s * n + 1] & 1) == 1
                continue
        size = R.type_size(t)
        missing, vector_end = R.int_sentinels(t)
        for s in range(n_samples):
            base = d + s * n * size
            ended = False
            for a in range(ploidy):
                if a >= n or ended:
                    out_gt[k, s, a] = -2
                    continue
                raw = R.read_int(buf, base + a * size, t)
                if raw == vector_end:
                    # The call ends here: htslib ignores whatever follows in the vector.
                    out_gt[k, s, a] = -2
                    ended = True
                elif raw == missing:
                    out_gt[k, s, a] = -1
                elif raw < 0:
                    return R.ERR_GT_VALUE, base + a * size
                else:
                    value = (raw >> 1) - 1
                    if value > max_allele:
                        return R.ERR_SHAPE, base + a * size
                    out_gt[k, s, a] = value
            if not with_phase:
                continue
            if n >= 2:
                out_phased[k, s] = (R.read_int(buf, base + size, t) & 1) == 1
            else:
                out_phased[k, s] = True
    return R.OK, np.int64(0)
