"""Test BCFs, written by htslib (through pysam) from VCF text we compose here.

Nothing in here knows about vcfvirtual: these files are inputs for both vcfvirtual and
the oracles (bio2zarr, pysam, bcftools).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pysam
import pysam.bcftools

HEADER = """##fileformat=VCFv4.3
##source=vcfvirtual-tests
##contig=<ID=chr1,length=248956422>
##contig=<ID=chr2,length=242193529>
##contig=<ID=chrX>
##FILTER=<ID=PASS,Description="All filters passed">
##FILTER=<ID=q10,Description="Quality below 10">
##FILTER=<ID=s50,Description="Less than 50% of samples have data">
##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
"""

# Hand-written records covering the core slice: multi-allelic sites, missing and
# partially missing GT, phased and unphased calls, several contigs and FILTERs,
# missing QUAL/ID, an indel (rlen > 1), a site with no ALT and one with no GT.
SMALL_RECORDS = [
    "chr1\t100\trs1\tA\tT\t30\tPASS\tDP=5\tGT\t0|1\t./.\t1/1",
    "chr1\t200\t.\tACGT\tA,AC\t.\tq10;s50\t.\tGT\t0/2\t1/.\t2|2",
    "chr1\t250\trs3;rs4\tG\t.\t1.5\t.\t.\tGT\t0/0\t0|0\t./.",
    "chr1\t300\t.\tC\tG,T,CA,CAT\t99\ts50\t.\tGT\t3/4\t.|.\t0/1",
    "chr2\t10\trs5\tT\tC\t12\tPASS\t.\tGT\t1|0\t0/1\t.|1",
    "chr2\t20\t.\tTTT\tT\t0\tq10\t.\t.\t.\t.\t.",
    "chrX\t5\t.\tG\tA\t.\t.\t.\tGT\t0/1\t1|1\t1/.",
]


def write_bcf(vcf_text: str, path: Path, index: bool = True) -> Path:
    """Write VCF text to ``path`` as BGZF BCF through htslib, with a CSI index."""
    path = Path(path)
    vcf_path = path.with_suffix(".vcf")
    vcf_path.write_text(vcf_text)
    with pysam.VariantFile(str(vcf_path)) as src, pysam.VariantFile(str(path), "wb", header=src.header) as dst:
        for rec in src:
            dst.write(rec)
    if index:
        pysam.bcftools.index(str(path))
    return path


def bcftools(command: str, *args) -> str:
    """Run htslib's bcftools ``command`` and return what it prints.

    pysam bundles bcftools, so the tests need no system install; a failure raises
    ``pysam.utils.SamtoolsError`` with bcftools' message."""
    writes_file = "-o" in args or command == "index"
    out = getattr(pysam.bcftools, command)(*map(str, args), catch_stdout=not writes_file)
    return out or ""


def vcf_text(records, samples=("S1", "S2", "S3"), header=HEADER) -> str:
    cols = "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"
    if samples:
        cols += "\tFORMAT\t" + "\t".join(samples)
    return header + cols + "\n" + "".join(r + "\n" for r in records)


def small_bcf(path: Path) -> Path:
    return write_bcf(vcf_text(SMALL_RECORDS), path)


def _diploid_calls(alleles: np.ndarray, missing: np.ndarray, phased: np.ndarray, n_alleles: int) -> str:
    """The samples' GT columns, tab-joined: ``alleles[j]`` as "a/b" ("a|b" where ``phased[j]``),
    "." for a ``missing`` allele. Looked up in a table of every call text rather than
    composed sample by sample (a 16,000 x 300 cohort took ~18 s in Python loops)."""
    texts = [str(i) for i in range(n_alleles)] + ["."]
    table = np.array([x + sep + y for x in texts for sep in "/|" for y in texts], dtype=object)
    first, second = (np.where(missing[:, k], n_alleles, alleles[:, k]) for k in range(2))
    return "\t".join(table[(first * 2 + phased) * len(texts) + second].tolist())


def random_cohort_vcf(n_records: int, n_samples: int, seed: int = 1, contigs=("chr1", "chr2")) -> str:
    """Random diploid cohort: enough samples that records cross BGZF block boundaries."""
    rng = np.random.default_rng(seed)
    samples = [f"sample_{j}" for j in range(n_samples)]
    records = []
    per_contig = np.array_split(np.arange(n_records), len(contigs))
    bases = np.array(list("ACGT"))
    for contig, idx in zip(contigs, per_contig):
        positions = np.sort(rng.choice(np.arange(1, 50 * n_records), size=len(idx), replace=False))
        for pos in positions:
            n_alt = rng.choice([1, 1, 1, 2, 3])
            ref = bases[rng.integers(4)]
            alts = [a for a in bases if a != ref][:n_alt]
            n_alleles = 1 + len(alts)
            a = rng.integers(0, n_alleles, size=(n_samples, 2))
            miss = rng.random((n_samples, 2)) < 0.03
            phased = rng.random(n_samples) < 0.5
            calls = _diploid_calls(a, miss, phased, n_alleles)
            qual = "." if rng.random() < 0.1 else f"{rng.uniform(0, 100):.1f}"
            filt = rng.choice(["PASS", "q10", "s50", "q10;s50", "."])
            vid = "." if rng.random() < 0.5 else f"rs{pos}"
            records.append(
                f"{contig}\t{pos}\t{vid}\t{ref}\t{','.join(alts)}\t{qual}\t{filt}\tDP={rng.integers(0, 500)}\tGT\t"
                + calls
            )
    return vcf_text(records, samples)


FUZZ_HEADER = (
    HEADER
    + """##INFO=<ID=AF,Number=A,Type=Float,Description="Allele frequency">
##INFO=<ID=NOTE,Number=1,Type=String,Description="Free text">
##INFO=<ID=SOMATIC,Number=0,Type=Flag,Description="Somatic">
##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Read depth">
##FORMAT=<ID=QS,Number=1,Type=Float,Description="A float score">
##FORMAT=<ID=FT,Number=1,Type=String,Description="Sample filter">
"""
)

# Small records touching every typed-value path the codec has (Integer, Float, String,
# Flag INFO; Integer, Float, String FORMAT; GT of ploidy 1 and 2; missing values;
# several contigs and FILTERs) so that mutating a few bytes reaches each decoder.
FUZZ_RECORDS = [
    "chr1\t100\trs1\tA\tT\t30\tPASS\tDP=5;AF=0.5;NOTE=ab\tGT:DP:QS:FT\t0|1:3:9.5:PASS\t./.:.:.:.\t1/1:7:2:lowq",
    "chr1\t200\t.\tACGT\tA,AC\t.\tq10;s50\tSOMATIC;AF=0.1,0.2\tGT:DP\t0/2:1\t1/.:2\t2|2:.",
    "chr1\t250\trs3\tG\tC\t1.5\t.\t.\tGT\t0\t1\t.",
    "chr2\t10\trs5\tT\tC,G\t12\tPASS\tNOTE=x,y\tGT:FT\t1|0:a\t0/1:bb\t.|1:.",
    "chr2\t20\t.\tTTT\tT\t0\tq10\tDP=7\t.\t.\t.\t.",
    "chrX\t5\t.\tG\tA\t.\t.\t.\tGT:QS\t0/1:1\t1|1:.\t1/.:3",
]


def fuzz_bcf(path: Path) -> Path:
    """BGZF BCF of FUZZ_RECORDS, the seed the fuzz tests mutate."""
    return write_bcf(vcf_text(FUZZ_RECORDS, header=FUZZ_HEADER), path, index=False)


def uncompressed_copy(bcf: Path, path: Path) -> Path:
    """The same BCF as a plain uncompressed stream (no BGZF container at all).

    bcftools view -Ou writes level-0 BGZF blocks, which still carry CRCs; the plain
    stream is what gunzip gives, and htslib reads it too."""
    import gzip

    path = Path(path)
    path.write_bytes(gzip.decompress(Path(bcf).read_bytes()))
    return path


def cache_file(cache: Path) -> Path:
    """The file holding a cache's chunks: the first part of a cache made of parts (the
    ``columns`` layout's folder; a serial index writes that one part), else the cache."""
    cache = Path(cache)
    return cache / "part-000000" if cache.is_dir() else cache


def cache_bytes(cache: Path) -> bytes:
    """A cache's bytes: its parts' in name order for a cache made of parts, else the file's."""
    cache = Path(cache)
    return b"".join(p.read_bytes() for p in sorted(cache.iterdir())) if cache.is_dir() else cache.read_bytes()


def referenced_chunks(refs_path: Path) -> dict[str, bytes]:
    """Each chunk reference's bytes, read by hand from a local cache (the ``{{cache}}``
    template resolved, a part's name joined to it): two stores hold the same chunks
    whatever parts their caches are cut into."""
    import json

    refs = json.loads(Path(refs_path).read_text())
    cache = refs["templates"]["cache"].removeprefix("file://")
    chunks = {}
    for key, value in refs["refs"].items():
        if isinstance(value, list):
            with open(value[0].replace("{{cache}}", cache), "rb") as f:
                f.seek(value[1])
                chunks[key] = f.read(value[2])
    return chunks
