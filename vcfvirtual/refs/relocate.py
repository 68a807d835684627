"""Pointing references at a copy of the cache elsewhere (``vcfvirtual relocate``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from .. import _json
from ..errors import StaleCacheError, UntrustedReferenceError, VcfVirtualError
from ..io import remote as storage
from ..io.fingerprint import Fingerprint
from ..io.outputs import is_parts_folder
from ..manifests.provenance import ATTRIBUTE, Provenance, Where
from .checks import CacheFile, cache_files, copy_differs, group_attributes
from .kerchunk import CACHE_TEMPLATE, KerchunkRefs, load_references, public_cache_url


def cache_target(cache_url: str | os.PathLike[str], cache_name: str, refs_path: Where = None) -> str:
    """The URL references should name for the cache given as ``cache_url``: a URL, or a
    local path (made an absolute ``file://`` URL, not percent-encoded, as the index writes
    it). A local folder (not a cache made of parts), or a URL ending in ``/``, gets
    ``cache_name``; a URL naming no
    path at all (``http://host:port``) is refused, since no cache can be there."""
    cache_url = os.fspath(cache_url)
    if not cache_url:
        raise VcfVirtualError(refs_path, "no cache URL given", hint="give the URL or path the cache is at")
    if storage.is_url(cache_url):
        # For object stores the bucket is the host: the object's key is the path.
        if urlparse(cache_url).path in ("", "/") and not cache_url.endswith("/"):
            raise VcfVirtualError(
                cache_url,
                "names no file, only a host or bucket",
                hint=f"end it with / to put the cache {cache_name} there: {cache_url}/",
            )
        return public_cache_url(cache_url, cache_name)
    path = cache_url.removeprefix("file://")
    # A cache made of parts is a folder itself: that folder is the cache, not its place.
    folder = path.endswith(("/", os.sep)) or (os.path.isdir(path) and not is_parts_folder(Path(path)))
    path = os.path.abspath(path)
    return "file://" + (os.path.join(path, cache_name) if folder else path)


def relocate(refs: KerchunkRefs, cache_url: str, refs_path: Where = None) -> KerchunkRefs:
    """The same references, naming the cache at ``cache_url`` (see :func:`cache_target`)."""
    if CACHE_TEMPLATE not in refs.get("templates", {}):
        raise VcfVirtualError(
            refs_path,
            "these references name the cache in every chunk, not by a template",
            hint="write them again with vcfvirtual index --format json, whose chunks name the cache by a template",
        )
    try:
        attrs = _json.loads(refs["refs"][".zattrs"])
        provenance = Provenance.from_attributes(attrs, refs_path)
    except (KeyError, TypeError, ValueError, UntrustedReferenceError):
        raise VcfVirtualError(
            refs_path,
            "these references do not name a vcfvirtual cache",
            hint="relocate applies to references vcfvirtual index wrote",
        ) from None
    cache_url = cache_target(cache_url, os.path.basename(urlparse(provenance.cache.url).path), refs_path)
    # Only the URL changes: whatever else the attribute holds is written back as it was.
    attrs[ATTRIBUTE]["cache"]["url"] = cache_url
    return {
        **refs,
        "templates": {**refs["templates"], CACHE_TEMPLATE: cache_url},
        "refs": {**refs["refs"], ".zattrs": json.dumps(attrs, separators=(",", ":"))},
    }


def check_relocated_cache(refs: KerchunkRefs, refs_path: Where, storage_options: dict[str, Any] | None = None) -> None:
    """Refuse to point references at a cache that is not there, or not theirs: its size
    and sampled hash must be those recorded when it was indexed (its mtime is a copy's)."""

    cache = Provenance.from_attributes(group_attributes(refs), refs_path).cache
    for file in cache_files(cache):  # the cache, or each of its parts
        _check_copy(file, refs_path, storage_options)


def _check_copy(file: CacheFile, refs_path: Where, storage_options: dict[str, Any] | None) -> None:
    url, expected = file.url, file.fingerprint
    try:
        if storage.is_url(url):
            found = storage.fingerprint(url, storage_options, expected.kind)
        else:
            found = Fingerprint.of(url.removeprefix("file://"), expected.kind)
    except (VcfVirtualError, OSError) as e:
        problem = e.problem if isinstance(e, VcfVirtualError) else e.strerror
        raise StaleCacheError(
            refs_path,
            f"cannot read {file.what} at {url}: {problem}",
            hint="put the cache there first, or pass check=False",
        ) from None
    problem = copy_differs(expected, found)
    if problem:
        raise StaleCacheError(
            refs_path,
            f"{file.what} at {url} is not the one these references were made with: {problem}",
            hint="copy the cache the references name, or pass check=False",
        )


def relocate_file(
    refs_path: str | os.PathLike[str],
    cache_url: str,
    output: str | os.PathLike[str] | None = None,
    *,
    check: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> Path:
    """Rewrite a Kerchunk JSON to name its cache at ``cache_url`` (atomically).

    Parameters
    ----------
    refs_path
        Kerchunk JSON references that ``vcfvirtual index`` wrote.
    cache_url
        Where the cache now is: a URL (``s3://``, ``https://``...) or a local path,
        normalised as :func:`cache_target` says (a folder gets the cache's file name;
        a cache made of parts is a folder itself, named as it is).
    output
        Write the relocated references here instead of replacing ``refs_path``; an
        existing file there must be vcfvirtual references too.
    check
        Refuse unless the cache is there and matches the size and sampled hash the
        references record (default).
    storage_options
        fsspec's options for reaching a remote cache.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    StaleCacheError
        With ``check``: the cache cannot be read at ``cache_url``, or is another file.
    VcfVirtualError
        The references cannot be read or name their cache by no template (Parquet);
        ``cache_url`` names no file; ``output`` is a symbolic link or a file that is not
        references; writing fails (``OutputWriteError``)."""
    from ..io import outputs as cache_mod

    refs_path = Path(refs_path)
    output = Path(output) if output else refs_path
    refs = relocate(load_references(refs_path), cache_url, refs_path)
    if check:
        check_relocated_cache(refs, refs_path, storage_options)
    if output.is_symlink():
        raise VcfVirtualError(
            output,
            "is a symbolic link; it and what it points to are left alone",
            hint="give -o to write the relocated references elsewhere",
        )
    if output != refs_path:
        cache_mod.refuse_foreign_output(output, cache_mod.REFS, force=True, option="-o")
    cache_mod.remove_stale_temporaries(output)
    with cache_mod.atomic_file(output, "the references", "-o", mode="w", opener=open) as f:
        json.dump(refs, f, separators=(",", ":"))
    return output
