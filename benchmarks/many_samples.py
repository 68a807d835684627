"""A biobank-width cohort (10^6 samples, a few records): what the references, the cache and
bio2zarr's store weigh, and what opening them costs a fresh process (issue 24).

    python benchmarks/many_samples.py --workdir DIR [--samples 1000000] [--records 20] [--runs 5]
                                      [--random-names] [--output FILE.md]

The cohort is written once and kept in --workdir: R records of diploid phased GT for N
samples (~10% non-reference calls, numpy seed 1) as VCF text piped to `bcftools view -Ob`,
then `bcftools index`; samples named ``S1000000``, ``S1000001``... or (--random-names)
distinct random 7-digit numbers. Every run indexes it again (`vcfvirtual index --force`:
its output is what is measured); `vcf2zarr convert` runs once (its output to a log there).

Sizes (bytes of files, as ``du -b``): our references JSON and cache, bio2zarr's store; parts:
the JSON's root ``.zattrs`` (its ``vcf_header``) and inlined ``sample_id`` chunks against
bio2zarr's ``.zattrs`` and ``sample_id`` folder; the BCF header the cache starts with.

Opens: each run is a new Python process that imports zarr (untimed: both sides pay it), then
times by its own clocks (``time.perf_counter``, ``time.process_time``) (a) importing
vcfvirtual, ``open_store`` and ``zarr.open_group`` (bio2zarr's: ``zarr.open_group``); (b) (a)
and reading ``sample_id[:]``; (c) (a) and reading ``variant_position[:]``. Ours and
bio2zarr's alternate, medians of --runs, after one untimed open of each (benchmarks/fresh.py
``first_opens``: our first open after an index checks everything and keeps what it found).
Both stores' ``sample_id`` must equal the names written, their ``variant_position`` each
other's (CRC32 of the values), or the script fails.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import gzip
import json
import os
import statistics
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh import BIN, compile_bytecode, first_opens  # noqa: E402

# argv: how (ours/theirs), the store, the array read after the open ("": none). Prints a Timing.
CHILD = r"""
import json, sys, time, zlib
how, store, array = sys.argv[1:4]
import zarr
t, c = time.perf_counter(), time.process_time()
if how == "ours":
    import vcfvirtual
    group = zarr.open_group(vcfvirtual.open_store(store), mode="r", zarr_format=2)
else:
    group = zarr.open_group(store, mode="r")
values = group[array][:] if array else None
wall, cpu = time.perf_counter() - t, time.process_time() - c
crc = None
if values is not None:
    import numpy as np
    text = values.dtype.kind in "OUST"
    crc = zlib.crc32("\n".join(map(str, values.tolist())).encode() if text else np.ascontiguousarray(values).tobytes())
print(json.dumps([wall, cpu, crc]))
"""

Timing = tuple[float, float, int | None]  # wall s, CPU s, CRC32 of the values read (None: nothing read)
OPS = {"open": "", "open + `sample_id[:]`": "sample_id", "open + `variant_position[:]`": "variant_position"}
# Each allele is ALT with p = 1 - sqrt(0.9), so that a call is non-reference 10% of the time.
ALT_ALLELE_SHARE = 1 - 0.9**0.5


def sample_names(n: int, random_names: bool) -> np.ndarray:
    """The samples' names: S1000000, S1000001... or distinct random 7-digit numbers."""
    if random_names:
        if n > 9_000_000:
            raise SystemExit(f"--random-names: only 9,000,000 distinct 7-digit IDs, not {n:,}")
        return (np.random.default_rng(1).choice(9_000_000, n, replace=False) + 1_000_000).astype(str)
    return np.char.add("S", (np.arange(n) + 1_000_000).astype(str))


def genotype_text(rng: np.random.Generator, n: int) -> bytes:
    """One record's phased GT columns, ``a|b`` tab-separated, as bytes (no newline)."""
    cells = np.empty((n, 4), np.uint8)
    cells[:, 0] = ord("0") + (rng.random(n) < ALT_ALLELE_SHARE)
    cells[:, 1] = ord("|")
    cells[:, 2] = ord("0") + (rng.random(n) < ALT_ALLELE_SHARE)
    cells[:, 3] = ord("\t")
    return cells.tobytes()[:-1]


def make_cohort(work: Path, n: int, records: int, random_names: bool) -> Path:
    """The BCF, written (with its CSI index) once in ``work`` and reused after."""
    bcf = work / f"samples_{n}x{records}{'_random' if random_names else ''}.bcf"
    if bcf.exists() and Path(f"{bcf}.csi").exists():
        return bcf
    rng = np.random.default_rng(1)
    columns = "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t"
    header = (
        f"##fileformat=VCFv4.3\n##contig=<ID=1,length={1000 * (records + 1)}>\n"
        f'##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n{columns}'
    )
    tmp = work / (bcf.name + ".tmp")
    proc = subprocess.Popen(["bcftools", "view", "-Ob", "-o", str(tmp), "-"], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write((header + "\t".join(sample_names(n, random_names).tolist()) + "\n").encode())
    for i in range(records):
        proc.stdin.write(f"1\t{1000 * (i + 1)}\t.\tA\tC\t.\tPASS\t.\tGT\t".encode())
        proc.stdin.write(genotype_text(rng, n) + b"\n")
    proc.stdin.close()
    if proc.wait() != 0:
        raise SystemExit(f"bcftools view failed writing {tmp}")
    os.replace(tmp, bcf)
    subprocess.run(["bcftools", "index", "-f", str(bcf)], check=True)
    return bcf


def index(bcf: Path) -> tuple[Path, float]:
    """Our references and cache of ``bcf`` (`vcfvirtual index --force`), and the index's wall seconds."""
    refs = bcf.with_name(bcf.name + ".vcz.json")
    cache = bcf.with_name(bcf.name + ".vcz.cache.columns")
    cmd = [str(BIN / "vcfvirtual"), "index", "--force", "--no-progress", "-o", str(refs), "--cache", str(cache)]
    t = time.perf_counter()
    with open(bcf.with_name("vcfvirtual-index.log"), "a") as log:  # its summary: not the table's
        subprocess.run([*cmd, str(bcf)], check=True, stdout=log, stderr=subprocess.STDOUT)
    return refs, time.perf_counter() - t


def convert(bcf: Path) -> Path:
    """bio2zarr's store of ``bcf`` (`vcf2zarr convert`), converted once; its output to a log."""
    store = bcf.with_name(bcf.name.removesuffix(".bcf") + ".bio2zarr.vcz")
    done = store.with_name(store.name + ".done")
    if not done.exists():
        with open(bcf.with_name("vcf2zarr.log"), "a") as log:
            cmd = [str(BIN / "vcf2zarr"), "convert", "--force", str(bcf), str(store)]
            subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
        done.write_text("converted by benchmarks/many_samples.py\n")
    return store


def du(path: Path) -> int:
    """Bytes of the files at or under ``path`` (``du -b``'s apparent size)."""
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bcf_header(bcf: Path) -> bytes:
    """The BCF's header as it is in the decompressed file: magic, text length, text."""
    with gzip.open(bcf) as f:
        start = f.read(9)
        return start + f.read(struct.unpack("<I", start[5:])[0])


def inlined_bytes(value: str) -> int:
    """Bytes of one inlined Kerchunk chunk: base64 decoded, or the text itself."""
    return len(base64.b64decode(value[7:])) if value.startswith("base64:") else len(value.encode())


def sizes(refs: Path, theirs: Path, bcf: Path) -> list[tuple[str, int, int | None]]:
    """(what, ours bytes, bio2zarr's bytes or None) of the stores and their parts."""
    document = json.loads(refs.read_text())
    cache = Path(document["templates"]["cache"].removeprefix("file://"))
    zattrs = document["refs"][".zattrs"]
    chunks = [v for k, v in document["refs"].items() if k.startswith("sample_id/") and k.split("/")[1].isdigit()]
    inlined = [v for v in chunks if isinstance(v, str)]
    bcf_head = bcf_header(bcf)
    first = min((p for p in cache.rglob("*") if p.is_file()), key=str) if cache.is_dir() else cache
    with open(first, "rb") as f:
        copied = len(bcf_head) if bcf_head in f.read(len(bcf_head) + 4096) else 0
    theirs_ids = du(theirs / "sample_id")
    return [
        ("references JSON + cache / bio2zarr's store", du(refs) + du(cache), du(theirs)),
        ("references JSON", du(refs), None),
        ("- root `.zattrs` as written in it (escaped) / bio2zarr's", len(json.dumps(zattrs)), du(theirs / ".zattrs")),
        ("- of which `vcf_header` (unescaped)", len(json.loads(zattrs)["vcf_header"].encode()), None),
        (f"- `sample_id`, {len(inlined)} inlined chunks' base64 / bio2zarr's", sum(map(len, inlined)), theirs_ids),
        ("- the same, base64 decoded (the chunks as stored)", sum(map(inlined_bytes, inlined)), theirs_ids),
        ("cache", du(cache), None),
        ("- the BCF header copied at its start", copied, None),
    ]


def parse_ms(refs: Path) -> tuple[float, float]:
    """Milliseconds, in this process, to parse the references (decode + ``json.loads``) and
    their root ``.zattrs`` (a JSON text inside them): what an open cannot avoid."""
    data = refs.read_bytes()
    t = time.perf_counter()
    zattrs = json.loads(data.decode())["refs"][".zattrs"]
    t1 = time.perf_counter()
    json.loads(zattrs)
    return (t1 - t) * 1e3, (time.perf_counter() - t1) * 1e3


def timed(how: str, store: Path, array: str) -> Timing:
    """One fresh process's (wall, CPU, CRC32 of what it read) of :data:`CHILD`."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, how, str(store), array], check=True, capture_output=True, text=True
    ).stdout
    wall, cpu, crc = json.loads(out.strip().splitlines()[-1])
    return wall, cpu, crc


def measure(refs: Path, theirs: Path, runs: int) -> dict[tuple[str, str], list[Timing]]:
    """``runs`` of every op, ours and bio2zarr's alternating (theirs first in even runs)."""
    results: dict[tuple[str, str], list[Timing]] = {}
    for i in range(runs):
        for label, array in OPS.items():
            for how in ("theirs", "ours") if i % 2 else ("ours", "theirs"):
                store = refs if how == "ours" else theirs
                results.setdefault((label, how), []).append(timed(how, store, array))
    return results


def check_values(results: dict, names: np.ndarray) -> str:
    """Fail unless each read gave ours' and bio2zarr's values equal, and ``sample_id`` the
    names written; the names' CRC32."""
    written = zlib.crc32("\n".join(names.tolist()).encode())
    for label, array in OPS.items():
        read = {how: {crc for _, _, crc in results[(label, how)]} for how in ("ours", "theirs")}
        expected = {written} if array == "sample_id" else read["theirs"]
        if len(expected) != 1 or read["ours"] != expected or read["theirs"] != expected:
            raise SystemExit(
                f"{label}: values differ (CRC32): ours {read['ours']}, bio2zarr's {read['theirs']}, expected {expected}"
            )
    return f"{written:08x}"


def machine() -> str:
    """CPU model, cores and load now."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{cpu}, {os.cpu_count()} cores, load {load}"


def median_ms(runs: list[Timing]) -> tuple[float, float]:
    """Median wall and CPU milliseconds of ``runs``."""
    return statistics.median(r[0] for r in runs) * 1e3, statistics.median(r[1] for r in runs) * 1e3


def markdown(bcf: Path, sized: list, results: dict, runs: int, notes: str) -> str:
    """The title line (the cohort, the machine, ``notes``), the sizes' table and the opens'."""
    lines = [
        f"{bcf.name} ({bcf.stat().st_size / 1e6:.1f} MB BCF); {machine()}; {datetime.date.today()}; {notes}",
        "",
        "| size, bytes | ours | bio2zarr | ours / bio2zarr |",
        "| --- | --- | --- | --- |",
    ]
    for what, ours, theirs in sized:
        ratio = f"{ours / theirs:.2f}x" if theirs else "-"
        lines.append(f"| {what} | {ours:,} | {'-' if theirs is None else f'{theirs:,}'} | {ratio} |")
    lines += [
        "",
        f"| fresh process, medians of {runs} (zarr imported first, untimed) | ours wall ms | bio2zarr wall ms "
        "| ratio wall | ours CPU ms | bio2zarr CPU ms | ratio CPU |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label in OPS:
        (ow, oc), (tw, tc) = (median_ms(results[(label, how)]) for how in ("ours", "theirs"))
        lines.append(f"| {label} | {ow:.0f} | {tw:.0f} | {ow / tw:.2f}x | {oc:.0f} | {tc:.0f} | {oc / tc:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1_000_000, help="samples (default 1,000,000)")
    parser.add_argument("--records", type=int, default=20, help="records (default 20)")
    parser.add_argument("--workdir", type=Path, required=True, help="where the cohort and stores are kept between runs")
    parser.add_argument("--random-names", action="store_true", help="distinct random 7-digit numeric sample IDs")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per op and side; medians (default 5)")
    parser.add_argument("--output", type=Path, help="also write the tables here (markdown)")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    bcf = make_cohort(args.workdir, args.samples, args.records, args.random_names)
    compile_bytecode()
    refs, index_s = index(bcf)
    theirs = convert(bcf)
    first_opens(refs, theirs)
    results = measure(refs, theirs, args.runs)
    crc = check_values(results, sample_names(args.samples, args.random_names))
    whole, zattrs = parse_ms(refs)
    notes = (
        f"`vcfvirtual index` {index_s:.1f} s; parsing the references {whole:.0f} ms and their `.zattrs` text "
        f"{zattrs:.0f} ms more (this process); `sample_id` read from both equal to the names written (CRC32 {crc})"
    )
    text = markdown(bcf, sizes(refs, theirs, bcf), results, args.runs, notes)
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
