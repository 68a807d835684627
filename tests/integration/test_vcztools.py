"""vcztools reads our store exactly as it reads bio2zarr's store of the same BCF.

vcztools does not install on Python 3.12 here, so it runs from a separate environment
named by VCZTOOLS_PYTHON (``.ci/run`` builds one with vcztools and our codec); our
store is opened there through the Kerchunk JSON and the codec's entry point.
"""

from __future__ import annotations

import json
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


# vcztools' command line (its click command, as `python -m vcztools` runs it) in one
# process of VCZTOOLS_PYTHON for the module: each command a JSON list of arguments on a
# line of stdin, each answer [exit code, stdout, stderr] on a line of the protocol pipe
# (the process's stdout, moved off fd 1 so nothing else written there mixes in).
# A process start costs seconds, and the tests run six commands each.
DRIVER = r"""
import json, os, sys, traceback
from click.testing import CliRunner
from vcztools.cli import vcztools_main
protocol = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
runner = CliRunner()
for line in sys.stdin:
    result = runner.invoke(vcztools_main, json.loads(line))
    raised = result.exception is not None and not isinstance(result.exception, SystemExit)
    error = "".join(traceback.format_exception(*result.exc_info)) if raised else ""
    protocol.write(json.dumps([result.exit_code, result.stdout, result.stderr + error]) + "\n")
    protocol.flush()
"""


@pytest.fixture(scope="module")
def vcztools():
    """Runs a vcztools command, returning its output less the lines naming the writer."""
    proc = subprocess.Popen([VCZTOOLS_PYTHON, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(*args) -> str:
        proc.stdin.write(json.dumps([str(a) for a in args]) + "\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        assert answer, f"the vcztools process ended (exit {proc.wait()})"
        code, stdout, stderr = json.loads(answer)
        assert code == 0, stderr
        # The command line it records and the writer it names (##source=bio2zarr-... vs
        # ##source=vcfvirtual ...) differ by construction; everything else must not.
        writer = ("##vcztools_", "##source=bio2zarr", "##source=vcfvirtual")
        return "".join(line + "\n" for line in stdout.splitlines() if not line.startswith(writer))

    yield run
    proc.stdin.close()
    proc.wait(timeout=60)


def ours(refs: Path) -> list[str]:
    return ["--backend-storage", "fsspec", "--storage-option", f"fo={refs}", "reference://"]


CORPUS_FILES = [
    "sgkit-dev+bio2zarr/tests/data/vcf/sample.vcf.gz",
    "sgkit-dev+bio2zarr/tests/data/vcf/field_type_combos.vcf.gz",
    "sgkit-dev+bio2zarr/tests/data/vcf/1kg_2020_chrM.bcf",
    "samtools+bcftools/test/mpileup.vcf",
]


# Each vcztools command costs time, so the columns layout reads the two test files and
# the corpus file with every field type, with samples blocks of 2 (small: 3 samples) or
# 7, so vcztools reads samples across blocks and a narrower last one.
COLUMNS_FILES = ["small", "cohort", "sgkit-dev+bio2zarr/tests/data/vcf/field_type_combos.vcf.gz"]


@pytest.mark.parametrize(
    ("which", "cache_layout"),
    [(which, "bgzf") for which in ["small", "cohort", *CORPUS_FILES]] + [(which, "columns") for which in COLUMNS_FILES],
)
def test_vcztools_view_and_query_match(which, small_bcf, cohort_bcf, tmp_path, cache_layout, vcztools):
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
