# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The indexer's record kernel: one walk over staged BCF records, checking each as
htslib's ``bcf_record_check`` would and summarising what the arrays' shapes and dtypes
need (vcfvirtual.scan.kernel holds the Python side: the header's declared kinds and
the statistics tables).

Every read is bounded by the primitives of ``bcf.pxd`` or by a record's checked
length: the walk runs without bounds checks, so those checks are what keeps a crafted
record from reading outside the staged bytes.
"""

import numpy as np

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

cimport vcfvirtual_codec._kernels.bcf as B

# What the header declares a dictionary key to be (vcfvirtual.scan.kernel.declared_kinds
# writes the tables with these codes); 0 means not declared.
cdef enum:
    C_KIND_NONE = 0
    C_KIND_INTEGER = 1
    C_KIND_FLOAT = 2
    C_KIND_FLAG = 3
    C_KIND_CHAR = 4

KIND_NONE, KIND_INTEGER, KIND_FLOAT, KIND_FLAG, KIND_CHAR = (
    C_KIND_NONE, C_KIND_INTEGER, C_KIND_FLOAT, C_KIND_FLAG, C_KIND_CHAR
)


cdef inline B.Bytes _ptr(const uint8_t[::1] buf) noexcept:
    return &buf[0] if buf.shape[0] else NULL


cdef inline const uint8_t[::1] _bytes(a):
    """A bool (or uint8) table as bytes: typed memoryviews do not take numpy's bool."""
    return np.ascontiguousarray(a).view(np.uint8)


# The tables the walk consults, gathered so the per-record helpers take one argument.
cdef struct Tables:
    int64_t* info_stats
    int64_t* fmt_stats
    int64_t n_info_keys
    int64_t n_fmt_keys
    const int8_t* info_kind
    const int8_t* fmt_kind
    const uint8_t* filter_declared
    int64_t n_filters


cdef inline bint type_fits(int64_t kind, int64_t t, int64_t n) noexcept nogil:
    """Whether values of BCF type ``t`` (``n`` per vector) may stand for header ``kind``,
    by the same rule the codec decodes with. Flags are not typed (writers differ)."""
    if n == 0 or kind == C_KIND_FLAG:
        return True
    if kind == C_KIND_INTEGER:
        return t >= B.BT_INT8 and t <= B.BT_INT32
    if kind == C_KIND_FLOAT:
        return t == B.BT_FLOAT
    return t == B.BT_CHAR


cdef (int64_t, int64_t) field_stats(B.Bytes buf, int64_t pos, int64_t n_samples, int64_t gt_key,
                                    Tables* tab) noexcept nogil:
    """Fold the record's INFO and FORMAT values into the per-key statistics.

    Returns (error code, dictionary key it concerns or -1). GT is skipped: its ploidy is
    read separately and its values never size a dtype, and on genotype data it is most
    of the bytes."""
    cdef int64_t i, n_info, end, key, j, t, n, d, f, n_fmt, k
    i, n_info, end = B.info_start(buf, pos)
    if i < 0:
        return B.ERR_OVERRUN, -1
    for f in range(n_info):
        key, j = B.read_key(buf, i, end)
        if j < 0:
            return B.ERR_OVERRUN, -1
        t, n, d = B.typed_descriptor(buf, j, end)
        if d < 0 or d + n * B.type_size(t) > end:
            return B.ERR_OVERRUN, key
        if t == B.BT_NULL and n > 0:  # htslib: "Invalid INFO type 0"
            return B.ERR_NULL_VALUES, key
        if key < 0 or key >= tab.n_info_keys or tab.info_kind[key] == C_KIND_NONE:
            return B.ERR_UNKNOWN_KEY, key
        if not type_fits(tab.info_kind[key], t, n):
            return B.ERR_TYPE_MISMATCH, key
        B.update_stats(buf, t, n, d, 1, tab.info_stats, key, True)
        i = d + n * B.type_size(t)
    n_fmt = buf[pos + B.OFF_N_FMT_SAMPLE + 3]
    j, end = B.format_start(buf, pos)
    for f in range(n_fmt):
        key, k = B.read_key(buf, j, end)
        if k < 0:
            return B.ERR_OVERRUN, -1
        t, n, d = B.typed_descriptor(buf, k, end)
        if d < 0 or d + n_samples * n * B.type_size(t) > end:
            return B.ERR_OVERRUN, key
        if t == B.BT_NULL and n > 0:  # htslib: "Invalid FORMAT type 0"
            return B.ERR_NULL_VALUES, key
        if key < 0 or key >= tab.n_fmt_keys or tab.fmt_kind[key] == C_KIND_NONE:
            return B.ERR_UNKNOWN_KEY, key
        if not type_fits(tab.fmt_kind[key], t, n):
            return B.ERR_TYPE_MISMATCH, key
        if key != gt_key:
            B.update_stats(buf, t, n, d, n_samples, tab.fmt_stats, key, False)
        j = d + n_samples * n * B.type_size(t)
    return B.OK, -1


cdef (int64_t, int64_t) check_filters(B.Bytes buf, int64_t pos, Tables* tab) noexcept nogil:
    """(error code, key): every FILTER key of the record must be a declared FILTER."""
    cdef int64_t i, end, t, n, d, size, j, key
    i, end = B.filter_start(buf, pos)
    if i < 0:
        return B.ERR_OVERRUN, -1
    t, n, d = B.typed_descriptor(buf, i, end)
    size = B.type_size(t)
    if d < 0 or d + n * size > end:
        return B.ERR_OVERRUN, -1
    if n > 0 and (t < B.BT_INT8 or t > B.BT_INT32):
        return B.ERR_TYPE_MISMATCH, -1
    for j in range(n):
        key = B.read_int(buf, d + j * size, t)
        if key < 0 or key >= tab.n_filters or not tab.filter_declared[key]:
            return B.ERR_UNKNOWN_FILTER, key
    return B.OK, -1


cdef bint alleles_are_strings(B.Bytes buf, int64_t pos) noexcept nogil:
    """Whether every allele is a typed character vector, as htslib requires (a NULL-typed
    allele would otherwise read as an empty string)."""
    cdef int64_t end = pos + 8 + <int64_t>B.u32(buf, pos)
    cdef int64_t n_allele = B.u32(buf, pos + B.OFF_N_ALLELE_INFO) >> 16
    cdef int64_t i = B.skip_typed(buf, pos + B.OFF_ID, end)
    cdef int64_t a, t, n, d
    for a in range(n_allele):
        if i < 0 or i >= end:
            return False
        t, n, d = B.typed_descriptor(buf, i, end)
        if d < 0 or t != B.BT_CHAR:
            return False
        i = B.skip_typed(buf, i, end)
    return True


cdef inline bint id_is_string(B.Bytes buf, int64_t pos) noexcept nogil:
    """Whether the ID is a typed character vector: htslib refuses any other type, even
    a NULL of count 0 ("Invalid ID type 0"), where a reader could take it for "."."""
    cdef int64_t end = pos + 8 + <int64_t>B.u32(buf, pos)
    cdef int64_t t, n, d
    t, n, d = B.typed_descriptor(buf, pos + B.OFF_ID, end)
    return d >= 0 and t == B.BT_CHAR


cdef (int64_t, int64_t) record_rlen(B.Bytes buf, int64_t pos, int64_t end_key,
                                    bint rlen_needs_more) noexcept nogil:
    """(rlen as htslib reads it, error code). A stored rlen of 2^31 or more is negative
    as int32; htslib's bcf_record_check replaces it (see bcf.pxd's htslib_rlen)."""
    cdef int64_t rlen = B.i32(buf, pos + B.OFF_RLEN)
    if rlen >= 0:
        return rlen, B.OK
    if rlen_needs_more:
        return rlen, B.ERR_RLEN
    rlen = B.htslib_rlen(buf, pos, end_key)
    if rlen < 0:
        return rlen, B.ERR_OVERRUN
    if rlen > 2147483647:
        return rlen, B.ERR_RLEN
    return rlen, B.OK


cdef (int64_t, int64_t) check_record(B.Bytes buf, int64_t pos, int64_t n_samples, int64_t n_contigs,
                                     int64_t gt_key, Tables* tab) noexcept nogil:
    """(error code, key or -1) of the checks htslib's bcf_record_check makes of the
    record at ``pos`` (whose length is checked), its values folded into the statistics."""
    cdef int64_t n_fmt = buf[pos + B.OFF_N_FMT_SAMPLE + 3]
    cdef int64_t chrom, err, key
    if n_fmt > 0 and B.n_sample(buf, pos) != n_samples:
        return B.ERR_SAMPLES, -1
    chrom = B.i32(buf, pos + B.OFF_CHROM)
    if chrom < 0 or chrom >= n_contigs:  # htslib refuses it too (bcf_record_check)
        return B.ERR_UNKNOWN_CONTIG, -1
    if B.i32(buf, pos + B.OFF_POS) < -1:
        return B.ERR_NEGATIVE_POS, -1
    if not id_is_string(buf, pos):
        return B.ERR_ID_TYPE, -1
    if B.u32(buf, pos + B.OFF_N_ALLELE_INFO) >> 16 == 0:  # "No REF allele"
        return B.ERR_NO_REF, -1
    if not alleles_are_strings(buf, pos):  # htslib: "Invalid REF/ALT type"
        return B.ERR_BAD_TYPE, -1
    err, key = check_filters(buf, pos, tab)
    if err != B.OK:
        return err, key
    return field_stats(buf, pos, n_samples, gt_key, tab)


def scan_records(
    const uint8_t[::1] buf,
    int64_t n_samples,
    int64_t n_contigs,
    int64_t gt_key,
    int64_t base,
    int64_t[::1] out_offset,
    int32_t[::1] out_chrom,
    int32_t[::1] out_pos,
    int32_t[::1] out_rlen,
    int32_t[::1] out_n_allele,
    int32_t[::1] out_ploidy,
    int64_t[:, ::1] info_stats,
    int64_t[:, ::1] fmt_stats,
    const int8_t[::1] info_kind,
    const int8_t[::1] fmt_kind,
    filter_declared,
    int64_t end_key=-1,
    bint rlen_needs_more=False,
):
    """Walk whole records in ``buf`` until it or the output capacity runs out,
    checking each as htslib's ``bcf_record_check`` does.

    Parameters
    ----------
    buf : numpy.ndarray
        uint8 inflated bytes starting at a record; a record cut by its end is left.
    n_samples, n_contigs, gt_key : int
        From the header (``gt_key`` -1: no GT).
    base : int
        Stream offset of ``buf[0]``, added to the offsets written.
    out_offset, out_chrom, out_pos, out_rlen, out_n_allele, out_ploidy : numpy.ndarray
        Per-record facts written here (int64 offsets, int32 others); out_offset's
        length is the capacity (the others at least as long).
    info_stats, fmt_stats : numpy.ndarray
        (n_keys, 3) int64 per-key (max values per vector, min, max), folded into.
    info_kind, fmt_kind, filter_declared : numpy.ndarray
        From vcfvirtual.scan.kernel.declared_kinds (int8, int8, bool).
    end_key : int
        INFO/END's dictionary key (-1: none), for htslib's rlen replacement.
    rlen_needs_more : bool
        The header declares SVLEN or FORMAT/LEN: an rlen of 2^31 or more is refused.

    Returns
    -------
    tuple of int
        (records written, bytes consumed, error code (``OK`` or an ``ERR_*``), error
        position in ``buf``, dictionary key the error concerns or -1).
    """
    cdef int64_t cap = out_offset.shape[0]
    cdef int64_t held = min(out_chrom.shape[0], out_pos.shape[0], out_rlen.shape[0], out_n_allele.shape[0],
                            out_ploidy.shape[0])
    if held < cap:
        raise ValueError(f"scan_records: an output holds {held} records, the offsets {cap}")
    if info_stats.shape[1] != 3 or fmt_stats.shape[1] != 3:
        raise ValueError("scan_records: statistics tables are (n_keys, 3)")
    # A key is looked up in its kind table, then its statistics row: both must hold it.
    cdef const uint8_t[::1] declared = _bytes(filter_declared)
    cdef Tables tab
    tab.info_stats = &info_stats[0, 0] if info_stats.shape[0] else NULL
    tab.fmt_stats = &fmt_stats[0, 0] if fmt_stats.shape[0] else NULL
    tab.n_info_keys = min(info_kind.shape[0], info_stats.shape[0])
    tab.n_fmt_keys = min(fmt_kind.shape[0], fmt_stats.shape[0])
    tab.info_kind = &info_kind[0] if info_kind.shape[0] else NULL
    tab.fmt_kind = &fmt_kind[0] if fmt_kind.shape[0] else NULL
    tab.filter_declared = _ptr(declared)
    tab.n_filters = declared.shape[0]
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t end = buf.shape[0], pos = 0, k = 0, total, err = B.OK, key = -1, at = 0
    cdef int64_t rlen, t, n, d, ploidy
    with nogil:
        while k < cap and pos < end:
            total = B.record_length(p, pos, end)
            if total == -B.ERR_TRAILING:
                break  # the rest of this record arrives with the next batch
            if total < 0:
                err = -total
                break
            err, key = check_record(p, pos, n_samples, n_contigs, gt_key, &tab)
            if err != B.OK:
                break
            rlen, err = record_rlen(p, pos, end_key, rlen_needs_more)
            if err != B.OK:
                key = -1
                break
            ploidy = 0
            if gt_key >= 0 and p[pos + B.OFF_N_FMT_SAMPLE + 3] > 0:
                t, n, d, err = B.find_format(p, pos, gt_key)
                if err != B.OK:
                    break
                if d >= 0:
                    ploidy = n
            out_offset[k] = base + pos
            out_chrom[k] = B.i32(p, pos + B.OFF_CHROM)
            out_pos[k] = B.i32(p, pos + B.OFF_POS)
            out_rlen[k] = <int32_t>rlen
            out_n_allele[k] = <int32_t>(B.u32(p, pos + B.OFF_N_ALLELE_INFO) >> 16)
            out_ploidy[k] = <int32_t>ploidy
            k += 1
            pos += total
    return k, pos, err, pos, key


def count_records(const uint8_t[::1] buf, int64_t n_samples):
    """Hop over the whole records in ``buf``, checking only their lengths and sample
    count: a partition's first phase, which counts them (the task that writes their
    chunks checks every record as :func:`scan_records` does). A partition cut where no
    record starts still fails here: the partition before it then ends inside a record.

    Returns
    -------
    tuple of int
        (records, bytes consumed, error code, error position in ``buf``).
    """
    cdef B.Bytes p = _ptr(buf)
    cdef int64_t end = buf.shape[0], pos = 0, k = 0, total, err = B.OK
    with nogil:
        while pos < end:
            total = B.record_length(p, pos, end)
            if total == -B.ERR_TRAILING:
                break  # the rest of this record arrives with the next batch
            if total < 0:
                err = -total
                break
            if p[pos + B.OFF_N_FMT_SAMPLE + 3] > 0 and B.n_sample(p, pos) != n_samples:
                err = B.ERR_SAMPLES
                break
            k += 1
            pos += total
    return k, pos, err, pos
