"""The command line: the main job, and one clear line for each kind of bad input."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner
from vcfvirtual_codec.bcf import bgzf

from vcfvirtual.cli import main

from .. import bcfdata


def run_index(*args):
    return CliRunner().invoke(main, ["index", *map(str, args)])


def test_index_writes_refs_and_cache_next_to_bcf(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "cohort.bcf")
    result = run_index(bcf)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cohort.bcf.vcz.json").exists()
    assert (tmp_path / "cohort.bcf.vcz.cache.columns").exists()
    # A second run refuses to overwrite without --force, then succeeds with it.
    again = run_index(bcf)
    assert again.exit_code == 1 and "--force" in again.output
    assert run_index(bcf, "--force").exit_code == 0


def test_refs_name_the_codec(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "x.bcf")
    assert run_index(bcf, "-c", 2).exit_code == 0
    refs = json.loads((tmp_path / "x.bcf.vcz.json").read_text())["refs"]
    zarray = json.loads(refs["call_genotype/.zarray"])
    assert [f["id"] for f in zarray["filters"]] == ["vcfvirtual.bcf"]
    assert zarray["fill_value"] is None
    alleles = json.loads(refs["variant_allele/.zarray"])
    assert [f["id"] for f in alleles["filters"]] == ["vlen-utf8", "vcfvirtual.bcf"]
    assert refs["variant_position/1"][1:] != refs["variant_position/0"][1:]


def test_cache_is_a_bcf_that_bcftools_reads(cohort_bcf, tmp_path):
    bcf = shutil.copy(cohort_bcf, tmp_path / "c.bcf")
    assert run_index(bcf, "--cache-layout", "bgzf").exit_code == 0
    cache = tmp_path / "c.bcf.vcz.cache.bcf"
    source_view = bcfdata.bcftools("view", "-H", bcf)
    cache_view = bcfdata.bcftools("view", "-H", cache)
    assert cache_view == source_view and len(source_view) > 0


def test_kerchunk_json_opens_in_a_process_that_never_imports_vcfvirtual(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "s.bcf")
    assert run_index(bcf, "-c", 3).exit_code == 0
    script = f"""
import json
import xarray as xr
ds = xr.open_zarr("reference://", storage_options={{"fo": {str(tmp_path / "s.bcf.vcz.json")!r}}},
                  consolidated=False)
print(json.dumps({{"pos": ds["variant_position"].values.tolist(),
                  "gt": ds["call_genotype"].values.tolist(),
                  "alleles": ds["variant_allele"].values.tolist()}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    import pysam

    with pysam.VariantFile(str(bcf)) as vf:
        recs = list(vf)
        samples = list(vf.header.samples)
    assert got["pos"] == [r.pos for r in recs]
    assert [a[: len(r.alleles)] for a, r in zip(got["alleles"], recs)] == [list(r.alleles) for r in recs]
    first = [[-1 if a is None else a for a in recs[0].samples[s]["GT"]] for s in samples]
    assert got["gt"][0] == first


def _bad_inputs(tmp_path, small_bcf):
    raw = small_bcf.read_bytes()
    blocks = [off for off, _ in bgzf.iter_blocks(open(small_bcf, "rb"), small_bcf)]
    flipped = bytearray(raw)
    flipped[blocks[1] - 20] ^= 0xFF  # inside the first block's deflate data
    vcf_text = bcfdata.vcf_text(bcfdata.SMALL_RECORDS)
    cases = {
        "not_bcf.bcf": (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20, "not a BCF file"),
        "text.bcf": (vcf_text.encode(), "VCF text"),
        "bgzipped_vcf.bcf": (gzip.compress(vcf_text.encode()), "BGZF"),
        "empty.bcf": (b"", "empty"),
        "truncated.bcf": (raw[: len(raw) - 40], "truncated"),
        "flipped.bcf": (bytes(flipped), "BGZF block"),
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    return {tmp_path / name: needle for name, (_, needle) in cases.items()}


def test_bad_input_gives_one_clear_line_and_no_outputs(small_bcf, tmp_path):
    for path, needle in _bad_inputs(tmp_path, small_bcf).items():
        before = set(os.listdir(tmp_path))
        result = run_index(path)
        assert result.exit_code == 1, (path, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, (path, result.output)
        assert str(path) in lines[0] and needle in lines[0], (path, lines[0])
        assert "Traceback" not in result.output
        assert set(os.listdir(tmp_path)) == before, f"{path.name} left files behind"


def test_missing_file(tmp_path):
    result = run_index(tmp_path / "nope.bcf")
    assert result.exit_code == 1
    assert "nope.bcf" in result.output and "cannot read" in result.output


def test_real_process_exit_code_and_no_traceback(tmp_path):
    bad = tmp_path / "v.bcf"
    bad.write_text("##fileformat=VCFv4.3\n#CHROM\tPOS\n")
    proc = subprocess.run([sys.executable, "-m", "vcfvirtual.cli", "index", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "VCF text" in proc.stderr


def test_help_explains_every_option():
    out = CliRunner().invoke(main, ["index", "--help"]).output
    for option in (
        "--output",
        "--cache",
        "--variants-chunk-size",
        "--cache-layout",
        "--inflate-threads",
        "--cache-url",
        "--force",
        "--progress",
        "--verbose",
    ):
        assert option in out


def test_the_choices_offered_are_the_ones_index_accepts():
    # Each format and layout is accepted by the library (a refused one would raise before
    # writing), and the command offers exactly those.
    from vcfvirtual.plan import LAYOUTS, REFS_FORMATS

    choices = {p.name: list(p.type.choices) for p in main.commands["index"].params if hasattr(p.type, "choices")}
    assert choices == {"cache_layout": list(LAYOUTS), "refs_format": list(REFS_FORMATS)}
    assert set(LAYOUTS) == {"raw", "bgzf", "columns"} and set(REFS_FORMATS) == {"json", "parquet", "icechunk"}


def _positions_in_fresh_process(refs):
    """Read through plain xarray and fsspec, in a process that never imports vcfvirtual."""
    script = f"""
import json, xarray as xr
ds = xr.open_zarr("reference://", storage_options={{"fo": {str(refs)!r}}}, consolidated=False)
print(json.dumps(ds["variant_position"].values.tolist()))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_cache_url_names_where_the_cache_will_be(small_bcf, tmp_path):
    """Index with --cache-url naming where the cache will be uploaded, then put it there:
    the references work for a collaborator with nothing but the JSON and the URL."""
    import pysam

    bcf = shutil.copy(small_bcf, tmp_path / "c.bcf")
    shared = tmp_path / "shared"
    shared.mkdir()
    assert run_index(bcf, "--cache-url", f"file://{shared}/").exit_code == 0
    refs = tmp_path / "c.bcf.vcz.json"
    doc = json.loads(refs.read_text())
    assert doc["templates"] == {"cache": f"file://{shared}/c.bcf.vcz.cache.columns"}
    shutil.move(tmp_path / "c.bcf.vcz.cache.columns", shared / "c.bcf.vcz.cache.columns")
    with pysam.VariantFile(str(small_bcf)) as vf:
        expected = [r.pos for r in vf]
    assert _positions_in_fresh_process(refs) == expected


def test_relocate_rewrites_only_the_cache_url(small_bcf, tmp_path):
    import pysam
    import xarray as xr

    import vcfvirtual

    bcf = shutil.copy(small_bcf, tmp_path / "r.bcf")
    assert run_index(bcf, "-c", 3).exit_code == 0
    refs = tmp_path / "r.bcf.vcz.json"
    before = json.loads(refs.read_text())
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.move(tmp_path / "r.bcf.vcz.cache.columns", moved / "r.bcf.vcz.cache.columns")
    with pytest.raises(vcfvirtual.VcfVirtualError, match="missing"):
        vcfvirtual.open_store(refs)
    # Reading from elsewhere without rewriting anything...
    with pysam.VariantFile(str(small_bcf)) as vf:
        expected = [r.pos for r in vf]
    store = vcfvirtual.open_store(refs, cache_url=f"file://{moved}/")
    assert xr.open_zarr(store, consolidated=False)["variant_position"].values.tolist() == expected
    # ...or rewriting the references for good.
    result = CliRunner().invoke(main, ["relocate", str(refs), f"file://{moved}/"])
    assert result.exit_code == 0, result.output
    after = json.loads(refs.read_text())
    assert after["templates"]["cache"] == f"file://{moved}/r.bcf.vcz.cache.columns"
    changed = {k for k in before["refs"] if before["refs"][k] != after["refs"][k]}
    assert changed == {".zattrs"}  # chunk references are untouched: they name the template
    assert _positions_in_fresh_process(refs) == expected
    store = vcfvirtual.open_store(refs)  # the fingerprint check finds the moved cache whole
    assert xr.open_zarr(store, consolidated=False)["variant_position"].values.tolist() == expected


def test_verbose_logs_our_steps_not_other_libraries_debug(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "v.bcf")
    proc = subprocess.run(
        [sys.executable, "-m", "vcfvirtual.cli", "index", "-vv", "--no-progress", str(bcf)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = proc.stderr.splitlines()
    ours = [line for line in lines if line.startswith(("INFO vcfvirtual", "DEBUG vcfvirtual"))]
    assert any("v.bcf: 3 samples" in line for line in ours), proc.stderr
    others = [line for line in lines if line.startswith(("DEBUG", "INFO")) and " vcfvirtual" not in line]
    assert not others, others[:5]
    assert len(proc.stderr) < 5000  # zarr/asyncio debug used to print ~370 kB here


def test_vcf_text_named_bcf_is_told_to_rename_it(tmp_path):
    """vcfvirtual converts VCF itself (by name): the hint says so, and following it works."""
    text = bcfdata.vcf_text(bcfdata.SMALL_RECORDS)
    wrong = tmp_path / "calls.bcf"
    wrong.write_text(text)
    result = run_index(wrong)
    assert result.exit_code == 1
    assert "VCF text" in result.output and ".vcf" in result.output and "bcftools" not in result.output
    renamed = wrong.rename(tmp_path / "calls.vcf")
    assert run_index(renamed).exit_code == 0


@pytest.mark.parametrize("fmt", ["json", "parquet", "icechunk"])
def test_summary_names_every_output_and_a_line_that_opens_them(small_bcf, tmp_path, fmt, monkeypatch):
    import pysam
    import xarray as xr

    import vcfvirtual

    bcf = shutil.copy(small_bcf, tmp_path / "s.bcf")
    monkeypatch.chdir(tmp_path)
    result = run_index("s.bcf", "--format", fmt)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    with pysam.VariantFile(str(bcf)) as vf:
        assert lines[0].startswith(f"indexed {sum(1 for _ in vf):,} records in ")
    refs = {"json": "s.bcf.vcz.json", "parquet": "s.bcf.vcz.parq", "icechunk": "s.bcf.vcz.icechunk"}[fmt]
    assert lines[1].startswith(f"wrote  {refs}") and (tmp_path / refs).exists()
    assert str(tmp_path / "s.bcf.vcz.cache.columns") in lines[2] and "columns layout" in lines[2]
    opener = lines[3].removeprefix("open:  ")
    ds = eval(opener, {"xr": xr, "vcfvirtual": vcfvirtual})
    with pysam.VariantFile(str(bcf)) as vf:
        assert ds["variant_position"].values.tolist() == [r.pos for r in vf]


def test_summary_of_an_uncompressed_bcf_says_there_is_no_cache(small_bcf, tmp_path):
    plain = bcfdata.uncompressed_copy(small_bcf, tmp_path / "plain.bcf")
    result = run_index(plain)
    assert result.exit_code == 0, result.output
    assert "no cache" in result.output and str(plain) in result.output and "transcode cache" not in result.output
