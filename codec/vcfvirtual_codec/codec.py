"""The ``vcfvirtual.bcf`` codec: whole BCF records of one chunk -> that chunk's values.

A chunk of any variants-dimension array is the byte range of the chunk's records in
the transcode cache. The codec is a bytes-to-bytes step that decodes those records
into the *serialised* chunk, which the standard step then reads:

* Zarr v3: ``codecs = [bytes | vlen-utf8, vcfvirtual.bcf]``
* Zarr v2 / Kerchunk: ``filters = [vlen-utf8?, vcfvirtual.bcf]``, no compressor

so numeric chunks come out as the little-endian bytes of the full chunk shape and
string chunks as ``vlen-utf8`` bytes. The configuration carries everything needed
(array, value kind, BCF dictionary key, per-variant shape, chunk length, cache layout),
because numcodecs never tells a codec the chunk shape.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy

try:
    from zarr.abc.codec import BytesBytesCodec

    HAVE_ZARR3 = True
except ImportError:  # zarr 2 (e.g. beside sgkit 0.10): the numcodecs codec alone reads Kerchunk JSON
    HAVE_ZARR3 = False

from . import checks, decode
from ._kernels.fields import first_characters
from ._kernels.records import record_offsets
from .bcf import bgzf, records
from .checks import FLOAT32_FILL, check, checked_vlen_utf8, narrowed, span_missing
from .columns import decode_columns_chunk
from .errors import ChunkDecodeError, VcfVirtualError
from .local_alleles import decode_local_records
from .scratch import Scratch
from .spec import CODEC_ID, KINDS, LAYOUTS, LOCAL_KINDS, MAX_SAMPLES, SAMPLE_KINDS, ChunkSpec

if TYPE_CHECKING:
    from collections.abc import Buffer

    # zarr's codec API types its chunk spec with ArraySpec, which has no public module
    # yet (zarr's own codecs in zarr.codecs import it from here).
    from zarr.abc.buffer import Buffer as ZarrBuffer
    from zarr.core.array_spec import ArraySpec

__all__ = [
    "CODEC_ID",
    "FLOAT32_FILL",
    "KINDS",
    "LAYOUTS",
    "MAX_SAMPLES",
    "BCFRecordsCodec",
    "BCFRecordsZarrCodec",
    "ChunkSpec",
    "decode_chunk",
    "register",
]


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


def decode_chunk(data: Buffer, spec: ChunkSpec, scratch: Scratch | None = None) -> bytes | np.ndarray:
    """Decode the records of one chunk into the serialised, padded chunk.

    Parameters
    ----------
    data : bytes-like or numpy.ndarray
        The chunk's bytes in the transcode cache: whole records (``raw`` layout), the
        whole BGZF blocks holding them (``bgzf`` layout, inflated first), or one
        compressed segment behind its preamble (``columns`` layout, see
        :mod:`vcfvirtual_codec.columns`).
    spec : ChunkSpec
        The array's codec configuration.
    scratch : Scratch, optional
        The codec instance's working buffers, to inflate or decompress into (fresh ones
        otherwise); nothing returned is a view of them.

    Returns
    -------
    numpy.ndarray or bytes
        The full chunk (``spec.chunk_length`` rows, rows past the last record filled):
        numeric and boolean values as an array of the array's dtype, strings as
        ``vlen-utf8`` bytes.

    Raises
    ------
    ChunkDecodeError
        The bytes are not the records the configuration describes (damaged blocks or
        records, another record count, values outside the dtype, a decode larger than
        the records justify); the offset is within the chunk where known.
    """
    buf = checks.as_bytes(data)
    if spec.layout == "columns":
        return decode_columns_chunk(buf, spec, scratch)
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


def _inflate(buf: np.ndarray, spec: ChunkSpec, buffer: np.ndarray | None) -> np.ndarray:
    """A bgzf chunk's records, inflated into ``buffer`` when it is large enough."""
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
        err, at = decode.filters(buf, offsets, np.asarray(spec.filter_columns, np.int64), out)
        check(err, at, spec, kind)
        return out
    return _decode_genotypes(buf, offsets, spec)


def _decode_spans(buf: np.ndarray, offsets: np.ndarray, spec: ChunkSpec, full: tuple[int, ...]) -> bytes | np.ndarray:
    """IDs (or their mask) and alleles: spans of the records' strings, then vlen-utf8."""
    kind = spec.kind
    starts = np.zeros(full, np.int64)
    lengths = np.full(full, decode.SPAN_FILL, np.int64)
    spans = decode.allele_spans if kind == "allele" else decode.id_spans
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
        err, at = decode.lengths(buf, offsets, spec.key, values)
        check(err, at, spec, kind)
        return narrowed(values, dtype, spec)
    field = {"contig": records.OFF_CHROM, "position": records.OFF_POS}[kind]
    read = np.full(full, -2, np.int32)
    decode.fixed_int32(buf, offsets, field, read)
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
    decode.fixed_bytes4(buf, offsets, records.OFF_QUAL, out.view(np.uint8))
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
    err, at = decode.genotypes(buf, offsets, spec.key, gt, phased, np.iinfo(gt_dtype).max)
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
        err, at = decode.info_flag(buf, offsets, spec.key, out)
        check(err, at, spec, "Flag")
        return out
    if spec.vcf_type in ("Integer", "Float"):
        is_float = spec.vcf_type == "Float"
        values = np.full(inner, records.FLOAT_END_BITS if is_float else -2, dtype=np.int32)
        # A Number=1 INFO Float keeps a NaN value (bio2zarr reads it as a scalar).
        keep_nan = is_float and not is_format and not vector
        err, at = decode.field_numeric(buf, offsets, spec.key, is_format, is_float, values, keep_nan)
        check(err, at, spec, spec.vcf_type)
        if is_float:
            return values.view("<f4").reshape(full)
        return narrowed(values.reshape(full), np.dtype(spec.dtype), spec)
    starts = np.zeros(inner, np.int64)
    lengths = np.full(inner, decode.SPAN_FILL, np.int64)
    err, at = decode.field_string_spans(buf, offsets, spec.key, is_format, starts, lengths)
    check(err, at, spec, spec.vcf_type)
    if spec.vcf_type == "Character":
        return _first_characters(buf, starts, lengths).reshape(full)
    return checked_vlen_utf8(buf, starts, lengths, spec)


def _serialised(result: bytes | np.ndarray) -> np.ndarray:
    """A decoded chunk as the flat bytes the next codec step reads."""
    return np.ascontiguousarray(result).view(np.uint8).ravel()


# numcodecs ships no type information: its Codec is Any to mypy.
class BCFRecordsCodec(Codec):  # type: ignore[misc]
    """numcodecs codec for Zarr v2 / Kerchunk ``filters``; decode-only (the BCF is the source).

    Parameters
    ----------
    **config
        The JSON configuration, as :meth:`ChunkSpec.from_config` reads it.

    Raises
    ------
    CodecConfigError
        A configuration value the index would never write (a ``ValueError``).
    """

    codec_id = CODEC_ID

    def __init__(self, **config: Any) -> None:
        self.spec = ChunkSpec.from_config(config)
        self._scratch = Scratch()  # working buffers of this instance's decodes, never returned

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, **self.spec.to_config()}

    def encode(self, buf: Buffer) -> NoReturn:
        raise NotImplementedError(
            "vcfvirtual.bcf is read-only: chunks are BCF records decoded on read; "
            "write to a regular Zarr store to change values"
        )

    def decode(self, buf: Buffer, out: Buffer | None = None) -> np.ndarray | Buffer:
        """The chunk's decoded bytes: a new array, or copied into ``out``; either way
        memory of this call's own, whatever decoded before."""
        result = _serialised(decode_chunk(ensure_contiguous_ndarray(buf), self.spec, self._scratch))
        if out is None:
            return result
        out_bytes = ensure_contiguous_ndarray(out).nbytes
        if out_bytes != result.nbytes:
            raise ChunkDecodeError(
                None,
                f"cannot decode {self.spec.array} chunk: it decodes to {result.nbytes} "
                f"bytes, the array's chunk holds {out_bytes}",
                hint="the codec configuration does not match the array's metadata",
            )
        copied: np.ndarray | Buffer = ndarray_copy(result, out)
        return copied

    def __repr__(self) -> str:
        return f"BCFRecordsCodec(array={self.spec.array!r}, kind={self.spec.kind!r})"


if HAVE_ZARR3:
    # A frozen dataclass, as zarr's codecs are; its __init__, __repr__, __eq__ and __hash__
    # written out (what dataclass generates for the one field, spec), not exec'd in every
    # process importing the codec.
    @dataclass(frozen=True, init=False, repr=False, eq=False)
    class BCFRecordsZarrCodec(BytesBytesCodec):
        """zarr v3 bytes-to-bytes codec: :class:`BCFRecordsCodec`'s configuration and decode.

        Parameters
        ----------
        spec : ChunkSpec, optional
            The configuration, already checked; else it is read from ``**config``, as for
            :class:`BCFRecordsCodec` (which says what it raises).
        """

        is_fixed_size = False
        spec: ChunkSpec
        if TYPE_CHECKING:  # set in __init__, not a dataclass field (equality and JSON are the spec's)
            _scratch: Scratch

        def __init__(self, *, spec: ChunkSpec | None = None, **config: Any) -> None:
            object.__setattr__(self, "spec", spec if spec is not None else ChunkSpec.from_config(config))
            object.__setattr__(self, "_scratch", Scratch())

        def __repr__(self) -> str:
            return f"{type(self).__qualname__}(spec={self.spec!r})"

        def __eq__(self, other: object) -> bool:
            if other.__class__ is not self.__class__:
                return NotImplemented
            return bool(self.spec == other.spec)

        def __hash__(self) -> int:
            return hash((self.spec,))

        @classmethod
        def from_dict(cls, data: dict[str, Any]) -> BCFRecordsZarrCodec:
            if data.get("name") != CODEC_ID:
                raise ValueError(f"expected codec name {CODEC_ID!r}, got {data.get('name')!r}")
            return cls(**data.get("configuration", {}))

        def to_dict(self) -> dict[str, Any]:
            return {"name": CODEC_ID, "configuration": self.spec.to_config()}

        def _decode_sync(self, chunk_bytes: ZarrBuffer, chunk_spec: ArraySpec) -> ZarrBuffer:
            expected = tuple(max(1, x) for x in self.spec.chunk_shape)
            if tuple(chunk_spec.shape) != expected:
                raise ChunkDecodeError(
                    None,
                    f"cannot decode {self.spec.array} chunk: the array's chunks are "
                    f"{list(chunk_spec.shape)}, its codec configuration says {list(expected)}",
                    hint="the codec configuration does not match the array's metadata",
                )
            raw = _serialised(decode_chunk(chunk_bytes.as_numpy_array(), self.spec, self._scratch))
            return chunk_spec.prototype.buffer.from_array_like(raw)

        async def _decode_single(self, chunk_bytes: ZarrBuffer, chunk_spec: ArraySpec) -> ZarrBuffer:
            # Kernels release the GIL, so decoding in zarr's threads lets chunks decode in
            # parallel; how many at once is zarr's to decide (its async concurrency).
            return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

        async def _encode_single(self, chunk_bytes: ZarrBuffer, chunk_spec: ArraySpec) -> ZarrBuffer | None:
            raise NotImplementedError("vcfvirtual.bcf is read-only: chunks are decoded BCF records")

        def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
            raise NotImplementedError


def register() -> None:
    """Register both codecs with numcodecs and (zarr 3) zarr's codec registry.

    Entry points do the same for processes that never import this module.

    Returns
    -------
    None
    """
    import numcodecs

    numcodecs.register_codec(BCFRecordsCodec)
    if HAVE_ZARR3:
        from zarr.registry import register_codec

        register_codec(CODEC_ID, BCFRecordsZarrCodec)
