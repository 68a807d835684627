"""vcfvirtual against the tools a user would otherwise run, on msprime-simulated cohorts.

    python benchmarks/bench.py                       # 100, 1,000 and 10,000 samples
    python benchmarks/bench.py --samples 100 --fields-samples 100 --length 1e6   # quick

For each cohort (diploid, human-like rates; genotype-only, plus one with FORMAT AD/DP/GQ/PL)
it writes a BCF with bcftools (INFO/AF filled, as `bcftools +af-dist` needs), then measures
in the same run and prints one markdown table:

* index: `vcfvirtual index` wall time (CLI, after a warm-up run so the page cache holds the
  BCF and the installed modules) per cache layout, against `vcf2zarr convert` and one `bgzip -dc` pass (the floor:
  every byte inflated once); ratios. Also `vcfvirtual.index()` timed inside one interpreter
  (after a warm-up call), without Python's start-up and imports.
* sizes: BCF, cache (and cache/BCF), Kerchunk JSON, bio2zarr's store.
* peak RSS of `vcfvirtual index` (GNU time's maximum resident set size).
* full call_genotype read: through zarr from our Kerchunk JSON and from bio2zarr's store (best
  of --repeats reads in one process after a first read that loads compiled kernels, each
  reading every chunk again; page cache warm; the first read is reported too), and a cyvcf2
  loop filling the same array; ratios.
* reads (issue 12's targets), each in a fresh interpreter, best of --repeats after a warm-up,
  from our store and from bio2zarr's: open + call_genotype of the first 1,000 variants, variant_position
  alone, call_genotype of 10 samples, call_DP and call_AD (fields cohorts), and a 1 Mb region
  in the middle of the contig (region_index, then the overlapping variants' genotypes) also
  against `bcftools view -H -r` on the indexed BCF; checksums must match bio2zarr's.
* af-dist (the VCF Zarr paper's benchmark): genotype-probability histogram computed chunk by
  chunk from our store and from bio2zarr's, against `bcftools +af-dist` on the BCF; the
  histograms must agree (printed as `match`).

Needs: pip install -e '.[bench]'; apt-get install bcftools tabix time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


# ---------------------------------------------------------------------------- cohorts


def _fields_table() -> tuple[np.ndarray, int]:
    """FORMAT cells "GT:AD:DP:GQ:PL" for every (genotype code, depth) pair.

    Genotype code = 2*first + second allele (biallelic, phased as msprime writes them);
    depth 0..MAX_DP-1. AD splits the depth by the genotype, GQ grows with depth, PL is
    the usual shape for the called genotype: plausible, and all vectorised lookups."""
    max_dp = 40
    cells = []
    for code in range(4):
        a, b = divmod(code, 2)
        alt = a + b
        for dp in range(max_dp):
            ad_alt = {0: 0, 1: dp // 2, 2: dp}[alt]
            gq = min(99, 3 * dp)
            pl = {0: (0, 3 * dp, 6 * dp), 1: (3 * dp, 0, 3 * dp), 2: (6 * dp, 3 * dp, 0)}[alt]
            cells.append(f"{a}|{b}:{dp - ad_alt},{ad_alt}:{dp}:{gq}:{pl[0]},{pl[1]},{pl[2]}")
    return np.array(cells, dtype=object), max_dp


def _write_fields_vcf(ts, path: Path, seed: int) -> None:
    """The tree sequence as VCF with GT plus AD/DP/GQ/PL, biallelic sites only."""
    table, max_dp = _fields_table()
    rng = np.random.default_rng(seed)
    n = ts.num_individuals
    with open(path, "w") as f:
        f.write("##fileformat=VCFv4.2\n##source=vcfvirtual benchmarks (msprime)\n")
        f.write(f"##contig=<ID=chr1,length={int(ts.sequence_length)}>\n")
        f.write('##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n')
        f.write('##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">\n')
        f.write('##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Read depth">\n')
        f.write('##FORMAT=<ID=GQ,Number=1,Type=Integer,Description="Genotype quality">\n')
        f.write('##FORMAT=<ID=PL,Number=G,Type=Integer,Description="Phred-scaled genotype likelihoods">\n')
        f.write("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t")
        f.write("\t".join(f"tsk_{i}" for i in range(n)) + "\n")
        last_pos = 0
        for var in ts.variants():
            if len(var.alleles) != 2 or var.alleles[1] is None:
                continue
            pos = max(int(var.site.position) + 1, last_pos + 1)
            last_pos = pos
            g = var.genotypes.astype(np.int64)
            code = 2 * g[0::2] + g[1::2]
            depth = rng.integers(0, max_dp, size=n)
            cells = table[code * max_dp + depth]
            f.write(f"chr1\t{pos}\t.\tA\tT\t.\tPASS\t.\tGT:AD:DP:GQ:PL\t" + "\t".join(cells.tolist()) + "\n")


def make_cohort(workdir: Path, samples: int, length: float, fields: bool, seed: int) -> Path:
    """A BCF of a simulated cohort, made once and kept in ``workdir``."""
    name = f"sim_{samples}{'_fields' if fields else ''}_{length:g}.bcf"
    bcf = workdir / name
    if bcf.exists():
        return bcf
    import msprime

    ts = msprime.sim_ancestry(
        samples=samples, population_size=10_000, sequence_length=length, recombination_rate=1e-8, random_seed=seed
    )
    ts = msprime.sim_mutations(ts, rate=1e-8, random_seed=seed)
    vcf = workdir / (name + ".vcf")
    if fields:
        _write_fields_vcf(ts, vcf, seed)
    else:
        with open(vcf, "w") as f:
            ts.write_vcf(f, contig_id="chr1")
    tmp = workdir / (name + ".tmp.bcf")
    # Biallelic sites only (bcftools +af-dist bins by the first ALT's AF), with INFO/AF
    # filled as +af-dist needs, as the VCF Zarr paper's benchmark did.
    subprocess.run(
        f"bcftools view -m2 -M2 -Ou '{vcf}' | bcftools +fill-tags -Ob -o '{tmp}' -- -t AF", shell=True, check=True
    )
    vcf.unlink()
    os.replace(tmp, bcf)
    return bcf


# ---------------------------------------------------------------------------- timing


def disk_bytes(path: Path) -> int:
    """Bytes of a cache on disk: a file's, or a folder of parts' (the columns layout) summed."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def timed(cmd: list[str] | str, **kw) -> tuple[float, int]:
    """(wall seconds, peak RSS in MB) of a command; GNU time reports the RSS."""
    shell = isinstance(cmd, str)
    argv = ["/usr/bin/time", "-f", "%M", "-o", "/dev/stderr"]
    full = shlex.join(argv) + " " + cmd if shell else argv + [str(c) for c in cmd]
    start = time.perf_counter()
    proc = subprocess.run(full, shell=shell, check=True, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - start
    rss_kb = int(proc.stderr.strip().splitlines()[-1])
    return wall, rss_kb // 1024


def best_of(repeats: int, cmd, **kw) -> tuple[float, int]:
    runs = [timed(cmd, **kw) for _ in range(repeats)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def run_python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON object last."""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


READ_GT = """
import json, sys, time, zarr
sys.path.insert(0, {here!r})
from afdist import open_genotypes
t = time.perf_counter()
open_genotypes({store!r})[:]  # first read: loads compiled kernels, warms the page cache
first = time.perf_counter() - t
best = None
for _ in range({repeats}):
    t = time.perf_counter()
    gt = open_genotypes({store!r})[:]
    elapsed = time.perf_counter() - t
    best = elapsed if best is None else min(best, elapsed)
print(json.dumps({{"seconds": best, "first": first, "checksum": int(gt.sum(dtype='i8'))}}))
"""

CYVCF2_GT = """
import json, time, numpy as np
from cyvcf2 import VCF
t = time.perf_counter()
vcf = VCF({bcf!r})
rows = [v.genotype.array()[:, :2] for v in vcf]
gt = np.stack(rows) if rows else np.zeros((0, 0, 2))
gt = np.where(gt < 0, -1, gt)
print(json.dumps({{"seconds": time.perf_counter() - t, "checksum": int(gt.sum(dtype='i8'))}}))
"""

AFDIST = """
import json, sys, time
sys.path.insert(0, {here!r})
from afdist import afdist
afdist({store!r})  # warm-up, as for the read
best = None
for _ in range({repeats}):
    t = time.perf_counter()
    counts = afdist({store!r})
    elapsed = time.perf_counter() - t
    best = elapsed if best is None else min(best, elapsed)
print(json.dumps({{"seconds": best, "counts": counts.tolist()}}))
"""


# Issue 12's read targets, in a fresh interpreter per store, each the best of --repeats (at
# least 15 for reads under 0.2 s) after one warm-up: open + call_genotype of the first 1,000
# variants; then, from a store opened beforehand, variant_position alone, call_genotype of 10
# samples, call_DP and call_AD (where present), call_genotype_mask and call_genotype_phased
# (every array is a target: these two share GT's segments in the columns layout), and a region
# query (region_index, then the overlapping variants' genotypes, as `bcftools view -H -r`
# prints whole records).
READS = """
import json, sys, time
import numpy as np, xarray as xr, zarr
store = {store!r}
region = {region!r}

def group():
    if store.endswith(".json"):
        import vcfvirtual
        return zarr.open_group(vcfvirtual.open_store(store), mode="r", zarr_format=2)
    return zarr.open_group(store, mode="r")

def dataset():
    if store.endswith(".json"):
        import vcfvirtual
        return xr.open_zarr(vcfvirtual.open_store(store), consolidated=False, zarr_format=2)
    return xr.open_zarr(store)

def first_chunk():
    # The first 1,000 variants (bio2zarr's default chunk): the same rows from both stores,
    # each paying for the chunk(s) its own layout must decode to give them.
    return group()["call_genotype"][:1000]

# Opening is timed once, in first_chunk; the other reads use a store opened beforehand.
opened = group()
ds_opened = dataset()

def region_query():
    from vcfvirtual.regions import overlapping_variants
    rows = overlapping_variants(ds_opened, region)
    return ds_opened["call_genotype"][rows].values if len(rows) else np.zeros(0)

ops = {{
    "first_chunk": first_chunk,
    "position": lambda: opened["variant_position"][:],
    "gt10": lambda: opened["call_genotype"][:, :10],
    "region": region_query,
}}
for name in ("call_DP", "call_AD", "call_genotype_mask", "call_genotype_phased"):
    if name in set(opened.array_keys()):
        ops[name] = lambda name=name: opened[name][:]
out = {{}}
for op, fn in ops.items():
    t = time.perf_counter()
    value = fn()  # warm-up: compiled kernels, page cache
    # Reads of milliseconds vary by more than their own length from run to run: best of
    # at least 15 of those.
    runs = {repeats} if time.perf_counter() - t > 0.2 else max({repeats}, 15)
    best = None
    for _ in range(runs):
        t = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - t
        best = elapsed if best is None else min(best, elapsed)
    out[op] = best
    out[op + "_checksum"] = int(np.asarray(value).sum(dtype="i8"))
print(json.dumps(out))
"""

# index() in one interpreter, after a warm-up call: the CLI's time less Python's start-up and
# imports (~1 s), which a small BCF cannot amortise against one `bgzip -dc` pass.
INDEX_IN_PROCESS = """
import json, time
import vcfvirtual
def run():
    vcfvirtual.index({bcf!r}, refs_path={refs!r}, cache_path={cache!r}, cache_layout={layout!r}, force=True)
run()
best = None
for _ in range({repeats}):
    t = time.perf_counter()
    run()
    elapsed = time.perf_counter() - t
    best = elapsed if best is None else min(best, elapsed)
print(json.dumps({{"seconds": best}}))
"""

READ_OPS = (
    "first_chunk",
    "position",
    "gt10",
    "call_DP",
    "call_AD",
    "call_genotype_mask",
    "call_genotype_phased",
    "region",
)


def bcftools_region(bcf: Path, region: str, repeats: int) -> float:
    """`bcftools view -H -r` on the indexed BCF (the index made once, not timed)."""
    if not Path(str(bcf) + ".csi").exists():
        subprocess.run(["bcftools", "index", "-f", str(bcf)], check=True)
    cmd = f"bcftools view -H -r {region} {bcf} > /dev/null"
    return min(timed(cmd)[0] for _ in range(repeats + 1))


def middle_megabase(length: float) -> str:
    """A 1 Mb region in the middle of the simulated contig (the whole contig if shorter)."""
    start = max(1, int(length / 2) - 500_000)
    return f"chr1:{start}-{start + 999_999}"


def bcftools_afdist(bcf: Path) -> tuple[float, list[int]]:
    start = time.perf_counter()
    out = subprocess.run(["bcftools", "+af-dist", str(bcf)], check=True, capture_output=True, text=True).stdout
    elapsed = time.perf_counter() - start
    counts = [int(line.split("\t")[3]) for line in out.splitlines() if line.startswith("PROB_DIST")]
    return elapsed, counts


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------- main


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import bio2zarr

    import vcfvirtual

    bcftools = subprocess.run(["bcftools", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM; Python {platform.python_version()}, "
        f"vcfvirtual {vcfvirtual.__version__}, bio2zarr {bio2zarr.__version__}, {bcftools}"
    )


def bench_cohort(bcf: Path, label: str, args, work: Path) -> list[dict]:
    rows = []
    bcf_size = bcf.stat().st_size
    bgzip_s, _ = best_of(args.repeats, f"bgzip -dc {bcf} > /dev/null")
    b2z_store = work / (bcf.name + ".bio2zarr.vcz")
    b2z = {}
    if not args.skip_bio2zarr:
        timing = b2z_store.with_name(b2z_store.name + ".seconds")
        if args.reuse_bio2zarr and timing.exists() and b2z_store.exists():
            b2z["convert"] = float(timing.read_text())  # measured by an earlier run
        else:
            shutil.rmtree(b2z_store, ignore_errors=True)
            b2z["convert"], _ = timed([BIN / "vcf2zarr", "convert", "--force", bcf, b2z_store])
            timing.write_text(str(b2z["convert"]))
        b2z["size"] = du(b2z_store)
        b2z["read"] = run_python(READ_GT.format(here=str(HERE), repeats=args.repeats, store=str(b2z_store)))
        b2z["afdist"] = run_python(AFDIST.format(here=str(HERE), repeats=args.repeats, store=str(b2z_store)))
    region = middle_megabase(args.length)
    reads_of = {}  # store label -> READS result
    if b2z:
        reads_of["bio2zarr"] = run_python(READS.format(store=str(b2z_store), region=region, repeats=args.repeats))
    region_bcftools_s = bcftools_region(bcf, region, args.repeats)
    cy = None if args.skip_cyvcf2 else run_python(CYVCF2_GT.format(bcf=str(bcf)))
    bt_s, bt_counts = bcftools_afdist(bcf)
    for layout in args.layouts:
        refs = work / f"{bcf.name}.{layout}.vcz.json"
        cache = work / f"{bcf.name}.{layout}.cache.bcf"
        cmd = [
            BIN / "vcfvirtual",
            "index",
            "--force",
            "--no-progress",
            "--cache-layout",
            layout,
            "-o",
            refs,
            "--cache",
            cache,
            bcf,
        ]
        timed(cmd)  # warm-up: the page cache (the BCF, the modules)
        index_s, rss = best_of(args.repeats, cmd)
        in_process = run_python(
            INDEX_IN_PROCESS.format(bcf=str(bcf), refs=str(refs), cache=str(cache), layout=layout, repeats=args.repeats)
        )
        read = run_python(READ_GT.format(here=str(HERE), repeats=args.repeats, store=str(refs)))
        ours_af = run_python(AFDIST.format(here=str(HERE), repeats=args.repeats, store=str(refs)))
        reads = run_python(READS.format(store=str(refs), region=region, repeats=args.repeats))
        reads_of[layout] = reads
        checks = []
        for op in READ_OPS:
            theirs = reads_of.get("bio2zarr", {}).get(op + "_checksum")
            if theirs is not None and reads.get(op + "_checksum") != theirs:
                checks.append(f"{op} differs from bio2zarr")
        if b2z and read["checksum"] != b2z["read"]["checksum"]:
            checks.append("GT differs from bio2zarr")
        if cy is not None and read["checksum"] != cy["checksum"]:
            checks.append("GT differs from cyvcf2")
        if ours_af["counts"] != bt_counts:
            checks.append(f"af-dist {ours_af['counts']} != bcftools {bt_counts}")
        rows.append(
            dict(
                cohort=label,
                layout=layout,
                bcf_mb=bcf_size / 1e6,
                index_s=index_s,
                index_in_process_s=in_process["seconds"],
                bgzip_s=bgzip_s,
                vcf2zarr_s=b2z.get("convert"),
                cache_ratio=disk_bytes(cache) / bcf_size,
                json_kb=refs.stat().st_size / 1e3,
                b2z_mb=b2z["size"] / 1e6 if b2z else None,
                rss_mb=rss,
                read_s=read["seconds"],
                first_read_s=read["first"],
                b2z_read_s=b2z["read"]["seconds"] if b2z else None,
                cyvcf2_s=cy["seconds"] if cy else None,
                afdist_s=ours_af["seconds"],
                b2z_afdist_s=b2z["afdist"]["seconds"] if b2z else None,
                bcftools_afdist_s=bt_s,
                checks="; ".join(checks) or "match",
                reads=reads,
                b2z_reads=reads_of.get("bio2zarr"),
                region=region,
                region_bcftools_s=region_bcftools_s,
            )
        )
        print(
            f"  {label} {layout}: index {index_s:.2f}s, read {read['seconds']:.3f}s, "
            f"af-dist {ours_af['seconds']:.3f}s ({rows[-1]['checks']})",
            file=sys.stderr,
        )
    return rows


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def _ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.1f}x"


def table(rows: list[dict]) -> str:
    head = (
        "| cohort | layout | BCF MB | index s | vcf2zarr s (ratio) | / bgzip -dc | index() s in-process (/ bgzip -dc) "
        "| cache / BCF | JSON kB "
        "| bio2zarr MB | index peak RSS MB | GT read s (first) | / bio2zarr read | cyvcf2 loop s (ratio) "
        "| af-dist s | bcftools +af-dist s (ratio) | values |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['cohort']} | {r['layout']} | {r['bcf_mb']:.1f} | {r['index_s']:.2f} "
            f"| {_fmt(r['vcf2zarr_s'], '.1f')} ({_ratio(r['vcf2zarr_s'], r['index_s'])}) "
            f"| {_ratio(r['index_s'], r['bgzip_s'])} "
            f"| {r['index_in_process_s']:.2f} ({_ratio(r['index_in_process_s'], r['bgzip_s'])}) "
            f"| {r['cache_ratio']:.3f} | {r['json_kb']:.0f} "
            f"| {_fmt(r['b2z_mb'], '.1f')} | {r['rss_mb']} | {r['read_s']:.3f} ({r['first_read_s']:.2f}) "
            f"| {_ratio(r['read_s'], r['b2z_read_s'])} "
            f"| {_fmt(r['cyvcf2_s'], '.2f')} ({_ratio(r['cyvcf2_s'], r['read_s'])}) "
            f"| {r['afdist_s']:.3f} | {r['bcftools_afdist_s']:.2f} ({_ratio(r['bcftools_afdist_s'], r['afdist_s'])}) "
            f"| {r['checks']} |"
        )
    return "\n".join(lines)


def reads_table(rows: list[dict]) -> str:
    """Issue 12's read targets: ours / bio2zarr (and the region query / bcftools) per layout."""
    head = (
        "| cohort | layout | open + GT of the first 1,000 variants s | variant_position s | GT 10 samples s "
        "| call_DP s | call_AD s | call_genotype_mask s | call_genotype_phased s | 1 Mb region s "
        "| region: bcftools view -H -r s |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        ours, theirs = r["reads"], r["b2z_reads"] or {}
        cells = []
        for op in READ_OPS:
            if op not in ours:
                cells.append("-")
                continue
            cells.append(f"{ours[op]:.4f} ({_ratio(ours[op], theirs.get(op))})")
        lines.append(
            f"| {r['cohort']} | {r['layout']} | " + " | ".join(cells) + f" | {r['region_bcftools_s']:.3f} "
            f"({_ratio(ours['region'], r['region_bcftools_s'])} of bcftools) |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--samples",
        default="100,1000,10000",
        help="comma-separated sample counts of the genotype-only cohorts (default: %(default)s)",
    )
    parser.add_argument(
        "--fields-samples",
        default="1000",
        help="sample counts of the cohorts with AD/DP/GQ/PL; empty for none (default: %(default)s)",
    )
    parser.add_argument(
        "--length",
        type=float,
        default=5e6,
        help="simulated sequence length in bp; variants grow with it (default: %(default)g)",
    )
    parser.add_argument("--layouts", default="bgzf,raw", help="cache layouts to index (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement; the best is kept")
    parser.add_argument("--seed", type=int, default=1, help="msprime random seed")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where cohorts and outputs go; cohorts are reused (default: a new temp dir)",
    )
    parser.add_argument("--skip-bio2zarr", action="store_true", help="do not run vcf2zarr (slow on big cohorts)")
    parser.add_argument("--skip-cyvcf2", action="store_true", help="do not run the cyvcf2 loop")
    parser.add_argument(
        "--reuse-bio2zarr",
        action="store_true",
        help="reuse bio2zarr stores (and their convert times) left in --workdir by an earlier run",
    )
    parser.add_argument("--output", type=Path, default=None, help="also write the table (markdown) here")
    args = parser.parse_args(argv)
    args.layouts = [x for x in args.layouts.split(",") if x]
    for tool in ("bcftools", "bgzip", "/usr/bin/time"):
        if shutil.which(tool) is None:
            sys.exit(f"bench.py: {tool} not found (apt-get install bcftools tabix time)")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vcfvirtual-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    cohorts = [(int(n), False) for n in args.samples.split(",") if n]
    cohorts += [(int(n), True) for n in args.fields_samples.split(",") if n]
    rows = []
    for n, fields in cohorts:
        bcf = make_cohort(work, n, args.length, fields, args.seed)
        import pysam

        pysam.set_verbosity(0)  # no complaint that the BCF has no index: it is read in order
        with pysam.VariantFile(str(bcf)) as vf:
            n_var = sum(1 for _ in vf)
        label = f"{n:,} samples x {n_var:,} variants{' +AD/DP/GQ/PL' if fields else ''}"
        print(f"{label}: {bcf}", file=sys.stderr)
        rows += bench_cohort(bcf, label, args, work)
    text = (
        f"Machine: {machine()}\n\n{table(rows)}\n\n"
        "Reads (best of --repeats after a warm-up; in brackets ours / bio2zarr's store of the same BCF, "
        f"the region {rows[0]['region'] if rows else ''} also against bcftools):\n\n{reads_table(rows)}\n"
    )
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
