"""Store headers as htslib parsed them, kept on disk by digest, so a fresh process opening
a store it opened before needs no pysam (importing it and parsing through a temporary
file cost ~50 ms of a ~100 ms open).

What is kept is exactly what :func:`vcfvirtual.bcf.header.parse_header_text` returned for
one header text, under a key that changes whenever that result could: a BLAKE2b digest of
the text itself and of the identity of the parser's own source (``bcf/header.py``) and of
pysam's version file, which names its htslib
(:func:`~vcfvirtual.io.user_cache.files_identity`: any write to either changes it). An
entry is used only when the key it records is the key asked for; anything else (another
key, a file that does not parse, a field missing) is ignored and the header parsed again,
so a stale or damaged entry costs a parse, never a wrong check. Beside them, under a
digest of a whole header text, the verdict that its #CHROM line names each sample once
(our rule, htslib's too), so that 100,000 names are not put in a set at every open. The
folder is the user's own, as trusted as their home directory: ``$VCFVIRTUAL_CACHE_DIR``,
else ``$XDG_CACHE_HOME/vcfvirtual``, else ``~/.cache/vcfvirtual``; when it cannot be
written, every open parses (as before).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from pathlib import Path
from typing import Any

from ..bcf.header import BCFHeader, FieldDef
from ..io import user_cache
from ..io.user_cache import ENV

__all__ = ["ENV", "cache_dir", "key_of", "load", "mark_samples_distinct", "samples_distinct", "store"]

# Bumped when the entries' layout changes: an entry of another format is never read.
FORMAT = 1


def cache_dir() -> Path:
    """The folder holding the entries (``headers/`` below the user's vcfvirtual cache)."""
    return user_cache.folder("headers")


@functools.cache
def _parser_digest() -> bytes:
    """What the parse of a text depends on besides the text: our parser's source and
    pysam's version file (its htslib's version too), identified without importing either."""
    return user_cache.files_identity(f"vcfvirtual-header-cache-{FORMAT}", parser_files())


def parser_files() -> tuple[str | None, ...]:
    """Our header parser's source and pysam's version file (which names its htslib)."""
    return user_cache.installed_file("vcfvirtual.bcf.header"), user_cache.installed_file("pysam", "version.py")


def key_of(text: str) -> str:
    """The entry's key for header ``text``, as parsed by this parser and this htslib."""
    h = hashlib.blake2b(_parser_digest(), digest_size=32)
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def load(text: str) -> BCFHeader | None:
    """The header kept for ``text`` (its ``text`` field ``text``), or None when there is
    none usable: no entry, or one that does not record this key or does not read back."""
    key = key_of(text)
    entry = user_cache.read_entry(cache_dir() / f"{key}.json", FORMAT, key)
    if entry is None:
        return None
    try:
        return _from_json(entry["header"], text)
    except (KeyError, TypeError, ValueError):
        return None


def store(text: str, header: BCFHeader) -> None:
    """Keep ``header``, parsed from ``text``, for the next process; written whole (a
    temporary renamed over the name), or not at all when the folder cannot be written."""
    key = key_of(text)
    user_cache.write_entry(cache_dir() / f"{key}.json", {"format": FORMAT, "key": key, "header": _to_json(header)})


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
    return user_cache.read_entry(cache_dir() / f"samples-{key}.json", FORMAT, key) is not None


def mark_samples_distinct(text: str) -> None:
    """Keep the verdict that ``text`` names each sample once (checked by the caller)."""
    key = _samples_key(text)
    user_cache.write_entry(cache_dir() / f"samples-{key}.json", {"format": FORMAT, "key": key})


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
