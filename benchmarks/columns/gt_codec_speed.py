"""Compress and decompress speed of GT segments per Blosc option, one thread each.

    python benchmarks/columns/gt_codec_speed.py /work/h-gt/A.lz4-5.vcz.json [--chunks 3] \\
        [--options lz4-5,lz4-9,lz4hc-3,zstd-1]

Takes a few call_genotype segments of a columns-layout store (decompressed as stored, GT
bytes shifted), and for each option (``cname-clevel[-blocksize KiB]``, bit-shuffle) times
Blosc's compress and decompress with Blosc's own threads off, as in the index's compress
pool and zarr's decode threads (numcodecs runs Blosc single-threaded off the main
thread). Best of --repeats; prints MB/s over the decompressed bytes and the ratio.
"""

from __future__ import annotations

import argparse
import json
import time

import numcodecs.blosc
import numpy as np
from numcodecs import Blosc


def segments(refs_path: str, n: int, array: str = "call_genotype") -> list[np.ndarray]:
    top = json.load(open(refs_path))
    refs = top.get("refs", top)
    cache = top.get("templates", {}).get("cache", "")
    keys = sorted(k for k in refs if k.startswith(array + "/") and not k.split("/")[1].startswith("."))
    out = []
    for key in keys[:: max(1, len(keys) // n)][:n]:
        url, offset, length = refs[key]
        with open(url.replace("{{cache}}", cache).replace("file://", ""), "rb") as f:
            f.seek(offset)
            data = f.read(length)
        out.append(np.frombuffer(Blosc().decode(data[36:]), np.uint8))
    return out


def best(fn, repeats: int) -> float:
    b = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t)
    return b


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("refs")
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--options", default="lz4-5,lz4-9,lz4hc-1,lz4hc-3,lz4hc-5,zstd-1,zstd-3")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    numcodecs.blosc.use_threads = False
    segs = segments(args.refs, args.chunks)
    total = sum(s.shape[0] for s in segs)
    print(f"{len(segs)} segments, {total / 1e6:.1f} MB decompressed")
    print("| option | compressed / raw | compress MB/s | decompress MB/s |")
    print("| --- | --- | --- | --- |")
    for option in args.options.split(","):
        parts = option.split("-")
        codec = Blosc(
            cname=parts[0],
            clevel=int(parts[1]),
            shuffle=Blosc.BITSHUFFLE,
            blocksize=int(parts[2]) * 1024 if len(parts) > 2 else 0,
        )
        frames = [codec.encode(s) for s in segs]
        outs = [np.empty_like(s) for s in segs]
        c = best(lambda codec=codec: [codec.encode(s) for s in segs], args.repeats)
        d = best(lambda frames=frames, outs=outs: [Blosc().decode(f, o) for f, o in zip(frames, outs)], args.repeats)
        size = sum(len(f) for f in frames)
        print(f"| {option} | {size / total:.4f} | {total / c / 1e6:.0f} | {total / d / 1e6:.0f} |")


if __name__ == "__main__":
    main()
