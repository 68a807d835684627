"""The cache layouts' names: one list, importable without numpy (the command line's
``--cache-layout`` choices are read from here at start-up)."""

from __future__ import annotations

from typing import Literal, get_args

#: A transcode cache layout (:class:`vcfvirtual.cache.base.CacheLayout`): ``raw``, the
#: uncompressed stream; ``bgzf``, the BCF's blocks re-cut at chunk starts; ``columns``,
#: every array's chunks stored apart.
LayoutName = Literal["raw", "bgzf", "columns"]
#: Every layout, in the codec's order (``vcfvirtual_codec.spec.LAYOUTS``, which decodes them).
LAYOUTS: tuple[LayoutName, ...] = get_args(LayoutName)


def layout_name(value: object) -> LayoutName | None:
    """``value`` as a layout name, or None when it names none."""
    for name in LAYOUTS:
        if value == name:
            return name
    return None


def segment_name(category: str, field: str) -> str:
    """The columns layout's segment of an INFO or FORMAT field: ``info/DP``, ``format/GT``
    (``category``: ``INFO``/``FORMAT``, either case). The fixed columns' segments are
    named by the codec (``position``, ``allele``...)."""
    return f"{category.lower()}/{field}"


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
