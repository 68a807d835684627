"""VCF input: htslib (bcftools view, bundled in pysam) writes it as a BGZF BCF, which is
then indexed as any BCF. The BCF is a temporary: the chunk-aligned cache is a complete
BCF of the same records.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import NotBCFError, OutputWriteError
from ..io.outputs import temporary_name

VCF_SUFFIXES = (".vcf", ".vcf.gz", ".vcf.bgz")

logger = logging.getLogger(__name__)


def is_vcf_path(path: str | os.PathLike[str]) -> bool:
    """VCF input is recognised by name: a ``.bcf`` holding VCF text is a mistake to report."""
    return Path(path).name.lower().endswith(VCF_SUFFIXES)


_FIELD_LINE = re.compile(r"##(INFO|FORMAT)=<(?:.*?,)?ID=([^,>]+)")


def vcf_field_ids(path: str | os.PathLike[str]) -> tuple[list[str], list[str]] | None:
    """The IDs of a local VCF's INFO and FORMAT header lines, in order, first definition
    of each (as htslib keeps them), read from its text without converting it, so the
    fields can be checked before htslib writes anything; None when it cannot be read as
    text (the conversion then says why)."""
    found: dict[str, list[str]] = {"INFO": [], "FORMAT": []}
    opener = gzip.open if Path(path).name.lower().endswith((".gz", ".bgz")) else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.startswith("##"):
                    break
                m = _FIELD_LINE.match(line)
                if m and m.group(2) not in found[m.group(1)]:
                    found[m.group(1)].append(m.group(2))
    except (OSError, EOFError, zlib.error):
        return None
    return found["INFO"], found["FORMAT"]


def vcf_to_bcf(vcf_path: str | os.PathLike[str], bcf_path: Path) -> None:
    problem = _bcftools_view(vcf_path, bcf_path)
    if problem is None:
        return
    # bcftools fails alike on a bad VCF and on a BCF it cannot write (a full disk). Which
    # one it was: read the VCF again, writing nothing. Only on failure, so it costs nothing
    # on success.
    if _bcftools_view(vcf_path, None) is None:
        raise OutputWriteError(
            bcf_path,
            f"cannot write the BCF converted from {vcf_path}: {problem}",
            hint="free disk space, or write the cache elsewhere with cache_path= "
            "(the conversion is written next to it)",
        )
    raise NotBCFError(
        vcf_path,
        f"htslib cannot convert this VCF to BCF: {problem}",
        hint="check it with bcftools view; BCF needs every contig and field declared",
    )


def _bcftools_view(vcf_path: str | os.PathLike[str], bcf_path: Path | None) -> str | None:
    """Convert with bcftools view (to nowhere when ``bcf_path`` is None): None when it
    worked, else the last line it printed."""
    import pysam
    import pysam.bcftools

    out = ["-Ob", "-o", str(bcf_path)] if bcf_path is not None else ["-Ou", "-o", "/dev/null"]
    # htslib's own messages would go straight to stderr, ahead of the CLI's one line.
    verbosity = pysam.set_verbosity(0)
    try:
        pysam.bcftools.view("--no-version", *out, str(vcf_path), catch_stdout=False)
    except pysam.utils.SamtoolsError as e:
        lines = [line for line in str(e).splitlines() if line.strip()]
        return lines[-1].strip() if lines else "unknown error"
    finally:
        pysam.set_verbosity(verbosity)
    return None


@contextlib.contextmanager
def as_bcf(sources: list[Path], cache_path: Path) -> Iterator[list[Path]]:
    """BCF paths to scan: the sources, with VCF input converted by htslib first (named as
    temporaries of the cache, so a killed run's copies are cleaned up like any other)."""
    converted = []
    paths = []
    try:
        for i, path in enumerate(sources):
            if is_vcf_path(path):
                bcf = temporary_name(cache_path, f"vcf{i}")
                converted.append(bcf)
                logger.info("%s: VCF input, converting to BCF with htslib", path)
                vcf_to_bcf(path, bcf)
                paths.append(bcf)
            else:
                paths.append(path)
        yield paths
    finally:
        for bcf in converted:
            bcf.unlink(missing_ok=True)
