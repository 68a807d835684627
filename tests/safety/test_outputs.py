"""What a user owns is never lost: only outputs vcfvirtual wrote are replaced, each so a
kill at any instant leaves the old or the new one; failed and interrupted runs leave no
temporaries; relocate refuses targets that cannot be the cache; a full disk is one line.

Oracles: pysam reads the BCF (positions the references must still give); the user's own
files and directories are compared byte for byte before and after; the kernel's /dev/full
is the full disk (ENOSPC from the real buffered-file machinery, close included)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pysam
import pytest
import xarray as xr
from click.testing import CliRunner

import vcfvirtual
from vcfvirtual import errors
from vcfvirtual.bcf import vcf_input as transcode
from vcfvirtual.cli import main
from vcfvirtual.io import outputs
from vcfvirtual.refs import kerchunk
from vcfvirtual.refs import relocate as relocate_mod

from .. import bcfdata

DEAD_PID = 999_999_999  # above any pid_max: no such process


def pysam_positions(bcf):
    with pysam.VariantFile(str(bcf)) as vf:
        return [r.pos for r in vf]


def our_positions(refs):
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    return ds["variant_position"].values.tolist()


def chunk_size_of(refs):
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    return ds.attrs["vcfvirtual"]["variants_chunk_size"]


def snapshot(path):
    """Everything at ``path`` as it stands (link, file bytes or a tree of them)."""
    if os.path.islink(path):
        return ("link", os.readlink(path))
    if os.path.isdir(path):
        return ("dir", {name: snapshot(os.path.join(path, name)) for name in sorted(os.listdir(path))})
    with open(path, "rb") as f:
        return ("file", f.read())


FORMAT_SUFFIX = {"json": ".vcz.json", "parquet": ".vcz.parq", "icechunk": ".vcz.icechunk"}


def _user_thing(kind, at, tmp_path):
    """Something of the user's at ``at``: a folder with a file in it, a file, or links to them."""
    target_file = tmp_path / "user-notes.txt"
    target_file.write_bytes(b"the user's own words\n")
    target_dir = tmp_path / "user-results"
    target_dir.mkdir(exist_ok=True)
    (target_dir / "keep.txt").write_bytes(b"keep me\n")
    if kind == "dir":
        at.mkdir()
        (at / "keep.txt").write_bytes(b"keep me too\n")
    elif kind == "file":
        at.write_bytes(b"not references\n")
    elif kind == "link-to-file":
        at.symlink_to(target_file)
    elif kind == "link-to-dir":
        at.symlink_to(target_dir, target_is_directory=True)
    return [at, target_file, target_dir]


# ------------------------------------------------------------------ whose outputs


@pytest.mark.parametrize("fmt", ["json", "parquet", "icechunk"])
@pytest.mark.parametrize("thing", ["dir", "file", "link-to-file", "link-to-dir"])
def test_force_refuses_references_that_are_not_ours(small_bcf, tmp_path, fmt, thing):
    if fmt == "icechunk":
        pytest.importorskip("icechunk")
    refs = tmp_path / ("out" + FORMAT_SUFFIX[fmt])
    watched = _user_thing(thing, refs, tmp_path)
    before = [snapshot(p) for p in watched]
    with pytest.raises(errors.OutputExistsError, match="not a vcfvirtual") as info:
        vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "c.cache.bcf", refs_format=fmt, force=True)
    assert str(refs) in str(info.value)
    assert [snapshot(p) for p in watched] == before
    assert not (tmp_path / "c.cache.bcf").exists()  # refused before anything was written


@pytest.mark.parametrize("thing", ["dir", "file", "link-to-file", "link-to-dir"])
def test_force_refuses_a_cache_that_is_not_ours(small_bcf, tmp_path, thing):
    cache = tmp_path / "c.cache.bcf"
    watched = _user_thing(thing, cache, tmp_path)
    before = [snapshot(p) for p in watched]
    with pytest.raises(errors.OutputExistsError, match="not a vcfvirtual") as info:
        vcfvirtual.index(small_bcf, refs_path=tmp_path / "c.json", cache_path=cache, force=True)
    assert str(cache) in str(info.value)
    assert [snapshot(p) for p in watched] == before
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(
    "foreign",
    [
        "notes.txt",  # a file of the user's
        ".part-000001.tmp-999999999",  # even a name a part might have been written under
        "part-000001",  # a part's name, not a part's bytes
        "sub/",  # a folder
    ],
)
def test_force_refuses_a_cache_folder_holding_anything_but_parts(small_bcf, tmp_path, foreign):
    """A cache made of parts is replaced only when it holds parts and nothing else: a
    folder with one more thing in it is the user's, kept whole, even with force."""
    refs, cache = tmp_path / "c.json", tmp_path / "c.cache.columns"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=3)
    assert os.listdir(cache) == ["part-000000"]
    if foreign.endswith("/"):
        (cache / foreign).mkdir()
    else:
        (cache / foreign).write_bytes(b"the user's own words\n")
    before = {p.name: snapshot(p) for p in cache.iterdir()}
    with pytest.raises(errors.OutputExistsError, match="directory that is not a vcfvirtual cache") as info:
        vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=2, force=True)
    assert str(cache) in str(info.value)
    assert {p.name: snapshot(p) for p in cache.iterdir()} == before
    assert chunk_size_of(refs) == 3  # nothing replaced


def test_a_link_to_our_own_cache_is_not_written_through(small_bcf, tmp_path):
    real = tmp_path / "real.cache.bcf"
    vcfvirtual.index(small_bcf, refs_path=tmp_path / "real.json", cache_path=real)
    before = bcfdata.cache_bytes(real)
    (tmp_path / "link.cache.bcf").symlink_to(real)
    with pytest.raises(errors.OutputExistsError, match="symbolic link"):
        vcfvirtual.index(
            small_bcf,
            refs_path=tmp_path / "l.json",
            cache_path=tmp_path / "link.cache.bcf",
            force=True,
            variants_chunk_size=2,
        )
    assert bcfdata.cache_bytes(real) == before and (tmp_path / "link.cache.bcf").is_symlink()


def test_the_input_is_never_the_cache(small_bcf, tmp_path):
    bcf = shutil.copy(small_bcf, tmp_path / "in.bcf")  # a BCF: it would pass as a cache by its bytes
    before = bcf.read_bytes()
    with pytest.raises(errors.OutputExistsError, match="is the input"):
        vcfvirtual.index(bcf, refs_path=tmp_path / "x.json", cache_path=bcf, force=True)
    with pytest.raises(errors.OutputExistsError, match="is the input"):
        vcfvirtual.index(bcf, refs_path=bcf, cache_path=tmp_path / "x.cache", force=True)
    assert bcf.read_bytes() == before


@pytest.mark.parametrize("fmt", ["json", "parquet", "icechunk"])
def test_force_replaces_our_own_outputs_of_each_kind(small_bcf, tmp_path, fmt):
    if fmt == "icechunk":
        pytest.importorskip("icechunk")
    refs, cache = tmp_path / ("s" + FORMAT_SUFFIX[fmt]), tmp_path / "s.cache.bcf"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, refs_format=fmt, variants_chunk_size=3)
    with pytest.raises(errors.OutputExistsError, match="force=True"):
        vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, refs_format=fmt, variants_chunk_size=2)
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, refs_format=fmt, variants_chunk_size=2, force=True)
    assert chunk_size_of(refs) == 2
    assert our_positions(refs) == pysam_positions(small_bcf)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([refs.name, cache.name])


def test_cli_output_naming_a_directory_is_refused_and_the_directory_kept(small_bcf, tmp_path):
    """The issue's case: vcf2zarr users type a folder as the output."""
    bcf = shutil.copy(small_bcf, tmp_path / "cohort.bcf")
    results = tmp_path / "results"
    results.mkdir()
    (results / "analysis.csv").write_text("a,b\n1,2\n")
    before = snapshot(results)
    for out in (f"{results}/", str(results)):
        result = CliRunner().invoke(main, ["index", "--force", str(bcf), "-o", out])
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.output
        assert "results" in lines[0] and ("directory" in lines[0])
        assert snapshot(results) == before
    # A name that does not exist yet but ends in a separator asks for a folder too.
    result = CliRunner().invoke(main, ["index", str(bcf), "-o", f"{tmp_path}/new/"])
    assert result.exit_code == 1 and "directory" in result.output and not (tmp_path / "new").exists()


# ------------------------------------------------------------------ replacing directories

REPLACE_AND_DIE = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from vcfvirtual.io import outputs as cache

    new, path, die_at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    tmp = cache.temporary_name(path)
    os.rename(new, tmp)  # a finished new output under this run's temporary name
    real_rename, real_delete, step = os.rename, cache._delete, [0]

    def step_then_maybe_die():
        step[0] += 1
        if step[0] == die_at:
            os._exit(137)  # as kill -9: no cleanup of any kind runs

    def rename(a, b):
        step_then_maybe_die()
        real_rename(a, b)

    def delete(p):
        step_then_maybe_die()
        real_delete(p)

    os.rename, cache._delete = rename, delete
    cache.replace_output(tmp, path)
""")


@pytest.mark.parametrize("fmt", ["parquet", "icechunk"])
@pytest.mark.parametrize(
    "die_at", [1, 2, 3]
)  # before moving the old aside, before moving the new in, before deleting the old
def test_kill_between_the_steps_of_replacing_a_directory_loses_nothing(small_bcf, tmp_path, fmt, die_at):
    if fmt == "icechunk":
        pytest.importorskip("icechunk")
    refs, cache = tmp_path / ("s" + FORMAT_SUFFIX[fmt]), tmp_path / "s.cache.bcf"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, refs_format=fmt, variants_chunk_size=3)
    # The new references come with their own cache: rewriting the old one would change
    # its mtime, which Icechunk's virtual chunks are pinned to.
    new = tmp_path / ("new" + FORMAT_SUFFIX[fmt])
    vcfvirtual.index(
        small_bcf, refs_path=new, cache_path=tmp_path / "new.cache.bcf", refs_format=fmt, variants_chunk_size=3
    )
    proc = subprocess.run(
        [sys.executable, "-c", REPLACE_AND_DIE, str(new), str(refs), str(die_at)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 137, proc.stderr
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(f".{refs.name}.")]
    assert leftovers
    # The next run in this folder cleans up: whatever the instant, references open.
    assert not any(outputs._alive(int(p.name.rsplit("-", 1)[-1])) for p in leftovers)
    outputs.remove_stale_temporaries(refs)
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert our_positions(refs) == pysam_positions(small_bcf)
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, refs_format=fmt, variants_chunk_size=2, force=True)
    assert chunk_size_of(refs) == 2 and our_positions(refs) == pysam_positions(small_bcf)


def test_an_output_set_aside_is_restored_not_deleted(tmp_path):
    """Killed between its two renames, a run left only the set-aside copy: it comes back."""
    refs = tmp_path / "x.vcz.parq"
    aside = tmp_path / f".x.vcz.parq.old-{DEAD_PID}"
    aside.mkdir()
    (aside / ".zmetadata").write_text("{}")
    (tmp_path / f".x.vcz.parq.tmp-{DEAD_PID}").mkdir()
    outputs.remove_stale_temporaries(refs)
    assert sorted(os.listdir(tmp_path)) == ["x.vcz.parq"] and (refs / ".zmetadata").read_text() == "{}"
    # With the new one in place, the set-aside copy is the one deleted.
    aside.mkdir()
    outputs.remove_stale_temporaries(refs)
    assert sorted(os.listdir(tmp_path)) == ["x.vcz.parq"]


# ------------------------------------------------------------------ remote staging


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """tempfile.gettempdir() is a folder of this test's own."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    assert tempfile.gettempdir() == str(folder)
    return folder


def test_failed_remote_runs_leave_no_staging_folder(small_bcf, s3_bucket, tmp_path, private_tmp):
    bucket, fs, options = s3_bucket
    fs.put_file(str(small_bcf), f"{bucket}/in.bcf")
    fs.pipe_file(f"{bucket}/taken.json", b"{}")
    runs = {
        "missing source": {
            "bcf_path": f"s3://{bucket}/missing.bcf",
            "refs_path": f"s3://{bucket}/m.json",
            "cache_path": f"s3://{bucket}/m.cache.bcf",
        },
        "existing output": {
            "bcf_path": f"s3://{bucket}/in.bcf",
            "refs_path": f"s3://{bucket}/taken.json",
            "cache_path": f"s3://{bucket}/t.cache.bcf",
        },
        "bad chunk size": {
            "bcf_path": f"s3://{bucket}/in.bcf",
            "refs_path": tmp_path / "b.json",
            "cache_path": tmp_path / "b.cache.bcf",
            "variants_chunk_size": 0,
        },
        "bad layout": {
            "bcf_path": f"s3://{bucket}/in.bcf",
            "refs_path": tmp_path / "b.json",
            "cache_path": tmp_path / "b.cache.bcf",
            "cache_layout": "zip",
        },
        "a user's file at the output": {
            "bcf_path": f"s3://{bucket}/in.bcf",
            "refs_path": small_bcf,
            "cache_path": tmp_path / "u.cache.bcf",
            "force": True,
        },
    }
    for name, kwargs in runs.items():
        with pytest.raises(errors.VcfVirtualError):
            vcfvirtual.index(storage_options=options, **kwargs)
        assert os.listdir(private_tmp) == [], name
    assert fs.cat_file(f"{bucket}/taken.json") == b"{}"
    # A run that works leaves none either.
    vcfvirtual.index(
        f"s3://{bucket}/in.bcf",
        refs_path=tmp_path / "ok.json",
        cache_path=f"s3://{bucket}/ok.cache",
        storage_options=options,
    )
    assert os.listdir(private_tmp) == []


# ------------------------------------------------------------------ relocate


@pytest.fixture
def relocatable(small_bcf, tmp_path):
    """A cache that is one file (bgzf); a cache made of parts moves with its folder, below."""
    refs, cache = tmp_path / "r.vcz.json", tmp_path / "r.cache.bcf"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=3, cache_layout="bgzf")
    return refs, cache


def relocate(*args):
    return CliRunner().invoke(main, ["relocate", *map(str, args)])


def template(refs):
    return json.loads(refs.read_text())["templates"]["cache"]


def test_relocate_to_a_local_folder_appends_the_cache_name(relocatable, tmp_path, small_bcf, monkeypatch):
    refs, cache = relocatable
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(cache, copy / cache.name)
    monkeypatch.chdir(tmp_path)
    for target in ("copy/", "copy"):  # relative, with or without the separator
        result = relocate(refs, target)
        assert result.exit_code == 0, result.output
        expected = f"file://{copy}/{cache.name}"
        assert template(refs) == expected
        assert expected in result.output  # the URL written, not the argument
    cache.unlink()
    assert our_positions(refs) == pysam_positions(small_bcf)


def test_relocate_moves_a_cache_made_of_parts_with_its_folder(tmp_path, small_bcf):
    """A folder of parts is the cache itself, not a folder to find the cache in; a folder
    holding it (or one named with a final /) gets the cache's name."""
    refs, cache = tmp_path / "p.vcz.json", tmp_path / "p.cache.columns"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=cache, variants_chunk_size=3)
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copytree(cache, copy / cache.name)
    for target in (copy / cache.name, copy, f"{copy}/"):
        result = relocate(refs, target)
        assert result.exit_code == 0, result.output
        assert template(refs) == f"file://{copy}/{cache.name}"
    shutil.rmtree(cache)
    assert our_positions(refs) == pysam_positions(small_bcf)


def test_relocate_refuses_a_url_naming_no_file(relocatable):
    refs, _ = relocatable
    before = refs.read_bytes()
    for url in ("http://127.0.0.1:9", "s3://bucket"):
        result = relocate(refs, url, "--no-check")
        assert result.exit_code == 1 and "names no file" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    assert refs.read_bytes() == before


def test_relocate_checks_the_target_unless_told_not_to(relocatable, tmp_path, cohort_bcf):
    refs, cache = relocatable
    before = refs.read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = relocate(refs, elsewhere)  # nothing there yet
    assert (
        result.exit_code == 1 and "cannot read the transcode cache" in result.output and "--no-check" in result.output
    )
    # Another BCF under the cache's name: not the cache the references were made with.
    shutil.copy(cohort_bcf, elsewhere / cache.name)
    result = relocate(refs, elsewhere)
    assert result.exit_code == 1 and "not the one these references were made with" in result.output
    assert refs.read_bytes() == before
    with pytest.raises(errors.StaleCacheError):
        relocate_mod.relocate_file(refs, f"file://{elsewhere}/")
    # Not uploaded yet: pointing at it anyway is allowed when asked for.
    result = relocate(refs, "https://example.org/data/", "--no-check")
    assert result.exit_code == 0 and template(refs) == f"https://example.org/data/{cache.name}"


def test_relocate_output_never_replaces_a_users_file(relocatable, tmp_path):
    refs, _ = relocatable
    user = tmp_path / "notes.json"
    user.write_text('{"mine": true}')
    result = relocate(refs, tmp_path, "-o", user)
    assert result.exit_code == 1 and "not a vcfvirtual" in result.output
    assert user.read_text() == '{"mine": true}'
    link = tmp_path / "link.json"
    link.symlink_to(user)
    result = relocate(refs, tmp_path, "-o", link)
    assert result.exit_code == 1 and "symbolic link" in result.output
    assert link.is_symlink() and user.read_text() == '{"mine": true}'
    # Rewriting in place through a link to the references: the link is not replaced by a file.
    refs_link = tmp_path / "refs-link.json"
    refs_link.symlink_to(refs)
    before = refs.read_bytes()
    result = relocate(refs_link, tmp_path)
    assert result.exit_code == 1 and "symbolic link" in result.output
    assert refs_link.is_symlink() and refs.read_bytes() == before


# ------------------------------------------------------------------ full disk


def _full_disk_for(module, monkeypatch, marker: str):
    """``open`` in ``module`` writes to /dev/full for paths containing ``marker``."""
    real_open = open

    def fake_open(path, mode="r", *args, **kwargs):
        if "w" in mode and marker in os.fspath(path):
            return real_open("/dev/full", mode, *args, **kwargs)
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(module, "open", fake_open, raising=False)


def _one_line_error(result, *needles):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("layout", ["bgzf", "raw"])
def test_full_disk_writing_the_cache_is_one_line(cohort_bcf, tmp_path, monkeypatch, layout):
    _full_disk_for(outputs, monkeypatch, ".cache.bcf.tmp-")
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(
        main,
        [
            "index",
            str(cohort_bcf),
            "-o",
            str(out / "c.json"),
            "--cache",
            str(out / "c.cache.bcf"),
            "--cache-layout",
            layout,
        ],
    )
    _one_line_error(result, str(out / "c.cache.bcf"), "No space left", "free disk space")
    assert os.listdir(out) == []


def test_full_disk_writing_the_references_is_one_line(small_bcf, tmp_path, monkeypatch):
    _full_disk_for(kerchunk, monkeypatch, ".c.json.tmp-")
    result = CliRunner().invoke(
        main, ["index", str(small_bcf), "-o", str(tmp_path / "c.json"), "--cache", str(tmp_path / "c.cache.bcf")]
    )
    _one_line_error(result, str(tmp_path / "c.json"), "No space left", "--output")
    assert os.listdir(tmp_path) == []


def test_full_disk_in_raw_partition_workers_is_one_line(small_bcf, data_dir, tmp_path, monkeypatch):
    from vcfvirtual.scan import scanner as scan_mod

    second = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS[:4]), data_dir / "second.bcf")
    _full_disk_for(scan_mod, monkeypatch, ".tmp-parts-")
    out = tmp_path / "out"
    out.mkdir()
    # Two files on one worker: partitions scanned in this process, where open is replaced.
    result = CliRunner().invoke(
        main, ["index", str(small_bcf), str(second), "-o", str(out / "c.json"), "--cache-layout", "raw"]
    )
    _one_line_error(result, str(out / "c.cache.bcf"), "No space left")
    assert os.listdir(out) == []


def test_full_disk_in_relocate_output_is_one_line(relocatable, tmp_path, monkeypatch):
    refs, _ = relocatable
    _full_disk_for(relocate_mod, monkeypatch, ".moved.json.tmp-")
    result = relocate(refs, tmp_path, "-o", tmp_path / "moved.json")
    _one_line_error(result, "moved.json", "No space left")
    assert not [p for p in tmp_path.iterdir() if "moved" in p.name]


def test_full_disk_converting_a_vcf_blames_the_output_not_the_vcf(tmp_path, monkeypatch):
    vcf = tmp_path / "in.vcf"
    vcf.write_text(bcfdata.vcf_text(bcfdata.SMALL_RECORDS))
    real = transcode.vcf_to_bcf
    monkeypatch.setattr(transcode, "vcf_to_bcf", lambda vcf_path, bcf_path: real(vcf_path, "/dev/full"))
    result = CliRunner().invoke(main, ["index", str(vcf), "-o", str(tmp_path / "v.json")])
    _one_line_error(result, "cannot write the BCF converted from", "free disk space")
    assert "cannot convert this VCF" not in result.output
    # A VCF that is bad (an undeclared INFO key: htslib refuses it) is still blamed, disk full or not.
    bad = tmp_path / "bad.vcf"
    bad.write_text(
        "##fileformat=VCFv4.3\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\nchr1\t1\t.\tA\tT\t.\t.\tXX=1\n"
    )
    result = CliRunner().invoke(main, ["index", str(bad), "-o", str(tmp_path / "b.json")])
    _one_line_error(result, str(bad), "htslib cannot convert this VCF")
