"""The record kernel: one compiled walk over staged BCF records, checking each as htslib
would and summarising what the arrays' shapes and dtypes need.
"""

from __future__ import annotations

import numba
import numpy as np
from vcfvirtual_codec.bcf import records

from ..bcf.header import BCFHeader

# What the header declares a dictionary key to be, per category (INFO, FORMAT), so the
# scan refuses records that htslib's bcf_record_check would call invalid ("Invalid INFO
# id") and values the codec would refuse at read time: undeclared keys, and values typed
# otherwise than the header's Type. One code per header Type; 0 means not declared.
KIND_NONE, KIND_INTEGER, KIND_FLOAT, KIND_FLAG, KIND_CHAR = 0, 1, 2, 3, 4
_KIND_OF_TYPE = {
    "Integer": KIND_INTEGER,
    "Float": KIND_FLOAT,
    "Flag": KIND_FLAG,
    "String": KIND_CHAR,
    "Character": KIND_CHAR,
}


def declared_kinds(header: BCFHeader, n_keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the header declares each dictionary key to be, for :func:`scan_records`.

    Parameters
    ----------
    header : BCFHeader
        The BCF's header.
    n_keys : int
        Size of the tables: one more than the largest key declared.

    Returns
    -------
    tuple of numpy.ndarray
        INFO kind and FORMAT kind (int8, ``KIND_*``; ``KIND_NONE`` where not declared)
        and FILTER declared (bool), each indexed by dictionary key.
    """
    info = np.zeros(n_keys, np.int8)
    fmt = np.zeros(n_keys, np.int8)
    filters = np.zeros(n_keys, np.bool_)
    for f in header.info:
        info[f.key] = _KIND_OF_TYPE.get(f.type, KIND_CHAR)
    for f in header.formats:
        fmt[f.key] = _KIND_OF_TYPE.get(f.type, KIND_CHAR)
    if header.gt_key >= 0:
        fmt[header.gt_key] = KIND_INTEGER  # GT is declared String but encoded as integers
    filters[list(header.filter_keys)] = True
    return info, fmt, filters


@numba.njit(nogil=True, cache=True)
def _type_fits(kind, t, n):
    """Whether values of BCF type ``t`` (``n`` per vector) may stand for header ``kind``,
    by the same rule the codec decodes with. Flags are not typed (writers differ)."""
    if n == 0 or kind == KIND_FLAG:
        return True
    if kind == KIND_INTEGER:
        return t >= records.BT_INT8 and t <= records.BT_INT32
    if kind == KIND_FLOAT:
        return t == records.BT_FLOAT
    return t == records.BT_CHAR


@numba.njit(nogil=True, cache=True)
def _field_stats(buf, pos, n_samples, gt_key, info_stats, fmt_stats, info_kind, fmt_kind):
    """Fold the record's INFO and FORMAT values into the per-key statistics.

    Returns (error code, dictionary key it concerns or -1). GT is skipped: its ploidy is
    read separately and its values never size a dtype, and on genotype data it is most
    of the bytes."""
    i, n_info, end = records.info_start(buf, pos)
    if i < 0:
        return records.ERR_OVERRUN, -1
    n_keys_info = info_stats.shape[0]
    for _ in range(n_info):
        key, j = records.read_key(buf, i, end)
        if j < 0:
            return records.ERR_OVERRUN, -1
        t, n, d = records.typed_descriptor(buf, j, end)
        if d < 0 or d + n * records.type_size(t) > end:
            return records.ERR_OVERRUN, key
        if t == records.BT_NULL and n > 0:  # htslib: "Invalid INFO type 0"
            return records.ERR_NULL_VALUES, key
        if key < 0 or key >= n_keys_info or info_kind[key] == KIND_NONE:
            return records.ERR_UNKNOWN_KEY, key
        if not _type_fits(info_kind[key], t, n):
            return records.ERR_TYPE_MISMATCH, key
        # The arguments' types are those of the FORMAT call below (no literal 1 or True,
        # omitted default): numba then compiles update_stats once, not once per call site.
        records.update_stats(buf, t, n, d, np.int64(1), info_stats, key, np.bool_(True))
        i = d + n * records.type_size(t)
    n_fmt = np.int64(buf[pos + records.OFF_N_FMT_SAMPLE + 3])
    j, end = records.format_start(buf, pos)
    n_keys_fmt = fmt_stats.shape[0]
    for _ in range(n_fmt):
        key, k = records.read_key(buf, j, end)
        if k < 0:
            return records.ERR_OVERRUN, -1
        t, n, d = records.typed_descriptor(buf, k, end)
        if d < 0 or d + n_samples * n * records.type_size(t) > end:
            return records.ERR_OVERRUN, key
        if t == records.BT_NULL and n > 0:  # htslib: "Invalid FORMAT type 0"
            return records.ERR_NULL_VALUES, key
        if key < 0 or key >= n_keys_fmt or fmt_kind[key] == KIND_NONE:
            return records.ERR_UNKNOWN_KEY, key
        if not _type_fits(fmt_kind[key], t, n):
            return records.ERR_TYPE_MISMATCH, key
        if key != gt_key:
            records.update_stats(buf, t, n, d, n_samples, fmt_stats, key, np.bool_(False))
        j = d + n_samples * n * records.type_size(t)
    return records.OK, -1


@numba.njit(nogil=True, cache=True)
def _check_filters(buf, pos, filter_declared):
    """(error code, key): every FILTER key of the record must be a declared FILTER."""
    i, end = records.filter_start(buf, pos)
    if i < 0:
        return records.ERR_OVERRUN, -1
    t, n, d = records.typed_descriptor(buf, i, end)
    size = records.type_size(t)
    if d < 0 or d + n * size > end:
        return records.ERR_OVERRUN, -1
    if n > 0 and (t < records.BT_INT8 or t > records.BT_INT32):
        return records.ERR_TYPE_MISMATCH, -1
    for j in range(n):
        key = records.read_int(buf, d + j * size, t)
        if key < 0 or key >= filter_declared.shape[0] or not filter_declared[key]:
            return records.ERR_UNKNOWN_FILTER, key
    return records.OK, -1


@numba.njit(nogil=True, cache=True)
def _alleles_are_strings(buf, pos):
    """Whether every allele is a typed character vector, as htslib requires (a NULL-typed
    allele would otherwise read as an empty string)."""
    end = pos + 8 + np.int64(records.u32(buf, pos))
    n_allele = np.int64(records.u32(buf, pos + records.OFF_N_ALLELE_INFO) >> np.uint32(16))
    i = records.skip_typed(buf, pos + records.OFF_ID, end)
    for _ in range(n_allele):
        if i < 0 or i >= end:
            return False
        t, n, d = records.typed_descriptor(buf, i, end)
        if d < 0 or t != records.BT_CHAR:
            return False
        i = records.skip_typed(buf, i, end)
    return True


@numba.njit(nogil=True, cache=True)
def _id_is_string(buf, pos):
    """Whether the ID is a typed character vector: htslib refuses any other type, even
    a NULL of count 0 ("Invalid ID type 0"), where a reader could take it for "."."""
    end = pos + 8 + np.int64(records.u32(buf, pos))
    t, n, d = records.typed_descriptor(buf, pos + records.OFF_ID, end)
    return d >= 0 and t == records.BT_CHAR


@numba.njit(nogil=True, cache=True)
def _record_rlen(buf, pos, end_key, rlen_needs_more):
    """(rlen as htslib reads it, error code). A stored rlen of 2^31 or more is negative
    as int32; htslib's bcf_record_check replaces it (see records.htslib_rlen)."""
    rlen = np.int64(records.i32(buf, pos + records.OFF_RLEN))
    if rlen >= 0:
        return rlen, records.OK
    if rlen_needs_more:
        return rlen, records.ERR_RLEN
    rlen = records.htslib_rlen(buf, pos, end_key)
    if rlen < 0:
        return rlen, records.ERR_OVERRUN
    if rlen > 2147483647:
        return rlen, records.ERR_RLEN
    return rlen, records.OK


@numba.njit(nogil=True, cache=True)
def scan_records(  # noqa: C901 - one loop per record (kernel)
    buf,
    n_samples,
    n_contigs,
    gt_key,
    base,
    out_offset,
    out_chrom,
    out_pos,
    out_rlen,
    out_n_allele,
    out_ploidy,
    info_stats,
    fmt_stats,
    info_kind,
    fmt_kind,
    filter_declared,
    end_key=-1,
    rlen_needs_more=False,
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
        Per-record facts written here (int64 offsets, int32 others); their common
        length is the capacity.
    info_stats, fmt_stats : numpy.ndarray
        (n_keys, 3) int64 per-key (max values per vector, min, max), folded into.
    info_kind, fmt_kind, filter_declared : numpy.ndarray
        From :func:`declared_kinds`.
    end_key : int
        INFO/END's dictionary key (-1: none), for htslib's rlen replacement.
    rlen_needs_more : bool
        The header declares SVLEN or FORMAT/LEN: an rlen of 2^31 or more is refused.

    Returns
    -------
    tuple of int
        (records written, bytes consumed, error code (``records.OK`` or an ``ERR_*``),
        error position in ``buf``, dictionary key the error concerns or -1).
    """
    cap = out_offset.shape[0]
    end = np.int64(buf.shape[0])
    pos = np.int64(0)
    k = 0
    while k < cap and pos < end:
        total = records.record_length(buf, pos, end)
        if total == -records.ERR_TRAILING:
            break  # the rest of this record arrives with the next batch
        if total < 0:
            return k, pos, -total, pos, -1
        n_sample = np.int64(records.u32(buf, pos + records.OFF_N_FMT_SAMPLE) & np.uint32(0xFFFFFF))
        n_fmt = buf[pos + records.OFF_N_FMT_SAMPLE + 3]
        if n_fmt > 0 and n_sample != n_samples:
            return k, pos, records.ERR_SAMPLES, pos, -1
        chrom = records.i32(buf, pos + records.OFF_CHROM)
        if chrom < 0 or chrom >= n_contigs:  # htslib refuses it too (bcf_record_check)
            return k, pos, records.ERR_UNKNOWN_CONTIG, pos, -1
        if records.i32(buf, pos + records.OFF_POS) < -1:
            return k, pos, records.ERR_NEGATIVE_POS, pos, -1
        if not _id_is_string(buf, pos):
            return k, pos, records.ERR_ID_TYPE, pos, -1
        if records.u32(buf, pos + records.OFF_N_ALLELE_INFO) >> np.uint32(16) == 0:  # "No REF allele"
            return k, pos, records.ERR_NO_REF, pos, -1
        if not _alleles_are_strings(buf, pos):  # htslib: "Invalid REF/ALT type"
            return k, pos, records.ERR_BAD_TYPE, pos, -1
        err, key = _check_filters(buf, pos, filter_declared)
        if err != records.OK:
            return k, pos, err, pos, key
        err, key = _field_stats(buf, pos, n_samples, gt_key, info_stats, fmt_stats, info_kind, fmt_kind)
        if err != records.OK:
            return k, pos, err, pos, key
        rlen, err = _record_rlen(buf, pos, end_key, rlen_needs_more)
        if err != records.OK:
            return k, pos, err, pos, -1
        out_offset[k] = base + pos
        out_chrom[k] = chrom
        out_pos[k] = records.i32(buf, pos + records.OFF_POS)
        out_rlen[k] = rlen
        out_n_allele[k] = np.int32(records.u32(buf, pos + records.OFF_N_ALLELE_INFO) >> np.uint32(16))
        ploidy = 0
        if gt_key >= 0 and n_fmt > 0:
            t, n, d, err = records.find_format(buf, pos, gt_key)
            if err != records.OK:
                return k, pos, err, pos, -1
            if d >= 0:
                ploidy = n
        out_ploidy[k] = ploidy
        k += 1
        pos += total
    return k, pos, records.OK, pos, -1


@numba.njit(nogil=True, cache=True)
def count_records(buf, n_samples):
    """Hop over the whole records in ``buf``, checking only their lengths and sample
    count: a partition's first phase, which counts them (the task that writes their
    chunks checks every record as :func:`scan_records` does). A partition cut where no
    record starts still fails here: the partition before it then ends inside a record.

    Returns
    -------
    tuple of int
        (records, bytes consumed, error code, error position in ``buf``).
    """
    end = np.int64(buf.shape[0])
    pos = np.int64(0)
    k = 0
    while pos < end:
        total = records.record_length(buf, pos, end)
        if total == -records.ERR_TRAILING:
            break  # the rest of this record arrives with the next batch
        if total < 0:
            return k, pos, -total, pos
        n_sample = np.int64(records.u32(buf, pos + records.OFF_N_FMT_SAMPLE) & np.uint32(0xFFFFFF))
        if buf[pos + records.OFF_N_FMT_SAMPLE + 3] > 0 and n_sample != n_samples:
            return k, pos, records.ERR_SAMPLES, pos
        k += 1
        pos += total
    return k, pos, records.OK, pos


def stats_keys(header: BCFHeader) -> int:
    """Rows of a header's value statistics: one per dictionary key its fields and
    FILTERs use (the largest key, plus one)."""
    return max([f.key for f in (*header.info, *header.formats)] + list(header.filter_keys) + [0]) + 1


def new_stats(n_keys: int) -> np.ndarray:
    """Per-key value statistics before any value is seen.

    Parameters
    ----------
    n_keys : int
        Rows: one per dictionary key.

    Returns
    -------
    numpy.ndarray
        (n_keys, 3) int64: max values per vector 0, min int64 max, max int64 min (so any
        value folded in replaces them).
    """
    stats = np.zeros((n_keys, 3), dtype=np.int64)
    stats[:, 1] = np.iinfo(np.int64).max
    stats[:, 2] = np.iinfo(np.int64).min
    return stats
