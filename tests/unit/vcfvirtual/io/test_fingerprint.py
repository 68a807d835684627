"""Fingerprints tell a changed file from the one indexed: size, mtime and a blake2b of
sampled windows, whose expected value is computed here with hashlib from the windows the
module documents (the whole of a small file)."""

from __future__ import annotations

import hashlib
import os

import pytest

from vcfvirtual.io import fingerprint
from vcfvirtual.io.fingerprint import Fingerprint, NotRegularFileError


def blake2b_whole(data: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)
    return h.hexdigest()


def test_small_file_is_hashed_whole(tmp_path):
    path = tmp_path / "f"
    data = os.urandom(5000)
    path.write_bytes(data)
    assert fingerprint.sampled_digest(path) == blake2b_whole(data)
    fp = Fingerprint.of(path)
    st = os.stat(path)
    assert (fp.size, fp.mtime_ns, fp.digest) == (5000, st.st_mtime_ns, blake2b_whole(data))


def test_large_file_hashes_head_windows_and_tail(tmp_path):
    path = tmp_path / "big"
    size = fingerprint.HEAD_BYTES + 40 * fingerprint.WINDOW_BYTES + 123
    data = os.urandom(size)
    path.write_bytes(data)
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    h.update(data[: fingerprint.HEAD_BYTES])
    span = size - fingerprint.HEAD_BYTES - fingerprint.WINDOW_BYTES
    for i in range(fingerprint.WINDOWS):
        at = fingerprint.HEAD_BYTES + span * i // fingerprint.WINDOWS
        h.update(data[at : at + fingerprint.WINDOW_BYTES])
    h.update(data[-fingerprint.WINDOW_BYTES :])
    assert fingerprint.sampled_digest(path) == h.hexdigest()
    # A byte changed between windows is not seen; one inside the head is.
    between = fingerprint.HEAD_BYTES + fingerprint.WINDOW_BYTES + 10
    changed = bytearray(data)
    changed[between] ^= 0xFF
    path.write_bytes(bytes(changed))
    assert fingerprint.sampled_digest(path) == h.hexdigest()
    changed[10] ^= 0xFF
    path.write_bytes(bytes(changed))
    assert fingerprint.sampled_digest(path) != h.hexdigest()


def test_differences_name_what_changed(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a" * 100)
    fp = Fingerprint.of(path)
    assert fp.differences(path) == [] and fp.same_stat(path)
    os.utime(path, ns=(1, 1))  # touched: same contents
    assert fp.differences(path) == [] and not fp.same_stat(path)
    path.write_bytes(b"b" * 100)
    assert "contents changed" in fp.differences(path, always_hash=True)[0]
    path.write_bytes(b"a" * 99)
    assert "99 bytes" in fp.differences(path)[0]


def test_json_round_trip_and_a_foreign_digest_kind(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    fp = Fingerprint.of(path)
    assert Fingerprint.from_json(fp.to_json()) == fp
    other = {**fp.to_json(), "digest_kind": "something-else"}
    assert Fingerprint.from_json(other).digest is None  # not comparable: size and mtime only


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFileError):
        Fingerprint.of(fifo)
    assert "not a regular file" in Fingerprint(1, 1, "x").differences(tmp_path)[0]
