"""plan_index: every check and naming decision of an index run, made before anything is
written. Each refusal is a typed error naming the path or option at fault, and no call
(refused or not) creates anything on disk."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from vcfvirtual.errors import OutputExistsError, VcfVirtualError
from vcfvirtual.plan import LAYOUTS, REFS_FORMATS, IndexOptions, plan_index, references_path

from ... import bcfdata


def listing(*roots: Path) -> list[str]:
    """Every file and folder under ``roots`` (names, recursively)."""
    return sorted(str(p) for root in roots for p in root.rglob("*"))


@pytest.fixture
def work(small_bcf, tmp_path, monkeypatch):
    """(a BGZF BCF in its own folder, the temp directory): the two places a plan could write."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    folder = tmp_path / "data"
    folder.mkdir()
    bcf = Path(shutil.copy(small_bcf, folder / "s.bcf"))
    shutil.copy(small_bcf, folder / "t.bcf")  # a second input
    bcfdata.uncompressed_copy(small_bcf, folder / "plain.bcf")
    monkeypatch.chdir(folder)
    return bcf, tmp


@pytest.fixture
def untouched(work, tmp_path):
    """Fails the test if it created or removed anything under tmp_path."""
    before = listing(tmp_path)
    yield work
    assert listing(tmp_path) == before


def plan(bcf, **options):
    return plan_index(bcf, IndexOptions(**options))


# ------------------------------------------------------------------ refusals


def test_the_same_input_twice_is_refused_naming_it(untouched):
    bcf, _ = untouched
    with pytest.raises(VcfVirtualError, match=f"given twice \\(also as {bcf}\\)") as e:
        plan([bcf, "s.bcf"], refs_path="o.vcz.json")  # the second, relative to the working directory
    assert e.value.path == "s.bcf"


def test_no_inputs_is_refused(untouched):
    with pytest.raises(VcfVirtualError, match="no input files"):
        plan([], refs_path="o.vcz.json")


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"refs_format": "zarr"}, "unknown references format 'zarr'"),
        ({"cache_layout": "gzip"}, "unknown cache layout 'gzip'"),
        ({"variants_chunk_size": 0}, "variants chunk size must be at least 1, got 0"),
        ({"workers": 0}, "workers must be at least 1, got 0"),
    ],
)
def test_bad_option_values_are_refused_naming_the_value(untouched, options, problem):
    bcf, _ = untouched
    with pytest.raises(VcfVirtualError) as e:
        plan(bcf, **options)
    assert type(e.value) is VcfVirtualError and e.value.problem == problem


def test_the_refusals_of_a_format_or_layout_list_the_choices(untouched):
    bcf, _ = untouched
    with pytest.raises(VcfVirtualError) as e:
        plan(bcf, refs_format="zarr")
    assert all(f in e.value.hint for f in ("json", "parquet", "icechunk"))
    with pytest.raises(VcfVirtualError) as e:
        plan(bcf, cache_layout="gzip")
    assert all(layout in e.value.hint for layout in ("raw", "bgzf"))


def test_the_choices_are_the_formats_and_layouts_index_writes():
    assert set(REFS_FORMATS) == {"json", "parquet", "icechunk"}
    assert set(LAYOUTS) == {"raw", "bgzf", "columns"}


@pytest.mark.parametrize("option", ["refs_path", "cache_path"])
def test_an_output_named_as_a_folder_is_refused(untouched, option):
    bcf, _ = untouched
    with pytest.raises(OutputExistsError, match="names a directory") as e:
        plan(bcf, **{option: "out/"})
    assert e.value.path == "out/" and f"{option}=" in e.value.hint


def test_several_inputs_need_an_output_name(untouched):
    bcf, _ = untouched
    with pytest.raises(VcfVirtualError, match="2 input files: name the store") as e:
        plan([bcf, bcf.parent / "t.bcf"])
    assert "refs_path=" in e.value.hint


@pytest.mark.parametrize("char", ["#", "?"])
def test_a_cache_path_a_file_url_cannot_carry_is_refused(untouched, char):
    bcf, _ = untouched
    with pytest.raises(VcfVirtualError, match="'#' or '\\?'") as e:
        plan(bcf, cache_path=f"a{char}b.cache.bcf")
    assert e.value.path == str(Path(f"a{char}b.cache.bcf")) and "cache_path=" in e.value.hint


@pytest.mark.parametrize("option", ["refs_path", "cache_path"])
def test_an_output_that_is_the_input_is_refused(untouched, option):
    bcf, _ = untouched
    with pytest.raises(OutputExistsError, match="is the input") as e:
        plan(bcf, **{option: str(bcf)})
    assert e.value.path == str(bcf) and f"{option}=" in e.value.hint
    assert bcf.read_bytes()[:2] == b"\x1f\x8b"  # still the BGZF BCF


def test_an_input_reached_through_a_link_is_still_the_input(untouched):
    bcf, _ = untouched
    link = bcf.parent / "alias.bcf"
    os.symlink(bcf, link)
    try:
        with pytest.raises(OutputExistsError, match="is the input"):
            plan(link, cache_path=str(bcf))
    finally:
        link.unlink()


def test_the_cache_and_references_under_one_name_are_refused(untouched):
    bcf, _ = untouched
    with pytest.raises(OutputExistsError, match="both as the cache and as the references") as e:
        plan(bcf, refs_path="same", cache_path="same")
    assert e.value.path == "same"


def test_a_missing_input_is_refused_naming_it(untouched):
    bcf, _ = untouched
    missing = bcf.parent / "missing.bcf"
    with pytest.raises(VcfVirtualError, match="cannot read: No such file") as e:
        plan(missing)
    assert e.value.path == str(missing)


def test_a_folder_as_input_is_refused(untouched):
    bcf, _ = untouched
    with pytest.raises(VcfVirtualError, match="it is a directory") as e:
        plan(bcf.parent)
    assert e.value.path == str(bcf.parent)


@pytest.mark.parametrize(
    ("source", "options", "problem", "named"),
    [
        ("s3://b/x.bcf", {"workers": 2, "cache_layout": "bgzf"}, "columns layout only", "s3://b/x.bcf"),
        (
            "LOCAL",
            {"cache_path": "s3://b/c.cache.bcf", "workers": 2, "cache_layout": "raw"},
            "columns layout only",
            "s3://b/c.cache.bcf",
        ),
        ("s3://b/x.vcf.gz", {}, "a remote VCF is not converted", "s3://b/x.vcf.gz"),
        ("LOCAL", {"refs_path": "s3://b/r", "refs_format": "parquet"}, "local paths only", "s3://b/r"),
    ],
)
def test_what_runs_with_urls_cannot_do_is_refused_before_reaching_them(untouched, source, options, problem, named):
    # No server is running: a refusal that tried to reach the URL would fail otherwise.
    bcf, tmp = untouched
    with pytest.raises(VcfVirtualError, match=problem) as e:
        plan(str(bcf) if source == "LOCAL" else source, **options)
    assert e.value.path == named
    assert not list(tmp.iterdir())


# ------------------------------------------------------------------ decisions


@pytest.mark.parametrize(
    ("fmt", "suffix"), [("json", ".vcz.json"), ("parquet", ".vcz.parq"), ("icechunk", ".vcz.icechunk")]
)
def test_outputs_default_to_names_next_to_the_input(untouched, fmt, suffix):
    bcf, _ = untouched
    p = plan(bcf, refs_format=fmt)
    assert p.refs_path == bcf.with_name("s.bcf" + suffix) == p.refs_target
    assert p.cache_path == bcf.with_name("s.bcf.vcz.cache.columns")
    assert p.cache_location == "file://" + str(bcf.with_name("s.bcf.vcz.cache.columns"))
    assert (p.cache_layout, p.zero_copy, p.partitioned, p.remote) == ("columns", False, False, None)
    # The bgzf layout's cache is a BCF, and named as one.
    assert plan(bcf, refs_format=fmt, cache_layout="bgzf").cache_path == bcf.with_name("s.bcf.vcz.cache.bcf")


def test_no_references_asked_for(untouched):
    bcf, _ = untouched
    p = plan(bcf, refs_path=False)
    assert p.refs_path is None and p.refs_target is None


def test_several_inputs_name_the_cache_after_the_references_and_back(untouched):
    bcf, _ = untouched
    other = bcf.parent / "t.bcf"
    p = plan([bcf, other], refs_path="cohort.vcz.json")
    assert (p.refs_path, p.cache_path, p.partitioned) == (
        Path("cohort.vcz.json"),
        Path("cohort.vcz.cache.columns"),
        True,
    )
    p = plan([bcf, other], refs_path="cohort.vcz.json", cache_layout="bgzf")
    assert p.cache_path == Path("cohort.vcz.cache.bcf")
    for cache in ("cohort.cache.bcf", "cohort.cache.columns"):
        p = plan([bcf, other], cache_path=cache, refs_format="parquet")
        assert (p.refs_path, p.cache_path) == (Path("cohort.parq"), Path(cache))


def test_an_uncompressed_bcf_is_its_own_cache_unless_bgzf_is_asked_for(untouched):
    bcf, _ = untouched
    plain = bcf.parent / "plain.bcf"
    assert plain.read_bytes()[:4] == b"BCF\x02"  # no BGZF container: the bytes are the BCF
    p = plan(plain)
    assert (p.zero_copy, p.cache_layout, p.cache_path) == (True, "raw", plain)
    assert p.cache_location == "file://" + str(plain)
    p = plan(plain, cache_layout="bgzf")
    assert (p.zero_copy, p.cache_layout, p.cache_path) == (False, "bgzf", plain.with_name("plain.bcf.vcz.cache.bcf"))


def test_a_compressed_bcf_in_the_raw_layout_gets_a_cache(untouched):
    bcf, _ = untouched
    p = plan(bcf, cache_layout="raw")
    assert (p.zero_copy, p.cache_layout, p.cache_path) == (False, "raw", bcf.with_name("s.bcf.vcz.cache.bcf"))


def test_inputs_are_fingerprinted_by_their_size(untouched):
    bcf, _ = untouched
    assert plan(bcf).fingerprints[0].size == bcf.stat().st_size


def _header(bcf):
    """The header as the scan hands it to chunk_length_for (htslib's reading, through pysam)."""
    import pysam

    from vcfvirtual.bcf.header import parse_header_text

    with pysam.VariantFile(str(bcf)) as vf:
        text = str(vf.header)
    return parse_header_text(text.encode(), str(bcf), 0)


def test_the_chunk_length_asked_for_wins(untouched):
    bcf, _ = untouched
    header = _header(bcf)
    assert plan(bcf, variants_chunk_size=7).chunk_length_for(header) == 7


def test_a_cache_url_is_staged_in_a_folder_named_but_not_made(untouched):
    bcf, tmp = untouched
    p = plan(bcf, cache_path="s3://bucket/out/c.cache.bcf")
    assert p.remote is not None
    staging = p.remote.staging
    assert staging.parent == tmp and staging.name.startswith("vcfvirtual-upload-")
    assert not staging.exists()
    assert (p.cache_path, p.remote.local_cache) == (staging / "c.cache.bcf", staging / "c.cache.bcf")
    assert p.cache_location == p.public_cache_url == "s3://bucket/out/c.cache.bcf"
    assert p.refs_path == bcf.with_name("s.bcf.vcz.json")  # the references stay local


def test_references_to_a_url_are_staged_and_named_by_their_url(untouched):
    bcf, tmp = untouched
    p = plan(bcf, refs_path="s3://bucket/r.vcz.json")
    assert p.remote is not None and p.remote.refs_url == "s3://bucket/r.vcz.json"
    assert p.refs_path == p.remote.staging / "r.vcz.json" and p.refs_target == "s3://bucket/r.vcz.json"
    assert p.cache_path == bcf.with_name("s.bcf.vcz.cache.columns")


def test_the_cache_url_readers_see_is_the_one_asked_for(untouched):
    bcf, _ = untouched
    p = plan(bcf, cache_url="https://host/data/")
    assert p.public_cache_url == "https://host/data/"
    assert p.cache_location == "file://" + str(bcf.with_name("s.bcf.vcz.cache.columns"))


def test_references_path_matches_the_plan(untouched):
    bcf, _ = untouched
    assert references_path(bcf) == plan(bcf).refs_path == bcf.with_name("s.bcf.vcz.json")
    assert references_path(bcf, refs_format="parquet") == bcf.with_name("s.bcf.vcz.parq")
    assert references_path(bcf, "s3://b/r.json") == "s3://b/r.json"
    assert references_path(bcf, False) is None


def test_the_default_chunk_length_follows_the_layout(untouched):
    bcf, _ = untouched
    header = _header(bcf)
    # A few samples: bgzf and raw chunks hold up to 10,000 variants, columns chunks 1,000.
    assert plan(bcf, cache_layout="columns").chunk_length_for(header) == 1_000
    assert plan(bcf, cache_layout="bgzf").chunk_length_for(header) == 10_000


def test_fields_are_checked_once_the_header_is_known(untouched):
    """chunk_length_for runs as soon as the scan has the header, before any record: a
    field choice naming no field of it stops the run there, writing nothing."""
    from vcfvirtual.errors import FieldNameError

    bcf, _ = untouched
    header = _header(bcf)
    assert [f.name for f in header.info] == ["DP"]
    assert plan(bcf, fields=["INFO/DP"]).field_map(header).arrays == {("INFO", "DP"): "variant_DP"}
    with pytest.raises(FieldNameError, match="names INFO/AF, which the header does not declare"):
        plan(bcf, exclude_fields="INFO/AF").chunk_length_for(header)


def test_a_vcf_with_clashing_fields_is_refused_before_conversion(untouched):
    """A VCF's fields are checked from its header text in the plan, before htslib writes
    the temporary BCF it would index."""
    from vcfvirtual.errors import FieldNameError

    bcf, _ = untouched
    vcf = bcf.with_name("freebayes.vcf")
    vcf.write_text(
        "##fileformat=VCFv4.2\n##contig=<ID=chr1,length=100>\n"
        '##INFO=<ID=filter,Number=1,Type=String,Description="f">\n'
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\nchr1\t5\t.\tA\tC\t.\t.\tfilter=x\n"
    )
    try:
        with pytest.raises(FieldNameError, match="INFO field 'filter' would be stored as variant_filter"):
            plan(vcf)
        assert plan(vcf, rename_fields={"INFO/filter": "filter_info"}).sources == (vcf,)
    finally:
        vcf.unlink()


def test_field_choices_given_as_iterators_are_read_every_time(untouched):
    bcf, _ = untouched
    p = plan(bcf, exclude_fields=(f for f in ["INFO/DP"]))
    header = _header(bcf)
    assert p.field_map(header).omitted == p.field_map(header).omitted == ("INFO/DP",)
