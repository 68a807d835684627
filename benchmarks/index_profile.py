"""Where `vcfvirtual index`'s CPU goes, stage by stage, against one `bgzip -dc` pass (issue 24).

    python benchmarks/index_profile.py COHORT.bcf [...] --workdir DIR [--repeats 1]

The index reports no per-stage times (its -v log says what it did, not how long), so each
run is a fresh process that runs the CLI (``vcfvirtual.cli.main``, serial, the default
columns layout) with the functions that begin each stage wrapped in a timer of the calling
thread's CPU (``time.thread_time``): inflating a BGZF block, the record scan, the demux into
segments, compressing a segment (on the writer's threads) and writing it, and building and
writing the references. A stage's time excludes the other stages it calls (a stack per
thread), so the stages add up; ``start-up`` is the process's CPU until the CLI and the probed modules are imported,
``other`` what is left of the process's CPU (planning, the header, Python between stages).
The functions are named in :data:`PROBES` (module:qualname); one not found (the code moved
on) is listed under the table rather than guessed, and its stage shows ``-``.

A second, unwrapped, fresh run gives the index's CPU and peak RSS (ru_maxrss) as a user
sees them. Ratios are CPU / the CPU of one `bgzip -dc` pass over the same BCF (the floor:
every byte inflated once). Times are medians of --repeats runs.

For the issue's three cohorts: A and C (benchmarks/bench.py's msprime cohorts, 10,000 x
25 Mb and 100,000 x 2 Mb) and the sites-only wide-INFO one (``benchmarks/wide_info.py
--make-only`` prints its path).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh import child_cpu, compile_bytecode, timed_process  # noqa: E402

# (module:qualname, stage): the function whose calls are the stage's work.
PROBES = [
    ("vcfvirtual_codec.bcf.bgzf:inflate_block", "inflate"),
    ("vcfvirtual_codec.bcf.bgzf:inflate_block_serial", "inflate"),
    ("vcfvirtual.scan.scanner:_RecordAccumulator._scan", "scan"),
    ("vcfvirtual.scan.scanner:_RecordAccumulator._count", "scan"),
    ("vcfvirtual.cache.columns:SegmentPlan.demux", "demux"),
    ("vcfvirtual.cache.columns:_encode", "compress"),
    ("vcfvirtual.cache.columns:ColumnsWriter._write", "write"),
    ("vcfvirtual.api:_build_manifests", "references"),
    ("vcfvirtual.api:_write_references", "references"),
]
STAGES = ["inflate", "scan", "demux", "compress", "write", "references"]

# The fresh process: argv = probes JSON ("[]" for an unwrapped run), then the CLI's
# arguments. Prints one JSON line on stderr: start-up CPU, each stage's CPU, the process's
# CPU and its peak RSS.
CHILD = r"""
import functools, importlib, json, resource, sys, threading, time
probes, argv = json.loads(sys.argv[1]), sys.argv[2:]
from vcfvirtual.cli import main
for target, _ in probes:  # the modules the CLI imports as it runs: start-up too
    try:
        importlib.import_module(target.split(":")[0])
    except ImportError:
        pass
start_up = time.process_time()
spent, local, lock, missing = {}, threading.local(), threading.Lock(), []

def wrap(stage, f):
    @functools.wraps(f)
    def timed(*a, **k):
        stack = local.__dict__.setdefault("stack", [])
        t0 = time.thread_time()
        stack.append(0.0)
        try:
            return f(*a, **k)
        finally:
            inner, took = stack.pop(), time.thread_time() - t0
            if stack:
                stack[-1] += took  # the enclosing stage's own time leaves this out
            with lock:
                spent[stage] = spent.get(stage, 0.0) + took - inner
    return timed

def install(target, stage):
    module, qualname = target.split(":")
    *path, name = qualname.split(".")
    try:
        owner = importlib.import_module(module)
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)
    except (ImportError, AttributeError):
        missing.append(target)
        return
    wrapped = wrap(stage, original)
    if path:  # a method: looked up on its class at each call
        setattr(owner, name, wrapped)
        return
    # A function: every module that imported it by name holds its own reference.
    for m in list(sys.modules.values()):
        d = getattr(m, "__dict__", None) or {}
        for key in [k for k, v in list(d.items()) if v is original]:
            d[key] = wrapped

for target, stage in probes:
    install(target, stage)
set_up = time.process_time() - start_up
try:
    main(argv, standalone_mode=False)
finally:
    me = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"start_up": start_up, "set_up": set_up, "stages": spent, "missing": missing,
                      "cpu": me.ru_utime + me.ru_stime, "rss_mb": me.ru_maxrss / 1024}), file=sys.stderr)
"""


def index_run(bcf: Path, work: Path, probes: list[tuple[str, str]], extra: list[str]) -> dict:
    """One fresh `vcfvirtual index` process (wrapped by ``probes``): its own report, and its
    wall and CPU as the parent saw them."""
    refs = work / (bcf.name + ".profile.vcz.json")
    cache = work / (bcf.name + ".profile.vcz.cache.columns")
    argv = ["index", "--force", "--no-progress", "-o", str(refs), "--cache", str(cache), *extra, str(bcf)]
    cmd = [sys.executable, "-c", CHILD, json.dumps(probes), *argv]
    cpu0 = child_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"index_profile.py: indexing {bcf} failed:\n{proc.stderr}")
    got = json.loads(proc.stderr.strip().splitlines()[-1])
    got["parent_cpu"] = child_cpu() - cpu0
    return got


def profile(bcf: Path, work: Path, repeats: int, extra: list[str]) -> dict:
    """Medians of ``repeats``: bgzip -dc CPU, the plain index's CPU and RSS, the stages."""
    bgzip = statistics.median(
        timed_process(["bgzip", "-dc", str(bcf)], stdout=subprocess.DEVNULL)[1] for _ in range(repeats)
    )
    plain = [index_run(bcf, work, [], extra) for _ in range(repeats)]
    probed = [index_run(bcf, work, PROBES, extra) for _ in range(repeats)]
    stages = {s: statistics.median(p["stages"].get(s, 0.0) for p in probed) for s in STAGES}
    start_up = statistics.median(p["start_up"] for p in probed)
    cpu = statistics.median(p["cpu"] - p["set_up"] for p in probed)
    return dict(
        bcf=bcf,
        mb=bcf.stat().st_size / 1e6,
        bgzip=bgzip,
        cpu=statistics.median(p["parent_cpu"] for p in plain),
        rss=max(p["rss_mb"] for p in plain),
        probed_cpu=cpu,
        start_up=start_up,
        stages=stages,
        other=cpu - start_up - sum(stages.values()),
        missing=sorted({m for p in probed for m in p["missing"]}),
    )


def _x(a: float, b: float) -> str:
    return f"{a:.2f} ({a / b:.1f}x)" if b > 0 else f"{a:.2f}"


def markdown(rows: list[dict], repeats: int) -> str:
    head = (
        "| cohort | BCF MB | bgzip -dc CPU s | index CPU s (/ bgzip) | peak RSS MB | start-up | "
        + " | ".join(STAGES)
        + " | other |"
    )
    load = os.getloadavg()
    lines = [
        f"Index CPU by stage (seconds, in brackets / one `bgzip -dc` pass; median of {repeats}; "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores):",
        "",
        head,
        "|" + " --- |" * (head.count("|") - 1),
    ]
    missing = set()
    for r in rows:
        b = r["bgzip"]
        cells = [_x(r["stages"][s], b) if r["stages"][s] else "-" for s in STAGES]
        lines.append(
            f"| {r['bcf'].name} | {r['mb']:.1f} | {b:.2f} | {_x(r['cpu'], b)} | {r['rss']:.0f} "
            f"| {_x(r['start_up'], b)} | " + " | ".join(cells) + f" | {_x(r['other'], b)} |"
        )
        missing.update(r["missing"])
    if missing:
        lines += ["", "Probes not found (their stage shows `-`): " + ", ".join(sorted(missing))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bcf", type=Path, nargs="+", help="cohorts (BGZF BCF)")
    parser.add_argument("--workdir", type=Path, required=True, help="where the stores are written")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each; medians (default 1)")
    parser.add_argument("--index-args", default="", help="more `vcfvirtual index` options, e.g. '-s 1000'")
    parser.add_argument("--output", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    compile_bytecode()  # as an installed wheel has it: start-up is not our modules' compile
    rows = []
    for bcf in args.bcf:
        rows.append(profile(bcf, args.workdir, args.repeats, args.index_args.split()))
        print(f"  {bcf.name}: done", file=sys.stderr)
    text = markdown(rows, args.repeats)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
