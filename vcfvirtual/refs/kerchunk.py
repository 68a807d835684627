"""Kerchunk references (JSON and Parquet) of a ManifestGroup, with the cache's URL as a
template so the references can be moved with it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from virtualizarr.manifests import ManifestArray, ManifestGroup
from virtualizarr.writers.kerchunk import variable_to_kerchunk_arr_refs

from ..errors import VcfVirtualError


def kerchunk_refs(group: ManifestGroup) -> dict:
    """Kerchunk references (Zarr v2 metadata) for ``group`` through VirtualiZarr's writer.

    Each array goes through VirtualiZarr's per-array writer directly. Going through a
    virtual xarray Dataset (``ManifestStore.to_virtual_dataset``, then
    ``dataset_to_kerchunk_refs``) gives the same references but costs time quadratic in
    the number of arrays (zarr lists the whole store, and formats it, for every array it
    opens): 20-40 s for a header of 1,000 INFO fields, 0.6 s this way
    (benchmarks/wide_header.py)."""
    import ujson
    import xarray as xr

    arrays = {}
    for name, marr in group.arrays.items():
        dims = [str(d) for d in (marr.metadata.dimension_names or ())]
        # The attributes go to the array's .zattrs, as a virtual Dataset's variable holds
        # them; its metadata (.zarray) keeps none.
        bare = ManifestArray(metadata=dataclasses.replace(marr.metadata, attributes={}), chunkmanifest=marr.manifest)
        var = xr.Variable(dims, bare, attrs=dict(marr.metadata.attributes or {}))
        arrays.update(
            {f"{name}/{key}": value for key, value in variable_to_kerchunk_arr_refs(var, name, zarr_format=2).items()}
        )
    refs = {
        "version": 1,
        "refs": {".zgroup": '{"zarr_format":2}', ".zattrs": ujson.dumps(dict(group.metadata.attributes)), **arrays},
    }
    for key, value in refs["refs"].items():
        if key.endswith(".zarray"):
            meta = json.loads(value)
            # xarray turns a Zarr v2 fill_value into a mask, which would make the
            # genotype 0 or the allele "" read as NaN; our values carry the spec's own
            # missing and fill sentinels, so the arrays declare no fill value.
            meta["fill_value"] = None
            refs["refs"][key] = json.dumps(meta, separators=(",", ":"))
    return refs


# Kerchunk template naming the cache: every chunk reference is ["{{cache}}", offset,
# length], so moving the cache (uploading it, sharing it) rewrites one string.
CACHE_TEMPLATE = "cache"


def with_cache_template(refs: dict, cache_url: str | None = None) -> dict:
    """Kerchunk version-1 references whose chunks name the cache through a template
    pointing at ``cache_url`` (by default where it was written); the group attributes
    record the URL too."""
    attrs = json.loads(refs["refs"][".zattrs"])
    local = attrs["vcfvirtual"]["cache"]["url"]
    cache_url = cache_url or local
    names = {local, local.removeprefix("file://")}
    template = "{{" + CACHE_TEMPLATE + "}}"
    out = {}
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value and value[0] in names:
            value = [template, *value[1:]]
        out[key] = value
    attrs["vcfvirtual"]["cache"]["url"] = cache_url
    out[".zattrs"] = json.dumps(attrs, separators=(",", ":"))
    return {"version": 1, "templates": {CACHE_TEMPLATE: cache_url}, "refs": out}


def write_kerchunk_json(group: ManifestGroup, path: Path, cache_url: str | None = None) -> None:
    from ..io import outputs as cache_mod

    refs = with_cache_template(kerchunk_refs(group), cache_url)
    # Flushed to disk before the rename that publishes it, as the cache is: after a crash
    # the final name holds the whole old or the whole new references, never an empty file.
    with cache_mod.output_file(path, "the references", "refs_path=", mode="w", opener=open) as f:
        json.dump(refs, f, separators=(",", ":"))


def write_kerchunk_parquet(
    group: ManifestGroup, path: Path, cache_url: str | None = None, record_size: int = 100_000
) -> None:
    """Kerchunk Parquet references (a directory) for stores with millions of chunks.

    Parquet references have no templates, so chunks name the cache's URL itself;
    relocating them means writing them again (or ``open_store(..., cache_url=...)``)."""
    from kerchunk.df import refs_to_dataframe

    refs = with_cache_template(kerchunk_refs(group), cache_url)
    refs_to_dataframe({"version": 1, "refs": _resolve_templates(refs)}, str(path), record_size=record_size)


def _resolve_templates(refs: dict) -> dict:
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


def _load(refs_path) -> dict:
    """Kerchunk references from a JSON file, or the metadata of a Parquet directory."""
    if os.path.isdir(refs_path):
        try:
            with open(os.path.join(refs_path, ".zmetadata"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise VcfVirtualError(refs_path, f"not a Kerchunk Parquet directory ({e})") from None
        return {"refs": meta["metadata"], "parquet": True}
    try:
        with open(refs_path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise VcfVirtualError(refs_path, f"cannot read references: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise VcfVirtualError(refs_path, f"not a Kerchunk JSON file ({e})") from None
