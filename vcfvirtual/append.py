"""Growing a store with more files (``vcfvirtual index --append``), re-indexing nothing it holds.

A store in the ``columns`` layout is a folder of parts, each a run of whole variants
chunks. Appending files indexes only their records, into new parts written beside the
old (by the workers, as any partitioned index: :func:`vcfvirtual.cache.write.write_cache_partitioned`),
and writes the references again: the old chunks' references are kept as they were, the
arrays' shapes, dtypes and widths are those the scan of every file would give (the
store records what its scan measured: :class:`~vcfvirtual.manifests.provenance.RecordedScan`).

Zarr's chunks are regular, so when the store's last chunk is partial the first new
records complete it: the task writing the first new part reads that chunk's segments
from the cache and joins them to the new records' (:mod:`vcfvirtual.cache.columns_join`).
The old parts are never written to; the old partial chunk is then referenced no more.

Here: what is read of the existing store (:class:`ExistingStore`), what the writers are
told (:func:`continuation`), and how the old and new halves are folded into one scan and
one set of ranges (pure functions); :func:`vcfvirtual.api.index` runs the stages.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from vcfvirtual_codec.spec import CODEC_ID, LOCAL_KINDS, SAMPLE_KINDS

from . import _json
from .bcf.fields import FieldChoice
from .bcf.header import BCFHeader
from .cache.base import ChunkRanges, Continuation, SegmentRanges, complete_counts
from .cache.columns import DEFAULT_SAMPLES_CHUNK_SIZE, FILE_MAGIC, FLAG_GT_SHIFTED, KIND_CODES, SegmentPlan
from .cache.columns_join import StoredSegment, location_of
from .errors import VcfVirtualError
from .manifests.provenance import Provenance, RecordedScan
from .manifests.vcf_zarr import segment_of
from .refs.formats import RefsFormat
from .scan.results import REGION_COLUMNS, ScanResult, continue_rows, fold_stats

APPEND_HINT = "index every file again into a new store (vcfvirtual index A.bcf B.bcf -o NEW.vcz.json)"


@dataclass(frozen=True)
class ExistingStore:
    """What appending needs of a store: its references, provenance and recorded scan,
    header, region rows, and every chunk's segments in its parts."""

    refs_path: Path
    refs_format: RefsFormat
    provenance: Provenance
    scan: RecordedScan
    header: BCFHeader
    region_rows: np.ndarray  # (rows, REGION_COLUMNS) int64, as the scan made them
    ranges: SegmentRanges
    local_alleles: bool

    @property
    def field_choice(self) -> FieldChoice:
        """The fields the store kept and renamed: the grown store keeps the same."""
        return FieldChoice.from_attribute(self.provenance.to_json(), self.refs_path)

    @property
    def cache_url(self) -> str:
        return self.provenance.cache.url

    @property
    def cache_folder(self) -> str:
        """Where the new parts go: the folder's local path, or its URL."""
        url = self.cache_url
        return url.removeprefix("file://") if url.startswith("file://") else url


def require_appendable(provenance: Provenance, refs_path: Path) -> RecordedScan:
    """The recorded scan of a store that can grow: a ``columns`` cache made of parts,
    indexed by a version that recorded its scan.

    Raises
    ------
    VcfVirtualError
        Any other store, named, with the way through."""

    def refuse(problem: str) -> VcfVirtualError:
        return VcfVirtualError(refs_path, f"cannot append to this store: {problem}", hint=APPEND_HINT)

    if provenance.zero_copy or provenance.cache.layout != "columns" or not provenance.cache.parts:
        layout = "zero copy" if provenance.zero_copy else f"the {provenance.cache.layout} layout"
        raise refuse(f"its cache is in {layout}; only a columns cache (a folder of parts) grows")
    if provenance.scan is None:
        raise refuse("it was indexed by a vcfvirtual that did not record its scan (vcfvirtual.scan)")
    return provenance.scan


def existing_store(
    refs_path: Path, refs_format: RefsFormat, refs: dict[str, Any], provenance: Provenance, header: BCFHeader
) -> ExistingStore:
    """The store's :class:`ExistingStore`, from its references (templates resolved:
    :func:`vcfvirtual.refs.convert.load_all_references`), checked by ``open_store``.

    Raises
    ------
    VcfVirtualError
        The store cannot be appended to (:func:`require_appendable`), or its references
        are not as the index writes them."""
    scan = require_appendable(provenance, refs_path)
    r = refs["refs"]
    try:
        arrays = _codec_arrays(r)
        local = any(spec["kind"] in LOCAL_KINDS or spec["kind"] == "local_alleles" for spec, _ in arrays.values())
        ranges = _stored_ranges(arrays, r, header, provenance, scan)
        rows = _region_rows(r)
    except (KeyError, ValueError, TypeError) as e:
        raise VcfVirtualError(
            refs_path, f"not references of a store this version can append to ({type(e).__name__}: {e})"
        ) from None
    return ExistingStore(refs_path, refs_format, provenance, scan, header, rows, ranges, local)


def _codec_arrays(r: dict[str, Any]) -> dict[str, tuple[dict[str, Any], tuple[int, ...]]]:
    """Each variants array's codec configuration and chunk grid."""
    out = {}
    for key, value in r.items():
        if not key.endswith("/.zarray"):
            continue
        zarray = _json.loads(value)
        spec = next((f for f in zarray.get("filters") or [] if f.get("id") == CODEC_ID), None)
        if spec is not None:
            grid = tuple(-(-s // c) for s, c in zip(zarray["shape"], zarray["chunks"]))
            out[key.removesuffix("/.zarray")] = (spec, grid)
    return out


def _stored_ranges(
    arrays: dict[str, tuple[dict[str, Any], tuple[int, ...]]],
    r: dict[str, Any],
    header: BCFHeader,
    provenance: Provenance,
    scan: RecordedScan,
) -> SegmentRanges:
    """Every chunk's segments in the store's parts, from its arrays' references (an array
    reads one segment per chunk and samples block; several arrays share one). With local
    alleles, call_LAD reads AD's and GT's segments in one range, call_LPL GT's and PL's:
    AD and PL are what those ranges hold beside GT."""
    names = {f.key: f.name for f in header.info}, {f.key: f.name for f in header.formats}
    n_chunks = -(-scan.records // scan.chunk_length)
    parts = tuple(p.name for p in provenance.cache.parts)
    chunk_part = np.full(n_chunks, -1, np.int32)
    segments: dict[str, ChunkRanges] = {}
    compressors: dict[str, str] = {}
    local: dict[str, ChunkRanges] = {}
    samples_chunk_size = 0
    masks = {name: entry for name, entry in arrays.items() if entry[0]["kind"] == "genotype_mask"}
    for name, (spec, grid) in arrays.items():
        kind = spec["kind"]
        if name in masks:  # its all-False chunks left out: read below, against GT's
            continue
        field = names[0 if kind == "info" else 1].get(spec["key"]) if kind in ("info", "format") else None
        segment = segment_of(kind, field)
        ranges = _array_ranges(name, kind in SAMPLE_KINDS, grid, r, parts, chunk_part)
        samples_chunk_size = spec.get("samples_chunk_size", 0) or samples_chunk_size
        if kind in ("local_ad", "local_pl"):
            local[kind], compressors[segment] = ranges, spec["compressor"]
            continue
        if segment in segments and not _same(segments[segment], ranges):
            raise ValueError(f"{name} reads other ranges of segment {segment} than another array does")
        segments[segment], compressors[segment] = ranges, spec["compressor"]
    if local:
        segments.update(_beside_gt(local, segments[segment_of("genotype")]))
    if (chunk_part < 0).any():
        raise ValueError("a chunk no array reads")
    gt_complete = None
    for name, (spec, grid) in masks.items():
        gt_complete = _mask_complete(name, spec, grid, r, segments[segment_of("genotype")], parts, chunk_part)
    # What the index recorded of the segments it wrote, kept should no chunk be written.
    versions = {name: int(spec.get("version", 1)) for name, (spec, _) in arrays.items()}
    return SegmentRanges(
        segments,
        compressors,
        samples_chunk_size,
        parts,
        chunk_part,
        gt_complete=gt_complete,
        config_versions=versions,
    )


def _mask_complete(
    name: str,
    spec: dict[str, Any],
    grid: tuple[int, ...],
    r: dict[str, Any],
    gt: ChunkRanges,
    parts: tuple[str, ...],
    chunk_part: np.ndarray,
) -> np.ndarray:
    """The GT blocks' complete counts as call_genotype_mask's references tell them
    (:attr:`~vcfvirtual.cache.base.SegmentRanges.gt_complete`): the ploidy where it left a
    chunk out (all False: checked against the block's preamble when the store was
    opened), 0 (not known) where it reads the chunk, which must be GT's range."""
    blocks, rest = grid[1], ".0" * (len(grid) - 2)
    complete = np.zeros((grid[0], blocks), np.uint8)
    for k in range(grid[0]):
        for b in range(blocks):
            entry = r.get(f"{name}/{k}.{b}{rest}")
            if entry is None:
                complete[k, b] = spec["ploidy"]
                continue
            url, offset, length = entry
            if parts[int(chunk_part[k])] != url.rsplit("/", 1)[-1] or (offset, length) != (
                int(gt.offsets[k, b]),
                int(gt.lengths[k, b]),
            ):
                raise ValueError(f"{name} chunk {k}.{b} reads other bytes than call_genotype's")
    return complete


def _array_ranges(
    name: str, blocked: bool, grid: tuple[int, ...], r: dict[str, Any], parts: tuple[str, ...], chunk_part: np.ndarray
) -> ChunkRanges:
    """One array's chunk ranges, ``(n_chunks,)`` or ``(n_chunks, n_blocks)``; each
    chunk's part noted in ``chunk_part`` (every array must agree on it)."""
    part_index = {part: i for i, part in enumerate(parts)}
    blocks = grid[1] if blocked else 1
    rest = ".0" * (len(grid) - (2 if blocked else 1))
    table = np.zeros((grid[0], blocks, 2), np.uint64)
    for k in range(grid[0]):
        for b in range(blocks):
            chunk = f"{k}.{b}" if blocked else str(k)
            url, offset, length = r[f"{name}/{chunk}{rest}"]
            table[k, b] = (offset, length)
            index = part_index.get(url.rsplit("/", 1)[-1], -1)
            if index < 0 or chunk_part[k] not in (-1, index):
                raise ValueError(f"{name} chunk {chunk} is in {url}, not in a part of the store's chunk {k}")
            chunk_part[k] = index
    if not blocked:
        table = table[:, 0]
    return ChunkRanges(np.ascontiguousarray(table[..., 0]), np.ascontiguousarray(table[..., 1]))


def _same(a: ChunkRanges, b: ChunkRanges) -> bool:
    return np.array_equal(a.offsets, b.offsets) and np.array_equal(a.lengths, b.lengths)


def _beside_gt(local: dict[str, ChunkRanges], gt: ChunkRanges) -> dict[str, ChunkRanges]:
    """AD's and PL's segments from call_LAD's (AD then GT) and call_LPL's (GT then PL) ranges."""
    out = {}
    if "local_ad" in local:
        lad = local["local_ad"]
        out[segment_of("local_ad")] = ChunkRanges(lad.offsets, gt.offsets - lad.offsets)
    if "local_pl" in local:
        lpl = local["local_pl"]
        out[segment_of("local_pl")] = ChunkRanges(gt.offsets + gt.lengths, lpl.lengths - gt.lengths)
    return out


def _region_rows(r: dict[str, Any]) -> np.ndarray:
    """The region index as the scan made it, from its inlined chunk."""
    zarray = _json.loads(r["region_index/.zarray"])
    shape = tuple(zarray["shape"])
    if not shape[0]:
        return np.empty((0, REGION_COLUMNS), np.int64)
    raw = base64.b64decode(r["region_index/0.0"].removeprefix("base64:"))
    values = np.frombuffer(raw, np.dtype(zarray["dtype"]))[: shape[0] * shape[1]]
    return values.reshape(shape).astype(np.int64)


def continuation(store: ExistingStore, local_alleles: bool) -> Continuation:
    """What the writers of the new parts are told: the chunk length, the parts so far,
    and the store's last chunk when partial, each of its segments located and described
    as the writer's plan has it (which the stored preamble must match)."""
    scan = store.scan
    length = scan.chunk_length
    lead = scan.records % length
    first_part = len(store.provenance.cache.parts)
    header = (location_of(store.cache_url, store.ranges.parts[0]), len(FILE_MAGIC))
    if not lead:
        return Continuation(length, first_part, *header)
    plan = SegmentPlan(store.header, store.ranges.samples_chunk_size, local_alleles, store.field_choice)
    chunk = scan.records // length
    ranges = store.ranges
    location = location_of(store.cache_url, ranges.parts[int(ranges.chunk_part[chunk])])
    stored = []
    for s in plan.write_order:
        name, block, kind, key, width, flags, compressor = plan.segments[s]
        table = ranges.segments[name]
        at = (chunk, block) if table.offsets.ndim == 2 else (chunk,)
        stored.append(
            StoredSegment(
                name,
                block,
                location,
                int(table.offsets[at]),
                int(table.lengths[at]),
                kind,
                key if kind in (KIND_CODES["info"], KIND_CODES["format"]) else -1,
                width,
                bool(flags & FLAG_GT_SHIFTED),
                compressor,
            )
        )
    return Continuation(length, first_part, *header, lead, tuple(stored))


def grown_scan(store: ExistingStore, new: ScanResult) -> ScanResult:
    """The scan of the store's records then the new ones, as one scan of every file gives
    it (the new scan's chunks count from the store's last, partial or next)."""
    old = store.scan
    first_chunk = old.records // old.chunk_length
    rows = new.region_rows.copy()
    rows[:, 0] += first_chunk
    # The old partial chunk's last contig run may go on in the new records: one row.
    old_rows, rows = continue_rows(store.region_rows, rows)
    both = new.num_records and old.records

    def span(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (min(a[0], b[0]), max(a[1], b[1])) if both else (a if old.records else b)

    return dataclasses.replace(
        new,
        header=store.header,
        chunk_length=old.chunk_length,
        num_records=old.records + new.num_records,
        # (chunk_offsets stay the new scan's: nothing past the cache's writers reads them.)
        region_rows=np.concatenate([old_rows, rows]),
        pos_range=span(old.pos_range, new.pos_range),
        rlen_range=span(old.rlen_range, new.rlen_range),
        max_alleles=max(old.max_alleles, new.max_alleles),
        max_ploidy=max(old.max_ploidy, new.max_ploidy),
        info_stats=_folded(old.info_stats, new.info_stats),
        format_stats=_folded(old.format_stats, new.format_stats),
    )


def _folded(old: tuple[tuple[int, int, int], ...], new: np.ndarray) -> np.ndarray:
    """Per-key (most values, least, greatest) statistics of both scans."""
    out = np.array(old, np.int64).reshape(-1, 3)
    if out.shape[0] < new.shape[0]:
        raise ValueError("the new files declare keys the store's header does not")
    fold_stats(out, new)
    return out


def grown_ranges(store: ExistingStore, new: SegmentRanges) -> SegmentRanges:
    """The store's chunks before its partial last one (kept where they are), then the
    new parts' chunks (the first of which completes it). No new part (no records
    appended): the store's ranges as they are, with the configuration versions its
    references record (:attr:`~vcfvirtual.cache.base.SegmentRanges.config_versions`);
    else the arrays take this version's, which its new segments may need."""
    old = store.ranges
    keep = store.scan.records // store.scan.chunk_length
    if not new.parts:
        return old
    segments = {
        name: ChunkRanges(
            np.concatenate([table.offsets[:keep], new.segments[name].offsets]),
            np.concatenate([table.lengths[:keep], new.segments[name].lengths]),
        )
        for name, table in old.segments.items()
    }
    chunk_part = np.concatenate([old.chunk_part[:keep], new.chunk_part + len(old.parts)]).astype(np.int32)
    # The old chunks' counts as the store's mask references told them, then the new parts'.
    counts = complete_counts(old), complete_counts(new)
    gt_complete = (
        np.concatenate([counts[0][:keep], counts[1]]) if counts[0] is not None and counts[1] is not None else None
    )
    return SegmentRanges(
        segments,
        old.compressors,
        old.samples_chunk_size,
        old.parts + new.parts,
        chunk_part,
        new.part_fingerprints,
        gt_complete=gt_complete,
    )


def refuse_given_twice(store: ExistingStore, sources: tuple[Path | str, ...]) -> None:
    """A file the store holds already would double its records."""
    held = {s.path for s in store.provenance.sources}
    for source in sources:
        key = source if isinstance(source, str) else os.path.abspath(source)
        if key in held:
            raise VcfVirtualError(
                source, f"the store {store.refs_path} holds this file already", hint="append only files it lacks"
            )


def refuse_other_chunking(store: ExistingStore, variants_chunk_size: int | None, samples_chunk_size: int) -> None:
    """Chunk sizes given with an append must be the store's (the default samples size
    stands for "as the store has it")."""
    asked = []
    if variants_chunk_size is not None and variants_chunk_size != store.scan.chunk_length:
        asked.append(f"variants_chunk_size={variants_chunk_size} (the store's is {store.scan.chunk_length})")
    recorded = store.provenance.samples_chunk_size
    if samples_chunk_size not in (DEFAULT_SAMPLES_CHUNK_SIZE, recorded):
        asked.append(f"samples_chunk_size={samples_chunk_size} (the store's is {recorded})")
    if asked:
        raise VcfVirtualError(
            store.refs_path,
            f"--append keeps the store's chunking: {', '.join(asked)} asked for",
            hint="leave the chunk sizes out, or give the store's",
        )
