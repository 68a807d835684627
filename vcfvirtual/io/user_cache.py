"""The user's own folder of things a fresh process would otherwise work out again: store
headers as htslib parsed them (``refs/header_cache``), the verdicts of reference checks
(``refs/verdicts``), the sampled digests of remote objects already verified
(``io/remote``).

The folder is as trusted as the user's home directory: ``$VCFVIRTUAL_CACHE_DIR``, else
``$XDG_CACHE_HOME/vcfvirtual``, else ``~/.cache/vcfvirtual``, one subfolder per kind of
entry. Every entry is a JSON object recording its format and the key it was written
under; a reader uses it only when both are the ones it asks for, so an entry that is
damaged, of another format or of another key costs the work it would have saved, never
a wrong answer. When the folder cannot be written, nothing is kept and every process
works everything out again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import _json

ENV = "VCFVIRTUAL_CACHE_DIR"


def folder(kind: str) -> Path:
    """The subfolder ``kind`` (``headers``, ``verdicts``...) of the user's vcfvirtual cache."""
    root = os.environ.get(ENV)
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = os.path.join(xdg, "vcfvirtual") if xdg else os.path.join(os.path.expanduser("~"), ".cache", "vcfvirtual")
    return Path(root) / kind


def read_entry(path: Path, format_: int, key: str) -> dict[str, Any] | None:
    """The entry at ``path`` when it is a JSON object of format ``format_`` recording
    ``key``; None for anything else (no file, unreadable, damaged, another format or key)."""
    try:
        entry = _json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != format_ or entry.get("key") != key:
        return None
    return entry


def write_entry(path: Path, entry: dict[str, Any]) -> None:
    """``entry`` as JSON at ``path``, whole (a temporary renamed over the name: a reader
    sees the old entry or the new one), or not at all when the folder cannot be written."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".entry-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, separators=(",", ":"))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def files_identity(tag: str, paths: Iterable[str | os.PathLike[str] | None]) -> bytes:
    """A BLAKE2b digest of ``tag`` and what identifies each file's contents without reading
    them: device, inode, size, modification and change times (ns). What a cached result
    depends on besides its input (our checking code, our header parser, pysam's version
    file); a version string is not enough, an editable install changes its code under one
    version. Any write to a file sets its change time to the clock's, which no ``utime`` can
    put back, so an edited file (or one replaced by a rename: another inode) never keys the
    same entries; a copy of an unchanged one does not either, and its result is made again.
    Reading the ~40 checking modules instead cost ~2.5 ms of every open. A path that is None
    (a module not installed) or cannot be stat'ed counts as missing."""
    h = hashlib.blake2b(tag.encode(), digest_size=32)
    for path in paths:
        try:
            st = os.stat(path) if path is not None else None
        except OSError:
            st = None
        if st is None:
            h.update(b"\x00missing")
            continue
        for value in stat_identity(st):
            h.update(value.to_bytes(16, "little", signed=True))
    return h.digest()


def stat_identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What identifies a file's contents in its stat, and changes with any write to it:
    (device, inode, size, modification ns, change ns)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def installed_file(module: str, name: str | None = None) -> str | None:
    """The source of ``module`` or, with ``name``, the file of that name beside it (pysam's
    ``version.py``), found without importing the module; None when it is not installed."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    if origin is None:
        return None
    return os.path.join(os.path.dirname(origin), name) if name else origin
