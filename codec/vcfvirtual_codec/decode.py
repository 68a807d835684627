"""The ``raw`` and ``bgzf`` cache layouts' decoding: a chunk's whole BCF records (inflated
first from their BGZF blocks, ``bgzf``) -> that chunk's values.

:func:`vcfvirtual_codec.codec.decode_chunk` imports this module by the first chunk of either
layout it decodes, not with the codec: a reader of the ``columns`` layout (the default)
never loads it, its record walk, nor the BGZF inflate (which only the ``bgzf`` layout
imports, on its first chunk).

The compiled kernels decoding the records take the chunk's bytes and the offsets of its
records and fill preallocated output arrays of the *full* chunk shape; rows past the last
record keep the fill the caller put there. Kernels return ``(error_code, byte_position)``
so that Python can raise a typed error naming where the bytes stop making sense; the codes
and their texts are :mod:`vcfvirtual_codec.bcf.records`' (``ERR_*``, ``ERROR_TEXT``).

The field kernels are the records-layout entry points of the one decoder
(``_kernels/fields.pyx``): the same value code as the columns layout
(:mod:`vcfvirtual_codec.columns`), fed by locating each record's field. So is
``genotypes`` (``_kernels/genotypes.pyx``), whose row decoder (``_kernels/gt.pxd``) the
columns layout's GT blocks go through too.
"""

from __future__ import annotations

import numpy as np

from . import checks
from ._kernels import fields as _fields
from ._kernels.fields import (
    SPAN_FILL,
    SPAN_MISSING,
    allele_spans,
    field_numeric,
    field_string_spans,
    filters,
    first_characters,
    first_invalid_utf8,
    fixed_bytes4,
    fixed_int32,
    id_spans,
    info_flag,
    lengths,
    vlen_utf8,
)
from ._kernels.genotypes import records_genotypes as genotypes
from ._kernels.records import record_offsets
from .bcf import records
from .checks import FLOAT32_FILL, check, checked_vlen_utf8, narrowed, span_missing
from .errors import ChunkDecodeError, VcfVirtualError
from .local_alleles import decode_local_records
from .scratch import Scratch
from .spec import LOCAL_KINDS, SAMPLE_KINDS, ChunkSpec

__all__ = [
    "SPAN_FILL",
    "SPAN_MISSING",
    "allele_spans",
    "decode_records_chunk",
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


def decode_records_chunk(buf: np.ndarray, spec: ChunkSpec, scratch: Scratch | None = None) -> bytes | np.ndarray:
    """One chunk of the ``raw`` or ``bgzf`` layout (``buf``: its bytes as uint8) decoded, as
    :func:`vcfvirtual_codec.codec.decode_chunk` returns it (which says what it raises).
    ``scratch``: the codec instance's buffers, to inflate a ``bgzf`` chunk into."""
    if spec.layout != "bgzf":
        return _decode_records(buf, spec)
    scratch = scratch or Scratch()
    buffer = scratch.take()
    try:
        inflated = _inflate(buf, spec, buffer)
        if inflated.base is None:  # too big for the free buffer: it replaces it
            buffer = inflated
        # Nothing returned is a view of the records, so the buffer can be reused.
        return _decode_records(inflated, spec, paid=buf.shape[0])
    finally:
        if buffer is not None:
            scratch.give(buffer)


def _chunk_offsets(buf: np.ndarray, spec: ChunkSpec) -> np.ndarray:
    """Offsets of the records in the chunk: exactly chunk_length whole records, or the
    remainder in the last chunk."""
    # A record is at least 32 bytes (l_shared >= 24), so the offsets array need never be
    # longer than the chunk can hold, whatever chunk_length the config claims.
    limit = min(spec.chunk_length, buf.shape[0] // 32 + 1)
    offsets: np.ndarray
    offsets, n, err, err_pos = record_offsets(buf, limit)
    if err == records.OK and n == 0:
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: it holds no records",
            hint="the cache may not match the references",
        )
    check(err, err_pos, spec, "walking records")
    if spec.num_records == 0:
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: the configuration says the array has no records",
            hint="the cache may not match the references",
        )
    last, expected = checks.chunk_records_expected(spec)
    if n not in (spec.chunk_length, last):
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: it holds {n} records, expected {expected}",
            hint="the cache may not match the references",
        )
    return offsets


def _check_budget(buf: np.ndarray, offsets: np.ndarray, spec: ChunkSpec, paid: int) -> None:
    cost = checks.decode_cost(spec)
    checks.refuse_over_ceiling(spec, cost, paid, f"{buf.shape[0]} bytes of records")
    if checks.within_budget(cost, buf.shape[0]):
        return
    if spec.kind in SAMPLE_KINDS and offsets.shape[0]:
        n_sample = (
            buf[offsets + records.OFF_N_FMT_SAMPLE].astype(np.int64)
            | buf[offsets + records.OFF_N_FMT_SAMPLE + 1].astype(np.int64) << 8
            | buf[offsets + records.OFF_N_FMT_SAMPLE + 2].astype(np.int64) << 16
        )
        claimed = int(n_sample.max())
        if spec.shape[0] <= claimed and cost <= spec.chunk_length * claimed * checks.BYTES_PER_CLAIMED_SAMPLE:
            return
    raise ChunkDecodeError(
        None,
        f"cannot decode {spec.array} chunk: its configuration (shape {list(spec.shape)}, "
        f"{spec.chunk_length} variants) would take {cost} bytes to decode "
        f"{buf.shape[0]} bytes of records",
        hint="the references' codec configuration does not fit the cache; refusing to allocate",
    )


def _inflate(buf: np.ndarray, spec: ChunkSpec, buffer: np.ndarray | None) -> np.ndarray:
    """A bgzf chunk's records, inflated into ``buffer`` when it is large enough."""
    from .bcf import bgzf  # the bgzf layout's alone (and libdeflate's with it): imported by its first chunk

    try:
        return bgzf.inflate_chunk(buf, buffer=buffer, limit=checks.inflate_limit(buf.shape[0]))
    except VcfVirtualError as e:
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: {e.problem}",
            offset=e.offset,
            hint="the cache may not match the references",
        ) from None


def _decode_records(buf: np.ndarray, spec: ChunkSpec, paid: int | None = None) -> bytes | np.ndarray:
    """Decode a chunk's whole, uncompressed records (``paid``: the chunk's bytes as stored,
    when they were compressed)."""
    if spec.kind in LOCAL_KINDS:  # derived from GT (and AD or PL) of the same records
        # Each source array's decode is bounded by the same stored bytes.
        return decode_local_records(buf, spec, lambda records, source: _decode_records(records, source, paid))
    offsets = _chunk_offsets(buf, spec)
    _check_budget(buf, offsets, spec, buf.shape[0] if paid is None else paid)
    full = (spec.chunk_length, *spec.shape)
    kind = spec.kind
    if kind in ("id", "id_mask", "allele"):
        return _decode_spans(buf, offsets, spec, full)
    if kind in ("info", "format"):
        return _decode_field(buf, offsets, spec, full)
    if kind in ("length", "contig", "position"):
        return _decode_int_column(buf, offsets, spec, full)
    if kind == "quality":
        return _decode_quality(buf, offsets, full)
    if kind == "filter":
        out = np.zeros(full, dtype=bool)
        err, at = filters(buf, offsets, np.asarray(spec.filter_columns, np.int64), out)
        check(err, at, spec, kind)
        return out
    return _decode_genotypes(buf, offsets, spec)


def _decode_spans(buf: np.ndarray, offsets: np.ndarray, spec: ChunkSpec, full: tuple[int, ...]) -> bytes | np.ndarray:
    """IDs (or their mask) and alleles: spans of the records' strings, then vlen-utf8."""
    kind = spec.kind
    starts = np.zeros(full, np.int64)
    lengths = np.full(full, SPAN_FILL, np.int64)
    spans = allele_spans if kind == "allele" else id_spans
    err, at = spans(buf, offsets, starts, lengths)
    check(err, at, spec, kind)
    if kind == "id_mask":
        return span_missing(lengths)
    return checked_vlen_utf8(buf, starts, lengths, spec)


def _decode_int_column(buf: np.ndarray, offsets: np.ndarray, spec: ChunkSpec, full: tuple[int, ...]) -> np.ndarray:
    """variant_length, variant_contig or variant_position, narrowed to the array's dtype."""
    kind = spec.kind
    dtype = np.dtype(spec.dtype)
    if kind == "length":
        # int64: htslib's replacement of a damaged rlen can exceed int32; spec.key is
        # INFO/END's dictionary key, which that replacement reads (-1: none).
        values = np.full(full, -2, np.int64)
        # The kernel, by its module: below, ``lengths`` names arrays of span lengths.
        err, at = _fields.lengths(buf, offsets, spec.key, values)
        check(err, at, spec, kind)
        return narrowed(values, dtype, spec)
    field = {"contig": records.OFF_CHROM, "position": records.OFF_POS}[kind]
    read = np.full(full, -2, np.int32)
    fixed_int32(buf, offsets, field, read)
    if kind == "contig":
        return narrowed(read, dtype, spec)
    n = offsets.shape[0]
    # htslib reads POS as unsigned (0xFFFFFFFF meaning VCF POS 0): below -1 the int32 we
    # read and htslib's value differ, and only damage puts it there.
    if (read[:n] < -1).any():
        bad = int(np.argmax(read[:n] < -1))
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk: record {bad} of the chunk has a negative POS",
            offset=int(offsets[bad]) + records.OFF_POS,
            hint="the cache may not match the references",
        )
    # BCF POS is 0-based, VCF Zarr positions are 1-based; in int64, as POS 0x7FFFFFFF is
    # VCF POS 2^31 (htslib reads POS unsigned), not a wrap to -2^31.
    positions = read.astype(np.int64)
    positions[:n] += 1
    return narrowed(positions, dtype, spec)


def _decode_quality(buf: np.ndarray, offsets: np.ndarray, full: tuple[int, ...]) -> np.ndarray:
    """variant_quality: QUAL's float32 bits as stored."""
    out = np.full(full, FLOAT32_FILL, dtype="<f4")
    fixed_bytes4(buf, offsets, records.OFF_QUAL, out.view(np.uint8))
    # A NaN QUAL other than missing reads as the quiet NaN htslib's readers return (pysam
    # and bio2zarr pass it through a double): 0x7F800002 would otherwise be taken for VCF
    # Zarr's fill.
    bits = out.view("<u4")[: offsets.shape[0]]
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)
    bits[nan & (bits != records.FLOAT_MISSING_BITS)] |= 0x400000
    return out


def _decode_genotypes(buf: np.ndarray, offsets: np.ndarray, spec: ChunkSpec) -> np.ndarray:
    """call_genotype, _phased or _mask: one decode yields alleles and phasing, each array
    keeps its part. call_genotype decodes straight into its own (smallest) dtype."""
    kind = spec.kind
    dtype = np.dtype(spec.dtype)
    gt_dtype = dtype.newbyteorder("<") if kind == "genotype" else np.dtype(np.int32)
    n = offsets.shape[0]
    gt = np.empty((spec.chunk_length, spec.shape[0], spec.ploidy), gt_dtype)
    gt[n:] = -2  # the kernel writes every value of the record rows; pad the rest
    if kind == "genotype_phased":
        phased = np.empty((spec.chunk_length, spec.shape[0]), dtype=bool)
        phased[n:] = False
    else:
        phased = np.empty((0, 0), dtype=bool)  # alleles only: skip the phase bits
    err, at = genotypes(buf, offsets, spec.key, gt, phased, np.iinfo(gt_dtype).max)
    check(err, at, spec, kind)
    if kind == "genotype":
        return gt
    if kind == "genotype_mask":
        mask: np.ndarray = gt < 0  # missing or fill, as bio2zarr writes it
        return mask
    return phased


def _first_characters(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """<U1 values (UTF-32LE code points): each value's first character, "." when
    missing, "" as fill (the kernel both layouts use)."""
    out = np.empty(starts.size, "<u4")
    first_characters(buf, np.ascontiguousarray(starts).ravel(), np.ascontiguousarray(lengths).ravel(), out)
    return out.reshape(starts.shape)


def _decode_field(buf: np.ndarray, offsets: np.ndarray, spec: ChunkSpec, full: tuple[int, ...]) -> bytes | np.ndarray:
    """An INFO (records, [width]) or FORMAT (records, samples, [width]) field."""
    is_format = spec.kind == "format"
    n_vectors = spec.shape[0] if is_format else 1
    vector = len(spec.shape) == (2 if is_format else 1)
    width = spec.shape[-1] if vector else 1
    inner = (spec.chunk_length, n_vectors, width)
    if spec.vcf_type == "Flag":
        out = np.zeros(spec.chunk_length, dtype=bool)
        err, at = info_flag(buf, offsets, spec.key, out)
        check(err, at, spec, "Flag")
        return out
    if spec.vcf_type in ("Integer", "Float"):
        is_float = spec.vcf_type == "Float"
        values = np.full(inner, records.FLOAT_END_BITS if is_float else -2, dtype=np.int32)
        # A Number=1 INFO Float keeps a NaN value (bio2zarr reads it as a scalar).
        keep_nan = is_float and not is_format and not vector
        err, at = field_numeric(buf, offsets, spec.key, is_format, is_float, values, keep_nan)
        check(err, at, spec, spec.vcf_type)
        if is_float:
            return values.view("<f4").reshape(full)
        return narrowed(values.reshape(full), np.dtype(spec.dtype), spec)
    starts = np.zeros(inner, np.int64)
    lengths = np.full(inner, SPAN_FILL, np.int64)
    err, at = field_string_spans(buf, offsets, spec.key, is_format, starts, lengths)
    check(err, at, spec, spec.vcf_type)
    if spec.vcf_type == "Character":
        return _first_characters(buf, starts, lengths).reshape(full)
    return checked_vlen_utf8(buf, starts, lengths, spec)
