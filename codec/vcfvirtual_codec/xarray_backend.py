"""An xarray backend: ``xr.open_dataset("https://host/c.vcz.json", engine="vcfvirtual", chunks={})``.

The one line a collaborator runs, the same on zarr 2 (sgkit) and zarr 3, for references
and caches on a local disk, over HTTP or on S3. fsspec's reference filesystem must be
opened to match the zarr that reads it: zarr 3 reads it asynchronously and so needs the
cache's filesystem asynchronous too, zarr 2 reads it synchronously and refuses an
asynchronous one ("Reference-FS's target filesystem must have same value of
asynchronous"). This backend picks for the zarr it finds.

With the full ``vcfvirtual`` package importable (Python >= 3.12), the store comes from
``vcfvirtual.open_store``, which checks the cache's fingerprint and every reference before
anything is read. With this codec alone, the references are read as plain Kerchunk reads
them; the codec still checks every chunk it decodes. ``vcfvirtual`` is imported only when
a dataset is opened, never by this module: the codec does not depend on the indexer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from xarray.backends import BackendEntrypoint

from .errors import VcfVirtualError

if TYPE_CHECKING:
    import xarray as xr
    from xarray.backends.common import T_PathFileOrDataStore
    from zarr.abc.store import Store

    # What xr.open_zarr reads: a zarr 3 store, or (zarr 2) a mapping of keys to bytes.
    ZarrStore = Store | MutableMapping[str, bytes]


class VcfVirtualBackend(BackendEntrypoint):
    """Open the Kerchunk references that ``vcfvirtual index`` writes as a VCF Zarr dataset."""

    description = "Open a vcfvirtual store (the Kerchunk JSON of vcfvirtual index) as a VCF Zarr dataset"
    url = "https://github.com/sgkit-dev/vcf-zarr-spec"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "check", "storage_options")

    def open_dataset(
        self,
        filename_or_obj: T_PathFileOrDataStore,
        *,
        drop_variables: str | Iterable[str] | None = None,
        check: bool = True,
        storage_options: dict[str, Any] | None = None,
    ) -> xr.Dataset:
        """``check``: with ``vcfvirtual`` installed, refuse a changed cache or references
        that point anywhere but their cache (``False`` reads them unchecked). Without it,
        references are read unchecked whatever ``check`` says. ``storage_options``:
        fsspec's options for the references' URL and the cache's (e.g.
        ``{"anon": True}``, ``{"endpoint_url": ...}``)."""
        import xarray as xr

        path = _path(filename_or_obj)
        store = _open_store(path, check, storage_options)
        # chunks=None: lazily indexed arrays whose encoding names the zarr chunks, so that
        # xr.open_dataset(..., chunks={}) gives dask chunks of one zarr chunk each, as
        # xr.open_zarr does.
        dataset: xr.Dataset = xr.open_zarr(store, consolidated=False, drop_variables=drop_variables, chunks=None)
        return dataset

    def guess_can_open(self, filename_or_obj: T_PathFileOrDataStore) -> bool:
        try:
            return _path(filename_or_obj).endswith(".vcz.json")
        except TypeError:
            return False


def _path(filename_or_obj: T_PathFileOrDataStore) -> str:
    """The references' path or URL; a file object or data store is not one (TypeError)."""
    if not isinstance(filename_or_obj, (str, os.PathLike)):
        raise TypeError(f"expected a path or URL to a .vcz.json, got {type(filename_or_obj).__name__}")
    return str(os.fspath(filename_or_obj))


def _open_store(path: str, check: bool, storage_options: dict[str, Any] | None) -> ZarrStore:
    """The full package's checked store when it is installed, else plain references."""
    try:
        from vcfvirtual.refs.open import open_store
    except ImportError:  # not installed, or this Python is older than it needs
        return plain_reference_store(path, storage_options)
    return open_store(path, check=check, storage_options=storage_options)


def zarr_major() -> int:
    import zarr

    return int(zarr.__version__.split(".", 1)[0])


def plain_reference_store(path: str, storage_options: dict[str, Any] | None = None) -> ZarrStore:
    """fsspec's reference filesystem over the references at ``path`` (a local file or a
    URL), as a read-only store for the installed zarr: zarr 3 needs it and the cache's
    filesystem asynchronous, zarr 2 needs both synchronous.

    Raises ``VcfVirtualError`` for an Icechunk repository (the full package opens those)
    and when the library a URL needs is not installed (s3fs: the codec's ``s3`` extra)."""
    if os.path.isdir(os.path.join(path, "repo")):
        raise VcfVirtualError(
            path, "an Icechunk repository opens with the full vcfvirtual package", hint="vcfvirtual.open_store"
        )
    try:
        return _reference_store(path, storage_options)
    except ImportError as e:
        raise VcfVirtualError(
            path, f"reading this needs a library that is not installed ({e})", hint='pip install "./codec[s3]"'
        ) from None


def _reference_store(path: str, storage_options: dict[str, Any] | None) -> ZarrStore:
    import fsspec

    options = dict(storage_options or {})
    # The references' own URL is reached with the same options as the cache (one service
    # holds both, as share.md lays them out); a local file needs none.
    target = options if "://" in path and not path.startswith("file://") else {}
    if zarr_major() >= 3:
        from zarr.storage import FsspecStore

        fs = fsspec.filesystem(
            "reference",
            fo=path,
            target_options=target,
            remote_options={**options, "asynchronous": True},
            asynchronous=True,
        )
        return FsspecStore(fs=fs, read_only=True)
    fs = fsspec.filesystem("reference", fo=path, target_options=target, remote_options=options)
    mapper: MutableMapping[str, bytes] = fs.get_mapper("")
    if isinstance(fs.references, dict):  # Kerchunk JSON: add the keys, zarr 2 keeps fsspec's batched reads
        reference_all_false_masks(fs.references)
        return mapper
    # Parquet: its references load lazily, a field at a time, so the left-out keys are
    # answered as they are asked for (zarr 2 reads this mapping a key at a time).
    return MasksFromGenotypes(mapper)


MASK, GENOTYPE = "call_genotype_mask/", "call_genotype/"


def reference_all_false_masks(references: Any) -> None:
    """The call_genotype_mask chunks the references leave out (the all-False masks of
    complete GT blocks: the index references none, as bio2zarr's store writes none)
    referenced again as call_genotype's chunk of the same key, the GT block whose preamble
    the mask codec answers from, for zarr 2: zarr 3 fills a missing chunk with the fill
    value (False), zarr 2 leaves it as allocated where the array declares no fill value,
    and the mask declares none (a Zarr v2 fill value makes xarray read False as NaN).
    Kerchunk JSON's references (a dict); Parquet's go through :class:`MasksFromGenotypes`."""
    if not isinstance(references, dict):
        return
    for key in list(references):
        chunk = _chunk_of(key, GENOTYPE)
        if chunk is not None:
            references.setdefault(MASK + chunk, references[key])


def _chunk_of(key: str, array: str) -> str | None:
    """The chunk's name (``1.0.0``) of a chunk key of ``array`` (its prefix, ``name/``),
    or None: another array's key, or metadata (``.zarray``)."""
    if key.startswith(array) and not key[len(array) :].startswith("."):
        return key[len(array) :]
    return None


def _genotype_key(key: str) -> str | None:
    """call_genotype's chunk key for a call_genotype_mask chunk key (not its metadata)."""
    chunk = _chunk_of(key, MASK)
    return None if chunk is None else GENOTYPE + chunk


class MasksFromGenotypes(MutableMapping[str, bytes]):
    """Read-only references for zarr 2 where a call_genotype_mask chunk the references
    leave out reads as call_genotype's chunk of the same key (see
    :func:`reference_all_false_masks`), for references that cannot be listed up front
    (Parquet's)."""

    def __init__(self, references: MutableMapping[str, bytes]):
        self._references = references

    def __getitem__(self, key: str) -> bytes:
        try:
            value = self._references[key]
        except KeyError:
            value = None
        # fsspec reads a Parquet reference that is absent as ``[nan]`` when pandas parses
        # the file with pyarrow, and its mapper then returns ``{}``, not a KeyError.
        if isinstance(value, bytes | bytearray | memoryview):
            return value
        genotype = _genotype_key(key)
        if genotype is None:
            raise KeyError(key)
        return self._references[genotype]

    def __contains__(self, key: object) -> bool:
        if key in self._references:
            return True
        genotype = _genotype_key(key) if isinstance(key, str) else None
        return genotype is not None and genotype in self._references

    def __iter__(self) -> Iterator[str]:
        return iter(self._references)

    def __len__(self) -> int:
        return len(self._references)

    def __setitem__(self, key: str, value: bytes) -> None:
        raise PermissionError(f"the references are read-only ({key})")

    def __delitem__(self, key: str) -> None:
        raise PermissionError(f"the references are read-only ({key})")
