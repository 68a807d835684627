"""GT compressor options for the columns layout: index time and cache size per option.

    python benchmarks/columns/gt_codecs.py --bcf /work/bench18/sim_100000_1e+06.bcf \\
        --workdir /work/h-gt --label C --options lz4-5,lz4hc-3,zstd-1 [--rounds 2]

Each option is ``cname-clevel[-blocksize]`` of Blosc bit-shuffle (blocksize in KiB, 0 =
Blosc's own choice). Every index runs in a fresh interpreter (``vcfvirtual index`` through
the CLI's ``main``, numba's cache warm) with ``vcfvirtual.cache.columns.COMPRESSORS["blosc"]``
replaced by the option; the options alternate round by round and the best index time is
kept. The stores stay in ``--workdir`` as ``<label>.<option>.vcz.json`` for
``read_path.py``. Prints one row per option: seconds, cache bytes, cache / BCF, GT bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SNIPPET = """
import json, sys, time
from numcodecs import Blosc
import vcfvirtual.cache.columns as columns
from vcfvirtual.cli import main
columns.COMPRESSORS["blosc"] = Blosc(cname={cname!r}, clevel={clevel}, shuffle=Blosc.BITSHUFFLE,
                                     blocksize={blocksize})
t = time.perf_counter()
try:
    main(["index", {bcf!r}, "--cache", {cache!r}, "-o", {json_path!r}, "--force"], standalone_mode=False)
finally:
    print(json.dumps({{"seconds": time.perf_counter() - t}}))
"""


def parse(option: str) -> tuple[str, int, int]:
    parts = option.split("-")
    return parts[0], int(parts[1]), int(parts[2]) * 1024 if len(parts) > 2 else 0


def gt_bytes(json_path: str) -> int:
    """Bytes of call_genotype's chunks (its segments) in the references."""
    refs = json.load(open(json_path))
    refs = refs.get("refs", refs)
    total = 0
    for key, value in refs.items():
        if key.startswith("call_genotype/") and isinstance(value, list) and len(value) == 3:
            total += int(value[2])
    return total


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bcf", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--options", default="lz4-5")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    options = args.options.split(",")
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for option in options:
            cname, clevel, blocksize = parse(option)
            stem = os.path.join(args.workdir, f"{args.label}.{option}")
            code = SNIPPET.format(
                cname=cname,
                clevel=clevel,
                blocksize=blocksize,
                bcf=args.bcf,
                cache=stem + ".cache.columns",
                json_path=stem + ".vcz.json",
            )
            out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
            seconds = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
            best[option] = min(best.get(option, seconds), seconds)
    size = os.path.getsize(args.bcf)
    print("| option | index s | cache MB | cache / BCF | GT MB |")
    print("| --- | --- | --- | --- | --- |")
    for option in options:
        stem = os.path.join(args.workdir, f"{args.label}.{option}")
        cache = os.path.getsize(stem + ".cache.columns")
        gt = gt_bytes(stem + ".vcz.json")
        print(f"| {option} | {best[option]:.2f} | {cache / 1e6:.1f} | {cache / size:.3f} | {gt / 1e6:.1f} |")


if __name__ == "__main__":
    main()
