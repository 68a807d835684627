"""The transcode cache's layouts, by name: a layout is one module implementing
:class:`~vcfvirtual.cache.base.CacheLayout` and one entry in ``LAYOUT_WRITERS`` (and the
codec, which must decode it, lists it in its ``LAYOUTS``)."""

from __future__ import annotations

# The codec decodes every layout, so its list is the one list (the codec is the lower layer).
from vcfvirtual_codec.spec import LAYOUTS

from ..bcf.fields import EVERY_FIELD, FieldChoice
from .base import CacheLayout
from .bgzf import BGZFLayout
from .columns import DEFAULT_SAMPLES_CHUNK_SIZE, ColumnsLayout
from .names import LayoutName
from .raw import RawLayout

# The layout of a compressed BCF's cache unless asked otherwise: columns reads each array
# (and each samples block) alone, 10-100x faster than bgzf on one array and about bio2zarr's
# speed (docs/benchmarks.md, issue 12); bgzf stays for a cache that is itself a BCF.
DEFAULT_LAYOUT: LayoutName = "columns"

LAYOUT_WRITERS: dict[str, CacheLayout] = {
    layout.name: layout for layout in (RawLayout(), BGZFLayout(), ColumnsLayout())
}


def layout_writer(
    name: str,
    samples_chunk_size: int = DEFAULT_SAMPLES_CHUNK_SIZE,
    local_alleles: bool = False,
    field_choice: FieldChoice = EVERY_FIELD,
) -> CacheLayout:
    """The writer of layout ``name``; ``samples_chunk_size``, ``local_alleles`` (each
    samples block's AD, GT and PL segments written together) and ``field_choice`` (no
    segment for a field left out) are read by ``columns`` only."""
    if name == ColumnsLayout.name:
        return ColumnsLayout(samples_chunk_size, local_alleles, field_choice)
    return LAYOUT_WRITERS[name]


__all__ = ["DEFAULT_LAYOUT", "LAYOUTS", "LAYOUT_WRITERS", "layout_writer"]
