"""Appending to a store: ``index(new, refs_path=existing, append=True)`` (``vcfvirtual index
--append NEW -o EXISTING``) grows a columns store by the new file(s)' records without
re-indexing what it holds.

The oracle is bio2zarr converting the same records as ONE BCF (the cohort before it was
cut into the store's first file and the appended ones), and pysam reading the pieces.
Each test cuts a sorted cohort's records at chosen counts, so the pieces are sorted BCFs
with the same header and their concatenation is the whole. Old parts of the cache are
compared byte for byte, mtime and all, before and after; a refused or failed append
leaves the references and the cache as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.cache import columns
from vcfvirtual.errors import CorruptBCFError, HeaderError, OutputWriteError, StaleCacheError, VcfVirtualError
from vcfvirtual.inspect import inspect_store
from vcfvirtual.refs import kerchunk

from .. import bcfdata
from ..conftest import FullDisk, assert_matches_bio2zarr, bio2zarr_convert, differences_from_bio2zarr
from .test_parallel import true_record_starts, use_starts

CHUNK = 300  # variants per chunk of every store here


# --- inputs: a sorted cohort cut into pieces ------------------------------------------


def header_and_records(vcf_text: str) -> tuple[str, list[str]]:
    """The header (through the #CHROM line) and the record lines of VCF text."""
    lines = vcf_text.splitlines(keepends=True)
    body = next(i for i, line in enumerate(lines) if line.startswith("#CHROM")) + 1
    return "".join(lines[:body]), [line.rstrip("\n") for line in lines[body:]]


def cut(vcf_text: str, counts: list[int], folder: Path, stem: str, edit_header=None) -> tuple[Path, list[Path]]:
    """The whole cohort as one BCF, and its records cut into pieces of ``counts`` records
    (the last piece takes the rest), each a BCF under the same header (``edit_header``
    changes the pieces' after the first: for the refusals)."""
    header, records = header_and_records(vcf_text)
    whole = bcfdata.write_bcf(vcf_text, folder / f"{stem}-whole.bcf")
    bounds = np.cumsum([0, *counts]).tolist() + [len(records)]
    assert bounds[-2] < len(records), "the last piece must hold records"
    pieces = []
    for i, (start, end) in enumerate(zip(bounds, bounds[1:])):
        text = header if i == 0 or edit_header is None else edit_header(header)
        piece_text = text + "".join(r + "\n" for r in records[start:end])
        pieces.append(bcfdata.write_bcf(piece_text, folder / f"{stem}-{i}.bcf"))
    return whole, pieces


def cohort(n_records: int, n_samples: int = 20, seed: int = 23) -> str:
    return bcfdata.random_cohort_vcf(n_records, n_samples, seed=seed, contigs=("chr1", "chr2", "chrX"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Cohorts cut at the counts each test needs, made once for the module (appends never
    write beside their inputs: every store here names its cache)."""
    d = tmp_path_factory.mktemp("append-inputs")
    text = cohort(1400)
    return {
        # 1,000 old records: the old store's last chunk (100 of 300) is partial.
        "partial": cut(text, [1000], d, "partial"),
        # 900 old records: exactly three chunks.
        "multiple": cut(text, [900], d, "multiple"),
        # 100 old records: fewer than one chunk.
        "short": cut(text, [100], d, "short"),
        # Three pieces (700, 350, 350): two appends in a row, or one of two files.
        "three": cut(text, [700, 350], d, "three"),
    }


# --- the store, its cache, and what changed ----------------------------------------


def first_index(bcf, folder: Path, *, refs_format="json", **options) -> tuple[Path, Path]:
    """Index ``bcf`` (the old store) in the columns layout: (references, cache folder)."""
    refs = folder / ("cohort.vcz.parq" if refs_format == "parquet" else "cohort.vcz.json")
    cache = folder / "cohort.vcz.cache.columns"
    options.setdefault("variants_chunk_size", CHUNK)
    options.setdefault("cache_layout", "columns")
    vcfvirtual.index(bcf, refs_path=refs, cache_path=cache, refs_format=refs_format, **options)
    return refs, cache


def append(new, refs: Path, **options):
    """The append under test: the new file(s) into the store at ``refs``."""
    return vcfvirtual.index(new, refs_path=refs, append=True, **options)


def files_under(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder`` (or the file itself): its bytes and mtime, by path."""
    paths = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in paths}


def tree(folder: Path) -> dict[str, bytes | None]:
    """Everything under ``folder``: each file's bytes, each directory (None), by path."""
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def assert_old_parts_untouched(before: dict[str, tuple[bytes, int]], cache: Path) -> None:
    after = files_under(cache)
    for name, (data, mtime_ns) in before.items():
        assert name in after, f"old part {name} is gone"
        assert after[name][0] == data, f"old part {name} was rewritten"
        assert after[name][1] == mtime_ns, f"old part {name}'s mtime changed"
    assert set(after) > set(before), "the appended records went into no new part"


def datasets(store, refs: Path) -> list[xr.Dataset]:
    """The grown store read both ways: the returned ManifestStore (v3) and a fresh
    open of the rewritten references (v2)."""
    return [
        xr.open_zarr(store, zarr_format=3, consolidated=False),
        xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False),
    ]


def assert_is_the_whole(store, refs: Path, whole: Path, folder: Path, **bio2zarr_options) -> list[xr.Dataset]:
    ref = bio2zarr_convert(whole, folder / "ref.vcz", CHUNK, **bio2zarr_options)
    out = datasets(store, refs)
    for ds in out:
        assert_matches_bio2zarr(ds, ref)
        # The chunk length asked for when the store was made, even when the old store
        # held fewer records than one chunk (region_index above depends on it too).
        chunks = ds["variant_position"].chunks[0]
        assert all(c == CHUNK for c in chunks[:-1]) and chunks[-1] <= CHUNK, chunks
    return out


def assert_sources(refs: Path, expected: list[Path]) -> None:
    summary = inspect_store(refs)
    assert [Path(s).resolve() for s in summary.sources] == [p.resolve() for p in expected]
    assert summary.num_variants == sum(sum(1 for _ in pysam.VariantFile(str(p))) for p in expected)
    assert summary.fingerprints_match


# --- growing a store ------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "partial",  # old 1,000 records: a last chunk of 100 that the new records must fill
        "multiple",  # old 900: the new records start a chunk
        "short",  # old 100: the old store is one partial chunk
    ],
)
def test_append_gives_bio2zarrs_store_of_the_whole(inputs, tmp_path, case):
    whole, (old, new) = inputs[case]
    refs, cache = first_index(old, tmp_path)
    before = files_under(cache)
    store = append(new, refs)
    assert_is_the_whole(store, refs, whole, tmp_path)
    assert_old_parts_untouched(before, cache)
    assert_sources(refs, [old, new])


def test_old_parts_are_still_fingerprinted(inputs, tmp_path):
    """The grown references still check the old parts: one changed after the append
    is refused on open, as it would have been before."""
    _, (old, new) = inputs["partial"]
    refs, cache = first_index(old, tmp_path)
    old_parts = sorted(cache.iterdir())
    append(new, refs)
    with open(old_parts[0], "r+b") as f:
        f.write(bytes([f.read(1)[0] ^ 0xFF]))
    with pytest.raises(StaleCacheError):
        vcfvirtual.open_store(refs)


def test_values_against_pysam(inputs, tmp_path):
    """Positions and alleles of the grown store are the old file's then the new file's,
    as pysam reads them."""
    _, (old, new) = inputs["partial"]
    refs, _ = first_index(old, tmp_path)
    append(new, refs)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    records = [rec for path in (old, new) for rec in pysam.VariantFile(str(path))]
    assert ds.variant_position.values.tolist() == [rec.pos for rec in records]
    alleles = [tuple(a for a in row if a) for row in ds.variant_allele.values.tolist()]
    assert alleles == [rec.alleles for rec in records]
    contigs = ds.attrs.get("contigs") or list(ds.contig_id.values)
    assert [contigs[i] for i in ds.variant_contig.values] == [rec.chrom for rec in records]


def test_two_appends_in_a_row(inputs, tmp_path):
    whole, (a, b, c) = inputs["three"]
    refs, cache = first_index(a, tmp_path)
    first = files_under(cache)
    append(b, refs)
    second = files_under(cache)
    assert_old_parts_untouched(first, cache)
    store = append(c, refs)
    assert_old_parts_untouched(second, cache)
    assert_is_the_whole(store, refs, whole, tmp_path)
    assert_sources(refs, [a, b, c])


def test_one_append_of_two_files(inputs, tmp_path):
    whole, (a, b, c) = inputs["three"]
    refs, cache = first_index(a, tmp_path)
    before = files_under(cache)
    store = append([b, c], refs)
    assert_is_the_whole(store, refs, whole, tmp_path)
    assert_old_parts_untouched(before, cache)
    assert_sources(refs, [a, b, c])


def test_append_with_two_workers(inputs, tmp_path):
    whole, (a, b, c) = inputs["three"]
    refs, cache = first_index(a, tmp_path)
    before = files_under(cache)
    store = append([b, c], refs, workers=2)
    assert_is_the_whole(store, refs, whole, tmp_path)
    assert_old_parts_untouched(before, cache)


def test_append_of_a_file_cut_into_partitions(inputs, tmp_path, monkeypatch):
    """Two workers on one new file partitioned at record starts pysam names (one
    inside the chunk the old records left partial): bio2zarr's whole still."""
    whole, (old, new) = inputs["partial"]
    refs, cache = first_index(old, tmp_path)
    before = files_under(cache)
    starts = true_record_starts(new)
    cuts = [starts[i] for i in (50, 200, 333)]
    use_starts(monkeypatch, lambda path: cuts if Path(path).resolve() == new.resolve() else [])
    store = append(new, refs, workers=2)
    assert_is_the_whole(store, refs, whole, tmp_path)
    assert_old_parts_untouched(before, cache)


@pytest.mark.parametrize("by_block", [False, True], ids=["whole", "by-block"])
def test_samples_blocks_are_the_stores(tmp_path, monkeypatch, by_block):
    """60 samples in blocks of 25 (a narrower last block); the append names no
    samples_chunk_size and keeps the store's. ``by_block``: every chunk demuxed a samples
    block at a time (as a large chunk is), the store's partial chunk joined a group at a time."""
    if by_block:
        monkeypatch.setattr(columns, "WHOLE_CHUNK_MAX_BYTES", 0)
    whole, (old, new) = cut(cohort(700, n_samples=60, seed=5), [400], tmp_path, "wide")
    refs, cache = first_index(old, tmp_path, samples_chunk_size=25)
    before = files_under(cache)
    store = append(new, refs)
    for ds in assert_is_the_whole(store, refs, whole, tmp_path, samples_chunk_size=25):
        assert ds["call_genotype"].chunks[1] == (25, 25, 10)
        assert ds["call_genotype"].chunks[0] == (CHUNK, CHUNK, 100)
    assert_old_parts_untouched(before, cache)


@pytest.mark.parametrize(
    "choice, renamed",
    [({"exclude_fields": "INFO/DP"}, None), ({"rename_fields": {"INFO/DP": "depth"}}, "variant_depth")],
)
def test_the_stores_field_choice_is_kept(inputs, tmp_path, choice, renamed):
    """An append names no fields: the store's choice (a field left out, a field renamed)
    holds for the new records too."""
    whole, (old, new) = inputs["partial"]
    refs, _ = first_index(old, tmp_path, **choice)
    store = append(new, refs)
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", CHUNK)
    for ds in datasets(store, refs):
        assert not differences_from_bio2zarr(ds.drop_vars(renamed or []), ref, ignore=("variant_DP",))
        assert "variant_DP" not in ds
        if renamed:
            assert ds[renamed].values.tolist() == ref["variant_DP"][:].tolist()


def test_a_vcf_is_appended(inputs, tmp_path):
    """A bgzipped VCF appended is converted with htslib first, as when indexing: the
    store is bio2zarr's of the whole, and no converted temporary is left."""
    whole, (old, new) = inputs["partial"]
    vcf = tmp_path / "new.vcf.gz"
    bcfdata.bcftools("view", "--no-version", "-Oz", "-o", str(vcf), str(new))
    refs, cache = first_index(old, tmp_path)
    before = files_under(cache)
    store = append(vcf, refs)
    assert_is_the_whole(store, refs, whole, tmp_path)
    assert_old_parts_untouched(before, cache)
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]


def test_a_file_of_no_records_adds_none(inputs, tmp_path):
    """A header-only file appended: the store holds the old records still (bio2zarr's
    conversion of the old file alone) and the cache gains no part."""
    _, (old, _) = inputs["partial"]
    header, _ = header_and_records(pysam_header_text(old))
    empty = bcfdata.write_bcf(header, tmp_path / "empty.bcf")
    refs, cache = first_index(old, tmp_path)
    before = files_under(cache)
    store = append(empty, refs)
    ref = bio2zarr_convert(old, tmp_path / "ref.vcz", CHUNK)
    for ds in datasets(store, refs):
        assert_matches_bio2zarr(ds, ref)
    assert files_under(cache) == before


def pysam_header_text(bcf: Path) -> str:
    with pysam.VariantFile(str(bcf)) as f:
        return str(f.header)


def test_parquet_references_are_appended_to(inputs, tmp_path):
    whole, (old, new) = inputs["partial"]
    refs, cache = first_index(old, tmp_path, refs_format="parquet")
    assert refs.is_dir()
    before = files_under(cache)
    store = append(new, refs)
    assert_is_the_whole(store, refs, whole, tmp_path)
    assert_old_parts_untouched(before, cache)
    assert_sources(refs, [old, new])
    assert inspect_store(refs).refs_format == "parquet"


def test_cli_append_round_trip(inputs, tmp_path):
    whole, (a, b, c) = inputs["three"]
    refs, cache = first_index(a, tmp_path)
    before = files_under(cache)
    cli = [sys.executable, "-m", "vcfvirtual.cli", "index"]
    proc = subprocess.run([*cli, "--append", str(b), str(c), "-o", str(refs)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert str(refs) in proc.stderr.strip().splitlines()[-1]
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", CHUNK)
    assert_matches_bio2zarr(xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False), ref)
    assert_old_parts_untouched(before, cache)
    assert_sources(refs, [a, b, c])


def test_cli_append_to_no_store_fails_in_one_line(inputs, tmp_path):
    _, (_, new) = inputs["partial"]
    missing = tmp_path / "none.vcz.json"
    cli = [sys.executable, "-m", "vcfvirtual.cli", "index"]
    proc = subprocess.run([*cli, "--append", str(new), "-o", str(missing)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert "--append" in proc.stderr and str(missing) in proc.stderr
    assert list(tmp_path.iterdir()) == []


# --- a new file wider than the store --------------------------------------------------

WIDE_HEADER = """##fileformat=VCFv4.3
##contig=<ID=chr1,length=10000000>
##INFO=<ID=IV,Number=1,Type=Integer,Description="An integer whose values widen">
##INFO=<ID=NV,Number=.,Type=Integer,Description="Any number of integers">
##INFO=<ID=AF,Number=A,Type=Float,Description="Allele frequency">
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">
"""


def wide_records(n: int, first_pos: int, n_alleles: int, big: bool, ploidy: int, rng) -> list[str]:
    """Records of ``n_alleles`` alleles each; integers below 100, or above 40,000 when
    ``big``; NV holding 1-2 values, or 5 when ``big``; calls of ``ploidy``."""
    bases = "ACGT"
    records = []
    for i in range(n):
        ref = bases[i % 4]
        alts = [ref + "T" * (k + 1) for k in range(n_alleles - 1)]  # any number of distinct ALTs
        low, high = (40_001, 70_000) if big else (0, 99)
        iv = int(rng.integers(low, high))
        nv = ",".join(str(int(v)) for v in rng.integers(low, high, size=5 if big else int(rng.integers(1, 3))))
        af = ",".join(f"{v:.3f}" for v in rng.random(n_alleles - 1))
        calls = []
        for _ in range(4):
            gt = "/".join(str(int(a)) for a in rng.integers(0, n_alleles, size=ploidy))
            ad = ",".join(str(int(v)) for v in rng.integers(low, high, size=n_alleles))
            calls.append(f"{gt}:{ad}")
        info = f"IV={iv};NV={nv};AF={af}"
        records.append(
            f"chr1\t{first_pos + 10 * i}\t.\t{ref}\t{','.join(alts)}\t50\tPASS\t{info}\tGT:AD\t" + "\t".join(calls)
        )
    return records


@pytest.mark.parametrize("new_ploidy", [2, pytest.param(3, id="triploid")])
def test_a_wider_new_file_widens_the_store(tmp_path, new_ploidy):
    """Old: 350 biallelic diploid records, small integers, NV of 1-2 values. New: 150
    records of 5 alleles, integers past int16, NV of 5 values (and triploid calls): the
    grown store's dtypes and shapes are bio2zarr's of the whole."""
    rng = np.random.default_rng(23)
    old = wide_records(350, 100, 2, False, 2, rng)
    new = wide_records(150, 100 + 10 * 350, 5, True, new_ploidy, rng)
    samples = ("A", "B", "C", "D")
    text = bcfdata.vcf_text(old + new, samples, header=WIDE_HEADER)
    whole, (old_bcf, new_bcf) = cut(text, [350], tmp_path, "wide")
    refs, cache = first_index(old_bcf, tmp_path)
    narrow = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert narrow.variant_IV.dtype == np.int8 and narrow.variant_allele.shape[1] == 2  # the store was narrow
    before = files_under(cache)
    store = append(new_bcf, refs)
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", CHUNK)
    assert ref["variant_IV"].dtype == np.int32 and ref["variant_allele"].shape[1] == 5  # the whole is wide
    for ds in datasets(store, refs):
        assert_matches_bio2zarr(ds, ref)  # dtypes, shapes and values
        for name in ("variant_IV", "variant_NV", "variant_AF", "call_AD", "call_genotype", "variant_allele"):
            assert ds[name].shape == ref[name].shape, name
    assert_old_parts_untouched(before, cache)


LOCAL_HEADER = """##fileformat=VCFv4.3
##contig=<ID=chr1,length=10000000>
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allelic depths">
##FORMAT=<ID=PL,Number=G,Type=Integer,Description="Phred-scaled genotype likelihoods">
"""


def local_records(n: int, first_pos: int, most_alleles: int, pl_high: int, rng) -> list[str]:
    """Diploid records of 2 to ``most_alleles`` alleles with AD (Number=R) and PL
    (Number=G) below ``pl_high``; some calls half or wholly missing, some AD/PL missing."""
    records = []
    for i in range(n):
        k = int(rng.integers(2, most_alleles + 1))
        alts = ",".join("A" + "C" * (j + 1) for j in range(k - 1))
        calls = []
        for _ in range(6):
            gt = [str(int(a)) for a in rng.integers(0, k, size=2)]
            if rng.random() < 0.1:
                gt[int(rng.integers(0, 2))] = "."
            ad = ",".join(str(int(v)) for v in rng.integers(0, 40, size=k)) if rng.random() > 0.05 else "."
            pl = ",".join(str(int(v)) for v in rng.integers(0, pl_high, size=k * (k + 1) // 2))
            calls.append(f"{'/'.join(gt)}:{ad}:{pl if rng.random() > 0.05 else '.'}")
        records.append(f"chr1\t{first_pos + 10 * i}\t.\tA\t{alts}\t.\tPASS\t.\tGT:AD:PL\t" + "\t".join(calls))
    return records


def test_a_local_alleles_store_grows(tmp_path):
    """A store indexed with local_alleles (call_LA, call_LAD, call_LPL derived at read
    time) keeps them for the appended records: bio2zarr's ``--local-alleles`` store of the
    whole, the new records having more alleles and PL values past int8."""
    rng = np.random.default_rng(7)
    old = local_records(350, 100, 3, 100, rng)
    new = local_records(200, 100 + 10 * 350, 5, 300, rng)
    text = bcfdata.vcf_text(old + new, ("S1", "S2", "S3", "S4", "S5", "S6"), header=LOCAL_HEADER)
    whole, (old_bcf, new_bcf) = cut(text, [350], tmp_path, "local")
    refs, cache = first_index(old_bcf, tmp_path, local_alleles=True, samples_chunk_size=4)
    narrow = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert narrow.call_LPL.dtype == np.int8  # the store was narrow
    before = files_under(cache)
    store = append(new_bcf, refs)
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", CHUNK, local_alleles=True, samples_chunk_size=4)
    assert {"call_LA", "call_LAD", "call_LPL"} <= set(ref.array_keys()) and ref["call_LPL"].dtype == np.int16
    for ds in datasets(store, refs):
        assert_matches_bio2zarr(ds, ref)
    assert_old_parts_untouched(before, cache)


# --- refusals: a typed error naming the file, and nothing changed ---------------------


def refused(folder: Path, error: type[Exception], match: str, new, refs: Path, **options) -> pytest.ExceptionInfo:
    """Append ``new`` to ``refs`` expecting ``error``; everything under ``folder`` (the
    references, the cache and anything beside them) is as it was."""
    before = tree(folder)
    with pytest.raises(error, match=match) as caught:
        append(new, refs, **options)
    assert tree(folder) == before
    return caught


@pytest.mark.parametrize(
    "edit, what",
    [
        (lambda h: h.replace("\tsample_3\t", "\tNA3\t", 1), "sample"),
        (lambda h: h.replace("##contig=<ID=chrX>\n", ""), "contig"),
        (lambda h: h.replace("ID=DP,Number=1,Type=Integer", "ID=DP,Number=1,Type=Float"), "INFO/DP"),
        (
            lambda h: h.replace("##INFO=<ID=DP", '##INFO=<ID=XX,Number=1,Type=Integer,Description="x">\n##INFO=<ID=DP'),
            "INFO/XX",
        ),
    ],
    ids=["other-samples", "other-contigs", "other-field-type", "new-field"],
)
def test_an_incompatible_header_is_refused(tmp_path, edit, what):
    inputs = tmp_path / "in"
    inputs.mkdir()
    # The new records are on chr1/chr2 only, so dropping chrX from its header keeps them valid.
    _, (old, new) = cut(bcfdata.random_cohort_vcf(600, 20, seed=3), [300], inputs, "h", edit_header=edit)
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    refs, _ = first_index(old, store_dir)
    caught = refused(store_dir, HeaderError, what, new, refs)
    assert str(new) in str(caught.value)


def test_append_needs_an_existing_store(inputs, tmp_path):
    _, (_, new) = inputs["partial"]
    missing = tmp_path / "none.vcz.json"
    caught = refused(tmp_path, VcfVirtualError, "append", new, missing)
    assert str(missing) in str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("layout", ["bgzf", "raw"])
def test_a_one_file_cache_is_refused(inputs, tmp_path, layout):
    _, (old, new) = inputs["partial"]
    refs = tmp_path / "cohort.vcz.json"
    vcfvirtual.index(old, refs_path=refs, cache_path=tmp_path / "c.bcf", cache_layout=layout, variants_chunk_size=CHUNK)
    caught = refused(tmp_path, VcfVirtualError, f"{layout}|columns", new, refs)
    assert str(refs) in str(caught.value)


def test_a_zero_copy_store_is_refused(inputs, tmp_path):
    _, (old, new) = inputs["partial"]
    plain = bcfdata.uncompressed_copy(old, tmp_path / "plain.bcf")
    refs = tmp_path / "cohort.vcz.json"
    vcfvirtual.index(plain, refs_path=refs, variants_chunk_size=CHUNK)
    assert inspect_store(refs).zero_copy  # no cache: the references point into plain.bcf
    caught = refused(tmp_path, VcfVirtualError, "", new, refs)
    assert str(refs) in str(caught.value)
    assert not isinstance(caught.value, StaleCacheError | HeaderError)


def _flip_first_byte(part: Path) -> None:
    with open(part, "r+b") as f:
        byte = f.read(1)
        f.seek(0)
        f.write(bytes([byte[0] ^ 0xFF]))


def _drop_last_byte(part: Path) -> None:
    os.truncate(part, part.stat().st_size - 1)


@pytest.mark.parametrize("damage", [_flip_first_byte, _drop_last_byte], ids=["changed", "truncated"])
def test_a_damaged_old_part_is_refused(inputs, tmp_path, damage):
    _, (old, new) = inputs["partial"]
    refs, cache = first_index(old, tmp_path)
    part = sorted(cache.iterdir())[0]
    damage(part)
    caught = refused(tmp_path, StaleCacheError, "", new, refs)
    assert part.name in str(caught.value)


def test_a_file_the_store_holds_is_refused(inputs, tmp_path):
    _, (old, new) = inputs["partial"]
    refs, _ = first_index(old, tmp_path)
    caught = refused(tmp_path, VcfVirtualError, "given twice|already", old, refs)
    assert str(old) in str(caught.value)


def test_a_file_held_since_an_earlier_append_is_refused(inputs, tmp_path):
    _, (a, b, c) = inputs["three"]
    refs, _ = first_index(a, tmp_path)
    append(b, refs)
    caught = refused(tmp_path, VcfVirtualError, "given twice|already", [c, b], refs)
    assert str(b) in str(caught.value)


def test_the_same_new_file_twice_is_refused(inputs, tmp_path):
    _, (a, b, _) = inputs["three"]
    refs, _ = first_index(a, tmp_path)
    refused(tmp_path, VcfVirtualError, "given twice|already", [b, b], refs)


@pytest.mark.parametrize(
    "option", [{"variants_chunk_size": CHUNK + 1}, {"samples_chunk_size": 7}], ids=["variants", "samples"]
)
def test_another_chunk_size_is_refused(inputs, tmp_path, option):
    _, (old, new) = inputs["partial"]
    refs, _ = first_index(old, tmp_path, samples_chunk_size=10)
    caught = refused(tmp_path, VcfVirtualError, next(iter(option)).split("_")[0], new, refs, **option)
    assert not isinstance(caught.value, StaleCacheError | HeaderError)


def test_a_new_file_that_fails_midway_leaves_the_store_as_it_was(inputs, tmp_path):
    """A new file cut off in the middle of its records fails the append after its scan
    began: no new part, and references and cache as before."""
    _, (old, new) = inputs["partial"]
    data = new.read_bytes()
    (tmp_path / "in").mkdir()
    broken = tmp_path / "in" / "broken.bcf"
    broken.write_bytes(data[: len(data) * 2 // 3])
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    refs, _ = first_index(old, store_dir)
    caught = refused(store_dir, CorruptBCFError, "", broken, refs)
    assert str(broken) in str(caught.value)


def test_no_space_for_the_grown_references(inputs, tmp_path, monkeypatch):
    """The new parts are written, then the references cannot be: the parts are removed
    and the old references stay, so the store reads as before."""
    whole, (old, new) = inputs["partial"]
    refs, _ = first_index(old, tmp_path)
    real_open = open
    monkeypatch.setattr(
        kerchunk, "open", lambda p, mode="r", **kw: FullDisk(real_open(p, mode, **kw), 1000), raising=False
    )
    caught = refused(tmp_path, OutputWriteError, "No space left", new, refs)
    assert str(refs) in str(caught.value)
    monkeypatch.undo()
    ref = bio2zarr_convert(old, tmp_path / "ref.vcz", CHUNK)
    assert_matches_bio2zarr(xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False), ref)


def test_the_stores_own_chunk_sizes_may_be_given(inputs, tmp_path):
    """A script passing the chunk sizes it indexed with on every call keeps working."""
    whole, (old, new) = inputs["partial"]
    refs, _ = first_index(old, tmp_path, samples_chunk_size=10)
    store = append(new, refs, variants_chunk_size=CHUNK, samples_chunk_size=10)
    assert_is_the_whole(store, refs, whole, tmp_path, samples_chunk_size=10)
