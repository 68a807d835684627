"""The read-only primitives this prototype uses from the package (one import site, so
moving the prototype into the package is one file to change)."""

from __future__ import annotations

from vcfvirtual_codec import decode as codec_decode
from vcfvirtual_codec.bcf import bgzf, records

from vcfvirtual.bcf import header

ERR_SHAPE = records.ERR_SHAPE
ERR_GT_VALUE = records.ERR_GT_VALUE
FLOAT_MISSING_BITS = records.FLOAT_MISSING_BITS
FLOAT_END_BITS = records.FLOAT_END_BITS
SPAN_FILL = codec_decode.SPAN_FILL
SPAN_MISSING = codec_decode.SPAN_MISSING
vlen_utf8 = codec_decode.vlen_utf8
first_invalid_utf8 = codec_decode.first_invalid_utf8

__all__ = [
    "ERR_GT_VALUE",
    "ERR_SHAPE",
    "FLOAT_END_BITS",
    "FLOAT_MISSING_BITS",
    "SPAN_FILL",
    "SPAN_MISSING",
    "bgzf",
    "first_invalid_utf8",
    "header",
    "records",
    "vlen_utf8",
]
