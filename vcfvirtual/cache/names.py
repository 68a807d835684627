"""The cache layouts' names: one list, importable without numpy (the command line's
``--cache-layout`` choices are read from here at start-up)."""

from __future__ import annotations

from typing import Literal, get_args

# A cache made of parts names them so (io/parts.py, below the layers that write and read them).
from ..io.parts import PART_PREFIX, is_part_name, part_name, part_url

__all__ = [
    "LAYOUTS",
    "PART_PREFIX",
    "LayoutName",
    "effective_samples_chunk_size",
    "is_part_name",
    "layout_name",
    "part_name",
    "part_url",
    "segment_name",
]

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


def effective_samples_chunk_size(samples_chunk_size: int, n_samples: int) -> int:
    """Samples per block: as asked, but no wider than the samples there are (and at least 1).
    Here, not with the columns writer, as opening a store checks it (without the writer's imports)."""
    return max(1, min(samples_chunk_size, n_samples))
