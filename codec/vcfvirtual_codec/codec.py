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

from .checks import FLOAT32_FILL, as_bytes
from .columns import decode_columns_chunk
from .errors import ChunkDecodeError
from .scratch import Scratch
from .spec import CODEC_ID, KINDS, LAYOUTS, MAX_SAMPLES, ChunkSpec

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
    buf = as_bytes(data)
    if spec.layout == "columns":
        return decode_columns_chunk(buf, spec, scratch)
    # The raw and bgzf layouts' decoder (record walk, BGZF inflate) is imported by their
    # first chunk: a reader of the columns layout never loads it.
    from .decode import decode_records_chunk

    return decode_records_chunk(buf, spec, scratch)


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
