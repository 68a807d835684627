"""Compiled primitives over uncompressed BCF 2.2 record bytes.

Layout of one record (BCF spec, section 6.3): ``l_shared`` and ``l_indiv`` (uint32),
then the shared part (CHROM, POS, rlen, QUAL, n_allele_info, n_fmt_sample, ID, alleles,
FILTER, INFO) and the per-sample part (FORMAT fields, each a key, a type descriptor and
``n_sample`` vectors). Everything is little-endian. Values are "typed": a descriptor
byte whose low nibble is the type and high nibble the count, 15 meaning the real count
follows as a typed integer.

The primitives themselves are compiled: ``vcfvirtual_codec/_kernels/bcf.pxd`` holds them
as inline C that every kernel (the codec's decoders, the indexer's scan and demux) walks
records with, without a Python call per record and without the GIL. This module keeps the
Python side's tables (type codes, offsets, error codes and their texts), which a test holds
equal to the compiled ones, and re-exports the primitives' Python wrappers (for tests), loading
them on first use: the codec's checks import the tables alone, and a reader of the columns
layout never walks records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # re-exported on first use (__getattr__ below)
    from .._kernels.records import (  # noqa: F401 - the primitives, compiled, for tests
        count_parts,
        filter_start,
        find_format,
        find_info,
        format_start,
        htslib_rlen,
        i32,
        info_start,
        int_sentinels,
        n_sample,
        read_int,
        read_key,
        record_length,
        record_offsets,
        scalar_info_end_is_value,
        skip_typed,
        type_size,
        typed_descriptor,
        u32,
        update_stats,
    )

# Typed-value type codes.
BT_NULL = 0
BT_INT8 = 1
BT_INT16 = 2
BT_INT32 = 3
BT_FLOAT = 5
BT_CHAR = 7

# Offsets inside a record, counted from the start of l_shared.
OFF_CHROM = 8
OFF_POS = 12
OFF_RLEN = 16
OFF_QUAL = 20
OFF_N_ALLELE_INFO = 24
OFF_N_FMT_SAMPLE = 28
OFF_ID = 32
MIN_L_SHARED = 24

# Error codes returned by every kernel (the scan's and the codec's), translated into
# exceptions with the offset in Python: one table, so that no two meanings share a
# number. The values are kept as first assigned (messages may have recorded them).
OK = 0
ERR_SHORT_SHARED = 1  # l_shared smaller than the fixed part
ERR_OVERRUN = 2  # a typed value runs past its record
ERR_BAD_TYPE = 3  # unknown typed-value type code
ERR_SAMPLES = 4  # record sample count differs from the header
ERR_TRAILING = 5  # bytes left that do not form a whole record
ERR_COUNT = 6  # record count differs from what the codec was configured for
ERR_SHAPE = 7  # a record holds more values than the array's dimension (index and cache disagree)
ERR_UNKNOWN_KEY = 8  # an INFO/FORMAT key that the header does not define
ERR_UNKNOWN_FILTER = 9  # a FILTER key that the header does not define
ERR_TYPE_MISMATCH = 10  # values typed otherwise than the header's Type (e.g. floats in an Integer)
ERR_GT_VALUE = 11  # a GT value that encodes no allele: negative, yet neither missing nor end-of-vector
ERR_UNKNOWN_CONTIG = 12  # a CHROM index the header does not define
ERR_NEGATIVE_POS = 13  # POS below -1 (VCF POS 0 is -1); htslib reads it as a huge uint32
# Records htslib's bcf_record_check refuses (pysam raises), or whose value htslib derives
# in a way we do not reproduce. Fresh numbers, after every other list's.
ERR_ID_TYPE = 20  # ID not a character vector ("Invalid ID type", even a NULL of count 0)
ERR_NULL_VALUES = 21  # INFO/FORMAT value typed NULL with a count > 0 ("Invalid INFO type 0")
ERR_NO_REF = 22  # n_allele 0 ("No REF allele")
ERR_RLEN = 23  # rlen >= 2^31 where htslib's replacement needs SVLEN/LEN, or exceeds int32
ERR_SEGMENT = 30  # a columns-layout segment whose length disagrees with its counts and types

ERROR_TEXT = {
    ERR_SHORT_SHARED: "record's l_shared is smaller than the 24-byte fixed part",
    ERR_OVERRUN: "a typed value runs past the end of its record",
    ERR_BAD_TYPE: "unknown BCF typed-value type code",
    ERR_SAMPLES: "record's sample count differs from the header's",
    ERR_TRAILING: "data ends inside a record (truncated)",
    ERR_COUNT: "number of records differs from the index",
    ERR_SHAPE: "record holds more values than the array's dimension",
    ERR_UNKNOWN_KEY: "record uses an INFO/FORMAT key the header does not define",
    ERR_UNKNOWN_FILTER: "record uses a FILTER key the header does not define",
    ERR_TYPE_MISMATCH: "record holds values of another type than the header declares",
    ERR_GT_VALUE: "a GT value encodes no allele (negative, not missing or end-of-vector)",
    ERR_UNKNOWN_CONTIG: "record's CHROM is not a contig the header defines",
    ERR_NEGATIVE_POS: "record's POS is negative",
    ERR_ID_TYPE: "record's ID is not a character string (htslib: Invalid ID type)",
    ERR_NULL_VALUES: "an INFO/FORMAT value is typed NULL with a count above 0 (htslib: Invalid type 0)",
    ERR_NO_REF: "record has no REF allele (n_allele is 0)",
    ERR_SEGMENT: "segment's length disagrees with its value counts and types",
    ERR_RLEN: (
        "record's rlen is 2^31 or more; htslib replaces it from REF, END, SVLEN and FORMAT/LEN, "
        "and vcfvirtual only from REF and END (the header defines SVLEN or LEN), or the result "
        "exceeds int32"
    ),
}

# BCF's float sentinels (BCF spec, section 6.3.3) as int32 bit patterns: missing, and
# end-of-vector, which VCF Zarr also takes as its float fill.
FLOAT_MISSING_BITS = np.int32(0x7F800001)
FLOAT_END_BITS = np.int32(0x7F800002)


# The wrappers re-exported above, loaded by the first attribute access that names one.
_PRIMITIVES = frozenset(
    {
        "count_parts", "filter_start", "find_format", "find_info", "format_start", "htslib_rlen", "i32",
        "info_start", "int_sentinels", "n_sample", "read_int", "read_key", "record_length", "record_offsets",
        "scalar_info_end_is_value", "skip_typed", "type_size", "typed_descriptor", "u32", "update_stats",
    }
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _PRIMITIVES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .._kernels import records as compiled

    value = getattr(compiled, name)
    globals()[name] = value  # found directly from now on
    return value
