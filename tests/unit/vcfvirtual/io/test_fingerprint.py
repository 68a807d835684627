"""Fingerprints tell a changed file from the one indexed: size, mtime and a digest of
sampled windows, whose expected value is computed here with hashlib and zlib from the
windows the module documents (the whole of a small file): blake2b of each window's CRC32
(new references), or of the windows' bytes (references written before)."""

from __future__ import annotations

import hashlib
import os
import zlib

import pytest

from vcfvirtual.io import fingerprint
from vcfvirtual.io.fingerprint import Fingerprint, NotRegularFileError


def expected_digest(size: int, windows: list[bytes], kind: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    for window in windows:
        h.update(zlib.crc32(window).to_bytes(4, "little") if kind == fingerprint.DIGEST else window)
    return h.hexdigest()


KINDS = [fingerprint.DIGEST, fingerprint.BLAKE2B_DIGEST]


@pytest.mark.parametrize("kind", KINDS)
def test_small_file_is_hashed_whole(tmp_path, kind):
    path = tmp_path / "f"
    data = os.urandom(5000)
    path.write_bytes(data)
    assert fingerprint.sampled_digest(path, kind) == expected_digest(5000, [data], kind)
    fp = Fingerprint.of(path, kind)
    st = os.stat(path)
    assert (fp.size, fp.mtime_ns, fp.digest, fp.kind) == (
        5000,
        st.st_mtime_ns,
        expected_digest(5000, [data], kind),
        kind,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_large_file_hashes_head_windows_and_tail(tmp_path, kind):
    path = tmp_path / "big"
    size = fingerprint.HEAD_BYTES + 40 * fingerprint.WINDOW_BYTES + 123
    data = os.urandom(size)
    path.write_bytes(data)
    windows = [data[: fingerprint.HEAD_BYTES]]
    span = size - fingerprint.HEAD_BYTES - fingerprint.WINDOW_BYTES
    for i in range(fingerprint.WINDOWS):
        at = fingerprint.HEAD_BYTES + span * i // fingerprint.WINDOWS
        windows.append(data[at : at + fingerprint.WINDOW_BYTES])
    windows.append(data[-fingerprint.WINDOW_BYTES :])
    expected = expected_digest(size, windows, kind)
    assert fingerprint.sampled_digest(path, kind) == expected
    # A byte changed between windows is not seen; one inside the head, or a window, is.
    between = fingerprint.HEAD_BYTES + fingerprint.WINDOW_BYTES + 10
    changed = bytearray(data)
    changed[between] ^= 0xFF
    path.write_bytes(bytes(changed))
    assert fingerprint.sampled_digest(path, kind) == expected
    changed[10] ^= 0xFF
    path.write_bytes(bytes(changed))
    assert fingerprint.sampled_digest(path, kind) != expected
    changed[10] ^= 0xFF
    changed[fingerprint.HEAD_BYTES + span // fingerprint.WINDOWS + 5] ^= 0x01
    path.write_bytes(bytes(changed))
    assert fingerprint.sampled_digest(path, kind) != expected


def test_new_fingerprints_record_the_crc32_kind_and_old_references_are_checked_with_blake2b(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert Fingerprint.of(path).to_json()["digest_kind"] == "crc32-sampled-v2"
    # References written before digest kinds were recorded hold blake2b digests of the bytes.
    old = {"size": 100, "mtime_ns": 0, "digest": expected_digest(100, [b"x" * 100], fingerprint.BLAKE2B_DIGEST)}
    assert Fingerprint.from_json(old).differences(path, always_hash=True) == []
    path.write_bytes(b"y" * 100)
    assert "contents changed" in Fingerprint.from_json(old).differences(path, always_hash=True)[0]


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
