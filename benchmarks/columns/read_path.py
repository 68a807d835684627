"""Full-array reads of a columns-layout store through zarr, against bio2zarr's store.

    python benchmarks/columns/read_path.py --ours /work/h/A.vcz.json \\
        --theirs /work/bench12/sim_10000_2.5e+07.bcf.bio2zarr.vcz --ops gt,gt10 \\
        [--code new=/wt:/wt/codec --code base=/base:/base/codec] [--rounds 3] [--repeats 3]

--ours may be repeated as LABEL=JSON (several stores of the same BCF, e.g. one per GT
compressor from gt_codecs.py); each store is read with each --code, or, given as
LABEL=JSON::PYTHONPATH, with that version of vcfvirtual only (a store of an older
segment format read by the code that wrote it).

Each read runs as bench.py's READS snippets do: a fresh interpreter per store and read,
zarr.open_group over vcfvirtual.open_store(json) (zarr_format=2) against zarr.open_group of
bio2zarr's directory, one warm-up read, then the best of --repeats. Rounds alternate the
stores (and the --code versions of vcfvirtual, each a PYTHONPATH), so a busy spell on the
shared machine hits all of them; the best over rounds is kept. Prints one row per read:
seconds per store and ours / bio2zarr, then the same for the process CPU seconds of a read.
Checksums must agree with bio2zarr's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# The reads of issue 12's targets (bench.py's READ_GT and READS): name -> expression on `group`.
OPS = {
    "gt": 'group["call_genotype"][:]',
    "gt10": 'group["call_genotype"][:, :10]',
    "DP": 'group["call_DP"][:]',
    "AD": 'group["call_AD"][:]',
    "position": 'group["variant_position"][:]',
}

SNIPPET = """
import json, time
import numpy as np, zarr
store = {store!r}
if store.endswith(".json"):
    import vcfvirtual
    group = zarr.open_group(vcfvirtual.open_store(store), mode="r", zarr_format=2)
else:
    group = zarr.open_group(store, mode="r")
value = {expr}  # warm-up: compiled kernels, page cache
best = cpu = None
for _ in range({repeats}):
    c = time.process_time()
    t = time.perf_counter()
    value = {expr}
    elapsed = time.perf_counter() - t
    c = time.process_time() - c
    best = elapsed if best is None else min(best, elapsed)
    cpu = c if cpu is None else min(cpu, c)
# sum(dtype=) rather than astype("i8").sum(): an int64 copy of A's call_genotype is 16 GB.
print(json.dumps({{"seconds": best, "cpu": cpu, "checksum": int(np.asarray(value).sum(dtype=np.int64))}}))
"""


def run(store: str, op: str, repeats: int, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    code = SNIPPET.format(store=store, expr=OPS[op], repeats=repeats)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--ours", required=True, action="append", help="Kerchunk JSON of a columns-layout store ([LABEL=]JSON)"
    )
    parser.add_argument("--theirs", required=True, help="bio2zarr's store of the same BCF")
    parser.add_argument("--ops", default="gt", help=f"comma-separated reads among {sorted(OPS)}")
    parser.add_argument("--code", action="append", default=[], help="LABEL=PYTHONPATH of a vcfvirtual version")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    codes = [tuple(c.split("=", 1)) for c in args.code] or [("ours", None)]
    stores = [tuple(s.split("=", 1)) if "=" in s else ("", s) for s in args.ours]
    # One column per store and code version.
    versions = [
        ("/".join(x for x in (store_label, code_label) if x) or "ours", store, path)
        for store_label, store in stores
        if "::" not in store
        for code_label, path in codes
    ] + [(store_label, *store.split("::", 1)) for store_label, store in stores if "::" in store]
    ops = args.ops.split(",")
    best: dict[tuple[str, str], float] = {}
    cpu: dict[tuple[str, str], float] = {}
    sums: dict[tuple[str, str], int] = {}
    for _ in range(args.rounds):
        for op in ops:
            runs = [("bio2zarr", args.theirs, None)] + versions
            for label, store, path in runs:
                r = run(store, op, args.repeats, path)
                key = (op, label)
                best[key] = min(best.get(key, r["seconds"]), r["seconds"])
                cpu[key] = min(cpu.get(key, r["cpu"]), r["cpu"])
                sums[key] = r["checksum"]
    labels = [label for label, _, _ in versions]
    print("| read | bio2zarr s | " + " | ".join(f"{x} s (/ bio2zarr)" for x in labels) + " | checksums |")
    print("| --- | --- | " + " | ".join("---" for _ in labels) + " | --- |")
    for op in ops:
        theirs = best[(op, "bio2zarr")]
        cells = [f"{best[(op, x)]:.4f} ({best[(op, x)] / theirs:.2f}x)" for x in labels]
        same = all(sums[(op, x)] == sums[(op, "bio2zarr")] for x in labels)
        print(f"| {op} | {theirs:.4f} | " + " | ".join(cells) + f" | {'match' if same else 'DIFFER'} |")
    # Process CPU seconds (all threads) of the least costly read: steadier than wall time on
    # a shared machine, and what the decode changes move.
    print()
    print("| read | bio2zarr CPU s | " + " | ".join(f"{x} CPU s (/ bio2zarr)" for x in labels) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in labels) + " |")
    for op in ops:
        theirs = cpu[(op, "bio2zarr")]
        cells = [f"{cpu[(op, x)]:.4f} ({cpu[(op, x)] / theirs:.2f}x)" for x in labels]
        print(f"| {op} | {theirs:.4f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
