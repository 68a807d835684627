"""Index time against the number of INFO fields a header declares.

    python benchmarks/wide_header.py                 # 50, 200, 1,000 and 2,000 INFO fields
    python benchmarks/wide_header.py --fields 1000 --records 1000

Annotated cohorts (gnomAD, VEP) declare hundreds of INFO fields; each is one array, so
what the index costs per array shows here rather than per record. Each BCF has
--records records, every seventh field set; the time is the best of --repeats in-process
``vcfvirtual.index`` runs after a warm-up (numba's kernels compiled and cached). A time
growing faster than the field count means some step is quadratic in the arrays (writing
the Kerchunk references was, before it skipped VirtualiZarr's Dataset round trip).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pysam


def wide_vcf_text(n_fields: int, n_records: int) -> str:
    header = ["##fileformat=VCFv4.3", "##contig=<ID=chr1>"]
    header += [f'##INFO=<ID=F{i},Number=1,Type=Integer,Description="field {i}">' for i in range(n_fields)]
    header.append("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO")
    records = [
        f"chr1\t{pos}\t.\tA\tC\t.\t.\t" + ";".join(f"F{i}={i + pos}" for i in range(0, n_fields, 7))
        for pos in range(1, n_records + 1)
    ]
    return "\n".join(header + records) + "\n"


def write_bcf(text: str, path: Path) -> Path:
    vcf = path.with_suffix(".vcf")
    vcf.write_text(text)
    with pysam.VariantFile(str(vcf)) as src, pysam.VariantFile(str(path), "wb", header=src.header) as dst:
        for rec in src:
            dst.write(rec)
    return path


def time_index(bcf: Path, repeats: int) -> float:
    import vcfvirtual

    def once():
        start = time.perf_counter()
        vcfvirtual.index(
            bcf, refs_path=bcf.with_suffix(".vcz.json"), cache_path=bcf.with_suffix(".cache.bcf"), force=True
        )
        return time.perf_counter() - start

    once()  # warm-up: compiled kernels, imports
    return min(once() for _ in range(repeats))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fields", default="50,200,1000,2000", help="INFO field counts (default: %(default)s)")
    parser.add_argument("--records", type=int, default=2, help="records per BCF (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per BCF; the best is kept")
    args = parser.parse_args(argv)
    rows = ["| INFO fields | records | index (s) | ms per field |", "|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="vcfvirtual-wide-") as tmp:
        for n in (int(x) for x in args.fields.split(",")):
            bcf = write_bcf(wide_vcf_text(n, args.records), Path(tmp) / f"wide{n}.bcf")
            seconds = time_index(bcf, args.repeats)
            rows.append(f"| {n:,} | {args.records:,} | {seconds:.2f} | {1000 * seconds / n:.2f} |")
            print(rows[-1], file=sys.stderr)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
