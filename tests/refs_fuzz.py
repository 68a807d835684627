"""A references fuzzer: self-consistent edits of a Kerchunk JSON, read two ways, each
case classified, with its peak RSS (issue 21, "the fuzz targets learn these shapes").

Unlike ``tests/fuzz_targets.py``'s ``references`` target, which puts junk in single
fields, every edit here keeps the references as a careful sender would write them:
a codec config and its ``.zarray`` (shape, chunks), dimension names, chunk keys, the
recorded dimensions and the header move together, and a crafted segment gets a valid
preamble and CRC32 (format VVS3, ``codec/vcfvirtual_codec/columns.py``). Each case is read

- through ``vcfvirtual.open_store`` (checking, the default) and xarray, and
- as plain Kerchunk: ``xr.open_zarr("reference://", storage_options={"fo": ...})``,

and classified: ``correct`` (the seed's values, which equal htslib's), ``padded`` (the
seed's values padded with fill to axes declared wider: the same VCF), ``typed``
(a VcfVirtualError), ``untyped`` (any other exception), ``crash`` (the process died),
``hang`` (HANG_SECONDS of CPU, or ten times that of waiting, without an answer), ``silent`` (other values, no error) or
``as_written`` (plain Kerchunk reading crafted segment bytes as they say: no reader can
tell those from data); apart from the outcome, ``rss_gb`` marks a read whose peak RSS
grew more than 1 GB (or whose allocation the address-space limit refused).

Run (the deep run of issue 21; ~1-2 h on 2 busy cores, so at low priority):

    nice -n 19 python -m tests.refs_fuzz --cases 10000 --seed 1 --out /tmp/refs-fuzz

It prints a summary table and writes ``cases.jsonl`` (one line per case and path) and
``summary.json`` in ``--out``; ``--replay N`` re-runs one case in this process, printing
its edits. tests/fuzz/test_refs_fuzz.py runs a derandomized sample of it in the suite.
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import random
import resource
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

Path_ = Literal["open_store", "plain"]
PATHS: tuple[Path_, ...] = ("open_store", "plain")
OUTCOMES = ("correct", "padded", "typed", "untyped", "crash", "hang", "silent", "as_written")
HANG_SECONDS = int(os.environ.get("VCFVIRTUAL_REFS_FUZZ_HANG", "30"))
RSS_LIMIT = 1 << 30
CHUNK = 2
SAMPLES_CHUNK = 2
REPO = Path(__file__).resolve().parents[1]


# --- the seed store --------------------------------------------------------------------


def build_seed(work: Path) -> tuple[Path, Path]:
    """The fuzz seed BCF indexed to a columns cache (chunks of 2 records, blocks of 2
    samples): (references, cache)."""
    import vcfvirtual

    from . import bcfdata

    bcf = work / "seed.bcf"
    if not bcf.exists():
        bcfdata.fuzz_bcf(bcf)
    refs, cache = work / "seed.json", work / "seed.cache"
    if not refs.exists():
        vcfvirtual.index(
            bcf,
            refs_path=refs,
            cache_path=cache,
            variants_chunk_size=CHUNK,
            samples_chunk_size=SAMPLES_CHUNK,
            force=True,
            progress=False,
        )
    return refs, cache


def pysam_truth(bcf: Path) -> dict[str, list]:
    """The oracle: positions, alleles and depths as htslib reads them."""
    import pysam

    with pysam.VariantFile(str(bcf)) as vf:
        rows = list(vf)
        samples = list(vf.header.samples)
    return {
        "variant_position": [r.pos for r in rows],
        "call_DP": [[-1 if r.samples[s].get("DP") is None else r.samples[s]["DP"] for s in samples] for r in rows],
    }


# --- self-consistent edits -------------------------------------------------------------


class Doc:
    """A references document being edited; ``meaning`` says what the edits changed:
    nothing, the metadata (a reader must refuse, or read the seed's values), or the
    bytes of a segment (plain Kerchunk may read them as written)."""

    def __init__(self, doc: dict, cache: bytes):
        self.doc = json.loads(json.dumps(doc))
        self.refs: dict[str, Any] = self.doc["refs"]
        self.cache = cache
        self.ops: list[str] = []
        self.meaning = "same"

    def meta(self, name: str) -> dict:
        return json.loads(self.refs[f"{name}/.zarray"])

    def set_meta(self, name: str, meta: dict) -> None:
        self.refs[f"{name}/.zarray"] = json.dumps(meta)

    def attrs(self, name: str = "") -> dict:
        return json.loads(self.refs[f"{name}/.zattrs" if name else ".zattrs"])

    def set_attrs(self, value: dict, name: str = "") -> None:
        self.refs[f"{name}/.zattrs" if name else ".zattrs"] = json.dumps(value)

    def codec_arrays(self) -> list[str]:
        return sorted(k[:-8] for k, v in self.refs.items() if k.endswith("/.zarray") and "vcfvirtual.bcf" in v)

    def chunk_keys(self, name: str) -> list[str]:
        return sorted(k for k, v in self.refs.items() if k.startswith(name + "/") and isinstance(v, list))

    def changed(self, meaning: str = "changed") -> None:
        if meaning == "crafted" or self.meaning == "same":
            self.meaning = meaning


def _config(meta: dict) -> dict:
    return meta["filters"][-1]


def op_records(d: Doc, rng: random.Random) -> None:
    """num_records and the shape's first axis, in one array or all."""
    n = rng.choice([5, 7, 12, 1000, 10**5, 10**6])
    names = d.codec_arrays() if rng.random() < 0.5 else [rng.choice(d.codec_arrays())]
    for name in names:
        m = d.meta(name)
        _config(m)["num_records"] = m["shape"][0] = n
        d.set_meta(name, m)
    d.ops.append(f"records {n} in {names if len(names) < 3 else 'all'}")
    d.changed()


def _widen(d: Doc, name: str, width: int) -> None:
    """The array's last per-call axis (values, ploidy, alleles, filters) made ``width``."""
    m = d.meta(name)
    config = _config(m)
    kind = config["kind"]
    if kind.startswith("genotype"):
        config["ploidy"] = width
        if kind != "genotype_phased":
            config["shape"][-1] = m["shape"][-1] = m["chunks"][-1] = width
    elif kind in ("allele", "filter") or len(config["shape"]) == (2 if kind == "format" else 1):
        config["shape"][-1] = m["shape"][-1] = m["chunks"][-1] = width
    else:  # one value per record or call: a values axis of its own
        config["shape"].append(width)
        m["shape"].append(width)
        m["chunks"].append(width)
        attrs = d.attrs(name)
        attrs["_ARRAY_DIMENSIONS"].append(f"fuzz_{name}_dim")
        d.set_attrs(attrs, name)
        for key in d.chunk_keys(name):
            d.refs[key + ".0"] = d.refs.pop(key)
    if kind == "filter":
        config["filter_columns"] = list(range(min(width, len(config["filter_columns"]))))
    d.set_meta(name, m)


def op_width(d: Doc, rng: random.Random) -> None:
    """A field's, genotypes' or alleles' width; with ``record`` also the recorded
    dimensions and the header's Number, as a sender editing everything would."""
    candidates = [
        n for n in d.codec_arrays() if n.startswith("call_") or n in ("variant_AF", "variant_DP", "variant_allele")
    ]
    name = rng.choice(candidates)
    width = rng.choice([1, 3, 4, 20, 100, 1000, 100_000])
    genotype = name.startswith("call_genotype")
    names = (
        [n for n in d.codec_arrays() if n.startswith("call_genotype")] if genotype and rng.random() < 0.7 else [name]
    )
    for n in names:
        _widen(d, n, width)
    record = rng.random() < 0.5
    if record:
        attrs = d.attrs()
        dims = attrs["vcfvirtual"]["dimensions"]
        if genotype:
            dims["ploidy"] = width
        elif name == "variant_allele":
            dims["alleles"] = width
        else:
            field = ("FORMAT/" if name.startswith("call_") else "INFO/") + name.split("_", 1)[1]
            dims["fields"][field] = width
            short = name.split("_", 1)[1]
            attrs["vcf_header"] = attrs["vcf_header"].replace(f"ID={short},Number=1,", f"ID={short},Number=.,")
        d.set_attrs(attrs)
    d.ops.append(f"width {width} of {names}{' recorded' if record else ''}")
    d.changed()


def op_samples(d: Doc, rng: random.Random) -> None:
    """The samples axis of every sample array, and its blocks."""
    n = rng.choice([1, 2, 4, 1000, 1 << 20])
    block = rng.choice([1, 2, n])
    for name in d.codec_arrays():
        m = d.meta(name)
        config = _config(m)
        if config.get("samples_chunk_size"):
            config["shape"][0] = m["shape"][1] = n
            config["samples_chunk_size"] = m["chunks"][1] = min(block, n)
            d.set_meta(name, m)
    d.ops.append(f"samples {n} in blocks of {block}")
    d.changed()


def op_chunk_length(d: Doc, rng: random.Random) -> None:
    n = rng.choice([1, 3, 4, 6, 1000])
    for name in d.codec_arrays():
        m = d.meta(name)
        _config(m)["chunk_length"] = m["chunks"][0] = n
        d.set_meta(name, m)
    d.ops.append(f"chunk_length {n}")
    d.changed()


def op_codec_position(d: Doc, rng: random.Random) -> None:
    """The codec removed from the filters, moved to the compressor, doubled, or first."""
    name = rng.choice(d.codec_arrays())
    m = d.meta(name)
    where = rng.choice(["null", "compressor", "twice", "first"])
    codec = m["filters"][-1]
    if where == "null":
        m["filters"] = None
    elif where == "compressor":
        m["filters"], m["compressor"] = m["filters"][:-1] or None, codec
    elif where == "twice":
        m["filters"] = [*m["filters"], codec]
    else:
        m["filters"] = [codec, *m["filters"][:-1]]
    d.set_meta(name, m)
    d.ops.append(f"codec of {name}: {where}")
    d.changed()


def op_zarr_json(d: Doc, rng: random.Random) -> None:
    """Zarr v3 metadata beside the v2 one, the codec among its codecs, another shape."""
    name = rng.choice(d.codec_arrays())
    m = d.meta(name)
    config = {k: v for k, v in _config(m).items() if k != "id"}
    shape = [m["shape"][0] * 1000, *m["shape"][1:]]
    v3 = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": "int8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": m["chunks"]}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
        "fill_value": 0,
        "codecs": [{"name": "vcfvirtual.bcf", "configuration": config}],
        "dimension_names": d.attrs(name)["_ARRAY_DIMENSIONS"],
        "attributes": {},
    }
    key = rng.choice([f"{name}/zarr.json", "zarr.json"])
    d.refs[key] = json.dumps(v3 if key != "zarr.json" else {"zarr_format": 3, "node_type": "group", "attributes": {}})
    d.ops.append(f"{key} added")
    d.changed()


def op_filter_columns(d: Doc, rng: random.Random) -> None:
    m = d.meta("variant_filter")
    columns = _config(m)["filter_columns"]
    new = rng.choice([columns[::-1], [columns[0]] * len(columns), [*columns[1:], columns[0]], [-1] * len(columns)])
    _config(m)["filter_columns"] = new
    d.set_meta("variant_filter", m)
    d.ops.append(f"filter_columns {new}")
    d.changed()


def op_swap_ranges(d: Doc, rng: random.Random) -> None:
    """A chunk pointed at another array's segment (inside the cache)."""
    a, b = rng.sample(d.codec_arrays(), 2)
    key = rng.choice(d.chunk_keys(a))
    d.refs[key] = list(d.refs[rng.choice(d.chunk_keys(b))])
    d.ops.append(f"{key} -> a chunk of {b}")
    d.changed()


def op_dims(d: Doc, rng: random.Random) -> None:
    name = rng.choice(d.codec_arrays())
    attrs = d.attrs(name)
    dims = attrs["_ARRAY_DIMENSIONS"]
    dims[-1] = rng.choice(["variants", "samples", "ploidy", "alleles", "x"])
    d.set_attrs(attrs, name)
    d.ops.append(f"dims of {name}: {dims}")
    d.changed()


def op_drop_chunk(d: Doc, rng: random.Random) -> None:
    name = rng.choice(d.codec_arrays())
    key = rng.choice(d.chunk_keys(name))
    del d.refs[key]
    d.ops.append(f"{key} dropped")
    d.changed()


def op_harmless(d: Doc, rng: random.Random) -> None:
    """What changes no value: a description, the JSON's key order and spacing."""
    name = rng.choice(d.codec_arrays())
    attrs = d.attrs(name)
    attrs["description"] = "edited"
    d.set_attrs(attrs, name)
    m = d.meta(name)
    d.refs[f"{name}/.zarray"] = json.dumps(dict(reversed(list(m.items()))), indent=1)
    d.ops.append(f"{name}: description and key order")


# --- crafted segments ------------------------------------------------------------------


def zstd_rle_frame(size: int, byte: int = 0) -> bytes:
    """A Zstandard frame of ``size`` copies of ``byte`` in RLE blocks: 4 bytes per 128 KiB,
    so a 1 GB claim costs 32 kB, not a 1 GB compression."""
    out = bytearray(b"\x28\xb5\x2f\xfd\xe0" + size.to_bytes(8, "little"))  # single segment, 8-byte size
    block = 1 << 17
    left = size
    while True:
        n = min(block, left)
        left -= n
        header = (1 if left == 0 else 0) | (1 << 1) | (n << 3)  # last?, RLE, size
        out += header.to_bytes(3, "little") + bytes([byte])
        if left == 0:
            return bytes(out)


def _segment(d: Doc, key: str) -> tuple[list, bytes]:
    _, offset, length = d.refs[key]
    return d.refs[key], d.cache[offset : offset + length]


def op_craft_segment(d: Doc, rng: random.Random) -> None:
    """A chunk replaced by inline bytes: the real segment with preamble fields and frame
    changed, its CRC32 recomputed (a valid VVS3 segment whose claims are the sender's)."""
    from vcfvirtual_codec import columns

    name = rng.choice(d.codec_arrays())
    key = rng.choice(d.chunk_keys(name))
    _, seg = _segment(d, key)
    fields = list(columns.PREAMBLE_HEAD.unpack_from(seg))  # magic kind flags pad key records block bsamples length
    frame = seg[columns.PREAMBLE.size :]
    what = []
    for _ in range(rng.randint(1, 2)):
        change = rng.choice(["pad", "flags", "records", "block", "length", "zstd", "blosc", "frame_byte"])
        if change == "pad":
            fields[3] = rng.choice([0, 1, 2, 100, 65535])
        elif change == "flags":
            fields[2] = rng.choice([0, 1, 2, 3, 4, 5, 7, 255])
        elif change == "records":
            fields[5] = rng.choice([0, 1, 2, 3, 1000, 10**6, 2**32 - 1])
        elif change == "block":
            fields[6], fields[7] = rng.choice([(0, 1), (0, 2), (1, 1), (1, 2), (0, 10**6), (5, 2)])
        elif change == "length":
            fields[8] = rng.choice([0, 1, len(frame), 10**6, 10**9, 2**40])
        elif change == "zstd":  # a real frame of zeros, as long as the claim
            size = rng.choice([1000, 10**6, 64 << 20, 1_100_000_000])
            frame, fields[8] = zstd_rle_frame(size), size
        elif change == "blosc":  # a bare 16-byte header claiming the length
            size = rng.choice([1000, 10**6, 10**9])
            frame = bytes([2, 1, 1, 1]) + struct.pack("<III", size, 1 << 16, 16)
            fields[8] = size
        else:
            frame = bytearray(frame)
            if frame:
                frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
            frame = bytes(frame)
        what.append(change)
    head = columns.PREAMBLE_HEAD.pack(*fields)
    sealed = head + columns.segment_crc(head, frame).to_bytes(4, "little") + frame
    d.refs[key] = "base64:" + base64.b64encode(sealed).decode()
    d.ops.append(f"{key} crafted: {what} -> {fields[1:]} frame {len(frame)} B")
    d.changed("crafted")


def op_summary_bomb(d: Doc, rng: random.Random) -> None:
    """Issue 21's first finding: a genotype mask or phased array redeclared as one chunk of
    10^6-10^7 records at ploidy 100-255 (own dimension names, so xarray opens it beside the
    6-record arrays) over one inline segment whose preamble says every call is complete and
    phased, with a bare 16-byte Blosc header as its frame claiming the largest length the
    config allows: answered from the preamble, never decompressed."""
    from vcfvirtual_codec import columns

    name = rng.choice(["call_genotype_mask", "call_genotype_phased"])
    n, ploidy = rng.choice([10**6, 10**7]), rng.choice([100, 255])
    m = d.meta(name)
    config = _config(m)
    config["num_records"] = config["chunk_length"] = m["shape"][0] = m["chunks"][0] = n
    config["ploidy"] = ploidy
    if name == "call_genotype_mask":
        config["shape"][-1] = m["shape"][-1] = m["chunks"][-1] = ploidy
    d.set_meta(name, m)
    attrs = d.attrs(name)
    attrs["_ARRAY_DIMENSIONS"] = [f"fuzz_{dim}" for dim in attrs["_ARRAY_DIMENSIONS"]]
    d.set_attrs(attrs, name)
    keys = d.chunk_keys(name)
    _, seg = _segment(d, keys[0])
    for key in keys:
        del d.refs[key]
    fields = list(columns.PREAMBLE_HEAD.unpack_from(seg))
    block_samples = fields[7]
    length = min(5 * n + n * ploidy * 4 * block_samples, (1 << 32) - 1)  # a Blosc header's field
    fields[2] = (fields[2] & columns.FLAG_GT_SHIFT) | columns.FLAG_GT_ALL_PHASED
    fields[3], fields[5], fields[8] = ploidy, n, length
    frame = bytes([2, 1, 1, 1]) + struct.pack("<III", length, 1 << 16, 16)
    head = columns.PREAMBLE_HEAD.pack(*fields)
    sealed = head + columns.segment_crc(head, frame).to_bytes(4, "little") + frame
    d.refs[keys[0]] = "base64:" + base64.b64encode(sealed).decode()
    d.ops.append(f"summary bomb: {name} {n} records x ploidy {ploidy}, one {len(sealed)}-byte segment")
    d.changed("crafted")


OPS = [
    (op_records, 3),
    (op_width, 4),
    (op_samples, 2),
    (op_chunk_length, 2),
    (op_codec_position, 2),
    (op_zarr_json, 1),
    (op_filter_columns, 1),
    (op_swap_ranges, 2),
    (op_dims, 1),
    (op_drop_chunk, 1),
    (op_craft_segment, 5),
    (op_harmless, 3),
    (op_summary_bomb, 1),
]


def make_case(doc: dict, cache: bytes, seed: int, index: int, only: str | None = None) -> Doc:
    """Case ``index`` of run ``seed``: 1-3 edits, the same every time (``only``: edits of
    that one kind, ``op_<only>``)."""
    rng = random.Random(f"{seed}:{index}")
    d = Doc(doc, cache)
    only = only or os.environ.get("VCFVIRTUAL_REFS_FUZZ_ONLY") or None
    ops, weights = zip(*(o for o in OPS if only is None or o[0].__name__ == f"op_{only}"))
    for op in rng.choices(ops, weights, k=rng.choice([1, 1, 2, 3])):
        try:
            op(d, rng)
        except (
            KeyError,
            IndexError,
            ValueError,
            TypeError,
            struct.error,
        ):  # an earlier edit removed what this one edits
            d.ops.append(f"{op.__name__}: nothing to edit")
    return d


# --- reading and classifying -----------------------------------------------------------


def _reset_peak() -> int:
    """Reset this process's peak RSS to its current RSS (Linux clear_refs 5); that RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def read(path: Path, how: Path_) -> dict:
    import xarray as xr

    import vcfvirtual

    if how == "open_store":
        ds = xr.open_zarr(vcfvirtual.open_store(path), consolidated=False)
    else:
        ds = xr.open_zarr("reference://", storage_options={"fo": str(path)}, consolidated=False)
    return {name: ds[name].values for name in ds.data_vars}


def _same(a, b) -> bool:
    """Equal shapes, dtypes and values; floats bit for bit (VCF Zarr's missing and fill
    NaNs differ only in their bits)."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")))
    return bool(np.array_equal(a, b))


def _padded(a, b) -> bool:
    """``a`` is ``b`` padded along its non-variant axes (or given a values axis) with what
    VCF Zarr writes where there is no value: -1 or -2, the missing or fill NaN, "" or ".",
    and any mask: the same VCF declared wider, as a sender who widens an array and records
    the width consistently makes it."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == b.ndim + 1:
        b = b[..., None]
    if a.ndim != b.ndim or a.dtype != b.dtype or a.shape[0] != b.shape[0]:
        return False
    if any(x < y for x, y in zip(a.shape, b.shape)):
        return False
    inner = tuple(slice(0, n) for n in b.shape)
    if not _same(a[inner], b):
        return False
    rest = np.ones(a.shape, bool)
    rest[inner] = False
    kind = a.dtype.kind
    if kind == "f":
        bits = a.view(f"u{a.itemsize}")[rest]
        nans = (0x7F800001, 0x7F800002) if a.itemsize == 4 else (0x7FF0000000000001, 0x7FF0000000000002)
        return bool(np.isin(bits, nans).all())
    if kind == "b":
        return True
    empty = (-1, -2) if kind in "iu" else ("", ".")
    return bool(np.isin(a[rest], np.array(empty, dtype=object if kind in "OUT" else a.dtype)).all())


def classify(path: Path, how: Path_, expected: dict, meaning: str) -> dict:
    """One read: its outcome, peak RSS growth, and the error's type and first words."""
    from vcfvirtual.errors import VcfVirtualError

    base = _reset_peak()
    started = time.monotonic()
    detail = ""
    try:
        values = read(path, how)
    except MemoryError:
        outcome, detail, over = "untyped", "MemoryError (the address-space limit refused an allocation)", True
    except VcfVirtualError as e:
        outcome, detail, over = "typed", f"{type(e).__name__}: {e.problem}"[:200], False
    except Exception as e:  # noqa: BLE001 - classified, not hidden
        outcome, detail, over = "untyped", f"{type(e).__name__}: {e}"[:200], False
    else:
        over = False
        same = set(values) == set(expected) and all(_same(values[k], v) for k, v in expected.items())
        if same:
            outcome = "correct"
        elif set(values) == set(expected) and all(
            _same(values[k], v) or _padded(values[k], v) for k, v in expected.items()
        ):
            outcome, detail = "padded", "the seed's values, padded with fill to wider declared axes"
        else:
            outcome = "as_written" if meaning == "crafted" and how == "plain" else "silent"
            wrong = sorted(k for k in expected if k not in values or not _same(values[k], expected[k]))
            detail = f"differ: {wrong[:4]} extra: {sorted(set(values) - set(expected))[:3]}"
    growth = _status("VmHWM") - base
    ms = round(1000 * (time.monotonic() - started))
    return {
        "outcome": outcome,
        "rss_gb": over or growth > RSS_LIMIT,
        "rss_mb": growth >> 20,
        "ms": ms,
        "detail": detail,
    }


# --- the worker (one process, many cases) and the runner (which survives its crashes) --


def worker(work: Path, seed: int, start: int, stop: int, first_path: int) -> None:
    """Cases [start, stop) from path ``first_path`` on; a JSON line before and after each read."""
    import numpy as np

    from . import bcfdata

    refs, cache_path = build_seed(work)
    doc = json.loads(refs.read_text())
    cache = bcfdata.cache_file(cache_path).read_bytes()  # the one part chunks point into
    expected = read(refs, "open_store")
    truth = pysam_truth(work / "seed.bcf")
    assert expected["variant_position"].tolist() == truth["variant_position"]
    assert np.asarray(expected["call_DP"]).tolist() == truth["call_DP"]
    read(refs, "plain")  # compile and import everything before the limit is set
    # Protect the machine: an allocation of more than ~3 GB beyond what is mapped now fails.
    limit = _status("VmSize") + (3 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    case_path = work / "case.json"
    for i in range(start, stop):
        d = make_case(doc, cache, seed, i)
        case_path.write_text(json.dumps(d.doc))
        for p in range(first_path if i == start else 0, len(PATHS)):
            how = PATHS[p]
            print(json.dumps({"case": i, "path": how, "start": True}), flush=True)
            result = classify(case_path, how, expected, d.meaning)
            result.update(case=i, path=how, ops=d.ops, meaning=d.meaning)
            print(json.dumps(result), flush=True)


def run(work: Path, seed: int, cases: int, log: Path, start: int = 0) -> list[dict]:
    """Cases [start, cases) through worker processes; a worker that dies or hangs marks
    its current read ``crash`` or ``hang`` and a fresh one goes on from the next."""
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    position = (start, 0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with open(log, "a") as out:
        while position[0] < cases:
            command = [sys.executable, "-m", "tests.refs_fuzz", "--worker", str(work), str(seed)]
            command += [str(position[0]), str(cases), str(position[1])]
            with open(work / "worker-stderr.log", "ab") as err:  # a harness failure's traceback
                proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err)
            position = _drain(proc, results, out, position, cases)
    return results


_STALLS: dict[tuple[int, int], int] = {}  # worker deaths at a position before any read


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _drain(proc: subprocess.Popen, results: list, out, position: tuple[int, int], cases: int) -> tuple[int, int]:
    """Collect a worker's lines until it ends; where the next worker starts. A read is a
    hang when it has used HANG_SECONDS of CPU, or ten times that of wall-clock time
    (blocked): on a shared machine at nice 19 wall-clock time alone would flag slow reads."""
    current = None
    assert proc.stdout is not None
    cpu_deadline, wall_deadline = float("inf"), time.monotonic() + 1800  # building and warming the seed
    buffer = b""
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], 5.0)
        if not ready:
            if time.monotonic() > wall_deadline or _cpu_seconds(proc.pid) > cpu_deadline:
                proc.kill()
                proc.wait()
                return _after_loss(current, "hang", results, out, position)
            continue
        chunk = os.read(proc.stdout.fileno(), 1 << 16)
        if not chunk:
            code = proc.wait()
            if current is None and code == 0:
                return (cases, 0)
            return _after_loss(current, f"crash (exit {code})", results, out, position)
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if message.get("start"):
                current = (message["case"], message["path"])
                cpu_deadline = _cpu_seconds(proc.pid) + HANG_SECONDS
                wall_deadline = time.monotonic() + 10 * HANG_SECONDS
            else:
                current = None
                results.append(message)
                out.write(json.dumps(message) + "\n")
                out.flush()
                position = (message["case"], PATHS.index(message["path"]) + 1)
                if position[1] == len(PATHS):
                    position = (position[0] + 1, 0)


def _after_loss(current, what: str, results: list, out, position: tuple[int, int]) -> tuple[int, int]:
    if current is None:  # died between reads (making a case): the harness's fault, not a read's
        _STALLS[position] = _STALLS.get(position, 0) + 1
        if _STALLS[position] >= 3:
            raise RuntimeError(f"the fuzz worker {what} three times at case {position[0]}, before any read")
        return position
    case, how = current
    result = {"case": case, "path": how, "outcome": what.split(" ")[0], "rss_gb": False, "detail": what}
    results.append(result)
    out.write(json.dumps(result) + "\n")
    out.flush()
    nxt = PATHS.index(how) + 1
    return (case, nxt) if nxt < len(PATHS) else (case + 1, 0)


def summarise(results: list[dict]) -> dict[str, dict[str, int]]:
    """Per path: cases tried, each outcome, and reads over 1 GB of peak RSS."""
    table: dict[str, dict[str, int]] = {}
    for how in PATHS:
        rows = [r for r in results if r["path"] == how]
        counts = collections.Counter(r["outcome"] for r in rows)
        table[how] = {"tried": len(rows), **{o: counts.get(o, 0) for o in OUTCOMES}}
        table[how]["rss_over_1gb"] = sum(bool(r.get("rss_gb")) for r in rows)
    return table


def print_table(table: dict[str, dict[str, int]]) -> None:
    columns = ["tried", *OUTCOMES, "rss_over_1gb"]
    print("| path | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for how, row in table.items():
        print(f"| {how} | " + " | ".join(str(row[c]) for c in columns) + " |")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--worker":
        work, seed, start, stop, first = args[1:6]
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        worker(Path(work), int(seed), int(start), int(stop), int(first))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("refs-fuzz"))
    parser.add_argument("--start", type=int, default=0, help="resume from this case (appends to cases.jsonl)")
    parser.add_argument("--replay", type=int, help="print case N's edits and read it here, both ways")
    parser.add_argument("--only", help="edits of one kind only, e.g. summary_bomb (op_<name>)")
    ns = parser.parse_args(args)
    if ns.only:
        os.environ["VCFVIRTUAL_REFS_FUZZ_ONLY"] = ns.only  # the workers' environment
    if ns.replay is not None:
        return _replay(ns.out, ns.seed, ns.replay)
    log = ns.out / "cases.jsonl"
    ns.out.mkdir(parents=True, exist_ok=True)
    if not ns.start and log.exists():
        log.unlink()
    started = time.monotonic()
    run(ns.out, ns.seed, ns.cases, log, ns.start)
    results = [json.loads(line) for line in log.read_text().splitlines()]
    table = summarise(results)
    (ns.out / "summary.json").write_text(
        json.dumps({"cases": ns.cases, "seed": ns.seed, "seconds": round(time.monotonic() - started), "table": table})
    )
    print_table(table)
    return 0


def _replay(work: Path, seed: int, index: int) -> int:
    from . import bcfdata

    refs, cache_path = build_seed(work)
    d = make_case(json.loads(refs.read_text()), bcfdata.cache_file(cache_path).read_bytes(), seed, index)
    print("edits:", d.ops, "meaning:", d.meaning)
    path = work / f"case-{index}.json"
    path.write_text(json.dumps(d.doc))
    expected = read(refs, "open_store")
    for how in PATHS:
        print(how, classify(path, how, expected, d.meaning))
    return 0


if __name__ == "__main__":
    sys.exit(main())
