"""An sgkit analysis on a vcfvirtual store: site-frequency spectra and a PCA of two
simulated populations, read from a BCF that was never converted.

    python examples/sgkit_analysis.py --sgkit-python /path/to/sgkit-env/bin/python

Two steps in two environments, because sgkit 0.10 needs zarr 2 while vcfvirtual's
indexing needs zarr 3 (VirtualiZarr):

1. here (vcfvirtual's environment): msprime simulates two populations split 2,000
   generations ago (50 diploids each, 2 Mb), bcftools writes the BCF, vcfvirtual indexes
   it to Kerchunk JSON;
2. in the sgkit environment (``--sgkit-part``; it needs only sgkit, matplotlib and
   vcfvirtual's codec, found by its numcodecs entry point): open the JSON with xarray,
   count alleles per population with sgkit (``count_cohort_alleles``), compute Fst
   (``sgkit.Fst``), each population's unfolded site-frequency spectrum, and a PCA of the
   per-sample alternate allele counts (``count_call_alleles``), and save the plot.

Step 1 then checks the allele counts sgkit read against bcftools' own reading of the
BCF, so a plot of wrong data cannot pass silently. The plot goes to
docs/images/sgkit_example.png (``--png``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
POPULATIONS = ("A", "B")


def simulate(workdir: Path, diploids: int, length: float, seed: int) -> tuple[Path, list[str]]:
    """The BCF and each sample's population."""
    import msprime

    demography = msprime.Demography()
    for name in (*POPULATIONS, "ancestral"):
        demography.add_population(name=name, initial_size=10_000)
    demography.add_population_split(time=2_000, derived=list(POPULATIONS), ancestral="ancestral")
    ts = msprime.sim_ancestry(
        samples={p: diploids for p in POPULATIONS},
        demography=demography,
        sequence_length=length,
        recombination_rate=1e-8,
        random_seed=seed,
    )
    ts = msprime.sim_mutations(ts, rate=1e-8, random_seed=seed)
    names = [f"{POPULATIONS[ts.node(ind.nodes[0]).population]}_{ind.id}" for ind in ts.individuals()]
    vcf = workdir / "two_populations.vcf"
    with open(vcf, "w") as f:
        ts.write_vcf(f, contig_id="chr1", individual_names=names)
    bcf = workdir / "two_populations.bcf"
    import pysam.bcftools  # htslib's bcftools, bundled with pysam (main environment only)

    pysam.bcftools.view("--no-version", "-Ob", "-o", str(bcf), str(vcf), catch_stdout=False)
    vcf.unlink()
    return bcf, [n.split("_")[0] for n in names]


def bcftools_allele_counts(bcf: Path, populations: list[str], max_alleles: int) -> np.ndarray:
    """(variants, populations, alleles) allele counts from bcftools' reading of the BCF."""
    import pysam.bcftools

    text = pysam.bcftools.query("-f", "[%GT\t]\n", str(bcf))
    pop_index = np.array([POPULATIONS.index(p) for p in populations])
    rows = text.splitlines()
    counts = np.zeros((len(rows), len(POPULATIONS), max_alleles), dtype=np.int64)
    for v, row in enumerate(rows):
        for j, gt in enumerate(row.rstrip("\t").split("\t")):
            for allele in gt.replace("|", "/").split("/"):
                if allele != ".":
                    counts[v, pop_index[j], int(allele)] += 1
    return counts


def main_part(args) -> None:
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    bcf, populations = simulate(workdir, args.diploids, args.length, args.seed)
    refs = workdir / "two_populations.vcz.json"
    subprocess.run(
        [Path(sys.executable).parent / "vcfvirtual", "index", "--force", "--no-progress", str(bcf), "-o", str(refs)],
        check=True,
    )
    (workdir / "populations.json").write_text(json.dumps(populations))
    sgkit_python = args.sgkit_python or os.environ.get("SGKIT_PYTHON")
    if not sgkit_python:
        raise SystemExit("name the sgkit environment's Python with --sgkit-python or SGKIT_PYTHON")
    subprocess.run(
        [sgkit_python, __file__, "--sgkit-part", "--workdir", str(workdir), "--png", str(args.png)], check=True
    )
    ours = np.load(workdir / "cohort_allele_counts.npy")
    expected = bcftools_allele_counts(bcf, populations, ours.shape[2])
    if not np.array_equal(ours, expected):
        raise SystemExit("sgkit's allele counts differ from bcftools' reading of the BCF")
    print(
        f"{ours.shape[0]} variants x {len(populations)} samples: sgkit's allele counts equal bcftools'; "
        f"plot in {args.png}"
    )


def sgkit_part(args) -> None:
    """Runs in the sgkit environment (zarr 2): only the codec of vcfvirtual is used."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import sgkit as sg
    import xarray as xr

    workdir = args.workdir
    # The engine vcfvirtual-codec registers: the line docs/howto/share.md gives, on zarr 2 here.
    ds = xr.open_dataset(workdir / "two_populations.vcz.json", engine="vcfvirtual", chunks={})
    populations = json.loads((workdir / "populations.json").read_text())
    ds["sample_cohort"] = ("samples", np.array([POPULATIONS.index(p) for p in populations]))
    ds = sg.count_cohort_alleles(ds)
    counts = ds.cohort_allele_count.values  # (variants, cohorts, alleles)
    np.save(workdir / "cohort_allele_counts.npy", counts)
    fst = sg.Fst(sg.window_by_variant(ds, size=ds.sizes["variants"]), estimator="Hudson")
    fst_ab = float(fst.stat_Fst.values[0, 0, 1])

    # Unfolded SFS: sites by the number of derived (non-reference) alleles per population.
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    n_chrom = 2 * np.bincount(ds.sample_cohort.values)
    for c, name in enumerate(POPULATIONS):
        derived = counts[:, c, 1:].sum(axis=1).astype(np.int64)
        sfs = np.bincount(derived, minlength=n_chrom[c] + 1)[1 : n_chrom[c]]
        left.plot(np.arange(1, n_chrom[c]), sfs, marker=".", label=f"population {name}")
    left.set_xlabel("derived allele count")
    left.set_ylabel("sites")
    left.set_yscale("log")
    left.set_title(f"Site-frequency spectra (Hudson's Fst = {fst_ab:.3f})")
    left.legend()

    # PCA of alternate allele counts per sample (sites variable in the whole sample).
    call_counts = sg.count_call_alleles(ds).call_allele_count.values  # (variants, samples, alleles)
    alt = (call_counts[:, :, 1:].sum(axis=2)).astype(float)
    alt = alt[alt.std(axis=1) > 0]
    centred = (alt - alt.mean(axis=1, keepdims=True)) / alt.std(axis=1, keepdims=True)
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    explained = s**2 / (s**2).sum()
    for c, name in enumerate(POPULATIONS):
        keep = ds.sample_cohort.values == c
        right.scatter(vt[0, keep] * s[0], vt[1, keep] * s[1], s=14, label=f"population {name}")
    right.set_xlabel(f"PC1 ({100 * explained[0]:.1f}%)")
    right.set_ylabel(f"PC2 ({100 * explained[1]:.1f}%)")
    right.set_title(f"PCA of {alt.shape[0]} variable sites, {alt.shape[1]} samples")
    right.legend()
    fig.tight_layout()
    args.png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.png, dpi=100)
    print(f"sgkit: {ds.sizes['variants']} variants, Fst(A, B) = {fst_ab:.3f}; wrote {args.png}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=HERE / "data" / "sgkit")
    parser.add_argument("--png", type=Path, default=HERE.parent / "docs" / "images" / "sgkit_example.png")
    parser.add_argument("--sgkit-python", help="Python of an environment with sgkit (default: $SGKIT_PYTHON)")
    parser.add_argument("--diploids", type=int, default=50, help="diploid samples per population")
    parser.add_argument("--length", type=float, default=2e6, help="sequence length simulated (bp)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sgkit-part", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.png = args.png.resolve()
    (sgkit_part if args.sgkit_part else main_part)(args)


if __name__ == "__main__":
    main()
