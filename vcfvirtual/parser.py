"""VirtualiZarr's parser protocol: ``open_virtual_dataset(url, registry, parser=BCFParser())``.

The parser keeps its options in ``__init__`` and does its IO in ``__call__``, all of it
through the caller's :class:`~obspec_utils.registry.ObjectStoreRegistry`: it reads the
references ``vcfvirtual index`` wrote for the BCF at ``url``, runs the checks
:func:`vcfvirtual.open_store` runs, and returns a ManifestStore over the cache that reads
through the same registry. It writes nothing: building the cache is ``vcfvirtual index``'s
job, done once, not a side effect of opening.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO, cast
from urllib.parse import unquote, urlparse

import obstore
from obspec_utils.registry import ObjectStoreRegistry
from obstore.exceptions import BaseError
from virtualizarr.manifests import ManifestStore

from . import (
    _codecs,  # noqa: F401  (registers the codecs, for stale entry points)
    _json,
)
from .errors import StaleCacheError, UntrustedReferenceError, VcfVirtualError
from .io.fingerprint import Fingerprint, digest_of
from .io.outputs import REFS_SUFFIX
from .manifests.provenance import RecordedCache
from .manifests.virtual import manifest_group
from .refs.checked import required_cache
from .refs.checks import CacheFile, cache_files, check_cache, check_references, copy_differs
from .refs.convert import virtual_group
from .refs.kerchunk import KerchunkRefs, resolve_templates


class BCFParser:
    """Open an indexed BCF as a virtual VCF Zarr ManifestStore, through the caller's registry.

    Parameters
    ----------
    refs
        The Kerchunk JSON references to read, as a URL or local path; default
        ``<url>.vcz.json``, the name ``vcfvirtual index`` gives them next to the BCF.
    check
        Check the cache, the sources and every reference first, as
        :func:`vcfvirtual.open_store` does (default). ``False`` trusts the references.

    Examples
    --------
    >>> from virtualizarr import open_virtual_dataset  # doctest: +SKIP
    >>> vds = open_virtual_dataset("file:///data/x.bcf", registry=registry, parser=BCFParser())  # doctest: +SKIP
    >>> vds.vz.to_kerchunk("x.json", format="json", zarr_format=3)  # doctest: +SKIP
    """

    def __init__(self, *, refs: str | Path | None = None, check: bool = True) -> None:
        self.refs = refs
        self.check = check

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """The store of the BCF at ``url``, from the references its index wrote.

        Parameters
        ----------
        url
            The indexed BCF: a local path, ``file://``, ``s3://``... URL the registry reaches.
        registry
            The caller's object store registry: the references, a remote cache's
            fingerprint and, through the returned store, every chunk are read through it.

        Returns
        -------
        ManifestStore
            The virtual VCF Zarr store, its arrays decoding through ``vcfvirtual.bcf``.

        Raises
        ------
        VcfVirtualError
            No references at the expected URL (the hint names ``vcfvirtual index``), or
            the registry reaches no store for it.
        StaleCacheError
            The cache, or a reachable source BCF, changed since it was indexed.
        UntrustedReferenceError
            The references name anything but byte ranges of their cache.
        """
        refs_url = _as_url(self.refs) if self.refs is not None else _as_url(url) + REFS_SUFFIX
        refs = _read_references(refs_url, url, registry)
        if self.check:
            _check(refs, refs_url, registry)
        group = manifest_group(virtual_group({"version": 1, "refs": resolve_templates(refs)}, refs_url))
        return ManifestStore(group, registry=registry)


def _as_url(location: str | Path) -> str:
    """A local path or ``file://`` URL as the ``file://`` URL of its absolute path, unquoted
    (a registry's LocalStore reads the path as it is; ``index`` names local caches so); other
    URLs unchanged."""
    text = str(location)
    parsed = urlparse(text)
    if parsed.scheme not in ("", "file"):
        return text
    return "file://" + os.path.abspath(unquote(parsed.path) if parsed.scheme else text)


def _as_cli_argument(url: str) -> str:
    """``url`` as the command line takes it: a local file by its path, other URLs as they are."""
    return _as_url(url).removeprefix("file://") if urlparse(url).scheme in ("", "file") else url


def _read_references(refs_url: str, url: str, registry: ObjectStoreRegistry) -> KerchunkRefs:
    """The Kerchunk JSON at ``refs_url``, read through the registry."""
    store, path = _resolve(registry, refs_url)
    try:
        data = obstore.get(store, path).bytes()
    except FileNotFoundError:
        if next(iter(obstore.list(store, prefix=path.rstrip("/") + "/", chunk_size=1)), None):
            # A folder: Kerchunk Parquet or an Icechunk repository.
            raise VcfVirtualError(
                refs_url,
                "BCFParser reads Kerchunk JSON references, and this is a folder (Parquet or Icechunk)",
                hint=f"from Parquet: vcfvirtual refs {_as_cli_argument(refs_url)} --format json; else index it again "
                "with --format json",
            ) from None
        raise VcfVirtualError(
            url,
            f"no vcfvirtual index found: {refs_url} does not exist",
            hint=f"vcfvirtual index {_as_cli_argument(url)}",
        ) from None
    except (BaseError, OSError) as e:  # unreachable, refused: obstore's own errors
        raise VcfVirtualError(refs_url, f"cannot read the references: {type(e).__name__}: {e}"[:500]) from None
    try:
        refs = _json.loads(bytes(data))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise VcfVirtualError(refs_url, f"not a Kerchunk JSON file ({e})") from None
    if not isinstance(refs, dict) or not isinstance(refs.get("refs"), dict):
        raise UntrustedReferenceError(refs_url, "not Kerchunk references: no 'refs' map")
    return refs


def _resolve(registry: ObjectStoreRegistry, url: str) -> tuple[Any, str]:
    try:
        store, path = registry.resolve(url)
    except ValueError:
        raise VcfVirtualError(
            url, "the registry given reaches no store for this URL", hint="register a store for its scheme and bucket"
        ) from None
    return store, str(path)


def _check(refs: KerchunkRefs, refs_url: str, registry: ObjectStoreRegistry) -> None:
    """open_store's checks: the cache (and, for a local cache, the sources) against their
    fingerprints, then every reference against the cache, before any chunk is read."""
    cache = required_cache(refs, refs_url)
    if cache["url"].startswith("file://"):
        check_cache(refs, refs_url)
    else:
        for file in cache_files(RecordedCache.from_json(cache, refs_url)):  # the cache, or each part
            _check_copy(file, refs_url, registry)
    check_references(refs, refs_url, cache)


def _check_copy(file: CacheFile, refs_url: str, registry: ObjectStoreRegistry) -> None:
    """A remote cache's (or part's) size and sampled hash, read through the registry (its
    modification time is the upload's, so it is not compared)."""
    url, expected = file.url, file.fingerprint
    store, path = _resolve(registry, url)
    try:
        reader = obstore.open_reader(store, path)
        try:
            # obstore's reader seeks and reads as a binary file does: the windows are fetched as ranges.
            digest = digest_of(cast("BinaryIO", reader), reader.size, expected.kind)
        finally:
            reader.close()
    except FileNotFoundError:
        raise StaleCacheError(refs_url, f"{file.what} {url} is missing", hint="re-run vcfvirtual index") from None
    except (BaseError, OSError) as e:
        raise StaleCacheError(
            refs_url,
            f"cannot reach {file.what} {url}: {type(e).__name__}: {e}"[:500],
            hint="check the registry's store for it, or vcfvirtual relocate",
        ) from None
    found = Fingerprint(reader.size, 0, digest, expected.kind)
    problem = copy_differs(expected, found)
    if problem:
        raise StaleCacheError(
            refs_url,
            f"{file.what} {url} does not match the references: {problem}",
            hint="upload the cache these references were made with, or re-run vcfvirtual index",
        )
