"""Edited records inside valid BGZF blocks: no silent difference from htslib.

The fuzz targets mutate bytes; most mutations break a length or a CRC, and are refused.
Here each case edits one *field* of one record of the fuzz seed (bcfdata.FUZZ_RECORDS)
and re-encodes the record, so every length stays consistent, and writes the records
into fresh BGZF blocks (CRCs correct). htslib (pysam) reads the same file. Then:

* where htslib refuses the file (bcf_record_check; pysam raises), the index must raise a
  typed error, and so must the codec (decoding the edited records with the seed's
  configs: the cache could be edited after indexing) for the arrays reading the edit;
* where htslib reads it, every core array (contig, position, length, ID, alleles, QUAL,
  FILTER, INFO DP/AF/NOTE/SOMATIC, FORMAT DP/QS/FT, GT) must equal pysam's values, or
  the index must raise a typed error (counted, never silent); the codec on the seed's
  configs, likewise: its value, or a ChunkDecodeError (e.g. outside the seed's dtype).

The index side runs on the bgzf and the columns cache layout (columns: samples blocks of
2, so the 3 samples make a block of 2 and a narrower one of 1): the columns demux at
index time must carry every edit htslib reads into its segments. The codec side decodes
records, which only the record layouts store.

Conventions where pysam's reading is coarser than VCF Zarr's: pysam's None for an
integer stands for missing (-1) or an empty value (-2, fill), and both are accepted;
a float NaN that is not the missing pattern reads as missing (bio2zarr's rule).
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pysam
import pytest
import zarr
from numcodecs import VLenUTF8
from vcfvirtual_codec import codec

import vcfvirtual
from vcfvirtual.errors import ChunkDecodeError, CorruptBCFError, VcfVirtualError

from .. import bcfdata
from ..conftest import layout_options, resolved_refs

pysam.set_verbosity(0)  # htslib's warnings about the edited records are expected

# --- a BCF record model: enough to re-encode a record after editing one field ------------

SIZE = {0: 0, 1: 1, 2: 2, 3: 4, 5: 4, 7: 1}
NULL, INT8, INT16, INT32, FLOAT, CHAR = 0, 1, 2, 3, 5, 7
INT_FORMAT = {INT8: "<b", INT16: "<h", INT32: "<i"}


@dataclass(frozen=True)
class Typed:
    """A typed value: type code, count and its bytes (count x size x vectors)."""

    t: int
    n: int
    data: bytes = b""

    def encode(self) -> bytes:
        if self.n < 15:
            return bytes([(self.n << 4) | self.t]) + self.data
        return bytes([0xF0 | self.t, 0x13]) + struct.pack("<i", self.n) + self.data


def ints(t: int, values) -> Typed:
    return Typed(t, len(values), b"".join(struct.pack(INT_FORMAT[t], v) for v in values))


def _typed(b: bytes, i: int, vectors: int = 1) -> tuple[Typed, int]:
    d = b[i]
    t, n = d & 15, d >> 4
    i += 1
    if n == 15:
        size = SIZE[b[i] & 15]
        n = int.from_bytes(b[i + 1 : i + 1 + size], "little", signed=True)
        i += 1 + size
    size = n * SIZE[t] * vectors
    return Typed(t, n, bytes(b[i : i + size])), i + size


@dataclass(frozen=True)
class Record:
    chrom: int
    pos: int  # stored as uint32
    rlen: int  # stored as uint32
    qual: int  # the float's bits
    n_sample: int
    id: Typed
    alleles: tuple
    filters: Typed
    info: tuple  # ((key Typed, value Typed), ...)
    fmt: tuple
    n_allele: int | None = None  # overrides len(alleles) in the fixed part

    def encode(self) -> bytes:
        n_allele = len(self.alleles) if self.n_allele is None else self.n_allele
        shared = (
            struct.pack("<iIII", self.chrom, self.pos & 0xFFFFFFFF, self.rlen & 0xFFFFFFFF, self.qual)
            + struct.pack("<HHI", len(self.info), n_allele, self.n_sample | (len(self.fmt) << 24))
            + self.id.encode()
            + b"".join(a.encode() for a in self.alleles)
            + self.filters.encode()
            + b"".join(k.encode() + v.encode() for k, v in self.info)
        )
        indiv = b"".join(k.encode() + v.encode() for k, v in self.fmt)
        return struct.pack("<II", len(shared), len(indiv)) + shared + indiv


def parse_records(b: bytes) -> list[Record]:
    records, p = [], 0
    while p < len(b):
        l_shared, l_indiv = struct.unpack_from("<II", b, p)
        chrom, pos, rlen, qual, n_info, n_allele, ns = struct.unpack_from("<iIIIHHI", b, p + 8)
        n_sample, n_fmt = ns & 0xFFFFFF, ns >> 24
        idv, i = _typed(b, p + 32)
        alleles = []
        for _ in range(n_allele):
            a, i = _typed(b, i)
            alleles.append(a)
        filters, i = _typed(b, i)
        info = []
        for _ in range(n_info):
            k, i = _typed(b, i)
            v, i = _typed(b, i)
            info.append((k, v))
        i = p + 8 + l_shared
        fmt = []
        for _ in range(n_fmt):
            k, i = _typed(b, i)
            v, i = _typed(b, i, n_sample)
            fmt.append((k, v))
        records.append(Record(chrom, pos, rlen, qual, n_sample, idv, tuple(alleles), filters, tuple(info), tuple(fmt)))
        p += 8 + l_shared + l_indiv
    return records


# --- the edits ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    record: int  # which seed record is edited
    edited: Record
    touched: tuple[str, ...]  # arrays that read the edited part


def _info_arrays(keys, key) -> tuple[str, ...]:
    return (f"variant_{keys[key]}",)


def cases(seed: list[Record], names: dict[int, tuple[str, str]]) -> list[Case]:
    """Deterministic edits of each seed record. ``names``: dictionary key -> (INFO name,
    FORMAT name) for the arrays an edit touches."""
    out = []
    for r, rec in enumerate(seed):

        def add(name, touched=(), r=r, rec=rec, **changes):
            out.append(Case(f"record{r}-{name}", r, replace(rec, **changes), tuple(touched)))

        for v in (0x7FFFFFFF, 0x80000000, 0xC0000000, 0xFFFFFFFF):
            add(f"rlen={v:#x}", ("variant_length",), rlen=v)
        for v in (0, 0x7FFFFFFE, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF):
            add(f"pos={v:#x}", ("variant_position",), pos=v)
        for v in (0x7F800001, 0x7F800002, 0x7FC00000, 0xFF800000, 0):
            add(f"qual={v:#x}", ("variant_quality",), qual=v)
        id_bytes = rec.id.data
        for t in (NULL, INT8):
            add(
                f"id-type{t}-n{rec.id.n}",
                ("variant_id", "variant_id_mask"),
                id=Typed(t, rec.id.n, id_bytes if t == INT8 else b""),
            )
        add("id-null-n0", ("variant_id", "variant_id_mask"), id=Typed(NULL, 0))
        add("id-char-n0", ("variant_id", "variant_id_mask"), id=Typed(CHAR, 0))
        add("no-alleles", ("variant_allele",), n_allele=0, alleles=())
        add("ref-null", ("variant_allele",), alleles=(Typed(NULL, 0), *rec.alleles[1:]))
        add("filter-null-n1", ("variant_filter",), filters=Typed(NULL, 1))
        add("filter-null-n0", ("variant_filter",), filters=Typed(NULL, 0))
        for j, (k, v) in enumerate(rec.info):
            key = k.data[0]
            touched = (f"variant_{names[key][0]}",)

            def with_info(value, j=j, k=k, rec=rec):
                info = list(rec.info)
                info[j] = (k, value)
                return tuple(info)

            if v.n:
                add(f"info{key}-null-n{v.n}", touched, info=with_info(Typed(NULL, v.n)))
            add(f"info{key}-null-n0", touched, info=with_info(Typed(NULL, 0)))
            if v.t in INT_FORMAT:
                for t, values in (
                    (INT8, (-128, -127, -126, 127)),
                    (INT16, (-32768, -32767, -32766, 300)),
                    (INT32, (-(2**31), -(2**31) + 1, -(2**31) + 2, 70000)),
                ):
                    for x in values:
                        add(f"info{key}-int{t}={x}", touched, info=with_info(ints(t, [x])))
                    add(f"info{key}-int{t}=[5,end]", touched, info=with_info(ints(t, [5, values[1]])))
                    add(f"info{key}-int{t}=[end,5]", touched, info=with_info(ints(t, [values[1], 5])))
            if v.t == FLOAT:
                for bits in (0x7F800001, 0x7F800002, 0x7FC00000, 0xFF800000):
                    add(f"info{key}-float={bits:#x}", touched, info=with_info(Typed(FLOAT, 1, struct.pack("<I", bits))))
                    add(
                        f"info{key}-float=[{bits:#x},0.25]",
                        touched,
                        info=with_info(Typed(FLOAT, 2, struct.pack("<If", bits, 0.25))),
                    )
            if v.t == CHAR:
                add(f"info{key}-char-n0", touched, info=with_info(Typed(CHAR, 0)))
        for j, (k, v) in enumerate(rec.fmt):
            key = k.data[0]
            name = names[key][1]
            touched = (
                ("call_genotype", "call_genotype_phased", "call_genotype_mask") if name == "GT" else (f"call_{name}",)
            )

            def with_fmt(value, j=j, k=k, rec=rec):
                fmt = list(rec.fmt)
                fmt[j] = (k, value)
                return tuple(fmt)

            if v.n:
                add(f"format{key}-null-n{v.n}", touched, fmt=with_fmt(Typed(NULL, v.n)))
            add(f"format{key}-null-n0", touched, fmt=with_fmt(Typed(NULL, 0)))
            if name == "DP":
                for t, values in (
                    (INT8, (-127, -126, 127)),
                    (INT16, (-32767, -32766, 300)),
                    (INT32, (-(2**31) + 1, -(2**31) + 2, 70000)),
                ):
                    add(f"format{key}-int{t}={values}", touched, fmt=with_fmt(ints(t, list(values))))
    return out


# --- reading: htslib's values as VCF Zarr values, and ours --------------------------------

F32_MISSING, F32_FILL = 0x7F800001, 0x7F800002
INT_NONE = (-1, -2)  # what pysam's None may stand for (missing, or an empty value)


def pysam_records(path: Path):
    """pysam's reading: [(VariantRecord facts)], or None when htslib refuses the file."""
    try:
        with pysam.VariantFile(str(path)) as vf:
            contigs = list(vf.header.contigs)
            samples = list(vf.header.samples)
            rows = []
            for rec in vf:
                fmt = list(rec.format)
                row = {
                    "contig": contigs.index(rec.chrom),
                    "position": rec.pos,
                    "length": rec.rlen,
                    "id": rec.id,
                    "alleles": list(rec.alleles or ()),
                    "qual": rec.qual,
                    "filter": set(rec.filter.keys()),
                    "info": {k: rec.info[k] for k in rec.info},
                    "gt_first": not fmt or fmt[0] == "GT",
                    "samples": [{k: rec.samples[s][k] for k in fmt} for s in samples],
                    "phased": [rec.samples[s].phased for s in samples],
                }
                rows.append(row)
            return rows
    except Exception:  # htslib's refusals surface as OSError/ValueError
        return None


def _as_list(v):
    if v is None:
        return [None]
    return list(v) if isinstance(v, tuple) else [v]


# A lone INFO int32 holding bcf_int32_vector_end: pysam returns it as a number, bio2zarr
# (the reference converter) stores fill, as we do. test_lone_info_int32_end_of_vector_is_fill
# pins bio2zarr's reading.
INT32_VECTOR_END = -(2**31) + 1


def _lone_missing_fills(values: list, width: int, info: bool) -> list:
    """An INFO vector written "." (one missing value) is missing in every slot, as VCF
    means and bio2zarr stores it; pysam reads it as (None,). FORMAT keeps one missing."""
    return [None] * width if info and width > 1 and values == [None] else values


def _int_diff(ours: np.ndarray, theirs, info: bool = False) -> bool:
    """Whether an integer vector differs from pysam's value (scalar, tuple or None)."""
    values = _lone_missing_fills(_as_list(theirs), ours.shape[-1], info)
    if len(values) > ours.shape[-1]:
        return True
    for a, b in zip(ours.tolist(), values):
        if b == INT32_VECTOR_END and len(values) == 1 and a == -2:
            continue
        if (a not in INT_NONE) if b is None else a != b:
            return True
    return any(a != -2 for a in ours.tolist()[len(values) :])


def _float_diff(ours: np.ndarray, theirs, qual: bool = False, info: bool = False) -> bool:
    """Whether float values differ from pysam's. None is missing (or, for INFO/FORMAT,
    fill); a NaN that is not missing is missing in INFO/FORMAT (bio2zarr's rule), and
    in QUAL a NaN that is neither missing nor fill (bio2zarr keeps it)."""
    bits = ours.astype("<f4").view("<u4").tolist()
    values = _lone_missing_fills(_as_list(theirs), len(bits), info)
    if len(values) > len(bits):
        return True
    for a, b in zip(bits, values):
        if b is None:
            if a != F32_MISSING and (qual or a != F32_FILL):
                return True
        elif math.isnan(b):
            is_nan = (a & 0x7F800000) == 0x7F800000 and (a & 0x7FFFFF) != 0
            if (not is_nan or a in (F32_MISSING, F32_FILL)) if qual else a != F32_MISSING:
                return True
        elif a != struct.unpack("<I", struct.pack("<f", b))[0]:
            return True
    # Past htslib's values: fill, or missing for the slots an end-of-vector ended inside
    # the record's width (bio2zarr's reading, tested on the corpus).
    return any(a not in (F32_FILL, F32_MISSING) for a in bits[len(values) :])


def _str_diff(ours: np.ndarray, theirs) -> bool:
    parts = [str(x) for x in np.atleast_1d(ours).tolist()]
    if theirs is None:  # missing, or a value of no characters (fill): bio2zarr gives "" for FORMAT
        return any(p not in ("", ".") for p in parts)
    want = theirs
    if isinstance(want, tuple):
        want = ",".join(want)
    got = [p for p in parts if p != ""]
    return ",".join(got) != want and not (want == "" and got == ["."])


def differences(ours: dict, rows, info_types: dict, format_types: dict) -> list[str]:
    """Every way our arrays differ from pysam's rows; arrays absent from ``ours`` (the
    codec refused them) are not compared."""
    problems = []
    n = next(len(v) for k, v in ours.items() if k.startswith(("variant_", "call_")))
    if n != len(rows):
        return [f"{n} records, htslib reads {len(rows)}"]
    filters = [str(f) for f in ours["filter_id"].tolist()]
    for i, row in enumerate(rows):

        def bad(what, got, want, i=i):
            problems.append(f"record {i} {what}: ours {got!r}, htslib {want!r}")

        for arr, key in (("variant_contig", "contig"), ("variant_position", "position"), ("variant_length", "length")):
            if arr in ours and ours[arr][i] != row[key]:
                bad(arr, ours[arr][i], row[key])
        if "variant_id" in ours and ours["variant_id"][i] != (row["id"] or "."):
            bad("variant_id", ours["variant_id"][i], row["id"])
        if "variant_id_mask" in ours and ours["variant_id_mask"][i] != (row["id"] is None):
            bad("variant_id_mask", ours["variant_id_mask"][i], row["id"])
        if "variant_allele" in ours:
            alleles = [str(a) for a in ours["variant_allele"][i].tolist()]
            if alleles[: len(row["alleles"])] != row["alleles"] or any(alleles[len(row["alleles"]) :]):
                bad("variant_allele", alleles, row["alleles"])
        if "variant_quality" in ours and _float_diff(ours["variant_quality"][i : i + 1], row["qual"], qual=True):
            bad("variant_quality", ours["variant_quality"][i], row["qual"])
        if "variant_filter" in ours and (
            [f for f, on in zip(filters, ours["variant_filter"][i]) if on] != [f for f in filters if f in row["filter"]]
        ):
            bad("variant_filter", ours["variant_filter"][i], row["filter"])
        for name, vcf_type in info_types.items():
            if f"variant_{name}" not in ours:
                continue
            got = ours[f"variant_{name}"][i]
            present = name in row["info"]
            want = row["info"].get(name)
            if vcf_type == "Flag":
                wrong = bool(got) != present
            elif not present:
                wrong = not (
                    np.all(got == -1)
                    if vcf_type == "Integer"
                    else np.all(got.astype("<f4").view("<u4") == F32_MISSING)
                    if vcf_type == "Float"
                    else all(str(x) == "." for x in np.atleast_1d(got).tolist())
                )
            elif vcf_type == "Integer":
                wrong = _int_diff(np.atleast_1d(got), want, info=True)
            elif vcf_type == "Float":
                wrong = _float_diff(np.atleast_1d(got), want, info=True)
            else:
                wrong = _str_diff(got, want)
            if wrong:
                bad(f"variant_{name}", np.asarray(got).tolist(), want if present else "absent")
        for name, vcf_type in format_types.items():
            for s, call in enumerate(row["samples"]):
                if f"call_{name}" not in ours:
                    break
                got = ours[f"call_{name}"][i, s]
                if name not in call:
                    wrong = not (
                        np.all(got == -1)
                        if vcf_type == "Integer"
                        else np.all(got.astype("<f4").view("<u4") == F32_MISSING)
                        if vcf_type == "Float"
                        else all(str(x) == "." for x in np.atleast_1d(got).tolist())
                    )
                elif vcf_type == "Integer":
                    wrong = _int_diff(np.atleast_1d(got), call[name])
                elif vcf_type == "Float":
                    wrong = _float_diff(np.atleast_1d(got), call[name])
                else:
                    wrong = _str_diff(got, call[name])
                if wrong:
                    bad(f"call_{name} sample {s}", np.asarray(got).tolist(), call.get(name, "absent"))
        if not row["gt_first"] or "call_genotype" not in ours or "call_genotype_phased" not in ours:
            continue  # pysam reads GT only as the first FORMAT field (htslib's convention)
        for s, call in enumerate(row["samples"]):
            gt = ours["call_genotype"][i, s].tolist()
            want = call.get("GT")
            if want is None:
                if any(a != -1 for a in gt):
                    bad(f"call_genotype sample {s}", gt, "absent")
                continue
            n_alleles = len(row["alleles"])
            # pysam gives None for a missing allele and for an index outside the alleles.
            same = len(want) <= len(gt) and all(
                a == b if b is not None else (a == -1 or not 0 <= a < n_alleles) for a, b in zip(gt, want)
            )
            if not same or any(a != -2 for a in gt[len(want) :]):
                bad(f"call_genotype sample {s}", gt, want)
            elif len(want) > 1 and None not in want and ours["call_genotype_phased"][i, s] != row["phased"][s]:
                bad(f"call_genotype_phased sample {s}", ours["call_genotype_phased"][i, s], row["phased"][s])
    return problems


# --- the seed and the harness -------------------------------------------------------------


@dataclass
class Seed:
    header: bytes  # the uncompressed stream's magic, l_text and header text
    records: list[Record]
    specs: dict  # array -> ChunkSpec of the seed indexed in one raw chunk
    static: dict  # arrays the codec does not decode (filter_id...), as the seed has them
    info_types: dict
    format_types: dict
    names: dict


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> Seed:
    work = tmp_path_factory.mktemp("parity")
    bgzf = bcfdata.fuzz_bcf(work / "seed.bcf")
    plain = gzip.decompress(bgzf.read_bytes())
    header_size = 9 + int.from_bytes(plain[5:9], "little")
    records = parse_records(plain[header_size:])
    assert b"".join(r.encode() for r in records) == plain[header_size:]  # the model re-encodes exactly
    refs = work / "seed.json"
    vcfvirtual.index(
        bgzf,
        refs_path=refs,
        cache_path=work / "seed.cache",
        variants_chunk_size=len(records),
        cache_layout="raw",
        force=True,
        progress=False,
    )
    specs = _codec_specs(refs)
    with pysam.VariantFile(str(bgzf)) as vf:
        h = vf.header
        info_types = {k: h.info[k].type for k in h.info}
        format_types = {k: h.formats[k].type for k in h.formats if k != "GT"}
        names = collections.defaultdict(lambda: ("?", "?"))
        for k in h.info:
            names[h.info[k].id] = (k, names[h.info[k].id][1])
        for k in h.formats:
            names[h.formats[k].id] = (names[h.formats[k].id][0], k)
    group = zarr.open_group(vcfvirtual.open_store(refs), mode="r")
    static = {"filter_id": group["filter_id"][:]}
    return Seed(plain[:header_size], records, specs, static, info_types, format_types, dict(names))


def _write_bgzf(path: Path, data: bytes) -> Path:
    """``data`` in BGZF blocks written by htslib: CRCs and sizes all correct."""
    with pysam.BGZFile(str(path), "wb") as f:
        f.write(data)
    return path


def _codec_specs(refs: Path) -> dict:
    """{array: ChunkSpec} of every codec-decoded array of a Kerchunk JSON."""
    specs = {}
    for key, value in json.loads(refs.read_text())["refs"].items():
        if key.endswith("/.zarray"):
            filters = json.loads(value).get("filters") or []
            if filters and filters[-1].get("id") == codec.CODEC_ID:
                specs[key.split("/")[0]] = codec.ChunkSpec.from_config(filters[-1])
    return specs


def _decode_one(data: bytes, spec: codec.ChunkSpec) -> np.ndarray:
    """One chunk through the codec and the vlen-utf8 step zarr runs after it."""
    raw = codec.decode_chunk(data, spec)
    if spec.dtype == "str":
        return np.asarray(VLenUTF8().decode(raw), dtype=object).reshape(spec.chunk_shape)
    return np.frombuffer(np.ascontiguousarray(raw).tobytes(), dtype=spec.dtype).reshape(spec.chunk_shape)


def _decode(specs: dict, chunk_of) -> tuple[dict, dict]:
    """({array: values}, {array: ChunkDecodeError}): each array's one chunk (the bytes
    ``chunk_of(array)``) through the codec."""
    values, errors = {}, {}
    for name, spec in specs.items():
        try:
            values[name] = _decode_one(chunk_of(name), spec)
        except ChunkDecodeError as e:
            errors[name] = e
    return values, errors


def _index_and_read(seed: Seed, path: Path, work: Path, layout: str = "bgzf") -> tuple[dict, dict]:
    """Index ``path`` (a CorruptBCFError... propagates), then read every array's chunks as
    zarr would (a whole store read through zarr costs 10x more, for the same codec calls):
    one variants chunk, and in the columns layout the samples blocks side by side."""
    refs = work / "case.json"
    vcfvirtual.index(
        path,
        refs_path=refs,
        cache_path=work / "case.cache",
        variants_chunk_size=len(seed.records),
        force=True,
        progress=False,
        **layout_options(layout),
    )
    doc = resolved_refs(refs)
    cache = bcfdata.cache_file(work / "case.cache").read_bytes()  # a columns cache's one part
    values, errors = {}, {}
    for name, spec in _codec_specs(refs).items():
        blocks = -(-spec.shape[0] // spec.samples_chunk_size) if spec.samples_chunk_size else 1
        parts = []
        try:
            for j in range(blocks):
                # The chunk key "name/0.j.0...": variants chunk 0, samples block j.
                index = (
                    ["0", str(j), *("0" * (len(spec.shape) - 1))]
                    if spec.samples_chunk_size
                    else ["0"] * (1 + len(spec.shape))
                )
                _, offset, length = doc[f"{name}/" + ".".join(index)]
                parts.append(_decode_one(cache[offset : offset + length], spec))
        except ChunkDecodeError as e:
            errors[name] = e
            continue
        # The last block's samples past the array's extent are padding zarr drops.
        values[name] = np.concatenate(parts, axis=1)[:, : spec.shape[0]] if len(parts) > 1 else parts[0]
    return {**seed.static, **values}, errors


def _decode_with_seed_configs(seed: Seed, stream: bytes) -> tuple[dict, dict]:
    """Decode ``stream`` (one chunk of records) with the seed's codec configs, as a cache
    edited after indexing would be."""
    return _decode(seed.specs, lambda name: stream)


Outcome = collections.namedtuple("Outcome", "case htslib index codec")


def run_case(seed: Seed, case: Case, work: Path, layout: str = "bgzf") -> tuple[Outcome, list[str]]:
    """(what happened, silent differences from htslib) for one edited record; the codec
    on the seed's configs is asked only with the bgzf layout (records, not segments)."""
    records = list(seed.records)
    records[case.record] = case.edited
    stream = b"".join(r.encode() for r in records)
    path = _write_bgzf(work / "case.bcf", seed.header + stream)
    rows = pysam_records(path)
    problems = []
    try:
        ours, read_errors = _index_and_read(seed, path, work, layout)
        index = "values"
        if read_errors:
            # The index accepted the records: reading them must not fail.
            problems.append(f"indexed, then refused at read time: {list(read_errors.values())[0]}")
    except VcfVirtualError as e:
        ours, index = None, f"refused ({type(e).__name__})"
    if rows is None and ours is not None:
        problems.append("htslib refuses the file, the index reads it")
    if rows is not None and ours is not None:
        problems += differences(ours, rows, seed.info_types, seed.format_types)
    if layout != "bgzf":
        return Outcome(case.name, "refuses" if rows is None else "reads", index, "not asked"), problems
    values, errors = _decode_with_seed_configs(seed, stream)
    if rows is None:
        read = [a for a in case.touched if a in values]
        if read:
            problems.append(f"htslib refuses the record, the codec decodes {read}")
        codec_outcome = "refused" if not read else "decoded"
    else:
        # Rows past the records are padding: the seed's chunk holds every record.
        decoded = {**seed.static, **values}
        problems += [f"codec: {p}" for p in differences(decoded, rows, seed.info_types, seed.format_types)]
        codec_outcome = "values" if not errors else f"{len(errors)} arrays refused"
    return Outcome(case.name, "refuses" if rows is None else "reads", index, codec_outcome), problems


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_edited_records_read_as_htslib_reads_them_or_are_refused(seed, tmp_path, layout):
    """A few hundred edits: zero silent differences, at index time and at read time."""
    all_cases = cases(seed.records, seed.names)
    assert len(all_cases) >= 200
    outcomes = collections.Counter()
    failures = []
    for case in all_cases:
        outcome, problems = run_case(seed, case, tmp_path, layout)
        outcomes[(outcome.htslib, outcome.index)] += 1
        if problems:
            failures.append(f"{case.name}: {problems[:3]}")
    print(f"\n{len(all_cases)} edited records: {dict(outcomes)}")
    assert not failures, f"{len(failures)} silent differences from htslib:\n" + "\n".join(failures[:40])
    # The edits reach both sides: htslib reads some and refuses others.
    assert outcomes[("reads", "values")] and outcomes[("refuses", "refused (CorruptBCFError)")]


# --- named cases: the ones issue 14 (items 9 and 13) reported --------------------------


def _edited(seed: Seed, work: Path, record: int = 0, **changes) -> tuple[Path, bytes]:
    """(BGZF file, uncompressed record stream) of the seed with one record edited."""
    records = list(seed.records)
    records[record] = replace(records[record], **changes)
    stream = b"".join(r.encode() for r in records)
    return _write_bgzf(work / "edited.bcf", seed.header + stream), stream


@pytest.fixture(params=["bgzf", "columns"])
def layout(request) -> str:
    """The cache layout the named cases below index with."""
    return request.param


def _read(seed: Seed, path: Path, work: Path, layout: str) -> dict:
    values, errors = _index_and_read(seed, path, work, layout)
    assert not errors
    return values


def _pysam_refuses(path: Path) -> bool:
    return pysam_records(path) is None


def _info(seed: Seed, record: int, name: str, value: Typed) -> tuple:
    key = next(k for k, (info_name, _) in seed.names.items() if info_name == name)
    return tuple((k, value if k.data[0] == key else v) for k, v in seed.records[record].info)


def test_rlen_of_2_31_or_more_reads_as_htslib_replaces_it(seed, tmp_path, layout):
    """rlen 0x80000000 is negative as int32; we decoded variant_length -2147483648.
    htslib's bcf_record_check replaces it (REF's length here: pysam rlen 1)."""
    for rlen in (0x80000000, 0xFFFFFFFF):
        path, stream = _edited(seed, tmp_path, rlen=rlen)
        assert pysam_records(path)[0]["length"] == 1
        assert _read(seed, path, tmp_path, layout)["variant_length"][0] == 1
        values, _ = _decode_with_seed_configs(seed, stream)
        assert values["variant_length"][0] == 1


def test_rlen_of_2_31_or_more_with_end_reads_as_htslib_replaces_it(tmp_path, layout):
    """With INFO/END, htslib's replacement is END - POS (longer than REF here); with
    SVLEN in the header it may also read SVLEN, which we do not: refused."""
    header = bcfdata.HEADER + '##INFO=<ID=END,Number=1,Type=Integer,Description="End">\n'
    for extra, expect in (("", 51), ('##INFO=<ID=SVLEN,Number=A,Type=Integer,Description="SV length">\n', None)):
        bcf = bcfdata.write_bcf(
            bcfdata.vcf_text(
                ["chr1\t100\t.\tACG\tA\t.\t.\tEND=150", "chr1\t120\t.\tA\tT\t.\t.\t."],
                samples=(),
                header=header + extra,
            ),
            tmp_path / "end.bcf",
            index=False,
        )
        plain = gzip.decompress(bcf.read_bytes())
        header_size = 9 + int.from_bytes(plain[5:9], "little")
        records = parse_records(plain[header_size:])
        records[0] = replace(records[0], rlen=0x80000000)
        path = _write_bgzf(tmp_path / "edited.bcf", plain[:header_size] + b"".join(r.encode() for r in records))
        assert pysam_records(path)[0]["length"] == 51
        if expect is None:
            with pytest.raises(CorruptBCFError, match="rlen is 2\\^31 or more"):
                vcfvirtual.index(path, refs_path=False, cache_path=tmp_path / "c", force=True, progress=False)
            continue
        store = vcfvirtual.index(
            path, refs_path=False, cache_path=tmp_path / "c", force=True, progress=False, cache_layout=layout
        )
        assert zarr.open_group(store, mode="r", zarr_format=3)["variant_length"][:].tolist() == [expect, 1]


def test_pos_0x7fffffff_reads_2_31_not_wrapped(seed, tmp_path, layout):
    """POS 0x7FFFFFFF is VCF POS 2^31 (pysam); the codec's int32 += 1 made it -2^31.
    bio2zarr sizes variant_position from the values (int64 here), as the index does; a
    cache edited after indexing to hold it in the seed's int16 array is refused."""
    path, stream = _edited(seed, tmp_path, pos=0x7FFFFFFF)
    assert pysam_records(path)[0]["position"] == 2**31
    values = _read(seed, path, tmp_path, layout)
    assert values["variant_position"].dtype == np.int64 and values["variant_position"][0] == 2**31
    with pytest.raises(ChunkDecodeError, match="outside the array's int16"):
        codec.decode_chunk(stream, seed.specs["variant_position"])


@pytest.mark.parametrize("t,value", [(INT8, -127), (INT16, -32767)])
def test_lone_info_integer_equal_to_end_of_vector_is_a_value(seed, tmp_path, t, value, layout):
    """A scalar INFO integer holding the int8/int16 end-of-vector value: htslib keeps a
    lone INFO value as a plain number (pysam -127; bio2zarr -127 too). We read -2."""
    path, stream = _edited(seed, tmp_path, info=_info(seed, 0, "DP", ints(t, [value])))
    assert pysam_records(path)[0]["info"]["DP"] == value
    assert _read(seed, path, tmp_path, layout)["variant_DP"][0] == value
    if t == INT8:  # fits the seed's int8 array
        assert _decode_with_seed_configs(seed, stream)[0]["variant_DP"][0] == value


def test_lone_info_int32_end_of_vector_is_fill(seed, tmp_path, layout):
    """The int32 case is bcf_int32_vector_end itself: pysam returns -2147483647 but
    bio2zarr (the reference converter) stores fill (-2), as we do."""
    from ..conftest import bio2zarr_convert

    path, _ = _edited(seed, tmp_path, info=_info(seed, 0, "DP", ints(INT32, [-(2**31) + 1])))
    pysam.bcftools.index(str(path))
    reference = bio2zarr_convert(path, tmp_path / "b2z.vcz", 6)
    assert reference["variant_DP"][0] == -2
    assert _read(seed, path, tmp_path, layout)["variant_DP"][0] == -2


@pytest.mark.parametrize("id_value", [Typed(NULL, 0), Typed(NULL, 3), Typed(INT8, 3, b"rs1")])
def test_id_that_is_not_a_string_is_refused(seed, tmp_path, id_value, layout):
    """htslib refuses any ID type but a character vector ("Invalid ID type 0"), even a
    NULL of count 0, which we read as "."; refused at index time and by the codec."""
    path, stream = _edited(seed, tmp_path, id=id_value)
    assert _pysam_refuses(path)
    with pytest.raises(CorruptBCFError, match="ID is not a character string"):
        _index_and_read(seed, path, tmp_path, layout)
    for array in ("variant_id", "variant_id_mask"):
        with pytest.raises(ChunkDecodeError, match="ID is not a character string"):
            codec.decode_chunk(stream, seed.specs[array])


def test_null_typed_info_and_format_values_with_a_count_are_refused(seed, tmp_path, layout):
    """A NULL type with count > 0 ("Invalid INFO type 0"): htslib refuses the record; we
    read the INFO value as another one (its 0-byte values) or as fill."""
    rec = seed.records[0]
    dp_key = next(k for k, (_, name) in seed.names.items() if name == "DP")
    fmt = tuple((k, Typed(NULL, 1) if k.data[0] == dp_key else v) for k, v in rec.fmt)
    for changes, array in (
        ({"info": _info(seed, 0, "NOTE", Typed(NULL, 2))}, "variant_NOTE"),
        ({"info": _info(seed, 0, "DP", Typed(NULL, 1))}, "variant_DP"),
        ({"fmt": fmt}, "call_DP"),
    ):
        path, stream = _edited(seed, tmp_path, **changes)
        assert _pysam_refuses(path)
        with pytest.raises(CorruptBCFError, match="typed NULL with a count above 0"):
            _index_and_read(seed, path, tmp_path, layout)
        with pytest.raises(ChunkDecodeError, match="typed NULL with a count above 0"):
            codec.decode_chunk(stream, seed.specs[array])


def test_record_without_alleles_is_refused(seed, tmp_path, layout):
    """n_allele 0: htslib refuses it ("No REF allele")."""
    path, stream = _edited(seed, tmp_path, record=2, n_allele=0, alleles=())
    assert _pysam_refuses(path)
    with pytest.raises(CorruptBCFError, match="no REF allele"):
        _index_and_read(seed, path, tmp_path, layout)
    with pytest.raises(ChunkDecodeError, match="no REF allele"):
        codec.decode_chunk(stream, seed.specs["variant_allele"])


def test_values_after_an_end_of_vector_are_fill(seed, tmp_path, layout):
    """htslib ends an INFO vector at its end-of-vector value (pysam: None, no values);
    we read what followed it ([-2, 5]). An empty GT (NULL, count 0) reads () in pysam;
    we refused the chunk at read time after indexing it."""
    path, _ = _edited(seed, tmp_path, record=4, info=_info(seed, 4, "DP", ints(INT8, [-127, 5])))
    assert pysam_records(path)[4]["info"]["DP"] is None
    assert _read(seed, path, tmp_path, layout)["variant_DP"][4].tolist() == [-2, -2]
    gt_key = next(k for k, (_, name) in seed.names.items() if name == "GT")
    fmt = tuple((k, Typed(NULL, 0) if k.data[0] == gt_key else v) for k, v in seed.records[0].fmt)
    path, _ = _edited(seed, tmp_path, fmt=fmt)
    assert [call["GT"] for call in pysam_records(path)[0]["samples"]] == [(), (), ()]
    assert (_read(seed, path, tmp_path, layout)["call_genotype"][0] == -2).all()
