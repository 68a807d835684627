"""refs/verdicts: what the reference checks found, kept by the references' digest so a
later open of the same bytes skips them; a later open of other bytes (an edited chunk, a
codec config) is refused as the full check refuses it, and what reads the cache still
runs at every open. Values are checked against htslib's reading of the BCF (pysam)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pysam
import pytest
import zarr

import vcfvirtual
from vcfvirtual.errors import UntrustedReferenceError
from vcfvirtual.io import user_cache
from vcfvirtual.refs import arrays, checked, checking_code, checks, verdicts
from vcfvirtual.refs.kerchunk import load_references

from .... import bcfdata
from .conftest import count_calls


@pytest.fixture(autouse=True)
def cache_dir(user_cache_root):
    """Each test its own folder (conftest.py), whose ``verdicts/`` this is."""
    return user_cache_root / "verdicts"


# Diploid calls in four samples, blocks of 4 records x 2 samples: every call of the first
# chunk complete (its mask chunks left out, as bio2zarr leaves them), a missing one later.
RECORDS = [
    f"chr1\t{100 * (i + 1)}\t.\tA\tT\t30\tPASS\t.\tGT\t0|1\t1/1\t0/0\t{'./.' if i == 6 else '0|1'}" for i in range(8)
]


def indexed(tmp_path: Path) -> tuple[Path, Path]:
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, samples=("S1", "S2", "S3", "S4")), tmp_path / "calls.bcf")
    refs_path = tmp_path / "calls.json"
    vcfvirtual.index(bcf, refs_path=refs_path, variants_chunk_size=4, samples_chunk_size=2, progress=False)
    return bcf, refs_path


@pytest.fixture
def store(tmp_path, cache_dir):
    """A store as a collaborator receives it: no verdict kept yet (the index keeps its own:
    removed here, so that these tests see a first open check in full)."""
    bcf, refs_path = indexed(tmp_path)
    for entry in cache_dir.glob("*.json"):
        entry.unlink()
    return bcf, refs_path


@pytest.fixture
def full_checks(monkeypatch):
    """A count of the full reference checks run (the verdicts found, not taken as kept)."""
    return count_calls(monkeypatch, verdicts, "reference_verdict")


def positions_and_genotypes(refs_path) -> tuple[list[int], list]:
    group = zarr.open_group(vcfvirtual.open_store(refs_path), mode="r", zarr_format=2)
    return group["variant_position"][:].tolist(), group["call_genotype"][:].tolist()


def htslib_positions_and_genotypes(bcf) -> tuple[list[int], list]:
    with pysam.VariantFile(str(bcf)) as f:
        records = list(f)
        samples = list(f.header.samples)
    genotypes = [[[-1 if a is None else a for a in r.samples[s]["GT"]] for s in samples] for r in records]
    return [r.pos for r in records], genotypes


def edited(refs_path: Path, edit, name="edited.json") -> Path:
    doc = json.loads(refs_path.read_text())
    edit(doc["refs"])
    out = refs_path.with_name(name)
    out.write_text(json.dumps(doc))
    return out


def test_a_second_open_takes_the_verdict_and_reads_htslibs_values(store, full_checks, cache_dir):
    bcf, refs_path = store
    expected = htslib_positions_and_genotypes(bcf)
    assert positions_and_genotypes(refs_path) == expected
    assert len(full_checks) == 1 and len(list(cache_dir.glob("*.json"))) == 1
    checks._parsed_header.cache_clear()
    assert positions_and_genotypes(refs_path) == expected
    assert len(full_checks) == 1  # taken as kept


def test_the_index_keeps_the_verdict_so_the_first_open_takes_it(tmp_path, full_checks, cache_dir):
    """vcfvirtual.index runs open_store's checks on what it wrote (the unpatched ones run
    inside it below only through check_store): the first open is then as a second one."""
    bcf, refs_path = indexed(tmp_path)
    assert len(full_checks) == 1 and len(list(cache_dir.glob("*.json"))) == 1  # the index's own check
    checks._parsed_header.cache_clear()
    assert positions_and_genotypes(refs_path) == htslib_positions_and_genotypes(bcf)
    assert len(full_checks) == 1  # the first open took it


def test_a_kept_verdict_returns_what_the_full_check_returns(store):
    """The deferred inline chunks (the store checks each when first read) are the full
    check's, with and without deferring."""
    _, refs_path = store
    refs = load_references(refs_path)
    cache = checks.declared_cache(refs, refs_path)
    full = checks.check_references(refs, refs_path, cache, defer_inline=True)
    assert full and {chunk.name for chunk in full.values()} <= set(arrays.PLAIN_ARRAYS)
    digest = "digest-of-these-bytes"
    assert checked.checked_cache(refs, refs_path, None, digest).inline == full  # found and kept
    assert verdicts.load(verdicts.key_of(digest, cache["url"])) is not None
    assert checked.checked_cache(refs, refs_path, None, digest).inline == full  # taken as kept
    assert checked.checked_cache(refs, refs_path, None, digest, defer=False).inline == {}


def edit_chunk_outside(refs):
    refs["variant_position/0"] = ["/etc/passwd", 0, 10]


def edit_codec_key(refs):
    meta = json.loads(refs["call_genotype/.zarray"])
    meta["filters"][-1]["key"] += 1
    refs["call_genotype/.zarray"] = json.dumps(meta)


def edit_inline_samples(refs):
    refs["sample_id/0"] = "base64:AAAA"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (edit_chunk_outside, "points at '/etc/passwd'"),
        (edit_codec_key, "GT key"),
    ],
)
def test_references_edited_after_their_verdict_was_kept_are_refused_alike(
    store, edit, message, full_checks, monkeypatch
):
    _, refs_path = store
    positions_and_genotypes(refs_path)  # the verdict on the written bytes, kept
    bad = edited(refs_path, edit)
    with pytest.raises(UntrustedReferenceError, match=message) as kept:
        vcfvirtual.open_store(bad)
    assert len(full_checks) == 2  # other bytes: checked in full
    # The same error as with nothing kept (a folder of its own).
    monkeypatch.setenv(user_cache.ENV, str(refs_path.parent / "another-cache"))
    with pytest.raises(UntrustedReferenceError) as fresh:
        vcfvirtual.open_store(bad)
    assert str(kept.value) == str(fresh.value) and "edited.json" in str(kept.value)


def test_an_inline_chunk_edited_is_still_refused_on_first_read(store):
    _, refs_path = store
    bad = edited(refs_path, edit_inline_samples)
    vcfvirtual.open_store(bad)  # keeps the verdict on these bytes: the keys pass
    group = zarr.open_group(vcfvirtual.open_store(bad), mode="r", zarr_format=2)  # taken as kept
    with pytest.raises(UntrustedReferenceError, match="sample_id"):
        group["sample_id"][:]


def test_a_damaged_or_foreign_entry_is_ignored(store, full_checks, cache_dir):
    bcf, refs_path = store
    positions_and_genotypes(refs_path)
    (entry,) = cache_dir.glob("*.json")
    good = json.loads(entry.read_text())
    for damage in (
        "{not json",
        json.dumps({**good, "format": verdicts.FORMAT + 1}),
        json.dumps({**good, "key": "0" * 64}),
        json.dumps({**good, "verdict": {"inline": 3}}),
        json.dumps({**good, "verdict": {**good["verdict"], "omitted_masks": [1]}}),
        json.dumps({**good, "verdict": {**good["verdict"], "inline": ["ab"]}}),
        json.dumps({**good, "verdict": {**good["verdict"], "inline": [["variant_position", "0"]]}}),
        json.dumps({**good, "verdict": {**good["verdict"], "inline": [["sample_id", "9"]]}}),
    ):
        entry.write_text(damage)
        checks._parsed_header.cache_clear()
        assert positions_and_genotypes(refs_path) == htslib_positions_and_genotypes(bcf)
    assert len(full_checks) == 9  # each damaged entry: checked in full (and kept again)
    assert json.loads(entry.read_text()) == good


def test_another_checking_code_keys_other_entries(store, full_checks, monkeypatch):
    _, refs_path = store
    positions_and_genotypes(refs_path)
    monkeypatch.setattr(verdicts, "_code_digest", lambda: b"an edited checks.py")
    positions_and_genotypes(refs_path)
    assert len(full_checks) == 2


def test_a_checking_module_rewritten_with_its_size_and_mtime_put_back_keys_other_entries(tmp_path):
    """The code digest is of the files' identities, not their bytes: a write the size and
    mtime of which are put back (os.utime) still changes the file's change time, which the
    kernel alone sets; a missing file counts as missing, not as an error."""
    module = tmp_path / "checks.py"
    module.write_text("REFUSE = True\n")
    paths = [str(module), None, str(tmp_path / "absent.py")]
    before = user_cache.files_identity("tag", paths)
    assert user_cache.files_identity("tag", paths) == before
    st = os.stat(module)
    # File times come from the kernel's coarse clock (one tick, <= 10 ms): the edit lands
    # in a later tick, as any edit after an open that keyed a verdict does.
    time.sleep(0.05)
    with open(module, "r+") as f:  # same size, same inode
        f.write("REFUSE = 0   \n")
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))
    edited = os.stat(module)
    assert (edited.st_size, edited.st_mtime_ns, edited.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert user_cache.files_identity("tag", paths) != before
    assert user_cache.files_identity("other tag", paths) != user_cache.files_identity("tag", paths)


def test_an_unwritable_folder_checks_every_open(store, full_checks, tmp_path, monkeypatch):
    bcf, refs_path = store
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(user_cache.ENV, str(blocker))  # verdicts/ cannot be made below a file
    for _ in range(2):
        assert positions_and_genotypes(refs_path) == htslib_positions_and_genotypes(bcf)
    assert len(full_checks) == 2


def test_what_reads_the_cache_runs_at_every_open(store, monkeypatch):
    """The left-out mask chunks' GT blocks and the last chunk's record count are the
    cache's bytes, not the references': checked with a verdict kept too."""
    _, refs_path = store
    refs = load_references(refs_path)
    cache = checks.declared_cache(refs, refs_path)
    assert checks.reference_verdict(refs, refs_path, cache).omitted_masks  # complete blocks: left out
    vcfvirtual.open_store(refs_path)
    monkeypatch.setattr(checks._GTBlockClaim, "holds", lambda self, fd, offset: False)
    with pytest.raises(UntrustedReferenceError, match="leaves out chunk"):
        vcfvirtual.open_store(refs_path)
    monkeypatch.undo()
    monkeypatch.setenv(user_cache.ENV, str(refs_path.parent / "user-cache"))
    monkeypatch.setattr(checks, "chunk_records", lambda *args: 1)
    with pytest.raises(UntrustedReferenceError, match="the cache's last chunk holds 1"):
        vcfvirtual.open_store(refs_path)


def test_htslibs_warnings_are_logged_with_a_verdict_kept_too(store, caplog):
    """A header line htslib drops (a second definition of INFO/DP) is logged by the full
    check and by the open that takes its verdict as kept."""
    _, refs_path = store
    refs = load_references(refs_path)
    attrs = json.loads(refs["refs"][".zattrs"])
    dp = '##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">\n'
    attrs["vcf_header"] = attrs["vcf_header"].replace("##FORMAT=", dp + "##FORMAT=", 1)
    refs["refs"][".zattrs"] = json.dumps(attrs)
    cache = checks.declared_cache(refs, refs_path)
    key = verdicts.key_of("digest-of-these-bytes", cache["url"])
    for _ in range(2):
        checks._parsed_header.cache_clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            verdicts.verdict_once(refs, refs_path, cache, key)
        assert [r.getMessage() for r in caplog.records if "defines INFO/DP again" in r.getMessage()]
    assert verdicts.load(key) is not None


def test_the_checking_modules_are_every_module_a_check_imports(store):
    """The verdicts' key covers the source of every module of ours a full open imports."""
    _, refs_path = store
    script = (
        "import sys, vcfvirtual.refs.open as o\n"
        f"o.open_store({str(refs_path)!r})\n"
        "for m in list(sys.modules.values()):\n"
        "    f = getattr(m, '__file__', None) or ''\n"
        "    if m.__name__.split('.')[0] in ('vcfvirtual', 'vcfvirtual_codec') and f.endswith('.py'):\n"
        "        print(f)\n"
    )
    env = {**os.environ, user_cache.ENV: str(refs_path.parent / "empty-cache")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    imported = {os.path.realpath(line) for line in run.stdout.splitlines()}
    kept = {os.path.realpath(f) for f in checking_code.checking_files() if f is not None}
    assert imported and imported <= kept, sorted(imported - kept)


def test_an_open_taking_the_verdict_imports_no_header_parser(store):
    """The full check's own modules (the header parser, the field map) stay unimported."""
    _, refs_path = store
    script = (
        "import sys, vcfvirtual\n"
        f"vcfvirtual.open_store({str(refs_path)!r})\n"
        "print(sorted(m for m in ('vcfvirtual.bcf.header', 'vcfvirtual.bcf.fields', 'pysam') if m in sys.modules))\n"
    )
    env = {**os.environ, user_cache.ENV: str(refs_path.parent / "fresh-cache")}
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env).stdout
        for _ in range(2)
    ]
    assert runs == ["['pysam', 'vcfvirtual.bcf.fields', 'vcfvirtual.bcf.header']\n", "[]\n"]
