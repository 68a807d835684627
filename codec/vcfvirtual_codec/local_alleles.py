"""Local alleles at read time: call_LA, call_LAD and call_LPL from GT, AD and PL.

bio2zarr's ``vcf2zarr convert --local-alleles`` stores, for diploid calls, the VCF 4.5
local-alleles representation: ``call_LA`` (int8, ``local_alleles`` = 2) lists the distinct
alleles of each call, smaller first, -2 where a call has fewer (a homozygous call has one,
a missing one none); ``call_LAD`` gathers AD at those alleles (``local_alleles_AD`` = 2);
``call_LPL`` gathers PL at the genotypes they form (``local_genotypes`` = 3: aa, ab, bb;
a homozygous call's aa only). Everything else is -2, the dtype AD's or PL's. Here those
values are derived from the segments (or records) the cache already holds, so the cache
is the same with or without local alleles:

* ``raw`` and ``bgzf``: a chunk is its whole records, GT and the field both in it.
* ``columns``: ``vcfvirtual index --local-alleles`` writes each samples block's FORMAT/AD,
  GT and PL segments one after another (AD, GT, PL), so that one byte range holds what a
  chunk needs: call_LA reads GT's segment, call_LAD the range AD..GT, call_LPL GT..PL. The
  range is split at the first segment's end, which its compressed frame declares (Zstd
  block headers, Blosc's header), and each segment is decoded and checked as call_AD's or
  call_genotype's own chunk would be.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ._kernels.genotypes import local_ad, local_alleles, local_pl
from .errors import ChunkDecodeError
from .spec import ChunkSpec

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Which FORMAT field each kind gathers from, for messages (call_LA reads GT alone).
SOURCE_FIELD = {"local_alleles": "GT", "local_ad": "AD", "local_pl": "PL"}
# A decoder of one array's chunk (the codec's, of whole records or of a columns segment):
# handed in by the decoder that derives local alleles, which this module does not import.
Decoder = Callable[[np.ndarray, ChunkSpec], "bytes | np.ndarray"]


def genotype_spec(spec: ChunkSpec) -> ChunkSpec:
    """The config call_genotype's chunk would have, for the same chunk and samples block
    (int8: call_LA is int8, and the index refuses local alleles past 127 alleles)."""
    return dataclasses.replace(
        spec,
        array=f"{spec.array} (FORMAT/GT)",
        kind="genotype",
        dtype="|i1",
        key=spec.gt_key,
        shape=(spec.shape[0], 2),
        gt_key=-1,
        source_width=0,
        compressor="blosc" if spec.compressor else "",
    )


def field_spec(spec: ChunkSpec) -> ChunkSpec:
    """The config call_AD's (or call_PL's) chunk would have, for the same chunk and block."""
    return dataclasses.replace(
        spec,
        array=f"{spec.array} (FORMAT/{SOURCE_FIELD[spec.kind]})",
        kind="format",
        vcf_type="Integer",
        shape=(spec.shape[0], spec.source_width),
        ploidy=0,
        gt_key=-1,
        source_width=0,
        version=1,  # a FORMAT field's segments are as version 1 wrote them (spec.GT_SEGMENT_KINDS)
    )


def derive(spec: ChunkSpec, gt: np.ndarray, values: np.ndarray | None) -> np.ndarray:
    """The local-allele chunk of ``spec`` from a decoded call_genotype chunk and (LAD, LPL)
    the decoded call_AD or call_PL chunk of the same rows and samples."""
    rows, samples = gt.shape[0], gt.shape[1]
    la = np.empty((rows, samples, 2), np.int8)
    local_alleles(gt, la)
    if spec.kind == "local_alleles":
        return la
    assert values is not None
    out = np.empty((rows, samples, 2 if spec.kind == "local_ad" else 3), values.dtype)
    (local_ad if spec.kind == "local_ad" else local_pl)(values, la, out)
    return out


def decode_local_records(buf: np.ndarray, spec: ChunkSpec, decode_records: Decoder) -> np.ndarray:
    """A local-allele chunk from whole records (``raw``, ``bgzf`` inflated):
    ``decode_records(buf, spec)`` is the codec's decode of one array's chunk."""
    gt = _numeric(decode_records(buf, genotype_spec(spec)))
    values = None if spec.kind == "local_alleles" else _numeric(decode_records(buf, field_spec(spec)))
    return derive(spec, gt, values)


def _numeric(chunk: bytes | np.ndarray) -> np.ndarray:
    """A decoded GT or Integer FORMAT chunk: an array (only strings decode to bytes)."""
    assert isinstance(chunk, np.ndarray)
    return chunk


def zstd_frame_length(frame: np.ndarray) -> int | None:
    """Bytes of the Zstandard frame at ``frame[0]`` (header, blocks, checksum), from its
    header and block headers (RFC 8878, section 3.1.1); None when they run past the bytes
    or are not a frame's."""
    n = frame.shape[0]
    if n < 6 or bytes(frame[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = int(frame[4])
    single_segment = (descriptor >> 5) & 1
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    at += (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    while at + 3 <= n:
        header = int(frame[at]) | int(frame[at + 1]) << 8 | int(frame[at + 2]) << 16
        block_type, size = (header >> 1) & 3, header >> 3
        if block_type == 3:  # reserved: not a frame
            return None
        at += 3 + (1 if block_type == 1 else size)
        if header & 1:  # the last block
            at += 4 if descriptor & 4 else 0  # the content checksum
            return at if at <= n else None
    return None


def _frame_length(frame: np.ndarray) -> int | None:
    """The compressed frame's length: Zstd's from its blocks, Blosc's from its header."""
    if frame.shape[0] >= 4 and bytes(frame[:4]) == _ZSTD_MAGIC:
        return zstd_frame_length(frame)
    if frame.shape[0] < 16:
        return None
    return int(frame[12:16].view("<u4")[0])


def _compressor(frame: np.ndarray) -> str:
    return "zstd" if frame.shape[0] >= 4 and bytes(frame[:4]) == _ZSTD_MAGIC else "blosc"


def split_segments(buf: np.ndarray, spec: ChunkSpec, preamble_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The two segments of a call_LAD (AD then GT) or call_LPL (GT then PL) chunk's range:
    cut where the first one's compressed frame ends."""
    length = _frame_length(buf[preamble_size:])
    cut = None if length is None else preamble_size + length
    if cut is None or cut + preamble_size > buf.shape[0]:
        raise ChunkDecodeError(
            None,
            f"cannot decode {spec.array} chunk (columns layout): its range does not hold two whole segments "
            f"(FORMAT/{SOURCE_FIELD[spec.kind]} and GT)",
            offset=preamble_size,
            hint="the cache may not match the references",
        )
    return buf[:cut], buf[cut:]


def decode_local_columns(buf: np.ndarray, spec: ChunkSpec, decode_segment: Decoder, preamble_size: int) -> np.ndarray:
    """A local-allele chunk of the columns layout: its range's segments (GT; AD and GT; GT
    and PL) each decoded by ``decode_segment(bytes, spec)`` as their own arrays' chunks
    would be (preamble, length, CRC32 and values all checked), then derived."""
    if spec.kind == "local_alleles":
        return derive(spec, _numeric(decode_segment(buf, genotype_spec(spec))), None)
    first, second = split_segments(buf, spec, preamble_size)
    gt_bytes, field_bytes = (second, first) if spec.kind == "local_ad" else (first, second)
    gt_spec = dataclasses.replace(genotype_spec(spec), compressor=_compressor(gt_bytes[preamble_size:]))
    values_spec = dataclasses.replace(field_spec(spec), compressor=_compressor(field_bytes[preamble_size:]))
    return derive(spec, _numeric(decode_segment(gt_bytes, gt_spec)), _numeric(decode_segment(field_bytes, values_spec)))
