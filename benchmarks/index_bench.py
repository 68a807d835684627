"""Index time and cache size on an msprime-simulated cohort, against the alternatives.

    python benchmarks/index_bench.py --samples 1000 --length 20e6

Simulates diploid genomes with msprime (human-like mutation and recombination rates),
writes them as BCF with bcftools, then times in the same run:
  * vcfvirtual index (this project),
  * one `bgzip -dc` pass over the BCF (the floor: every byte inflated once),
  * bio2zarr `vcf2zarr convert` (the conversion a user would otherwise run),
and reports sizes and ratios. Needs msprime and bcftools (pip install msprime; apt-get
install bcftools tabix).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def simulate_bcf(path: Path, n_samples: int, length: float, seed: int) -> Path:
    import msprime

    ts = msprime.sim_ancestry(samples=n_samples, population_size=10_000, sequence_length=length,
                              recombination_rate=1e-8, random_seed=seed)
    ts = msprime.sim_mutations(ts, rate=1e-8, random_seed=seed)
    vcf = path.with_suffix(".vcf")
    with open(vcf, "w") as f:
        ts.write_vcf(f, contig_id="chr1")
    subprocess.run(["bcftools", "view", "-Ob", "-o", str(path), str(vcf)], check=True)
    subprocess.run(["bcftools", "index", str(path)], check=True)
    vcf.unlink()
    return path


def timed(cmd, **kw) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--length", type=float, default=20e6, help="simulated sequence length (bp)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--skip-bio2zarr", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vcfvirtual-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    bcf = work / f"sim_{args.samples}.bcf"
    if not bcf.exists():
        simulate_bcf(bcf, args.samples, args.length, args.seed)
    bindir = Path(sys.executable).parent
    # Warm the numba cache so the timing is of indexing, not of compiling.
    subprocess.run([bindir / "vcfvirtual", "index", "--force", "--no-progress", str(bcf),
                    "--cache", str(work / "warm.cache"), "-o", str(work / "warm.json")], check=True,
                   capture_output=True)
    t_index = timed([bindir / "vcfvirtual", "index", "--force", "--no-progress", str(bcf)], capture_output=True)
    t_bgzip = timed(f"bgzip -dc {bcf} > /dev/null" if shutil.which("bgzip") else
                    f"{sys.executable} -c \"import gzip,sys; f=gzip.open('{bcf}'); [0 for _ in iter(lambda: f.read(1<<20), b'')]\"",
                    shell=True)
    rows = [("vcfvirtual index", t_index), ("bgzip -dc (floor)", t_bgzip)]
    if not args.skip_bio2zarr:
        out = work / "bio2zarr.vcz"
        shutil.rmtree(out, ignore_errors=True)
        t_b2z = timed([bindir / "vcf2zarr", "convert", "--force", str(bcf), str(out)], capture_output=True)
        rows.append(("vcf2zarr convert", t_b2z))
    bcf_size = bcf.stat().st_size
    cache_size = Path(str(bcf) + ".vcz.cache.bcf").stat().st_size
    import pysam

    with pysam.VariantFile(str(bcf)) as vf:
        n_var = sum(1 for _ in vf.fetch())
    print(f"\ninput: {args.samples} samples, {n_var} variants, BCF {bcf_size / 1e6:.1f} MB ({bcf})")
    print(f"machine: {os.cpu_count()} cores")
    print(f"{'step':24} {'seconds':>9} {'vs vcfvirtual':>14}")
    for name, t in rows:
        print(f"{name:24} {t:9.2f} {t / t_index:13.2f}x")
    print(f"cache (raw layout): {cache_size / 1e6:.1f} MB = {cache_size / bcf_size:.1f}x the BCF")
    refs = Path(str(bcf) + ".vcz.json").stat().st_size
    print(f"Kerchunk JSON: {refs / 1e3:.1f} kB")


if __name__ == "__main__":
    main()
