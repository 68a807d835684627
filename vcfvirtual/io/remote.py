"""Sources and outputs named by URL (``s3://``, ``gs://``, ``http(s)://``), through fsspec.

A source is streamed (read once, in large blocks, never downloaded whole first). Outputs
are written to a local temporary and uploaded when complete: an object store shows an
object only once its upload has finished, so a failed run leaves nothing under the final
name, as the local rename does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import OutputWriteError, VcfVirtualError
from .fingerprint import DIGEST, Fingerprint, digest_of, digest_of_windows, windows

if TYPE_CHECKING:  # obstore's config types exist for type checkers only
    from fsspec import AbstractFileSystem
    from fsspec.spec import AbstractBufferedFile
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import ClientConfig, S3Config

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
# Large reads: each request to an object store costs a round trip.
READ_BLOCK = 16 * 1024 * 1024


def is_url(path: object) -> TypeGuard[str]:
    """A location fsspec must reach (``file://`` is a local path)."""
    return isinstance(path, str) and bool(_URL.match(path)) and not path.startswith("file://")


def missing_library(url: str, e: ImportError) -> VcfVirtualError:
    """The error for a URL whose fsspec protocol library is not installed."""
    return VcfVirtualError(
        url, f"reading this URL needs a library that is not installed ({e})", hint="pip install 'vcfvirtual[remote]'"
    )


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[AbstractFileSystem, str]:
    """(fsspec filesystem, path within it) for ``url``; a missing protocol library is
    an error naming the extra to install."""
    import fsspec.core

    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as e:
        raise missing_library(url, e) from None
    except ValueError as e:
        raise VcfVirtualError(url, f"not a URL fsspec can open ({e})") from None


def open_input(url: str, storage_options: dict[str, Any] | None = None) -> AbstractBufferedFile:
    """A readable, seekable file object over ``url`` with its ``size``."""
    fs, path = filesystem(url, storage_options)
    try:
        return fs.open(path, "rb", block_size=READ_BLOCK, cache_type="readahead")
    except FileNotFoundError:
        raise VcfVirtualError(url, "cannot read: no such object") from None
    except (OSError, PermissionError) as e:
        raise VcfVirtualError(url, f"cannot read: {e}") from None


def _version(info: dict) -> int:
    """Something that changes when the object is rewritten: its modification time, or a
    number made of its ETag, when the store gives one (0: none)."""
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is not None:
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                return int(value.timestamp() * 1e9) if hasattr(value, "timestamp") else int(float(value) * 1e9)
    etag = str(info.get("ETag") or info.get("etag") or "").strip('"')
    return int(etag[:15], 16) if re.fullmatch(r"[0-9a-fA-F]{15,}", etag) else 0


def fingerprint(url: str, storage_options: dict | None = None, kind: str = DIGEST) -> Fingerprint:
    """The fingerprint a local file gets, through range reads: size, version, the
    sampled digest of ``kind``."""
    fs, path = filesystem(url, storage_options)
    try:
        info = fs.info(path)
        with fs.open(path, "rb", block_size=1 << 20) as f:
            size = int(info["size"])
            return Fingerprint(size=size, mtime_ns=_version(info), digest=digest_of(f, size, kind), kind=kind)
    except Exception as e:  # noqa: BLE001 - the remote library's own (botocore, aiohttp...)
        raise _error(url, e) from None


# Requests in flight at once while fingerprinting (a cache of many parts asks for ~18 windows each).
MAX_CONCURRENT = 64


def fingerprints(
    urls: Sequence[str], storage_options: dict | None = None, kinds: Sequence[str] | None = None
) -> list[Fingerprint | VcfVirtualError]:
    """:func:`fingerprint` of each URL (its digest of ``kinds[i]``), the requests issued
    together where the filesystem is asynchronous (HTTP, S3, GCS): every object's size at
    once, then every window of every object at once, two round trips however many files.
    Each URL's failure is returned in its place (the caller names the first), not raised."""
    kinds = list(kinds) if kinds is not None else [DIGEST] * len(urls)
    try:
        located = [filesystem(url, storage_options) for url in urls]
    except VcfVirtualError as e:  # no library for the protocol: the same for every URL
        return [e for _ in urls]
    fs = located[0][0] if located else None
    if fs is None or not getattr(fs, "async_impl", False) or any(f is not fs for f, _ in located):
        return [_or_error(url, storage_options, kind) for url, kind in zip(urls, kinds)]
    from fsspec.asyn import sync

    paths = [path for _, path in located]
    found: list[Fingerprint | VcfVirtualError] = sync(fs.loop, _fingerprints, fs, list(urls), paths, kinds)
    return found


def _or_error(url: str, storage_options: dict | None, kind: str) -> Fingerprint | VcfVirtualError:
    """:func:`fingerprint`, its error returned rather than raised."""
    try:
        return fingerprint(url, storage_options, kind)
    except VcfVirtualError as e:
        return e


async def _fingerprints(
    fs: Any, urls: list[str], paths: list[str], kinds: list[str]
) -> list[Fingerprint | VcfVirtualError]:
    """The two rounds of :func:`fingerprints`, on the filesystem's own event loop."""
    limit = asyncio.Semaphore(MAX_CONCURRENT)

    async def bounded(request: Awaitable[Any]) -> Any:
        async with limit:
            return await request

    async def window(path: str, offset: int, length: int) -> bytes:
        return await bounded(fs._cat_file(path, start=offset, end=offset + length)) if length else b""

    infos = await asyncio.gather(*(bounded(fs._info(p)) for p in paths), return_exceptions=True)
    spans = [windows(size) if (size := _size(info)) is not None else [] for info in infos]
    requests = [window(p, o, n) for p, span in zip(paths, spans) for o, n in span]
    data = iter(await asyncio.gather(*requests, return_exceptions=True))
    return [
        _fingerprint_of(url, info, span, [next(data) for _ in span], kind)
        for url, info, span, kind in zip(urls, infos, spans, kinds)
    ]


def _size(info: object) -> int | None:
    return int(info["size"]) if isinstance(info, dict) and info.get("size") is not None else None


def _fingerprint_of(
    url: str, info: object, span: list[tuple[int, int]], got: list[object], kind: str
) -> Fingerprint | VcfVirtualError:
    """One object's fingerprint from its info and windows as fetched, or the error
    :func:`fingerprint` raises for the first request that failed."""
    for result in (info, *got):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):  # an interrupt, not the remote's answer
                raise result
            return _error(url, result)
    size = _size(info)
    if size is None:
        return VcfVirtualError(url, "cannot read: the server gives no size")
    for (offset, length), window in zip(span, got):
        if not isinstance(window, bytes) or len(window) != length:
            # A server ignoring the range (a whole file where a window was asked) is no fingerprint.
            n = len(window) if isinstance(window, bytes) else 0
            return VcfVirtualError(url, f"cannot read: {n} bytes came for the {length} at {offset}")
    assert isinstance(info, dict)
    digest = digest_of_windows(size, [w for w in got if isinstance(w, bytes)], kind)
    return Fingerprint(size=size, mtime_ns=_version(info), digest=digest, kind=kind)


def _error(url: str, e: Exception) -> VcfVirtualError:
    """What :func:`fingerprint` raises for ``e``."""
    if isinstance(e, FileNotFoundError):
        return VcfVirtualError(url, "cannot read: no such object")
    if isinstance(e, OSError):
        return VcfVirtualError(url, f"cannot read: {e}")
    return VcfVirtualError(
        url, f"cannot read: {type(e).__name__}: {e}", hint="check the URL, the credentials and storage_options="
    )


def unchanged(url: str, before: Fingerprint, storage_options: dict | None = None) -> bool:
    """Whether the object still has the size and version it had (cheap: no reads)."""
    fs, path = filesystem(url, storage_options)
    info = fs.info(path)
    return int(info["size"]) == before.size and _version(info) == before.mtime_ns


def exists(url: str, storage_options: dict | None = None) -> bool:
    fs, path = filesystem(url, storage_options)
    return fs.exists(path)


def upload(local: str | os.PathLike[str], url: str, storage_options: dict | None = None) -> None:
    """Put the finished local file at ``url``; whatever part arrived is removed on failure."""
    fs, path = filesystem(url, storage_options)
    try:
        fs.put_file(str(local), path)
    except BaseException as e:
        with contextlib.suppress(Exception):
            fs.rm_file(path)
        if isinstance(e, OSError):
            raise OutputWriteError(url, f"cannot upload: {e}") from None
        raise


def remove(url: str, storage_options: dict | None = None) -> None:
    fs, path = filesystem(url, storage_options)
    with contextlib.suppress(FileNotFoundError):
        fs.rm_file(path)


def object_store_registry(url: str, storage_options: dict[str, Any] | None = None) -> ObjectStoreRegistry:
    """An obstore registry reaching ``url``'s bucket or host, configured from the fsspec
    storage options (key/secret/endpoint), for VirtualiZarr's ManifestStore."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import from_url

    options = storage_options or {}
    endpoint = options.get("endpoint_url") or options.get("client_kwargs", {}).get("endpoint_url")
    config = _s3_config(options, endpoint) if url.startswith(("s3://", "s3a://")) else None
    scheme, rest = url.split("://", 1)
    root = f"{scheme}://{rest.split('/', 1)[0]}"
    plain_http = url.startswith("http://") or (endpoint or "").startswith("http://")
    client: ClientConfig | None = {"allow_http": True} if plain_http else None
    store = from_url(root, config=config or None, client_options=client)
    return ObjectStoreRegistry({root: store})


def _s3_config(options: dict, endpoint: str | None) -> S3Config:
    """obstore's S3 settings named by fsspec's (s3fs) storage options."""
    config: S3Config = {}
    if options.get("key"):
        config["access_key_id"] = options["key"]
    if options.get("secret"):
        config["secret_access_key"] = options["secret"]
    if options.get("token"):
        config["session_token"] = options["token"]
    region = options.get("client_kwargs", {}).get("region_name")
    if region:
        config["region"] = region
    if endpoint:
        config["endpoint"] = endpoint
    if options.get("anon"):
        config["skip_signature"] = True
    return config
