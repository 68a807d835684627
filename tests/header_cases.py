"""A generator of VCF header conventions seen in real files, as small test VCFs.

Old and new spellings of Number (-1 for ".", VCF 4.4/4.5 P/LA/LR/LG/M), Number=0 with
and without values, Number=G without samples, Flags given values, contig IDX= with gaps,
very long alleles, thousands of INFO keys, missing values in every kind of field, String
keys given without a value, fields named like the fixed arrays (indexed with the renames a
user would give), symbolic deletions ending far past their position, and the files
bio2zarr cannot convert (no records, several contigs without an index). Each case
is VCF text plus how to write it (through pysam, which rewrites the header, or bcftools,
which keeps IDX=) and which oracle judges our reading: bio2zarr where it converts the
file, htslib (pysam and bcftools) always. Nothing here knows about vcfvirtual.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import bcfdata

BASE = """##fileformat=VCFv4.3
##contig=<ID=chr1,length=100000>
##FILTER=<ID=PASS,Description="All filters passed">
"""
GT = '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n'
# The names of VCF Zarr's fixed arrays after their prefix (variant_<name>, call_<name>):
# an INFO or FORMAT field of that name would take the fixed array's name.
FIXED_INFO = ("contig", "position", "length", "id", "id_mask", "allele", "quality", "filter")
FIXED_FORMAT = ("genotype", "genotype_phased", "genotype_mask")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    header: str  # meta lines after BASE (or the whole header when ``own_header``)
    records: tuple[str, ...]
    samples: tuple[str, ...] = ("S1", "S2")
    # "equal": bio2zarr converts it and must agree; "refuses": it cannot convert it;
    # "differs": it converts it but reads it otherwise (a documented choice, see note)
    bio2zarr: str = "equal"
    writer: str = "pysam"  # "pysam" (header rewritten by htslib) or "bcftools" (text kept, IDX=)
    index: bool = True
    own_header: bool = False
    note: str = ""
    # index() keywords the case needs (e.g. rename_fields for names that clash); the
    # oracles read rename_fields to find each field's array.
    index_options: dict = dataclasses.field(default_factory=dict)

    @property
    def renames(self) -> dict:
        return dict(self.index_options.get("rename_fields", {}))

    def text(self) -> str:
        header = self.header if self.own_header else BASE + self.header
        return bcfdata.vcf_text(list(self.records), samples=self.samples, header=header)

    def write(self, directory: Path) -> Path:
        path = Path(directory) / f"{self.name}.bcf"
        if self.writer == "pysam":
            return bcfdata.write_bcf(self.text(), path, index=self.index)
        vcf = path.with_suffix(".vcf")
        vcf.write_text(self.text())
        bcfdata.bcftools("view", "--no-version", "-Ob", "-o", path, vcf)
        if self.index:
            bcfdata.bcftools("index", path)
        return path


def info(name, number, vtype="Integer"):
    return f'##INFO=<ID={name},Number={number},Type={vtype},Description="INFO {name} Number={number}">\n'


def fmt(name, number, vtype="Integer"):
    return f'##FORMAT=<ID={name},Number={number},Type={vtype},Description="FORMAT {name} Number={number}">\n'


def wide_info_case(n_fields: int, n_records: int = 3) -> Case:
    """``n_fields`` INFO keys of every numeric kind, each record setting a different third."""
    kinds = [
        ("1", "Integer"),
        ("1", "Float"),
        (".", "Integer"),
        ("A", "Integer"),
        ("R", "Float"),
        ("2", "Integer"),
        ("0", "Flag"),
        ("1", "String"),
    ]
    header = "".join(info(f"K{i}", *kinds[i % len(kinds)]) for i in range(n_fields))

    def value(i, pos):
        number, vtype = kinds[i % len(kinds)]
        if vtype == "Flag":
            return f"K{i}"
        if vtype == "String":
            return f"K{i}=s{i}_{pos}"
        count = {"1": 1, ".": 1 + (i + pos) % 3, "A": 2, "R": 3, "2": 2}[number]
        values = [str(i + pos + j) if vtype == "Integer" else f"{(i + pos + j) / 4}" for j in range(count)]
        if (i + pos) % 5 == 0:
            values = ["."]  # a missing value in a vector field: missing in every slot
        return f"K{i}=" + ",".join(values)

    records = tuple(
        f"chr1\t{pos * 10}\t.\tA\tC,G\t{pos}\tPASS\t"
        + ";".join(value(i, pos) for i in range(pos % 3, n_fields, 3))
        + "\tGT\t0/1\t1/2"
        for pos in range(1, n_records + 1)
    )
    return Case(f"info_{n_fields}_fields", header + GT, records)


def cases() -> list[Case]:
    out = [
        Case(
            "number_minus_one",
            info("XN", "-1") + info("XM", "-2", "Float") + GT + fmt("PL", "-1") + fmt("AD", "-1"),
            (
                "chr1\t10\t.\tA\tC,G,T\t.\t.\tXN=1,2,3;XM=0.5\tGT:PL:AD\t0/1:1,2,3:4,5\t1/1:.:.",
                "chr1\t20\t.\tA\tC\t.\t.\tXN=.\tGT:PL\t0/1:1,2,3,4,5,6,7,8,9,10\t./.:.",
                "chr1\t30\t.\tA\tC\t.\t.\t.\tGT\t0/0\t0/1",
            ),
            note="samtools-era Number=-1 spelling of '.', htslib stores it as 0xFFFFF",
        ),
        Case(
            "info_missing_everywhere",
            info("AC", "A")
            + info("AF", "A", "Float")
            + info("XR", "R")
            + info("XR2", "R", "Float")
            + info("X2", "2")
            + info("XD", ".")
            + info("XDF", ".", "Float")
            + info("XG", "G")
            + info("X1", "1")
            + info("XS", ".", "String")
            + GT
            + fmt("FA", "A")
            + fmt("FD", ".", "Float")
            + fmt("F2", "2"),
            (
                (
                    "chr1\t10\t.\tA\tC,G,T\t.\t.\tAC=.;AF=.;XR=.;XR2=.;X2=.;XD=.;XDF=.;XG=.;X1=.;XS=.\tGT:FA:FD:F2"
                    "\t0/1:.:.:.\t1/2:1,.,3:.,1.5:.,4"
                ),
                (
                    "chr1\t20\t.\tA\tC,G,T\t.\t.\tAC=1,.,2;AF=.,0.5,.;XR=1;XR2=.,.;X2=3;XD=1,2,3;XDF=nan;XG=1,2;X1=4"
                    "\tGT:FA\t0/1:1,2,3\t./.:."
                ),
                "chr1\t30\t.\tA\tC\t.\t.\tAC=1;XD=.;XDF=1.5,2.5\tGT\t0/1\t1/1",
            ),
            note="'.' for a whole INFO vector is missing in every slot; FORMAT keeps missing-then-fill",
        ),
        Case(
            "vcf45_numbers",
            info("IP", "P")
            + GT
            + fmt("FP", "P")
            + fmt("LAA", ".")
            + fmt("LAD", "LR")
            + fmt("LPL", "LG")
            + fmt("FLA", "LA")
            + fmt("FM", "M"),
            (
                "chr1\t10\t.\tA\tC,G,T\t.\t.\tIP=1,2\tGT:FP:LAA:LAD:LPL:FLA:FM\t0/1:1,2:1:3,4:1,2,3:7:5\t1:1:.:.:.:.:.",
                "chr1\t20\t.\tA\tC\t.\t.\t.\tGT:FP:LAA:LAD:LPL\t0/1:1,2:1,2:1,2,3:1,2,3,4,5,6\t0:.:.:.:.",
            ),
            bio2zarr="refuses",
            note="bio2zarr: int('P') fails; htslib reads them as per-record lengths",
        ),
        Case(
            "number_zero_with_values",
            info("FR", "0") + info("FF", "0", "Float") + info("FL", "0", "Flag") + GT,
            (
                "chr1\t10\t.\tA\tC\t.\t.\tFR=5;FF=2.5;FL\tGT\t0/1\t0/0",
                "chr1\t20\t.\tA\tC\t.\t.\tFR=1,2\tGT\t0/1\t0/0",
                "chr1\t30\t.\tA\tC\t.\t.\t.\tGT\t0/1\t0/0",
            ),
            note="a Number=0 Integer/Float given values keeps them, as htslib does",
        ),
        Case(
            "number_zero_without_values",
            info("FR", "0") + info("FF", "0", "Float") + GT,
            (
                "chr1\t10\t.\tA\tC\t.\t.\tFR;FF\tGT\t0/1\t0/0",
                "chr1\t20\t.\tA\tC\t.\t.\tFR=3\tGT\t0/1\t0/0",
                "chr1\t30\t.\tA\tC\t.\t.\t.\tGT\t0/1\t0/0",
            ),
            bio2zarr="differs",
            note="present with no value: htslib holds zero values (pysam reads ()), we store fill; bio2zarr invents 0",
        ),
        Case(
            "number_g_without_samples",
            info("XG", "G") + info("DP", "1"),
            (
                "chr1\t10\t.\tA\tC\t.\t.\tXG=1,2,3;DP=4",
                "chr1\t20\t.\tA\tC,G\t.\t.\tXG=1,2,3,4,5,6",
                "chr1\t30\t.\tA\tC\t.\t.\tXG=.",
            ),
            samples=(),
            bio2zarr="refuses",
            note="no GT, no FORMAT Number=G: genotypes sized from the values",
        ),
        Case(
            "flag_with_value",
            info("FL", "0", "Flag") + info("DP", "1") + GT,
            (
                "chr1\t10\t.\tA\tC\t.\t.\tFL=3;DP=1\tGT\t0/1\t0/0",
                "chr1\t20\t.\tA\tC\t.\t.\tFL\tGT\t0/1\t0/0",
                "chr1\t30\t.\tA\tC\t.\t.\tDP=2\tGT\t0/1\t0/0",
            ),
            bio2zarr="refuses",
            note="a Flag given a value is still just present (bio2zarr: ufunc error)",
        ),
        Case(
            "long_alleles",
            info("SVLEN", "A") + GT,
            (
                f"chr1\t10\t.\t{'ACGT' * 2500}\tA,{'G' * 7001}\t.\t.\tSVLEN=-9999,7000\tGT\t0/1\t1/2",
                f"chr1\t20000\t.\tT\t{'TC' * 4000}\t.\t.\tSVLEN=.\tGT\t0/1\t./.",
            ),
            note="10 kb REF, 8 kb ALT",
        ),
        Case(
            "contig_idx_gaps_no_records",
            '##fileformat=VCFv4.3\n##FILTER=<ID=PASS,Description="All filters passed",IDX=0>\n'
            "##contig=<ID=chr1,length=1000,IDX=3>\n##contig=<ID=chr2,length=500,IDX=1>\n"
            '##INFO=<ID=DP,Number=1,Type=Integer,Description="Depth",IDX=5>\n' + GT.replace(">", ",IDX=6>"),
            (),
            samples=("S1",),
            bio2zarr="refuses",
            writer="bcftools",
            own_header=True,
            index=False,
            note="IDX= leaves ids 0 and 2 unused; bio2zarr cannot convert zero records",
        ),
        Case(
            "contig_idx_gaps",
            '##fileformat=VCFv4.3\n##FILTER=<ID=PASS,Description="All filters passed",IDX=0>\n'
            "##contig=<ID=chr1,length=1000,IDX=3>\n##contig=<ID=chr2,length=500,IDX=1>\n"
            '##INFO=<ID=DP,Number=1,Type=Integer,Description="Depth",IDX=5>\n' + GT.replace(">", ",IDX=6>"),
            ("chr1\t5\t.\tA\tC\t.\t.\tDP=3\tGT\t0/1", "chr2\t7\t.\tG\tT\t.\tPASS\tDP=4\tGT\t1/1"),
            samples=("S1",),
            bio2zarr="refuses",
            writer="bcftools",
            own_header=True,
            index=False,
            note="records name contigs by IDX; bio2zarr wants an index for several contigs",
        ),
        Case(
            "zero_records",
            info("DP", "1") + info("AC", "A") + GT + fmt("AD", "R"),
            (),
            bio2zarr="refuses",
            note="bio2zarr: 'Chunk size must be positive'",
        ),
        Case("zero_records_zero_samples", info("DP", "1"), (), samples=(), bio2zarr="refuses"),
        Case(
            "several_contigs_unindexed",
            "##contig=<ID=chr2,length=5000>\n" + info("DP", "1") + GT,
            (
                "chr2\t5\t.\tA\tC\t.\t.\tDP=1\tGT\t0/1\t1/1",
                "chr1\t9\t.\tA\tC\t.\t.\tDP=2\tGT\t0/0\t./.",
                "chr2\t3\t.\tA\tC\t.\t.\t.\tGT\t0/1\t0|1",
            ),
            bio2zarr="refuses",
            index=False,
            note="unsorted, several contigs, no index: file order kept",
        ),
        Case(
            "int8_edges",
            info("V", "1") + info("W", "2") + GT + fmt("Q", "1"),
            (
                "chr1\t1\t.\tA\tC\t.\t.\tV=-120;W=-120,5\tGT:Q\t0/1:-120\t0/0:3",
                "chr1\t2\t.\tA\tC\t.\t.\tV=127;W=-127,-128\tGT:Q\t0/1:-128\t0/0:.",
                "chr1\t3\t.\tA\tC\t.\t.\tV=-121;W=-125,127\tGT:Q\t0/1:127\t0/0:-127",
            ),
            note="-128 and -127 are BCF int8 sentinels: htslib widens them, values stay values",
        ),
        Case(
            "empty_info_keys",
            info("V", "1") + info("S", "1", "String") + GT,
            (
                "chr1\t1\t.\tA\tC\t.\t.\tV=1;;S=x\tGT\t0/1\t0/0",
                "chr1\t2\t.\tA\tC\t.\t.\t;V=2\tGT\t0/1\t0/0",
                "chr1\t3\t.\tA\tC\t.\t.\tS=\tGT\t0/1\t0/0",
            ),
            bio2zarr="differs",
            note="empty keys between ';' and an empty String value: htslib holds no value (prints S alone, "
            "as for a bare key), we read '.', bio2zarr ''",
        ),
        Case(
            "bare_string_keys",
            info("S1", "1", "String")
            + info("SD", ".", "String")
            + info("S2", "2", "String")
            + info("SA", "A", "String")
            + info("SR", "R", "String")
            + info("C1", "1", "Character")
            + info("DP", "1")
            + GT,
            (
                "chr1\t10\t.\tA\tC\t.\t.\tS1;SD;S2;SA;SR;C1;DP=1\tGT\t0/1\t0/0",
                "chr1\t20\t.\tA\tC,G\t.\t.\tS1=x;SD=a,b,c;S2=p,q;SA=y,z;SR=r,s,t;C1=c\tGT\t0/1\t1/2",
                "chr1\t30\t.\tA\tC\t.\t.\tDP=3;SD;S1=.;S2=.\tGT\t0/1\t0/0",
                "chr1\t40\t.\tA\tC\t.\t.\tSR=;SD=;C1=\tGT\t0/1\t0/0",
                "chr1\t50\t.\tA\tC\t.\t.\t.\tGT\t0/1\t0/0",
            ),
            bio2zarr="refuses",
            note="VEP writes String keys without a value (...;NOVALUE;...): htslib holds none, pysam reads "
            "None or (); '.' in every slot, for every Number (bio2zarr fails on them)",
        ),
        Case(
            "clashing_names",
            info("filter", "1", "String")
            + info("id", "1")
            + info("id_mask", "0", "Flag")
            + info("position", "1")
            + info("contig", "1", "String")
            + info("quality", "1", "Float")
            + info("allele", ".", "String")
            + info("length", "1")
            + info("DP", "1")
            + GT
            + fmt("genotype", "1")
            + fmt("genotype_phased", "1", "String")
            + fmt("genotype_mask", "2"),
            (
                "chr1\t10\trs1\tA\tC\t5\tPASS\tfilter=x;id=3;id_mask;position=7;contig=c;quality=1.5;allele=A,C;"
                "length=4;DP=2\tGT:genotype:genotype_phased:genotype_mask\t0/1:1:p:1,2\t1|1:.:.:3",
                "chr1\t20\t.\tA\tC\t.\t.\tfilter=lowQ\tGT:genotype\t0/0:9\t./.:.",
            ),
            bio2zarr="refuses",
            note="freebayes writes INFO/filter; each would replace a fixed array: refused, and indexed here "
            "with renames (bio2zarr refuses them)",
            index_options={
                "rename_fields": {
                    **{f"INFO/{n}": f"{n}_info" for n in FIXED_INFO},
                    **{f"FORMAT/{n}": f"{n}_format" for n in FIXED_FORMAT},
                }
            },
        ),
        Case(
            "long_symbolic_deletions",
            "##contig=<ID=chr2,length=50000000>\n"
            + info("END", "1")
            + info("SVTYPE", "1", "String")
            + '##ALT=<ID=DEL,Description="Deletion">\n'
            + GT,
            (
                "chr1\t1\t.\tN\t<DEL>\t.\tPASS\tSVTYPE=DEL;END=10000\tGT\t0/1\t0/0",
                "chr1\t50\t.\tA\tC\t.\tPASS\t.\tGT\t0/1\t0/0",
                "chr1\t60\t.\tA\tC\t.\tPASS\t.\tGT\t0/1\t0/0",
                "chr2\t1\t.\tN\t<DEL>\t.\tPASS\tSVTYPE=DEL;END=40306195\tGT\t1/1\t0/1",
                "chr2\t100\t.\tA\tC\t.\tPASS\t.\tGT\t0/1\t0/0",
            ),
            bio2zarr="refuses",
            note="positions fit int8, ends do not: region_index widens (bio2zarr: OverflowError)",
        ),
        wide_info_case(40),
    ]
    return out
