"""The store as the index builds it: each array's Zarr metadata and where its chunks are.

The index writes Kerchunk references from these tables directly, and makes VirtualiZarr's
``ManifestArray``/``ManifestGroup`` from them (:func:`manifest_group`) only where VirtualiZarr
is what takes them: the :class:`~virtualizarr.manifests.ManifestStore` that
:func:`vcfvirtual.index` returns, and the Icechunk writer. Importing VirtualiZarr's manifest
types imports xarray, pandas and zarr (0.5-0.6 s of CPU here), which was a fifth of indexing a
10,000-sample cohort and most of indexing a small one; ``vcfvirtual index`` writing Kerchunk
JSON or Parquet now imports none of them (docs/design.md, "The index's own manifests").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from virtualizarr.manifests import ManifestArray, ManifestGroup

# An array's element type: a numpy dtype, or ``str`` for variable-length strings (VCF Zarr's
# string arrays, Zarr v3's ``string`` data type).
DType = np.dtype | type


@dataclass(frozen=True, eq=False)
class ArrayMetadata:
    """Zarr v3 array metadata with regular chunks and default chunk keys, as the index
    chose it (the codecs in their JSON form, the array-to-bytes codec first)."""

    shape: tuple[int, ...]
    dtype: DType
    chunk_shape: tuple[int, ...]
    fill_value: bool | int | float | str
    codecs: tuple[Mapping[str, Any], ...]
    attributes: Mapping[str, Any]
    dimension_names: tuple[str, ...]

    @property
    def grid(self) -> tuple[int, ...]:
        """Chunks along each dimension (at least one: an empty array has one empty chunk)."""
        return tuple(max(1, -(-s // c)) for s, c in zip(self.shape, self.chunk_shape, strict=True))


@dataclass(frozen=True, eq=False)
class ChunkTable:
    """Where an array's chunks are: one path, offset and length per chunk, each shaped as
    the chunk grid. The empty path is a chunk left out (it reads as the fill value)."""

    paths: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray


@dataclass(frozen=True, eq=False)
class VirtualArray:
    """One array of the store: its metadata, its chunks in the cache (``table``) and
    those whose bytes travel in the references (``inline``, by chunk key)."""

    metadata: ArrayMetadata
    table: ChunkTable | None = None
    inline: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.metadata.shape

    @property
    def dtype(self) -> DType:
        return self.metadata.dtype

    def chunk_entries(self) -> Iterator[tuple[str, str | bytes, int, int]]:
        """Every chunk present: the inlined ones as ``(key, data, 0, len(data))``, then the
        table's as ``(key, path, offset, length)`` in C order of the grid (the order
        VirtualiZarr's ``ChunkManifest.dict()`` gives; an array of the index has one kind or
        the other). Keys are dot-separated indices."""
        yield from ((key, data, 0, len(data)) for key, data in self.inline.items())
        table = self.table
        if table is None or not table.paths.size:
            return
        present = np.flatnonzero(table.paths.reshape(-1) != "")
        indices = np.unravel_index(present, table.paths.shape)
        keys = indices[0].astype(str)
        for axis in indices[1:]:
            keys = np.char.add(np.char.add(keys, "."), axis.astype(str))
        paths = table.paths.reshape(-1)[present].tolist()
        offsets = table.offsets.reshape(-1)[present].tolist()
        lengths = table.lengths.reshape(-1)[present].tolist()
        yield from zip(keys.tolist(), paths, offsets, lengths, strict=True)


@dataclass(frozen=True, eq=False)
class VirtualGroup:
    """The store: its arrays by name and its group attributes."""

    arrays: dict[str, VirtualArray]
    attributes: dict[str, Any]


def manifest_group(group: VirtualGroup) -> ManifestGroup:
    """VirtualiZarr's ManifestGroup of ``group`` (imports VirtualiZarr, xarray and zarr)."""
    from virtualizarr.manifests import ManifestGroup

    return ManifestGroup(
        arrays={name: manifest_array(a) for name, a in group.arrays.items()}, attributes=group.attributes
    )


def manifest_array(array: VirtualArray) -> ManifestArray:
    """VirtualiZarr's ManifestArray of ``array``: its metadata through zarr's own parsing,
    its chunks as a ChunkManifest (inlined chunks as its entries with data)."""
    from virtualizarr.manifests import ChunkManifest, ManifestArray
    from zarr.dtype import parse_data_type

    meta = array.metadata
    dtype = np.dtypes.StringDType() if meta.dtype is str else np.dtype(meta.dtype)
    metadata = {
        "shape": meta.shape,
        "data_type": parse_data_type(dtype, zarr_format=3),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": meta.chunk_shape}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": meta.fill_value,
        "codecs": [dict(c) for c in meta.codecs],
        "attributes": dict(meta.attributes),
        "dimension_names": meta.dimension_names,
        "storage_transformers": None,
    }
    table = array.table
    if table is not None and table.paths.size:
        inlined = {tuple(int(i) for i in key.split(".")): data for key, data in array.inline.items()}
        paths = cast("np.ndarray[Any, np.dtypes.StringDType]", table.paths)
        manifest = ChunkManifest.from_arrays(
            paths=paths, offsets=table.offsets, lengths=table.lengths, inlined=inlined or None
        )
    elif table is not None:  # no records: a grid with no chunks along the variants
        manifest = ChunkManifest(entries={}, shape=table.paths.shape)
    elif array.inline:
        entries = {k: {"path": "", "offset": 0, "length": len(d), "data": d} for k, d in array.inline.items()}
        manifest = ChunkManifest(entries=entries, shape=meta.grid)
    else:
        manifest = ChunkManifest(entries={}, shape=meta.grid)
    return ManifestArray(metadata=metadata, chunkmanifest=manifest)
