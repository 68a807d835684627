"""Kerchunk references (JSON and Parquet) of a VirtualGroup, with the cache's URL as a
template so the references can be moved with it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _json
from ..errors import VcfVirtualError

if TYPE_CHECKING:
    from ..manifests.virtual import ArrayMetadata, VirtualArray, VirtualGroup

# Kerchunk reference sets as vcfvirtual writes them: {"version": 1, "templates": ..., "refs": {key: value}},
# a value being JSON text (metadata), "base64:..." (an inlined chunk) or [url, offset, length].
KerchunkRefs = dict[str, Any]

PARQUET_HINT = "pip install 'vcfvirtual[parquet]'"


def kerchunk_refs(group: VirtualGroup) -> KerchunkRefs:
    """Kerchunk references (Zarr v2 metadata) for ``group``, array by array.

    Parameters
    ----------
    group
        The store's arrays and group attributes, as the index built them.

    Returns
    -------
    dict
        Kerchunk version-1 references: ``.zgroup`` and ``.zattrs``, then per array its
        ``.zarray``, ``.zattrs`` (with ``_ARRAY_DIMENSIONS``) and one key per chunk.

    Notes
    -----
    What VirtualiZarr's Dataset route (``ManifestStore.to_virtual_dataset`` then
    ``dataset_to_kerchunk_refs``) writes for the same arrays, less the fill value, without
    its cost: quadratic in the number of arrays there, and ~1 ms an array through its
    per-variable functions (docs/design.md, "The Kerchunk writer")."""
    return {"version": 1, "refs": {".zgroup": _ZGROUP, ".zattrs": _group_attributes_json(group), **_arrays(group)}}


_ZGROUP = '{"zarr_format":2}'

# Zarr v3's array-to-bytes codecs of our arrays: Zarr v2 has none (the dtype's byte order
# says what ``bytes`` says; ``vlen-utf8`` becomes the object dtype's first filter).
_ARRAY_TO_BYTES = ("bytes", "vlen-utf8")


def _arrays(group: VirtualGroup) -> dict[str, Any]:
    """Every array's references, keyed ``<array>/<key>``."""
    return {f"{name}/{key}": value for name, array in group.arrays.items() for key, value in array_refs(array).items()}


def _group_attributes_json(group: VirtualGroup) -> str:
    # Compact, ASCII-only and with "/" escaped as "\/": the bytes VirtualiZarr's Dataset
    # route writes (with ujson), so both routes give identical references. "/" only occurs
    # inside JSON strings, where "\/" is the same character.
    text = json.dumps(dict(group.attributes), separators=(",", ":"), default=_json_default)
    return text.replace("/", "\\/")


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays in attributes, as JSON numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def array_refs(array: VirtualArray) -> dict[str, Any]:
    """The Kerchunk references of one array: ``.zarray``, ``.zattrs`` and its chunks.

    Parameters
    ----------
    array
        An array of the store, with regular chunks.

    Returns
    -------
    dict
        Keys relative to the array: chunk keys (``"0.0"``) mapping to ``[path, offset,
        length]`` or to ``"base64:..."`` for a chunk inlined in the references, and the
        ``.zarray``/``.zattrs`` JSON texts."""
    out: dict[str, Any] = {}
    for key, where, offset, length in array.chunk_entries():
        if isinstance(where, bytes):
            out[key] = "base64:" + base64.b64encode(where).decode("ascii")
        else:
            out[key] = [_local_path(where), offset, length]
    meta = array.metadata
    out[".zarray"] = json.dumps(_zarray(meta), separators=(",", ":"))
    zattrs = {**dict(meta.attributes), "_ARRAY_DIMENSIONS": [str(d) for d in meta.dimension_names]}
    out[".zattrs"] = json.dumps(zattrs, separators=(",", ":"), default=_json_default)
    return out


def _local_path(path: str) -> str:
    # Kerchunk names local files by path (as VirtualiZarr's writer does); URLs stay URLs.
    return path.removeprefix("file://") if path.startswith("file:///") else path


def _zarray(meta: ArrayMetadata) -> dict[str, Any]:
    """Zarr v2 array metadata (the Zarr v2 spec's ``.zarray``) for an array's v3 metadata.

    Zarr v2 has no array-to-bytes codec: the v3 ``bytes`` codec becomes the dtype's byte
    order, and ``vlen-utf8`` becomes the object dtype's first filter, which reading it needs."""
    names = [c["name"] for c in meta.codecs]
    filters: list[dict[str, Any]] = [{"id": "vlen-utf8"}] if "vlen-utf8" in names else []
    for codec in meta.codecs:
        if codec["name"] not in _ARRAY_TO_BYTES:
            filters.append({"id": codec["name"], **(codec.get("configuration") or {})})
    return {
        "shape": list(meta.shape),
        "chunks": list(meta.chunk_shape),
        "dtype": _v2_dtype(meta),
        # xarray turns a Zarr v2 fill_value into a mask, which would make the genotype 0
        # or the allele "" read as NaN; our values carry the spec's own missing and fill
        # sentinels, so the arrays declare no fill value.
        "fill_value": None,
        "order": "C",
        "filters": filters or None,
        "dimension_separator": ".",
        "compressor": None,
        # zarr's own v2 metadata writes its (here empty) attributes key; kept, so these
        # references stay identical to VirtualiZarr's.
        "attributes": {},
        "zarr_format": 2,
    }


def _v2_dtype(meta: ArrayMetadata) -> str:
    if meta.dtype is str:
        return "|O"  # variable-length strings: objects, decoded by the vlen-utf8 filter
    dtype = np.dtype(meta.dtype)
    if dtype.itemsize == 1:
        return dtype.str  # no byte order
    endian = "little"
    for codec in meta.codecs:
        if codec["name"] == "bytes":
            endian = (codec.get("configuration") or {}).get("endian", endian)
    return dtype.newbyteorder("<" if endian == "little" else ">").str


# Kerchunk template naming the cache: every chunk reference is ["{{cache}}", offset,
# length], or ["{{cache}}/part-000003", offset, length] into a cache made of parts (a
# folder), so moving the cache (uploading it, sharing it) rewrites one string.
CACHE_TEMPLATE = "cache"


def templated_refs(group: VirtualGroup, cache_url: str | None = None) -> KerchunkRefs:
    """Kerchunk version-1 references of a vcfvirtual store whose chunks name the cache
    through a template pointing at ``cache_url`` (by default where it was written); the
    group attributes record that URL too.

    Parameters
    ----------
    group
        The store's arrays and attributes (``vcfvirtual.cache.url``: where the cache was written).
    cache_url
        Where readers will find the cache.

    Returns
    -------
    dict
        ``{"version": 1, "templates": {"cache": URL}, "refs": ...}``."""
    attrs = dict(group.attributes)
    info = attrs["vcfvirtual"]
    local = info["cache"]["url"]
    cache_url = cache_url or local
    # The attributes as they are published, serialised once (they hold the whole VCF header).
    attrs["vcfvirtual"] = {**info, "cache": {**info["cache"], "url": cache_url}}
    refs: dict[str, Any] = {
        ".zgroup": _ZGROUP,
        ".zattrs": json.dumps(attrs, separators=(",", ":"), default=_json_default),
    }
    templated = _templated_url(local)
    for key, value in _arrays(group).items():
        if isinstance(value, list) and value:
            value = [templated(value[0]), *value[1:]]
        refs[key] = value
    return {"version": 1, "templates": {CACHE_TEMPLATE: cache_url}, "refs": refs}


def _templated_url(local: str) -> Callable[[str], str]:
    """A chunk's URL with the cache's own (``local``, as written) replaced by the template:
    the cache itself becomes ``{{cache}}``, a part of a cache made of parts
    ``{{cache}}/part-000003`` (fsspec renders templates inside a string); other URLs stay."""
    names = (local, local.removeprefix("file://"))
    template = "{{" + CACHE_TEMPLATE + "}}"

    @functools.lru_cache(maxsize=1024)  # a few parts, millions of chunks
    def templated(url: str) -> str:
        for name in names:
            if url == name:
                return template
            if url.startswith(name + "/"):
                return template + url[len(name) :]
        return url

    return templated


def write_kerchunk_json(group: VirtualGroup, path: Path, cache_url: str | None = None) -> None:
    """Kerchunk JSON references of ``group`` at ``path``, naming the cache through its template."""
    from ..io import outputs as cache_mod

    refs = templated_refs(group, cache_url)
    # Flushed to disk before the rename that publishes it, as the cache is: after a crash
    # the final name holds the whole old or the whole new references, never an empty file.
    with cache_mod.output_file(path, "the references", "refs_path=", mode="w", opener=open) as f:
        json.dump(refs, f, separators=(",", ":"))


def require_parquet(path: Any) -> None:
    """Refuse Kerchunk Parquet references, to write or read, without the libraries they need.

    Parameters
    ----------
    path
        The references the error names.

    Raises
    ------
    VcfVirtualError
        kerchunk, fastparquet or pandas is not installed (the ``parquet`` extra)."""
    try:
        # fsspec and kerchunk read and write Parquet with fastparquet, through pandas.
        for module in ("fastparquet", "pandas", "kerchunk.df"):
            importlib.import_module(module)
    except ImportError as e:
        raise VcfVirtualError(
            path, f"Kerchunk Parquet references need a library that is not installed ({e})", hint=PARQUET_HINT
        ) from None


def write_kerchunk_parquet(
    group: VirtualGroup, path: Path, cache_url: str | None = None, record_size: int = 100_000
) -> None:
    """Kerchunk Parquet references (a directory) for stores with millions of chunks.

    Parquet references have no templates, so chunks name the cache's URL itself;
    relocating them means writing them again (or ``open_store(..., cache_url=...)``)."""
    require_parquet(path)
    from kerchunk.df import refs_to_dataframe

    refs = templated_refs(group, cache_url)
    refs_to_dataframe({"version": 1, "refs": resolve_templates(refs)}, str(path), record_size=record_size)


def resolve_templates(refs: KerchunkRefs) -> dict[str, Any]:
    """The references' ``refs`` map with every template in a chunk's URL replaced by what it names."""
    templates = refs.get("templates", {})
    out = {}
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value and isinstance(value[0], str) and "{{" in value[0]:
            url = value[0]
            for name, target in templates.items():
                url = url.replace("{{" + name + "}}", target)
            value = [url, *value[1:]]
        out[key] = value
    return out


def public_cache_url(cache_url: str, cache_name: str) -> str:
    """``--cache-url`` as given, or with the cache's file name when it names a folder."""
    return cache_url + cache_name if cache_url.endswith("/") else cache_url


def load_references(refs_path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> KerchunkRefs:
    """Kerchunk references from a JSON file, or the metadata of a Parquet directory.

    Parameters
    ----------
    refs_path
        A Kerchunk JSON file (a local path, or a URL: a collaborator opens a shared
        ``https://host/c.vcz.json`` or ``s3://bucket/c.vcz.json``), or a local Kerchunk
        Parquet directory.
    storage_options
        fsspec's options for a URL.

    Returns
    -------
    dict
        The JSON as written; for Parquet, ``{"refs": <its metadata keys>, "parquet": True}``
        (the chunk references stay in the Parquet files, read lazily).

    Raises
    ------
    VcfVirtualError
        The file cannot be read, or is not Kerchunk JSON / a Kerchunk Parquet directory."""
    return read_references(refs_path, storage_options)[0]


def read_references(
    refs_path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None
) -> tuple[KerchunkRefs, str]:
    """:func:`load_references`, and a digest (SHA-256) of the bytes it parsed: the JSON's,
    or a Parquet directory's ``.zmetadata``. What a check of them found is kept under it
    (``refs/verdicts``); SHA-256 rather than BLAKE2b as it runs on the CPU's SHA
    instructions: 2 ms for a 2.9 MB JSON, where BLAKE2b took 5.7."""
    if _is_remote(os.fspath(refs_path)):
        return _parsed(os.fspath(refs_path), _read_remote(os.fspath(refs_path), storage_options))
    if os.path.isdir(refs_path):
        try:
            data = Path(refs_path, ".zmetadata").read_bytes()
            meta = _json.loads(data)
            return {"refs": meta["metadata"], "parquet": True}, _digest(data)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise VcfVirtualError(refs_path, f"not a Kerchunk Parquet directory ({e})") from None
    try:
        data = Path(refs_path).read_bytes()
    except OSError as e:
        raise VcfVirtualError(refs_path, f"cannot read references: {e.strerror}") from None
    return _parsed(refs_path, data)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _parsed(refs_path: str | os.PathLike[str], data: bytes) -> tuple[KerchunkRefs, str]:
    """The references a Kerchunk JSON's bytes hold, and their digest."""
    try:
        loaded: KerchunkRefs = _json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise VcfVirtualError(refs_path, f"not a Kerchunk JSON file ({e})") from None
    return loaded, _digest(data)


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _read_remote(url: str, storage_options: dict[str, Any] | None) -> bytes:
    """The bytes of a Kerchunk JSON at a URL, read whole through fsspec: one GET (a file
    object would ask for its size first, a round trip of its own before the open's
    fingerprint rounds)."""
    from ..io.remote import filesystem

    fs, path = filesystem(url, storage_options)  # a missing protocol library: its install command
    try:
        data: bytes = fs.cat_file(path)
        return data
    except Exception as e:  # fsspec's backends raise their own (aiohttp, botocore...)
        raise VcfVirtualError(url, f"cannot read references: {type(e).__name__}: {e}") from None
