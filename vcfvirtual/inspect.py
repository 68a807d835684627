"""What a vcfvirtual store holds: per array the facts ``vcf2zarr inspect`` prints (dtype,
stored and decoded bytes, chunks, shape, codecs), plus where its cache is and whether the
fingerprints recorded at indexing still match.

Stored bytes are read from the references alone (the byte ranges' lengths and the
inlined chunks' sizes), so inspecting a store never reads its cache, and works on a
store whose cache has changed or gone: that is one of the things it reports.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import math
import os
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import zarr

from .bcf.fields import PREFIX, FieldChoice
from .errors import StaleCacheError, VcfVirtualError

if TYPE_CHECKING:
    from zarr.abc.store import Store

# Keys under an array's prefix that are metadata documents, not chunks.
_METADATA_KEYS = frozenset({".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"})


@dataclass(frozen=True)
class ArraySummary:
    """One array of a store.

    Attributes
    ----------
    name : str
        Array path, e.g. ``call_genotype``.
    dtype : str
        Data type as zarr reports it.
    dimensions : tuple of str
        Dimension names (``_ARRAY_DIMENSIONS`` or Zarr v3 ``dimension_names``).
    shape, chunk_shape : tuple of int
        Array and chunk shapes.
    nchunks : int
        Chunks in the array's chunk grid.
    stored_bytes : int
        Bytes its chunks occupy: the lengths of the referenced byte ranges plus inlined
        chunks. Every variants-dimension array references the same ranges of the cache
        (a chunk of records), so these overlap between arrays.
    decoded_bytes : int
        Size of the decoded array (zarr's ``nbytes``: string arrays count numpy's
        fixed size per value, not the characters).
    codecs : tuple of str
        Filters, compressor and codecs, by name, in the order they apply on write.
    """

    name: str
    dtype: str
    dimensions: tuple[str, ...]
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    nchunks: int
    stored_bytes: int
    decoded_bytes: int
    codecs: tuple[str, ...]

    @property
    def ratio(self) -> float:
        """Decoded bytes per stored byte (``nan`` when nothing is stored)."""
        return self.decoded_bytes / self.stored_bytes if self.stored_bytes else math.nan


@dataclass(frozen=True)
class StoreSummary:
    """A vcfvirtual store as :func:`inspect_store` reads it from the references: its
    arrays, its cache and whether the cache still matches.

    Attributes
    ----------
    path : str
        The references inspected.
    refs_format : str
        ``"json"`` (Kerchunk JSON), ``"parquet"`` (Kerchunk Parquet directory) or
        ``"icechunk"`` (Icechunk repository).
    arrays : tuple of ArraySummary
        Largest stored first, like ``vcf2zarr inspect``.
    num_variants, num_samples : int
        Records and samples in the store.
    vcf_zarr_version : str or None
        The ``vcf_zarr_version`` group attribute.
    cache_url : str or None
        Where the references say the transcode cache is.
    cache_layout : str or None
        ``"columns"``, ``"bgzf"`` or ``"raw"``.
    cache_bytes : int or None
        The cache's size when it was indexed.
    zero_copy : bool
        True when the store references an uncompressed source BCF itself, with no cache.
    sources : tuple of str
        The BCF(s) indexed, in order.
    variants_chunk_size : int or None
        Variants per chunk.
    fingerprints_match : bool
        Whether ``vcfvirtual.open_store`` accepts the cache (and any reachable source) as
        the one indexed.
    fingerprint_problem : str or None
        Why it does not, as ``open_store``'s ``StaleCacheError`` says.
    attributes : dict
        The store's whole ``vcfvirtual`` group attribute, as written by ``index``.
    """

    path: str
    refs_format: str
    arrays: tuple[ArraySummary, ...]
    num_variants: int
    num_samples: int
    vcf_zarr_version: str | None
    cache_url: str | None
    cache_layout: str | None
    cache_bytes: int | None
    zero_copy: bool
    sources: tuple[str, ...]
    variants_chunk_size: int | None
    fingerprints_match: bool
    fingerprint_problem: str | None = None
    attributes: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def stored_bytes(self) -> int:
        """Bytes of distinct storage: the cache's, plus the chunks inlined in the references.

        The sum over arrays would count the cache once per variants-dimension array."""
        inlined = sum(a.stored_bytes for a in self.arrays if "variants" not in a.dimensions)
        return (self.cache_bytes or 0) + inlined

    @property
    def cache_parts(self) -> int:
        """The files of a cache made of parts (a folder: ``columns``), else 0."""
        parts = (self.attributes.get("cache") or {}).get("parts")
        return len(parts) if isinstance(parts, list) else 0

    def _layout_detail(self) -> str:
        if self.zero_copy:
            return " (the source BCF itself, no cache)"
        n = self.cache_parts
        return f", a folder of {n} part{'s' * (n != 1)}" if n else ""

    def fingerprint_status(self) -> str:
        """``"matches"``, or the problem ``open_store`` reports."""
        return "matches" if self.fingerprints_match else self.fingerprint_problem or "does not match"

    def fields_text(self) -> str:
        """The INFO/FORMAT fields renamed and left out on request when indexed, or
        ``"every field, under its ID"``."""
        try:
            choice = FieldChoice.from_attribute(self.attributes, self.path)
        except VcfVirtualError as e:  # inspect reports what it finds, as for fingerprints
            return e.problem
        parts = []
        if choice.renames:
            parts.append("renamed " + ", ".join(f"{k} -> {PREFIX[k.split('/', 1)[0]]}{v}" for k, v in choice.renames))
        if choice.exclude:
            parts.append("omitted on request " + ", ".join(choice.exclude))
        return "; ".join(parts) or "every field, under its ID"

    def to_text(self) -> str:
        """The summary as plain aligned text: the array table, then the store's facts."""
        header = (
            "name",
            "dtype",
            "stored",
            "size",
            "ratio",
            "nchunks",
            "chunk_size",
            "avg_chunk_stored",
            "shape",
            "chunk_shape",
            "codecs",
        )
        rows = []
        for a in self.arrays:
            per_chunk = (a.decoded_bytes / a.nchunks, a.stored_bytes / a.nchunks) if a.nchunks else (0, 0)
            rows.append(
                (
                    a.name,
                    a.dtype,
                    format_bytes(a.stored_bytes),
                    format_bytes(a.decoded_bytes),
                    _format_ratio(a.ratio),
                    str(a.nchunks),
                    format_bytes(per_chunk[0]),
                    format_bytes(per_chunk[1]),
                    _format_shape(a.shape),
                    _format_shape(a.chunk_shape),
                    ", ".join(a.codecs) or "-",
                )
            )
        lines = [format_table(header, rows), ""]
        facts = [
            ("references", f"{self.path} ({self.refs_format})"),
            (
                "records",
                f"{self.num_variants} variants x {self.num_samples} samples"
                + (f", {self.variants_chunk_size} variants per chunk" if self.variants_chunk_size else ""),
            ),
            ("cache", self.cache_url or "-"),
            ("layout", (self.cache_layout or "-") + self._layout_detail()),
            ("cache size", format_bytes(self.cache_bytes) if self.cache_bytes is not None else "-"),
            ("sources", ", ".join(self.sources) or "-"),
            ("fields", self.fields_text()),
            ("fingerprints", self.fingerprint_status()),
        ]
        width = max(len(k) for k, _ in facts)
        lines += [f"{k + ':':{width + 1}} {v}" for k, v in facts]
        return "\n".join(lines)


def inspect_store(refs: str | os.PathLike[str], *, storage_options: dict[str, Any] | None = None) -> StoreSummary:
    """Summarise the store that ``vcfvirtual index`` wrote at ``refs``.

    Parameters
    ----------
    refs : str or os.PathLike
        Kerchunk JSON file, Kerchunk Parquet directory or Icechunk repository.
    storage_options : dict, optional
        fsspec options for reaching references or a cache given as a URL.

    Returns
    -------
    StoreSummary
        Arrays and store-level facts. A cache that no longer matches its fingerprints is
        reported in ``fingerprints_match`` / ``fingerprint_problem``, not raised: the
        references are still read (sizes come from them, not from the cache).

    Raises
    ------
    VcfVirtualError
        When ``refs`` cannot be read as vcfvirtual references.
    """
    path = os.fspath(refs)
    try:
        store, group, info = open_group(path, check=True, storage_options=storage_options)
        match, problem = True, None
    except StaleCacheError as e:
        match, problem = False, e.problem + (f" ({e.hint})" if e.hint else "")
        store, group, info = open_group(path, check=False, storage_options=storage_options)
    attrs = dict(group.attrs)
    arrays = dict(group.arrays())
    stored = _run(_stored_sizes(store, arrays))
    summaries = [_array_summary(name, a, stored[name]) for name, a in arrays.items()]
    summaries.sort(key=lambda s: (-s.stored_bytes, s.name))
    cache = info.get("cache") or {}
    sources = info.get("sources") or []
    position = arrays.get("variant_position")
    samples = arrays.get("sample_id")
    return StoreSummary(
        path=path,
        refs_format=_refs_format(path),
        arrays=tuple(summaries),
        num_variants=int(position.shape[0]) if position is not None else 0,
        num_samples=int(samples.shape[0]) if samples is not None else 0,
        vcf_zarr_version=str(attrs["vcf_zarr_version"]) if attrs.get("vcf_zarr_version") is not None else None,
        cache_url=cache.get("url"),
        cache_layout=cache.get("layout"),
        cache_bytes=cache.get("size"),
        zero_copy=bool(info.get("zero_copy")),
        sources=tuple(str(s.get("path")) for s in sources if s.get("path")),
        variants_chunk_size=info.get("variants_chunk_size"),
        fingerprints_match=match,
        fingerprint_problem=problem,
        attributes=info,
    )


def sample_names(refs: str | os.PathLike[str], *, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The store's sample names, in its samples order (as ``bcftools query -l`` lists a
    BCF's, and ``vcztools query -l`` a VCF Zarr store's). ``refs`` and ``storage_options``
    as for :func:`inspect_store`.

    Raises
    ------
    StaleCacheError
        The cache no longer matches its fingerprint (names are data read from it, so they
        are read only from a cache that is the one indexed).
    VcfVirtualError
        When ``refs`` cannot be read as vcfvirtual references.
    """
    path = os.fspath(refs)
    _, group, _ = open_group(path, check=True, storage_options=storage_options)
    sample_id = group["sample_id"] if "sample_id" in group else None
    if not isinstance(sample_id, zarr.Array):
        raise VcfVirtualError(path, "the store has no sample_id array")
    return [str(name) for name in np.asarray(sample_id[:])]


def open_group(
    path: str, *, check: bool, storage_options: dict[str, Any] | None
) -> tuple[Store, zarr.Group, dict[str, Any]]:
    """(store, zarr group, its ``vcfvirtual`` attribute) of vcfvirtual references, or a
    ``VcfVirtualError`` naming ``path`` when they are not that."""
    from .refs.open import open_store

    try:
        store = open_store(path, check=check, storage_options=storage_options)
        group = zarr.open_group(store, mode="r")
    except VcfVirtualError:
        raise
    # References without group metadata surface as KeyError and the like from the
    # reference filesystem or zarr; to the user they are simply not a store.
    except (zarr.errors.BaseZarrError, FileNotFoundError, KeyError, TypeError, ValueError) as e:
        raise VcfVirtualError(path, f"not a store written by vcfvirtual index ({type(e).__name__}: {e})") from None
    info = dict(group.attrs).get("vcfvirtual")
    if not isinstance(info, dict):
        raise VcfVirtualError(path, "not a store written by vcfvirtual index (no 'vcfvirtual' group attribute)")
    return store, group, info


def _refs_format(path: str) -> str:
    if os.path.isdir(path):
        return "icechunk" if os.path.exists(os.path.join(path, "repo")) else "parquet"
    return "json"


def _array_summary(name: str, array: zarr.Array, stored: tuple[int, int]) -> ArraySummary:
    meta = array.metadata
    if meta.zarr_format == 2:
        codecs = [f.get_config()["id"] for f in (meta.filters or ())]
        if meta.compressor is not None:
            codecs.append(meta.compressor.get_config()["id"])
        named: Any = array.attrs.get("_ARRAY_DIMENSIONS") or ()
        dims = [str(d) for d in named]
    else:
        codecs = [c.to_dict()["name"] for c in meta.codecs]
        dims = [str(d) for d in meta.dimension_names or ()]
    return ArraySummary(
        name=name,
        dtype=str(array.dtype),
        dimensions=tuple(dims),
        shape=tuple(array.shape),
        chunk_shape=tuple(array.chunks),
        nchunks=int(array.nchunks),
        stored_bytes=stored[0],
        decoded_bytes=int(array.nbytes),
        codecs=tuple(codecs),
    )


async def _stored_sizes(store: Store, arrays: dict[str, zarr.Array]) -> dict[str, tuple[int, int]]:
    """(bytes, stored chunks) per array, from the references: no chunk is read.

    Chunk keys come from each array's chunk grid rather than the store's listing, which
    for Kerchunk Parquet leaves out some inlined chunks."""
    references = getattr(getattr(store, "fs", None), "references", None)

    async def size(key: str) -> int | None:
        if references is not None:
            try:
                value = references[key]
            except KeyError:
                return None
            # fsspec's ReferenceFileSystem reports an inlined chunk's size as its
            # base64 text's (JSON) or as 0 (Parquet); the reference itself says.
            found = _reference_size(value)
            if found is not None:
                return found
        try:
            return await store.getsize(key)
        except FileNotFoundError:
            return None

    async def one(name: str, array: zarr.Array) -> tuple[str, tuple[int, int]]:
        meta = array.metadata
        grid = [range(math.ceil(n / c)) for n, c in zip(array.shape, array.chunks)]
        keys = [f"{name}/{meta.encode_chunk_key(coords)}" for coords in itertools.product(*grid)]
        sizes = [s for s in await asyncio.gather(*(size(k) for k in keys)) if s is not None]
        return name, (int(sum(sizes)), len(sizes))

    return dict(await asyncio.gather(*(one(n, a) for n, a in arrays.items())))


def _reference_size(value: object) -> int | None:
    """Bytes a Kerchunk reference stands for: a range's length, or the inlined data's
    decoded size; None for a reference to a whole file (its size is the file's)."""
    if isinstance(value, (list, tuple)):
        return int(value[2]) if len(value) == 3 else None
    if isinstance(value, str):
        if value.startswith("base64:"):
            return len(base64.b64decode(value[len("base64:") :]))
        return len(value.encode())
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    return None


def _run[T](coro: Coroutine[Any, Any, T]) -> T:
    # zarr's stores (the reference filesystem opened asynchronously, Icechunk) belong to
    # zarr's own event loop, so the listing runs there too. zarr has no public way to run
    # a coroutine on that loop yet: zarr.core.sync.sync is the private one, and
    # zarr-developers/zarr-python#3997 proposes it public as zarr.run, taken when present.
    run = getattr(zarr, "run", None)
    if run is not None:
        return cast("T", run(coro))
    from zarr.core.sync import sync

    return sync(coro)


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, as ``vcf2zarr inspect`` prints them (``1.5 KiB``)."""
    n = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} bytes" if unit == "bytes" else f"{n:.2f}".rstrip("0").rstrip(".") + f" {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _format_ratio(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.2g}"


def _format_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def format_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns padded to their widest cell, numbers-like cells right-aligned."""
    cells = [tuple(header), *[tuple(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    right = [
        i for i, h in enumerate(header) if h in ("stored", "size", "ratio", "nchunks", "chunk_size", "avg_chunk_stored")
    ]

    def line(r: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *map(line, cells[1:])])
