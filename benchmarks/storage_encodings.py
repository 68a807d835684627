"""Encodings of the columns cache's segments, tried on real segments: size and decode speed.

    python benchmarks/storage_encodings.py refs.vcz.json [--max-segments 40]

Reads the segments a columns index wrote (their byte ranges from the Kerchunk references),
decompresses each, and compresses it again with every candidate of its kind: what the
writer uses, Blosc with Zstd at several levels and bit- or byte-shuffle (bio2zarr's
defaults are Blosc zstd 7, bit-shuffle for int8 genotypes, byte-shuffle otherwise), plain
Zstd, and for GT blocks of complete diploid calls a 2-bit packing of the alleles before
Zstd. One markdown table per kind: total compressed bytes (preambles included: 36 bytes a
segment), decompression throughput on one thread (GB/s of decompressed bytes, best of 3 over
the sample) and compression throughput (one run).
Issue 24 chooses each kind's encoding from these tables.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numcodecs
import numpy as np
from numcodecs import Blosc, Zstd
from vcfvirtual_codec import columns as cc
from vcfvirtual_codec.segment_transforms import (
    position_deltas,
    undo_position_deltas,
    undo_value_planes,
    value_planes,
)

numcodecs.blosc.set_nthreads(1)
numcodecs.blosc.use_threads = False

Codec = tuple[Callable[[np.ndarray], bytes], Callable[[bytes, int], np.ndarray]]


def _numcodec(codec: numcodecs.abc.Codec) -> Codec:
    def enc(raw: np.ndarray) -> bytes:
        return bytes(codec.encode(raw))

    def dec(frame: bytes, n: int) -> np.ndarray:
        out = np.empty(n, np.uint8)
        codec.decode(frame, out)
        return out

    return enc, dec


def _typed(codec: numcodecs.abc.Codec, itemsize: int) -> Codec:
    """Blosc's shuffle works on items of ``itemsize`` bytes: the bytes viewed as such."""

    def enc(raw: np.ndarray) -> bytes:
        cut = raw.shape[0] - raw.shape[0] % itemsize
        # the tail (a segment's counts and types make its length no multiple) kept apart
        return bytes(codec.encode(raw[:cut].view(f"u{itemsize}"))) + raw[cut:].tobytes()

    def dec(frame: bytes, n: int) -> np.ndarray:
        cut = n - n % itemsize
        out = np.empty(n, np.uint8)
        codec.decode(frame[: len(frame) - (n - cut)], out[:cut])
        out[cut:] = np.frombuffer(frame[len(frame) - (n - cut) :], np.uint8)
        return out

    return enc, dec


def _delta32(codec: numcodecs.abc.Codec) -> Codec:
    """int32 values as differences from the one before (positions: small, shuffled well)."""

    def enc(raw: np.ndarray) -> bytes:
        v = raw.view("<i4")
        return bytes(codec.encode(np.diff(v, prepend=np.int32(0)).astype("<i4")))

    def dec(frame: bytes, n: int) -> np.ndarray:
        d = np.empty(n // 4, "<i4")
        codec.decode(frame, d)
        return np.cumsum(d, dtype="<i4").view(np.uint8)

    return enc, dec


def pack2(body: np.ndarray) -> np.ndarray | None:
    """Shifted GT bytes (2*allele + phase) with every value < 4, four to a byte."""
    if body.size % 4 or (body > 3).any():
        return None
    b = body.reshape(-1, 4)
    return (b[:, 0] | (b[:, 1] << 2) | (b[:, 2] << 4) | (b[:, 3] << 6)).astype(np.uint8)


def unpack2(packed: np.ndarray) -> np.ndarray:
    out = np.empty((packed.size, 4), np.uint8)
    for i in range(4):
        out[:, i] = (packed >> (2 * i)) & 3
    return out.ravel()


CANDIDATES: dict[str, Codec] = {
    "zstd 1": _numcodec(Zstd(level=1)),
    "zstd 3": _numcodec(Zstd(level=3)),
    "zstd 7": _numcodec(Zstd(level=7)),
    "blosc lz4 9 bitshuffle": _numcodec(Blosc("lz4", 9, Blosc.BITSHUFFLE)),
    "blosc zstd 1 bitshuffle": _numcodec(Blosc("zstd", 1, Blosc.BITSHUFFLE)),
    "blosc zstd 3 bitshuffle": _numcodec(Blosc("zstd", 3, Blosc.BITSHUFFLE)),
    "blosc zstd 5 bitshuffle": _numcodec(Blosc("zstd", 5, Blosc.BITSHUFFLE)),
    "blosc zstd 7 bitshuffle": _numcodec(Blosc("zstd", 7, Blosc.BITSHUFFLE)),
    "blosc zstd 1 bitshuffle, 4 MiB blocks": _numcodec(Blosc("zstd", 1, Blosc.BITSHUFFLE, blocksize=1 << 22)),
    "blosc zstd 3 bitshuffle, 4 MiB blocks": _numcodec(Blosc("zstd", 3, Blosc.BITSHUFFLE, blocksize=1 << 22)),
}
WORD_CANDIDATES: dict[str, Codec] = {
    "blosc zstd 5 shuffle (4-byte)": _typed(Blosc("zstd", 5, Blosc.SHUFFLE), 4),
    "blosc zstd 7 shuffle (4-byte)": _typed(Blosc("zstd", 7, Blosc.SHUFFLE), 4),
    "blosc zstd 7 bitshuffle (4-byte)": _typed(Blosc("zstd", 7, Blosc.BITSHUFFLE), 4),
    "blosc lz4 9 shuffle (4-byte)": _typed(Blosc("lz4", 9, Blosc.SHUFFLE), 4),
}
DELTA_CANDIDATES: dict[str, Codec] = {
    "delta byte planes + zstd 3 (chosen)": (
        lambda raw: bytes(Zstd(level=3).encode(position_deltas(raw))),
        lambda frame, n: _undone(Zstd().decode(frame)),
    ),
    "delta + zstd 3": _delta32(Zstd(level=3)),
    "delta + blosc zstd 5 shuffle": _delta32(Blosc("zstd", 5, Blosc.SHUFFLE)),
    "delta + blosc zstd 5 bitshuffle": _delta32(Blosc("zstd", 5, Blosc.BITSHUFFLE)),
}


def _undone(planes: bytes) -> np.ndarray:
    out = np.frombuffer(planes, np.uint8).copy()
    undo_position_deltas(out)
    return out


def segments(refs_path: Path) -> dict[str, list[bytes]]:
    """The stored segments by kind (GT, position, an INFO key...), each range read once."""
    doc = json.loads(refs_path.read_text())
    refs, templates = doc["refs"], doc.get("templates", {})
    seen: set[tuple[str, int, int]] = set()
    by_kind: dict[str, list[bytes]] = defaultdict(list)
    files: dict[str, bytes] = {}
    for key, value in sorted(refs.items()):
        array, _, chunk = key.rpartition("/")
        if not (isinstance(value, list) and len(value) == 3) or chunk.startswith("."):
            continue
        where = (str(value[0]), int(value[1]), int(value[2]))
        if where in seen or array in ("call_LAD", "call_LPL", "call_LA"):
            continue
        seen.add(where)
        path = where[0]
        for name, value in templates.items():
            path = path.replace("{{" + name + "}}", value)
        path = path.removeprefix("file://")
        if path not in files:
            files[path] = Path(path).read_bytes()
        data = files[path][where[1] : where[1] + where[2]]
        name = "call_genotype" if array.startswith("call_genotype") else array
        by_kind[name].append(data)
    return by_kind


def raw_of(data: bytes) -> tuple[np.ndarray, int]:
    """A stored segment's decompressed bytes (transforms undone) and its records."""
    fields = cc.PREAMBLE.unpack(data[: cc.PREAMBLE.size])
    kind, flags, records, width, length = fields[1], fields[2], fields[5], fields[7], fields[8]
    frame = np.frombuffer(data[cc.PREAMBLE.size :], np.uint8)
    out = np.empty(length, np.uint8)
    (Zstd() if bytes(frame[:4]) == b"\x28\xb5\x2f\xfd" else Blosc()).decode(frame, out)
    names = {code: name for name, code in cc.SEGMENT_KINDS.items()}
    cc.undo_transforms(out, names[kind], flags, records, width)
    return out, records


def timed(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(kind: str, stored: list[bytes], max_segments: int) -> list[str]:
    sample = stored[:: max(1, len(stored) // max_segments)]
    decoded = [raw_of(s) for s in sample]
    raws = [r for r, _ in decoded]
    scale = len(stored) / len(sample)
    raw_total = sum(r.shape[0] for r in raws)
    rows = [f"| as stored now | {sum(len(s) for s in stored) / 1e6:.3f} | - | - |"]
    candidates = dict(CANDIDATES)
    if kind in ("variant_position", "variant_contig", "variant_length", "variant_quality") or (
        all(r.shape[0] % 4 == 0 for r in raws) and kind != "call_genotype"
    ):
        candidates |= WORD_CANDIDATES
    if kind in ("variant_position",):
        candidates |= DELTA_CANDIDATES
    for name, (enc, dec) in candidates.items():
        start = time.perf_counter()
        frames = [enc(r) for r in raws]
        encode_s = time.perf_counter() - start
        size = sum(len(f) + cc.PREAMBLE.size for f in frames) * scale
        seconds = timed(lambda frames=frames, dec=dec: [dec(f, r.shape[0]) for f, r in zip(frames, raws, strict=True)])
        rows.append(
            f"| {name} | {size / 1e6:.3f} | {raw_total / seconds / 1e9:.2f} | {raw_total / encode_s / 1e9:.2f} |"
        )
    if kind == "call_genotype":
        rows.extend(_packed_rows(decoded, scale))
    elif kind.startswith("call_"):
        widths = [cc.PREAMBLE.unpack_from(s)[7] for s in sample]
        rows.extend(_planes_rows(decoded, widths, scale))
    head = [
        f"### {kind}: {len(stored)} segments, {raw_total * scale / 1e6:.1f} MB decompressed",
        "",
        "| encoding | MB | decode GB/s | encode GB/s |",
        "| --- | ---: | ---: | ---: |",
    ]
    return head + rows


def _packed_rows(decoded: list[tuple[np.ndarray, int]], scale: float) -> list[str]:
    """GT blocks packed 2 bits a call allele (where every byte past the 5n counts and
    types is < 4: alleles 0 and 1, no missing), then compressed; other blocks Zstd 3."""
    rows = []
    raw_total = sum(r.shape[0] for r, _ in decoded)
    for name, codec in (("2-bit packed + zstd 3", Zstd(level=3)), ("2-bit packed + zstd 7", Zstd(level=7))):
        frames: list[tuple[bytes, int, int | None]] = []
        for r, n in decoded:
            packed = pack2(r[5 * n :])
            if packed is None:
                frames.append((bytes(Zstd(level=3).encode(r)), r.shape[0], None))
                continue
            frames.append((r[: 5 * n].tobytes() + bytes(codec.encode(packed)), r.shape[0], 5 * n))
        size = sum(len(f) + cc.PREAMBLE.size for f, _, _ in frames) * scale

        def decode_all(frames: list[tuple[bytes, int, int | None]] = frames, codec: Zstd = codec) -> None:
            for f, length, head in frames:
                if head is None:
                    Zstd().decode(f)
                    continue
                out = np.empty((length - head) // 4, np.uint8)
                codec.decode(f[head:], out)
                unpack2(out)

        seconds = timed(decode_all)
        fits = sum(h is not None for _, _, h in frames)
        rows.append(
            f"| {name} ({fits}/{len(frames)} blocks packed) | {size / 1e6:.3f} | {raw_total / seconds / 1e9:.2f} |"
        )
    return rows


def _planes_rows(decoded: list[tuple[np.ndarray, int]], widths: list[int], scale: float) -> list[str]:
    """FORMAT segments with each record's wider values in byte planes, then Zstd."""
    rows = []
    raw_total = sum(r.shape[0] for r, _ in decoded)
    for level in (2, 3, 4, 5, 6):
        codec = Zstd(level=level)
        start = time.perf_counter()
        frames = [bytes(codec.encode(value_planes(r, n, w))) for (r, n), w in zip(decoded, widths, strict=True)]
        encode_s = time.perf_counter() - start
        size = sum(len(f) + cc.PREAMBLE.size for f in frames) * scale

        def decode_all(frames: list[bytes] = frames) -> None:
            for f, (r, n), w in zip(frames, decoded, widths, strict=True):
                out = np.empty(r.shape[0], np.uint8)
                Zstd().decode(f, out)
                undo_value_planes(out, n, w)

        seconds = timed(decode_all)
        chosen = " (chosen)" if level == 5 else ""
        speeds = f"{raw_total / seconds / 1e9:.2f} | {raw_total / encode_s / 1e9:.2f}"
        rows.append(f"| value byte planes + zstd {level}{chosen} | {size / 1e6:.3f} | {speeds} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("refs", type=Path, help="Kerchunk JSON references of a columns index")
    parser.add_argument("--max-segments", type=int, default=40, help="segments tried per kind (default 40)")
    parser.add_argument("--kinds", nargs="*", help="only these arrays")
    args = parser.parse_args()
    for kind, stored in sorted(segments(args.refs).items(), key=lambda kv: -sum(map(len, kv[1]))):
        if args.kinds and kind not in args.kinds:
            continue
        print("\n".join(measure(kind, stored, args.max_segments)), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
