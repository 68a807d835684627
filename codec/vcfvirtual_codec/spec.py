"""The ``vcfvirtual.bcf`` codec configuration: :class:`ChunkSpec` and its validation.

A configuration is JSON inside shared references, so it is untrusted input: the kernels
size and index their buffers from it, and anything the index would never write is
refused here, before a decode, with a :class:`~vcfvirtual_codec.errors.CodecConfigError`
naming the value.
"""

from __future__ import annotations

import collections
import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from .errors import CodecConfigError

CODEC_ID = "vcfvirtual.bcf"
# The newest configuration format this codec reads; a newer one is refused, naming the
# package to upgrade, when the array is opened rather than at its first chunk. Version 2:
# a columns-layout GT segment may hold an alleles block, packed into bits or not
# (columns.FLAG_GT_ALLELES, FLAG_GT_PACKED), which a reader of version 1 cannot decode.
# Version 3: a columns-layout INFO segment may hold its typed column rearranged
# (columns.FLAG_INFO_PLANES), which a reader of version 2 cannot decode. The index writes
# each for the arrays reading such segments only (config_version), so every other array's
# configuration stays version 1, and GT's 2, readable by an older codec.
FORMAT_VERSION = 3
GT_SEGMENT_VERSION = 2
INFO_SEGMENT_VERSION = 3
# Transcode cache layouts: the records as they are ("raw"), in chunk-aligned BGZF blocks,
# or demultiplexed into one compressed segment per array chunk ("columns").
LAYOUTS = ("raw", "bgzf", "columns")
# Segment compressors of the columns layout (numcodecs Zstd / Blosc; the frames say the level).
COMPRESSORS = ("zstd", "blosc")
# Local-allele kinds (bio2zarr's ``--local-alleles``): call_LA derived from GT, call_LAD
# and call_LPL from GT and FORMAT/AD or PL, at read time (vcfvirtual_codec.local_alleles).
LOCAL_KINDS = ("local_alleles", "local_ad", "local_pl")
# The local dimension of each: LA and LAD hold 2 values per call, LPL the 3 genotypes of 2 alleles.
LOCAL_WIDTHS = {"local_alleles": 2, "local_ad": 2, "local_pl": 3}
# Kinds with a samples dimension: in the columns layout their chunks are samples blocks.
SAMPLE_KINDS = ("format", "genotype", "genotype_phased", "genotype_mask", *LOCAL_KINDS)
# The kinds decoded from a chunk's GT segments (columns layout): configuration version 2.
GT_SEGMENT_KINDS = ("genotype", "genotype_phased", "genotype_mask", *LOCAL_KINDS)


def config_version(kind: str, layout: str) -> int:
    """The configuration version the index writes for an array of ``kind`` in ``layout``
    (and the only one above 1 this codec accepts for it): in a columns cache,
    :data:`GT_SEGMENT_VERSION` for the arrays decoded from GT segments (which may be packed
    alleles blocks) and :data:`INFO_SEGMENT_VERSION` for INFO fields (whose segments may be
    rearranged): an older codec, which cannot decode them, refuses the configuration when
    the array is opened. 1 for every other, read by any codec."""
    if layout != "columns":
        return 1
    if kind in GT_SEGMENT_KINDS:
        return GT_SEGMENT_VERSION
    return INFO_SEGMENT_VERSION if kind == "info" else 1


# Value kinds: which part of a record an array reads.
KINDS = (
    "contig",
    "position",
    "length",
    "quality",
    "id",
    "id_mask",
    "allele",
    "filter",
    "genotype",
    "genotype_phased",
    "genotype_mask",
    "info",
    "format",
    *LOCAL_KINDS,
)

# What a configuration may say, per kind: the dtypes the index writes (manifests) and
# the rank of the per-variant shape.
_INTS = frozenset({"|i1", "<i2", "<i4", "<i8"})
_BOOL = frozenset({"|b1"})
_KIND_RULES: dict[str, tuple[frozenset[str], tuple[int, ...]]] = {  # kind: (dtypes, ranks of shape)
    "contig": (_INTS, (0,)),
    "position": (_INTS, (0,)),
    "length": (_INTS, (0,)),
    "quality": (frozenset({"<f4"}), (0,)),
    "id": (frozenset({"str"}), (0,)),
    "id_mask": (_BOOL, (0,)),
    "allele": (frozenset({"str"}), (1,)),
    "filter": (_BOOL, (1,)),
    "genotype": (frozenset({"|i1", "<i2", "<i4"}), (2,)),
    "genotype_phased": (_BOOL, (1,)),
    "genotype_mask": (_BOOL, (2,)),
    # bio2zarr writes call_LA as int8 whatever the genotypes' dtype.
    "local_alleles": (frozenset({"|i1"}), (2,)),
    "local_ad": (_INTS, (2,)),
    "local_pl": (_INTS, (2,)),
}
_FIELD_DTYPES = {
    "Integer": _INTS,
    "Float": frozenset({"<f4"}),
    "Flag": _BOOL,
    "Character": frozenset({"<U1"}),
    "String": frozenset({"str"}),
}
# BCF's own limits: n_sample is 24 bits, n_allele 16 bits. Other dimensions (ploidy,
# value widths, variants per chunk) are capped where int64 index arithmetic stays exact.
MAX_SAMPLES = (1 << 24) - 1
MAX_ALLELES = (1 << 16) - 1
MAX_DIMENSION = (1 << 31) - 1
# Keys a configuration must hold; the others have defaults meaning "not used by this kind".
REQUIRED_KEYS = frozenset({"array", "kind", "dtype", "shape", "chunk_length", "num_records"})


def _int(value: object, name: str, lo: int, hi: int) -> int:
    # bool is an int to Python but never a count; a float or a string would reach the
    # kernels' C integer arguments as a TypeError, not a config error naming the key.
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise CodecConfigError(None, f"vcfvirtual.bcf config {name} must be an integer, got {value!r}")
    number = int(value)
    if not lo <= number <= hi:
        raise CodecConfigError(None, f"vcfvirtual.bcf config {name} is {number}, outside [{lo}, {hi}]")
    return number


def _bad(spec: ChunkSpec, problem: str) -> NoReturn:
    raise CodecConfigError(
        None,
        f"vcfvirtual.bcf config for {spec.array!r}: {problem}",
        hint="the references are damaged or were not written by vcfvirtual index",
    )


def _validate(spec: ChunkSpec) -> None:
    """Refuse a configuration the index would never write; normalise lists to tuples."""
    _validate_identity(spec)
    _normalise_numbers(spec)
    dtypes, ranks = _kind_rules(spec)
    if spec.dtype not in dtypes:
        _bad(spec, f"dtype {spec.dtype!r} is not one the index writes for kind {spec.kind!r} ({sorted(dtypes)})")
    _validate_shape(spec, ranks)
    _validate_local(spec)
    _validate_columns(spec)


def _validate_local(spec: ChunkSpec) -> None:
    """gt_key and source_width: set exactly for the local-allele kinds, which read GT (and
    AD or PL, ``source_width`` values wide) and are diploid by bio2zarr's definition."""
    local = spec.kind in LOCAL_KINDS
    if not local:
        if spec.gt_key != -1 or spec.source_width:
            _bad(spec, f"gt_key {spec.gt_key} / source_width {spec.source_width} are only for local-allele kinds")
        return
    if spec.gt_key < 0 or spec.key < 0 or spec.ploidy != 2:
        _bad(spec, f"a local-allele array needs GT's key, its field's key and ploidy 2, got {spec.gt_key}, "
             f"{spec.key}, {spec.ploidy}")  # fmt: skip
    if spec.shape[1] != LOCAL_WIDTHS[spec.kind]:
        _bad(spec, f"shape {list(spec.shape)} does not end in {LOCAL_WIDTHS[spec.kind]} (kind {spec.kind!r})")
    if spec.kind == "local_alleles":
        if spec.key != spec.gt_key or spec.source_width:
            _bad(spec, "call_LA reads GT alone: key must be gt_key and source_width 0")
    elif not 1 <= spec.source_width <= MAX_DIMENSION:
        _bad(spec, f"source_width {spec.source_width} is not the width of a FORMAT field")


def _validate_columns(spec: ChunkSpec) -> None:
    """samples_chunk_size and compressor: set exactly where the columns layout needs them."""
    columns = spec.layout == "columns"
    if not isinstance(spec.compressor, str):
        _bad(spec, f"compressor must be a string, got {spec.compressor!r}")
    if columns and spec.compressor not in COMPRESSORS:
        _bad(spec, f"compressor {spec.compressor!r} is not one of {COMPRESSORS} (the columns layout needs one)")
    if not columns and spec.compressor:
        _bad(spec, f"compressor {spec.compressor!r} is only for the columns layout, not {spec.layout!r}")
    size = spec.samples_chunk_size
    if columns and spec.kind in SAMPLE_KINDS:
        # A zarr chunk is never 0 wide: an array of no samples still has chunks of 1.
        if not 1 <= size <= max(spec.shape[0], 1):
            _bad(spec, f"samples_chunk_size {size} is outside [1, {spec.shape[0]}] (the samples dimension)")
    elif size:
        _bad(spec, f"samples_chunk_size {size} is only for sample arrays in the columns layout")


def _validate_identity(spec: ChunkSpec) -> None:
    """Names, kind, layout and format version: strings the codec knows."""
    if not isinstance(spec.array, str):
        _bad(spec, f"array name {spec.array!r} is not a string")
    if not isinstance(spec.kind, str) or spec.kind not in KINDS:
        raise CodecConfigError(None, f"unknown vcfvirtual.bcf kind {spec.kind!r}; expected one of {KINDS}")
    if not isinstance(spec.layout, str) or spec.layout not in LAYOUTS:
        raise CodecConfigError(None, f"unknown cache layout {spec.layout!r}; expected one of {LAYOUTS}")
    version = _int(spec.version, "version", 1, 1 << 31)
    if version > FORMAT_VERSION:
        raise CodecConfigError(
            None,
            f"vcfvirtual.bcf config version {version} is newer than this vcfvirtual-codec "
            f"reads ({FORMAT_VERSION}): update it to the vcfvirtual that wrote the store "
            "(pip install -U ./codec from its repository)",
        )
    if version > 1 and version != config_version(spec.kind, spec.layout):
        _bad(
            spec,
            f"config version {version} is not a {spec.kind!r} array's ({spec.layout!r} layout): "
            f"that is {config_version(spec.kind, spec.layout)}",
        )
    if not isinstance(spec.dtype, str) or not isinstance(spec.vcf_type, str):
        _bad(spec, "dtype and vcf_type must be strings")


def _normalise_numbers(spec: ChunkSpec) -> None:
    """Every number within its range (JSON ints, not bools); lists made tuples."""
    if not isinstance(spec.shape, (list, tuple)) or not isinstance(spec.filter_columns, (list, tuple)):
        _bad(spec, "shape and filter_columns must be lists")
    object.__setattr__(spec, "shape", tuple(_int(x, "shape", 0, MAX_DIMENSION) for x in spec.shape))
    columns = tuple(_int(x, "filter_columns", -1, MAX_DIMENSION) for x in spec.filter_columns)
    object.__setattr__(spec, "filter_columns", columns)
    # num_records 0 is a store of no records: its arrays carry configs but no chunk to decode.
    for name, lo in (("chunk_length", 1), ("num_records", 0), ("key", -1), ("ploidy", 0)):
        object.__setattr__(spec, name, _int(getattr(spec, name), name, lo, MAX_DIMENSION))
    object.__setattr__(spec, "samples_chunk_size", _int(spec.samples_chunk_size, "samples_chunk_size", 0, MAX_SAMPLES))
    object.__setattr__(spec, "gt_key", _int(spec.gt_key, "gt_key", -1, MAX_DIMENSION))
    object.__setattr__(spec, "source_width", _int(spec.source_width, "source_width", 0, MAX_DIMENSION))


def _kind_rules(spec: ChunkSpec) -> tuple[frozenset[str], tuple[int, ...]]:
    """(dtypes, ranks of shape) the index writes for this kind; refuses a key, ploidy or
    vcf_type the kind does not take."""
    kind = spec.kind
    if kind in LOCAL_KINDS:
        _refuse_vcf_type(spec)
        return _KIND_RULES[kind]
    if spec.ploidy and not kind.startswith("genotype"):
        _bad(spec, f"kind {kind!r} takes no ploidy, got {spec.ploidy}")
    if kind in ("info", "format"):
        return _field_rules(spec)
    _refuse_vcf_type(spec)
    if kind.startswith("genotype"):
        if spec.key < 0 or spec.ploidy < 1:
            _bad(spec, f"a genotype array needs GT's key and a ploidy >= 1, got key {spec.key}, ploidy {spec.ploidy}")
        return _KIND_RULES[kind]
    # variant_length carries INFO/END's key (or -1): htslib derives a record's length
    # from END when its stored rlen is out of range.
    if kind != "length" and spec.key != -1:
        _bad(spec, f"kind {kind!r} takes no dictionary key, got {spec.key}")
    return _KIND_RULES[kind]


def _refuse_vcf_type(spec: ChunkSpec) -> None:
    """Only INFO and FORMAT fields have a VCF type."""
    if spec.vcf_type:
        _bad(spec, f"kind {spec.kind!r} takes no vcf_type, got {spec.vcf_type!r}")


def _field_rules(spec: ChunkSpec) -> tuple[frozenset[str], tuple[int, ...]]:
    """(dtypes, ranks of shape) of an INFO or FORMAT field of its VCF type."""
    kind = spec.kind
    field_dtypes = _FIELD_DTYPES.get(spec.vcf_type)
    if field_dtypes is None or (kind == "format" and spec.vcf_type == "Flag"):
        _bad(spec, f"vcf_type {spec.vcf_type!r} is not a {kind.upper()} type")
    if spec.key < 0:
        _bad(spec, f"an {kind.upper()} field needs its dictionary key, got {spec.key}")
    ranks: tuple[int, ...] = (0,) if spec.vcf_type == "Flag" else ((0, 1) if kind == "info" else (1, 2))
    return field_dtypes, ranks


def _validate_shape(spec: ChunkSpec, ranks: tuple[int, ...]) -> None:
    """The per-variant shape: its rank, the BCF's limits, the ploidy and FILTER columns."""
    kind, shape, columns = spec.kind, spec.shape, spec.filter_columns
    if len(shape) not in ranks:
        _bad(spec, f"shape {list(shape)} has rank {len(shape)}; kind {kind!r} has rank {' or '.join(map(str, ranks))}")
    if kind in SAMPLE_KINDS and shape[0] > MAX_SAMPLES:
        _bad(spec, f"{shape[0]} samples is more than a BCF record can hold ({MAX_SAMPLES})")
    if kind == "allele" and shape[0] > MAX_ALLELES:
        _bad(spec, f"{shape[0]} alleles is more than a BCF record can hold ({MAX_ALLELES})")
    if kind.startswith("genotype") and len(shape) == 2 and shape[1] != spec.ploidy:
        _bad(spec, f"shape {list(shape)} does not end in the ploidy {spec.ploidy}")
    if kind == "filter":
        if any(c >= shape[0] for c in columns):
            _bad(spec, f"filter_columns {list(columns)} name a column past the {shape[0]} filters")
        _validate_filter_map(spec)
    elif columns:
        _bad(spec, f"kind {kind!r} takes no filter_columns")


def _validate_filter_map(spec: ChunkSpec) -> None:
    """The FILTER map as a header makes it: every filter_id column named by exactly one
    dictionary key. Two keys setting one column, or a column no key sets, is a map no
    header gives, and would decode a wrong variant_filter silently.

    The columns' order is not checked: they follow the header's FILTER lines, which are in
    dictionary key order unless the header gives IDX= out of order (htslib honours it), so
    an honest map may run [0, 2, -1, 1]. A reordered map is refused by open_store, which
    compares it with the header; plain Kerchunk readers trust its author (who could as well
    reorder the filter_id names)."""
    named = collections.Counter(c for c in spec.filter_columns if c >= 0)
    n_filters = spec.shape[0]
    twice = sorted(c for c, times in named.items() if times > 1)
    if twice:
        _bad(spec, f"filter_columns {list(spec.filter_columns)} name column(s) {twice} for more than one FILTER key")
    if len(named) != n_filters:
        missing = sorted(set(range(n_filters)) - set(named))
        _bad(spec, f"filter_columns {list(spec.filter_columns)} name no FILTER key for column(s) {missing}")


# Its methods are written out rather than generated: a frozen dataclass execs six of them
# (~1.1 ms) in every process that imports the codec, most of a fresh read's codec import.
# They do what dataclass(frozen=True) generates (tests/unit/vcfvirtual_codec/test_spec.py
# holds them to it); dataclasses.fields, asdict and replace still see the fields.
@dataclass(init=False, repr=False, eq=False)
class ChunkSpec:
    """What one array's codec needs to decode any of its chunks (JSON-only values).

    numcodecs never tells a codec the chunk shape, so the configuration carries it.
    Every value is checked on construction; the spec is immutable.

    Parameters
    ----------
    array : str
        The array's name, for messages.
    kind : str
        Which part of a record the array reads: one of :data:`KINDS`.
    dtype : str
        The array's numpy dtype string, or ``"str"`` for vlen-utf8 strings.
    shape : tuple of int
        The per-variant shape: every dimension of the array but variants.
    chunk_length : int
        Variants per chunk; the last chunk may hold fewer records.
    num_records : int
        Records in the whole array, so that each chunk's record count is checked
        exactly (``chunk_length``, or the remainder in the last chunk).
    key : int, default -1
        BCF dictionary key of the field read (INFO/FORMAT fields, GT; INFO/END for the
        ``length`` kind), or -1.
    ploidy : int, default 0
        The ploidy dimension, for the genotype kinds.
    vcf_type : str, default ""
        ``Integer``, ``Float``, ``Flag``, ``String`` or ``Character``, for the ``info``
        and ``format`` kinds.
    filter_columns : tuple of int, default ()
        The ``filter_id`` column of each FILTER dictionary key (-1: none), for the
        ``filter`` kind.
    layout : str, default "raw"
        The transcode cache layout the chunks are stored in: one of :data:`LAYOUTS`.
    version : int, default 1
        The configuration format version: 2 for a columns cache's GT arrays
        (:data:`GT_SEGMENT_KINDS`, whose segments may be packed), 3 for its INFO fields
        (whose segments may be rearranged), else 1 (:func:`config_version`).
    samples_chunk_size : int, default 0
        In the ``columns`` layout, for the kinds with a samples dimension
        (:data:`SAMPLE_KINDS`): the samples extent of a chunk (1 to ``shape[0]``); a chunk
        then decodes to ``(chunk_length, samples_chunk_size, ...)``. 0 otherwise.
    compressor : str, default ""
        In the ``columns`` layout, the segments' compressor: one of :data:`COMPRESSORS`;
        empty otherwise.
    gt_key : int, default -1
        For the local-allele kinds (:data:`LOCAL_KINDS`): GT's dictionary key (``key`` is
        then AD's or PL's, or GT's again for ``local_alleles``); -1 otherwise.
    source_width : int, default 0
        For ``local_ad`` and ``local_pl``: the width of the FORMAT field the local values
        are gathered from (call_AD's or call_PL's last dimension); 0 otherwise.

    Raises
    ------
    CodecConfigError
        A value of the wrong type, out of range, or one the index would never write for
        the kind; the message names the value.
    """

    array: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    chunk_length: int
    num_records: int
    key: int = -1
    ploidy: int = 0
    vcf_type: str = ""
    filter_columns: tuple[int, ...] = ()
    layout: str = "raw"
    version: int = 1
    samples_chunk_size: int = 0
    compressor: str = ""
    gt_key: int = -1
    source_width: int = 0

    def __init__(
        self,
        array: str,
        kind: str,
        dtype: str,
        shape: tuple[int, ...],
        chunk_length: int,
        num_records: int,
        key: int = -1,
        ploidy: int = 0,
        vcf_type: str = "",
        filter_columns: tuple[int, ...] = (),
        layout: str = "raw",
        version: int = 1,
        samples_chunk_size: int = 0,
        compressor: str = "",
        gt_key: int = -1,
        source_width: int = 0,
    ) -> None:
        values = (array, kind, dtype, shape, chunk_length, num_records, key, ploidy, vcf_type, filter_columns,
                  layout, version, samples_chunk_size, compressor, gt_key, source_width)  # fmt: skip
        for name, value in zip(_FIELD_NAMES, values):
            object.__setattr__(self, name, value)
        _validate(self)

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={value!r}" for name, value in zip(_FIELD_NAMES, _field_values(self)))
        return f"{type(self).__qualname__}({values})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(_field_values(self) == _field_values(other))

    def __hash__(self) -> int:
        return hash(_field_values(self))

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The shape of one decoded chunk: all variants of a chunk, and for sample arrays
        of the columns layout one samples block (edge chunks padded to it)."""
        if self.samples_chunk_size:
            return (self.chunk_length, self.samples_chunk_size, *self.shape[1:])
        return (self.chunk_length, *self.shape)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ChunkSpec:
        """The spec of a codec configuration as numcodecs hands it over.

        Parameters
        ----------
        config : dict
            The JSON configuration; an ``"id"`` key (numcodecs' codec id) is ignored.

        Returns
        -------
        ChunkSpec

        Raises
        ------
        CodecConfigError
            ``config`` is not a dict, lacks a required key, holds an unknown key or a
            bad value.
        """
        if not isinstance(config, dict):
            raise CodecConfigError(None, f"a vcfvirtual.bcf config is a JSON object, got {type(config).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(config) - fields - {"id"}
        if unknown:
            raise CodecConfigError(None, f"unknown vcfvirtual.bcf config keys {sorted(map(str, unknown))}")
        missing = REQUIRED_KEYS - set(config)
        if missing:
            raise CodecConfigError(None, f"vcfvirtual.bcf config lacks {sorted(missing)}")
        return cls(**{k: v for k, v in config.items() if k in fields})

    def to_config(self) -> dict[str, Any]:
        """The JSON configuration (lists, not tuples), without numcodecs' ``"id"``.

        Returns
        -------
        dict
            What :meth:`from_config` turns back into an equal spec.
        """
        config = dataclasses.asdict(self)
        config["shape"] = list(self.shape)
        config["filter_columns"] = list(self.filter_columns)
        # The columns layout's fields only where set: configs of the other layouts stay
        # byte for byte what earlier versions wrote (and read).
        for name in _COLUMNS_FIELDS:
            if not config[name]:
                del config[name]
        # Likewise the local-allele fields: only the local-allele arrays carry them.
        for name, unset in _LOCAL_FIELDS.items():
            if config[name] == unset:
                del config[name]
        return config


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ChunkSpec))
_field_values = operator.attrgetter(*_FIELD_NAMES)  # a spec's values, as a tuple in field order
_COLUMNS_FIELDS = ("samples_chunk_size", "compressor")
_LOCAL_FIELDS = {"gt_key": -1, "source_width": 0}
