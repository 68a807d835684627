"""The references formats: one list, importable without numpy (the command line's
``--format`` choices are read from here at start-up)."""

from __future__ import annotations

from typing import Literal

#: What :func:`vcfvirtual.index` writes: Kerchunk JSON, Kerchunk Parquet, an Icechunk repository.
RefsFormat = Literal["json", "parquet", "icechunk"]
#: Each format's default suffix.
REFS_SUFFIXES: dict[RefsFormat, str] = {"json": ".json", "parquet": ".parq", "icechunk": ".icechunk"}
REFS_FORMATS: tuple[RefsFormat, ...] = tuple(REFS_SUFFIXES)
