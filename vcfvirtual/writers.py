"""Reference stores: Kerchunk JSON (Zarr v2 metadata), and opening it again."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import fsspec
from virtualizarr.manifests import ManifestGroup, ManifestStore
from virtualizarr.writers.kerchunk import dataset_to_kerchunk_refs

from .errors import StaleCacheError, VcfVirtualError
from .fingerprint import Fingerprint


def kerchunk_refs(group: ManifestGroup) -> dict:
    """Kerchunk references (Zarr v2 metadata) for ``group`` through VirtualiZarr's writer."""
    with warnings.catch_warnings():
        # VirtualiZarr warns that a chunk longer than a (tiny or empty) array blocks
        # concatenation; that is moot for a complete store written as it stands.
        warnings.filterwarnings("ignore", message=".*chunk shape larger than their array shape")
        vds = ManifestStore(group).to_virtual_dataset()
    refs = dataset_to_kerchunk_refs(vds, zarr_format=2)
    for key, value in refs["refs"].items():
        if key.endswith(".zarray"):
            meta = json.loads(value)
            # xarray turns a Zarr v2 fill_value into a mask, which would make the
            # genotype 0 or the allele "" read as NaN; our values carry the spec's own
            # missing and fill sentinels, so the arrays declare no fill value.
            meta["fill_value"] = None
            refs["refs"][key] = json.dumps(meta, separators=(",", ":"))
    return refs


def write_kerchunk_json(group: ManifestGroup, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(kerchunk_refs(group), f, separators=(",", ":"))


def _attributes(refs: dict) -> dict:
    return json.loads(refs["refs"][".zattrs"])


def check_cache(refs: dict, refs_path) -> None:
    """Refuse a store whose cache, or reachable source BCF, has changed since indexing.

    A source that is not reachable (a collaborator without the BCF) is not checked: the
    cache alone holds the data."""
    info = _attributes(refs).get("vcfvirtual", {})
    cache = info.get("cache")
    if not cache:
        return
    url = cache["url"]
    if not url.startswith("file://"):
        return
    path = url.removeprefix("file://")
    if not os.path.exists(path):
        raise StaleCacheError(refs_path, f"the transcode cache {path} is missing",
                              hint="re-run vcfvirtual index") from None
    problems = Fingerprint.from_json(cache).differences(path)
    if problems:
        raise StaleCacheError(refs_path, f"the transcode cache {path} does not match the references: "
                              + "; ".join(problems), hint="re-run vcfvirtual index --force")
    source = info.get("source", {})
    if source.get("path") and os.path.isfile(source["path"]) and "size" in source:
        problems = Fingerprint.from_json(source).differences(source["path"])
        if problems:
            raise StaleCacheError(refs_path, f"the source BCF {source['path']} changed since it was indexed: "
                                  + "; ".join(problems), hint="re-run vcfvirtual index --force")


def open_store(refs_path, *, check: bool = True):
    """A read-only zarr store over a vcfvirtual Kerchunk JSON, for ``xr.open_zarr``."""
    from zarr.storage import FsspecStore

    refs_path = os.fspath(refs_path)
    try:
        with open(refs_path, encoding="utf-8") as f:
            refs = json.load(f)
    except OSError as e:
        raise VcfVirtualError(refs_path, f"cannot read references: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise VcfVirtualError(refs_path, f"not a Kerchunk JSON file ({e})") from None
    if check:
        check_cache(refs, refs_path)
    fs = fsspec.filesystem("reference", fo=refs, asynchronous=True, remote_protocol="file")
    return FsspecStore(fs=fs, read_only=True)
