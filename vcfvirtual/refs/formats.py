"""The references formats: one list, importable without numpy (the command line's
``--format`` choices are read from here at start-up)."""

from __future__ import annotations

import os
from typing import Literal

#: What :func:`vcfvirtual.index` writes: Kerchunk JSON, Kerchunk Parquet, an Icechunk repository.
RefsFormat = Literal["json", "parquet", "icechunk"]
#: Each format's default suffix.
REFS_SUFFIXES: dict[RefsFormat, str] = {"json": ".json", "parquet": ".parq", "icechunk": ".icechunk"}
REFS_FORMATS: tuple[RefsFormat, ...] = tuple(REFS_SUFFIXES)


def is_icechunk_repo(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an Icechunk repository (a folder holding ``repo``): asked by
    every open, so here rather than in :mod:`~vcfvirtual.refs.icechunk`, which only an
    Icechunk open needs."""
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "repo"))
