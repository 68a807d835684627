"""Local references opened before with every check passed, remembered by what identifies
their files, so that a later open of the same files skips the checks and what they read.

What a checked open of Kerchunk JSON with a local cache finds is a function of the
references' bytes, the cache's files, the source BCFs that are there (and which are not),
our checking code and, where a path is relative, the working directory; nothing else.
Each file's identity (device, inode, size, modification and change times:
:func:`identity`) changes with any write to it: the kernel sets the change time from its
own clock, which no ``utime`` puts back, and a replacement (a rename, ``cp -p``,
``rsync -t``) is another inode. So once an open passed every check,
the identities of all those files are kept under the references' own identity and the
checking code's (:mod:`~vcfvirtual.refs.checking_code`); a later open that finds each
identity unchanged, and each source then absent still absent, parses the references and
opens the store at once: one ``stat`` per file instead of the sampled fingerprints, the
cache's header, the reference checks and the cache reads that back them (~25 ms of a
fresh process at 10,000 samples, where opening bio2zarr's store costs ~3 ms).

Change times come from a coarse clock (one tick, up to ~10 ms): a file written twice
within one tick can keep one identity, so what a check found is not kept while any of the
files changed less than :data:`RACY_SECONDS` before it started (git's "racily clean"
entries). The first open after indexing therefore checks in full; later ones are quick.

Like the fingerprints (:mod:`vcfvirtual.io.fingerprint`), this guards against a stale or
mismatched file, not a forger: whoever can set the system clock can rewrite a file under
its old identity. The entries live in ``opened/`` of the user's cache folder
(:mod:`vcfvirtual.io.user_cache`), as trusted as the home directory; the reads through
the store are still held to the cache's files and sizes (:mod:`~vcfvirtual.refs.guard`),
and each chunk to its CRC32 by the codec.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import stat
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from .. import _json
from ..io import user_cache
from . import checking_code
from .guard import ChunkTargets

logger = logging.getLogger(__name__)
checks_logger = logging.getLogger("vcfvirtual.refs.checks")  # htslib's warnings, as the full check logs them

# Bumped when the entries' layout changes: an entry of another format is never read.
FORMAT = 2

#: A file changed less than this long before a check started may change again under the
#: same identity (one tick of the kernel's file clock): what that check found is not kept.
RACY_SECONDS = 2.0

#: (device, inode, size, modification ns, change ns) of a regular file.
Identity = tuple[int, int, int, int, int]


def identity(path: str) -> Identity | None:
    """The identity of the regular file at ``path``; None when there is none (missing,
    unreadable, not a regular file, or a file system giving no inode numbers)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return _identity_of(st)


def _identity_of(st: os.stat_result) -> Identity | None:
    if not stat.S_ISREG(st.st_mode) or st.st_ino == 0:
        return None
    return user_cache.stat_identity(st)


@functools.cache
def _code_digest() -> bytes:
    return checking_code.identity(f"vcfvirtual-opened-{FORMAT}")


def _key(refs_path: str, refs_identity: Identity) -> str:
    """The key of what an open of the references at ``refs_path`` (of ``refs_identity``)
    found (the working directory, which relative paths depend on, is in the entry)."""
    h = hashlib.blake2b(_code_digest(), digest_size=32)
    h.update(os.path.abspath(refs_path).encode("utf-8", "surrogatepass") + b"\x00")
    for value in refs_identity:
        h.update(value.to_bytes(16, "little", signed=True))
    return h.hexdigest()


def _entry_path(key: str) -> Any:
    return user_cache.folder("opened") / f"{key}.json"


# NamedTuples rather than dataclasses: this module is imported by every open, and a
# dataclass's generated methods cost ~0.3 ms each of a fresh process.
class Remembered(NamedTuple):
    """What an earlier open of the same files found: the references (parsed again from
    their unchanged bytes), what their chunks may name, and htslib's warnings about
    their header (logged again, as the full check logs them)."""

    refs: dict[str, Any]
    targets: ChunkTargets
    header_warnings: tuple[str, ...]


def recall(refs_path: str) -> Remembered | None:
    """The references at ``refs_path`` and what an earlier open found of them, when that
    open passed every check and none of the files it identified has changed since (each
    source then absent still absent); None otherwise, and the open checks in full."""
    if "://" in refs_path:
        return None
    try:
        fd = os.open(refs_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return None
    try:
        # The descriptor's own identity, before and after its bytes are read: the bytes
        # parsed are the ones the kept entry was found on.
        before = _identity_of(os.fstat(fd))
        if before is None:
            return None
        key = _key(refs_path, before)
        kept = _Entry.read(key)
        if kept is None or not kept.holds():
            return None
        with open(fd, "rb", closefd=False) as f:
            data = f.read()
        if len(data) != before[2] or _identity_of(os.fstat(fd)) != before:
            return None
    finally:
        os.close(fd)
    try:
        refs = _json.loads(data)
    except ValueError:
        return None
    if not isinstance(refs, dict) or not isinstance(refs.get("refs"), dict):
        return None
    for warning in kept.header_warnings:
        checks_logger.warning("%s: %s", "vcf_header", warning)
    logger.debug("%s: opened before, and none of its files changed since: checks skipped", refs_path)
    return Remembered(refs["refs"], ChunkTargets(kept.targets, kept.cache_url), kept.header_warnings)


class _Entry(NamedTuple):
    """One kept open: the identity of each file it checked, the sources it found absent,
    the chunk targets and htslib's header warnings."""

    files: tuple[tuple[str, Identity], ...]
    absent: tuple[str, ...]
    targets: dict[str, tuple[str, int]]
    cache_url: str
    header_warnings: tuple[str, ...]
    # The working directory, when a path above is relative (found from it); else None.
    cwd: str | None

    @staticmethod
    def read(key: str) -> _Entry | None:
        """The entry kept under ``key``; None for none, or one of another shape."""
        entry = user_cache.read_entry(_entry_path(key), FORMAT, key)
        if entry is None:
            return None
        try:
            files = tuple((str(p), _as_identity(i)) for p, i in entry["files"])
            targets = {str(u): (str(f), int(s)) for u, (f, s) in entry["targets"].items()}
            absent = tuple(str(p) for p in entry["absent"])
            warnings = tuple(str(w) for w in entry["header_warnings"])
            cache_url, cwd = entry["cache_url"], entry["cwd"]
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if not isinstance(cache_url, str) or not files or not (cwd is None or isinstance(cwd, str)):
            return None
        return _Entry(files, absent, targets, cache_url, warnings, cwd)

    def holds(self) -> bool:
        """Whether every file has its kept identity and every absent source is still absent
        (the full check's own test of a source being there: a regular file at its path),
        found from the same working directory if any path is relative."""
        if self.cwd is not None and self.cwd != os.getcwd():
            return False
        return all(identity(path) == kept for path, kept in self.files) and not any(
            os.path.isfile(path) for path in self.absent
        )

    def to_json(self, key: str) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "key": key,
            "files": [[path, list(ident)] for path, ident in self.files],
            "absent": list(self.absent),
            "targets": {url: list(target) for url, target in self.targets.items()},
            "cache_url": self.cache_url,
            "header_warnings": list(self.header_warnings),
            "cwd": self.cwd,
        }


def _as_identity(value: Any) -> Identity:
    if not isinstance(value, list) or len(value) != 5 or not all(type(x) is int for x in value):
        raise ValueError("not an identity")
    return (value[0], value[1], value[2], value[3], value[4])


class Witness:
    """The identities of what a full open checks, taken before the checks read anything
    and again after they passed; kept (:meth:`remember`) when nothing changed and no file
    changed within :data:`RACY_SECONDS` before the open started.

    :meth:`start` comes before the references are read; :meth:`watch` before the cache
    and sources are (it says whether what the checks find can be kept: if so, the open
    checks the inline chunks at once rather than on first read, as a later open that
    finds the entry checks nothing)."""

    def __init__(self, refs_path: str, refs_identity: Identity | None, started_ns: int) -> None:
        self._refs_path = refs_path
        self._refs_identity = refs_identity
        self._started_ns = started_ns
        self._files: dict[str, Identity] = {}  # set by watch when every file has one
        self._absent: tuple[str, ...] = ()

    @classmethod
    def start(cls, refs_path: str) -> Witness:
        """Before the references at ``refs_path`` are read."""
        ident = None if "://" in refs_path else identity(refs_path)
        return cls(refs_path, ident, time.time_ns())

    def watch(self, cache_files: Sequence[str], sources: Sequence[str]) -> bool:
        """Before the checks read ``cache_files`` and those of ``sources`` that are there:
        whether what they find can be kept."""
        present = [s for s in sources if os.path.isfile(s)]
        found = {path: identity(path) for path in [*cache_files, *present]}
        found[self._refs_path] = self._refs_identity  # as its bytes were read
        settled = self._started_ns - int(RACY_SECONDS * 1e9)
        files = {
            path: ident for path, ident in found.items() if ident is not None and max(ident[3], ident[4]) < settled
        }
        if len(files) < len(found):
            return False
        self._files = files
        self._absent = tuple(s for s in sources if s not in present)
        return True

    def remember(self, targets: ChunkTargets, header_warnings: Iterable[str]) -> None:
        """Keep what the checks found, when every file watched still has the identity it
        had before they read it (else nothing is kept)."""
        if not self._files or self._refs_identity is None:
            return
        if any(identity(path) != ident for path, ident in self._files.items()):
            return
        if any(os.path.isfile(path) for path in self._absent):
            return
        files = tuple(self._files.items())
        relative = any(not os.path.isabs(path) for path in [*self._files, *self._absent])
        key = _key(self._refs_path, self._refs_identity)
        entry = _Entry(
            files,
            self._absent,
            dict(targets.files),
            targets.cache_url,
            tuple(header_warnings),
            os.getcwd() if relative else None,
        )
        user_cache.write_entry(_entry_path(key), entry.to_json(key))
