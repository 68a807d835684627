"""A sites-only cohort with wide INFO (41 fields) and one INFO field read, in fresh processes,
against `bcftools query` (issue 24).

    python benchmarks/wide_info.py --workdir DIR [--length 1.6e8] [--pairs 3]

The cohort: msprime's sites of a simulated contig (positions only; REF/ALT drawn at random)
with 41 INFO fields of every kind (Integer, Float, String, Flag; Number=1, A, R and 2),
values drawn at random and some left missing, written as VCF text and converted with
`bcftools view -Ob`; cached in --workdir as ``wide_info_<length>.bcf`` (the default length
gives > 300,000 sites). INFO/AF is always set and has at most 4 decimals, so
`bcftools query -f '%AF\\n'`'s text parses back to the very float32 stored.

Then, as benchmarks/fresh.py does (each read its own process, ours and theirs alternating,
medians): `variant_AF` through ``vcfvirtual.open_store`` against `bcftools query -f
'%AF\\n'` on the BCF (its output parsed and checksummed as the array, after the timing) and
against bio2zarr's store (--no-bio2zarr to skip the conversion); and, each paired with
`bcftools query` too, a process that imports zarr and numpy and reads nothing (the floor of
any reader through zarr) and the same read from bio2zarr's store. ``--make-only`` writes the
cohort, prints its path and stops (for benchmarks/index_profile.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh import (  # noqa: E402
    HERE,
    Row,
    Run,
    compile_bytecode,
    first_opens,
    how_measured,
    markdown,
    measure_pairs,
    our_store,
    print_table,
    run_read,
    their_store,
    timed_process,
)

# (name, Number, Type, how many such fields); with AF (Number=A Float) 41 in all.
FIELD_KINDS = [
    ("I", "1", "Integer", 10),
    ("F", "1", "Float", 10),
    ("IA", "A", "Integer", 4),
    ("FR", "R", "Float", 4),
    ("I2", "2", "Integer", 2),
    ("S", "1", "String", 5),
    ("FLAG", "0", "Flag", 5),
]
MISSING_SHARE = 0.1  # of each field's values left out of the record


def field_names() -> list[tuple[str, str, str]]:
    """(ID, Number, Type) of every INFO field, AF first."""
    out = [("AF", "A", "Float")]
    for prefix, number, kind, n in FIELD_KINDS:
        out += [(f"{prefix}{i}", number, kind) for i in range(n)]
    return out


def site_positions(length: float, seed: int) -> np.ndarray:
    """1-based positions of msprime's sites on a contig of ``length`` bp (50 diploids)."""
    import msprime

    ts = msprime.sim_ancestry(
        samples=50, population_size=10_000, sequence_length=length, recombination_rate=1e-8, random_seed=seed
    )
    ts = msprime.sim_mutations(ts, rate=1e-8, random_seed=seed)
    return np.unique(ts.tables.sites.position.astype(np.int64)) + 1


def _values(rng: np.random.Generator, number: str, kind: str, n: int) -> np.ndarray:
    """The text of one field's values for ``n`` records (object array of str)."""
    width = {"1": 1, "A": 1, "R": 2, "2": 2}[number]
    if kind == "Integer":
        cols = [rng.integers(-1000, 100_000, n).astype(str) for _ in range(width)]
    elif kind == "Float":
        cols = [np.char.mod("%.3f", rng.normal(0, 100, n)) for _ in range(width)]
    else:  # String
        words = np.array(["alpha", "beta", "gamma", "delta", "x", "longer_value_here"])
        cols = [words[rng.integers(0, len(words), n)]]
    text = cols[0].astype(object)
    for col in cols[1:]:
        text = text + "," + col.astype(object)
    return text


def info_column(rng: np.random.Generator, n: int) -> np.ndarray:
    """The INFO text of ``n`` records: AF always, every other field present ~90% of the time."""
    af = np.char.mod("%.4f", np.round(rng.uniform(0.0001, 0.9999, n), 4)).astype(object)
    info = "AF=" + af
    for name, number, kind in field_names()[1:]:
        present = rng.random(n) >= MISSING_SHARE
        if kind == "Flag":
            part = np.where(present, ";" + name, "")
        else:
            part = np.where(present, ";" + name + "=" + _values(rng, number, kind, n), "")
        info = info + part
    return info


def header() -> str:
    lines = ["##fileformat=VCFv4.3", "##source=vcfvirtual benchmarks/wide_info.py (msprime sites)"]
    lines.append("##contig=<ID=chr1>")
    for name, number, kind in field_names():
        lines.append(f'##INFO=<ID={name},Number={number},Type={kind},Description="{kind} field {name}">')
    lines.append("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO")
    return "\n".join(lines) + "\n"


def make_wide_cohort(work: Path, length: float, seed: int = 1) -> Path:
    """The sites-only wide-INFO BCF, written once in ``work`` and reused after."""
    bcf = work / f"wide_info_{length:g}.bcf"
    if bcf.exists():
        return bcf
    rng = np.random.default_rng(seed)
    pos = site_positions(length, seed)
    n = len(pos)
    bases = np.array(["A", "C", "G", "T"], dtype=object)
    ref = rng.integers(0, 4, n)
    alt = (ref + rng.integers(1, 4, n)) % 4
    qual = np.char.mod("%.1f", rng.uniform(10, 1000, n)).astype(object)
    lines = "chr1\t" + pos.astype(str).astype(object) + "\t.\t" + bases[ref] + "\t" + bases[alt] + "\t" + qual
    lines = lines + "\tPASS\t" + info_column(rng, n)
    vcf = work / (bcf.name + ".vcf")
    with open(vcf, "w") as f:
        f.write(header())
        f.write("\n".join(lines.tolist()) + "\n")
    tmp = work / (bcf.name + ".tmp")
    subprocess.run(["bcftools", "view", "-Ob", "-o", str(tmp), str(vcf)], check=True)
    vcf.unlink()
    os.replace(tmp, bcf)
    return bcf


def query_checksum(text: str) -> tuple[str, int]:
    """`bcftools query -f '%AF\\n'` output as the child checksums variant_AF: float32,
    (variants, 1)."""
    a = np.array(text.split(), dtype=np.float32).reshape(-1, 1)
    return f"{a.dtype.name}{list(a.shape)}:{zlib.crc32(a.view(np.uint8).reshape(-1)):08x}", a.shape[0]


def bcftools_query(bcf: Path, field: str):
    def run() -> Run:
        wall, cpu, out = timed_process(["bcftools", "query", "-f", f"%{field}\n", str(bcf)])
        checksum, rows = query_checksum(out)
        return Run(wall, cpu, checksum, rows)

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True, help="where the cohort and stores are kept")
    parser.add_argument(
        "--length",
        type=float,
        default=1.6e8,
        help="contig length in bp; the default gives > 300,000 sites (%(default)g)",
    )
    parser.add_argument("--pairs", type=int, default=3, help="ours/theirs pairs; medians (default 3)")
    parser.add_argument("--no-bio2zarr", action="store_true", help="only against bcftools query")
    parser.add_argument("--make-only", action="store_true", help="write the cohort, print its path, stop")
    parser.add_argument("--prime-gb", type=float, default=1.0, help="as benchmarks/fresh.py's (default 1)")
    parser.add_argument("--output", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    bcf = make_wide_cohort(args.workdir, args.length)
    if args.make_only:
        print(bcf)
        return
    compile_bytecode()
    refs = our_store(bcf, args.workdir)
    extra = {"warm": True, "field": "variant_AF", "benchmarks": str(HERE)}
    query, query_name = bcftools_query(bcf, "AF"), "bcftools query -f '%AF\\n'"
    rows = [Row("`variant_AF`", lambda: run_read("array", "open_store", str(refs), extra), query, query_name)]
    first_opens(refs, None if args.no_bio2zarr else their_store(bcf, args.workdir, None))
    floor = lambda: run_read("floor", "dir", "", extra)  # noqa: E731
    rows.append(Row("zarr and numpy imported, nothing read", floor, query, query_name, floor=True))
    if not args.no_bio2zarr:
        theirs = str(their_store(bcf, args.workdir, None))
        read_theirs = lambda: run_read("array", "dir", theirs, extra)  # noqa: E731
        rows.append(Row("`variant_AF`", lambda: run_read("array", "open_store", str(refs), extra), read_theirs))
        rows.append(Row("`variant_AF`, bio2zarr's store", read_theirs, query, query_name, floor=True))
    measure_pairs(rows, args.pairs, args.prime_gb)
    n_sites = rows[0].runs[0][1].rows
    title = (
        f"{bcf.name}: {n_sites:,} sites, {len(field_names())} INFO fields; {how_measured(args.pairs, args.prime_gb)}"
    )
    print_table(markdown(rows, title), args.output)


if __name__ == "__main__":
    main()
