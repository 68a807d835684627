"""The store's ``vcfvirtual`` group attribute as one typed value: where its records came
from, where its cache is, how it was chunked and what the scan measured.

The index writes it (:func:`vcfvirtual.manifests.vcf_zarr.build_store_group`) and every
reader of a store reads it back through :meth:`Provenance.from_json`, which refuses a
malformed value with one :class:`~vcfvirtual.errors.UntrustedReferenceError` naming the
references: the attribute arrives with references from anywhere, as the codec's
configuration does (``ChunkSpec``, the pattern this follows). :meth:`Provenance.to_json`
writes the JSON object earlier versions wrote, key for key, so their references stay valid.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..cache.names import LAYOUTS, LayoutName, is_part_name, layout_name
from ..errors import UntrustedReferenceError
from ..io.fingerprint import Fingerprint

#: The group attribute's name.
ATTRIBUTE = "vcfvirtual"

Where = str | os.PathLike[str] | None


@dataclass(frozen=True)
class RecordedSource:
    """An input the store's records came from: its path or URL, and its fingerprint then
    (None in references that recorded none)."""

    path: str
    fingerprint: Fingerprint | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, **(self.fingerprint.to_json() if self.fingerprint else {})}


@dataclass(frozen=True)
class RecordedPart:
    """One part of a cache made of parts: its file name in the cache's folder
    (``part-000123``) and its fingerprint when written."""

    name: str
    fingerprint: Fingerprint

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, **self.fingerprint.to_json()}


@dataclass(frozen=True)
class RecordedCache:
    """The transcode cache: where readers find it, its layout (None in references written
    before layouts were recorded) and its fingerprint when written.

    A cache made of parts (``parts`` not empty: the ``columns`` layout) is a folder at
    ``url``; each part has its own fingerprint, and ``fingerprint`` records only their
    total size (no time, no digest: a folder has none worth checking)."""

    url: str
    layout: LayoutName | None
    fingerprint: Fingerprint
    parts: tuple[RecordedPart, ...] = ()

    @classmethod
    def of_parts(cls, url: str, layout: LayoutName | None, parts: tuple[RecordedPart, ...]) -> RecordedCache:
        """The record of a folder of ``parts``."""
        total = sum(p.fingerprint.size for p in parts)
        return cls(url, layout, Fingerprint(size=total, mtime_ns=0, digest=None), parts)

    @classmethod
    def from_json(cls, value: Any, source: Where) -> RecordedCache:
        """The ``cache`` entry of the provenance (:meth:`to_json`), checked for shape.

        Raises
        ------
        UntrustedReferenceError
            It is malformed (no URL, no byte count for a size, a part not named ``part-NNNNNN``)."""
        return _cache(value, source)

    @property
    def size(self) -> int:
        """The cache's size in bytes, as indexed (of all its parts)."""
        return self.fingerprint.size

    def to_json(self) -> dict[str, Any]:
        layout = {} if self.layout is None else {"layout": self.layout}
        parts = {"parts": [p.to_json() for p in self.parts]} if self.parts else {}
        return {"url": self.url, **layout, **self.fingerprint.to_json(), **parts}


@dataclass(frozen=True)
class Dimensions:
    """The sizes the scan chose, which the header alone does not give: alleles, ploidy
    (None without GT) and each INFO/FORMAT field's width (``"FORMAT/AD": 3``)."""

    alleles: int
    ploidy: int | None
    fields: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alleles": self.alleles, "fields": dict(self.fields)}
        if self.ploidy is not None:
            out["ploidy"] = self.ploidy
        return out


Stats = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class RecordedScan:
    """What the scan measured that the arrays keep only rounded (a dtype, a width), so
    that appending files folds their records into exactly what indexing every file at
    once gives: the chunk length the cache was cut at (the store's is shorter when it
    holds fewer records), the records, the POS and rlen ranges, the most alleles and GT
    values per call, and per dictionary key the INFO and FORMAT value statistics (most
    values per vector, least and greatest integer)."""

    chunk_length: int
    records: int
    pos_range: tuple[int, int]
    rlen_range: tuple[int, int]
    max_alleles: int
    max_ploidy: int
    info_stats: Stats
    format_stats: Stats

    def to_json(self) -> dict[str, Any]:
        return {
            "chunk_length": self.chunk_length,
            "records": self.records,
            "pos_range": list(self.pos_range),
            "rlen_range": list(self.rlen_range),
            "max_alleles": self.max_alleles,
            "max_ploidy": self.max_ploidy,
            "info_stats": [list(row) for row in self.info_stats],
            "format_stats": [list(row) for row in self.format_stats],
        }


@dataclass(frozen=True)
class Provenance:
    """The ``vcfvirtual`` attribute of a store.

    Parameters
    ----------
    sources : tuple of RecordedSource
        The inputs, in the order their records are stored.
    cache : RecordedCache
        The transcode cache.
    variants_chunk_size : int or None
        Variants per chunk of every variants array (None: not recorded, which the
        reference checks refuse).
    zero_copy : bool
        Whether the cache is the (uncompressed) input itself.
    samples_chunk_size : int or None
        The samples blocks asked for (``columns`` layout only; None otherwise).
    fields : dict or None
        The fields renamed or left out (:meth:`vcfvirtual.bcf.fields.FieldMap.to_attribute`;
        checked against the header by its readers), None when every field is kept as named.
    dimensions : Dimensions or None
        What the scan measured; None before the manifests are built (and in references
        written before it was recorded, which the reference checks refuse).
    scan : RecordedScan or None
        What appending more files needs of the scan (None in references written before
        it was recorded: those stores cannot be appended to).
    """

    sources: tuple[RecordedSource, ...]
    cache: RecordedCache
    variants_chunk_size: int | None
    zero_copy: bool
    samples_chunk_size: int | None = None
    fields: Mapping[str, Any] | None = None
    dimensions: Dimensions | None = None
    scan: RecordedScan | None = None

    def to_json(self) -> dict[str, Any]:
        """The attribute's JSON object, keys in the order the index has always written them."""
        out: dict[str, Any] = {
            "sources": [s.to_json() for s in self.sources],
            "cache": self.cache.to_json(),
        }
        if self.variants_chunk_size is not None:
            out["variants_chunk_size"] = self.variants_chunk_size
        out["zero_copy"] = self.zero_copy
        if self.samples_chunk_size is not None:
            out["samples_chunk_size"] = self.samples_chunk_size
        if self.fields is not None:
            out["fields"] = self.fields
        if self.dimensions is not None:
            out["dimensions"] = self.dimensions.to_json()
        if self.scan is not None:
            out["scan"] = self.scan.to_json()
        return out

    @classmethod
    def from_json(cls, value: Any, source: Where) -> Provenance:
        """The provenance a store's attribute records.

        Parameters
        ----------
        value : object
            The attribute's value, as parsed from the references.
        source : str, path or None
            The references, named in errors.

        Returns
        -------
        Provenance

        Raises
        ------
        UntrustedReferenceError
            ``value`` is not an object the index writes: no cache URL, a size that is not
            a byte count, an unknown layout, sources or dimensions of the wrong shape.
        """
        if not isinstance(value, dict):
            raise UntrustedReferenceError(source, f"the references' {ATTRIBUTE} attribute is not a JSON object")
        samples = value.get("samples_chunk_size")
        fields = value.get("fields")
        if samples is not None and not _is_count(samples):
            raise UntrustedReferenceError(source, f"the references' samples_chunk_size {samples!r} is not a count")
        if fields is not None and not isinstance(fields, dict):
            raise UntrustedReferenceError(source, "the references' recorded field choice is not a JSON object")
        chunk = value.get("variants_chunk_size")
        if chunk is not None and not _is_count(chunk):
            raise UntrustedReferenceError(source, f"the references' variants_chunk_size {chunk!r} is not a count")
        return cls(
            sources=_sources(value.get("sources"), source),
            cache=_cache(value.get("cache"), source),
            variants_chunk_size=chunk,
            zero_copy=bool(value.get("zero_copy")),
            samples_chunk_size=samples,
            fields=fields,
            dimensions=_dimensions(value.get("dimensions"), source),
            scan=_scan(value.get("scan"), source),
        )

    @classmethod
    def from_attributes(cls, attributes: Mapping[str, Any], source: Where) -> Provenance:
        """The provenance in a store's group attributes.

        Raises
        ------
        UntrustedReferenceError
            There is none (not a store vcfvirtual wrote), or it is malformed."""
        if ATTRIBUTE not in attributes:
            raise UntrustedReferenceError(
                source, f"the references have no {ATTRIBUTE} attribute: not a vcfvirtual store"
            )
        return cls.from_json(attributes[ATTRIBUTE], source)


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _fingerprint(value: dict[str, Any], what: str, source: Where) -> Fingerprint:
    size = value.get("size")
    if not _is_count(size):
        raise UntrustedReferenceError(source, f"the references' {what} size {size!r} is not a byte count")
    try:
        return Fingerprint.from_json(value)
    except (TypeError, ValueError) as e:
        raise UntrustedReferenceError(source, f"the references' {what} fingerprint is malformed ({e})") from None


def _cache(value: Any, source: Where) -> RecordedCache:
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        raise UntrustedReferenceError(source, f"the references' {ATTRIBUTE} attribute names no cache URL")
    layout = layout_name(value.get("layout"))
    if layout is None and "layout" in value:
        raise UntrustedReferenceError(
            source, f"the references' cache layout {value['layout']!r} is none of {', '.join(LAYOUTS)}"
        )
    return RecordedCache(value["url"], layout, _fingerprint(value, "cache", source), _parts(value.get("parts"), source))


def _parts(value: Any, source: Where) -> tuple[RecordedPart, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(p, dict) and isinstance(p.get("name"), str) and is_part_name(p["name"]) for p in value
    ):
        raise UntrustedReferenceError(source, "the references' cache parts are not a list of part names")
    return tuple(RecordedPart(p["name"], _fingerprint(p, f"cache part {p['name']}", source)) for p in value)


def _sources(value: Any, source: Where) -> tuple[RecordedSource, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(s, dict) and isinstance(s.get("path"), str) for s in value):
        raise UntrustedReferenceError(source, "the references' recorded sources are not a list of paths")
    return tuple(
        RecordedSource(s["path"], _fingerprint(s, f"source {s['path']}", source) if "size" in s else None)
        for s in value
    )


def _dimensions(value: Any, source: Where) -> Dimensions | None:
    if value is None:
        return None
    fields = value.get("fields") if isinstance(value, dict) else None
    ploidy = value.get("ploidy") if isinstance(value, dict) else None
    if (
        not isinstance(fields, dict)
        or not _is_count(value.get("alleles"))
        or not (ploidy is None or _is_count(ploidy))
        or not all(isinstance(k, str) and _is_count(v) for k, v in fields.items())
    ):
        raise UntrustedReferenceError(
            source, "the references' recorded dimensions (vcfvirtual.dimensions) are malformed"
        )
    return Dimensions(value["alleles"], ploidy, fields)


def _is_int(value: Any) -> bool:
    return type(value) is int


def _int_pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(map(_is_int, value)):
        return (value[0], value[1])
    return None


def _stats(value: Any) -> Stats | None:
    if not isinstance(value, list) or not all(
        isinstance(row, list) and len(row) == 3 and all(map(_is_int, row)) for row in value
    ):
        return None
    return tuple((row[0], row[1], row[2]) for row in value)


def _scan(value: Any, source: Where) -> RecordedScan | None:
    if value is None:
        return None
    bad = UntrustedReferenceError(source, "the references' recorded scan (vcfvirtual.scan) is malformed")
    if not isinstance(value, dict):
        raise bad
    counts = [value.get(k) for k in ("chunk_length", "records", "max_alleles", "max_ploidy")]
    info, fmt = _stats(value.get("info_stats")), _stats(value.get("format_stats"))
    pos, rlen = _int_pair(value.get("pos_range")), _int_pair(value.get("rlen_range"))
    if not all(map(_is_count, counts)) or not counts[0] or None in (info, fmt, pos, rlen):
        raise bad
    length, records, alleles, ploidy = (int(c or 0) for c in counts)
    assert info is not None and fmt is not None and pos is not None and rlen is not None
    return RecordedScan(length, records, pos, rlen, alleles, ploidy, info, fmt)
