"""First use versus later use: the CLI's index and a first full read, cold and warm.

"Cold" is a fresh environment as far as vcfvirtual's own code goes: each repeat copies the
packages vcfvirtual and vcfvirtual_codec (as imported: their compiled extension modules
too, if any) to a new folder without __pycache__, puts it first on PYTHONPATH, and points
NUMBA_CACHE_DIR at an empty folder, so Python compiles the modules' bytecode again and
numba, where the kernels still use it, compiles them again (the cache it would otherwise
find in __pycache__ is gone). "Warm" runs the same again, with what the cold run left.
The dependencies' own bytecode stays warm (a new virtualenv would take minutes). Each run
is a new process, timed from this one (wall; CPU from ``resource.getrusage`` of the
children), so interpreter and import time are included, as a user sees them.

    python benchmarks/coldstart.py [--repeats 3] [--kernels]

The kernels' technology is detected, not assumed: the table's title says whether importing
and reading loaded numba (then the cold run compiled its kernels) or not (compiled
extension modules, built at install). Writes a Markdown table (wall and CPU seconds, the
median of the repeats, and cold - warm CPU: issue 24's target is <= 1 s). ``--kernels``
adds, with numba, for one cold index in a fresh process, each numba specialisation compiled
and its compile time (numba's own timer, which includes the helpers it compiled first): the
way to see which kernel a first use waits for, and whether one compiles more than once.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("vcfvirtual", "vcfvirtual_codec")
READ_ALL = (
    "import sys, xarray as xr, vcfvirtual\n"
    "ds = xr.open_zarr(vcfvirtual.open_store(sys.argv[1]), consolidated=False)\n"
    "ds.load()\n"
)
# Where each package is imported from, and whether importing and reading loaded numba.
WHERE = (
    "import json, sys, xarray as xr, vcfvirtual, vcfvirtual_codec\n"
    "xr.open_zarr(vcfvirtual.open_store(sys.argv[1]), consolidated=False).load()\n"
    "print(json.dumps({'dirs': [m.__path__[0] for m in (vcfvirtual, vcfvirtual_codec)], "
    "'numba': 'numba' in sys.modules}))\n"
)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _env(src: Path, cache_dir: Path) -> dict[str, str]:
    """The packages from the copy ``src`` first, numba's cache in ``cache_dir``."""
    path = os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "NUMBA_CACHE_DIR": str(cache_dir)}


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process."""
    before = _children_cpu()
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    return time.perf_counter() - start, _children_cpu() - before


def fresh_copy(dirs: list[str], dest: Path) -> Path:
    """The packages copied to ``dest`` without their bytecode (nor numba's cache, kept in
    __pycache__): compiled extension modules come along, as an install would have them."""
    for d in dirs:
        shutil.copytree(d, dest / Path(d).name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def where(refs: Path, work: Path) -> dict:
    """The installed packages' folders and whether they use numba (a warm run)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(work / "numba-probe")}
    out = subprocess.run([sys.executable, "-c", WHERE, str(refs)], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(bcf: Path, work: Path, repeats: int) -> tuple[list[dict], bool]:
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
    subprocess.run(index, check=True, capture_output=True)  # a store for where() to read
    found = where(refs, work)
    rows: dict[tuple[str, str], list[tuple[float, float]]] = {
        (step, state): [] for step in ("index", "first read") for state in ("cold", "warm")
    }
    for r in range(repeats):
        env = _env(fresh_copy(found["dirs"], work / f"src-{r}"), work / f"numba-{r}")
        for state in ("cold", "warm"):
            # cold: no bytecode, an empty numba cache; the read after the index finds
            # what the index compiled, and compiles what only reading needs.
            rows[("index", state)].append(_run(index, env))
            rows[("first read", state)].append(_run(read, env))
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
    return out, found["numba"]


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


def markdown(rows: list[dict], uses_numba: bool, repeats: int) -> str:
    kernels = "numba (cold: compiled again)" if uses_numba else "compiled extension modules (no numba loaded)"
    load = os.getloadavg()
    lines = [
        f"example: 2,000 variants x 100 samples; kernels: {kernels}; {os.cpu_count()} cores, "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; median of {repeats}",
        "",
        "| step | state | wall s | CPU s | cold - warm CPU s |",
        "| --- | --- | --- | --- | --- |",
    ]
    warm = {row["step"]: row["cpu"] for row in rows if row["state"] == "warm"}
    for row in rows:
        extra = f"{row['cpu'] - warm[row['step']]:.2f}" if row["state"] == "cold" else ""
        lines.append(f"| {row['step']} | {row['state']} | {row['wall']:.2f} | {row['cpu']:.2f} | {extra} |")
    return "\n".join(lines)


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
        rows, uses_numba = measure(bcf, work, args.repeats)
        kernels = kernel_times(bcf, work) if args.kernels and uses_numba else []
    print(markdown(rows, uses_numba, args.repeats))
    if args.kernels and not uses_numba:
        print("\n--kernels: no numba loaded, nothing is compiled at first use")
    if kernels:
        print("\ncold index, each compiled specialisation (seconds include the helpers it compiled):\n")
        print("| kernel | specialisations | compile s |")
        print("| --- | --- | --- |")
        for seconds, kernel, n in kernels:
            if seconds >= 0.05:
                print(f"| {kernel} | {n} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
