"""Opening references as a zarr store, after the checks that make them safe to read."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import stat
import threading
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from zarr.abc.buffer import Buffer, BufferPrototype
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.buffer import default_buffer_prototype

from .. import _codecs  # noqa: F401  (registers the codecs, for stale entry points)
from ..errors import StaleCacheError, VcfVirtualError
from . import opened
from .formats import is_icechunk_repo
from .guard import ChunkTargets, check_chunk_ref

if TYPE_CHECKING:
    from .checks import InlineChunk
    from .kerchunk import KerchunkRefs

# An open of references opened before with nothing changed (refs/opened.py) imports only
# the modules above: the checks' own (~10 ms in a fresh process) are imported by the
# opens that run them.


def open_store(
    refs_path: str | os.PathLike[str],
    *,
    check: bool = True,
    cache_url: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Store:
    """A read-only zarr store over vcfvirtual references, for ``xr.open_zarr``.

    References are treated as untrusted: with ``check`` (the default) every chunk must be
    a byte range of the one cache the attributes declare, or of one of the parts they
    list for a cache made of parts (each fingerprint checked), and every array's
    metadata must agree with its codec configuration; anything else is refused before
    anything is fetched.

    Parameters
    ----------
    refs_path
        Kerchunk JSON file or Parquet directory, or an Icechunk repository, that
        ``vcfvirtual index`` wrote; a Kerchunk JSON may be a URL (``https://``, ``s3://``).
    check
        Check the cache, the sources and every reference first (default). ``False`` reads
        the references as plain Kerchunk does (which follows any URL they name): only for
        references whose author you trust.
    cache_url
        Read the cache from elsewhere than the references say (a copy uploaded to
        ``s3://...`` or served over ``https://...``; a folder URL ending in ``/`` gets the
        cache's file name). Kerchunk JSON only.
    storage_options
        fsspec's options for reaching the cache, and the references when given as a URL
        (e.g. ``{"endpoint_url": ...}`` for an S3-compatible service).

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
        from .icechunk import open_icechunk

        return open_icechunk(refs_path, check=check)
    if not check:
        return _unchecked_store(refs_path, cache_url, storage_options)
    remembered = opened.recall(refs_path) if cache_url is None else None
    if remembered is not None:
        return LocalCacheStore(remembered.refs, remembered.targets, refs_path)
    return _checked_store(refs_path, cache_url, storage_options)


def _checked_store(refs_path: str, cache_url: str | None, storage_options: dict[str, Any] | None) -> Store:
    """:func:`open_store` of Kerchunk references after every check; what an open of local
    references to a local cache found is kept for the next one (refs/opened.py) when none
    of its files changed just before."""
    from .checked import checked_cache, load_for_reading
    from .checks import chunk_targets, local_files_read

    witness = opened.Witness.start(refs_path) if cache_url is None else None
    refs, digest = load_for_reading(refs_path, cache_url, storage_options)
    local = None if refs.get("parquet") else local_files_read(refs, refs_path)
    keep = witness is not None and local is not None and witness.watch(*local)
    # Kept, the inline chunks are checked now: a later open that takes what was kept checks nothing.
    checked = checked_cache(refs, refs_path, storage_options, digest, defer=not keep)
    if local is not None:
        targets = chunk_targets(checked.cache, refs.get("templates", {}), refs_path)
        if keep and witness is not None:
            witness.remember(targets, checked.header_warnings)
        return LocalCacheStore(refs["refs"], targets, refs_path, checked.inline)
    # fsspec resolves the templates before the guard sees a reference: no template forms.
    guard = chunk_targets(checked.cache, {}, refs_path)
    return _reference_store(refs, refs_path, checked.cache["url"], storage_options, guard=guard, inline=checked.inline)


def _unchecked_store(refs_path: str, cache_url: str | None, storage_options: dict[str, Any] | None) -> Store:
    """:func:`open_store` with ``check=False``: the references as plain Kerchunk reads them."""
    from ..manifests.provenance import Provenance
    from .checked import load_for_reading
    from .checks import group_attributes
    from .kerchunk import CACHE_TEMPLATE

    refs, _ = load_for_reading(refs_path, cache_url, storage_options)
    if refs.get("parquet"):
        url = Provenance.from_attributes(group_attributes(refs, refs_path), refs_path).cache.url
    else:
        url = refs.get("templates", {}).get(CACHE_TEMPLATE, "file://")
    return _reference_store(refs, refs_path, url, storage_options)


def _reference_store(
    refs: KerchunkRefs,
    refs_path: str,
    url: str,
    storage_options: dict[str, Any] | None,
    guard: ChunkTargets | None = None,
    inline: dict[str, InlineChunk] | None = None,
) -> Store:
    """fsspec's reference filesystem over ``refs`` as a read-only zarr store; with
    ``guard``, guarded so that only ranges of the cache at ``url`` (of its parts) are
    fetched, and the ``inline`` chunks checked when first read."""
    import fsspec
    from zarr.storage import FsspecStore

    from .checks import guarded_reference_fs

    protocol = urlparse(url).scheme or "file"
    # zarr reads the reference filesystem asynchronously; the cache's must match.
    remote_options = {**(storage_options or {}), "asynchronous": True} if protocol != "file" else None
    fo = refs_path if refs.get("parquet") else refs
    options = {"fo": fo, "asynchronous": True, "remote_protocol": protocol, "remote_options": remote_options}
    try:
        if guard is not None:
            fs = guarded_reference_fs(guard, refs_path, inline, **options)
        else:
            fs = fsspec.filesystem("reference", **options)
    except ImportError as e:
        from ..io.remote import missing_library

        raise missing_library(url, e) from None
    return FsspecStore(fs=fs, read_only=True)


class LocalCacheStore(Store):
    """A read-only zarr store over checked Kerchunk references into one local cache (a
    file, or a folder of parts).

    What fsspec's reference filesystem does for a local cache, without its costs: building
    it (~10 ms: tokenising the references, wrapping the local filesystem for asyncio) and
    its per-chunk async dispatch. A chunk is one ``pread`` of its file, on a worker thread
    (``asyncio.to_thread``) so the event loop zarr awaits many reads on never blocks: 0.1 ms
    a chunk, where obstore's ``get_range_async`` through a LocalStore took 0.15-0.3 ms
    (docs/design.md, "The Kerchunk writer"). Each file is opened once, when first read.

    Every reference was checked before (:func:`check_references`); each fetch checks its own
    again (one of ``targets``: the cache's URL or a listed part's, within its size), so
    nothing but the cache's files is ever read. The header arrays' inline chunks in
    ``inline`` (their keys checked) have their data checked when first read."""

    supports_writes = False
    supports_deletes = False
    supports_listing = True

    def __init__(
        self, refs: dict[str, Any], targets: ChunkTargets, refs_path: str, inline: dict[str, InlineChunk] | None = None
    ) -> None:
        super().__init__(read_only=True)
        self._refs = refs
        self._inline = dict(inline or {})  # checked and removed as each is first read
        self._targets = targets
        self._cache_url = targets.cache_url
        self._cache_path = targets.cache_url.removeprefix("file://")
        self._refs_path = refs_path
        self._fds: dict[str, int] = {}  # each file's descriptor, by path
        self._fds_lock = threading.Lock()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalCacheStore) and other._refs is self._refs and other._cache_url == self._cache_url

    def __str__(self) -> str:
        return f"vcfvirtual://{self._refs_path}"

    def __repr__(self) -> str:
        return f"LocalCacheStore({self._refs_path!r}, cache={self._cache_path!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Descriptors and locks stay with this process: a copy (a Dask worker's) opens its own.
        state = self.__dict__.copy()
        state["_fds"], state["_fds_lock"] = {}, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fds_lock = threading.Lock()

    def _reference(self, key: str) -> bytes | tuple[str, int, int] | None:
        """What ``key`` holds: metadata or an inlined chunk as bytes, or a chunk's (file,
        offset, length), checked to be the cache's; None for a key the store lacks."""
        value = self._refs.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            pending = self._inline.get(key)
            if pending is not None:
                from .checks import check_inline_chunk

                check_inline_chunk(pending, value, self._refs_path)
                self._inline.pop(key, None)
            return base64.b64decode(value[7:]) if value.startswith("base64:") else value.encode()
        if isinstance(value, dict):
            return json.dumps(value).encode()
        ref = list(value)
        check_chunk_ref(key, ref, self._targets, self._refs_path)
        path = self._targets.files[ref[0]][0].removeprefix("file://")
        return path, int(ref[1]), int(ref[2])

    def _fd(self, path: str) -> int:
        """The descriptor of the cache's file at ``path``, opened on first use, of a regular
        file only (a FIFO swapped in under its name would block its reader forever)."""
        fd = self._fds.get(path)
        if fd is not None:
            return fd
        with self._fds_lock:
            fd = self._fds.get(path)
            if fd is None:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise StaleCacheError(self._refs_path, f"the transcode cache {path} is not a regular file")
                self._fds[path] = fd
        return fd

    def _pread(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of the cache's file at ``path`` from ``offset``: one ``pread``."""
        data = os.pread(self._fd(path), length, offset)
        if len(data) != length:
            raise StaleCacheError(
                self._refs_path,
                f"the transcode cache {path} ends before byte {offset + length}",
                hint="re-run vcfvirtual index --force",
            )
        return data

    def close(self) -> None:
        """Close the files read (a later read opens them again)."""
        with self._fds_lock:
            fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)
        super().close()

    def __del__(self) -> None:
        for fd in getattr(self, "_fds", {}).values():
            with contextlib.suppress(OSError):
                os.close(fd)

    async def get(
        self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        if prototype is None:
            prototype = default_buffer_prototype()
        ref = self._reference(key)
        if ref is None:
            return None
        # A chunk's read leaves the event loop (zarr awaits many gets at once on it).
        data = ref if isinstance(ref, bytes) else await asyncio.to_thread(self._pread, *ref)
        if isinstance(byte_range, RangeByteRequest):
            data = data[byte_range.start : byte_range.end]
        elif isinstance(byte_range, OffsetByteRequest):
            data = data[byte_range.offset :]
        elif isinstance(byte_range, SuffixByteRequest):
            data = data[len(data) - min(byte_range.suffix, len(data)) :]
        return prototype.buffer.from_bytes(data)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def exists(self, key: str) -> bool:
        return key in self._refs

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()

    async def delete(self, key: str) -> None:
        self._check_writable()

    async def list(self) -> AsyncIterator[str]:
        for key in list(self._refs):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in list(self._refs):
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        if prefix:
            names = {k[len(prefix) + 1 :].split("/")[0] for k in self._refs if k.startswith(prefix + "/")}
        else:
            names = {k.split("/")[0] for k in self._refs}
        for name in names:
            if name:
                yield name
