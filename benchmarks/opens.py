"""What opening a store costs a fresh process, by what the user's cache folder already holds.

    python benchmarks/opens.py REFS.json BIO2ZARR.vcz [--runs 7] [--output opens.md]

Each run is a new Python process that imports zarr (untimed: both sides pay it), then
times, by its own clocks (``time.perf_counter`` and ``time.process_time``), importing
vcfvirtual and ``zarr.open_group(vcfvirtual.open_store(REFS))``, or ``zarr.open_group``
of bio2zarr's store. Our open is timed in three states of the user's cache folder
(``$VCFVIRTUAL_CACHE_DIR``, one per state, made in a temporary folder):

- *first open, nothing kept*: a collaborator's first open of references they were sent
  (the folder emptied before every run): every check;
- *verdict kept*: the first open after ``vcfvirtual index`` wrote the references, which
  keeps the verdict on their bytes (``refs/verdicts.py``) but not what the open found of
  the files, written moments before (``refs/opened.py``; emulated here by that module's
  window set wider than the files' age);
- *opened before*: every later open of the same unchanged files (``refs/opened.py``).

The states' runs alternate with bio2zarr's; medians of ``--runs``. The references' files
must have been unchanged for a few seconds (the script waits for that).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh import settle  # noqa: E402

CHILD = r"""
import json, sys, time
how, store, window = sys.argv[1], sys.argv[2], float(sys.argv[3])
import zarr
t, c = time.perf_counter(), time.process_time()
if how == "ours":
    import vcfvirtual
    from vcfvirtual.refs import opened
    opened.RACY_SECONDS = window
    zarr.open_group(vcfvirtual.open_store(store), mode="r", zarr_format=2)
else:
    zarr.open_group(store, mode="r")
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""

STATES = ("first open, nothing kept", "verdict kept", "opened before")


def timed(how: str, store: str, cache_dir: str, window: float) -> tuple[float, float]:
    """One fresh process's (wall, CPU) seconds of the imports and the open."""
    env = {**os.environ, "VCFVIRTUAL_CACHE_DIR": cache_dir}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, how, store, str(window)], check=True, capture_output=True, text=True, env=env
    ).stdout
    wall, cpu = json.loads(out.strip().splitlines()[-1])
    return wall, cpu


def measure(refs: Path, theirs: Path, runs: int) -> dict[str, list[tuple[float, float]]]:
    """``runs`` of each state and of bio2zarr's open, each state in turn."""
    from vcfvirtual.refs.opened import RACY_SECONDS

    results: dict[str, list[tuple[float, float]]] = {state: [] for state in (*STATES, "bio2zarr")}
    with tempfile.TemporaryDirectory(prefix="vcfvirtual-opens-") as tmp:
        folders = {state: Path(tmp, str(i)) for i, state in enumerate(STATES)}
        # Prime the two states that keep something: a verdict, and what an open found.
        timed("ours", str(refs), str(folders["verdict kept"]), 1e9)
        timed("ours", str(refs), str(folders["opened before"]), RACY_SECONDS)
        for _ in range(runs):
            shutil.rmtree(folders["first open, nothing kept"], ignore_errors=True)
            results[STATES[0]].append(timed("ours", str(refs), str(folders[STATES[0]]), 1e9))
            results[STATES[1]].append(timed("ours", str(refs), str(folders[STATES[1]]), 1e9))
            results[STATES[2]].append(timed("ours", str(refs), str(folders[STATES[2]]), RACY_SECONDS))
            results["bio2zarr"].append(timed("theirs", str(theirs), tmp, RACY_SECONDS))
    return results


def markdown(results: dict[str, list[tuple[float, float]]], refs: Path, runs: int) -> str:
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    theirs = statistics.median(c for _, c in results["bio2zarr"])
    lines = [
        f"{refs.name}: imports + open in a fresh process (zarr imported first, untimed), medians of {runs}, "
        f"ms; load {load}",
        "",
        "| open | wall ms | CPU ms | CPU - bio2zarr's |",
        "| --- | --- | --- | --- |",
    ]
    for state, values in results.items():
        wall = statistics.median(w for w, _ in values) * 1e3
        cpu = statistics.median(c for _, c in values) * 1e3
        lines.append(f"| {state} | {wall:.1f} | {cpu:.1f} | {cpu - theirs * 1e3:+.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("refs", type=Path, help="our Kerchunk JSON (local, its cache local)")
    parser.add_argument("bio2zarr", type=Path, help="bio2zarr's store of the same BCF")
    parser.add_argument("--runs", type=int, default=7, help="runs of each state (default 7)")
    parser.add_argument("--output", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    settle(args.refs)
    text = markdown(measure(args.refs, args.bio2zarr, args.runs), args.refs, args.runs)
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
