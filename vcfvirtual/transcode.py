"""VCF input: htslib (bcftools view, bundled in pysam) writes it as a BGZF BCF, which is
then indexed as any BCF. The BCF is a temporary: the chunk-aligned cache is a complete
BCF of the same records."""

from __future__ import annotations

from pathlib import Path

from .errors import NotBCFError

VCF_SUFFIXES = (".vcf", ".vcf.gz", ".vcf.bgz")


def is_vcf_path(path) -> bool:
    """VCF input is recognised by name: a ``.bcf`` holding VCF text is a mistake to report."""
    return Path(path).name.lower().endswith(VCF_SUFFIXES)


def vcf_to_bcf(vcf_path, bcf_path) -> None:
    import pysam
    import pysam.bcftools

    try:
        pysam.bcftools.view("--no-version", "-Ob", "-o", str(bcf_path), str(vcf_path), catch_stdout=False)
    except pysam.utils.SamtoolsError as e:
        lines = [line for line in str(e).splitlines() if line.strip()]
        detail = lines[-1].strip() if lines else "unknown error"
        raise NotBCFError(vcf_path, f"htslib cannot convert this VCF to BCF: {detail}",
                          hint="check it with bcftools view; BCF needs every contig and field declared") from None
