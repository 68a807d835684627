"""Icechunk repositories whose arrays are virtual chunks of the cache."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import interrupts
from ..errors import OutputWriteError, UntrustedReferenceError, VcfVirtualError
from ..io.outputs import write_hint
from ..manifests.virtual import VirtualGroup, manifest_group
from .checks import check_cache, check_references, declared_cache, icechunk_as_references
from .formats import is_icechunk_repo  # noqa: F401  (its home before formats.py)

if TYPE_CHECKING:
    from zarr.abc.store import Store


def write_icechunk(group: VirtualGroup, path: Path, cache_url: str) -> str:
    """An Icechunk repository at ``path`` whose arrays are virtual chunks of the cache.

    The cache's folder is the repository's virtual chunk container (local files); the
    first commit holds the whole store. Returns the snapshot id."""
    icechunk = _import_icechunk(path)
    try:
        # A signal's exception raised while Icechunk's Rust code calls back into Python
        # would make it panic (and print a traceback): the handler waits for the end.
        with interrupts.deferred():
            return _write_repository(icechunk, group, path, cache_url)
    except icechunk.IcechunkError as e:
        # Icechunk's Rust side reports a full disk or a read-only folder as a StorageError
        # whose text ends in "(os error N)": made the one line JSON and Parquet give.
        raise storage_write_error(path, str(e)) from None


def storage_write_error(path: Path, message: str) -> OutputWriteError:
    """One OutputWriteError for an Icechunk write failure: the OS error its message names
    (the same words and hint as a failed file write), else its first line."""
    found = re.search(r"\(os error (\d+)\)", message)
    if found:
        error = OSError(int(found.group(1)), os.strerror(int(found.group(1))))
        return OutputWriteError(
            path, f"cannot write the references: {error.strerror}", hint=write_hint(error, "refs_path=")
        )
    first = next((line.strip() for line in message.splitlines() if line.strip()), "unknown error")
    return OutputWriteError(path, f"cannot write the references: Icechunk says {first[:300]}")


def _write_repository(icechunk: Any, group: VirtualGroup, path: Path, cache_url: str) -> str:
    prefix = cache_url.rsplit("/", 1)[0] + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(prefix.removeprefix("file://")))
    )
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)), config, authorize_virtual_chunk_access=_icechunk_access(prefix)
    )
    session = repo.writable_session("main")
    # The group's own virtual Dataset, not ManifestStore.to_virtual_dataset: that one also
    # opens the store with xarray, quadratic in the arrays (53 s, not 0.7 s, for 1,000 INFO
    # fields; docs/design.md, "The Kerchunk writer"), for nothing a fully virtual Dataset uses.
    manifest_group(group).to_virtual_dataset().vz.to_icechunk(session.store)
    return session.commit(f"vcfvirtual index: {cache_url}")


def _import_icechunk(path: str | os.PathLike[str]) -> ModuleType:
    try:
        import icechunk
    except ImportError:
        raise VcfVirtualError(path, "Icechunk is not installed", hint="pip install 'vcfvirtual[icechunk]'") from None
    # Icechunk's logging is left as the process has it (the command line quiets it).
    return icechunk


def _icechunk_access(prefix: str) -> dict[str, Any]:
    import icechunk

    return {prefix: icechunk.credentials.LocalFileSystemAccess}


def open_icechunk(path: str | os.PathLike[str], *, check: bool = True, branch: str = "main") -> Store:
    """A read-only store over the Icechunk repository that ``index --format icechunk`` wrote."""
    import zarr

    icechunk = _import_icechunk(path)

    storage = icechunk.local_filesystem_storage(os.fspath(path))
    probe = icechunk.Repository.open(storage)
    group = zarr.open_group(probe.readonly_session(branch).store, mode="r", zarr_format=3)
    attrs: dict[str, Any] = dict(group.attrs)
    cache = declared_cache({"refs": {".zattrs": attrs}}, path)
    if cache is None:
        raise UntrustedReferenceError(
            path, "the repository declares no vcfvirtual cache, so nothing it points at can be checked"
        )
    cache_url = cache["url"]
    if check:
        check_cache({"refs": {".zattrs": attrs}}, path)
        # Every array's zarr.json, as open_store checks a Kerchunk JSON's .zarray keys.
        check_references(icechunk_as_references(group, attrs, path), path, cache, metadata_only=True)
    repo = icechunk.Repository.open(
        storage, authorize_virtual_chunk_access=_icechunk_access(cache_url.rsplit("/", 1)[0] + "/")
    )
    return repo.readonly_session(branch).store
