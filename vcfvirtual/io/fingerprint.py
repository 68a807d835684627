"""Cheap fingerprints of files: size, mtime and a checksum of sampled windows.

The references record one for the source BCF and one for the cache, so a store whose
cache (or source) has changed since it was indexed is refused instead of decoded. Hashing
every byte of a terabyte cohort at every open would cost as much as reading it; checksums
of the start (the header and first records), the end and evenly spaced windows catch
rewrites, truncation, appends and re-indexing, and the size catches most of the rest.
What they cannot catch, a same-size change that falls only between windows, is caught in
the cache by each block's or segment's CRC32 when the chunk is read.

The check guards against a stale or mismatched file, not a forger: whoever can rewrite
the cache can rewrite it between the windows, sampled hash or not. So each window gets a
CRC32 (ISA-L's, ~50 GB/s) rather than a cryptographic hash (blake2b, ~1.2 GB/s, was most
of an open's time): a changed window passes with odds 2**-32. References written with
the earlier blake2b digest are still checked with blake2b.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from typing import BinaryIO

from isal import isal_zlib

HEAD_BYTES = 1 << 20  # the header (large with many samples) and the first records
WINDOW_BYTES = 64 * 1024
WINDOWS = 16  # evenly spaced between the head and the tail
DIGEST = "crc32-sampled-v2"  # what new fingerprints record
BLAKE2B_DIGEST = "blake2b-sampled-v1"  # what references written before it record
DIGEST_KINDS = (DIGEST, BLAKE2B_DIGEST)


class NotRegularFileError(OSError):
    """The path names a FIFO, device, socket or directory: reading it could block
    forever or never end, so it is never opened as a cache or source."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only, without blocking on anything else.

    A FIFO opened for reading waits for a writer; O_NONBLOCK returns at once, and the
    descriptor's own fstat (not a stat of the name, which could be swapped) decides."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"{path} is not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def sampled_digest(path: str | os.PathLike, kind: str = DIGEST) -> str:
    """The digest of the head, the last window and ``WINDOWS`` evenly spaced windows."""
    with open_regular(path) as f:
        return digest_of(f, os.fstat(f.fileno()).st_size, kind)


def digest_of(f: BinaryIO, size: int, kind: str = DIGEST) -> str:
    """The sampled digest of an open file of ``size`` bytes (see :func:`sampled_digest`).

    ``crc32-sampled-v2``: blake2b (16 bytes) of the size and each window's CRC32, 4 bytes
    little-endian each. ``blake2b-sampled-v1``: blake2b (16 bytes) of the size and the
    windows' bytes."""

    def read(offset: int, length: int) -> bytes:
        f.seek(offset)
        return f.read(length)

    return digest_of_windows(size, [read(offset, length) for offset, length in windows(size)], kind)


def digest_of_windows(size: int, data: list[bytes], kind: str = DIGEST) -> str:
    """The sampled digest of a file of ``size`` bytes from the bytes of its
    :func:`windows`, in their order (fetched however the caller reaches the file: a remote
    one's all at once)."""
    if kind not in DIGEST_KINDS:
        raise ValueError(f"unknown digest kind {kind!r}")
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    for window in data:
        h.update(isal_zlib.crc32(window).to_bytes(4, "little") if kind == DIGEST else window)
    return h.hexdigest()


def windows(size: int) -> list[tuple[int, int]]:
    """The (offset, length) windows the sampled digest of a ``size``-byte file reads."""
    if size <= HEAD_BYTES + (WINDOWS + 1) * WINDOW_BYTES:
        return [(0, size)]  # small files are hashed whole
    out = [(0, HEAD_BYTES)]
    span = size - HEAD_BYTES - WINDOW_BYTES
    for i in range(WINDOWS):
        out.append((HEAD_BYTES + span * i // WINDOWS, WINDOW_BYTES))
    out.append((size - WINDOW_BYTES, WINDOW_BYTES))
    return out


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What identifies a file's contents cheaply."""

    size: int
    mtime_ns: int
    digest: str | None = None  # None: the references record a digest of another kind, not comparable
    kind: str = DIGEST  # how ``digest`` was computed (one of DIGEST_KINDS)

    @classmethod
    def of(cls, path: str | os.PathLike[str], kind: str = DIGEST) -> Fingerprint:
        """The fingerprint of the file at ``path``, its digest of ``kind`` (to compare with
        one recorded in that kind)."""
        with open_regular(path) as f:
            st = os.fstat(f.fileno())
            return cls(size=st.st_size, mtime_ns=st.st_mtime_ns, digest=digest_of(f, st.st_size, kind), kind=kind)

    def to_json(self) -> dict:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "digest": self.digest, "digest_kind": self.kind}

    @classmethod
    def from_json(cls, d: dict) -> Fingerprint:
        # References written before digest kinds were recorded hold blake2b digests.
        kind = d.get("digest_kind", BLAKE2B_DIGEST)
        known = kind in DIGEST_KINDS
        return cls(
            size=int(d["size"]),
            mtime_ns=int(d.get("mtime_ns", 0)),
            digest=d.get("digest") if known else None,
            kind=kind if known else DIGEST,
        )

    def same_stat(self, path: str | os.PathLike[str]) -> bool:
        st = os.stat(path)
        return st.st_size == self.size and st.st_mtime_ns == self.mtime_ns

    def differences(self, path: str | os.PathLike[str], *, always_hash: bool = False) -> list[str]:
        """How the file at ``path`` differs from this fingerprint: [] when it matches.

        A file whose size and mtime are unchanged is taken as unchanged without reading
        it, unless ``always_hash``; otherwise the sampled hash decides, so a ``touch``
        alone is not a change."""
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return ["it is not a regular file (a FIFO, device or directory is never read)"]
        if st.st_size != self.size:
            return [f"it is {st.st_size} bytes, it was {self.size} when indexed"]
        if self.digest is None:
            return []
        if st.st_mtime_ns == self.mtime_ns and not always_hash:
            return []
        if sampled_digest(path, self.kind) != self.digest:
            return ["its contents changed (sampled hash differs) since it was indexed"]
        return []
