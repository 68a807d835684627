"""refs/opened: an open of local references whose files (the references, the cache's, the
sources) are unchanged since an earlier open passed every check takes what that open found:
no check runs, and what is read is still htslib's. Any write to one of the files (its size
and mtime put back or not), a source that appears, other references, other checking code or
another working directory, and the open checks in full, refusing what the full check
refuses. Values are checked against htslib's reading of the BCF (pysam)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pysam
import pytest
import zarr

import vcfvirtual
from vcfvirtual.errors import StaleCacheError, UntrustedReferenceError
from vcfvirtual.io import user_cache
from vcfvirtual.refs import checked, opened

from .... import bcfdata
from .conftest import count_calls

RECORDS = [
    f"chr1\t{100 * (i + 1)}\t.\tA\tT\t30\tPASS\t.\tGT\t0|1\t1/1\t0/0\t{'./.' if i == 6 else '0|1'}" for i in range(8)
]
SAMPLES = ("S1", "S2", "S3", "S4")


@pytest.fixture(autouse=True)
def settled(monkeypatch, user_cache_root):
    """What an open finds is kept however recently its files were written (the suite's
    default keeps nothing: tests/conftest.py); each test has its own user cache folder."""
    monkeypatch.setattr(opened, "RACY_SECONDS", 0.0)
    return user_cache_root / "opened"


@pytest.fixture
def store(tmp_path) -> tuple[Path, Path]:
    """The BCF and the references ``vcfvirtual index`` wrote for it."""
    return indexed(tmp_path)


@pytest.fixture
def full_checks(monkeypatch, store):
    """The full opens run after the store was indexed (each checks the cache and the
    sources first)."""
    return count_calls(monkeypatch, checked, "check_cache")


def tick() -> None:
    """Past one tick of the kernel's file clock (<= 10 ms): a write after this has another
    change time than the files written before it, and an open started after it starts
    after they changed."""
    time.sleep(0.05)


def indexed(tmp_path: Path) -> tuple[Path, Path]:
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, samples=SAMPLES), tmp_path / "calls.bcf")
    refs_path = tmp_path / "calls.json"
    vcfvirtual.index(bcf, refs_path=refs_path, variants_chunk_size=4, samples_chunk_size=2, progress=False)
    tick()
    return bcf, refs_path


def read(refs_path: Path) -> tuple[list, list, list]:
    group = zarr.open_group(vcfvirtual.open_store(refs_path), mode="r", zarr_format=2)
    return (
        group["variant_position"][:].tolist(),
        group["call_genotype"][:].tolist(),
        [str(s) for s in group["sample_id"][:]],
    )


def htslib(bcf: Path) -> tuple[list, list, list]:
    with pysam.VariantFile(str(bcf)) as f:
        records = list(f)
        samples = list(f.header.samples)
    genotypes = [[[-1 if a is None else a for a in r.samples[s]["GT"]] for s in samples] for r in records]
    return [r.pos for r in records], genotypes, samples


def rewrite_keeping_size_and_mtime(path: Path, offset: int) -> None:
    """One byte changed in place, the file's size and modification time put back."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_second_open_of_unchanged_files_checks_nothing_and_reads_htslibs_values(
    tmp_path, store, full_checks, settled
):
    bcf, refs_path = store
    expected = htslib(bcf)
    assert read(refs_path) == expected
    assert len(full_checks) == 1 and len(list(settled.glob("*.json"))) == 1
    assert read(refs_path) == expected
    assert len(full_checks) == 1  # taken as kept


def test_a_fresh_process_taking_it_imports_none_of_the_checks(tmp_path):
    """The second process opens and reads without importing the checks' modules (~10 ms of
    a fresh process), and reads htslib's positions."""
    bcf, refs_path = indexed(tmp_path)
    script = (
        "import sys, zarr, vcfvirtual\n"
        "from vcfvirtual.refs import opened\n"
        "opened.RACY_SECONDS = 0.0\n"
        f"g = zarr.open_group(vcfvirtual.open_store({str(refs_path)!r}), mode='r', zarr_format=2)\n"
        "print(g['variant_position'][:].tolist())\n"
        "names = ('vcfvirtual.refs.checks', 'vcfvirtual.refs.checked', 'vcfvirtual.manifests.provenance')\n"
        "print(sorted(m for m in names if m in sys.modules))\n"
    )
    env = {**os.environ, user_cache.ENV: str(tmp_path / "fresh-cache")}
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env).stdout
        for _ in range(2)
    ]
    positions = str(htslib(bcf)[0])
    checks_modules = "['vcfvirtual.manifests.provenance', 'vcfvirtual.refs.checked', 'vcfvirtual.refs.checks']"
    assert runs == [f"{positions}\n{checks_modules}\n", f"{positions}\n[]\n"]


def test_a_cache_rewritten_under_its_size_and_mtime_is_refused(tmp_path, store, full_checks):
    _, refs_path = store
    read(refs_path)
    tick()
    part = bcfdata.cache_file(tmp_path / "calls.bcf.vcz.cache.columns")
    rewrite_keeping_size_and_mtime(part, os.path.getsize(part) // 2)
    with pytest.raises(StaleCacheError, match="does not match the references"):
        vcfvirtual.open_store(refs_path)
    assert len(full_checks) == 2


def test_a_source_rewritten_under_its_size_and_mtime_is_refused(tmp_path, store, full_checks):
    bcf, refs_path = store
    read(refs_path)
    tick()
    rewrite_keeping_size_and_mtime(bcf, 40)
    with pytest.raises(StaleCacheError, match="source BCF .* changed since it was indexed"):
        vcfvirtual.open_store(refs_path)


def test_a_source_absent_then_put_back_changed_is_refused(tmp_path, store, full_checks):
    """A collaborator without the BCF opens from the cache alone; the BCF that later
    appears at its path is checked, as a full open checks it."""
    bcf, refs_path = store
    moved = shutil.move(bcf, tmp_path / "elsewhere.bcf")
    assert read(refs_path)[0] == htslib(Path(moved))[0]
    assert read(refs_path)[0] == htslib(Path(moved))[0]
    assert len(full_checks) == 1  # the source still absent: taken as kept
    shutil.copyfile(moved, bcf)
    rewrite_keeping_size_and_mtime(bcf, 40)
    with pytest.raises(StaleCacheError, match="source BCF .* changed since it was indexed"):
        vcfvirtual.open_store(refs_path)


def test_references_edited_are_checked_in_full_and_refused(tmp_path, store, full_checks):
    _, refs_path = store
    read(refs_path)
    doc = json.loads(refs_path.read_text())
    doc["refs"]["variant_position/0"] = ["/etc/passwd", 0, 10]
    tick()
    refs_path.write_text(json.dumps(doc))
    with pytest.raises(UntrustedReferenceError, match="points at '/etc/passwd'"):
        vcfvirtual.open_store(refs_path)
    assert len(full_checks) == 2


def test_an_inline_chunk_edited_is_refused_by_the_open_that_would_keep_it(tmp_path, settled):
    """The open whose findings are kept checks the header arrays' inline chunks at once
    (a later open taking them checks nothing), rather than on their first read."""
    _, refs_path = indexed(tmp_path)
    doc = json.loads(refs_path.read_text())
    doc["refs"]["sample_id/0"] = "base64:AAAA"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    tick()
    with pytest.raises(UntrustedReferenceError, match="sample_id"):
        vcfvirtual.open_store(bad)
    assert not list(settled.glob("*.json"))


def test_other_checking_code_checks_in_full(tmp_path, store, full_checks, monkeypatch):
    bcf, refs_path = store
    read(refs_path)
    read(refs_path)
    assert len(full_checks) == 1
    monkeypatch.setattr(opened, "_code_digest", lambda: b"an edited checks.py")
    assert read(refs_path) == htslib(bcf)
    assert len(full_checks) == 2


def test_another_working_directory_checks_in_full_only_for_relative_paths(tmp_path, store, full_checks, monkeypatch):
    """The index records absolute paths: what was kept holds from anywhere. A relative source
    path (references written by hand) is found from the working directory: from another,
    another file (or none) may be there."""
    bcf, refs_path = store
    (tmp_path / "sub").mkdir()
    read(refs_path)
    monkeypatch.chdir(tmp_path / "sub")
    assert read(refs_path) == htslib(bcf)
    assert len(full_checks) == 1  # absolute paths: taken as kept
    doc = json.loads(refs_path.read_text())
    attrs = json.loads(doc["refs"][".zattrs"])
    attrs["vcfvirtual"]["sources"][0]["path"] = "calls.bcf"
    doc["refs"][".zattrs"] = json.dumps(attrs)
    relative = tmp_path / "relative.json"
    relative.write_text(json.dumps(doc))
    tick()
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert read(relative) == htslib(bcf)
    assert len(full_checks) == 2  # checked once (the source found and matching), then kept
    monkeypatch.chdir(tmp_path / "sub")
    assert read(relative) == htslib(bcf)
    assert len(full_checks) == 3  # from elsewhere: checked again (no source there)


def test_files_changed_just_before_the_open_are_not_kept(tmp_path, store, full_checks, settled, monkeypatch):
    monkeypatch.setattr(opened, "RACY_SECONDS", 600.0)
    bcf, refs_path = store
    for _ in range(2):
        assert read(refs_path) == htslib(bcf)
    assert len(full_checks) == 2 and not list(settled.glob("*.json"))


def test_a_damaged_or_foreign_entry_is_ignored(tmp_path, store, full_checks, settled):
    bcf, refs_path = store
    read(refs_path)
    (entry,) = settled.glob("*.json")
    good = json.loads(entry.read_text())
    damaged = [
        "{not json",
        json.dumps({**good, "format": opened.FORMAT + 1}),
        json.dumps({**good, "key": "0" * 64}),
        json.dumps({**good, "files": [["x", [1, 2, 3]]]}),
        json.dumps({**good, "files": []}),
        json.dumps({**good, "targets": {"a": 1}}),
        json.dumps({**good, "cache_url": 3}),
        json.dumps({**good, "cwd": 3}),
        json.dumps({**good, "cwd": "/somewhere/else"}),
        json.dumps({**good, "files": [[path, [0, 0, 0, 0, 0]] for path, _ in good["files"]]}),
    ]
    for text in damaged:
        entry.write_text(text)
        assert read(refs_path) == htslib(bcf)
    assert len(full_checks) == 1 + len(damaged)  # each: checked in full (and kept again)
    assert json.loads(entry.read_text()) == good


def test_every_array_of_a_store_opened_before_is_bio2zarrs(tmp_path, full_checks):
    """The store the quick open returns (its chunk targets, inline chunks and metadata
    taken as kept) reads as bio2zarr's conversion of the same BCF, array for array."""
    import xarray as xr

    from ....conftest import bio2zarr_convert, differences_from_bio2zarr

    bcf = bcfdata.small_bcf(tmp_path / "small.bcf")
    refs_path = tmp_path / "small.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs_path, progress=False)
    tick()
    vcfvirtual.open_store(refs_path)
    checks_before = len(full_checks)
    ds = xr.open_zarr(vcfvirtual.open_store(refs_path), consolidated=False)
    assert len(full_checks) == checks_before  # taken as kept
    assert not differences_from_bio2zarr(ds, bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 1000))
