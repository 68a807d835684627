"""Decode ``demux`` segments into VCF Zarr chunks: the kernels now live in the codec.

They moved to :mod:`vcfvirtual_codec.columns` (issue 12's first integration), which also
checks each segment's preamble and decompresses it; this module keeps the prototype's
names for measure.py and test_columns.py.
"""

from __future__ import annotations

from vcfvirtual_codec.bcf.records import ERR_SEGMENT
from vcfvirtual_codec.columns import (
    allele_spans,
    column_starts,
    filters,
    first_characters,
    flag,
    genotypes,
    id_spans,
    int32_column,
    numeric,
    quality,
    string_spans,
)

__all__ = [
    "ERR_SEGMENT",
    "allele_spans",
    "column_starts",
    "filters",
    "first_characters",
    "flag",
    "genotypes",
    "id_spans",
    "int32_column",
    "numeric",
    "quality",
    "string_spans",
]
