"""Store headers as htslib parsed them, kept on disk by digest, so a fresh process opening
a store it opened before needs no pysam (importing it and parsing through a temporary
file cost ~50 ms of a ~100 ms open).

What is kept is exactly what :func:`vcfvirtual.bcf.header.parse_header_text` returned for
one header text, under a key that changes whenever that result could: a BLAKE2b digest
of the text itself, of the parser's own source (``bcf/header.py``) and of pysam's version
file (which names its htslib). An entry is used only when the key it records is the key
asked for; anything else (another key, a file that does not parse, a field missing) is
ignored and the header parsed again, so a stale or damaged entry costs a parse, never a
wrong check. Beside them, under a digest of a whole header text, the verdict that its
#CHROM line names each sample once (our rule, htslib's too), so that 100,000 names are
not put in a set at every open. The folder is the user's own, as trusted as their home directory:
``$VCFVIRTUAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/vcfvirtual``, else ``~/.cache/vcfvirtual``;
when it cannot be written, every open parses (as before).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..bcf.header import BCFHeader, FieldDef

# Bumped when the entries' layout changes: an entry of another format is never read.
FORMAT = 1
ENV = "VCFVIRTUAL_CACHE_DIR"


def cache_dir() -> Path:
    """The folder holding the entries (``headers/`` below the user's vcfvirtual cache)."""
    root = os.environ.get(ENV)
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = os.path.join(xdg, "vcfvirtual") if xdg else os.path.join(os.path.expanduser("~"), ".cache", "vcfvirtual")
    return Path(root) / "headers"


@functools.cache
def _parser_digest() -> bytes:
    """What the parse of a text depends on besides the text: our parser's source and
    pysam's version file (its htslib's version too), read without importing either."""
    h = hashlib.blake2b(f"vcfvirtual-header-cache-{FORMAT}".encode(), digest_size=32)
    for module, name in (("vcfvirtual.bcf.header", None), ("pysam", "version.py")):
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
        if origin is None:
            h.update(b"\x00missing")
            continue
        path = os.path.join(os.path.dirname(origin), name) if name else origin
        try:
            h.update(Path(path).read_bytes())
        except OSError:
            h.update(b"\x00unreadable")
    return h.digest()


def key_of(text: str) -> str:
    """The entry's key for header ``text``, as parsed by this parser and this htslib."""
    h = hashlib.blake2b(_parser_digest(), digest_size=32)
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def load(text: str) -> BCFHeader | None:
    """The header kept for ``text`` (its ``text`` field ``text``), or None when there is
    none usable: no entry, or one that does not record this key or does not read back."""
    key = key_of(text)
    try:
        entry = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
        return None
    try:
        return _from_json(entry["header"], text)
    except (KeyError, TypeError, ValueError):
        return None


def store(text: str, header: BCFHeader) -> None:
    """Keep ``header``, parsed from ``text``, for the next process; written whole (a
    temporary renamed over the name), or not at all when the folder cannot be written."""
    key = key_of(text)
    _write(cache_dir() / f"{key}.json", {"format": FORMAT, "key": key, "header": _to_json(header)})


def _samples_key(text: str) -> str:
    """The key of the verdict that ``text``'s #CHROM line names each sample once (our rule,
    as htslib's: a pure function of the text, whatever parses it)."""
    h = hashlib.blake2b(f"vcfvirtual-distinct-samples-{FORMAT}".encode(), digest_size=32)
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def samples_distinct(text: str) -> bool:
    """Whether a process found before that header ``text`` names each sample once (a
    100,000-sample set costs ~25 ms, the digest of its text ~2 ms); False when unknown."""
    key = _samples_key(text)
    try:
        entry = json.loads((cache_dir() / f"samples-{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(entry, dict) and entry.get("format") == FORMAT and entry.get("key") == key


def mark_samples_distinct(text: str) -> None:
    """Keep the verdict that ``text`` names each sample once (checked by the caller)."""
    key = _samples_key(text)
    _write(cache_dir() / f"samples-{key}.json", {"format": FORMAT, "key": key})


def _write(path: Path, entry: dict[str, Any]) -> None:
    """``entry`` as JSON at ``path``, whole (a temporary renamed over the name), or not at
    all when the folder cannot be written."""
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


def _to_json(header: BCFHeader) -> dict[str, Any]:
    """Every field but the text (the key stands for it)."""
    out = {f.name: getattr(header, f.name) for f in dataclasses.fields(header) if f.name != "text"}
    out["info"] = [dataclasses.asdict(f) for f in header.info]
    out["formats"] = [dataclasses.asdict(f) for f in header.formats]
    return out


def _from_json(d: dict[str, Any], text: str) -> BCFHeader:
    """The header :func:`_to_json` wrote, with ``text`` put back; a field missing or of
    another shape raises (KeyError, TypeError, ValueError)."""
    names = {f.name for f in dataclasses.fields(BCFHeader)} - {"text"}
    if set(d) != names:
        raise ValueError(f"fields {sorted(d)} are not BCFHeader's")
    values: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v for name, v in d.items()}
    values["info"] = tuple(FieldDef(**f) for f in d["info"])
    values["formats"] = tuple(FieldDef(**f) for f in d["formats"])
    return BCFHeader(text=text.rstrip("\x00"), **values)  # as the parse strips it
