"""The "columns" cache prototype: write segments compressed one by one, read them back.

File layout (research format, not final): ``<name>.columns`` holds every compressed segment
back to back, chunk after chunk; ``<name>.columns.npz`` holds ``offsets`` and ``lengths``
(int64, ``[n_chunks, n_segments]``), ``n_records`` (int64 per chunk) and the JSON meta
(segment names, codec of each segment kind, samples_chunk_size, chunk_length). One
segment of one chunk is one byte range: exactly what a Kerchunk reference to that Zarr
chunk would point at.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from isal import isal_zlib
from numcodecs import Blosc, Zstd

from . import demux as D
from . import stream

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

    def read_segment(self, chunk: int, seg: int, out: np.ndarray | None = None) -> np.ndarray:
        """Read one segment's byte range and decompress it (checked against its length),
        into ``out`` when it is large enough."""
        data = os.pread(self.fd, int(self.lengths[chunk, seg]), int(self.offsets[chunk, seg]))
        name = self.meta["segments"][seg]
        return self.codecs[segment_kind(name)].decode(data, int(self.raw_lengths[chunk, seg]), out)

    def close(self):
        os.close(self.fd)


def gt_slot(header) -> int:
    """FORMAT slot of GT (its segments store int8 bytes minus demux.GT_SHIFT), or -1."""
    return next((i for i, f in enumerate(header.formats) if f.name == "GT"), -1)


def _encode(job) -> bytes:
    codec, data, size = job
    return codec.encode(data, size)


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
            jobs = [(seg_codec[s], segs[bounds[s] : bounds[s + 1]], sizes[s]) for s in range(len(names))]
            blobs = list(pool.map(_encode, jobs))
            t1 = time.perf_counter()
            stages["compress"] += t1 - t
            for blob in blobs:
                f.write(blob)
                row_off.append(pos)
                row_len.append(len(blob))
                pos += len(blob)
            stages["write"] += time.perf_counter() - t1
            offsets.append(row_off)
            lengths.append(row_len)
            raw_lengths.append(np.diff(bounds))
            n_records.append(len(offs))
            t = time.perf_counter()
    meta = dict(
        segments=names,
        codecs={k: codecs.get(k, codecs["*"]) for k in {segment_kind(n) for n in names}},
        chunk_length=chunk_length,
        samples_chunk_size=samples_chunk_size,
        n_samples=len(header.samples),
        gt_shift=D.GT_SHIFT,
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
