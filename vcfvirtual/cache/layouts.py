"""The transcode cache's layouts, by name: a layout is one module implementing
:class:`~vcfvirtual.cache.base.CacheLayout` and one entry in ``LAYOUT_WRITERS`` (and the
codec, which must decode it, lists it in its ``LAYOUTS``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..bcf.fields import EVERY_FIELD, FieldChoice, FieldMap, map_fields
from ..bcf.header import BCFHeader
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


@dataclass(frozen=True)
class ChunkLengthRule:
    """Variants per chunk, decided once the scan has read the header and before any
    record: as asked, or the layout's own rule for the header's samples. The fields are
    checked first (names that clash, choices naming fields the header lacks), so such a
    run stops before it has written a chunk. What the scan calls (``chunk_length_for``).

    Parameters
    ----------
    layout : LayoutName
        The cache's layout.
    variants_chunk_size : int or None
        Asked for; None: the layout's rule.
    field_choice : FieldChoice
        The fields' renames and selection, checked against the header.
    source : str or Path or None
        The input named in a field error.
    """

    layout: LayoutName
    variants_chunk_size: int | None = None
    field_choice: FieldChoice = EVERY_FIELD
    source: str | Path | None = None

    def field_map(self, header: BCFHeader) -> FieldMap:
        """The arrays of the header's INFO/FORMAT fields under the run's choice.

        Raises
        ------
        FieldNameError
            A field's array would replace a fixed array or another field's, or the choice
            names a field the header does not declare."""
        return map_fields(
            [f.name for f in header.info], [f.name for f in header.formats], self.field_choice, self.source
        )

    def __call__(self, header: BCFHeader) -> int:
        """Variants per chunk for ``header``, once :meth:`field_map` accepts its fields
        (raising its FieldNameError otherwise)."""
        self.field_map(header)
        return self.variants_chunk_size or LAYOUT_WRITERS[self.layout].chunk_length(len(header.samples), 2)


__all__ = ["DEFAULT_LAYOUT", "LAYOUTS", "LAYOUT_WRITERS", "ChunkLengthRule", "layout_writer"]
