"""Real-world files from ../shared/corpus: every array equals bio2zarr's, file by file.

Every corpus file lands in exactly one bucket, and each bucket is checked, so no file
is skipped silently:
* converts to BCF and bio2zarr converts it: all arrays must equal bio2zarr's
  (``KNOWN_DIFFERENCES`` lists reasoned exceptions, marked xfail strict);
* htslib will not write it as BCF (``NOT_BCF``): bcftools must refuse it;
* bio2zarr cannot convert it (``BIO2ZARR_FAILS``): bio2zarr must fail, and we must
  either read it correctly (positions and alleles as pysam reads them) or refuse it
  with one of our clear errors.

Each file runs on the default (bgzf) and the columns cache layout; columns with about
three samples blocks and a narrower last one (``samples_block``). Both compare with the
same bio2zarr conversion (conftest keeps it, between runs too).

Files whose check takes minutes (``SLOW``) are marked ``slow``: the default run skips
them, ``pytest --slow -m slow`` runs them (CI does, as a step of its own).
"""

from __future__ import annotations

from pathlib import Path

import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import VcfVirtualError

from ..bcfdata import bcftools
from ..conftest import bio2zarr_convert, differences_from_bio2zarr, layout_options, open_both

# Copies of files other projects publish; tests/data/corpus/README.md names each one's
# repository and licence.
CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
SUFFIXES = (".vcf", ".vcf.gz", ".bcf")

NOT_BCF = {
    "pysam-developers+pysam/tests/tabix_data/vcf/24.vcf": "#CHROM line uses spaces, not tabs",
    "pysam-developers+pysam/tests/tabix_data/vcf/4.vcf": "records with no sample columns in a 383-sample file",
    "samtools+bcftools/test/isec-miss.2.3.vcf": "records with no sample columns",
    "samtools+bcftools/test/view64bit.3.vcf": "positions beyond 2^31, which BCF cannot hold",
    "samtools+htslib/test/longrefs/index.vcf": "positions beyond 2^31, which BCF cannot hold",
    "samtools+htslib/test/noroundtrip.vcf": "a record names the same FORMAT key twice",
    "sgkit-dev+bio2zarr/tests/data/vcf/sample_missing_filter.vcf.gz": "FILTER q10 used but not declared",
}
BIO2ZARR_FAILS = {
    "brentp+cyvcf2/cyvcf2/tests/test-haploidX.vcf": "FORMAT/AD is Number=R but holds more values than alleles",
    "pysam-developers+pysam/tests/cbcf_data/gnomad.vcf": "INFO/GC_* are Number=G but hold more values",
    "samtools+bcftools/test/view64bit.5.vcf": "INFO/END is Number=A but holds 3 values for 1 ALT",
    "pysam-developers+pysam/tests/cbcf_data/example_vcf43_with_utf8.vcf": (
        "cyvcf2 decodes UTF-8 FORMAT strings as ASCII"
    ),
    "sgkit-dev+bio2zarr/tests/data/vcf/empty.vcf.gz": "bio2zarr cannot size chunks for zero records",
}
KNOWN_DIFFERENCES = {
    "sgkit-dev+bio2zarr/tests/data/vcf/sample_missing_contig.bcf": (
        "records of contig X come after contig 20 in the file but before it in the header: "
        "we keep file order (as bcftools view prints), bio2zarr sorts by header contig order"
    ),
}

# Files whose check takes minutes on two cores, run by ``--slow`` only (CI runs them apart).
SLOW = {
    "sgkit-dev+bio2zarr/tests/data/vcf/NA12878.prod.chr20snippet.g.vcf.gz": (
        "301,778 records: bio2zarr takes ~2 minutes to convert them"
    ),
}

# Arrays whose bio2zarr value is undefined for a file, checked against pysam instead.
_HAPLOID_PHASE = (
    "records where every call is haploid: cyvcf2 reads the phase bit one slot past each call "
    "(the next sample's, and past the array for the last), so bio2zarr's value changes from "
    "run to run; htslib (pysam) calls haploid calls phased"
)
PYSAM_INSTEAD = {
    "sgkit-dev+bio2zarr/tests/data/vcf/mixed_ploidy.vcf.gz": {"call_genotype_phased": _HAPLOID_PHASE},
    # VCF 4.4 phasing prefixes ("/0|1"), which the htslib pysam 0.24 bundles (1.24) reads.
    "samtools+htslib/test/vcf44_1.vcf": {"call_genotype_phased": _HAPLOID_PHASE},
}


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def file_id(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def corpus_params() -> list:
    """The corpus files as test parameters, the SLOW ones marked ``slow``."""
    return [pytest.param(p, marks=pytest.mark.slow) if file_id(p) in SLOW else p for p in corpus_files()]


def to_bcf(path: Path, out: Path) -> Path | None:
    """The file as a BCF (indexed where htslib can), written by the bcftools pysam bundles;
    None when htslib refuses it."""
    try:
        bcftools("view", "--no-version", "-Ob", "-o", out, path)
    except pysam.utils.SamtoolsError:
        return None
    try:
        bcftools("index", "-f", out)
    except pysam.utils.SamtoolsError:
        pass  # e.g. a POS past its contig's declared length; bio2zarr reads one file unindexed
    return out


def test_corpus_is_present():
    assert len(corpus_files()) > 30, f"expected the shared corpus at {CORPUS}"
    listed = set(NOT_BCF) | set(BIO2ZARR_FAILS) | set(KNOWN_DIFFERENCES) | set(SLOW)
    assert listed <= {file_id(p) for p in corpus_files()}, "a listed file is no longer in the corpus"


def _record(request, name: str, outcome: str) -> None:
    """The file's outcome for the run's corpus table (conftest prints it at the end)."""
    request.node.user_properties.append(("corpus", (name, outcome)))


def samples_block(bcf: Path) -> int:
    """The columns layout's samples_chunk_size for a file: about three blocks, so most
    files have a narrower last block too (3 samples: blocks of 2 and 1)."""
    with pysam.VariantFile(str(bcf)) as vf:
        return max(2, len(vf.header.samples) // 3)


# At most this many variants chunks per file, of at least MIN_CHUNK records: several
# chunks (and a shorter last one) wherever a file has more than MIN_CHUNK records, but not
# the 80-90 chunks of 50 that mpileup.vcf and multi_contig.vcf.gz had, whose cost was
# per-chunk overhead (reading, comparing) rather than checking more values.
MAX_CHUNKS = 16
MIN_CHUNK = 50


def variants_chunk(bcf: Path) -> int:
    """The variants chunk length for a file: MIN_CHUNK, or longer so there are at most
    MAX_CHUNKS chunks (bio2zarr and our reads are slow on thousands of small chunks)."""
    with pysam.VariantFile(str(bcf)) as vf:
        records = sum(1 for _ in vf)
    return max(MIN_CHUNK, -(-records // MAX_CHUNKS))


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
@pytest.mark.parametrize("path", corpus_params(), ids=file_id)
def test_corpus_file(path, layout, tmp_path, request):
    name = file_id(path)
    table_name = name if layout == "bgzf" else f"{name} [{layout}]"
    bcf = to_bcf(path, tmp_path / "input.bcf")
    if name in NOT_BCF:
        assert bcf is None, f"bcftools now converts {name}: remove it from NOT_BCF"
        _record(request, table_name, f"not BCF: {NOT_BCF[name]}")
        return
    assert bcf is not None, "htslib (bcftools view) refuses this file"
    options = layout_options(layout, samples_block(bcf))
    if name in BIO2ZARR_FAILS:
        with pytest.raises(Exception):  # noqa: B017 - each file fails bio2zarr its own way
            bio2zarr_convert(bcf, tmp_path / "ref.vcz", 1000)
        ours = _check_against_pysam(bcf, tmp_path, options)
        _record(request, table_name, f"bio2zarr fails ({BIO2ZARR_FAILS[name]}); ours: " + ours)
        return
    reason = KNOWN_DIFFERENCES.get(name)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    chunk_length = variants_chunk(bcf)
    ref = bio2zarr_convert(bcf, tmp_path / "ref.vcz", chunk_length)
    instead = PYSAM_INSTEAD.get(name, {})
    problems = []
    for ds in open_both(bcf, chunk_length, tmp_path, **options):
        problems += differences_from_bio2zarr(ds.drop_vars(list(instead)), ref, ignore=instead)
        if "call_genotype_phased" in instead:
            with pysam.VariantFile(str(bcf)) as vf:
                expected = [[call.phased for call in rec.samples.values()] for rec in vf]
            if ds["call_genotype_phased"].values.tolist() != expected:
                problems.append("call_genotype_phased differs from pysam")
    _record(request, table_name, "pass" if not problems else ("xfail: " + reason if reason else "FAIL"))
    assert not problems, "\n".join(problems)
    if bcf.stat().st_size < 300_000 and name not in PYSAM_INSTEAD:
        # bio2zarr's own verifier walks the BCF with cyvcf2 and checks a store. Where it
        # accepts bio2zarr's store it must accept ours (on some files it rejects both).
        # Ours is walked first: bio2zarr's store needs asking only when ours is rejected.
        from bio2zarr.vcz_verification import verify

        try:
            verify(str(bcf), vcfvirtual.open_store(tmp_path / "input.bcf.vcz.json"))
        except Exception:
            if bio2zarr_accepts_its_store(bcf, tmp_path / "ref.vcz"):
                raise


def bio2zarr_accepts_its_store(bcf: Path, ref: Path) -> bool:
    """Whether bio2zarr's verifier accepts bio2zarr's own store of ``bcf``. Oracle against
    oracle, so the answer is the same for every layout and run: it is kept beside the
    shared conversion ``ref`` links to (conftest's cache, keyed by the BCF's bytes and the
    oracle's versions), and each file is verified once rather than once per layout."""
    import os

    from bio2zarr.vcz_verification import verify

    marker = ref.resolve().with_suffix(".verified")
    if marker.exists():
        return marker.read_text() == "accepts"
    try:
        verify(str(bcf), str(ref))
        outcome = "accepts"
    except (AssertionError, IndexError):
        outcome = "rejects"
    partial = marker.with_name(f"{marker.name}.{os.getpid()}")
    partial.write_text(outcome)
    partial.replace(marker)  # whole or absent, whichever worker writes it
    return outcome == "accepts"


def _check_against_pysam(bcf: Path, tmp_path: Path, options: dict) -> str:
    try:
        store = vcfvirtual.index(bcf, refs_path=False, cache_path=tmp_path / "c.bcf", force=True, **options)
    except VcfVirtualError as e:
        assert str(bcf) in str(e)
        return f"clear error ({e.problem})"
    ds = xr.open_zarr(store, zarr_format=3, consolidated=False)
    with pysam.VariantFile(str(bcf)) as vf:
        recs = list(vf)
    assert ds["variant_position"].values.tolist() == [r.pos for r in recs]
    alleles = ds["variant_allele"].values.tolist()
    assert [a[: len(r.alleles)] for a, r in zip(alleles, recs)] == [list(r.alleles) for r in recs]
    return "read, equal to pysam"
