"""Compiled kernels that turn the records of one chunk into VCF Zarr values.

Each kernel takes the chunk's bytes and the offsets of its records and fills
preallocated output arrays of the *full* chunk shape; rows past the last record keep
the fill the caller put there. Kernels return ``(error_code, byte_position)`` so that
Python can raise a typed error naming where the bytes stop making sense; the codes and
their texts are :mod:`vcfvirtual_codec.bcf.records`' (``ERR_*``, ``ERROR_TEXT``).

The field kernels are the records-layout entry points of the one decoder
(``_kernels/fields.pyx``): the same value code as the columns layout
(:mod:`vcfvirtual_codec.columns`), fed by locating each record's field. So is
``genotypes`` (``_kernels/genotypes.pyx``), whose row decoder (``_kernels/gt.pxd``) the
columns layout's GT blocks go through too.
"""

from __future__ import annotations

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
from ._kernels.genotypes import records_genotypes as genotypes

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
