"""What every chunk read through a checked store is held to: the reference names one of the
cache's files, within its size as indexed.

Apart from ``checks.py`` (the checks before reading, ~4 ms to import in a fresh process) so
that an open that skips those checks, as one of references opened before does
(:mod:`~vcfvirtual.refs.opened`), still guards each read and imports only this.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np

from ..errors import UntrustedReferenceError

PathLike = str | os.PathLike[str] | None

UNTRUSTED_HINT = "open_store(..., check=False) reads them as plain Kerchunk would, if you trust their author"


# A NamedTuple: made in ~0.1 ms at import, where a dataclass's generated methods cost
# ~0.3 ms each of every fresh open (docs/benchmarks.md, "open_store").
class ChunkTargets(NamedTuple):
    """What a chunk reference may name: each URL it may hold -> (the file it names, the
    file's size as indexed). The cache's URL (or each part's, ``<cache>/part-000003``),
    and their template forms (``{{cache}}``, ``{{cache}}/part-000003``) when the references
    define the template as the declared cache. A name not in ``files`` is refused whatever
    it resolves to (``{{cache}}/../x``, ``{{cache}}/part-000001/..``, another path)."""

    files: dict[str, tuple[str, int]]
    cache_url: str


def check_chunk_ref(key: str, value: list[Any], targets: ChunkTargets, refs_path: PathLike) -> None:
    """One ``[url, offset, length]`` chunk reference must stay inside the cache: its URL is
    one of ``targets`` (the cache's, a part's, or their template forms), its range inside
    that file's size as indexed."""
    # Most references are well-formed: one lookup and a few tests each (a few hundred ns,
    # where the checks below with their messages cost microseconds: ~2 ms per open of
    # 1,000 chunks).
    target = targets.files.get(value[0]) if len(value) == 3 and type(value[0]) is str else None
    if (
        target is not None
        and type(value[1]) is int
        and type(value[2]) is int
        and value[1] >= 0
        and value[2] >= 0
        and value[1] + value[2] <= target[1]
    ):
        return
    if len(value) != 3:
        raise UntrustedReferenceError(
            refs_path, f"reference {key!r} is not [url, offset, length]: {value!r}"[:300], hint=UNTRUSTED_HINT
        )
    url, offset, length = value
    if target is None:
        raise UntrustedReferenceError(
            refs_path,
            f"reference {key!r} points at {str(url)[:200]!r}, not at the cache {targets.cache_url} the references "
            "declare" + ("" if targets.cache_url in targets.files else " (one of the parts it lists)"),
            hint=UNTRUSTED_HINT,
        )
    for what, x in (("offset", offset), ("length", length)):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0:
            raise UntrustedReferenceError(
                refs_path, f"reference {key!r} has {what} {x!r}, not a byte count", hint=UNTRUSTED_HINT
            )
    file_url, size = target
    where = "the cache's" if file_url == targets.cache_url else f"the cache part {file_url.rsplit('/', 1)[-1]}'s"
    if int(offset) + int(length) > size:
        raise UntrustedReferenceError(
            refs_path,
            f"reference {key!r} reads bytes {offset}..{int(offset) + int(length)}, past {where} {size} bytes",
            hint=UNTRUSTED_HINT,
        )
