"""vcztools reads our store exactly as it reads bio2zarr's store of the same BCF.

vcztools does not install on Python 3.12 here, so it runs from a separate environment
named by VCZTOOLS_PYTHON (``.ci/run`` builds one with vcztools and our codec); our
store is opened there through the Kerchunk JSON and the codec's entry point.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ..conftest import bio2zarr_convert, layout_options, open_both
from ..oracle.test_corpus import CORPUS, to_bcf

VCZTOOLS_PYTHON = os.environ.get("VCZTOOLS_PYTHON")
pytestmark = pytest.mark.skipif(
    not VCZTOOLS_PYTHON, reason="set VCZTOOLS_PYTHON to a Python with vcztools (see .ci/run)"
)


def vcztools(*args) -> str:
    proc = subprocess.run([VCZTOOLS_PYTHON, "-m", "vcztools", *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # The command line it records and the writer it names (##source=bio2zarr-... vs
    # ##source=vcfvirtual ...) differ by construction; everything else must not.
    writer = ("##vcztools_", "##source=bio2zarr", "##source=vcfvirtual")
    return "".join(line + "\n" for line in proc.stdout.splitlines() if not line.startswith(writer))


def ours(refs: Path) -> list[str]:
    return ["--backend-storage", "fsspec", "--storage-option", f"fo={refs}", "reference://"]


CORPUS_FILES = [
    "sgkit-dev+bio2zarr/tests/data/vcf/sample.vcf.gz",
    "sgkit-dev+bio2zarr/tests/data/vcf/field_type_combos.vcf.gz",
    "sgkit-dev+bio2zarr/tests/data/vcf/1kg_2020_chrM.bcf",
    "samtools+bcftools/test/mpileup.vcf",
]


# Each vcztools run costs seconds (its start), so the columns layout reads the two test
# files and the corpus file with every field type, with samples blocks of 2 (small: 3
# samples) or 7, so vcztools reads samples across blocks and a narrower last one.
COLUMNS_FILES = ["small", "cohort", "sgkit-dev+bio2zarr/tests/data/vcf/field_type_combos.vcf.gz"]


@pytest.mark.parametrize(
    ("which", "cache_layout"),
    [(which, "bgzf") for which in ["small", "cohort", *CORPUS_FILES]] + [(which, "columns") for which in COLUMNS_FILES],
)
def test_vcztools_view_and_query_match(which, small_bcf, cohort_bcf, tmp_path, cache_layout):
    if which == "small":
        bcf = small_bcf
    elif which == "cohort":
        bcf = cohort_bcf
    else:
        bcf = to_bcf(CORPUS / which, tmp_path / "input.bcf")
    ref = tmp_path / "ref.vcz"
    bio2zarr_convert(bcf, ref, 100)
    open_both(bcf, 100, tmp_path, **layout_options(cache_layout, 2 if which == "small" else 7))
    refs = tmp_path / (bcf.name + ".vcz.json")
    theirs_view = vcztools("view", ref)
    assert vcztools("view", *ours(refs)) == theirs_view
    fmt = "%CHROM\t%POS\t%REF\t%ALT\t%QUAL\t%FILTER" + ("[\t%GT]" if "##FORMAT=<ID=GT," in theirs_view else "") + "\n"
    assert vcztools("query", "-f", fmt, *ours(refs)) == vcztools("query", "-f", fmt, ref)
    contig = theirs_view.split("\n#CHROM", 1)[1].splitlines()[1].split("\t")[0]
    region = f"{contig}:1-100000"
    assert vcztools("view", "-H", "-r", region, *ours(refs)) == vcztools("view", "-H", "-r", region, ref)
