"""Write a small simulated cohort BCF to index: examples/data/example.bcf.

Genotypes are drawn per site from a random allele frequency (Beta(0.5, 0.5)) in
Hardy-Weinberg proportions, a few calls are missing, and some sites are
multi-allelic, so every core VCF Zarr array has something to show. htslib (pysam)
writes the BCF, exactly as bcftools would.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pysam


def write_example(path: Path, n_variants: int = 2000, n_samples: int = 100, seed: int = 42) -> Path:
    rng = np.random.default_rng(seed)
    header = pysam.VariantHeader()
    header.add_line("##contig=<ID=chr20,length=64444167>")
    header.add_line("##contig=<ID=chr21,length=46709983>")
    header.add_line('##FILTER=<ID=LowQual,Description="Low quality">')
    header.add_line('##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">')
    header.add_line('##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">')
    for j in range(n_samples):
        header.add_sample(f"NA{10000 + j}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with pysam.VariantFile(str(path), "wb", header=header) as out:
        half = n_variants // 2
        for contig, count in (("chr20", half), ("chr21", n_variants - half)):
            positions = np.sort(rng.choice(np.arange(60_000, 40_000_000), size=count, replace=False))
            for pos in positions:
                n_alt = 1 if rng.random() < 0.9 else 2
                ref = "ACGT"[rng.integers(4)]
                alts = tuple(b for b in "ACGT" if b != ref)[:n_alt]
                freqs = rng.dirichlet([0.5] * (n_alt + 1))
                calls = rng.choice(n_alt + 1, size=(n_samples, 2), p=freqs)
                rec = out.new_record(
                    contig=contig,
                    start=int(pos) - 1,
                    alleles=(ref, *alts),
                    id=f"rs{pos}" if rng.random() < 0.5 else None,
                    qual=float(np.round(rng.uniform(5, 100), 1)),
                )
                rec.filter.add("PASS" if rec.qual > 20 else "LowQual")
                rec.info["DP"] = int(rng.integers(100, 3000))
                missing = rng.random(n_samples) < 0.02
                phased = rng.random() < 0.5
                for j, sample in enumerate(rec.samples.values()):
                    sample["GT"] = (None, None) if missing[j] else tuple(int(a) for a in calls[j])
                    sample.phased = phased
                out.write(rec)
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", nargs="?", default=str(Path(__file__).parent / "data" / "example.bcf"))
    parser.add_argument("--variants", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    print(write_example(Path(args.path), args.variants, args.samples))
