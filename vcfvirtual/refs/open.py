"""Opening references as a zarr store, after the checks that make them safe to read."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

import fsspec
from zarr.abc.store import Store

from ..errors import UntrustedReferenceError, VcfVirtualError
from ..io.remote import missing_library
from .checks import (
    UNTRUSTED_HINT,
    check_cache,
    check_references,
    declared_cache,
    group_attributes,
    guarded_reference_fs,
)
from .icechunk import is_icechunk_repo, open_icechunk
from .kerchunk import CACHE_TEMPLATE, KerchunkRefs, load_references, require_parquet
from .relocate import relocate


def open_store(
    refs_path: str | os.PathLike[str],
    *,
    check: bool = True,
    cache_url: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Store:
    """A read-only zarr store over vcfvirtual references, for ``xr.open_zarr``.

    References are treated as untrusted: with ``check`` (the default) every chunk must be
    a byte range of the one cache the attributes declare (and whose fingerprint is
    checked), and every array's metadata must agree with its codec configuration;
    anything else is refused before anything is fetched.

    Parameters
    ----------
    refs_path
        Kerchunk JSON file or Parquet directory, or an Icechunk repository, that
        ``vcfvirtual index`` wrote.
    check
        Check the cache, the sources and every reference first (default). ``False`` reads
        the references as plain Kerchunk does (which follows any URL they name): only for
        references whose author you trust.
    cache_url
        Read the cache from elsewhere than the references say (a copy uploaded to
        ``s3://...`` or served over ``https://...``; a folder URL ending in ``/`` gets the
        cache's file name). Kerchunk JSON only.
    storage_options
        fsspec's options for reaching the cache (e.g. ``{"endpoint_url": ...}`` for an
        S3-compatible service).

    Returns
    -------
    zarr.abc.store.Store
        A read-only store (fsspec's reference filesystem, or an Icechunk session's store).

    Raises
    ------
    StaleCacheError
        The cache (locally, or through range reads) or a reachable source BCF no longer
        matches its fingerprint, or is missing.
    UntrustedReferenceError
        With ``check``: the references name anything but byte ranges of their cache, or
        metadata that disagrees with the codec configuration.
    VcfVirtualError
        The references cannot be read; ``cache_url`` given for Parquet or Icechunk; a
        library needed for the format or URL is not installed.

    Examples
    --------
    >>> import xarray as xr  # doctest: +SKIP
    >>> ds = xr.open_zarr(open_store("cohort.bcf.vcz.json"), consolidated=False)  # doctest: +SKIP
    """
    refs_path = os.fspath(refs_path)
    if is_icechunk_repo(refs_path):
        if cache_url is not None:
            raise VcfVirtualError(
                refs_path,
                "an Icechunk repository names its cache's folder in its configuration",
                hint="write it again with vcfvirtual index --format icechunk",
            )
        return open_icechunk(refs_path, check=check)
    refs = _load_for_reading(refs_path, cache_url)
    if check:
        cache = _checked_cache(refs, refs_path, storage_options)
        return _reference_store(refs, refs_path, cache["url"], storage_options, cache_size=cache["size"])
    if refs.get("parquet"):
        url = group_attributes(refs, refs_path)["vcfvirtual"]["cache"]["url"]
    else:
        url = refs.get("templates", {}).get(CACHE_TEMPLATE, "file://")
    return _reference_store(refs, refs_path, url, storage_options)


def _load_for_reading(refs_path: str, cache_url: str | None) -> KerchunkRefs:
    """The references, pointed at ``cache_url`` when given (Kerchunk JSON only)."""
    refs = load_references(refs_path)
    if not isinstance(refs, dict) or not isinstance(refs.get("refs"), dict):
        raise UntrustedReferenceError(refs_path, "not Kerchunk references: no 'refs' map")
    if refs.get("parquet"):
        require_parquet(refs_path)
        if cache_url is not None:
            raise VcfVirtualError(
                refs_path,
                "Parquet references name the cache in every chunk",
                hint="write them again with vcfvirtual index --format parquet --cache-url",
            )
    elif cache_url is not None:
        refs = relocate(refs, cache_url, refs_path)
    return refs


def _checked_cache(refs: KerchunkRefs, refs_path: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """The declared cache, once it and every reference passed their checks: the cache first
    (missing, changed, not a regular file), then every reference against it, so nothing
    the references name is fetched before both pass."""
    cache = declared_cache(refs, refs_path)
    if cache is None:
        raise UntrustedReferenceError(
            refs_path,
            "the references declare no vcfvirtual cache, so nothing they point at can be checked",
            hint=UNTRUSTED_HINT,
        )
    check_cache(refs, refs_path, storage_options)
    check_references(refs, refs_path, cache)
    return cache


def _reference_store(
    refs: KerchunkRefs,
    refs_path: str,
    url: str,
    storage_options: dict[str, Any] | None,
    cache_size: int | None = None,
) -> Store:
    """fsspec's reference filesystem over ``refs`` as a read-only zarr store; with
    ``cache_size``, guarded so that only ranges of the cache at ``url`` are fetched."""
    from zarr.storage import FsspecStore

    protocol = urlparse(url).scheme or "file"
    # zarr reads the reference filesystem asynchronously; the cache's must match.
    remote_options = {**(storage_options or {}), "asynchronous": True} if protocol != "file" else None
    fo = refs_path if refs.get("parquet") else refs
    options = {"fo": fo, "asynchronous": True, "remote_protocol": protocol, "remote_options": remote_options}
    try:
        if cache_size is not None:
            fs = guarded_reference_fs(url, cache_size, refs_path, **options)
        else:
            fs = fsspec.filesystem("reference", **options)
    except ImportError as e:
        raise missing_library(url, e) from None
    return FsspecStore(fs=fs, read_only=True)
