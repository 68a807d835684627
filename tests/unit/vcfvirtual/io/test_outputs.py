"""Outputs appear whole or not at all, under names a later run can clean up, and nothing
this tool did not write is ever replaced."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from vcfvirtual.errors import OutputExistsError, OutputWriteError
from vcfvirtual.io import outputs


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temporary_names_end_in_this_pid(tmp_path):
    out = tmp_path / "c.bcf"
    pid = os.getpid()
    assert outputs.temporary_name(out) == tmp_path / f".c.bcf.tmp-{pid}"
    assert outputs.temporary_name(out, "parts") == tmp_path / f".c.bcf.tmp-parts-{pid}"
    assert outputs.temporary_name(out, "vcf0") == tmp_path / f".c.bcf.tmp-vcf0-{pid}"


def test_atomic_file_appears_whole_and_fsynced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    out = tmp_path / "r.json"
    with outputs.atomic_file(out, "the references", "-o", mode="w") as f:
        f.write("{}")
        assert not out.exists()  # not under its name until complete
    assert out.read_text() == "{}" and synced
    assert os.listdir(tmp_path) == ["r.json"]


def test_atomic_file_replaces_an_output_whole(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(RuntimeError):
        with outputs.atomic_file(out, "the references", "-o", mode="w") as f:
            f.write("new, half written")
            raise RuntimeError("interrupted")
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["r.json"]
    with outputs.atomic_file(out, "the references", "-o", mode="w") as f:
        f.write("new")
    assert out.read_text() == "new" and os.listdir(tmp_path) == ["r.json"]


def test_a_failed_write_is_a_typed_error_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "c.bcf"
    real_open = open

    def full_disk(path, mode="r", *args, **kwargs):
        return real_open("/dev/full", mode, *args, **kwargs)

    with pytest.raises(OutputWriteError, match="No space left") as info:
        with outputs.atomic_file(out, "the cache", "cache_path=", opener=full_disk) as f:
            f.write(b"x" * 100_000)
    assert "free disk space" in info.value.hint and "cache_path=" in info.value.hint
    assert os.listdir(tmp_path) == []


def test_atomic_output_refuses_an_existing_output_without_force(tmp_path):
    out = tmp_path / "c.bcf"
    out.write_bytes(b"mine")
    with pytest.raises(OutputExistsError):
        with outputs.atomic_output(out, force=False):
            pass
    assert out.read_bytes() == b"mine"


def test_atomic_output_removes_a_directory_written_before_an_error(tmp_path):
    out = tmp_path / "refs.parq"
    with pytest.raises(KeyboardInterrupt):
        with outputs.atomic_output(out, force=True) as tmp:
            tmp.mkdir()
            (tmp / "part.0").write_bytes(b"x")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("thing", ["text file", "directory", "symlink"])
def test_foreign_outputs_are_never_replaced(tmp_path, thing):
    path = tmp_path / "c.vcz.cache.bcf"
    if thing == "text file":
        path.write_text("my notes")
    elif thing == "directory":
        path.mkdir()
    else:
        target = tmp_path / "target"
        target.write_bytes(b"BCF\x02\x02")
        path.symlink_to(target)
    for kind in (outputs.CACHE, outputs.REFS):
        with pytest.raises(OutputExistsError, match="not a vcfvirtual|symbolic link"):
            outputs.refuse_foreign_output(path, kind, force=True, option="cache_path=")
    assert os.path.lexists(path)


def test_our_own_outputs_are_replaced_only_with_force(tmp_path):
    cache = tmp_path / "c.bcf"
    cache.write_bytes(b"BCF\x02\x02" + bytes(20))  # an uncompressed BCF, as the BCF spec begins one
    with pytest.raises(OutputExistsError, match="already exists"):
        outputs.refuse_foreign_output(cache, outputs.CACHE, force=False, option="cache_path=")
    outputs.refuse_foreign_output(cache, outputs.CACHE, force=True, option="cache_path=")
    refs = tmp_path / "r.json"
    refs.write_text('{"refs": {".zattrs": "{\\"vcfvirtual\\": {}}"}}')
    outputs.refuse_foreign_output(refs, outputs.REFS, force=True, option="refs_path=")


def test_stale_temporaries_of_dead_runs_only_are_removed(tmp_path):
    out = tmp_path / "c.bcf"
    out.write_bytes(b"current")
    pid = dead_pid()
    dead = [tmp_path / f".c.bcf.tmp-{pid}", tmp_path / f".c.bcf.tmp-vcf0-{pid}"]
    for p in dead:
        p.write_bytes(b"partial")
    parts = tmp_path / f".c.bcf.tmp-parts-{pid}"
    parts.mkdir()
    (parts / "part-000000").write_bytes(b"x")
    live = outputs.temporary_name(out)  # this process: a run still going
    live.write_bytes(b"in progress")
    removed = outputs.remove_stale_temporaries(out)
    assert sorted(removed) == sorted([*dead, parts])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c.bcf", live.name])


def test_a_set_aside_output_is_put_back_when_nothing_replaced_it(tmp_path):
    out = tmp_path / "refs.parq"
    aside = tmp_path / f".refs.parq.old-{dead_pid()}"
    aside.mkdir()
    (aside / "data").write_bytes(b"only copy")
    assert outputs.remove_stale_temporaries(out) == []
    assert (out / "data").read_bytes() == b"only copy" and not aside.exists()


def test_write_hint_names_the_option_for_a_full_disk():
    assert "cache_path=" in outputs.write_hint(OSError(errno.ENOSPC, "full"))
    assert "--cache" in outputs.write_hint(OSError(errno.EDQUOT, "quota"), "--cache")
    assert "writable" in outputs.write_hint(OSError(errno.EACCES, "denied"))


def _folder(path, text):
    path.mkdir()
    (path / "part-000000").write_text(text)
    return path


def test_outputs_placed_together_replace_both_and_leave_nothing_aside(tmp_path):
    """A cache folder and the references file naming it, old ones standing: both new ones
    in place, the old folder deleted once both are in, no set-aside or temporary left."""
    cache, refs = _folder(tmp_path / "c", "old"), tmp_path / "r.json"
    refs.write_text("old")
    new_cache, new_refs = _folder(tmp_path / ".c.tmp-1", "new"), tmp_path / ".r.json.tmp-1"
    new_refs.write_text("new")
    outputs.replace_outputs([(new_cache, cache), (new_refs, refs)])
    assert (cache / "part-000000").read_text() == refs.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "r.json"]


def test_a_failure_part_way_puts_back_what_was_placed(tmp_path):
    """The references' rename fails (here: their temporary is missing) after the cache was
    placed: the old cache is back under its name, the new one under its temporary name,
    the old references untouched."""
    cache, refs = _folder(tmp_path / "c", "old"), tmp_path / "r.json"
    refs.write_text("old")
    new_cache = _folder(tmp_path / ".c.tmp-1", "new")
    with pytest.raises(FileNotFoundError):
        outputs.replace_outputs([(new_cache, cache), (tmp_path / ".r.json.tmp-1", refs)])
    assert (cache / "part-000000").read_text() == refs.read_text() == "old"
    assert (new_cache / "part-000000").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".c.tmp-1", "c", "r.json"]


def test_an_interrupt_before_placing_places_nothing(tmp_path, monkeypatch):
    """A signal recorded before the outputs are placed: none is (the run is interrupted)."""
    from vcfvirtual import interrupts

    cache, refs = _folder(tmp_path / "c", "old"), tmp_path / "r.json"
    refs.write_text("old")
    new_cache, new_refs = _folder(tmp_path / ".c.tmp-1", "new"), tmp_path / ".r.json.tmp-1"
    new_refs.write_text("new")
    monkeypatch.setattr(interrupts, "_pending", 15)
    with pytest.raises(interrupts.Interrupted):
        outputs.replace_outputs([(new_cache, cache), (new_refs, refs)])
    assert (cache / "part-000000").read_text() == refs.read_text() == "old"
