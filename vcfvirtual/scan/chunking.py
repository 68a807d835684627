"""How many records make a variants chunk: decided by the scan once it has read the
header and before any record, from the facts the later stages handed forward (a size
asked for, or the cache layout's bounds, and the fields chosen)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..bcf.fields import EVERY_FIELD, FieldChoice, FieldMap, map_fields
from ..bcf.header import BCFHeader

# The fewest variants per chunk a size bound gives (a wide cohort's chunk stays a chunk).
MIN_CHUNK_LENGTH = 100


def chunk_length_within(
    n_samples: int, ploidy: int, itemsize: int, max_bytes: int, max_length: int, sites_only_length: int | None = None
) -> int:
    """Variants per chunk so that one chunk of every sample's genotypes stays within
    ``max_bytes``: between MIN_CHUNK_LENGTH and ``max_length``; with no samples (no
    genotypes to bound), ``sites_only_length`` when given."""
    if n_samples == 0 and sites_only_length:
        return sites_only_length
    per_variant = max(1, n_samples * max(ploidy, 1) * itemsize)
    return int(np.clip(max_bytes // per_variant, MIN_CHUNK_LENGTH, max_length))


@dataclass(frozen=True)
class ChunkLengthRule:
    """Variants per chunk for a header: as asked, or as many as keep a chunk of every
    sample's diploid genotypes within ``max_bytes`` (at most ``max_length``: the cache
    layout's bounds, :meth:`vcfvirtual.cache.base.CacheLayout.chunk_length`). The fields
    are checked first (names that clash, choices naming fields the header lacks), so such
    a run stops before it has written a chunk. What the scan calls (``chunk_length_for``).

    Parameters
    ----------
    max_bytes, max_length : int
        The layout's bounds.
    variants_chunk_size : int or None
        Asked for; None: within the bounds.
    field_choice : FieldChoice
        The fields' renames and selection, checked against the header.
    source : str or Path or None
        The input named in a field error.
    sites_only_length : int or None
        Variants per chunk of a header with no samples (the layout's); None: ``max_length``.
    """

    max_bytes: int
    max_length: int
    variants_chunk_size: int | None = None
    field_choice: FieldChoice = EVERY_FIELD
    source: str | Path | None = None
    sites_only_length: int | None = None

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
        return self.variants_chunk_size or chunk_length_within(
            len(header.samples), 2, 1, self.max_bytes, self.max_length, self.sites_only_length
        )
