"""Sources and outputs named by URL (``s3://``, ``gs://``, ``http(s)://``), through fsspec.

A source is streamed (read once, in large blocks, never downloaded whole first). Outputs
are written to a local temporary and uploaded when complete: an object store shows an
object only once its upload has finished, so a failed run leaves nothing under the final
name, as the local rename does.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import OutputWriteError, VcfVirtualError
from .fingerprint import DIGEST, Fingerprint, digest_of

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
    except FileNotFoundError:
        raise VcfVirtualError(url, "cannot read: no such object") from None
    except OSError as e:
        raise VcfVirtualError(url, f"cannot read: {e}") from None
    except Exception as e:  # noqa: BLE001 - the remote library's own (botocore, aiohttp...)
        raise VcfVirtualError(
            url, f"cannot read: {type(e).__name__}: {e}", hint="check the URL, the credentials and storage_options="
        ) from None


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
