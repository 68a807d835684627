"""Icechunk write failures are one line, as JSON and Parquet ones are (issue 21, item 5).

A full disk is a real one: a tmpfs of ~1 MB, filled but for a few kB, mounted in a user
and mount namespace of the test's own (``unshare``), so neither root nor the host's
mounts are needed or touched. Skipped where the kernel allows no such namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vcfvirtual.errors import OutputWriteError
from vcfvirtual.refs.icechunk import storage_write_error

from .. import bcfdata

pytest.importorskip("icechunk")
UNSHARE = shutil.which("unshare")


def _namespaces_work() -> bool:
    if UNSHARE is None:
        return False
    probe = subprocess.run(
        [UNSHARE, "--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(not _namespaces_work(), reason="no user+mount namespace for a tmpfs")

# Mount a 1,060 kB tmpfs on $1, leave ~40 kB free, then index into it.
SCRIPT = """
set -e
mount -t tmpfs -o size=1060k tmpfs "$1"
head -c "$2" /dev/zero > "$1/filler"
shift 2
exec "$@"
"""


def _index_on_a_small_disk(tmp_path: Path, filler: int, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    bcf = bcfdata.fuzz_bcf(tmp_path / "seed.bcf")
    disk = tmp_path / "disk"
    disk.mkdir()
    listing = tmp_path / "listing"
    command = [sys.executable, "-m", "vcfvirtual.cli", "index", str(bcf), *args]
    # List the disk from inside the namespace, after the run: the tmpfs goes with it.
    wrapped = ["sh", "-c", f'"$@"; rc=$?; ls -A {disk} > {listing}; exit $rc', "run", *command]
    result = subprocess.run(
        [UNSHARE, "--user", "--map-root-user", "--mount", "sh", "-c", SCRIPT, "sh", str(disk), str(filler), *wrapped],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    return result, listing.read_text().split()


@needs_namespaces
def test_full_disk_writing_icechunk_references_is_one_line(tmp_path):
    disk = tmp_path / "disk"
    result, left = _index_on_a_small_disk(
        tmp_path, 1_040_000, "--format", "icechunk", "-o", str(disk / "out.icechunk"), "--cache", str(tmp_path / "c")
    )
    assert result.returncode == 1, result.stderr
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(disk / "out.icechunk") in lines[0] and "No space left on device" in lines[0], lines[0]
    assert "free disk space" in lines[0]
    assert left == ["filler"]  # no temporary repository left behind
    assert not (tmp_path / "c").exists()  # nor a cache for references that were never written


@needs_namespaces
def test_icechunk_references_written_when_the_disk_has_room(tmp_path):
    """The same run with room to spare succeeds: the failure above is the disk's."""
    disk = tmp_path / "disk"
    result, left = _index_on_a_small_disk(
        tmp_path, 0, "--format", "icechunk", "-o", str(disk / "out.icechunk"), "--cache", str(tmp_path / "c")
    )
    assert result.returncode == 0, result.stderr
    assert sorted(left) == ["filler", "out.icechunk"]


def test_an_icechunk_error_without_an_os_error_is_one_line_naming_it():
    error = storage_write_error(Path("x.icechunk"), "session error: something odd\n\ncontext:\n  at a.rs:1")
    assert isinstance(error, OutputWriteError)
    assert "\n" not in str(error) and "Icechunk says session error: something odd" in str(error)


def test_an_icechunk_os_error_gets_the_file_writers_words():
    error = storage_write_error(Path("x.icechunk"), "object store error: Unable to copy: (os error 13)\ncontext:")
    assert "Permission denied" in str(error) and "writable" in str(error)
