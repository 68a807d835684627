"""The names of a cache made of parts (the ``columns`` layout's folder of ``part-NNNNNN``
files): one definition, importable without numpy, below every layer that names a part
(outputs recognise a folder of parts, staging uploads one, readers resolve one)."""

from __future__ import annotations

PART_PREFIX = "part-"


def part_name(index: int) -> str:
    """The file name of one part of a cache made of parts (``columns``): ``part-000123``."""
    return f"{PART_PREFIX}{index:06d}"


def is_part_name(name: str) -> bool:
    """``part-`` and six or more ASCII digits: a name that stays inside the cache's folder."""
    digits = name[len(PART_PREFIX) :]
    return name.startswith(PART_PREFIX) and len(digits) >= 6 and digits.isascii() and digits.isdigit()


def part_url(cache_url: str, part: str) -> str:
    """Where readers find part ``part`` of the cache made of parts at ``cache_url`` (its
    folder): every reader and the references join them so, one ``/`` between."""
    return f"{cache_url}/{part}"
