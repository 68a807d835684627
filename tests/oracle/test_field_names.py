"""Fields named like the fixed arrays, renamed and chosen fields (issue 25 item 1, issue 26
item 7), against bio2zarr and htslib.

bio2zarr refuses INFO/FORMAT fields whose arrays would take a fixed array's name; so do
we, before anything is written. Renamed, the store must equal bio2zarr's conversion of
the same file with the fields renamed in its text; chosen fields, bio2zarr's conversion
less the fields left out. verify, inspect and open_store follow the choice the store
records, and a field lost without being asked for fails verify.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest
import xarray as xr
from click.testing import CliRunner

import vcfvirtual
from vcfvirtual.cli import main
from vcfvirtual.errors import FieldNameError, UntrustedReferenceError
from vcfvirtual.inspect import inspect_store
from vcfvirtual.verify import verify_store

from .. import bcfdata, header_cases
from ..conftest import bio2zarr_convert, differences_from_bio2zarr

CASE = next(c for c in header_cases.cases() if c.name == "clashing_names")
RENAMES = CASE.index_options["rename_fields"]


def _renamed_text(text: str, renames: dict[str, str]) -> str:
    """The VCF text with each field renamed in its header line and its records: what a
    user who can rewrite the file would give bio2zarr."""
    info = {k.split("/")[1]: v for k, v in renames.items() if k.startswith("INFO/")}
    fmt = {k.split("/")[1]: v for k, v in renames.items() if k.startswith("FORMAT/")}
    lines = []
    for line in text.splitlines():
        m = re.match(r"##(INFO|FORMAT)=<ID=([^,]+),", line)
        if m and m.group(2) in (info if m.group(1) == "INFO" else fmt):
            new = (info if m.group(1) == "INFO" else fmt)[m.group(2)]
            line = line.replace(f"ID={m.group(2)},", f"ID={new},", 1)
        elif not line.startswith("#"):
            cols = line.split("\t")
            cols[7] = ";".join(info.get(k, k) + sep + v for k, sep, v in (e.partition("=") for e in cols[7].split(";")))
            cols[8] = ":".join(fmt.get(k, k) for k in cols[8].split(":"))
            line = "\t".join(cols)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _bio2zarr_refusal(bcf, tmp_path) -> str:
    with pytest.raises(ValueError, match="clashing with VCF Zarr spec") as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bio2zarr_convert(bcf, tmp_path / "b.vcz", 2)
    return str(e.value)


def test_we_refuse_what_bio2zarr_refuses_and_length(tmp_path):
    """bio2zarr names the clashing INFO and FORMAT fields; we refuse the same, plus INFO
    'length' (variant_length is ours and bio2zarr's alike, which its list lacks)."""
    info_only = header_cases.Case(
        "info_clash",
        "".join(header_cases.info(n, "1") for n in header_cases.FIXED_INFO) + header_cases.GT,
        ("chr1\t10\t.\tA\tC\t.\t.\t" + ";".join(f"{n}=1" for n in header_cases.FIXED_INFO) + "\tGT\t0/1\t0/0",),
    )
    bcf = info_only.write(tmp_path)
    theirs = set(re.findall(r"'([^']+)'", _bio2zarr_refusal(bcf, tmp_path)))
    assert theirs == set(header_cases.FIXED_INFO) - {"length"}
    with pytest.raises(FieldNameError) as e:
        vcfvirtual.index(bcf, refs_path=tmp_path / "x.json", cache_path=tmp_path / "x.cache")
    assert {n for n in header_cases.FIXED_INFO if f"INFO field {n!r} would be stored" in str(e.value)} == set(
        header_cases.FIXED_INFO
    )
    fmt_case = header_cases.Case(
        "format_clash",
        header_cases.GT + "".join(header_cases.fmt(n, "1") for n in header_cases.FIXED_FORMAT),
        ("chr1\t10\t.\tA\tC\t.\t.\t.\tGT:" + ":".join(header_cases.FIXED_FORMAT) + "\t0/1:1:2:3\t0/0:4:5:6",),
    )
    bcf = fmt_case.write(tmp_path)
    theirs = set(re.findall(r"'([^']+)'", _bio2zarr_refusal(bcf, tmp_path / "f")))
    assert theirs == set(header_cases.FIXED_FORMAT)
    with pytest.raises(FieldNameError, match="FORMAT field 'genotype' would be stored as call_genotype"):
        vcfvirtual.index(bcf, refs_path=tmp_path / "y.json", cache_path=tmp_path / "y.cache")


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_refused_before_anything_is_written(tmp_path, layout):
    source = tmp_path / "in"
    source.mkdir()
    bcf = CASE.write(source)
    before = sorted(p.name for p in source.iterdir())
    with pytest.raises(FieldNameError) as e:
        vcfvirtual.index(bcf, cache_layout=layout)
    assert "INFO field 'filter' would be stored as variant_filter, replacing the fixed array variant_filter" in str(
        e.value
    )
    assert str(e.value).startswith(str(bcf)) and "\n" not in str(e.value)
    assert sorted(p.name for p in source.iterdir()) == before  # no output, no temporary


def test_cli_refuses_in_one_line_and_renames(tmp_path):
    bcf = CASE.write(tmp_path)
    refused = CliRunner().invoke(main, ["index", str(bcf), "-o", str(tmp_path / "a.json")])
    assert refused.exit_code == 1
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1 and "INFO field 'filter'" in lines[0]
    assert "--rename-field INFO/filter=filter_info" in lines[0]
    args = [a for k, v in RENAMES.items() for a in ("--rename-field", f"{k}={v}")]
    done = CliRunner().invoke(main, ["index", str(bcf), "-o", str(tmp_path / "a.json"), *args])
    assert done.exit_code == 0, done.output
    verified = CliRunner().invoke(main, ["verify", str(tmp_path / "a.json")])
    assert verified.exit_code == 0 and "all equal" in verified.output, verified.output
    shown = CliRunner().invoke(main, ["inspect", str(tmp_path / "a.json")])
    assert "INFO/filter -> variant_filter_info" in shown.output
    bad = CliRunner().invoke(main, ["index", str(bcf), "-f", "-o", str(tmp_path / "a.json"), "--rename-field", "x"])
    assert bad.exit_code == 2 and "CATEGORY/ID=NAME" in bad.output


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_renamed_store_equals_bio2zarr_of_the_renamed_file(tmp_path, layout):
    bcf = CASE.write(tmp_path)
    renamed = bcfdata.write_bcf(_renamed_text(CASE.text(), RENAMES), tmp_path / "renamed.bcf")
    ref = bio2zarr_convert(renamed, tmp_path / "bio2zarr.vcz", 2)
    refs = tmp_path / "s.json"
    vcfvirtual.index(
        bcf, refs_path=refs, cache_path=tmp_path / "s.cache", variants_chunk_size=2, rename_fields=RENAMES,
        cache_layout=layout, samples_chunk_size=1,
    )  # fmt: skip
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    # The header text differs by the renames alone; every array is bio2zarr's.
    problems = [p for p in differences_from_bio2zarr(ds, ref) if not p.startswith("vcf_")]
    assert not problems, "\n".join(problems)
    assert ds["variant_filter"].values[:, 0].tolist() == [True, False]  # FILTER, not INFO/filter
    assert ds["variant_filter_info"].values.tolist() == ["x", "lowQ"]
    report = verify_store(refs, progress=False)
    assert report.ok and not report.missing and not report.not_compared, report.summary()
    assert {"variant_filter_info", "call_genotype_format"} <= set(report.arrays_compared)


def test_chosen_fields_equal_bio2zarr_less_those_left_out(tmp_path):
    case = next(c for c in header_cases.cases() if c.name == "int8_edges")
    bcf = case.write(tmp_path)
    ref = bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 2)
    refs = tmp_path / "s.json"
    vcfvirtual.index(
        bcf, refs_path=refs, cache_path=tmp_path / "s.cache", variants_chunk_size=2,
        exclude_fields=["INFO/W", "FORMAT/Q"],
    )  # fmt: skip
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert "variant_W" not in ds and "call_Q" not in ds and "variant_V" in ds
    assert not differences_from_bio2zarr(ds, ref, ignore=("variant_W", "call_Q"))
    report = verify_store(refs, progress=False)
    assert report.ok and report.omitted == ("INFO/W", "FORMAT/Q"), report.summary()
    assert "2 fields omitted on request" in report.summary()
    assert "omitted on request INFO/W, FORMAT/Q" in inspect_store(refs).to_text()
    only = tmp_path / "only.json"
    vcfvirtual.index(bcf, refs_path=only, cache_path=tmp_path / "o.cache", fields="INFO/V,FORMAT/GT")
    ds = xr.open_zarr(vcfvirtual.open_store(only), consolidated=False)
    fields = {n for n in ds.data_vars if n.startswith(("variant_", "call_"))}
    assert fields - {f"variant_{n}" for n in header_cases.FIXED_INFO} == {
        "variant_V",
        "call_genotype",
        "call_genotype_phased",
        "call_genotype_mask",
    }
    assert verify_store(only, progress=False).ok


def test_a_field_named_that_the_header_lacks_is_refused(tmp_path):
    bcf = CASE.write(tmp_path)
    with pytest.raises(FieldNameError, match="names INFO/AF, which the header does not declare"):
        vcfvirtual.index(bcf, refs_path=tmp_path / "x.json", fields=["INFO/AF"], rename_fields=RENAMES)
    assert not (tmp_path / "x.json").exists()


def _drop_array(refs, name):
    data = json.loads(refs.read_text())
    data["refs"] = {k: v for k, v in data["refs"].items() if k.split("/")[0] != name}
    refs.write_text(json.dumps(data))


def test_a_lost_field_fails_verify(tmp_path):
    """A store that lacks a declared field's array (as FORMAT/genotype was once dropped
    silently) fails verify, whereas a field left out on request does not."""
    bcf = CASE.write(tmp_path)
    refs = tmp_path / "s.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / "s.cache", rename_fields=RENAMES)
    for name in ("call_genotype_format", "variant_DP", "call_genotype_mask"):
        _drop_array(refs, name)
    # open_store's checks refuse such references first; unchecked, verify names what is missing.
    with pytest.raises(UntrustedReferenceError, match="lack arrays"):
        verify_store(refs, progress=False)
    report = verify_store(refs, progress=False, check=False)
    assert not report.ok and set(report.missing) == {"call_genotype_format", "variant_DP", "call_genotype_mask"}
    assert "3 arrays of header fields missing" in report.summary()


def test_a_changed_field_record_is_refused_at_open(tmp_path):
    bcf = CASE.write(tmp_path)
    refs = tmp_path / "s.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / "s.cache", rename_fields=RENAMES)
    data = json.loads(refs.read_text())
    attrs = json.loads(data["refs"][".zattrs"])
    attrs["vcfvirtual"]["fields"]["rename"]["INFO/filter"] = "other"
    data["refs"][".zattrs"] = json.dumps(attrs)
    refs.write_text(json.dumps(data))
    with pytest.raises(UntrustedReferenceError, match="variant_filter_info"):
        vcfvirtual.open_store(refs)
    del attrs["vcfvirtual"]["fields"]  # as if nothing had been renamed: variant_filter would clash
    data["refs"][".zattrs"] = json.dumps(attrs)
    refs.write_text(json.dumps(data))
    with pytest.raises(UntrustedReferenceError, match="replacing the fixed array variant_filter"):
        vcfvirtual.open_store(refs)


def test_columns_cache_holds_no_segment_of_a_field_left_out(tmp_path):
    """A field left out costs no bytes of a columns cache (bgzf and raw caches hold whole
    records): its segments are neither compressed nor written, and the arrays kept read
    as in the store of every field."""
    case = header_cases.wide_info_case(40)
    bcf = case.write(tmp_path)
    left_out = [f"INFO/K{i}" for i in range(0, 40, 2)]
    full, part = tmp_path / "full.json", tmp_path / "part.json"
    vcfvirtual.index(bcf, refs_path=full, cache_path=tmp_path / "full.cache", cache_layout="columns")
    vcfvirtual.index(
        bcf, refs_path=part, cache_path=tmp_path / "part.cache", cache_layout="columns", exclude_fields=left_out
    )
    assert len(bcfdata.cache_bytes(tmp_path / "part.cache")) < len(bcfdata.cache_bytes(tmp_path / "full.cache"))
    segments = json.loads(part.read_text())["refs"]
    assert not any(k.startswith("variant_K0/") for k in segments) and any(k.startswith("variant_K1/") for k in segments)
    ds_full = xr.open_zarr(vcfvirtual.open_store(full), consolidated=False)
    ds_part = xr.open_zarr(vcfvirtual.open_store(part), consolidated=False)
    assert set(ds_full.data_vars) - set(ds_part.data_vars) == {f"variant_K{i}" for i in range(0, 40, 2)}
    xr.testing.assert_equal(ds_part, ds_full[list(ds_part.data_vars)])  # attributes name other caches
    assert verify_store(part, progress=False).ok


def test_partitioned_run_leaves_out_the_same_segments(tmp_path):
    """Workers (-j) write the columns cache a serial run writes, fields left out included."""
    bcf = header_cases.wide_info_case(12).write(tmp_path)
    caches = []
    for workers in (1, 2):
        cache = tmp_path / f"c{workers}.cache"
        vcfvirtual.index(
            bcf, refs_path=tmp_path / f"r{workers}.json", cache_path=cache, cache_layout="columns",
            exclude_fields="INFO/K3,INFO/K4", workers=workers,
        )  # fmt: skip
        caches.append(bcfdata.cache_bytes(cache))
    assert caches[0] == caches[1]


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_local_alleles_with_chosen_fields(tmp_path, layout):
    """--local-alleles beside a field choice: call_LAD/call_LPL stand in for call_AD and
    call_PL (verify counts them replaced, not missing) whatever else is left out; leaving
    GT out or renaming AD leaves nothing they are defined on, and is refused in one line."""
    from vcfvirtual.errors import UnsupportedBCFError

    from .test_local_alleles import HEADER, RECORDS

    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, header=HEADER), tmp_path / "local.bcf")
    refs = tmp_path / "s.json"
    options = dict(cache_path=tmp_path / "s.cache", cache_layout=layout, local_alleles=True, force=True)
    vcfvirtual.index(bcf, refs_path=refs, exclude_fields="FORMAT/DP", **options)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    assert {"call_LA", "call_LAD", "call_LPL"} <= set(ds.data_vars) and "call_DP" not in ds
    report = verify_store(refs, progress=False)
    assert report.ok and not report.missing and report.omitted == ("FORMAT/DP",), report.summary()
    with pytest.raises(UnsupportedBCFError, match="derived from GT, which .* leaves out"):
        vcfvirtual.index(bcf, refs_path=refs, exclude_fields="FORMAT/GT", **options)
    with pytest.raises(UnsupportedBCFError, match="FORMAT/AD is renamed"):
        vcfvirtual.index(bcf, refs_path=refs, rename_fields={"FORMAT/AD": "AD2"}, **options)
