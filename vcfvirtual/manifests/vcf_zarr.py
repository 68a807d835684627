"""Build the VCF Zarr group: one :class:`~vcfvirtual.manifests.virtual.VirtualArray` per spec array.

Variants-dimension arrays point chunk k at the byte range of records
``[k*N, (k+1)*N)`` in the transcode cache and decode through ``vcfvirtual.bcf``.
Small arrays (contigs, filters, samples, region index) are inlined chunks.
Everything here is pure: the scan result and the cache location in, a group out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numcodecs import VLenUTF8
from vcfvirtual_codec.checks import FLOAT32_FILL
from vcfvirtual_codec.columns import SEGMENT_OF_KIND
from vcfvirtual_codec.spec import CODEC_ID, LOCAL_KINDS, SAMPLE_KINDS, ChunkSpec, config_version

from .. import __version__
from ..bcf.fields import EVERY_FIELD, PREFIX, FieldChoice, FieldMap, map_fields
from ..bcf.header import BCFHeader
from ..cache.base import CacheRanges, ChunkRanges, SegmentRanges
from ..cache.columns import DEFAULT_SAMPLES_CHUNK_SIZE
from ..cache.layouts import LAYOUT_WRITERS
from ..cache.names import LayoutName, part_url, segment_name
from ..errors import CorruptBCFError, FieldShapeError, UnsupportedBCFError, VcfVirtualError
from ..scan.results import ScanResult
from . import inline as inline_strings
from .provenance import ATTRIBUTE, Dimensions, Provenance, RecordedCache, RecordedScan, RecordedSource
from .virtual import ArrayMetadata, ChunkTable, DType, VirtualArray, VirtualGroup

VCF_ZARR_VERSION = "0.3"

# The descriptions bio2zarr gives the fixed fields, so both stores read alike.
FIXED_DESCRIPTIONS = {
    "variant_contig": "An identifier from the reference genome or an angle-bracketed ID"
    " string pointing to a contig in the assembly file",
    "variant_position": "The reference position",
    "variant_length": "The length of the variant measured in bases",
    "variant_id": "List of unique identifiers where applicable",
    "variant_allele": "List of the reference and alternate alleles",
    "variant_quality": "Phred-scaled quality score",
    "variant_filter": "Filter status of the variant",
}


def min_int_dtype(lo: int, hi: int) -> np.dtype:
    """Smallest signed integer dtype holding [lo, hi] (bio2zarr's rule)."""
    for name in ("i1", "i2", "i4", "i8"):
        info = np.iinfo(name)
        if info.min <= lo and hi <= info.max:
            return np.dtype(name)
    raise OverflowError(f"integer range [{lo}, {hi}] does not fit in 64 bits")


def default_chunk_length(n_samples: int, ploidy: int, itemsize: int = 1, layout: LayoutName = "raw") -> int:
    """Variants per chunk unless asked otherwise: the layout's rule
    (:meth:`~vcfvirtual.cache.base.CacheLayout.chunk_length`; a decoded call_genotype
    chunk near 64 MiB, or 1,000 for ``columns``; with no samples, 10,000 for every layout)."""
    return LAYOUT_WRITERS[layout].chunk_length(n_samples, ploidy, itemsize)


def _fill_value(dtype: np.dtype) -> bool | int | float | str:
    if dtype == np.dtype(bool):
        return False
    if dtype.kind == "i":
        return -2
    if dtype.kind == "f":
        return FLOAT32_FILL
    return ""


def _codecs(dtype: DType, spec: ChunkSpec | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]]
    if dtype is str:
        out = [{"name": "vlen-utf8"}]
    elif np.dtype(dtype).itemsize > 1:
        out = [{"name": "bytes", "configuration": {"endian": "little"}}]
    else:
        out = [{"name": "bytes"}]
    if spec is not None:
        out.append({"name": CODEC_ID, "configuration": spec.to_config()})
    return out


# The columns layout's segment of each fixed kind, as the codec reads them (the others are
# an INFO or FORMAT key's segment).
FIXED_SEGMENTS = {kind: seg for kind, seg in SEGMENT_OF_KIND.items() if seg not in ("info", "format")}
GT_SEGMENT = segment_name("FORMAT", "GT")


def segment_of(kind: str, field: str | None = None) -> str:
    """The columns layout's segment an array reads: ``position``, ``info/DP``, ``format/GT``...
    (``field``: the INFO/FORMAT ID of an ``info`` or ``format`` array, whatever its array's name)."""
    if kind in FIXED_SEGMENTS:
        return FIXED_SEGMENTS[kind]
    if kind.startswith("genotype") or kind == "local_alleles":
        return GT_SEGMENT
    if kind in LOCAL_KINDS:  # call_LAD, call_LPL: their field's segment, beside GT's
        return segment_name("FORMAT", _LOCAL_SOURCES[kind])
    return segment_name(kind, str(field))


# The dtype of an array: numpy's, or ``str`` for variable-length strings.


@dataclass(frozen=True)
class _StoreChunks:
    """What every variants-dimension array of one store shares: its records, chunks,
    cache and layout, and where each array's chunks are in the cache."""

    n_records: int
    chunk_length: int
    cache_url: str
    ranges: CacheRanges
    layout: LayoutName

    def variant(
        self,
        name: str,
        kind: str,
        dtype: DType,
        dims: Sequence[str] = ("variants",),
        shape: Sequence[int] = (),
        description: str | None = "",
        *,
        field: str | None = None,
        **spec_extra: Any,
    ) -> VirtualArray:
        """One variants-dimension array: its codec's spec (``spec_extra``: the other
        :class:`ChunkSpec` fields, ``key``, ``ploidy``...) and its chunks' ranges
        (``field``: the INFO/FORMAT ID of an ``info`` or ``format`` array, whatever its
        array's name)."""
        per_variant_shape = tuple(shape)
        chunk_shape = [max(1, s) for s in per_variant_shape]
        array_ranges, extra = self._ranges(kind, field)
        if "samples_chunk_size" in extra:
            chunk_shape[0] = extra["samples_chunk_size"]
        return _variant_array(
            ChunkSpec(
                array=name,
                kind=kind,
                dtype="str" if dtype is str else np.dtype(dtype).str,
                shape=per_variant_shape,
                chunk_length=self.chunk_length,
                num_records=self.n_records,
                layout=self.layout,
                version=self._version(name, kind),
                **{**spec_extra, **extra},
            ),
            dtype,
            list(dims),
            tuple(chunk_shape),
            array_ranges,
            self.chunk_paths,
            description,
            omit=self._all_false_masks(kind, spec_extra.get("ploidy", 0)),
        )

    def _version(self, name: str, kind: str) -> int:
        """The array's codec configuration version: as the store's references recorded it
        where the ranges are its chunks alone (:attr:`SegmentRanges.config_versions`: no
        segment rewritten, so none needs more), else what this version's segments may
        need (:func:`~vcfvirtual_codec.spec.config_version`)."""
        recorded = self.ranges.config_versions if isinstance(self.ranges, SegmentRanges) else None
        if recorded is not None and name in recorded:
            return recorded[name]
        return config_version(kind, self.layout)

    def _all_false_masks(self, kind: str, ploidy: int) -> np.ndarray | None:
        """The call_genotype_mask chunks left out of its manifest: those whose GT block's
        every call holds ``ploidy`` alleles, none missing (the block's complete count,
        :attr:`~vcfvirtual.cache.base.SegmentRanges.gt_complete`). Their mask is all
        False, the fill value: zarr gives it without reading or decoding anything, as
        from bio2zarr's store, which writes no such chunk. None: every chunk referenced."""
        ranges = self.ranges
        if kind != "genotype_mask" or not isinstance(ranges, SegmentRanges) or ranges.gt_complete is None:
            return None
        omit = ranges.gt_complete == ploidy
        return omit if ploidy > 0 and omit.any() else None

    @functools.cached_property
    def chunk_paths(self) -> np.ndarray:
        """Each variants chunk's file, ``(n_chunks,)``: the cache itself, or (a cache made
        of parts) the part holding that chunk, ``<cache_url>/part-000003``. Made once a
        store, from one string per part (vectorised: there are millions of chunks)."""
        ranges = self.ranges
        if isinstance(ranges, SegmentRanges):
            urls = np.array([part_url(self.cache_url, p) for p in ranges.parts], dtype=np.dtypes.StringDType())
            return urls[ranges.chunk_part]
        n_chunks = ranges.offsets.shape[0]
        return np.full(n_chunks, self.cache_url, dtype=np.dtypes.StringDType())

    def _ranges(self, kind: str, field: str | None) -> tuple[ChunkRanges, dict[str, Any]]:
        """The chunks' ranges of an array of ``kind``, and the spec fields the columns
        layout adds (its segments' compressor, samples blocks, rlen as resolved)."""
        ranges = self.ranges
        if not isinstance(ranges, SegmentRanges):
            return ranges, {}
        segment = segment_of(kind, field)
        extra: dict[str, Any] = {"compressor": ranges.compressors[segment]}
        if kind in SAMPLE_KINDS:
            extra["samples_chunk_size"] = ranges.samples_chunk_size
        if kind == "length":
            extra["key"] = -1  # rlen was resolved from END when the cache was written
        return (local_ranges(ranges, kind) if kind in LOCAL_KINDS else ranges.segments[segment]), extra


def _variant_array(
    spec: ChunkSpec,
    dtype: DType,
    dims: list[str],
    chunk_shape: tuple[int, ...],
    array_ranges: ChunkRanges,
    chunk_paths: np.ndarray,
    description: str | None,
    omit: np.ndarray | None = None,
) -> VirtualArray:
    """The array of ``spec`` over ``array_ranges`` of the cache (``chunk_paths``: the file
    of each variants chunk, broadcast over the rest of the grid); ``omit``, shaped like
    the ranges: chunks left out of the manifest (read as the fill value)."""
    per_variant_shape = spec.shape
    n_records, chunk_length = spec.num_records, spec.chunk_length
    attributes = {}
    if description is not None:
        attributes["description"] = description
    metadata = ArrayMetadata(
        shape=(n_records, *per_variant_shape),
        dtype=dtype,
        chunk_shape=(chunk_length, *chunk_shape),
        fill_value="" if dtype is str else _fill_value(np.dtype(dtype)),
        codecs=tuple(_codecs(dtype, spec)),
        attributes=attributes,
        dimension_names=tuple(dims),
    )
    offsets, lengths = array_ranges
    # A samples-blocked segment's ranges are (n_chunks, n_blocks): the grid's first two axes.
    grid = (*offsets.shape, *([1] * (1 + len(per_variant_shape) - offsets.ndim)))
    # One part per variants chunk, the same across its samples blocks and the rest of the grid.
    paths = np.broadcast_to(chunk_paths.reshape(-1, *[1] * (len(grid) - 1)), grid).copy()
    offsets, lengths = offsets.reshape(grid), lengths.reshape(grid)
    if omit is not None:
        # A chunk left out: the empty path (VirtualiZarr's missing chunk; no key is written).
        missing = omit.reshape(grid)
        paths[missing] = ""
        offsets, lengths = np.where(missing, np.uint64(0), offsets), np.where(missing, np.uint64(0), lengths)
    return VirtualArray(metadata, ChunkTable(paths, offsets, lengths))


# The FORMAT field each local-allele kind gathers, and the arrays they replace (bio2zarr
# renames call_AD and call_PL to call_LAD and call_LPL).
_LOCAL_SOURCES = {"local_ad": "AD", "local_pl": "PL"}
LOCAL_ARRAYS = {"local_alleles": "call_LA", "local_ad": "call_LAD", "local_pl": "call_LPL"}
# bio2zarr's description of call_LA.
LA_DESCRIPTION = "0-based indices into REF+ALT, indicating which alleles are relevant (local) for the current sample"


def local_ranges(ranges: SegmentRanges, kind: str) -> ChunkRanges:
    """A local-allele array's chunks in the columns cache: GT's segments (call_LA), or one
    range over each block's AD and GT segments (call_LAD) or GT and PL (call_LPL), which
    the cache written with local alleles lays side by side (cache.columns.SegmentPlan)."""
    gt = ranges.segments[GT_SEGMENT]
    if kind == "local_alleles":
        return gt
    field = ranges.segments[segment_name("FORMAT", _LOCAL_SOURCES[kind])]
    first, second = (field, gt) if kind == "local_ad" else (gt, field)
    if not np.array_equal(first.offsets + first.lengths, second.offsets):
        raise VcfVirtualError(
            None,
            f"the cache does not hold FORMAT/{_LOCAL_SOURCES[kind]} beside GT",
            hint="index with --local-alleles, which writes them side by side",
        )
    return ChunkRanges(first.offsets, first.lengths + second.lengths)


def _inline_array(
    values: Sequence[Any] | np.ndarray,
    dtype: DType,
    dims: Sequence[str],
    description: str | None = None,
    chunk: int | None = None,
) -> VirtualArray:
    """An array whose encoded bytes travel inside the manifest: one chunk, or chunks of
    ``chunk`` rows (the last one padded to the full chunk, as Zarr stores an edge chunk);
    strings compressed (:mod:`.inline`)."""
    if dtype is str:
        values = np.asarray(values, dtype=object)
    else:
        values = np.asarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    shape = values.shape
    rows = chunk if chunk and shape and shape[0] > chunk else (max(1, shape[0]) if shape else 1)
    fill = "" if dtype is str else _fill_value(np.dtype(dtype))
    attributes = {} if description is None else {"description": description}
    chunk_shape = (rows, *(max(1, s) for s in shape[1:])) if shape else ()
    metadata = ArrayMetadata(
        shape=shape,
        dtype=dtype,
        chunk_shape=chunk_shape,
        fill_value=fill,
        codecs=(*_codecs(dtype, None), *((inline_strings.V3_CODEC,) if dtype is str else ())),
        attributes=attributes,
        dimension_names=tuple(dims),
    )
    if not values.size:
        return VirtualArray(metadata)
    inline = {}
    rest = ".0" * (len(shape) - 1)
    for k, start in enumerate(range(0, shape[0], rows)):
        part = values[start : start + rows]
        if part.shape[0] < rows:
            pad = np.full((rows - part.shape[0], *part.shape[1:]), fill, dtype=values.dtype)
            part = np.concatenate([part, pad])
        inline[f"{k}{rest}"] = inline_strings.compress(VLenUTF8().encode(part)) if dtype is str else part.tobytes()
    return VirtualArray(metadata, inline=inline)


def region_index(region_rows: np.ndarray, position_dtype: np.dtype) -> np.ndarray:
    """The spec's region index, bio2zarr's column order, from the scan's region rows
    (chunk, contig, first POS, last POS, largest end, records per chunk and contig run).

    Its dtype is the positions' (bio2zarr's), widened to hold every value of the table:
    a record's end (POS + rlen - 1, from END for a symbolic deletion) or a chunk's record
    count can pass the positions' largest value, which bio2zarr's OverflowError and an
    earlier saturation here both got wrong (a region query then missed the record)."""
    rows = np.asarray(region_rows, dtype=np.int64)
    if not rows.size:
        return rows.astype(position_dtype)
    info = np.iinfo(position_dtype)
    return rows.astype(min_int_dtype(min(int(rows.min()), info.min), max(int(rows.max()), info.max)))


def field_dtype(vcf_type: str, lo: int, hi: int) -> DType:
    """bio2zarr's dtype for an INFO/FORMAT field: smallest int, float32, bool or str."""
    if vcf_type == "Integer":
        return np.dtype("i1") if lo > hi else min_int_dtype(lo, hi)
    if vcf_type == "Float":
        return np.dtype("f4")
    if vcf_type == "Flag":
        return np.dtype(bool)
    if vcf_type == "Character":
        # The spec names |S1, but xarray decodes an S1 array as strings joined along
        # its last axis; bio2zarr's <U1 reads back one character per value.
        return np.dtype("<U1")
    return str


def field_dimensions(
    header: BCFHeader, scan: ScanResult, n_alleles: int, ploidy: int
) -> dict[tuple[str, str], tuple[int, str | None]]:
    """(width, dimension name or None) of every INFO/FORMAT field, by bio2zarr's rules.

    Number=A/R/G use the alt_alleles/alleles/genotypes dimensions; fixed and "."
    numbers get ``<category>_<name>_dim`` when more than one value is seen or
    declared; single values have no extra dimension.
    """
    genotypes = None
    if header.gt_key >= 0:
        genotypes = math.comb(n_alleles + ploidy - 1, ploidy)
    else:
        # Without GT there is no ploidy to count genotypes from: bio2zarr sizes the
        # dimension from the FORMAT Number=G values seen. A header with only INFO
        # Number=G fields (no samples at all, often) gets it from those values the same
        # way, rather than no dimension: htslib stores and prints them as written.
        g_max = [int(scan.format_stats[f.key, 0]) for f in header.formats if f.number == "G"]
        if not g_max:
            g_max = [int(scan.info_stats[f.key, 0]) for f in header.info if f.number == "G"]
        genotypes = max(g_max) if g_max else None
    out: dict[tuple[str, str], tuple[int, str | None]] = {}
    for field in (*header.info, *header.formats):
        if field.type == "Flag":
            # A flag is present or not: values a record attaches to it (htslib reads
            # them) do not give it a dimension the Flag decoder would not fill.
            out[(field.category, field.name)] = (1, None)
            continue
        stats = scan.info_stats if field.category == "INFO" else scan.format_stats
        max_number = int(stats[field.key, 0])
        named = {"A": ("alt_alleles", n_alleles - 1), "R": ("alleles", n_alleles), "G": ("genotypes", genotypes)}
        if field.number in named:
            dim, size = named[field.number]
            if size is None or max_number > size:
                why = ""
                if dim == "genotypes" and header.gt_key >= 0 and scan.max_ploidy == 0:
                    # The header declares GT but no record has a call (often: no samples):
                    # bio2zarr counts genotypes for ploidy 1 then, and refuses this too.
                    why = f"; no record has a GT call, so genotypes are counted for ploidy 1 ({n_alleles} alleles)"
                raise FieldShapeError(
                    None,
                    f"{field.category}/{field.name} is declared Number={field.number} but a record "
                    f"holds {max_number} values, more than the {dim} dimension ({size}){why}",
                    hint=f"fix the header's Number for {field.name} (e.g. Number=.) with bcftools reheader",
                )
            out[(field.category, field.name)] = (size, dim if size > 0 else None)
            continue
        if field.number not in (".",) and field.type != "Flag":
            max_number = max(max_number, int(field.number))
        # bio2zarr always gives FORMAT/LAA (local alleles) its own dimension.
        always = field.category == "FORMAT" and field.name == "LAA"
        field_dim = f"{field.category}_{field.name}_dim" if max_number > 1 or always else None
        out[(field.category, field.name)] = (max_number, field_dim)
    return out


def header_field_map(header: BCFHeader, choice: FieldChoice = EVERY_FIELD, path: str | None = None) -> FieldMap:
    """The arrays of ``header``'s fields under ``choice`` (:func:`vcfvirtual.bcf.fields.map_fields`)."""
    return map_fields([f.name for f in header.info], [f.name for f in header.formats], choice, path)


def build_group(
    scan: ScanResult,
    cache_url: str,
    chunk_length: int,
    *,
    ranges: CacheRanges,
    layout: LayoutName = "raw",
    provenance: Provenance | None = None,
    field_map: FieldMap | None = None,
    local_alleles: bool = False,
) -> VirtualGroup:
    """Every VCF Zarr array for ``scan``, referencing ``cache_url``.

    ``ranges`` are the (offsets, lengths) of the chunks in the cache, as its layout wrote
    them: one per variants chunk for every array (:class:`ChunkRanges`), or each array's
    own segments (:class:`SegmentRanges`, the columns layout, whose arrays with a samples
    dimension are chunked in its samples blocks). ``field_map`` names the
    INFO/FORMAT fields' arrays and leaves out those not chosen (default: every field,
    named ``variant_<ID>``/``call_<ID>``; a field taking a fixed array's name is refused).
    ``local_alleles``: bio2zarr's ``--local-alleles`` arrays (:func:`local_allele_arrays`).
    """
    h = scan.header
    if field_map is None:
        field_map = header_field_map(h)
    variant = _StoreChunks(scan.num_records, chunk_length, cache_url, ranges, layout).variant
    _refuse_undefined_contigs(scan)
    position_dtype = min_int_dtype(*scan.pos_range) if scan.num_records else np.dtype("i1")
    n_alleles = max(scan.max_alleles, 2)
    ploidy = max(scan.max_ploidy, 1)
    arrays = _fixed_arrays(variant, scan, position_dtype, n_alleles)
    arrays.update(_field_arrays(variant, scan, n_alleles, ploidy, field_map))
    if h.gt_key >= 0 and field_map.genotypes:
        arrays.update(_genotype_arrays(variant, h.gt_key, len(h.samples), n_alleles, ploidy))
    if local_alleles:
        _refuse_local_alleles_of_choice(field_map, h.gt_key >= 0)
        local_allele_arrays(variant, scan, arrays, n_alleles)
    # bio2zarr chunks sample_id as the samples blocks, and readers (vcztools) take the
    # samples chunking of every call_* array from it.
    sample_block = ranges.samples_chunk_size if isinstance(ranges, SegmentRanges) else None
    arrays.update(_header_arrays(scan, position_dtype, sample_block))
    attributes: dict[str, Any] = {
        "vcf_zarr_version": VCF_ZARR_VERSION,
        "vcf_header": h.text,
        "vcf_meta_information": h.meta_information(),
        "source": f"vcfvirtual {__version__}",
    }
    if provenance is not None:
        dimensions = recorded_dimensions(h, arrays, n_alleles, ploidy)
        recorded = dataclasses.replace(provenance, dimensions=dimensions, scan=recorded_scan(scan))
        attributes[ATTRIBUTE] = recorded.to_json()
    return VirtualGroup(arrays, attributes)


def recorded_scan(scan: ScanResult) -> RecordedScan:
    """What a later ``--append`` needs of this scan (:class:`RecordedScan`)."""
    return RecordedScan(
        chunk_length=int(scan.chunk_length),
        records=int(scan.num_records),
        pos_range=(int(scan.pos_range[0]), int(scan.pos_range[1])),
        rlen_range=(int(scan.rlen_range[0]), int(scan.rlen_range[1])),
        max_alleles=int(scan.max_alleles),
        max_ploidy=int(scan.max_ploidy),
        info_stats=_stats_rows(scan.info_stats),
        format_stats=_stats_rows(scan.format_stats),
    )


def _stats_rows(stats: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    return tuple((int(a), int(b), int(c)) for a, b, c in stats.tolist())


def recorded_dimensions(header: BCFHeader, arrays: dict[str, VirtualArray], n_alleles: int, ploidy: int) -> Dimensions:
    """The sizes the scan chose, which the header alone does not give: alleles, ploidy
    (with GT), and each INFO/FORMAT field's width (its values per record, or per call).
    open_store refuses arrays wider than these (refs/arrays.py): a width comes from the
    data, so without this record nothing would bound a ``Number=.`` field's."""
    fields = {}
    for field in (*header.info, *header.formats):
        name = ("variant_" if field.category == "INFO" else "call_") + field.name
        if name in arrays and not (field.category == "FORMAT" and field.name == "GT"):
            shape = arrays[name].shape
            extra = shape[2:] if field.category == "FORMAT" else shape[1:]
            fields[f"{field.category}/{field.name}"] = int(extra[0]) if extra else 1
    return Dimensions(int(n_alleles), int(ploidy) if header.gt_key >= 0 else None, fields)


# variant(name, kind, dtype, dims=("variants",), shape=(), description="", **spec_extra):
# one variants-dimension array of the store being built (:meth:`_StoreChunks.variant`).
VariantArrayFactory = Callable[..., VirtualArray]


def _refuse_undefined_contigs(scan: ScanResult) -> None:
    h = scan.header
    if not (h.unused_contig_ids and scan.num_records):
        return
    named = set(np.unique(scan.region_rows[:, 1]).tolist()) & set(h.unused_contig_ids)
    if named:
        raise CorruptBCFError(
            None,
            f"a record names contig id {min(named)}, which the header does not define "
            "(its ##contig IDX= values skip it); htslib refuses such records too",
            hint="the file is damaged, or its header was edited: check it with bcftools view",
        )


def _fixed_arrays(
    variant: VariantArrayFactory, scan: ScanResult, position_dtype: np.dtype, n_alleles: int
) -> dict[str, VirtualArray]:
    """The arrays of the VCF's fixed columns: CHROM, POS, rlen, ID, REF/ALT, QUAL, FILTER."""
    h = scan.header
    length_dtype = min_int_dtype(*scan.rlen_range) if scan.num_records else np.dtype("i1")
    return {
        "variant_contig": variant(
            "variant_contig",
            "contig",
            min_int_dtype(0, len(h.contigs)),
            description=FIXED_DESCRIPTIONS["variant_contig"],
        ),
        "variant_position": variant(
            "variant_position", "position", position_dtype, description=FIXED_DESCRIPTIONS["variant_position"]
        ),
        "variant_length": variant(
            "variant_length", "length", length_dtype, description=FIXED_DESCRIPTIONS["variant_length"], key=h.end_key
        ),  # the codec replaces a damaged rlen from END
        "variant_id": variant("variant_id", "id", str, description=FIXED_DESCRIPTIONS["variant_id"]),
        "variant_id_mask": variant("variant_id_mask", "id_mask", bool),
        "variant_allele": variant(
            "variant_allele",
            "allele",
            str,
            ("variants", "alleles"),
            (n_alleles,),
            description=FIXED_DESCRIPTIONS["variant_allele"],
        ),
        "variant_quality": variant(
            "variant_quality", "quality", np.float32, description=FIXED_DESCRIPTIONS["variant_quality"]
        ),
        "variant_filter": variant(
            "variant_filter",
            "filter",
            bool,
            ("variants", "filters"),
            (len(h.filters),),
            description=FIXED_DESCRIPTIONS["variant_filter"],
            filter_columns=h.filter_column_map(),
        ),
    }


def _field_arrays(
    variant: VariantArrayFactory, scan: ScanResult, n_alleles: int, ploidy: int, field_map: FieldMap
) -> dict[str, VirtualArray]:
    """One array per INFO and FORMAT field kept but GT, named by ``field_map``, sized and
    typed by bio2zarr's rules (dimensions as if every field were kept: a field left out
    changes no other array)."""
    h = scan.header
    n_samples = len(h.samples)
    dims = field_dimensions(h, scan, n_alleles, ploidy)
    arrays = {}
    for field in (*h.info, *h.formats):
        name = field_map.array_of(field.category, field.name)
        if name is None:  # GT, or left out
            continue
        width, dim = dims[(field.category, field.name)]
        if dim == f"{field.category}_{field.name}_dim":
            # A renamed field's own dimension follows its array's name, as bio2zarr names
            # it for a file whose header holds the new name.
            dim = f"{field.category}_{name.removeprefix(PREFIX[field.category])}_dim"
        stats = (scan.info_stats if field.category == "INFO" else scan.format_stats)[field.key]
        dtype = field_dtype(field.type, int(stats[1]), int(stats[2]))
        shape = ((n_samples,) if field.category == "FORMAT" else ()) + ((width,) if dim else ())
        dim_names = ["variants"] + (["samples"] if field.category == "FORMAT" else []) + ([dim] if dim else [])
        arrays[name] = variant(
            name,
            field.category.lower(),
            dtype,
            dim_names,
            shape,
            description=field.description,
            key=field.key,
            vcf_type=field.type,
            field=field.name,
        )
    return arrays


def _genotype_arrays(
    variant: VariantArrayFactory, gt_key: int, n_samples: int, n_alleles: int, ploidy: int
) -> dict[str, VirtualArray]:
    gt = dict(key=gt_key, ploidy=ploidy)
    return {
        "call_genotype": variant(
            "call_genotype",
            "genotype",
            min_int_dtype(-2, n_alleles - 1),
            ("variants", "samples", "ploidy"),
            (n_samples, ploidy),
            **gt,
        ),
        "call_genotype_phased": variant(
            "call_genotype_phased", "genotype_phased", bool, ("variants", "samples"), (n_samples,), **gt
        ),
        "call_genotype_mask": variant(
            "call_genotype_mask", "genotype_mask", bool, ("variants", "samples", "ploidy"), (n_samples, ploidy), **gt
        ),
    }


def _refuse_local_alleles_of_choice(field_map: FieldMap, header_has_gt: bool) -> None:
    """Local alleles are derived from GT and replace call_AD and call_PL under their own
    names: GT left out, or AD or PL renamed, leaves nothing they are defined on."""
    problem = None
    if header_has_gt and not field_map.genotypes:  # a header without GT: refuse_local_alleles says so
        problem = "they are derived from GT, which the field choice leaves out"
    for name in _LOCAL_SOURCES.values():
        if field_map.array_of("FORMAT", name) not in (None, "call_" + name):
            problem = f"FORMAT/{name} is renamed, and call_L{name} replaces call_{name}"
    if problem is not None:
        raise UnsupportedBCFError(None, f"cannot expose local alleles: {problem}", hint="index without --local-alleles")


def refuse_local_alleles(scan: ScanResult, n_alleles: int) -> None:
    """Where bio2zarr's local alleles are not defined, one line saying why."""
    h = scan.header
    problem = None
    names = {f.name: f for f in h.formats}
    taken = sorted(set(names) & {"LA", "LAD", "LPL"})
    if h.gt_key < 0:
        problem = "they are derived from GT, and the header declares no FORMAT/GT"
    elif scan.max_ploidy != 2:
        seen = f"the largest ploidy is {scan.max_ploidy}" if scan.max_ploidy else "no record has a GT call"
        problem = f"bio2zarr defines them for diploid calls only, and {seen}"
    elif n_alleles > np.iinfo(np.int8).max:
        problem = f"call_LA is int8 (bio2zarr's dtype) and a record has {n_alleles} alleles"
    elif taken:
        problem = f"the header already has FORMAT/{taken[0]}, whose array call_{taken[0]} they would replace"
    else:
        bad = [n for n in _LOCAL_SOURCES.values() if n in names and names[n].type != "Integer"]
        if bad:
            problem = f"FORMAT/{bad[0]} is {names[bad[0]].type}, and local values are gathered from Integer ones"
    if problem is not None:
        raise UnsupportedBCFError(None, f"cannot expose local alleles: {problem}", hint="index without --local-alleles")


def local_allele_arrays(variant: VariantArrayFactory, scan: ScanResult, arrays: dict, n_alleles: int) -> None:
    """bio2zarr's ``--local-alleles`` arrays, in place: call_LA (int8, ``local_alleles``
    = 2) from GT; call_LAD and call_LPL (AD's and PL's dtypes, ``local_alleles_AD`` = 2,
    ``local_<PL's last dimension's last word>`` = 3) in place of call_AD and call_PL.
    Each is derived by the codec from the GT and field chunks of the same samples block."""
    h = scan.header
    refuse_local_alleles(scan, n_alleles)
    n_samples = len(h.samples)
    shared = dict(gt_key=h.gt_key, ploidy=2)
    arrays["call_LA"] = variant(
        "call_LA",
        "local_alleles",
        np.int8,
        ("variants", "samples", "local_alleles"),
        (n_samples, 2),
        description=LA_DESCRIPTION,
        key=h.gt_key,
        **shared,
    )
    for kind, field_name in _LOCAL_SOURCES.items():
        source = arrays.pop("call_" + field_name, None)
        if source is None:
            continue
        key = next(f.key for f in h.formats if f.name == field_name)
        dims = list(source.metadata.dimension_names or ())
        width = int(source.shape[2]) if len(source.shape) == 3 else 1
        local_dim = "local_alleles_AD" if kind == "local_ad" else "local_" + dims[-1].split("_")[-1]
        name = LOCAL_ARRAYS[kind]
        description = source.metadata.attributes.get("description", "") + " (local-alleles)"
        arrays[name] = variant(
            name,
            kind,
            source.dtype,
            ("variants", "samples", local_dim),
            (n_samples, 2 if kind == "local_ad" else 3),
            description=description,
            key=key,
            source_width=width,
            **shared,
        )


def _header_arrays(scan: ScanResult, position_dtype: np.dtype, sample_block: int | None) -> dict[str, VirtualArray]:
    """The small arrays from the header and the scan, inlined in the manifest."""
    h = scan.header
    arrays = {"contig_id": _inline_array(list(h.contigs), str, ["contigs"])}
    if any(x is not None for x in h.contig_lengths):
        lengths = [-1 if x is None else x for x in h.contig_lengths]
        arrays["contig_length"] = _inline_array(lengths, np.int64, ["contigs"])
    arrays["filter_id"] = _inline_array(list(h.filters), str, ["filters"])
    arrays["filter_description"] = _inline_array(list(h.filter_descriptions), str, ["filters"])
    arrays["sample_id"] = _inline_array(list(h.samples), str, ["samples"], chunk=sample_block)
    index = region_index(scan.region_rows, position_dtype)
    arrays["region_index"] = _inline_array(index, index.dtype, ["region_index_values", "region_index_fields"])
    return arrays


def store_chunk_length(scan: ScanResult) -> int:
    """Variants per chunk of the store: the scan's, but no longer than the array. A chunk
    longer than the array only makes the chunk grid irregular; with at most one chunk,
    the per-chunk summaries hold for any longer N."""
    return max(1, min(scan.chunk_length, scan.num_records))


def store_provenance(
    scan: ScanResult,
    *,
    sources: Sequence[RecordedSource],
    cache: RecordedCache,
    zero_copy: bool,
    samples_chunk_size: int = DEFAULT_SAMPLES_CHUNK_SIZE,
    field_choice: FieldChoice = EVERY_FIELD,
) -> Provenance:
    """The store's ``vcfvirtual`` attribute but its dimensions (which the arrays give):
    the sources' and the cache's fingerprints, which let readers refuse a cache or source
    that has changed; the chunking; the fields' renames and selection (for verify, inspect
    and the reference checks).

    Raises
    ------
    FieldNameError
        A field's array would replace another's, or the choice names an undeclared field."""
    fields = header_field_map(scan.header, field_choice, sources[0].path).to_attribute()
    return Provenance(
        sources=tuple(sources),
        cache=cache,
        variants_chunk_size=store_chunk_length(scan),
        zero_copy=zero_copy,
        # The other layouts keep the samples dimension whole.
        samples_chunk_size=samples_chunk_size if LAYOUT_WRITERS[cache.layout or "raw"].samples_blocked else None,
        fields=fields,
    )


def build_store_group(
    scan: ScanResult,
    ranges: CacheRanges,
    provenance: Provenance,
    *,
    field_choice: FieldChoice = EVERY_FIELD,
    local_alleles: bool = False,
) -> VirtualGroup:
    """The store's arrays over the cache at ``provenance.cache.url`` (a ``file://`` URL,
    not percent-encoded: obstore and fsspec take the path literally; or the URL it is
    uploaded to), and its attributes: ``provenance`` (:func:`store_provenance`) with the
    dimensions the arrays were given. ``field_choice``: the fields' renames and selection."""
    source = provenance.sources[0].path
    field_map = header_field_map(scan.header, field_choice, source)
    layout = provenance.cache.layout or "raw"
    try:
        return build_group(
            scan,
            provenance.cache.url,
            store_chunk_length(scan),
            ranges=ranges,
            layout=layout,
            provenance=provenance,
            field_map=field_map,
            local_alleles=local_alleles,
        )
    except VcfVirtualError as e:
        if e.path is None:  # pure builders do not know the file: name it here
            raise type(e)(source, e.problem, offset=e.offset, hint=e.hint) from None
        raise
