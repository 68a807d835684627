"""The transcode cache's layouts, by name: a layout is one module implementing
:class:`~vcfvirtual.cache.base.CacheLayout` and one entry in ``LAYOUT_WRITERS`` (and the
codec, which must decode it, lists it in its ``LAYOUTS``)."""

from __future__ import annotations

from pathlib import Path

from ..bcf.fields import EVERY_FIELD, FieldChoice
from ..scan.chunking import ChunkLengthRule
from .base import CacheLayout
from .bgzf import BGZFLayout
from .columns import DEFAULT_SAMPLES_CHUNK_SIZE, ColumnsLayout
from .names import LAYOUTS, LayoutName
from .raw import RawLayout

# The layout of a compressed BCF's cache unless asked otherwise: columns reads each array
# (and each samples block) alone, 10-100x faster than bgzf on one array and about bio2zarr's
# speed (docs/benchmarks.md, issue 12); bgzf stays for a cache that is itself a BCF.
DEFAULT_LAYOUT: LayoutName = "columns"

LAYOUT_WRITERS: dict[LayoutName, CacheLayout] = {
    layout.name: layout for layout in (RawLayout(), BGZFLayout(), ColumnsLayout())
}


# The layout whose cache is the uncompressed stream itself: an uncompressed BCF's, which
# then serves as its own cache.
STREAM_LAYOUT: LayoutName = next(name for name, layout in LAYOUT_WRITERS.items() if layout.uncompressed_stream)


def layout_writer(
    name: LayoutName,
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


def chunk_length_rule(
    layout: LayoutName,
    variants_chunk_size: int | None = None,
    field_choice: FieldChoice = EVERY_FIELD,
    source: str | Path | None = None,
) -> ChunkLengthRule:
    """What the scan is handed to size chunks: ``variants_chunk_size``, or ``layout``'s bounds."""
    writer = LAYOUT_WRITERS[layout]
    return ChunkLengthRule(
        writer.max_chunk_bytes,
        writer.max_chunk_length,
        variants_chunk_size,
        field_choice,
        source,
        writer.sites_only_chunk_length,
    )


__all__ = ["DEFAULT_LAYOUT", "LAYOUTS", "LAYOUT_WRITERS", "STREAM_LAYOUT", "chunk_length_rule", "layout_writer"]
