"""The "columns" cache prototype: write segments compressed one by one, read them back.

File layout (research format, not final): ``<name>.columns`` holds every segment back to
back, chunk after chunk, each as a 36-byte uncompressed preamble (``PREAMBLE``: magic
``VVS1``, kind code, flags, BCF dictionary key, records, samples block, block samples,
decompressed length, CRC32 of the decompressed segment) followed by the compressed segment.
The reader checks every preamble field against what it expects for that (chunk, array,
block) and the CRC32 after decompressing, so a damaged, stale or misplaced segment fails
loudly (the checks a ``ChunkSpec``-driven codec would make); ``<name>.columns.npz`` holds ``offsets`` and ``lengths``
(int64, ``[n_chunks, n_segments]``), ``n_records`` (int64 per chunk) and the JSON meta
(segment names, codec of each segment kind, samples_chunk_size, chunk_length). One
segment of one chunk is one byte range: exactly what a Kerchunk reference to that Zarr
chunk would point at.
"""

from __future__ import annotations

import json
import os
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from isal import isal_zlib
from numcodecs import Blosc, Zstd

from . import demux as D
from . import stream

# ---------------------------------------------------------------------------- preamble

MAGIC = b"VVS1"
PREAMBLE = struct.Struct("<4sBBHiIIIQI")  # magic, kind, flags, pad, key, n, block, block samples, raw, crc
FLAG_GT_SHIFT = 1
KIND_CODES = {name: i for i, name in enumerate(D.FIXED_NAMES)} | {"info": 7, "format": 8}


class SegmentError(ValueError):
    """A segment that is not the one its reference promises (a typed error in the product)."""


def segment_identity(name: str, header) -> tuple[int, int, int]:
    """(kind code, BCF dictionary key or -1, samples block) a segment name stands for."""
    kind = segment_kind(name)
    block = int(name.split("#")[1]) if "#" in name else 0
    if "/" not in kind:
        return KIND_CODES[kind], -1, block
    cat, field_name = kind.split("/")
    defs = header.info if cat == "info" else header.formats
    return KIND_CODES[cat], next(d.key for d in defs if d.name == field_name), block


# ---------------------------------------------------------------------------- codecs


@dataclass(frozen=True)
class SegmentCodec:
    """A compressor of one segment: ``name`` is isal-L, zstd-L or blosc-CNAME-SHUFFLE-L."""

    name: str

    def _blosc(self):
        _, cname, shuffle, level = self.name.split("-")
        return Blosc(cname=cname, clevel=int(level), shuffle={"byte": Blosc.SHUFFLE, "bit": Blosc.BITSHUFFLE}[shuffle])

    def encode(self, data: np.ndarray, typesize: int = 1) -> bytes:
        kind, _, level = self.name.partition("-")
        if kind == "none":
            return data.tobytes()
        if kind == "isal":
            return isal_zlib.compress(data, level=int(level), wbits=-15)
        if kind == "zstd":
            return Zstd(level=int(level)).encode(data)
        if typesize > 1 and data.shape[0] % typesize == 0:
            data = data.view(f"<u{typesize}")
        return self._blosc().encode(data)

    def decode(self, data, size: int, out: np.ndarray | None = None) -> np.ndarray:
        """Decompressed bytes of a segment whose decompressed length the index gives.

        ``out``: a reusable uint8 buffer of at least ``size`` bytes for Zstd/Blosc to
        decompress into (a fresh buffer per segment costs a page fault per 4 KiB)."""
        kind, _, level = self.name.partition("-")
        target = out[:size] if out is not None and out.shape[0] >= size else None
        if kind == "none":
            res = data
        elif kind == "isal":
            res = isal_zlib.decompress(data, wbits=-15, bufsize=max(size, 1))
        elif kind == "zstd":
            res = Zstd().decode(data, target)
        else:
            res = self._blosc().decode(data, target)
        arr = np.frombuffer(res, np.uint8) if not isinstance(res, np.ndarray) else res.view(np.uint8).reshape(-1)
        if arr.shape[0] != size:  # the check a ChunkSpec would carry: decompressed length
            raise ValueError(f"segment decompresses to {arr.shape[0]} bytes, expected {size}")
        return arr


CANDIDATES = (
    [f"isal-{lv}" for lv in (1, 2, 3)]
    + [f"zstd-{lv}" for lv in (1, 2, 3, 4, 5)]
    + [f"blosc-{c}-{s}-5" for c in ("zstd", "lz4") for s in ("byte", "bit")]
)


def segment_kind(name: str) -> str:
    """Kind of a segment name: "position", "info/AF", "format/GT" (block suffix dropped)."""
    return name.split("#", 1)[0]


def typesize(name: str) -> int:
    return 4 if name in ("contig", "position", "rlen", "qual") else 1


# ---------------------------------------------------------------------------- writer


@dataclass
class Columns:
    """An opened columns cache."""

    path: Path
    meta: dict
    offsets: np.ndarray
    lengths: np.ndarray
    raw_lengths: np.ndarray
    n_records: np.ndarray
    fd: int = -1
    codecs: dict = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> Columns:
        z = np.load(str(path) + ".npz")
        meta = json.loads(str(z["meta"]))
        c = cls(path, meta, z["offsets"], z["lengths"], z["raw_lengths"], z["n_records"])
        c.fd = os.open(path, os.O_RDONLY)
        c.codecs = {k: SegmentCodec(v) for k, v in meta["codecs"].items()}
        return c

    def segment_index(self, name: str) -> int:
        return self.meta["segments"].index(name)

    def read_segment(self, chunk: int, seg: int, out: np.ndarray | None = None, crc: bool = True) -> np.ndarray:
        """Read one segment's byte range, check its preamble, decompress it (into ``out``
        when large enough) and check its length and (with ``crc``) its CRC32."""
        data = os.pread(self.fd, int(self.lengths[chunk, seg]), int(self.offsets[chunk, seg]))
        name = self.meta["segments"][seg]
        where = f"{self.path}: segment {name} of chunk {chunk}"
        if len(data) < PREAMBLE.size:
            raise SegmentError(f"{where}: {len(data)} bytes, shorter than its preamble")
        magic, kind, flags, _, key, n, block, width, raw, crc32 = PREAMBLE.unpack_from(data)
        want_kind, want_key, want_block = self.meta["identities"][seg]
        n_chunks = self.n_records.shape[0]
        cl = self.meta["chunk_length"]
        S, n_samples = self.meta["samples_chunk_size"], self.meta["n_samples"]
        want_n = cl if chunk < n_chunks - 1 else self.meta["num_records"] - (n_chunks - 1) * cl
        want_width = min(S, n_samples - want_block * S) if want_kind == KIND_CODES["format"] else 1
        if (magic, kind, key, block, n, width) != (MAGIC, want_kind, want_key, want_block, want_n, want_width):
            raise SegmentError(
                f"{where}: preamble says {(magic, kind, key, block, n, width)}, expected "
                f"{(MAGIC, want_kind, want_key, want_block, want_n, want_width)} (magic, kind, key, block, "
                "records, block samples): the cache does not match its index"
            )
        body = self.codecs[segment_kind(name)].decode(data[PREAMBLE.size :], raw, out)
        if crc and isal_zlib.crc32(body) != crc32:
            raise SegmentError(f"{where}: CRC32 mismatch after decompressing (the cache is damaged)")
        return body

    def close(self):
        os.close(self.fd)


def gt_slot(header) -> int:
    """FORMAT slot of GT (its segments store int8 bytes minus demux.GT_SHIFT), or -1."""
    return next((i for i, f in enumerate(header.formats) if f.name == "GT"), -1)


def _encode(job) -> tuple[bytes, bytes]:
    """(preamble, compressed segment) of one segment."""
    codec, data, size, identity, n, width, flags = job
    kind, key, block = identity
    preamble = PREAMBLE.pack(MAGIC, kind, flags, 0, key, n, block, width, data.shape[0], isal_zlib.crc32(data))
    return preamble, codec.encode(data, size)


def segment_names(header, samples_chunk_size: int) -> list[str]:
    nb = D.n_blocks(len(header.samples), samples_chunk_size)
    names = list(D.FIXED_NAMES)
    names += [f"info/{f.name}" for f in header.info]
    names += [f"format/{f.name}#{b}" for f in header.formats for b in range(nb)]
    return names


def write(
    bcf: Path,
    out: Path,
    chunk_length: int,
    samples_chunk_size: int,
    codecs: dict[str, str],
    threads: int = 2,
    ahead: bool = False,
) -> dict:
    """One streaming pass: inflate, demux and compress every chunk, append to ``out``.

    Memory: one chunk of records and its segments at a time (plus the index); with
    ``ahead`` the next chunks are inflated on a thread meanwhile (three chunks of records
    held). Returns the seconds spent per stage (``inflate``: waiting for a chunk) and
    byte counts."""
    t0 = time.perf_counter()
    stages = dict(inflate=0.0, demux=0.0, compress=0.0, write=0.0)
    offsets, lengths, raw_lengths, n_records = [], [], [], []
    inflated = 0
    names = None
    pos = 0
    with open(out, "wb") as f, ThreadPoolExecutor(threads) as pool:
        t = time.perf_counter()
        scratch = np.empty(0, np.uint8)
        source = stream.chunks_ahead(bcf, chunk_length) if ahead else stream.chunks(bcf, chunk_length, copy=False)
        for header, buf, offs in source:
            stages["inflate"] += time.perf_counter() - t
            if names is None:
                names = segment_names(header, samples_chunk_size)
                islot, fslot = D.slot_maps([x.key for x in header.info], [x.key for x in header.formats])
                kinds = [segment_kind(n) for n in names]
                identities = [segment_identity(n, header) for n in names]
                n_samples = len(header.samples)
                widths = [
                    min(samples_chunk_size, n_samples - ident[2] * samples_chunk_size)
                    if ident[0] == KIND_CODES["format"]
                    else 1
                    for ident in identities
                ]
                gt = gt_slot(header)
                gt_key = header.formats[gt].key if gt >= 0 else -2
                flags = [
                    FLAG_GT_SHIFT if ident[0] == KIND_CODES["format"] and ident[1] == gt_key else 0
                    for ident in identities
                ]
                seg_codec = [SegmentCodec(codecs.get(k, codecs["*"])) for k in kinds]
                sizes = [typesize(k) for k in kinds]
            t = time.perf_counter()
            segs, bounds, err, at = D.demux_chunk(
                buf,
                offs,
                islot,
                fslot,
                len(header.info),
                len(header.formats),
                len(header.samples),
                samples_chunk_size,
                header.end_key,
                gt_slot(header),
                scratch,
            )
            if segs.shape[0] > scratch.shape[0]:
                scratch = segs  # reused (its first bytes) by the next chunk
            if err:
                raise ValueError(f"{bcf}: demux error {err} at {at}")
            stages["demux"] += time.perf_counter() - t
            inflated += buf.shape[0]
            row_off, row_len = [], []
            t = time.perf_counter()
            # Segments compress independently (the codecs release the GIL): on `threads`.
            n_rec = len(offs)
            jobs = [
                (seg_codec[s], segs[bounds[s] : bounds[s + 1]], sizes[s], identities[s], n_rec, widths[s], flags[s])
                for s in range(len(names))
            ]
            blobs = list(pool.map(_encode, jobs))
            t1 = time.perf_counter()
            stages["compress"] += t1 - t
            for preamble, blob in blobs:
                f.write(preamble)
                f.write(blob)
                row_off.append(pos)
                row_len.append(len(preamble) + len(blob))
                pos += len(preamble) + len(blob)
            stages["write"] += time.perf_counter() - t1
            offsets.append(row_off)
            lengths.append(row_len)
            raw_lengths.append(np.diff(bounds))
            n_records.append(len(offs))
            t = time.perf_counter()
    if names is None:  # the prototype has no empty-array layout (the product's manifests do)
        raise ValueError(f"{bcf}: no records to write")
    meta = dict(
        segments=names,
        codecs={k: codecs.get(k, codecs["*"]) for k in {segment_kind(n) for n in names}},
        chunk_length=chunk_length,
        samples_chunk_size=samples_chunk_size,
        n_samples=len(header.samples),
        gt_shift=D.GT_SHIFT,
        identities=identities,
        num_records=int(sum(n_records)),
    )
    np.savez(
        str(out) + ".npz",
        offsets=np.array(offsets, np.int64),
        lengths=np.array(lengths, np.int64),
        raw_lengths=np.array(raw_lengths, np.int64),
        n_records=np.array(n_records, np.int64),
        meta=json.dumps(meta),
    )
    return dict(seconds=time.perf_counter() - t0, inflated=inflated, cache_bytes=pos, **stages)
