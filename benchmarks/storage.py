"""Storage per array: our transcode cache against bio2zarr's converted store and the BCF.

    python benchmarks/storage.py cohort.bcf [more.bcf ...]
    python benchmarks/storage.py --samples 1000 --length 5e6   # a simulated cohort (bench.py's)
    python benchmarks/storage.py --info-rich 2000 --length 1e7  # GT and INFO AC/AN/AF/MAF/HWE

For each BCF: ``vcfvirtual index`` (default layout, columns) and ``vcf2zarr convert`` (bio2zarr's
defaults), then one markdown table of bytes per array. Ours is read from the Kerchunk
references: every chunk's byte range, each range counted once (arrays decoded from the same
segments, e.g. ``call_genotype``, ``call_genotype_mask`` and ``call_genotype_phased``, are one
row), plus inlined values. bio2zarr's is the size of each array's files in its store.
The target (issue 24): no row larger than bio2zarr's, the cache no larger than the store.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent


def disk_bytes(path: Path) -> int:
    """Bytes of a cache on disk: a file's, or a folder of parts' (the columns layout) summed."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


@dataclass(frozen=True)
class StorageRow:
    """Bytes one group of arrays takes: ours (ranges of the cache, and inlined) and bio2zarr's."""

    arrays: tuple[str, ...]
    ours: int
    bio2zarr: int
    inlined: bool  # ours held in the references themselves, not in the cache


def our_bytes_per_array(refs_path: Path) -> tuple[dict[tuple[str, ...], int], set[str]]:
    """Bytes per group of arrays sharing byte ranges, from Kerchunk JSON references, and
    the arrays whose chunks are inlined in them."""
    refs = json.loads(refs_path.read_text())["refs"]
    readers: dict[tuple[str, int, int], set[str]] = defaultdict(set)
    inlined: dict[str, int] = defaultdict(int)
    for key, value in refs.items():
        array, _, chunk = key.rpartition("/")
        if not array or chunk.startswith("."):
            continue
        if isinstance(value, list) and len(value) == 3:
            readers[(str(value[0]), int(value[1]), int(value[2]))].add(array)
        elif isinstance(value, str):
            raw = base64.b64decode(value[7:]) if value.startswith("base64:") else value.encode()
            inlined[array] += len(raw)
    groups: dict[tuple[str, ...], int] = defaultdict(int)
    for (_, _, length), arrays in readers.items():
        groups[tuple(sorted(arrays))] += length
    for array, size in inlined.items():
        groups[(array,)] += size
    return dict(groups), set(inlined)


def bio2zarr_bytes_per_array(store: Path) -> dict[str, int]:
    """Bytes of each array's files in a converted store (chunks and metadata)."""
    return {
        child.name: sum(f.stat().st_size for f in child.rglob("*") if f.is_file())
        for child in store.iterdir()
        if child.is_dir()
    }


def storage_rows(refs_path: Path, store: Path) -> list[StorageRow]:
    """One row per group of our arrays, bio2zarr's bytes for the same arrays beside it."""
    theirs = bio2zarr_bytes_per_array(store)
    groups, inlined = our_bytes_per_array(refs_path)
    rows = [
        StorageRow(arrays, ours, sum(theirs.get(a, 0) for a in arrays), bool(inlined & set(arrays)))
        for arrays, ours in groups.items()
    ]
    return sorted(rows, key=lambda r: -max(r.ours, r.bio2zarr))


def measure(bcf: Path, workdir: Path) -> str:
    """Index and convert ``bcf`` in ``workdir``; the markdown table of its storage."""
    refs = workdir / (bcf.name + ".vcz.json")
    cache = workdir / (bcf.name + ".vcz.cache.columns")
    store = workdir / (bcf.name + ".bio2zarr.vcz")
    subprocess.run(
        [BIN / "vcfvirtual", "index", "--force", str(bcf), "-o", str(refs), "--cache", str(cache)],
        check=True,
        capture_output=True,
    )
    subprocess.run([BIN / "vcf2zarr", "convert", "--force", str(bcf), str(store)], check=True, capture_output=True)
    rows = storage_rows(refs, store)
    mb = 1e6
    lines = [
        f"### {bcf.name}: BCF {bcf.stat().st_size / mb:.2f} MB",
        "",
        "| arrays | ours MB | bio2zarr MB | ours / bio2zarr |",
        "| --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        ratio = f"{r.ours / r.bio2zarr:.2f}" if r.bio2zarr else "-"
        where = " (inlined in the references)" if r.inlined else ""
        lines.append(f"| {' + '.join(r.arrays)}{where} | {r.ours / mb:.3f} | {r.bio2zarr / mb:.3f} | {ratio} |")
    ours_total = disk_bytes(cache)
    theirs_total = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    lines.append(
        f"| **whole cache / store** | **{ours_total / mb:.2f}** | **{theirs_total / mb:.2f}** "
        f"| **{ours_total / theirs_total:.2f}** |"
    )
    lines.append(
        f"\nCache / BCF: {ours_total / bcf.stat().st_size:.2f}; bio2zarr / BCF: "
        f"{theirs_total / bcf.stat().st_size:.2f}."
    )
    return "\n".join(lines)


def make_info_rich(workdir: Path, samples: int, length: float, seed: int = 42) -> Path:
    """A simulated cohort (msprime) with five INFO fields filled by ``bcftools +fill-tags``
    (AC, AN, AF, MAF, HWE), biallelic sites: the INFO-rich cohort of issue 24."""
    bcf = workdir / f"sim_info_{samples}_{length:g}.bcf"
    if bcf.exists():
        return bcf
    import msprime

    ts = msprime.sim_ancestry(
        samples=samples, population_size=10_000, sequence_length=length, recombination_rate=1e-8, random_seed=seed
    )
    ts = msprime.sim_mutations(ts, rate=1e-8, random_seed=seed)
    vcf = workdir / (bcf.name + ".vcf")
    with open(vcf, "w") as f:
        ts.write_vcf(f, contig_id="chr1")
    tmp = workdir / (bcf.name + ".tmp.bcf")
    subprocess.run(
        f"bcftools view -m2 -M2 -Ou '{vcf}' | bcftools +fill-tags -Ob -o '{tmp}' -- -t AC,AN,AF,MAF,HWE",
        shell=True,
        check=True,
    )
    vcf.unlink()
    tmp.replace(bcf)
    return bcf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bcf", nargs="*", type=Path, help="BCF files to measure")
    parser.add_argument("--samples", type=int, help="simulate a cohort of this many samples (bench.py's make_cohort)")
    parser.add_argument("--length", type=float, default=5e6, help="simulated sequence length (default 5e6)")
    parser.add_argument("--fields", action="store_true", help="simulate FORMAT AD/DP/GQ/PL too")
    parser.add_argument("--info-rich", type=int, metavar="SAMPLES", help="simulate an INFO-rich cohort of SAMPLES")
    parser.add_argument("--workdir", type=Path, help="where outputs go (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        bcfs = list(args.bcf)
        if args.samples:
            sys.path.insert(0, str(Path(__file__).parent))
            from bench import make_cohort

            bcfs.append(make_cohort(workdir, args.samples, args.length, args.fields, seed=42))
        if args.info_rich:
            bcfs.append(make_info_rich(workdir, args.info_rich, args.length))
        for bcf in bcfs:
            print(measure(bcf.resolve(), workdir), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
