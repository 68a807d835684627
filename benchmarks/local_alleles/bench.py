"""Local alleles: index and read times of call_LA/LAD/LPL against the plain store's
call_genotype/AD/PL, and bio2zarr's --local-alleles conversion, on a random diploid cohort
with 2-4 alleles and AD/PL (written here as VCF text, converted to BCF with htslib).

    python benchmarks/local_alleles/bench.py [n_variants] [n_samples]
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pysam
import pysam.bcftools
import xarray as xr

import vcfvirtual

HEADER = """##fileformat=VCFv4.3
##contig=<ID=chr1,length=100000000>
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">
##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Read depth">
##FORMAT=<ID=PL,Number=G,Type=Integer,Description="Phred-scaled genotype likelihoods">
"""


def disk_bytes(path: Path) -> int:
    """Bytes of a cache on disk: a file's, or a folder of parts' (the columns layout) summed."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def cohort(path: Path, n_variants: int, n_samples: int, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    columns = "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t"
    lines = [HEADER + columns + "\t".join(f"s{j}" for j in range(n_samples))]
    for i in range(n_variants):
        k = int(rng.choice([2, 2, 2, 3, 4]))
        gt = rng.integers(0, k, (n_samples, 2))
        ad = rng.integers(0, 60, (n_samples, k))
        pl = rng.integers(0, 255, (n_samples, math.comb(k + 1, 2)))
        calls = [
            f"{a}/{b}:{','.join(map(str, d))}:{d.sum()}:{','.join(map(str, p))}"
            for (a, b), d, p in zip(gt.tolist(), ad, pl)
        ]
        alts = ",".join("CGT"[: k - 1])
        lines.append(f"chr1\t{100 + 10 * i}\t.\tA\t{alts}\t.\tPASS\t.\tGT:AD:DP:PL\t" + "\t".join(calls))
    vcf = path.with_suffix(".vcf")
    vcf.write_text("\n".join(lines) + "\n")
    with pysam.VariantFile(str(vcf)) as src, pysam.VariantFile(str(path), "wb", header=src.header) as dst:
        for rec in src:
            dst.write(rec)
    pysam.bcftools.index(str(path))
    return path


def timed(f, *args, **kwargs) -> float:
    t = time.perf_counter()
    f(*args, **kwargs)
    return time.perf_counter() - t


def read_all(refs: Path, name: str) -> np.ndarray:
    return xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)[name].values


def best_read(refs: Path, name: str, repeats: int = 3) -> float:
    return min(timed(read_all, refs, name) for _ in range(repeats))


def index_time(bcf: Path, refs: Path, local_alleles: bool) -> float:
    options = dict(refs_path=refs, cache_path=refs.with_suffix(".cache"), force=True, local_alleles=local_alleles)
    vcfvirtual.index(bcf, **options)  # numba's compilation and the page cache, first
    return timed(vcfvirtual.index, bcf, **options)


def main() -> None:
    n_variants = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    n_samples = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    tmp = Path(tempfile.mkdtemp())
    bcf = cohort(tmp / "cohort.bcf", n_variants, n_samples)
    size = bcf.stat().st_size / 1e6
    print(f"{n_variants} variants x {n_samples} samples, BCF {size:.1f} MB, load {os.getloadavg()[0]:.1f}")
    plain, local = tmp / "plain.json", tmp / "local.json"
    for refs, la in ((plain, False), (local, True)):
        t = index_time(bcf, refs, la)
        cache = disk_bytes(refs.with_suffix(".cache")) / 1e6
        print(f"index {'--local-alleles' if la else 'plain':16s} {t:.2f} s, cache {cache:.2f} MB")
    for ours, theirs in (("call_LA", "call_genotype"), ("call_LAD", "call_AD"), ("call_LPL", "call_PL")):
        print(
            f"read {ours:9s} {best_read(local, ours):.3f} s   ({theirs}, plain store: {best_read(plain, theirs):.3f} s)"
        )
    import zarr
    from bio2zarr import vcf

    t = timed(vcf.convert, [str(bcf)], str(tmp / "ref.vcz"), local_alleles=True, worker_processes=0)
    print(f"bio2zarr vcf2zarr convert --local-alleles: {t:.1f} s, load {os.getloadavg()[0]:.1f}")
    ref = zarr.open_group(str(tmp / "ref.vcz"), mode="r")
    for name in ("call_LA", "call_LAD", "call_LPL"):
        print(f"bio2zarr store: read {name} {timed(ref[name].__getitem__, slice(None)):.3f} s")


if __name__ == "__main__":
    main()
