"""What both decoders (whole records, :mod:`vcfvirtual_codec.decode`; the columns layout,
:mod:`vcfvirtual_codec.columns`) check: the decode bounds, a kernel's error code, values
narrowed into the array's dtype, and strings vlen-utf8 can decode.

A module of its own, below both decoders, so that neither imports the other's helpers.

The decode bounds (docs/design.md, "Decode bounds") are the one setting a reader may
change: :func:`set_decode_budget`, explicitly, for the process. They are not a codec
configuration field on purpose: the configuration is written by whoever wrote the
references, and the bounds exist so that such an author cannot make a reader allocate
more than the chunk's bytes justify.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from ._kernels.fields import SPAN_MISSING, first_invalid_utf8, vlen_utf8
from .bcf import records
from .errors import ChunkDecodeError
from .spec import ChunkSpec

if TYPE_CHECKING:
    from collections.abc import Buffer

# VCF Zarr's float fill is BCF's end-of-vector bit pattern.
FLOAT32_FILL = np.array([records.FLOAT_END_BITS], dtype="<i4").view("<f4")[0]

# What one decode may allocate, so that a configuration claiming a huge shape gets a
# ChunkDecodeError before any allocation, not an 8 GB peak or a MemoryError. A decoded
# chunk is legitimately much larger than its records when fields are absent (every
# value then reads missing), so the bound is generous: any decode up to the budget
# (MIN_DECODE_BUDGET unless raised), else EXPANSION bytes per record byte, or a few
# values per sample that the records themselves claim (each record's 24-bit n_sample).
# Beyond the ceiling (MAX_DECODE_BYTES, or the budget when larger) a decode must also be
# paid for: PAID_EXPANSION bytes per byte of the chunk as stored, which its author had
# to supply (docs/design.md, "Decode bounds"). Absent fields, padding rows and highly
# compressible frames make the other rules pass for a chunk of a few bytes; a shared
# reference file of a few MB must not be able to make a reader allocate gigabytes.
MIN_DECODE_BUDGET = 128 << 20
EXPANSION = 1024
BYTES_PER_CLAIMED_SAMPLE = 64
# 900 MiB: a default columns chunk's widest honest decode from next to nothing (1,000
# variants x 10,000 samples of an absent 21-value int16 PL) is 840 MB.
MAX_DECODE_BYTES = 900 << 20
# Past the ceiling, bytes of decode per byte of the chunk as stored: an honest chunk's
# decode is a few times its records, tens of times its compressed bytes (Blosc'd GT ~250
# at most), and 1.5 MB of inline bytes still stop at 384 MiB.
PAID_EXPANSION = 256
# The most decompressed bytes one compressed byte may stand for beyond the budget
# (inflated BGZF records, a columns segment without a bound from its shape): Blosc's LZ4
# gives at most ~255, a BCF's deflate at most 1032 on degenerate data. A reference file
# under 2 MB (1.5 MB of base64 inline bytes) thus inflates to 768 MiB at most.
LENGTH_EXPANSION = 512
_SPAN_KINDS = ("id", "id_mask", "allele")


class DecodeLimits:
    """The decode bounds in force: ``budget``, what any decode may allocate without its
    bytes backing it; ``ceiling``, past which a decode must be paid for. Read-only."""

    # A plain class, not a frozen dataclass: that execs four generated methods (~0.6 ms)
    # in every process importing the codec, for one read-only number.
    __slots__ = ("_budget",)

    def __init__(self, budget: int = MIN_DECODE_BUDGET) -> None:
        self._budget = budget

    @property
    def budget(self) -> int:
        """What any one decode may allocate without its bytes backing it."""
        return self._budget

    @property
    def ceiling(self) -> int:
        """MAX_DECODE_BYTES, or the budget when that is larger (raising one raises both)."""
        return max(self.budget, MAX_DECODE_BYTES)


# Replaced whole (never mutated) by set_decode_budget, so a decode reading it once sees
# one consistent setting; the default until a reader asks for another.
_limits = DecodeLimits()


def set_decode_budget(nbytes: int | None) -> int:
    """Set what any one decode may allocate without its bytes backing it, for this process.

    The reader's choice for chunks wider than the default bounds allow (128 MiB below the
    900 MiB ceiling; a budget above 900 MiB raises the ceiling with it). Like numcodecs'
    ``blosc.set_nthreads``, it is an explicit process-wide setting: a codec configuration
    cannot raise it, as references are written by someone else.

    Parameters
    ----------
    nbytes : int or None
        The budget in bytes (at least 1), or None for the default (:data:`MIN_DECODE_BUDGET`).

    Returns
    -------
    int
        The budget in force before, so that a caller can put it back.

    Raises
    ------
    ValueError
        ``nbytes`` is not a positive integer.
    """
    global _limits
    if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1):
        raise ValueError(f"a decode budget is a positive number of bytes, got {nbytes!r}")
    before = _limits.budget
    _limits = DecodeLimits(MIN_DECODE_BUDGET if nbytes is None else nbytes)
    return before


def decode_limits() -> DecodeLimits:
    """The decode bounds in force (:func:`set_decode_budget`)."""
    return _limits


def as_bytes(data: Buffer) -> np.ndarray:
    """A chunk's bytes as a flat uint8 array, without a copy."""
    if isinstance(data, np.ndarray):
        return data.view(np.uint8).ravel()
    return np.frombuffer(data, dtype=np.uint8)


def check(err: int, err_pos: int, spec: ChunkSpec, what: str) -> None:
    """Raise a kernel's error code (``records.ERR_*``) as a ChunkDecodeError at ``err_pos``."""
    if err != records.OK:
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: {records.ERROR_TEXT[int(err)]} ({what})",
            offset=int(err_pos),
            hint="offset is within the chunk; the cache may not match the references",
        )


@functools.cache
def _iinfo(dtype: np.dtype) -> np.iinfo:
    """``np.iinfo(dtype)``, made once per dtype (~3 us each time, per chunk)."""
    return np.iinfo(dtype)


def narrowed(values: np.ndarray, dtype: np.dtype, spec: ChunkSpec) -> np.ndarray:
    """int32 or int64 values as the array's (smallest) integer dtype, refusing values that do
    not fit: the index chose the dtype from every value it saw, so a value outside it
    means the cache changed, and a cast would silently wrap it (65541 -> 5 in int16)."""
    if dtype.itemsize < values.dtype.itemsize and values.size:
        info = _iinfo(dtype)
        lo, hi = int(values.min()), int(values.max())
        if lo < info.min or hi > info.max:
            bad = int(np.nonzero((values < info.min) | (values > info.max))[0][0])
            raise ChunkDecodeError(
                None,
                f"cannot decode {spec.array} chunk: record {bad} of the chunk holds "
                f"{hi if hi > info.max else lo}, outside the array's {dtype}",
                hint="the cache may not match the references",
            )
    return values.astype(dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype, copy=False)


def check_utf8(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, spec: ChunkSpec) -> None:
    """Refuse a string that vlen-utf8 could not decode, naming where it starts."""
    bad = first_invalid_utf8(buf, starts.ravel(), lengths.ravel())
    if bad >= 0:
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: a string value is not UTF-8",
            offset=int(starts.ravel()[bad]),
            hint="offset is within the chunk; the BCF or the cache is damaged",
        )


def checked_vlen_utf8(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, spec: ChunkSpec) -> np.ndarray:
    """The strings at ``buf``'s spans as vlen-utf8 bytes (uint8), once :func:`check_utf8` passed."""
    check_utf8(buf, starts, lengths, spec)
    return vlen_utf8(buf, starts.ravel(), lengths.ravel())


def span_missing(lengths: np.ndarray) -> np.ndarray:
    """Where a span is VCF's missing string ("."): what variant_id_mask holds."""
    mask: np.ndarray = lengths == SPAN_MISSING
    return mask


def is_string_spec(spec: ChunkSpec) -> bool:
    """Whether a decode of this array makes string spans (IDs, alleles, String and
    Character fields), whose output size the shape does not bound."""
    return spec.kind in _SPAN_KINDS or (spec.kind in ("info", "format") and spec.vcf_type in ("String", "Character"))


def _bytes_per_value(spec: ChunkSpec) -> int:
    """Bytes a decode allocates per value of the decoded chunk: its output and the working
    arrays behind it (int32 values narrowed after, int64 spans then vlen-utf8 items)."""
    itemsize = np.dtype(spec.dtype).itemsize if spec.dtype != "str" else 0
    if is_string_spec(spec):
        return 24  # int64 start and length, then at least 4 bytes of vlen-utf8 (+ the text)
    if spec.kind == "genotype":
        return 2 * itemsize  # the chunk, and its copy widened to the last samples block
    if spec.kind == "genotype_mask":
        return 6  # int32 alleles, then the mask (and its widened copy)
    if spec.kind == "genotype_phased":
        return 4 * spec.ploidy + 2  # per call: int32 alleles, then the phase bit
    if spec.kind in ("info", "format") and spec.vcf_type != "Flag":
        if spec.layout == "columns" and itemsize <= 4:
            return 2 * itemsize  # the array's dtype (floats as int32 bits), widened to the block
        return 8 + itemsize  # int32 values (widened), then narrowed or cast
    if spec.kind in ("contig", "position", "length"):
        return 16 + itemsize  # int32 or int64 working values, then the narrowed chunk
    return max(itemsize, 1)


def decode_cost(spec: ChunkSpec) -> int:
    """Bytes a decode of one chunk allocates at most (outputs and working arrays), from the
    decoded chunk's shape (:attr:`ChunkSpec.chunk_shape`; per call for the phased array)."""
    shape = spec.chunk_shape[:2] if spec.kind == "genotype_phased" else spec.chunk_shape
    values = 1
    for x in shape:
        values *= max(x, 1)
    return values * _bytes_per_value(spec)


def paid_ceiling(paid: int) -> int:
    """The most any decode of a chunk of ``paid`` bytes as stored may allocate: the ceiling,
    or PAID_EXPANSION bytes per stored byte where that is more."""
    return max(_limits.ceiling, PAID_EXPANSION * paid)


def refuse_over_ceiling(spec: ChunkSpec, cost: int, paid: int, what: str) -> None:
    """The decode ceiling: past it, a decode costs at most PAID_EXPANSION bytes per byte of
    the chunk as stored (``paid``), whatever else backs it (:func:`paid_ceiling`)."""
    limit = paid_ceiling(paid)
    if cost > limit:
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: its configuration (chunk {list(spec.chunk_shape)}) would take "
            f"{cost} bytes to decode {what}, more than any chunk of {paid} stored bytes may "
            f"({limit}; vcfvirtual_codec.checks.set_decode_budget raises it)",
            hint="the references' codec configuration does not fit the cache; refusing to allocate",
        )


def within_budget(cost: int, length: int) -> bool:
    """Whether a decode of ``cost`` bytes is allowed by the budget alone, or by the
    ``length`` bytes of records (or decompressed segment) behind it."""
    return cost <= _limits.budget or cost <= EXPANSION * length


def inflate_limit(compressed: int) -> int:
    """The most bytes ``compressed`` bytes of a chunk may inflate to (see LENGTH_EXPANSION)."""
    return max(_limits.budget, LENGTH_EXPANSION * compressed)


def chunk_records_expected(spec: ChunkSpec) -> tuple[int, str]:
    """The records the last chunk of the array holds, and how a message states what a chunk
    must hold (``chunk_length``, or the remainder in the last chunk)."""
    last = spec.num_records - (spec.num_records - 1) // spec.chunk_length * spec.chunk_length
    expected = f"{spec.chunk_length}" + (f" (or {last} in the last chunk)" if last != spec.chunk_length else "")
    return last, expected
