"""Fuzz targets: mutated BCF files through the scanner, mutated chunk bytes through the codec.

Each target is a hypothesis search. It runs in a child process started by
``tests/fuzz/test_fuzz.py`` (``python -m tests.fuzz_targets TARGET WORKDIR``), because the
kernels are compiled C without bounds checks: an unguarded read past a buffer
can kill the process, which must fail one test, not end the pytest run. Before each
example the child writes the mutation to ``WORKDIR/current-example.txt``, so a crash
or a hang names the input that caused it.

The contract every target checks: vcfvirtual either raises a typed
``VcfVirtualError`` or returns values, and returned values equal an independent
oracle: htslib (pysam) reading the same mutated bytes, or, where the bytes carry a
checksum, the values of the unmutated file.

Environment:
  VCFVIRTUAL_FUZZ_EXAMPLES  examples per target (default 40, derandomized)
  VCFVIRTUAL_FUZZ_SECONDS   when set, keep running fresh random batches for this long
                            (the 'deep' exploration; see tests/README.md)
"""

from __future__ import annotations

import collections
import faulthandler
import json
import os
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pysam
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numcodecs import VLenUTF8
from vcfvirtual_codec import codec as codec_mod
from vcfvirtual_codec.bcf import bgzf, records

import vcfvirtual
from vcfvirtual.errors import ChunkDecodeError, VcfVirtualError

from . import bcfdata

pysam.set_verbosity(0)  # htslib's complaints about mutated input are expected noise
STATS: collections.Counter = collections.Counter()
LAST_REFUSAL = ""  # htslib's reason the last time it refused a file
# An example running longer than this is a hang: dump every thread's stack and exit.
HANG_SECONDS = 120
CHUNK = 2  # variants per chunk: the 6 seed records make 3 chunks
# The columns layout's samples blocks: the seed's 3 samples make a block of 2 and a
# narrower last block of 1.
COLUMNS_SAMPLES_CHUNK = 2

# Values a mutated length, count or index field is most likely to go wrong on.
INTERESTING_U32 = [
    0,
    1,
    2,
    3,
    8,
    23,
    24,
    31,
    32,
    127,
    128,
    255,
    256,
    65535,
    0xFFFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFE,
    0xFFFFFFFF,
]


def byte_op(size: int, lo: int = 0):
    """One mutation of a byte string of ``size`` bytes; offsets favour ``[lo, size)``."""
    offset = st.one_of(st.integers(0, size - 1), st.integers(min(lo, size - 1), size - 1))
    return st.one_of(
        st.tuples(st.just("flip"), offset, st.integers(0, 7)),
        st.tuples(st.just("byte"), offset, st.integers(0, 255)),
        st.tuples(st.just("u32"), offset, st.sampled_from(INTERESTING_U32)),
        st.tuples(st.just("truncate"), offset),
        st.tuples(st.just("insert"), offset, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), offset, st.integers(1, 16)),
    )


def mutation_ops(size: int, lo: int = 0):
    """1-3 mutations of a byte string of ``size`` bytes; offsets favour ``[lo, size)``."""
    return st.lists(byte_op(size, lo), min_size=1, max_size=3)


def apply_ops(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op in ops:
        if not buf:
            break
        kind, at = op[0], op[1] % len(buf)
        if kind == "flip":
            buf[at] ^= 1 << op[2]
        elif kind == "byte":
            buf[at] = op[2]
        elif kind == "u32":
            buf[at : at + 4] = int(op[2]).to_bytes(4, "little")
        elif kind == "truncate":
            del buf[at:]
        elif kind == "insert":
            buf[at:at] = op[2]
        elif kind == "delete":
            del buf[at : at + op[2]]
    return bytes(buf)


# --- oracles -----------------------------------------------------------------------------


def pysam_rows(path: Path):
    """Core fields of every record as htslib reads them, or None when htslib refuses
    the file (any error while reading or unpacking a record)."""
    try:
        with pysam.VariantFile(str(path)) as vf:
            contigs = list(vf.header.contigs)
            samples = list(vf.header.samples)
            rows = []
            for rec in vf:
                gts, phased = [], []
                # pysam reads GT only when it is the record's first FORMAT field (htslib's
                # convention); elsewhere it would say "no GT": mark those to skip.
                fmt = list(rec.format)
                has_gt = "GT" in fmt
                if has_gt and fmt[0] != "GT":
                    gts, phased = "GT not first", None
                    rows.append((contigs.index(rec.chrom), rec.pos, list(rec.alleles), gts, phased))
                    continue
                for s in samples:
                    call = rec.samples[s]
                    gt = call.get("GT") if has_gt else None
                    gts.append(None if gt is None else list(gt))
                    phased.append(call.phased)
                rows.append((contigs.index(rec.chrom), rec.pos, list(rec.alleles), gts, phased))
            return rows
    except Exception as e:  # htslib reports damage as OSError/ValueError/UnicodeError...
        global LAST_REFUSAL
        LAST_REFUSAL = f"{type(e).__name__}: {str(e)[:60]}"
        return None


def compare_rows(ours: dict, rows, n_rows: int | None = None) -> list[str]:
    """Differences between our core arrays and pysam's rows (first ``n_rows`` rows of
    ``ours`` hold records; any further rows must be chunk padding)."""
    problems = []
    n = len(rows)
    total = ours["position"].shape[0] if n_rows is None else n_rows
    if total != n:
        return [f"{total} records read, htslib reads {n}"]
    for i, (contig, pos, alleles, gts, phased) in enumerate(rows):
        if ours["contig"][i] != contig:
            problems.append(f"record {i}: contig {ours['contig'][i]} != {contig}")
        if ours["position"][i] != pos:
            problems.append(f"record {i}: position {ours['position'][i]} != {pos}")
        got = list(ours["allele"][i])
        if got[: len(alleles)] != alleles or any(a != "" for a in got[len(alleles) :]):
            problems.append(f"record {i}: alleles {got} != {alleles}")
        gt = ours["genotype"][i]
        if isinstance(gts, str):
            STATS["genotypes not compared: GT not the first FORMAT field"] += 1
            continue
        for j, call in enumerate(gts):
            if call is None:
                if not (gt[j] == -1).all():
                    problems.append(f"record {i} sample {j}: genotype {gt[j].tolist()} != absent (-1)")
                continue
            # pysam gives None for a missing allele and for an index outside [0, n_alleles)
            # (bcf_format_get_allele_indices); we keep the index as htslib decodes it.
            mine = gt[j, : len(call)].tolist()
            same = len(call) <= gt.shape[1] and all(
                a == b if b is not None else (a == -1 or not 0 <= a < len(alleles)) for a, b in zip(mine, call)
            )
            if not same or not (gt[j, len(call) :] == -2).all():
                problems.append(f"record {i} sample {j}: genotype {gt[j].tolist()} != {call}")
            # Phase: pysam skips an allele holding the integer-missing sentinel (-128 in
            # int8) while bio2zarr, and we, read the second value's phase bit; htslib
            # never writes that sentinel in GT, so calls with a missing allele are left out.
            elif len(call) > 1 and None not in call and ours["phased"][i, j] != phased[j]:
                problems.append(f"record {i} sample {j}: phased {ours['phased'][i, j]} != {phased[j]}")
    return problems


CORE = {
    "contig": "variant_contig",
    "position": "variant_position",
    "allele": "variant_allele",
    "genotype": "call_genotype",
    "phased": "call_genotype_phased",
}


def read_ours(bcf: Path, work: Path, layout: str = "raw"):
    """Index ``bcf`` and read every array through xarray; (core arrays, error)."""
    import xarray as xr

    try:
        store = vcfvirtual.index(
            bcf,
            refs_path=False,
            cache_path=work / "cache.bcf",
            variants_chunk_size=CHUNK,
            cache_layout=layout,
            force=True,
            progress=False,
            **({"samples_chunk_size": COLUMNS_SAMPLES_CHUNK} if layout == "columns" else {}),
        )
        ds = xr.open_zarr(store, zarr_format=3, consolidated=False)
        values = {name: ds[name].values for name in ds.data_vars}  # every decoder runs
    except VcfVirtualError as e:
        return None, e
    if "call_genotype" not in values:
        # The (mutated) header declares no FORMAT/GT: every call is absent, which is
        # what htslib must then say too.
        shape = (ds.sizes["variants"], ds.sizes.get("samples", 0))
        values["call_genotype"] = np.full((*shape, 1), -1, np.int8)
        values["call_genotype_phased"] = np.zeros(shape, bool)
    return {k: values[v] for k, v in CORE.items()}, None


# --- scanner targets ---------------------------------------------------------------------


class Seed:
    """The seed BCF (BGZF and plain), its header size and its chunk bytes, made once."""

    def __init__(self, work: Path):
        self.work = work
        self.bgzf = bcfdata.fuzz_bcf(work / "seed.bcf")
        self.plain = bcfdata.uncompressed_copy(self.bgzf, work / "seed.plain.bcf")
        self.bgzf_bytes = self.bgzf.read_bytes()
        self.plain_bytes = self.plain.read_bytes()
        self.header_size = 9 + int.from_bytes(self.plain_bytes[5:9], "little")
        self.rows = pysam_rows(self.plain)
        assert self.rows is not None and len(self.rows) == len(bcfdata.FUZZ_RECORDS)
        self.chunks = {layout: self._chunks(layout) for layout in ("raw", "bgzf")}
        # Reading the seed loads every library before the per-example hang watchdog is
        # armed, and checks the harness: the unmutated seed must read as htslib reads it.
        for layout in ("raw", "columns"):
            ours, err = read_ours(self.bgzf, work, layout)
            assert err is None and not compare_rows(ours, self.rows), (layout, err, compare_rows(ours, self.rows))

    def _chunks(self, layout):
        """(cache bytes, {array: ChunkSpec}, [(offset, length) of each chunk])."""
        refs_path = self.work / f"seed.{layout}.json"
        cache = self.work / f"seed.{layout}.cache.bcf"
        vcfvirtual.index(
            self.bgzf,
            refs_path=refs_path,
            cache_path=cache,
            variants_chunk_size=CHUNK,
            cache_layout=layout,
            force=True,
            progress=False,
        )
        refs = json.loads(refs_path.read_text())["refs"]
        specs, ranges = {}, None
        for key, value in refs.items():
            if key.endswith("/.zarray"):
                meta = json.loads(value)
                ours = [f for f in meta.get("filters") or [] if f["id"] == codec_mod.CODEC_ID]
                if ours:
                    name = key.split("/")[0]
                    specs[name] = codec_mod.ChunkSpec.from_config(ours[0])
        n_chunks = -(-len(bcfdata.FUZZ_RECORDS) // CHUNK)
        zeros = ".0" * len(specs["call_genotype"].shape)
        ranges = [tuple(refs[f"call_genotype/{k}{zeros}"][1:]) for k in range(n_chunks)]
        return cache.read_bytes(), specs, ranges


def _record(work: Path, text: str):
    # Overwritten per example: after a crash or hang it names the input responsible.
    # The watchdog is re-armed per example, so only one example running long fires it.
    (work / "current-example.txt").write_text(text)
    STATS["cases"] += 1
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)


def scan_target(seed: Seed, plain: bool, layout: str = "raw"):
    """Mutated BCF files through index + xarray: typed error, or htslib's values (the
    columns layout: what its demux carried into the segments)."""
    data = seed.plain_bytes if plain else seed.bgzf_bytes
    lo = seed.header_size if plain else 0

    # One mutation that must read htslib's values, whatever the derandomized draws hit: the
    # low bit of the first record's QUAL (plain: after l_shared, l_indiv, CHROM, POS, rlen),
    # or of the first gzip member's MTIME (BGZF, which carries no data), so the target's
    # guard always sees both outcomes.
    @given(ops=mutation_ops(len(data), lo))
    @example(ops=[("flip", lo + 20, 0)] if plain else [("flip", 4, 0)])
    def run(ops):
        _record(seed.work, f"{'plain' if plain else 'bgzf'} {ops!r}")
        path = seed.work / "mutated.bcf"
        path.write_bytes(apply_ops(data, ops))
        ours, err = read_ours(path, seed.work, layout)
        rows = pysam_rows(path)
        if rows is None and not plain and "EOF marker" in LAST_REFUSAL:
            # pysam refuses a BGZF file whose EOF block is gone or damaged; htslib reads
            # it with a warning, as we do. An extra EOF block changes no record: ask again.
            path.write_bytes(path.read_bytes() + bgzf.EOF_BLOCK)
            rows = pysam_rows(path)
        if err is not None:
            STATS[f"typed error {type(err).__name__}" + ("" if rows is None else " (htslib reads it)")] += 1
            return
        # We returned values: htslib must read the same file, and agree.
        if rows is None:
            STATS[f"values, htslib refuses ({LAST_REFUSAL})"] += 1
            raise AssertionError(f"vcfvirtual reads a file htslib refuses: {ops!r}")
        problems = compare_rows(ours, rows)
        assert not problems, f"{ops!r}: " + "; ".join(problems[:5])
        STATS["values equal htslib's" + (" (unchanged)" if rows == seed.rows else "")] += 1

    return run


def scan_bgzf_flip_target(seed: Seed):
    """One bit flipped anywhere in a BGZF BCF: CRC32/ISIZE/inflate catch it, or the bit
    carried no data (gzip MTIME, XFL, OS) and the values are the seed's."""
    data = seed.bgzf_bytes

    @given(at=st.integers(0, len(data) - 1), bit=st.integers(0, 7))
    def run(at, bit):
        _record(seed.work, f"bgzf flip at={at} bit={bit}")
        path = seed.work / "mutated.bcf"
        path.write_bytes(apply_ops(data, [("flip", at, bit)]))
        ours, err = read_ours(path, seed.work)
        if err is not None:
            STATS[f"typed error {type(err).__name__}"] += 1
            return
        problems = compare_rows(ours, seed.rows)
        assert not problems, f"flip at {at} bit {bit} changed values undetected: " + "; ".join(problems[:5])
        STATS["values equal the seed's (flip in a byte without data)"] += 1

    return run


# --- codec targets -----------------------------------------------------------------------


def decode_all(data: bytes, specs: dict) -> tuple[dict, dict]:
    """Decode ``data`` as one chunk for every array: ({name: values}, {name: error})."""
    values, errors = {}, {}
    for name, spec in specs.items():
        try:
            out = codec_mod.decode_chunk(data, spec)
        except ChunkDecodeError as e:
            errors[name] = e
            continue
        if spec.dtype == "str":
            # The vlen-utf8 step zarr runs next; invalid UTF-8 must have been refused.
            items = VLenUTF8().decode(np.ascontiguousarray(out).view(np.uint8))
            values[name] = np.asarray(items, dtype=object).reshape(spec.chunk_length, *spec.shape)
        else:
            raw = np.ascontiguousarray(out).view(np.uint8)
            values[name] = raw.view(np.dtype(spec.dtype)).reshape(spec.chunk_length, *spec.shape)
    return values, errors


def codec_target(seed: Seed, layout: str):
    """Mutated chunk bytes through ``codec.decode_chunk`` for every array.

    bgzf: the chunk's blocks carry CRC32s, so any change that alters data is refused and
    anything decoded equals the seed. raw: no checksum, so a change to a value is a
    different valid chunk; wherever we decode, htslib reading the cache header plus the
    mutated chunk as a plain BCF must agree on the core fields."""
    cache, specs, ranges = seed.chunks[layout]
    header = seed.plain_bytes[: seed.header_size]
    originals = [decode_all(cache[o : o + n], specs) for o, n in ranges]
    for _values, errors in originals:
        assert not errors, errors

    @given(k=st.integers(0, len(ranges) - 1), ops=st.data())
    def run(k, ops):
        offset, length = ranges[k]
        chunk = cache[offset : offset + length]
        mutation = ops.draw(mutation_ops(len(chunk)), label="ops")
        mutated = apply_ops(chunk, mutation)
        _record(seed.work, f"codec {layout} chunk {k} {mutation!r}")
        values, errors = decode_all(mutated, specs)
        STATS[f"arrays refused {len(errors)}/{len(specs)}"] += 1
        if layout == "bgzf":
            for name, v in values.items():
                assert _same(v, originals[k][0][name]), f"{name}: changed without a CRC error: {mutation!r}"
            return
        core = {key: values.get(name) for key, name in CORE.items()}
        if any(v is None for v in core.values()):
            return  # a core array refused the chunk: nothing to compare
        path = seed.work / "chunk.bcf"
        path.write_bytes(header + mutated)
        rows = pysam_rows(path)
        if rows is None:
            # htslib refuses what the codec decodes: raw has no checksum, and the codec
            # checks structure, not meaning (see tests/README.md).
            STATS[f"raw: decoded, htslib refuses ({LAST_REFUSAL})"] += 1
            return
        n_records = records.record_offsets(np.frombuffer(mutated, np.uint8), CHUNK)[1]
        problems = compare_rows(core, rows, n_rows=n_records)
        assert not problems, f"chunk {k} {mutation!r}: " + "; ".join(problems[:5])
        # Rows past the records are padding (a chunk may lose records undetected).
        assert (core["position"][n_records:] == -2).all(), mutation
        STATS[
            "raw: values equal htslib's"
            + ("" if n_records == len(originals[k][0]["variant_position"]) else " (fewer records)")
        ] += 1

    return run


def _same(a, b) -> bool:
    if a.dtype.kind == "f":
        return np.array_equal(a.view(np.uint32), b.view(np.uint32))
    return a.shape == b.shape and a.tolist() == b.tolist()


# --- columns layout targets ----------------------------------------------------------------
# A columns cache chunk is one segment: a 36-byte preamble (magic, kind, flags, reserved,
# BCF key, records, samples block, block width, decompressed length, CRC32) and a Zstd or
# Blosc frame. The seed is indexed with samples blocks of 2, so its 3 samples make a full
# block and a narrower last one.

# (name, offset, struct format) of each preamble field after the magic.
PREAMBLE_FIELDS = [
    ("kind", 4, "<B"),
    ("flags", 5, "<B"),
    ("reserved", 6, "<H"),
    ("key", 8, "<i"),
    ("records", 12, "<I"),
    ("block", 16, "<I"),
    ("block_samples", 20, "<I"),
    ("length", 24, "<Q"),
    ("crc", 32, "<I"),
]
INTERESTING_U64 = [*INTERESTING_U32, 2**32, 2**40, 2**63, 2**64 - 1]
# The peak RSS one example may add: a decode may take MIN_DECODE_BUDGET (128 MiB) for an
# array; beyond that an allocation was sized by the (mutated) bytes, not the configuration.
MAX_RSS_GROWTH = 600 << 20


def columns_segments(seed: Seed):
    """The seed's columns cache: [(segment bytes, [array names reading it])], and
    {array: ChunkSpec}."""
    refs_path = seed.work / "seed.columns.json"
    cache = seed.work / "seed.columns.cache"
    vcfvirtual.index(
        seed.bgzf,
        refs_path=refs_path,
        cache_path=cache,
        variants_chunk_size=CHUNK,
        cache_layout="columns",
        samples_chunk_size=COLUMNS_SAMPLES_CHUNK,
        force=True,
        progress=False,
    )
    refs = json.loads(refs_path.read_text())["refs"]
    specs = {}
    for key, value in refs.items():
        if key.endswith("/.zarray"):
            ours = [f for f in json.loads(value).get("filters") or [] if f["id"] == codec_mod.CODEC_ID]
            if ours:
                specs[key.split("/")[0]] = codec_mod.ChunkSpec.from_config(ours[0])
    data = bcfdata.cache_file(cache).read_bytes()  # the one part a serial index writes
    readers: dict = collections.defaultdict(list)
    for key, value in refs.items():
        name = key.split("/")[0]
        if isinstance(value, list) and name in specs:
            readers[(value[1], value[2])].append(name)
    segments = [(data[o : o + n], sorted(set(names))) for (o, n), names in sorted(readers.items())]
    assert any(len(names) == 3 for _, names in segments)  # GT's segments: call_genotype(_phased, _mask)
    return segments, specs


def decode_each(data: bytes, specs: dict, names) -> tuple[dict, dict]:
    """``data`` as a chunk of each named array: ({name: values}, {name: ChunkDecodeError})."""
    values, errors = {}, {}
    for name in names:
        spec = specs[name]
        try:
            out = codec_mod.decode_chunk(data, spec)
        except ChunkDecodeError as e:
            errors[name] = e
            continue
        raw = np.ascontiguousarray(out).view(np.uint8)
        if spec.dtype == "str":
            items = VLenUTF8().decode(raw)  # invalid UTF-8 must have been refused
            values[name] = np.asarray(items, dtype=object).reshape(spec.chunk_shape)
        else:
            values[name] = raw.view(np.dtype(spec.dtype)).reshape(spec.chunk_shape)
    return values, errors


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


def _check_rss(before: int, what: str) -> None:
    grown = _peak_rss() - before
    assert grown < MAX_RSS_GROWTH, f"{what}: peak memory grew by {grown >> 20} MiB"


def columns_segment_ops(size: int):
    """1-3 mutations of a stored segment: a preamble field set to an interesting value,
    or the byte mutations, anywhere or in the compressed frame."""
    field = st.tuples(
        st.just("field"),
        st.integers(0, len(PREAMBLE_FIELDS) - 1),
        st.one_of(st.sampled_from(INTERESTING_U64), st.integers(-4, 4)),
    )
    return st.lists(st.one_of(field, byte_op(size, 36)), min_size=1, max_size=3)


def apply_columns_ops(data: bytes, ops) -> bytes:
    for op in ops:
        if op[0] != "field":
            data = apply_ops(data, [op])
            continue
        _, at, value = op
        _, offset, fmt = PREAMBLE_FIELDS[at]
        size = struct.calcsize(fmt)
        if len(data) < offset + size:
            continue
        old = struct.unpack_from(fmt, data, offset)[0]
        # Small values are added to the field (an off-by-a-few count), large ones replace it.
        new = (old + value) if -4 <= value <= 4 else value
        new &= (1 << (8 * size)) - 1
        data = data[:offset] + new.to_bytes(size, "little") + data[offset + size :]
    return data


def codec_columns_target(seed: Seed):
    """Mutated columns segments, as stored (preamble fields, compressed bytes, lengths),
    through the codec: every array reading the segment raises ChunkDecodeError or gives
    exactly the seed's values (the preamble is checked against the configuration and the
    stored bytes, preamble and frame, against the CRC32); every other array's configuration refuses it
    or decodes it without a crash, hang or a huge allocation."""
    segments, specs = columns_segments(seed)
    originals = []
    for data, names in segments:
        values, errors = decode_each(data, specs, names)
        assert not errors, errors
        originals.append(values)

    @given(k=st.integers(0, len(segments) - 1), ops=st.data())
    def run(k, ops):
        data, names = segments[k]
        mutation = ops.draw(columns_segment_ops(len(data)), label="ops")
        mutated = apply_columns_ops(data, mutation)
        _record(seed.work, f"codec columns segment {k} ({names[0]}) {mutation!r}")
        before = _peak_rss()
        values, errors = decode_each(mutated, specs, names)
        STATS[f"readers refused {len(errors)}/{len(names)}"] += 1
        for name, v in values.items():
            assert _same(v, originals[k][name]), f"{name}: changed without an error: {mutation!r}"
        others, _ = decode_each(mutated, specs, [n for n in specs if n not in names])
        if others:
            # Another array's segment of the same kind may pass (e.g. a GT block for the
            # other block's width): counted, its values are not this segment's to judge.
            STATS["another array's configuration decodes it"] += 1
        _check_rss(before, f"segment {k} {mutation!r}")

    return run


def codec_columns_sealed_target(seed: Seed):
    """Columns segments whose *decompressed* bytes are mutated (counts, type codes, value
    lengths, GT bytes), then compressed again behind a preamble with the right length and
    CRC32, as a writer with a bug would store them: the decode kernels must refuse them
    (ChunkDecodeError) or return values of the chunk's shape, never read or write outside
    their buffers (crash; AddressSanitizer in the deep run), hang or allocate hugely."""
    import zlib

    from numcodecs import Blosc, Zstd
    from vcfvirtual_codec import columns as columns_mod

    segments, specs = columns_segments(seed)
    bodies = []
    for data, names in segments:
        fields = columns_mod.PREAMBLE.unpack_from(data)
        raw = Zstd().decode(data[36:]) if specs[names[0]].compressor == "zstd" else Blosc().decode(data[36:])
        # The CRC32 covers the preamble's other 32 bytes, then the compressed frame.
        assert zlib.crc32(data[36:], zlib.crc32(data[:32])) == fields[-1]
        bodies.append((fields, bytes(raw), names))

    @given(k=st.integers(0, len(segments) - 1), ops=st.data())
    def run(k, ops):
        fields, raw, names = bodies[k]
        mutation = ops.draw(mutation_ops(max(len(raw), 1)), label="ops")
        content = apply_ops(raw, mutation)
        compressor = specs[names[0]].compressor
        frame = (Zstd(level=1) if compressor == "zstd" else Blosc(cname="lz4", shuffle=Blosc.BITSHUFFLE)).encode(
            content
        )
        head = columns_mod.PREAMBLE_HEAD.pack(*fields[:-2], len(content))
        preamble = head + struct.pack("<I", zlib.crc32(bytes(frame), zlib.crc32(head)))
        _record(seed.work, f"codec columns sealed segment {k} ({names[0]}) {mutation!r}")
        before = _peak_rss()
        values, errors = decode_each(preamble + bytes(frame), specs, names)
        STATS[f"readers refused {len(errors)}/{len(names)}"] += 1
        for name, v in values.items():
            assert v.shape == specs[name].chunk_shape, (name, v.shape)
        _check_rss(before, f"sealed segment {k} {mutation!r}")

    return run


# --- references target --------------------------------------------------------------------
# References are untrusted input too: the codec configs, chunk byte ranges, templates and
# cache attributes of a Kerchunk JSON are mutated, and the store read through open_store
# (checking, the default) and xarray. Each read must give the seed's values (those
# equal htslib's, checked by Seed) or a typed VcfVirtualError; nothing is fetched from
# outside the cache. Where nothing but configs and ranges changed, the same references
# are read as plain Kerchunk too (open_store(check=False)): that must not crash or hang.

REF_INTS = [0, 1, 2, 3, 4, 6, 7, 64, 255, 2**16, 2**24 - 1, 2**25, 2**31 - 1, 2**31, 2**40, 2**63, -1, -2, -(2**31)]
REF_OTHER = ["3", 2.5, None, True, False, [], {}, [3], "", "str", float("nan")]
REF_DTYPES = ["|i1", "<i2", "<i4", "<i8", ">i4", "<f4", "<f8", "|b1", "str", "<U1", "|O", "|u1"]
REF_SHAPES = [[], [0], [1], [2], [3], [3, 2], [3, 1], [2, 3], [64], [3, 64], [2**25], [2**40], [-1], [3, 2, 2]]
REF_URLS = [
    "/etc/passwd",
    "file:///etc/passwd",
    "{{cache}}x",
    "{{cache}}/../x",
    "{{other}}",
    "",
    "/dev/zero",
    "http://127.0.0.1:9/admin",
    "{{ cache }}",
    "{cache}",
    None,
    7,
]
CONFIG_KEYS = [
    "array",
    "kind",
    "dtype",
    "shape",
    "chunk_length",
    "key",
    "ploidy",
    "vcf_type",
    "filter_columns",
    "layout",
    "version",
    "num_records",
]


def _config_value(key):
    if key == "kind":
        return st.sampled_from([*codec_mod.KINDS, "nonsense"])
    if key == "dtype":
        return st.sampled_from(REF_DTYPES)
    if key == "shape":
        return st.sampled_from(REF_SHAPES)
    if key == "filter_columns":
        return st.sampled_from(
            [[], [0], [0, 1, 2], [0, 2, 1], [2, 1, 0], [0, 1, 3], [0, 1, 100_000], [-1, -1, -1], [0, 1, 2, 2]]
        )
    if key == "vcf_type":
        return st.sampled_from(["", "Integer", "Float", "Flag", "String", "Character", "Nonsense"])
    if key == "layout":
        return st.sampled_from(["raw", "bgzf", "zip"])
    if key == "array":
        return st.sampled_from(["call_genotype", "variant_position", "call_DP", "x"])
    return st.one_of(st.sampled_from(REF_INTS), st.sampled_from(REF_OTHER))


@st.composite
def reference_mutations(draw, doc, cache_size):
    """1-3 mutations of a references document (JSON-level, as a sender could write)."""
    arrays = sorted(
        k.split("/")[0] for k, v in doc["refs"].items() if k.endswith("/.zarray") and codec_mod.CODEC_ID in v
    )
    chunks = sorted(k for k, v in doc["refs"].items() if isinstance(v, list))
    ops = []
    for _ in range(draw(st.integers(1, 3))):
        what = draw(
            st.sampled_from(
                [
                    "config",
                    "config",
                    "config",
                    "range",
                    "range",
                    "url",
                    "template",
                    "attrs",
                    "zarray",
                    "harmless",
                    "harmless",
                ]
            )
        )
        if what == "harmless":  # changes that keep the store's meaning: its values must read
            ops.append(
                draw(
                    st.sampled_from(
                        [
                            ("config", arrays[-1], "version", 1),
                            ("range", chunks[0], 1, 0, True),
                            ("template", "same"),
                        ]
                    )
                )
            )
        elif what == "config":
            key = draw(st.sampled_from(CONFIG_KEYS))
            ops.append(("config", draw(st.sampled_from(arrays)), key, draw(_config_value(key))))
        elif what == "range":
            field = draw(st.sampled_from([1, 2]))
            value = draw(
                st.one_of(
                    st.sampled_from(REF_INTS + [cache_size, cache_size - 1, cache_size + 1]),
                    st.integers(-8, 8),
                    st.sampled_from(REF_OTHER),
                )
            )
            ops.append(
                ("range", draw(st.sampled_from(chunks)), field, value, draw(st.booleans()))
            )  # relative: add to the value instead of replacing it
        elif what == "url":
            ops.append(
                (
                    "url",
                    draw(st.sampled_from(chunks)),
                    draw(st.sampled_from(REF_URLS)),
                    draw(st.sampled_from(["keep", "whole", "four"])),
                )
            )
        elif what == "template":
            ops.append(
                (
                    "template",
                    draw(
                        st.sampled_from(
                            ["copy", "/etc/passwd", "file:///dev/zero", "", "http://127.0.0.1:9/admin", "drop", "extra"]
                        )
                    ),
                )
            )
        elif what == "attrs":
            ops.append(
                (
                    "attrs",
                    draw(st.sampled_from(["url", "size", "digest", "layout", "drop", "header"])),
                    draw(st.sampled_from(REF_INTS + REF_OTHER + ["copy"])),
                )
            )
        else:
            ops.append(
                (
                    "zarray",
                    draw(st.sampled_from(arrays)),
                    draw(st.sampled_from(["chunks", "shape", "dtype", "compressor", "filters"])),
                    draw(st.sampled_from(REF_SHAPES + REF_DTYPES)),
                )
            )
    return ops


def apply_reference_ops(doc: dict, ops, copy_url: str) -> tuple[dict, bool]:
    """The mutated document, and whether it still names only the cache (so plain
    Kerchunk reading it fetches nothing else)."""
    doc = json.loads(json.dumps(doc))
    refs = doc["refs"]
    cache_only = True
    for op in ops:
        try:
            cache_only = _apply_reference_op(doc, refs, op, copy_url) and cache_only
        except (KeyError, IndexError, TypeError, AttributeError):
            continue  # an earlier op removed what this one edits: nothing to apply
    return doc, cache_only


def _apply_reference_op(doc: dict, refs: dict, op, copy_url: str) -> bool:
    """Apply one op; False when the references may then name more than the cache."""
    cache_only = True
    kind = op[0]
    if kind == "config":
        _, name, key, value = op
        meta = json.loads(refs[f"{name}/.zarray"])
        meta["filters"][-1][key] = value
        refs[f"{name}/.zarray"] = json.dumps(meta)
    elif kind == "range":
        _, key, field, value, relative = op
        ref = refs[key]
        if relative and isinstance(value, int) and not isinstance(value, bool) and isinstance(ref[field], int):
            value = ref[field] + value
        ref[field] = value
    elif kind == "url":
        _, key, url, form = op
        cache_only = False
        ref = refs[key]
        refs[key] = [url] if form == "whole" else ([url, *ref[1:], 1] if form == "four" else [url, *ref[1:]])
    elif kind == "template":
        target = op[1]
        cache_only = target == "same"
        if target == "same":
            pass
        elif target == "drop":
            doc.pop("templates", None)
        elif target == "extra":
            doc["templates"]["other"] = "file:///etc/passwd"
        else:
            doc["templates"]["cache"] = copy_url if target == "copy" else target
    elif kind == "attrs":
        cache_only = False
        _, field, value = op
        attrs = json.loads(refs[".zattrs"])
        cache = attrs["vcfvirtual"]["cache"]
        if field == "drop":
            del attrs["vcfvirtual"]
        elif field == "header":
            attrs["vcf_header"] = value if not isinstance(value, str) else attrs["vcf_header"].replace("DP", "PD")
        elif field == "url":
            cache["url"] = copy_url if value == "copy" else value
        else:
            cache[field] = value
        refs[".zattrs"] = json.dumps(attrs)
    else:
        _, name, field, value = op
        meta = json.loads(refs[f"{name}/.zarray"])
        meta[field] = value
        refs[f"{name}/.zarray"] = json.dumps(meta)
    return cache_only


def read_store(refs_path: Path, check: bool):
    """Every data variable through open_store + xarray: (values, typed error)."""
    import xarray as xr

    try:
        ds = xr.open_zarr(vcfvirtual.open_store(refs_path, check=check), consolidated=False)
        return {name: ds[name].values for name in ds.data_vars}, None
    except VcfVirtualError as e:
        return None, e


def references_target(seed: Seed):
    """Mutated references through open_store: the seed's values or a typed error."""
    layout = "bgzf"
    refs_path = seed.work / f"seed.{layout}.json"
    doc = json.loads(refs_path.read_text())
    cache = seed.work / f"seed.{layout}.cache.bcf"
    # A same-size copy with one byte changed: what a template or URL swap would read.
    copy = seed.work / "copy.cache.bcf"
    data = bytearray(cache.read_bytes())
    data[len(data) // 2] ^= 1
    copy.write_bytes(bytes(data))
    expected, err = read_store(refs_path, check=True)
    assert err is None, err
    ours = {k: expected[v] for k, v in CORE.items()}
    assert not compare_rows(ours, seed.rows)  # the seed store reads as htslib reads the BCF
    mutated_path = seed.work / "mutated.json"

    @given(ops=reference_mutations(doc, cache.stat().st_size))
    def run(ops):
        _record(seed.work, f"references {ops!r}")
        mutated, cache_only = apply_reference_ops(doc, ops, f"file://{copy}")
        mutated_path.write_text(json.dumps(mutated))
        values, err = read_store(mutated_path, check=True)
        if err is not None:
            STATS[f"open_store: typed error {type(err).__name__}"] += 1
        else:
            for name, v in expected.items():
                assert name in values and _same(values[name], v), f"{name}: values differ: {ops!r}"
            assert set(values) == set(expected), f"arrays differ: {ops!r}"
            STATS["open_store: the seed's values"] += 1
        if not cache_only:
            return
        # Plain Kerchunk follows configs and ranges as they are: never a crash or hang
        # (this process dying fails the test). Its own errors are allowed there: zarr's
        # ValueError for a config contradicting the .zarray (the v2 codec is not told the
        # chunk shape), fsspec's for a range it cannot fetch (a fractional offset).
        try:
            values, err = read_store(mutated_path, check=False)
        except Exception as e:  # noqa: BLE001 (any error but a crash is plain Kerchunk's to raise)
            STATS[f"plain: not ours {type(e).__name__}"] += 1
            return
        STATS["plain: typed error" if err is not None else "plain: values"] += 1

    return run


TARGETS = {
    "scan_bgzf_flip": scan_bgzf_flip_target,
    "scan_bgzf": lambda seed: scan_target(seed, plain=False),
    "scan_plain": lambda seed: scan_target(seed, plain=True),
    "scan_bgzf_columns": lambda seed: scan_target(seed, plain=False, layout="columns"),
    "codec_raw": lambda seed: codec_target(seed, "raw"),
    "codec_bgzf": lambda seed: codec_target(seed, "bgzf"),
    "codec_columns": codec_columns_target,
    "codec_columns_sealed": codec_columns_sealed_target,
    "references": references_target,
}


def main(target: str, work: str) -> int:
    faulthandler.enable()
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    seed = Seed(work)
    examples = int(os.environ.get("VCFVIRTUAL_FUZZ_EXAMPLES", "40"))
    seconds = float(os.environ.get("VCFVIRTUAL_FUZZ_SECONDS", "0"))
    health = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
    started = time.monotonic()
    batches = 0
    if not seconds:
        # In the suite: the same fixed examples every run, so timing and results are stable.
        settings(max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=health)(
            TARGETS[target](seed)
        )()
        batches = 1
    else:
        while time.monotonic() - started < seconds:
            # A fresh test function per batch: hypothesis takes settings once per function.
            settings(
                max_examples=examples, derandomize=False, database=None, deadline=None, suppress_health_check=health
            )(TARGETS[target](seed))()
            batches += 1
    faulthandler.cancel_dump_traceback_later()
    cases = STATS.pop("cases", 0)
    print(
        "FUZZ-STATS "
        + json.dumps(
            {
                "target": target,
                "cases": cases,
                "batches": batches,
                "seconds": round(time.monotonic() - started, 1),
                "outcomes": dict(sorted(STATS.items())),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
