"""Opening references as a zarr store, after the checks that make them safe to read."""

from __future__ import annotations

import os
from urllib.parse import urlparse

import fsspec

from ..errors import UntrustedReferenceError, VcfVirtualError
from .checks import (
    _UNTRUSTED_HINT,
    _attributes,
    _check_array_metadata,
    _check_references,
    _declared_cache,
    _guarded_reference_fs,
    _store_header,
    check_cache,
)
from .icechunk import is_icechunk_repo, open_icechunk
from .kerchunk import CACHE_TEMPLATE, load_references
from .relocate import relocate


def open_store(refs_path, *, check: bool = True, cache_url: str | None = None, storage_options: dict | None = None):
    """A read-only zarr store over vcfvirtual references (Kerchunk JSON or Parquet, or an
    Icechunk repository), for ``xr.open_zarr``.

    ``cache_url`` reads the cache from elsewhere than the references say (a copy uploaded
    to ``s3://...`` or served over ``https://...``; a folder URL ending in ``/`` gets the
    cache's file name); ``storage_options`` are fsspec's for reaching it (e.g.
    ``{"endpoint_url": ...}`` for an S3-compatible service). The cache is checked against
    its fingerprint, locally or through range reads.

    References are treated as untrusted: with ``check`` (the default) every chunk must be
    a byte range of the one cache the attributes declare (and whose fingerprint is
    checked), and every array's metadata must agree with its codec configuration;
    anything else is ``UntrustedReferenceError``, before anything is fetched.
    ``check=False`` skips all of this and reads the references as plain Kerchunk does
    (which follows any URL they name): only for references whose author you trust."""
    from zarr.storage import FsspecStore

    refs_path = os.fspath(refs_path)
    if is_icechunk_repo(refs_path):
        if cache_url is not None:
            raise VcfVirtualError(
                refs_path,
                "an Icechunk repository names its cache's folder in its configuration",
                hint="write it again with vcfvirtual index --format icechunk",
            )
        return open_icechunk(refs_path, check=check)
    refs = load_references(refs_path)
    if not isinstance(refs, dict) or not isinstance(refs.get("refs"), dict):
        raise UntrustedReferenceError(refs_path, "not Kerchunk references: no 'refs' map")
    if refs.get("parquet"):
        if cache_url is not None:
            raise VcfVirtualError(
                refs_path,
                "Parquet references name the cache in every chunk",
                hint="write them again with vcfvirtual index --format parquet --cache-url",
            )
        fo = refs_path
    else:
        if cache_url is not None:
            refs = relocate(refs, cache_url, refs_path)
        fo = refs
    cache = _declared_cache(refs, refs_path) if check else None
    if check and cache is None:
        raise UntrustedReferenceError(
            refs_path,
            "the references declare no vcfvirtual cache, so nothing they point at can be checked",
            hint=_UNTRUSTED_HINT,
        )
    if check:
        # The cache first (missing, changed, not a regular file), then every reference
        # against it; nothing the references name is fetched before both pass.
        check_cache(refs, refs_path, storage_options)
        header = _store_header(refs, refs_path)
        layout = cache.get("layout")
        if refs.get("parquet"):
            for key, value in refs["refs"].items():
                if isinstance(key, str) and key.endswith(".zarray"):
                    _check_array_metadata(key, value, refs_path, header, layout)
        else:
            _check_references(refs, refs_path, cache["url"], cache["size"], header, layout)
        url = cache["url"]
    elif refs.get("parquet"):
        url = _attributes(refs, refs_path)["vcfvirtual"]["cache"]["url"]
    else:
        url = refs.get("templates", {}).get(CACHE_TEMPLATE, "file://")
    protocol = urlparse(url).scheme or "file"
    # zarr reads the reference filesystem asynchronously; the cache's must match.
    remote_options = {**(storage_options or {}), "asynchronous": True} if protocol != "file" else None
    options = {"fo": fo, "asynchronous": True, "remote_protocol": protocol, "remote_options": remote_options}
    try:
        if check:
            fs = _guarded_reference_fs(url, cache["size"], refs_path, **options)
        else:
            fs = fsspec.filesystem("reference", **options)
    except ImportError as e:
        raise VcfVirtualError(
            url,
            f"reading this URL needs a library that is not installed ({e})",
            hint="pip install 'vcfvirtual[remote]'",
        ) from None
    return FsspecStore(fs=fs, read_only=True)
