"""``vcfvirtual verify``: every array compared with htslib (pysam) passes on good stores,
and the comparison finds exactly the values that were changed, in the source or in
the cache."""

from __future__ import annotations

import shutil
import struct

import click
import pysam
import pytest
import zarr
from click.testing import CliRunner

import vcfvirtual
from vcfvirtual.cli import main
from vcfvirtual.errors import StaleCacheError, VcfVirtualError
from vcfvirtual.verify import verify_store

from ... import bcfdata
from ...conftest import resolved_refs


def _index(bcf, tmp_path, refs_format="json", layout="bgzf", chunk=64, name=None):
    suffix = {"json": ".json", "parquet": ".parq", "icechunk": ".icechunk"}[refs_format]
    name = name or bcf.stem
    refs = tmp_path / f"{name}.{layout}{suffix}"
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=tmp_path / f"{name}.{refs_format}.{layout}.cache.bcf",
        variants_chunk_size=chunk,
        cache_layout=layout,
        refs_format=refs_format,
        force=True,
    )
    return refs


def _record_count(bcf) -> int:
    with pysam.VariantFile(str(bcf)) as vf:
        return sum(1 for _ in vf)


def _store_arrays(refs) -> set[str]:
    return set(zarr.open_group(vcfvirtual.open_store(refs), mode="r").array_keys())


@pytest.fixture(scope="module")
def fields_bcf(tmp_path_factory):
    """INFO Integer/Float/String/Flag, FORMAT Integer/Float/String, haploid and diploid
    GT, missing values, a record without FORMAT."""
    return bcfdata.fuzz_bcf(tmp_path_factory.mktemp("verify") / "fields.bcf")


@pytest.mark.parametrize("refs_format", ["json", "parquet", "icechunk"])
def test_good_stores_pass(refs_format, cohort_bcf, tmp_path):
    if refs_format == "icechunk":
        pytest.importorskip("icechunk")
    refs = _index(cohort_bcf, tmp_path, refs_format)
    report = verify_store(refs, progress=False)
    assert report.ok, [d.describe() for d in report.differences]
    assert report.num_records == report.num_variants == _record_count(cohort_bcf)
    assert set(report.arrays_compared) == _store_arrays(refs)
    assert report.sources == (str(cohort_bcf),)


@pytest.mark.parametrize("which", ["small", "fields"])
@pytest.mark.parametrize("chunk", [1, 2, 64])
def test_every_field_kind_passes(which, chunk, small_bcf, fields_bcf, tmp_path):
    bcf = small_bcf if which == "small" else fields_bcf
    refs = _index(bcf, tmp_path, chunk=chunk, layout="raw")
    report = verify_store(refs, progress=False)
    assert report.ok, [d.describe() for d in report.differences]
    assert set(report.arrays_compared) == _store_arrays(refs)
    assert report.num_variants == _record_count(bcf)


def _altered_fields_bcf(path):
    """FUZZ_RECORDS with four values changed: record 3's POS (10 -> 11), record 0's
    INFO/DP (5 -> 6), FORMAT/QS of record 0 sample 0 (9.5 -> 9.25), and the GT of
    record 0 sample 2 (1/1 -> 0/1)."""
    records = list(bcfdata.FUZZ_RECORDS)
    records[0] = (
        records[0]
        .replace("DP=5;", "DP=6;")
        .replace("0|1:3:9.5:PASS", "0|1:3:9.25:PASS")
        .replace("1/1:7:2:lowq", "0/1:7:2:lowq")
    )
    records[3] = records[3].replace("chr2\t10\t", "chr2\t11\t")
    assert records != bcfdata.FUZZ_RECORDS
    return bcfdata.write_bcf(bcfdata.vcf_text(records, header=bcfdata.FUZZ_HEADER), path, index=False)


def test_changed_values_in_the_source_are_found(fields_bcf, tmp_path):
    refs = _index(fields_bcf, tmp_path, chunk=2)
    altered = _altered_fields_bcf(tmp_path / "altered.bcf")
    report = verify_store(refs, source=altered, progress=False)
    assert not report.ok
    found = {d.name: d for d in report.differences}
    assert set(found) == {"variant_position", "variant_DP", "call_QS", "call_genotype", "region_index"}
    assert all(d.count == 1 for name, d in found.items() if name != "region_index")
    pos = found["variant_position"]
    assert (pos.first_variant, pos.first_sample, pos.ours, pos.expected) == (3, None, "10", "11")
    dp = found["variant_DP"]
    assert (dp.first_variant, dp.ours, dp.expected) == (0, "5", "6")
    qs = found["call_QS"]
    assert (qs.first_variant, qs.first_sample, qs.ours, qs.expected) == (0, 0, "9.5", "9.25")
    gt = found["call_genotype"]
    assert (gt.first_variant, gt.first_sample, gt.ours, gt.expected) == (0, 2, "1", "0")
    # Region rows: chunk 0 chr1, chunk 1 chr1, chunk 1 chr2 (record 3 alone): that row's
    # start, end and maximum end move.
    region = found["region_index"]
    assert (region.count, region.first_index, region.ours, region.expected) == (3, (2, 2), "10", "11")


# One edit of FUZZ_RECORDS' VCF text each -> the arrays that must then differ, so every
# kind of comparison is shown to see a change.
EDITS = {
    "id": (0, "\trs1\t", "\trs9\t", {"variant_id"}),
    "id missing": (0, "\trs1\t", "\t.\t", {"variant_id", "variant_id_mask"}),
    "qual": (0, "\t30\tPASS", "\t31\tPASS", {"variant_quality"}),
    "qual missing": (0, "\t30\tPASS", "\t.\tPASS", {"variant_quality"}),
    "filter": (0, "\tPASS\tDP", "\tq10\tDP", {"variant_filter"}),
    "alt": (0, "\tA\tT\t", "\tA\tG\t", {"variant_allele"}),
    "contig": (5, "chrX\t5", "chr2\t5", {"variant_contig", "region_index"}),
    "rlen": (4, "\tTTT\tT\t", "\tTTTT\tT\t", {"variant_allele", "variant_length", "region_index"}),
    "info int": (0, "DP=5;", "DP=6;", {"variant_DP"}),
    "info float": (0, "AF=0.5;", "AF=0.25;", {"variant_AF"}),
    "info string": (0, "NOTE=ab", "NOTE=ac", {"variant_NOTE"}),
    "info flag": (1, "SOMATIC;", "", {"variant_SOMATIC"}),
    "format int": (0, "0|1:3:", "0|1:4:", {"call_DP"}),
    "format float": (0, ":7:2:lowq", ":7:2.5:lowq", {"call_QS"}),
    "format string": (0, ":lowq", ":lowr", {"call_FT"}),
    "phase": (0, "\t0|1:3", "\t0/1:3", {"call_genotype_phased"}),
    "allele": (0, "\t0|1:3", "\t0|0:3", {"call_genotype"}),
    "allele missing": (0, "\t0|1:3", "\t.|1:3", {"call_genotype", "call_genotype_mask"}),
    "ploidy": (2, "\tGT\t0\t1\t.", "\tGT\t0\t1/1\t.", {"call_genotype", "call_genotype_mask", "call_genotype_phased"}),
}


@pytest.fixture(scope="module")
def fields_store(fields_bcf, tmp_path_factory):
    return _index(fields_bcf, tmp_path_factory.mktemp("fields_store"), chunk=2)


@pytest.mark.parametrize("edit", list(EDITS))
def test_each_kind_of_change_is_found(edit, fields_store, tmp_path):
    record, old, new, arrays = EDITS[edit]
    records = list(bcfdata.FUZZ_RECORDS)
    assert old in records[record]
    records[record] = records[record].replace(old, new, 1)
    altered = bcfdata.write_bcf(bcfdata.vcf_text(records, header=bcfdata.FUZZ_HEADER), tmp_path / "e.bcf", index=False)
    report = verify_store(fields_store, source=altered, progress=False)
    assert {d.name for d in report.differences} == arrays, [d.describe() for d in report.differences]
    assert all(d.first_variant == record for d in report.differences if d.first_variant is not None)


# Corpus files that exercise each convention verify follows where pysam's raw reading
# differs from the store's (module docstring of vcfvirtual/verify.py).
from ...oracle.test_corpus import CORPUS  # noqa: E402

CONVENTION_FILES = {
    "brentp+cyvcf2/cyvcf2/tests/test.vcf.gz": "Type=Character INFO holding longer strings",
    "samtools+htslib/test/noroundtrip.vcf": "a FORMAT string with no characters",
    "samtools+htslib/test/tabix/vcf_file.bcf": "FORMAT/GL float vectors ending early within the record",
    "sgkit-dev+bio2zarr/tests/data/vcf/CEUTrio.20.21.gatk3.4.g.bcf": "INFO/END, which pysam hides",
    "sgkit-dev+bio2zarr/tests/data/vcf/mixed_ploidy.vcf.gz": "haploid and diploid calls",
    "sgkit-dev+bio2zarr/tests/data/vcf/field_type_combos.vcf.gz": "every INFO/FORMAT type and Number",
}


@pytest.mark.parametrize("name", list(CONVENTION_FILES))
def test_corpus_files_with_conventions_pass(name, tmp_path):
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus file {name} not present")
    bcf = tmp_path / "input.bcf"
    try:
        bcfdata.bcftools("view", "--no-version", "-Ob", "-o", bcf, path)
    except pysam.utils.SamtoolsError as error:
        # noroundtrip.vcf: the htslib pysam bundles will not write one of its tags as BCF.
        pytest.skip(f"htslib cannot write {name} as BCF: {str(error)[-120:]}")
    refs = _index(bcf, tmp_path, chunk=7 if bcf.stat().st_size < 100_000 else 5000)
    report = verify_store(refs, progress=False)
    assert report.ok, [d.describe() for d in report.differences]
    assert set(report.arrays_compared) == _store_arrays(refs) and not report.not_compared


def test_genotypes_pysam_cannot_read_are_noted_not_compared(tmp_path):
    records = [
        "chr1\t100\t.\tA\tT\t.\t.\t.\tDP:GT\t3:0/1\t4:1|1\t5:0/0",
        "chr1\t200\t.\tA\tT\t.\t.\t.\tGT:DP\t0/1:3\t1/1:4\t0/0:5",
    ]
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records, header=bcfdata.FUZZ_HEADER), tmp_path / "dp_gt.bcf", index=False)
    with pysam.VariantFile(str(bcf)) as vf:
        assert [next(iter(rec.format)) for rec in vf] == ["DP", "GT"]  # htslib kept the text's order
    report = verify_store(_index(bcf, tmp_path), progress=False)
    assert report.ok
    note = (
        "genotypes of 1 record not compared: GT is not the first FORMAT field there, and pysam reads GT only when it is"
    )
    assert report.notes == (note,)


def test_small_windows_give_the_same_outcome(monkeypatch, cohort_bcf, fields_bcf, tmp_path):
    """Stores larger than one window (here: windows of 3 chunks) compare window by window,
    with global variant indices and region rows per chunk."""
    from vcfvirtual.manifests import vcf_zarr as manifest

    monkeypatch.setattr(manifest, "default_chunk_length", lambda n_samples, ploidy, itemsize=1: 200)
    report = verify_store(_index(cohort_bcf, tmp_path), progress=False)  # 64-variant chunks
    assert report.ok and report.num_records == 1500
    refs = _index(fields_bcf, tmp_path, chunk=1)
    monkeypatch.setattr(manifest, "default_chunk_length", lambda n_samples, ploidy, itemsize=1: 2)
    assert verify_store(refs, progress=False).ok
    found = {
        d.name: d
        for d in verify_store(refs, source=_altered_fields_bcf(tmp_path / "a.bcf"), progress=False).differences
    }
    assert (found["variant_position"].first_variant, found["variant_position"].expected) == (3, "11")
    assert found["region_index"].first_index == (3, 2)  # chunk 3 (record 3) is region row 3


def test_a_missing_or_extra_record_is_reported(fields_bcf, tmp_path):
    refs = _index(fields_bcf, tmp_path, chunk=4)
    fewer = bcfdata.write_bcf(
        bcfdata.vcf_text(bcfdata.FUZZ_RECORDS[:-1], header=bcfdata.FUZZ_HEADER), tmp_path / "fewer.bcf", index=False
    )
    report = verify_store(refs, source=fewer, progress=False)
    assert not report.ok and (report.num_records, report.num_variants) == (5, 6)
    assert "htslib reads 5 records, the store holds 6" in report.summary()

    more = bcfdata.write_bcf(
        bcfdata.vcf_text(bcfdata.FUZZ_RECORDS + ["chrX\t9\t.\tA\tC\t.\t.\t.\t.\t.\t.\t."], header=bcfdata.FUZZ_HEADER),
        tmp_path / "more.bcf",
        index=False,
    )
    report = verify_store(refs, source=more, progress=False)
    assert not report.ok and (report.num_records, report.num_variants) == (7, 6)


def _change_first_position_in_cache(refs) -> tuple:
    """Add 1 to record 0's POS in a raw-layout cache, in place (same size)."""
    path, offset, _ = resolved_refs(refs)["variant_position/0"]
    with open(path, "r+b") as f:
        f.seek(offset + 12)  # l_shared, l_indiv, CHROM, then POS (0-based int32)
        (pos0,) = struct.unpack("<i", f.read(4))
        f.seek(offset + 12)
        f.write(struct.pack("<i", pos0 + 1))
    return path, pos0 + 1


def test_a_changed_cache_is_refused_then_compared(small_bcf, tmp_path):
    refs = _index(small_bcf, tmp_path, layout="raw", chunk=3)
    assert verify_store(refs, progress=False).ok
    cache, _ = _change_first_position_in_cache(refs)
    with pytest.raises(StaleCacheError) as caught:
        verify_store(refs, progress=False)
    assert cache in str(caught.value)

    # Without the fingerprint check the codec decodes the changed bytes (the raw layout
    # has no checksum) and the comparison finds the one changed value (region_index is
    # inlined in the references, made from the unchanged records).
    report = verify_store(refs, check=False, progress=False)
    found = {d.name: d for d in report.differences}
    assert set(found) == {"variant_position"}
    pos = found["variant_position"]
    assert (pos.count, pos.first_variant, pos.ours, pos.expected) == (1, 0, "101", "100")

    result = CliRunner().invoke(main, ["verify", str(refs)])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and result.output.startswith("vcfvirtual: error: ")
    assert cache in result.output
    result = CliRunner().invoke(main, ["verify", "--no-check", str(refs)])
    assert result.exit_code == 1 and "variant_position: 1 value differ" in result.output


def test_a_damaged_bgzf_cache_is_a_typed_error_naming_it(cohort_bcf, tmp_path):
    refs = _index(cohort_bcf, tmp_path)
    cache = tmp_path / f"{cohort_bcf.stem}.json.bgzf.cache.bcf"
    data = bytearray(cache.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a block: its CRC32 no longer matches
    cache.write_bytes(bytes(data))
    with pytest.raises(VcfVirtualError) as caught:
        verify_store(refs, check=False, progress=False)
    assert caught.value.path == str(cache)
    result = CliRunner().invoke(main, ["verify", "--no-check", str(refs)])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"vcfvirtual: error: {cache}")


def test_a_store_of_several_files_reads_them_in_order(tmp_path):
    first = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[:4]), tmp_path / "a.bcf")
    second = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[4:]), tmp_path / "b.bcf")
    refs = tmp_path / "both.json"
    vcfvirtual.index([first, second], refs_path=refs, variants_chunk_size=3)
    report = verify_store(refs, progress=False)
    assert report.ok and report.sources == (str(first), str(second))
    assert report.num_records == len(bcfdata.SMALL_RECORDS)
    swapped = verify_store(refs, source=[second, first], progress=False)
    assert not swapped.ok and "variant_position" in {d.name for d in swapped.differences}


def test_cli_exit_codes_and_lines(fields_bcf, tmp_path):
    refs = _index(fields_bcf, tmp_path)
    good = CliRunner().invoke(main, ["verify", "--no-progress", str(refs)])
    assert good.exit_code == 0, good.output
    assert good.output.strip().endswith("all equal")

    altered = _altered_fields_bcf(tmp_path / "altered.bcf")
    bad = CliRunner().invoke(main, ["verify", str(refs), "--source", str(altered)])
    assert bad.exit_code == 1
    assert "variant_position: 1 value differ; first at variant 3: store 10, htslib 11" in bad.output
    assert "call_genotype: 1 value differ; first at variant 0, sample 2: store 1, htslib 0" in bad.output


def test_a_moved_source_names_the_flag(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "moved.bcf")
    refs = _index(bcf, tmp_path)
    bcf.rename(tmp_path / "elsewhere.bcf")
    with pytest.raises(VcfVirtualError, match="source="):
        verify_store(refs, progress=False)
    result = CliRunner().invoke(main, ["verify", str(refs)])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "--source" in result.output and "source=" not in result.output.replace("--source", "")
    fixed = CliRunner().invoke(main, ["verify", str(refs), "--source", str(tmp_path / "elsewhere.bcf")])
    assert fixed.exit_code == 0, fixed.output


def test_progress_bar_on_request(small_bcf, tmp_path):
    refs = _index(small_bcf, tmp_path)
    result = CliRunner().invoke(main, ["verify", "--progress", str(refs)])
    assert result.exit_code == 0
    assert "verify" in result.stderr and "records" in result.stderr


def test_not_a_store_is_one_line(tmp_path):
    (tmp_path / "empty.json").write_text('{"version": 1, "refs": {}}')
    result = CliRunner().invoke(main, ["verify", str(tmp_path / "empty.json")])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"vcfvirtual: error: {tmp_path / 'empty.json'}: ")
    assert "attributes" in result.output or "not a store" in result.output


def test_help_explains_every_option():
    command = main.commands["verify"]
    text = CliRunner().invoke(main, ["verify", "--help"]).output
    for param in command.params:
        if isinstance(param, click.Option):
            assert all(opt in text for opt in param.opts + param.secondary_opts), param.opts
            assert param.help, param.opts
