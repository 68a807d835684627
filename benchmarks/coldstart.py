"""First use versus later use: the CLI's index and a first full read, cold and warm.

numba compiles vcfvirtual's kernels the first time they run and caches the machine code;
"cold" runs each measurement with an empty cache directory (NUMBA_CACHE_DIR), as on a
fresh install, "warm" with the cache the cold run filled. Each run is a new process, so
interpreter and import time are included, as a user sees them.

    python benchmarks/coldstart.py [--repeats 3] [--kernels]

Writes a Markdown table (wall and CPU seconds, the median of the repeats). ``--kernels``
adds, for one cold index in a fresh process, each numba specialisation compiled and its
compile time (numba's own timer, which includes the helpers it compiled first): the way to
see which kernel a first use waits for, and whether one compiles more than once.
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


# Run in the child: one cold index in-process, then every compiled specialisation of
# vcfvirtual's kernels with numba's compile timer (seconds, including nested compiles).
KERNEL_TIMES = """
import sys, vcfvirtual.cli
from numba.core.registry import CPUDispatcher
from vcfvirtual.api import IndexOptions, index_summary
index_summary(sys.argv[1], IndexOptions(refs_path=sys.argv[2], cache_path=sys.argv[3], force=True, progress=False))
rows = []
for name, module in list(sys.modules.items()):
    if not name.startswith(("vcfvirtual.", "vcfvirtual_codec.")):
        continue
    for attr, f in vars(module).items():
        if isinstance(f, CPUDispatcher) and f.__module__ == name:
            for sig, cres in f.overloads.items():
                timers = (cres.metadata or {}).get("timers", {})
                rows.append((timers.get("compiler_lock", 0.0), f"{name}.{attr}", len(f.overloads)))
for seconds, kernel, n in sorted(rows, reverse=True):
    print(f"{seconds:.3f}\t{kernel}\t{n}")
"""


def kernel_times(bcf: Path, work: Path) -> list[tuple[float, str, int]]:
    """(compile seconds, kernel, its number of specialisations) of one cold index."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(work / "numba-kernels")}
    cmd = [sys.executable, "-c", KERNEL_TIMES, str(bcf), str(work / "k.vcz.json"), str(work / "k.cache")]
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        seconds, kernel, n = line.split("\t")
        rows.append((float(seconds), kernel, int(n)))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement; the median is kept")
    parser.add_argument("--kernels", action="store_true", help="also each kernel's compile time in a cold index")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "examples"))
    from make_example import write_example

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bcf = write_example(work / "example.bcf")
        rows = measure(bcf, work, args.repeats)
        kernels = kernel_times(bcf, work) if args.kernels else []
    print(f"example: 2,000 variants x 100 samples; {os.cpu_count()} cores; median of {args.repeats}\n")
    print("| step | numba cache | wall s | CPU s |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['step']} | {row['state']} | {row['wall']:.2f} | {row['cpu']:.2f} |")
    if kernels:
        print("\ncold index, each compiled specialisation (seconds include the helpers it compiled):\n")
        print("| kernel | specialisations | compile s |")
        print("| --- | --- | --- |")
        for seconds, kernel, n in kernels:
            if seconds >= 0.05:
                print(f"| {kernel} | {n} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
