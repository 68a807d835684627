"""The record kernel: one compiled walk over staged BCF records, checking each as htslib
would and summarising what the arrays' shapes and dtypes need.

The walk itself (:func:`scan_records`, :func:`count_records`) is compiled ahead of time
(vcfvirtual_codec/_kernels/scan.pyx); this module gives it the header's declared kinds
and the statistics tables it folds into.
"""

from __future__ import annotations

import numpy as np
from vcfvirtual_codec._kernels.scan import (
    KIND_CHAR,
    KIND_FLAG,
    KIND_FLOAT,
    KIND_INTEGER,
    KIND_NONE,
    count_records,
    scan_records,
)

from ..bcf.header import BCFHeader

__all__ = [
    "KIND_CHAR",
    "KIND_FLAG",
    "KIND_FLOAT",
    "KIND_INTEGER",
    "KIND_NONE",
    "count_records",
    "declared_kinds",
    "new_stats",
    "scan_records",
    "stats_keys",
]

# What the header declares a dictionary key to be, per category (INFO, FORMAT), so the
# scan refuses records that htslib's bcf_record_check would call invalid ("Invalid INFO
# id") and values the codec would refuse at read time: undeclared keys, and values typed
# otherwise than the header's Type. One code per header Type (KIND_*, the compiled
# kernel's); KIND_NONE means not declared.
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
