"""`vcfvirtual verify` against `vcfvirtual index` on the same simulated cohort.

    python benchmarks/verify.py --samples 2000 --length 5e6 --workdir /tmp/vv   # ~17.5k variants
    python benchmarks/verify.py --samples 2000 --length 5e6 --code /path/to/other/checkout   # compare code

Writes a diploid msprime cohort as a BCF (biallelic sites, with pysam's bundled bcftools:
nothing outside pip), indexes it once as a warm-up (numba's on-disk cache), then times in
fresh processes, best of --repeats: `vcfvirtual index --force`, `vcfvirtual verify` in one
process, with `-j WORKERS`, and `--sample 3`; wall seconds, peak resident memory of the
process and its workers (summed from /proc, Linux), and each verify's ratio to the index
time.
`--code DIR` runs another checkout's vcfvirtual (its DIR and DIR/codec first on
PYTHONPATH), e.g. the commit before a change. Prints one markdown table and the machine's
load average, which the timings depend on.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def make_cohort(workdir: Path, samples: int, length: float, seed: int) -> Path:
    """A BCF of a simulated cohort, made once and kept in ``workdir``."""
    import msprime
    import pysam.bcftools

    bcf = workdir / f"sim_{samples}_{length:g}.bcf"
    if bcf.exists():
        return bcf
    ts = msprime.sim_ancestry(
        samples=samples, population_size=10_000, sequence_length=length, recombination_rate=1e-8, random_seed=seed
    )
    ts = msprime.sim_mutations(ts, rate=1e-8, random_seed=seed)
    vcf = workdir / (bcf.name + ".vcf")
    with open(vcf, "w") as f:
        ts.write_vcf(f, contig_id="chr1")
    tmp = workdir / (bcf.name + ".tmp")
    pysam.bcftools.view("-m2", "-M2", "-Ob", "-o", str(tmp), str(vcf), catch_stdout=False)
    vcf.unlink()
    os.replace(tmp, bcf)
    return bcf


def _tree_rss_mb(pid: int) -> float:
    """Resident MB of ``pid`` and its descendants (worker processes), from /proc; pages a
    fork shares are counted in each process, so this bounds the true total from above."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total / 1024


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, peak resident MB of the process and its workers) of one run of
    ``cmd``, sampled from /proc every 20 ms; run outside any checkout, so ``python -m``
    imports the code PYTHONPATH names, not the working directory's."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_mb(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return wall, peak


def best_of(repeats: int, cmd: list[str], env: dict) -> tuple[float, float]:
    runs = [timed(cmd, env) for _ in range(repeats)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=2000, help="diploid individuals (default: %(default)s)")
    parser.add_argument("--length", type=float, default=5e6, help="sequence length (default: %(default)g)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="-j for the parallel verify (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("bench-verify"))
    parser.add_argument("--code", type=Path, default=None, help="run the vcfvirtual of this checkout instead")
    args = parser.parse_args(argv)

    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    bcf = make_cohort(args.workdir, args.samples, args.length, args.seed)
    env = dict(os.environ)
    code = (args.code or HERE.parent).resolve()
    env["PYTHONPATH"] = os.pathsep.join([str(code), str(code / "codec"), env.get("PYTHONPATH", "")])
    cli = [sys.executable, "-m", "vcfvirtual.cli"]
    refs = args.workdir / (bcf.name + ".vcz.json")
    index = [*cli, "index", "--force", "-o", str(refs), str(bcf)]
    subprocess.run(index, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")  # warm-up

    rows = [("index", *best_of(args.repeats, index, env))]
    verify = [*cli, "verify", "--no-progress", str(refs)]
    runs = [("verify", verify)]
    help_text = subprocess.run([*cli, "verify", "--help"], env=env, capture_output=True, text=True, cwd="/").stdout
    if "--workers" in help_text:
        runs.append((f"verify -j {args.workers}", [*verify, "-j", str(args.workers)]))
    if "--sample" in help_text:
        runs.append(("verify --sample 3", [*verify, "--sample", "3", "--seed", "1"]))
    for label, cmd in runs:
        rows.append((label, *best_of(args.repeats, cmd, env)))

    import pysam

    with pysam.VariantFile(str(bcf)) as vf:
        n_records = sum(1 for _ in vf)
    print(f"{n_records:,} variants x {args.samples:,} samples; {bcf.stat().st_size / 2**20:.1f} MiB BCF; code {code}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; load {os.getloadavg()}\n")
    print("| command | wall (s) | peak RSS (MB) | / index |")
    print("|---|---:|---:|---:|")
    index_wall = rows[0][1]
    for label, wall, rss in rows:
        print(f"| `{label}` | {wall:.2f} | {rss:.0f} | {wall / index_wall:.1f}x |")


if __name__ == "__main__":
    main()
