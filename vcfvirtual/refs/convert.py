"""References in another format from existing ones over the same cache: the store's
manifests are read back from Kerchunk JSON or Parquet references, and written in the
format asked for, with no scan of the BCF and no byte of the cache rewritten."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import _json
from ..errors import VcfVirtualError
from ..manifests.provenance import Provenance
from ..manifests.virtual import ArrayMetadata, ChunkTable, VirtualArray, VirtualGroup
from .checks import group_attributes
from .kerchunk import KerchunkRefs, load_references, require_parquet, resolve_templates

# The keys of Kerchunk references that hold metadata (JSON text), not chunks.
_METADATA_KEYS = (".zgroup", ".zattrs", ".zarray")


def load_all_references(path: str | os.PathLike[str]) -> KerchunkRefs:
    """Every reference of Kerchunk JSON or a Kerchunk Parquet directory, templates
    resolved: metadata as JSON text, chunks as ``[url, offset, length]`` or
    ``"base64:..."`` (an inlined chunk).

    Parameters
    ----------
    path
        Kerchunk JSON, or a Kerchunk Parquet directory, that ``vcfvirtual index`` wrote.

    Returns
    -------
    dict
        ``{"version": 1, "refs": {key: value}}``.

    Raises
    ------
    VcfVirtualError
        The references cannot be read.
    """
    if not os.path.isdir(path):
        return {"version": 1, "refs": resolve_templates(load_references(path))}
    require_parquet(path)
    from fsspec.implementations.reference import LazyReferenceMapper

    try:
        mapper = LazyReferenceMapper(os.fspath(path))
        keys = [".zgroup", ".zattrs", *(k for k in mapper if k not in (".zgroup", ".zattrs", ".zmetadata"))]
        refs = {key: _json_value(key, mapper[key]) for key in keys}
    except (OSError, KeyError, ValueError) as e:
        raise VcfVirtualError(path, f"cannot read the Kerchunk Parquet references ({e})") from None
    return {"version": 1, "refs": refs}


def _json_value(key: str, value: Any) -> Any:
    """A Parquet reference as Kerchunk JSON holds it."""
    if isinstance(value, list):
        return [str(value[0]), int(value[1]), int(value[2])]
    if key.rsplit("/", 1)[-1] in _METADATA_KEYS:
        return value.decode() if isinstance(value, bytes) else value
    return "base64:" + base64.b64encode(value).decode("ascii")


def virtual_group(refs: KerchunkRefs, refs_path: str | os.PathLike[str]) -> VirtualGroup:
    """The store's arrays and attributes, read back from its Kerchunk references (the
    inverse of :func:`vcfvirtual.refs.kerchunk.kerchunk_refs`: written again, they are the
    same). :func:`vcfvirtual.manifests.virtual.manifest_group` makes VirtualiZarr's group of it.

    Parameters
    ----------
    refs
        As :func:`load_all_references` returns them.
    refs_path
        Named in errors.

    Returns
    -------
    VirtualGroup

    Raises
    ------
    VcfVirtualError
        The references are not those of a store vcfvirtual wrote.
    """
    r = refs["refs"]
    try:
        attributes = _json.loads(r[".zattrs"])
        names = list(dict.fromkeys(k.split("/", 1)[0] for k in r if "/" in k))
        arrays = {name: _virtual_array(name, r) for name in names}
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise VcfVirtualError(refs_path, f"not references of a vcfvirtual store ({type(e).__name__}: {e})") from None
    return VirtualGroup(arrays, attributes)


def _virtual_array(name: str, r: dict[str, Any]) -> VirtualArray:
    from ..manifests.vcf_zarr import _fill_value

    zarray = _json.loads(r[f"{name}/.zarray"])
    zattrs = _json.loads(r[f"{name}/.zattrs"])
    dims = zattrs.pop("_ARRAY_DIMENSIONS")
    is_str = zarray["dtype"] == "|O"
    dtype: Any = str if is_str else np.dtype(zarray["dtype"]).newbyteorder("=")
    metadata = ArrayMetadata(
        shape=tuple(int(s) for s in zarray["shape"]),
        dtype=dtype,
        chunk_shape=tuple(int(c) for c in zarray["chunks"]),
        fill_value="" if is_str else _fill_value(np.dtype(dtype)),
        codecs=tuple(_v3_codecs(dtype, zarray.get("filters") or [])),
        attributes=zattrs,
        dimension_names=tuple(dims),
    )
    # The grid from the metadata, not the keys: call_genotype_mask leaves out chunks (its
    # all-False ones), maybe its last.
    grid = metadata.grid
    prefix = name + "/"
    referenced: dict[tuple[int, ...], tuple[str, int, int]] = {}
    inline: dict[str, bytes] = {}
    for key, value in r.items():
        if not key.startswith(prefix) or key[len(prefix) :].startswith(".z"):
            continue
        chunk = key[len(prefix) :]
        where = _chunk_index(chunk, grid)
        if not isinstance(value, list):
            inline[chunk] = base64.b64decode(value.removeprefix("base64:"))
            continue
        path = value[0] if "://" in value[0] else "file://" + value[0]
        referenced[where] = (path, int(value[1]), int(value[2]))
    if not referenced:
        return VirtualArray(metadata, inline=inline)
    paths = np.full(grid, "", dtype=np.dtypes.StringDType())
    offsets, lengths = np.zeros(grid, dtype=np.uint64), np.zeros(grid, dtype=np.uint64)
    for where, (path, offset, length) in referenced.items():
        paths[where], offsets[where], lengths[where] = path, offset, length
    return VirtualArray(metadata, ChunkTable(paths, offsets, lengths), inline)


def _chunk_index(key: str, grid: tuple[int, ...]) -> tuple[int, ...]:
    """A chunk key's indices, refused (IndexError) outside the array's chunk grid."""
    where = tuple(int(i) for i in key.split("."))
    if len(where) != len(grid) or not all(0 <= i < n for i, n in zip(where, grid, strict=True)):
        raise IndexError(f"chunk key {key!r} is outside the array's {grid} chunks")
    return where


def _v3_codecs(dtype: Any, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Zarr v3 codecs for Zarr v2 filters as kerchunk.py's ``_zarray`` writes them: the
    array-to-bytes codec from the dtype, then every filter but ``vlen-utf8`` as it was."""
    if dtype is str:
        out: list[dict[str, Any]] = [{"name": "vlen-utf8"}]
    elif np.dtype(dtype).itemsize > 1:
        out = [{"name": "bytes", "configuration": {"endian": "little"}}]
    else:
        out = [{"name": "bytes"}]
    for f in filters:
        if f["id"] == "vlen-utf8":
            continue
        out.append({"name": f["id"], "configuration": {k: v for k, v in f.items() if k != "id"}})
    return out


def source_format(path: str | os.PathLike[str]) -> str:
    """The format of references ``index`` wrote at ``path``."""
    if os.path.isdir(path):
        return "icechunk" if os.path.exists(os.path.join(path, "repo")) else "parquet"
    return "json"


def cache_of(refs: KerchunkRefs) -> tuple[str, Path | None]:
    """(the cache's URL as the references record it, its local path or None)."""
    url = Provenance.from_attributes(group_attributes(refs), None).cache.url
    return url, (Path(url.removeprefix("file://")) if url.startswith("file://") else None)
