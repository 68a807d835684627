"""Parallel and several-file indexing against serial indexing and vcf2zarr, in one run.

    python benchmarks/parallel.py COHORT.bcf [...] --workers 2 --parts 4 --workdir DIR

For each BGZF BCF (e.g. the cohorts benchmarks/bench.py writes):

* one file: `vcfvirtual index` serially, and with `-j WORKERS` when the BCF has no CSI
  index (cut by a block scan) and when it has one (`bcftools index`); the parallel caches
  must equal the serial one byte for byte (`identical` in the table);
* several files: the BCF split by position into `--parts` files (`bcftools view -r
  --regions-overlap pos`, every record in exactly one file), indexed as one store serially
  and with `-j WORKERS`, against `vcf2zarr convert -p WORKERS` on the same files; the
  store's positions and genotypes must equal those of the one-file store.

Times are the best of --repeats CLI runs (after a warm-up run), so they include start-up.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def timed(cmd) -> float:
    start = time.perf_counter()
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def best_of(repeats: int, cmd, warm_up: bool = True) -> float:
    if warm_up:
        timed(cmd)
    return min(timed(cmd) for _ in range(repeats))


CHECKSUM = """
import hashlib, sys, xarray as xr, vcfvirtual
ds = xr.open_zarr(vcfvirtual.open_store(sys.argv[1]), consolidated=False)
h = hashlib.sha1()
for name in ("variant_contig", "variant_position", "variant_allele", "call_genotype", "call_genotype_phased"):
    h.update(ds[name].values.tobytes() if ds[name].dtype.kind != "T" else str(ds[name].values.tolist()).encode())
print(h.hexdigest())
"""


def store_checksum(refs: Path) -> str:
    return subprocess.run(
        [sys.executable, "-c", CHECKSUM, str(refs)], check=True, capture_output=True, text=True
    ).stdout.strip()


def split_by_position(bcf: Path, parts: int, work: Path) -> list[Path]:
    """``parts`` BCFs of consecutive records, cut at evenly spaced positions."""
    lines = subprocess.run(
        ["bcftools", "query", "-f", "%CHROM\t%POS\n", str(bcf)], check=True, capture_output=True, text=True
    ).stdout.split()
    chroms, positions = lines[0::2], [int(p) for p in lines[1::2]]
    if len(set(chroms)) != 1:
        raise SystemExit(f"{bcf}: split_by_position expects one contig")
    n = len(positions)
    bounds = [positions[i * n // parts] for i in range(parts)] + [positions[-1] + 1]
    out = []
    for i in range(parts):
        part = work / f"{bcf.stem}.part{i}.bcf"
        region = f"{chroms[0]}:{bounds[i]}-{bounds[i + 1] - 1}"
        subprocess.run(
            [
                "bcftools",
                "view",
                "--no-version",
                "--regions-overlap",
                "pos",
                "-r",
                region,
                "-Ob",
                "-o",
                str(part),
                str(bcf),
            ],
            check=True,
        )
        subprocess.run(["bcftools", "index", "-f", str(part)], check=True)
        out.append(part)
    return out


def bench(source: Path, args, work: Path) -> list[dict]:
    rows = []
    # A copy: the run adds and removes the BCF's CSI index.
    bcf = work / source.name
    if not bcf.exists() or bcf.stat().st_size != source.stat().st_size:
        shutil.copy(source, bcf)
    index = [BIN / "vcfvirtual", "index", "--force", "--no-progress"]
    serial_cache = work / f"{bcf.name}.serial.cache.bcf"
    serial_refs = work / f"{bcf.name}.serial.vcz.json"
    serial = best_of(args.repeats, [*index, "-o", serial_refs, "--cache", serial_cache, bcf])
    rows.append(dict(cohort=bcf.name, run="1 file, serial", seconds=serial, base=serial, check="-"))
    csi = Path(str(bcf) + ".csi")
    for with_csi in (False, True):
        if with_csi:
            subprocess.run(["bcftools", "index", "-f", str(bcf)], check=True)
        else:
            csi.unlink(missing_ok=True)
        cache = work / f"{bcf.name}.par.cache.bcf"
        cmd = [*index, "-j", args.workers, "-o", work / f"{bcf.name}.par.vcz.json", "--cache", cache, bcf]
        seconds = best_of(args.repeats, cmd)
        same = filecmp.cmp(cache, serial_cache, shallow=False)
        rows.append(
            dict(
                cohort=bcf.name,
                run=f"1 file, -j {args.workers}, " + ("CSI" if with_csi else "block scan"),
                seconds=seconds,
                base=serial,
                check="identical" if same else "CACHE DIFFERS",
            )
        )
    parts = split_by_position(bcf, args.parts, work)
    expected = store_checksum(serial_refs)
    for workers in (1, args.workers):
        refs = work / f"{bcf.name}.parts{workers}.vcz.json"
        seconds = best_of(args.repeats, [*index, "-j", workers, "-o", refs, *parts])
        same = store_checksum(refs) == expected
        rows.append(
            dict(
                cohort=bcf.name,
                run=f"{args.parts} files, -j {workers}",
                seconds=seconds,
                base=serial,
                check="same values" if same else "VALUES DIFFER",
            )
        )
    if not args.skip_bio2zarr:
        out = work / f"{bcf.name}.parts.bio2zarr.vcz"
        shutil.rmtree(out, ignore_errors=True)
        seconds = timed([BIN / "vcf2zarr", "convert", "--force", "-p", args.workers, *parts, out])
        rows.append(
            dict(
                cohort=bcf.name,
                run=f"vcf2zarr convert -p {args.workers}, {args.parts} files",
                seconds=seconds,
                base=rows[-1]["seconds"],
                check="-",
            )
        )
    for r in rows[-4:] if args.skip_bio2zarr else rows[-5:]:
        print(f"  {r['cohort']}: {r['run']}: {r['seconds']:.2f}s ({r['check']})", file=sys.stderr)
    return rows


def table(rows) -> str:
    lines = ["| cohort | run | seconds | ratio | check |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        ratio = r["seconds"] / r["base"]
        lines.append(f"| {r['cohort']} | {r['run']} | {r['seconds']:.2f} | {ratio:.2f}x | {r['check']} |")
    return "\n".join(lines) + (
        "\n\nratio: to the serial one-file run; for vcf2zarr, to `vcfvirtual index -j` on the same files."
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bcf", nargs="+", type=Path, help="BGZF BCFs with one contig each")
    parser.add_argument("--workers", type=int, default=2, help="processes for -j and vcf2zarr -p (default 2)")
    parser.add_argument("--parts", type=int, default=4, help="files to split each BCF into (default 4)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement; the best is kept")
    parser.add_argument("--workdir", type=Path, required=True, help="where outputs and split files go")
    parser.add_argument("--skip-bio2zarr", action="store_true", help="do not run vcf2zarr")
    parser.add_argument("--output", type=Path, help="also write the table (markdown) here")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for bcf in args.bcf:
        rows += bench(bcf.resolve(), args, args.workdir)
    text = table(rows)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
