"""The read-only primitives this prototype uses, where they live before and after the
restructure of issue 11 (``vcfvirtual_codec.bcf.*``, ``vcfvirtual.bcf.header``), so the
prototype runs on either tree."""

from __future__ import annotations

try:  # after the restructure
    from vcfvirtual.bcf import header
    from vcfvirtual_codec.bcf import bgzf, records
except ImportError:  # before it
    from vcfvirtual_codec import bgzf, records  # type: ignore[no-redef]

    from vcfvirtual import header  # type: ignore[no-redef]

from vcfvirtual_codec import decode as codec_decode

# Error codes and float sentinels moved from vcfvirtual_codec.decode to the records module.
ERR_SHAPE = getattr(records, "ERR_SHAPE", getattr(codec_decode, "ERR_SHAPE", None))
ERR_GT_VALUE = getattr(records, "ERR_GT_VALUE", getattr(codec_decode, "ERR_GT_VALUE", None))
FLOAT_MISSING_BITS = getattr(records, "FLOAT_MISSING_BITS", getattr(codec_decode, "FLOAT_MISSING_BITS", None))
FLOAT_END_BITS = getattr(records, "FLOAT_END_BITS", getattr(codec_decode, "FLOAT_END_BITS", None))
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
