"""First use versus later use: the CLI's index and a first full read, cold and warm.

numba compiles vcfvirtual's kernels the first time they run and caches the machine code;
"cold" runs each measurement with an empty cache directory (NUMBA_CACHE_DIR), as on a
fresh install, "warm" with the cache the cold run filled. Each run is a new process, so
interpreter and import time are included, as a user sees them.

    python benchmarks/coldstart.py [--repeats 3]

Writes a Markdown table (wall and CPU seconds, the median of the repeats).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ_ALL = (
    "import sys, xarray as xr, vcfvirtual\n"
    "ds = xr.open_zarr(vcfvirtual.open_store(sys.argv[1]), consolidated=False)\n"
    "ds.load()\n"
)


def _run(cmd: list[str], cache_dir: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    before = os.times()
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def measure(bcf: Path, work: Path, repeats: int) -> list[dict]:
    exe = Path(sys.executable).parent
    refs = work / "example.vcz.json"
    index = [
        str(exe / "vcfvirtual"),
        "index",
        "--force",
        "--no-progress",
        str(bcf),
        "-o",
        str(refs),
        "--cache",
        str(work / "example.cache.bcf"),
    ]
    read = [sys.executable, "-c", READ_ALL, str(refs)]
    rows = {(step, state): [] for step in ("index", "first read") for state in ("cold", "warm")}
    for r in range(repeats):
        cache = work / f"numba-{r}"
        for state in ("cold", "warm"):
            # cold: an empty cache dir for index, then the read compiles its own kernels
            rows[("index", state)].append(_run(index, cache))
            rows[("first read", state)].append(_run(read, cache))
    out = []
    for (step, state), runs in rows.items():
        out.append(
            {
                "step": step,
                "state": state,
                "wall": statistics.median(w for w, _ in runs),
                "cpu": statistics.median(c for _, c in runs),
            }
        )
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement; the median is kept")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "examples"))
    from make_example import write_example

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bcf = write_example(work / "example.bcf")
        rows = measure(bcf, work, args.repeats)
    print(f"example: 2,000 variants x 100 samples; {os.cpu_count()} cores; median of {args.repeats}\n")
    print("| step | numba cache | wall s | CPU s |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['step']} | {row['state']} | {row['wall']:.2f} | {row['cpu']:.2f} |")


if __name__ == "__main__":
    main()
