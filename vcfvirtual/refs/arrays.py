"""The store as a whole, before anything is read: which keys and arrays the references
hold, and that the arrays agree with one another, with the store's header and with the
sizes the index recorded.

``checks.py`` checks each codec array's metadata against its own codec configuration;
what one array's metadata cannot tell is checked here:

- every key is one the index writes (``.zgroup``, ``.zattrs``, ``<array>/.zarray``,
  ``<array>/.zattrs``, ``<array>/<chunk>``): no ``zarr.json`` (zarr v3 metadata, which
  zarr would read before the checked ``.zarray``), no ``.zmetadata``, no nested group;
- every array is one the index writes for this header, and each it writes is there: an
  array named after a field or a fixed column is decoded by our codec (the codec named in
  no position, or as a compressor, is refused), the header's own arrays (``sample_id``...)
  name no codec and hold their bytes inline, sized as their metadata says;
- the codec arrays agree on records, chunking, ploidy and alleles; each INFO/FORMAT width
  is what the header's ``Number`` gives (A/R/G from the alleles and ploidy) or what the
  index recorded (``vcfvirtual.dimensions``), never wider;
- dimension names are consistent (xarray would raise its own error otherwise), and a codec
  array's chunk grid is complete, each chunk a byte range of the cache (zarr would fill a
  missing chunk with ``fill_value``: values silently wrong).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import itertools
import json
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .. import _json
from ..errors import UntrustedReferenceError
from ..manifests import inline
from .guard import UNTRUSTED_HINT

if TYPE_CHECKING:
    import os

    from vcfvirtual_codec.spec import ChunkSpec

    from ..bcf.fields import FieldMap
    from ..bcf.header import BCFHeader
    from ..manifests.provenance import Dimensions, Provenance

    PathLike = str | os.PathLike[str] | None

REINDEX_HINT = "re-run vcfvirtual index --force to write the references again"

Role = Literal["codec", "plain"]
# The fixed columns' arrays, decoded by our codec (GT's three only when the header declares GT).
FIXED_ARRAYS = (
    "variant_contig",
    "variant_position",
    "variant_length",
    "variant_id",
    "variant_id_mask",
    "variant_allele",
    "variant_quality",
    "variant_filter",
)
GENOTYPE_ARRAYS = ("call_genotype", "call_genotype_phased", "call_genotype_mask")
# The header's own arrays, inlined in the references: (dtype, filters) each is written with.
_STRINGS = ("|O", [{"id": "vlen-utf8"}])
PLAIN_ARRAYS = {
    "contig_id": _STRINGS,
    "contig_length": ("<i8", None),
    "filter_id": _STRINGS,
    "filter_description": _STRINGS,
    "sample_id": _STRINGS,
    "region_index": ("int", None),
}
OPTIONAL_ARRAYS = frozenset({"contig_length"})  # only when a ##contig line gives a length
REGION_INDEX_FIELDS = 6


@dataclasses.dataclass
class StoreKeys:
    """The references' keys sorted by what they are: each array's ``.zarray`` and
    ``.zattrs`` (as stored: JSON text or an object), its chunk keys' grid indices, and
    which arrays have a chunk stored inline."""

    metas: dict[str, Any] = dataclasses.field(default_factory=dict)
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    chunks: dict[str, list[str]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    inline: set[str] = dataclasses.field(default_factory=set)  # arrays with a chunk that is no [url, offset, length]


def _refuse(refs_path: PathLike, problem: str, hint: str = UNTRUSTED_HINT) -> UntrustedReferenceError:
    return UntrustedReferenceError(refs_path, problem[:600], hint=hint)


def split_key(keys: StoreKeys, key: str, value: Any, refs_path: PathLike) -> None:
    """File one reference key; refuse a key the index never writes. A chunk key's form
    is checked with its grid (:func:`check_codec_chunks`, :func:`check_plain_chunk`): once
    per key here costs more than the rest of an open's checks."""
    name, slash, leaf = key.partition("/")
    if not slash:
        if key == ".zgroup" and json_object(value, ".zgroup", refs_path).get("zarr_format") != 2:
            raise _refuse(refs_path, "the .zgroup is not zarr v2's, which the index writes")
        if key in (".zgroup", ".zattrs"):
            return
        raise _refuse(refs_path, f"the references hold key {key!r}, which vcfvirtual never writes")
    if leaf == ".zarray":
        keys.metas[name] = value
    elif leaf == ".zattrs":
        keys.attrs[name] = value
    elif name and leaf[:1].isdigit() and "/" not in leaf:
        keys.chunks[name].append(leaf)
        if type(value) is not list:
            keys.inline.add(name)
    else:
        # zarr.json (zarr v3 metadata, read before .zarray), .zmetadata, nested groups.
        raise _refuse(refs_path, f"the references hold key {key!r}, which vcfvirtual never writes")


def expected_arrays(header: BCFHeader, fields: FieldMap, local_alleles: bool = False) -> dict[str, Role]:
    """Every array the index writes for ``header``, and whether our codec decodes it: the
    INFO/FORMAT fields under the store's names (``fields``: its recorded renames and
    selection, which refuse clashing names); ``local_alleles``: call_LA, and call_LAD and
    call_LPL in place of call_AD and call_PL, as ``manifests/vcf_zarr.py`` writes them."""
    out: dict[str, Role] = dict.fromkeys(FIXED_ARRAYS, "codec")
    out.update(dict.fromkeys(fields.fields_by_array(), "codec"))
    if header.gt_key >= 0 and fields.genotypes:
        out.update(dict.fromkeys(GENOTYPE_ARRAYS, "codec"))
    if local_alleles:
        out["call_LA"] = "codec"
        for source, local in (("call_AD", "call_LAD"), ("call_PL", "call_LPL")):
            if out.pop(source, None) is not None:
                out[local] = "codec"
    out.update(dict.fromkeys(PLAIN_ARRAYS, "plain"))
    return out


def check_names(keys: StoreKeys, expected: dict[str, Role], refs_path: PathLike) -> None:
    """Only arrays the index writes for this header, each with its metadata, all there."""
    named = set(keys.metas) | set(keys.attrs) | set(keys.chunks)
    foreign = sorted(named - set(expected))
    if foreign:
        raise _refuse(refs_path, f"arrays {foreign[:5]} are not arrays vcfvirtual index writes for this header")
    bare = sorted(named - set(keys.metas))
    if bare:
        raise _refuse(refs_path, f"arrays {bare[:5]} have no .zarray metadata")
    missing = sorted(set(expected) - set(keys.metas) - OPTIONAL_ARRAYS)
    if missing:
        raise _refuse(refs_path, f"the references lack arrays {missing[:5]}, which the index writes for this header")


def json_object(value: Any, what: str, refs_path: PathLike) -> dict[str, Any]:
    """A metadata value (JSON text or already an object) as a dict."""
    try:
        parsed = _json.loads(value) if isinstance(value, (str, bytes)) else value
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise _refuse(refs_path, f"{what} is not JSON ({e})") from None
    if not isinstance(parsed, dict):
        raise _refuse(refs_path, f"{what} is not a JSON object")
    return parsed


def common_problems(meta: dict[str, Any]) -> list[str]:
    """What every array the index writes has: zarr v2, C order, '.' chunk keys, and a
    shape and chunks of counts, one chunk per dimension."""
    problems = []
    if meta.get("zarr_format") != 2:
        problems.append(f"zarr_format {meta.get('zarr_format')!r}, the index writes 2")
    if meta.get("order") != "C":
        problems.append(f"order {meta.get('order')!r}, the index writes 'C'")
    if meta.get("dimension_separator", ".") != ".":
        problems.append(f"dimension_separator {meta.get('dimension_separator')!r}, the index writes '.'")
    shape, chunks = meta.get("shape"), meta.get("chunks")
    if not (isinstance(shape, list) and isinstance(chunks, list)) or not (_counts(shape, 0) and _counts(chunks, 1)):
        problems.append(f"shape {shape!r} and chunks {chunks!r} are not counts of one rank")
    elif len(shape) != len(chunks):
        problems.append(f"shape {shape!r} and chunks {chunks!r} are not counts of one rank")
    return problems


def _counts(value: Any, lo: int) -> bool:
    return isinstance(value, list) and all(type(x) is int and lo <= x < 1 << 62 for x in value)


def check_plain_array(name: str, meta: dict[str, Any], header: BCFHeader, n_records: int, refs_path: PathLike) -> None:
    """A header array: the dtype and filters it is written with, no codec of ours in any
    position, its length the header's (region_index: at most a row per record)."""
    dtype, filters = PLAIN_ARRAYS[name]
    problems = common_problems(meta)
    allowed = _plain_codecs(filters)
    if (chain := codec_chain(meta)) not in allowed:
        written = " or ".join(map(repr, allowed))
        problems.append(f"codecs {chain!r} (filters, then compressor), the index writes {written}")
    found = meta.get("dtype")
    if dtype == "int":
        if not (isinstance(found, str) and found[:2] in ("|i", "<i") and found[2:] in ("1", "2", "4", "8")):
            problems.append(f"dtype {found!r} is not a little-endian integer")
    elif found != dtype:
        problems.append(f"dtype {found!r}, the index writes {dtype!r}")
    if not problems:
        problems += _plain_shape_problems(name, meta["shape"], meta["chunks"], header, n_records)
    if problems:
        raise _refuse(refs_path, f"array {name}: " + "; ".join(problems))


def codec_chain(meta: dict[str, Any]) -> list[Any]:
    """The codecs a Zarr v2 chunk is written through, in order: its filters, then its
    compressor (read in reverse), so a codec means the same whichever of the two holds it."""
    compressor = meta.get("compressor")
    return [*(meta.get("filters") or []), *([] if compressor is None else [compressor])]


def _plain_codecs(filters: list[dict[str, Any]] | None) -> list[list[Any]]:
    """The codec chains the index writes for a header array of ``filters``: the strings'
    Zstandard after vlen-utf8 (manifests/inline.py), or none (references written before)."""
    if filters is None:
        return [[]]
    return [[*filters, inline.V2_COMPRESSOR], list(filters)]


def _plain_shape_problems(
    name: str, shape: list[int], chunks: list[int], header: BCFHeader, n_records: int
) -> list[str]:
    if name == "region_index":
        if len(shape) != 2 or shape[1] != REGION_INDEX_FIELDS or shape[0] > max(n_records, 1):
            return [f"shape {shape}: the region index has at most a row per record ({n_records}) of 6 fields"]
    else:
        length = {
            "contig_id": len(header.contigs),
            "contig_length": len(header.contigs),
            "filter_id": len(header.filters),
            "filter_description": len(header.filters),
            "sample_id": len(header.samples),
        }[name]
        if shape != [length]:
            return [f"shape {shape}, the header gives [{length}]"]
    if any(c > max(s, 1) for c, s in zip(chunks, shape)):
        return [f"chunks {chunks} are larger than shape {shape}"]
    return []


def check_plain_chunk(name: str, leaf: str, value: Any, meta: dict[str, Any], refs_path: PathLike) -> None:
    """A header array's chunk: inline bytes (the index writes no reference for them)
    holding exactly one chunk's values, so zarr never reshapes a wrong count."""
    check_plain_chunk_key(name, leaf, value, meta, refs_path)
    check_plain_chunk_data(name, leaf, value, meta, refs_path)


def check_plain_chunk_key(name: str, leaf: str, value: Any, meta: dict[str, Any], refs_path: PathLike) -> None:
    """The cheap half of :func:`check_plain_chunk`: inline data, at a key of the chunk grid."""
    if not isinstance(value, str):
        raise _refuse(refs_path, f"{name}/{leaf} is not inline data, as the index writes a header array's chunks")
    index = leaf.split(".")
    grid = [max(1, -(-s // c)) for s, c in zip(meta["shape"], meta["chunks"])]
    if len(index) != len(grid) or not all(i.isdigit() and int(i) < n for i, n in zip(index, grid)):
        raise _refuse(refs_path, f"chunk {name}/{leaf} is outside the array's chunk grid {grid}")


def check_plain_chunk_data(name: str, leaf: str, value: str, meta: dict[str, Any], refs_path: PathLike) -> None:
    """The decoding half of :func:`check_plain_chunk` (a chunk whose key passed
    :func:`check_plain_chunk_key`): base64 holding exactly one chunk's values. Every
    sample name is decoded to count them, so a store's open may leave it to the chunk's
    first read."""
    try:
        data = base64.b64decode(value[7:], validate=True) if value.startswith("base64:") else value.encode()
    except (binascii.Error, ValueError) as e:
        raise _refuse(refs_path, f"{name}/{leaf} is not base64 ({e})") from None
    if codec_chain(meta)[-1:] == [inline.V2_COMPRESSOR]:  # the strings' (check_plain_array)
        data = _inflate_inline(f"{name}/{leaf}", data, refs_path)
    expected = math.prod(meta["chunks"])
    if meta["dtype"] == "|O":
        from numcodecs import VLenUTF8

        try:
            count = len(VLenUTF8().decode(data))
        except (ValueError, TypeError, UnicodeDecodeError, RuntimeError) as e:
            raise _refuse(refs_path, f"{name}/{leaf} is not vlen-utf8 strings ({e})") from None
        found = f"{count} strings"
    else:
        count = (
            len(data) // np.dtype(meta["dtype"]).itemsize if len(data) % np.dtype(meta["dtype"]).itemsize == 0 else -1
        )
        found = f"{len(data)} bytes"
    if count != expected:
        raise _refuse(refs_path, f"{name}/{leaf} holds {found}, not the {expected} values of a chunk {meta['chunks']}")


def _inflate_inline(key: str, frame: bytes, refs_path: PathLike) -> bytes:
    """An inline chunk's one Zstandard frame, decompressed after its header's size is
    bounded as the codec bounds a segment's (what the compressed bytes can honestly stand
    for, and the decode ceiling), so a crafted frame allocates nothing it cannot back."""
    from numcodecs import Zstd
    from vcfvirtual_codec.checks import inflate_limit, paid_ceiling
    from vcfvirtual_codec.columns import zstd_content_size
    from vcfvirtual_codec.local_alleles import zstd_frame_length

    view = np.frombuffer(frame, dtype=np.uint8)
    declared = zstd_content_size(view)
    if declared is None or zstd_frame_length(view) != len(frame):
        raise _refuse(refs_path, f"{key} is not one Zstandard frame that states its decompressed size")
    limit = min(inflate_limit(len(frame)), paid_ceiling(len(frame)))
    if declared > limit:
        raise _refuse(
            refs_path,
            f"{key}'s Zstandard frame claims {declared} bytes from {len(frame)}, more than they can "
            f"stand for ({limit}); refusing to allocate",
        )
    out = np.empty(declared, dtype=np.uint8)
    try:
        Zstd().decode(frame, out)
    except (RuntimeError, ValueError) as e:
        raise _refuse(refs_path, f"{key} does not decompress ({e})") from None
    return out.tobytes()


# Arrays whose chunks may be left out, read as the fill value: call_genotype_mask's
# all-False chunks (a GT block whose every call holds the ploidy's alleles, none missing),
# as bio2zarr's store leaves them out. The caller checks each left out against its GT
# block where it can read the cache (checks.omitted_mask_chunks).
SPARSE_ARRAYS = frozenset({"call_genotype_mask"})


def check_codec_chunks(name: str, meta: dict[str, Any], keys: StoreKeys, refs_path: PathLike) -> None:
    """A codec array's chunk grid: complete (zarr fills a missing chunk with fill_value,
    which would read as values; but :data:`SPARSE_ARRAYS`), every key one of it, every
    chunk a byte range (checked against the cache by the caller), never inline bytes the
    cache's fingerprint does not cover."""
    leaves = keys.chunks.get(name, [])
    if name in keys.inline:
        raise _refuse(refs_path, f"array {name} has a chunk of inline data, not a byte range of the cache")
    # The index writes one chunk across an axis of no samples or values (a zarr chunk is
    # never 0 wide) and none at all for a store of no records.
    grid = [
        -(-s // c) if axis == 0 else max(1, -(-s // c))
        for axis, (s, c) in enumerate(zip(meta["shape"], meta["chunks"]))
    ]
    if grid and grid[0] == 0:
        grid = [0] * len(grid)
    if len(leaves) != math.prod(grid) and not (name in SPARSE_ARRAYS and len(leaves) < math.prod(grid)):
        raise _refuse(
            refs_path,
            f"array {name} has {len(leaves)} chunks of its grid's {math.prod(grid)}: zarr would fill the others",
            hint=REINDEX_HINT,
        )
    # As many keys as the grid has chunks (or fewer), all distinct: complete if every one
    # is in it (one set operation, in C, rather than parsing each key).
    if leaves and (outside := set(leaves) - set(map(".".join, itertools.product(*(map(str, range(n)) for n in grid))))):
        raise _refuse(refs_path, f"chunk {name}/{sorted(outside)[0]} is outside the array's chunk grid {grid}")


def check_dimension_names(keys: StoreKeys, metas: dict[str, dict[str, Any]], refs_path: PathLike) -> None:
    """Every array names one dimension per axis, each dimension one size throughout (xarray
    refuses anything else with its own error)."""
    sizes: dict[str, tuple[int, str]] = {}
    for name, meta in metas.items():
        attrs = json_object(keys.attrs.get(name), f"{name}/.zattrs", refs_path) if name in keys.attrs else {}
        dims = attrs.get("_ARRAY_DIMENSIONS")
        shape = meta["shape"]
        if not isinstance(dims, list) or not all(isinstance(d, str) for d in dims) or len(dims) != len(shape):
            raise _refuse(refs_path, f"array {name}: _ARRAY_DIMENSIONS {dims!r} do not name its {len(shape)} axes")
        for dim, size in zip(dims, shape):
            seen = sizes.setdefault(dim, (size, name))
            if seen[0] != size:
                raise _refuse(refs_path, f"dimension {dim!r} is {seen[0]} long in {seen[1]} and {size} in {name}")


def check_codec_arrays(
    specs: dict[str, ChunkSpec], header: BCFHeader, provenance: Provenance, refs_path: PathLike
) -> None:
    """The codec arrays agree with one another and the index's attributes: records,
    chunking, samples blocks, alleles, ploidy, and each field's width."""
    problems = _shared_problems(specs, header, provenance)
    dimensions = provenance.dimensions
    if dimensions is None:
        raise _refuse(
            refs_path,
            "the references record no dimensions (vcfvirtual.dimensions) to check the arrays' widths against",
            hint=REINDEX_HINT,
        )
    problems += _allele_and_ploidy_problems(specs, header, dimensions)
    if not problems:
        problems += width_problems(specs, header, dimensions)
    if problems:
        raise _refuse(refs_path, "; ".join(problems[:4]))


def _shared_problems(specs: dict[str, ChunkSpec], header: BCFHeader, provenance: Provenance) -> list[str]:
    from ..cache.names import effective_samples_chunk_size

    problems = []
    first = next(iter(specs.values()), None)
    other = next((s for s in specs.values() if first is not None and s.num_records != first.num_records), None)
    if first is not None and other is not None:
        problems.append(
            f"the arrays disagree on the number of records: {first.num_records} in {first.array}, "
            f"{other.num_records} in {other.array}"
        )
    lengths = {s.chunk_length for s in specs.values()}
    if lengths != {provenance.variants_chunk_size} and specs:
        problems.append(f"chunk lengths {sorted(lengths)[:4]}, the index recorded {provenance.variants_chunk_size!r}")
    block = provenance.samples_chunk_size
    blocks = {s.samples_chunk_size for s in specs.values() if s.samples_chunk_size}
    if blocks and (type(block) is not int or blocks != {effective_samples_chunk_size(block, len(header.samples))}):
        problems.append(f"samples blocks {sorted(blocks)[:4]}, the index recorded samples_chunk_size {block!r}")
    return problems


def _allele_and_ploidy_problems(specs: dict[str, ChunkSpec], header: BCFHeader, dimensions: Dimensions) -> list[str]:
    problems = []
    alleles = specs["variant_allele"].shape[0] if "variant_allele" in specs else None
    if alleles != dimensions.alleles:
        problems.append(f"variant_allele is {alleles} wide, the index recorded {dimensions.alleles!r} alleles")
    if header.gt_key >= 0:
        ploidies = {specs[n].ploidy for n in GENOTYPE_ARRAYS if n in specs}
        if ploidies != {dimensions.ploidy}:
            problems.append(f"genotype arrays of ploidy {sorted(ploidies)}, the index recorded {dimensions.ploidy!r}")
    return problems


def width_problems(specs: dict[str, ChunkSpec], header: BCFHeader, dimensions: Dimensions) -> list[str]:
    """Each INFO/FORMAT array's width (values per record or per call) against its header
    ``Number``: A, R and G give it from the alleles and ploidy; a fixed count or '.' from
    the data, which the index recorded."""
    alleles = dimensions.alleles
    ploidy = dimensions.ploidy
    derived = {"A": alleles - 1, "R": alleles}
    if header.gt_key >= 0 and type(ploidy) is int:
        derived["G"] = math.comb(alleles + ploidy - 1, ploidy)
    problems = []
    for field in (*header.info, *header.formats):
        name = ("variant_" if field.category == "INFO" else "call_") + field.name
        spec = specs.get(name)
        if spec is None or spec.kind not in ("info", "format"):
            continue
        extra = spec.shape[1:] if field.category == "FORMAT" else spec.shape
        width = extra[0] if extra else 1
        recorded = dimensions.fields.get(f"{field.category}/{field.name}")
        if field.type == "Flag":
            allowed, why = 1, "a Flag"
        elif field.number in derived:
            allowed, why = derived[field.number], f"Number={field.number} with {alleles} alleles"
        elif type(recorded) is int:
            allowed, why = recorded, f"Number={field.number}, and the index recorded {recorded}"
        else:
            allowed, why = 1 if field.number == "." else max(int(field.number), 1), f"Number={field.number}"
        if width != allowed:
            problems.append(f"array {name} is {width} wide, where {why} gives {allowed}")
        elif bool(extra) != _has_values_axis(field, allowed):
            problems.append(f"array {name} has {'a' if extra else 'no'} values axis, which the index does not write")
    return problems


def _has_values_axis(field: Any, width: int) -> bool:
    """Whether the index gives a field a values axis (bio2zarr's rules): A/R/G always,
    FORMAT/LAA always, a Flag never, others when more than one value is seen or declared."""
    if field.type == "Flag":
        return False
    if field.number in ("A", "R", "G") or (field.category == "FORMAT" and field.name == "LAA"):
        return True
    return width > 1
