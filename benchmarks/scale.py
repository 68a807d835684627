"""Issue 23 at biobank scale: the references' size, and a projection of the two-phase
parallel columns writer from costs measured on this machine.

    python benchmarks/scale.py refs                 # 10^6 variants x 5x10^5 samples, every format
    python benchmarks/scale.py refs --variants 1e5 --samples 2e4    # a quick look
    python benchmarks/scale.py model [cohort.bcf]   # per-task CPU, the serial work, the projection
    python benchmarks/scale.py all --output scale.md

``refs`` builds the store's group with the product's own manifest builder
(``vcfvirtual.manifests.vcf_zarr.build_store_group``) from a synthetic scan: a real VCF header
(GT, 5 INFO and 3 FORMAT fields, the samples asked for) parsed by htslib, a ScanResult holding
only counts and per-chunk summaries, and segment byte ranges laid out as the columns writer
lays them, chunk after chunk (lengths from ``SEGMENT_BYTES``: no data is written). The cache
is a sparse file of that size whose first bytes are the real cache header, so ``open_store``'s
checks run as on a real store. Each format is written through ``vcfvirtual.refs.write`` and
opened with ``open_store`` then ``xarray.open_zarr``; the same group with its chunks spread over
parts (``part-NNNNNN`` files, one per run of variants chunks, as the parallel writer will write
them) is written again for the sizes.

``model`` times the phases of the two-phase writer with today's product code on a BCF (default:
a 10,000-sample msprime cohort from ``bench.py``'s ``make_cohort``): phase 1 is
``vcfvirtual.scan.parallel.scan_all`` (run in this process, one partition at a time) and
``merge``; phase 2 is one ``ColumnsWriter`` per run of whole variants chunks, fed from its first
record's virtual offset, writing its own part. From the CPU per compressed MB of each phase,
the per-task overheads and the caller's serial work it projects the wall time of a 1 TB BCF on
8, 64 and 256 workers (Amdahl, and with whole tasks per wave), and counts object-store requests.
Timers are Python's (``time.perf_counter``, ``time.process_time``, which counts every thread of
this process: the compression threads too).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import pickle
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the product is imported where used: --help needs none of it
    from vcfvirtual.cache.base import SegmentRanges
    from vcfvirtual.refs.formats import RefsFormat
    from vcfvirtual.scan.parallel import Merged

HERE = Path(__file__).resolve().parent
MB = 1_000_000
MIB = 1024 * 1024
TB = 10**12

# ---------------------------------------------------------------------------- the store's references

# INFO and FORMAT fields of the synthetic store (GT is added): (ID, Number, Type).
INFO_FIELDS = (
    ("AF", "A", "Float"),
    ("AC", "A", "Integer"),
    ("AN", "1", "Integer"),
    ("DP", "1", "Integer"),
    ("MQ", "1", "Float"),
)
FORMAT_FIELDS = (("DP", "1", "Integer"), ("GQ", "1", "Integer"), ("AD", "R", "Integer"))
# Assumed compressed bytes of one segment of 1,000 variants (x 10,000 samples for FORMAT). They
# only set how many digits the offsets take. GT: the 10,000-sample msprime cohort's cache
# (18.2 MB of GT segments for 20.6 chunks, docs/benchmarks.md "Storage per array").
SEGMENT_BYTES = {"format/GT": 880_000, "format": 150_000, "other": 5_000}


def header_text(n_samples: int) -> str:
    """A VCF header with GT, ``INFO_FIELDS``, ``FORMAT_FIELDS`` and ``n_samples`` samples."""
    lines = ["##fileformat=VCFv4.3", "##contig=<ID=chr1,length=248956422>"]
    lines += [f'##INFO=<ID={i},Number={n},Type={t},Description="{i}">' for i, n, t in INFO_FIELDS]
    lines.append('##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">')
    lines += [f'##FORMAT=<ID={i},Number={n},Type={t},Description="{i}">' for i, n, t in FORMAT_FIELDS]
    columns = "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT"
    samples = "\t".join(f"S{i:07d}" for i in range(n_samples))
    return "\n".join([*lines, f"{columns}\t{samples}"]) + "\n"


def cache_header(text: str) -> bytes:
    """The columns cache's first bytes: its magic, then the BCF header as the stream holds it."""
    from vcfvirtual.cache.columns import FILE_MAGIC

    raw = text.encode() + b"\0"
    return FILE_MAGIC + b"BCF\2\2" + len(raw).to_bytes(4, "little") + raw


# Wall seconds of each synthetic header's parse (every task of the parallel writer parses the
# header once: at 5x10^5 samples, a fixed cost per task).
PARSE_SECONDS: list[float] = []


def synthetic_scan(text: str, n_variants: int, chunk_length: int):
    """A ScanResult of ``n_variants`` biallelic diploid records on chr1 (one per 100 bp),
    with the header parsed by htslib as the scan parses it."""
    from vcfvirtual.bcf.header import parse_header_text
    from vcfvirtual.scan.kernel import new_stats
    from vcfvirtual.scan.results import ScanResult

    stream_size = len(cache_header(text)) - 8  # header bytes of the BCF stream (no cache magic)
    t0 = time.perf_counter()
    header = parse_header_text(text.encode(), "synthetic.bcf", stream_size)
    PARSE_SECONDS.append(time.perf_counter() - t0)
    n_chunks = -(-n_variants // chunk_length)
    first = np.arange(n_chunks, dtype=np.int64) * chunk_length
    last = np.minimum(first + chunk_length, n_variants) - 1
    rows = np.stack(
        [
            np.arange(n_chunks),
            np.zeros(n_chunks, np.int64),
            100 * first + 1,
            100 * last + 1,
            100 * last + 1,
            last - first + 1,
        ],
        axis=1,
    )
    n_keys = max(f.key for f in (*header.info, *header.formats)) + 1
    info, fmt = new_stats(n_keys), new_stats(n_keys)
    for f in header.info:
        info[f.key] = (1, 0, 60)
    for f in header.formats:
        fmt[f.key] = (2, 0, 99)
    return ScanResult(
        header=header,
        stream_size=stream_size,
        chunk_length=chunk_length,
        num_records=n_variants,
        chunk_offsets=first * 1000 + stream_size,
        region_rows=rows,
        pos_range=(1, 100 * (n_variants - 1) + 1),
        rlen_range=(1, 1),
        max_alleles=2,
        max_ploidy=2,
        compressed=True,
        has_eof_block=True,
        info_stats=info,
        format_stats=fmt,
    )


@dataclass(frozen=True)
class SyntheticCache:
    """Segment ranges laid out as the columns writer writes them: every segment of chunk 0,
    then of chunk 1...; ``chunk_starts``: where each chunk's first segment is."""

    ranges: SegmentRanges
    chunk_starts: np.ndarray
    size: int


def synthetic_ranges(header, n_chunks: int, samples_chunk_size: int, start: int) -> SyntheticCache:
    """Ranges of every segment of ``n_chunks`` chunks from byte ``start`` (no data)."""
    from vcfvirtual.cache.base import ChunkRanges, SegmentRanges
    from vcfvirtual.cache.columns import SegmentPlan, compressor_of

    plan = SegmentPlan(header, samples_chunk_size)
    segs = [plan.segments[s] for s in plan.write_order]
    lengths = np.array(
        [SEGMENT_BYTES.get(s[0], SEGMENT_BYTES["format" if s[0].startswith("format/") else "other"]) for s in segs],
        np.uint64,
    )
    per_chunk = int(lengths.sum())
    chunk_starts = start + np.arange(n_chunks, dtype=np.uint64) * np.uint64(per_chunk)
    within = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64)
    by_name: dict[str, list[int]] = {}
    for i, s in enumerate(segs):
        by_name.setdefault(s[0], []).append(i)
    out = {}
    for name, idx in by_name.items():
        offsets = chunk_starts[:, None] + within[idx][None, :]
        lens = np.broadcast_to(lengths[idx][None, :], offsets.shape).copy()
        if len(idx) == 1 and not name.startswith("format/"):
            offsets, lens = offsets[:, 0].copy(), lens[:, 0].copy()
        out[name] = ChunkRanges(offsets, lens)
    compressors = {s[0]: compressor_of(s[0]) for s in segs}
    # One part: the parts rows below spread the chunks over more (spread_over_parts).
    ranges = SegmentRanges(out, compressors, plan.samples_chunk_size, ("part-000000",), np.zeros(n_chunks, np.int32))
    return SyntheticCache(ranges, chunk_starts, start + n_chunks * per_chunk)


def sparse_cache(path: Path, text: str, synthetic: SyntheticCache, last_records: int) -> None:
    """A file of the cache's size (sparse: no data) holding only what ``open_store``'s checks
    read: the cache's header, and the preamble of the last chunk's ``position`` segment,
    whose record count is checked against the arrays'."""
    from vcfvirtual_codec.columns import MAGIC

    from vcfvirtual.cache.columns import KIND_CODES, PREAMBLE

    with open(path, "wb") as f:
        f.write(cache_header(text))
        f.seek(int(synthetic.ranges.segments["position"].offsets[-1]))
        f.write(PREAMBLE.pack(MAGIC, KIND_CODES["position"], 0, 0, -1, last_records, 0, 1, 0, 0))
        f.truncate(synthetic.size)


def store_group(text: str, n_variants: int, chunk_length: int, samples_chunk_size: int, cache: Path):
    """The store's ManifestGroup through the product's builder, over a sparse cache."""
    from vcfvirtual.io.fingerprint import Fingerprint
    from vcfvirtual.manifests.provenance import RecordedCache, RecordedPart, RecordedSource
    from vcfvirtual.manifests.vcf_zarr import build_store_group, store_provenance

    scan = synthetic_scan(text, n_variants, chunk_length)
    n_chunks = len(scan.chunk_offsets)
    synthetic = synthetic_ranges(scan.header, n_chunks, samples_chunk_size, len(cache_header(text)))
    cache.mkdir(exist_ok=True)  # a cache made of parts: one (sparse) part here
    part = cache / "part-000000"
    sparse_cache(part, text, synthetic, n_variants - (n_chunks - 1) * chunk_length)
    # The source is not there (a collaborator's view): its fingerprint is recorded, not checked.
    source = RecordedSource("/nonexistent/cohort.bcf", Fingerprint(size=TB, mtime_ns=0, digest="0" * 32))
    recorded = RecordedCache.of_parts(f"file://{cache}", "columns", (RecordedPart(part.name, Fingerprint.of(part)),))
    provenance = store_provenance(
        scan, sources=(source,), cache=recorded, zero_copy=False, samples_chunk_size=samples_chunk_size
    )
    t0 = time.perf_counter()
    group = build_store_group(scan, synthetic.ranges, provenance)
    return group, synthetic, scan.header, time.perf_counter() - t0


def spread_over_parts(group, synthetic: SyntheticCache, chunk_length: int, n_parts: int, cache_url: str):
    """The same group with each run of variants chunks in its own part ``cache_url/part-NNNNNN``
    (offsets counted from the part's start), as the parallel writer will lay them out."""
    from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup

    n_chunks = synthetic.chunk_starts.shape[0]
    run_of_chunk = np.arange(n_chunks) * n_parts // n_chunks
    part_start = synthetic.chunk_starts[np.searchsorted(run_of_chunk, run_of_chunk, side="left")]
    names = np.array([f"{cache_url}/part-{p:06d}" for p in range(n_parts)], dtype=np.dtypes.StringDType())
    arrays = {}
    for name, marr in group.arrays.items():
        refs = list(marr.manifest.iter_refs())
        if not refs or not refs[0][1]["path"].startswith(cache_url + "/"):  # inlined values: no cache range
            arrays[name] = marr
            continue
        grid = marr.manifest.shape_chunk_grid
        offsets = np.zeros(grid, np.uint64)
        lengths = np.zeros(grid, np.uint64)
        paths = np.empty(grid, dtype=np.dtypes.StringDType())
        for idx, entry in refs:
            k = idx[0]  # the variants chunk
            offsets[idx] = entry["offset"] - int(part_start[k])
            lengths[idx] = entry["length"]
            paths[idx] = names[run_of_chunk[k]]
        manifest = ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths)
        arrays[name] = ManifestArray(metadata=marr.metadata, chunkmanifest=manifest)
    return ManifestGroup(arrays=arrays, attributes=dict(group.metadata.attributes))


def tree_bytes(path: Path) -> tuple[int, int]:
    """(bytes, files) of a file or a folder's files."""
    if path.is_file():
        return path.stat().st_size, 1
    files = [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


@dataclass(frozen=True)
class RefsRow:
    """One references format written and opened."""

    refs_format: str
    parts: int
    bytes: int
    files: int
    write_s: float
    open_s: float | None  # open_store (checks) + xarray.open_zarr; None: not opened (parts)


def write_refs(group, out: Path, refs_format: RefsFormat, cache: Path) -> float:
    """Write ``group``'s references through the product's writer; wall seconds."""
    from vcfvirtual.refs.write import ReferencesOutput, write_references

    output = ReferencesOutput(out, out, refs_format, cache, f"file://{cache}")
    t0 = time.perf_counter()
    write_references(group, output)
    return time.perf_counter() - t0


def json_with_part_template(group, out: Path, cache_url: str) -> float:
    """Kerchunk JSON of a group over parts, each chunk naming ``{{cache}}/part-NNNNNN``: the
    product's ``templated_refs`` (which templates only the one cache's own URL, today), then
    the parts' common prefix replaced by the template as the parallel writer will write it."""
    from vcfvirtual.refs.kerchunk import templated_refs

    t0 = time.perf_counter()
    refs = templated_refs(group)
    local = cache_url.removeprefix("file://")  # Kerchunk names local files by path
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value and value[0].startswith(local + "/"):
            refs["refs"][key] = ["{{cache}}" + value[0][len(local) :], *value[1:]]
    with open(out, "w") as f:
        json.dump(refs, f, separators=(",", ":"))
    return time.perf_counter() - t0


def open_refs(path: Path) -> float:
    """Wall seconds of ``open_store`` (every check) then ``xarray.open_zarr`` (metadata only)."""
    import xarray as xr

    from vcfvirtual.refs.open import open_store

    t0 = time.perf_counter()
    ds = xr.open_zarr(open_store(path), consolidated=False)
    assert "call_genotype" in ds
    return time.perf_counter() - t0


def refs_table(args: argparse.Namespace, workdir: Path) -> tuple[list[RefsRow], dict]:
    """Build the store, write and open each format, then write each over ``args.parts`` parts."""
    n_variants, n_samples = int(args.variants), int(args.samples)
    text = header_text(n_samples)
    cache = workdir / "cohort.bcf.vcz.cache.columns"
    t0 = time.perf_counter()
    group, synthetic, header, build_s = store_group(text, n_variants, args.chunk_length, args.samples_chunk_size, cache)
    setup_s = time.perf_counter() - t0 - build_s  # the header parsed by htslib, the sparse cache
    n_refs = sum(len(m.manifest) for m in group.arrays.values())
    facts = dict(
        variants=n_variants,
        samples=n_samples,
        arrays=len(group.arrays),
        chunk_refs=n_refs,
        cache_bytes=synthetic.size,
        header_bytes=len(text),
        build_group_s=round(build_s, 2),
        header_parse_s=round(PARSE_SECONDS[-1], 2),
        setup_s=round(setup_s, 2),
        variant_chunks=len(synthetic.chunk_starts),
        header_pickle_bytes=len(pickle.dumps(header, protocol=5)),
        sample_blocks=-(-n_samples // args.samples_chunk_size),
    )
    rows = []
    for refs_format in args.formats:
        out = workdir / f"cohort.vcz.{refs_format}"
        write_s = write_refs(group, out, refs_format, cache)
        size, files = tree_bytes(out)
        rows.append(RefsRow(refs_format, 1, size, files, write_s, open_refs(out)))
        _remove(out)
    cache_url = f"file://{cache}"
    parted = spread_over_parts(group, synthetic, args.chunk_length, args.parts, cache_url)
    for refs_format in args.formats:
        out = workdir / f"parts.vcz.{refs_format}"
        if refs_format == "json":
            write_s = json_with_part_template(parted, out, cache_url)
        else:
            write_s = write_refs(parted, out, refs_format, cache)
        size, files = tree_bytes(out)
        rows.append(RefsRow(refs_format, args.parts, size, files, write_s, None))
        _remove(out)
    shutil.rmtree(cache)
    return rows, facts


def _remove(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()


def refs_markdown(rows: list[RefsRow], facts: dict) -> str:
    head = (
        f"{facts['variants']:,} variants x {facts['samples']:,} samples: {facts['arrays']} arrays, "
        f"{facts['chunk_refs']:,} chunk references ({facts['variant_chunks']:,} variants chunks x "
        f"{facts['sample_blocks']} samples blocks per FORMAT array), header {facts['header_bytes'] / MB:.1f} MB, "
        f"header parsed and sparse cache made in {facts['setup_s']} s, group built in {facts['build_group_s']} s\n\n"
    )
    lines = ["| format | parts | MB on disk | files | write s | open s |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        opened = "" if r.open_s is None else f"{r.open_s:.2f}"
        lines.append(
            f"| {r.refs_format} | {r.parts:,} | {r.bytes / MB:.1f} | {r.files:,} | {r.write_s:.2f} | {opened} |"
        )
    return head + "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- phase costs


@contextmanager
def cpu_timer(into: dict, key: str) -> Iterator[None]:
    """Add this process's CPU seconds (every thread) and wall seconds of the block to ``into``."""
    c0, t0 = time.process_time(), time.perf_counter()
    yield
    into[key + "_cpu"] = into.get(key + "_cpu", 0.0) + time.process_time() - c0
    into[key + "_wall"] = into.get(key + "_wall", 0.0) + time.perf_counter() - t0


def phase1(bcf: str, n_partitions: int) -> tuple[Merged, dict]:
    """The parallel scan run in this process (one partition after another), then ``merge``;
    what the tasks would send the caller (pickled), and the caller's cost of unpickling it."""
    from vcfvirtual.cache.columns import CHUNK_LENGTH
    from vcfvirtual.scan import parallel, partition

    t: dict = {}
    with cpu_timer(t, "plan"):
        cut = (lambda p: partition.plan_partitions(p, n_partitions)) if n_partitions > 1 else None
        parts = parallel.split_files([bcf], cut)
    with cpu_timer(t, "scan"):
        scanned = parallel.scan_all(parts, parallel.InlineExecutor(), None, progress=False)
    t["partitions"] = len(parts)
    shipped = [pickle.dumps(s[1], protocol=5) for s in scanned]
    t["returned_bytes"] = sum(map(len, shipped))
    t["record_bytes"] = sum(a.nbytes for s in scanned for a in s[1].records.values())
    t["header_bytes"] = len(pickle.dumps(scanned[0][1].header, protocol=5))
    with cpu_timer(t, "gather"):
        for blob in shipped:
            pickle.loads(blob)
    with cpu_timer(t, "merge"):
        merged = parallel.merge(scanned, CHUNK_LENGTH, keep_record_offsets=True)
    t["merge_prefixes"] = merge_prefixes(scanned, CHUNK_LENGTH)
    return merged, t


def merge_prefixes(scanned: list, chunk_length: int) -> list[tuple[int, float]]:
    """(records, merge CPU seconds, best of 3) of the first k partitions, k = 1..all: what
    the caller's merge costs per record, apart from its fixed cost."""
    from vcfvirtual.scan import parallel

    out = []
    for k in range(1, len(scanned) + 1):
        best = math.inf
        for _ in range(3):
            c0 = time.process_time()
            parallel.merge(scanned[:k], chunk_length, keep_record_offsets=True)
            best = min(best, time.process_time() - c0)
        out.append((sum(s[1].records["offset"].shape[0] for s in scanned[:k]), best))
    return out


@dataclass(frozen=True)
class Run:
    """Records ``[r0, r1)`` of the stream (whole chunks): from byte ``within`` of the source
    block at ``block_offset``, ``length`` stream bytes, its record starts ``rel`` from there."""

    block_offset: int
    within: int
    length: int
    rel: np.ndarray


def runs_of_chunks(merged: Merged, n_tasks: int) -> list[Run]:
    """``n_tasks`` runs of whole variants chunks, each placed in the source blocks."""
    offs = merged.record_offsets
    n, length = offs.shape[0], merged.scan.chunk_length
    starts = np.array([p.stream_start for p in merged.pieces], np.int64)
    bounds = np.linspace(0, -(-n // length), n_tasks + 1).round().astype(int)
    runs = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if a == b:
            continue
        r0, r1 = a * length, min(b * length, n)
        lo = int(offs[r0])
        hi = int(offs[r1]) if r1 < n else merged.scan.stream_size
        k = int(np.searchsorted(starts, lo, side="right")) - 1
        runs.append(Run(merged.pieces[k].offset, lo - int(starts[k]), hi - lo, offs[r0:r1] - lo))
    return runs


def demux_task(bcf: str, run: Run, chunk_length: int, part: Path) -> dict:
    """One phase-2 task: re-inflate the run's blocks, demux, compress and write its part
    with the product's ColumnsWriter. CPU and bytes read, inflated and written."""
    from vcfvirtual_codec.bcf import bgzf

    from vcfvirtual.cache.columns import ColumnsLayout, ColumnsWriter, SegmentPlan
    from vcfvirtual.scan.scanner import read_header

    c0 = time.process_time()
    header = read_header(bcf)
    layout = ColumnsLayout()
    fed = told = inflated = 0
    read_end = run.block_offset
    within = run.within
    with open(part, "wb") as out, open(bcf, "rb") as f:
        writer = ColumnsWriter(out, bcf, layout)
        writer.chunk_length = chunk_length
        writer.plan = SegmentPlan(header, layout.samples_chunk_size)
        writer.ranges = [[] for _ in writer.plan.segments]
        try:
            f.seek(run.block_offset)
            for block in bgzf.read_blocks(f, bcf, start=run.block_offset):
                data = memoryview(block.data)[within : within + run.length - fed]
                within = 0
                inflated += len(block.data)
                read_end = block.offset + len(block.raw)
                writer.add_block(None, data)
                fed += len(data)
                known = int(np.searchsorted(run.rel, fed, side="left"))
                if known > told:
                    writer.records_scanned(run.rel[told:known])
                    told = known
                    writer.scanned_to(fed)
                if fed >= run.length:
                    break
            writer.close(run.length)
        finally:
            writer.pool.shutdown()
    ranges = sum(len(r) for r in writer.ranges)
    return dict(
        cpu=time.process_time() - c0,
        read=read_end - run.block_offset,
        inflated=inflated,
        demuxed=fed,
        written=part.stat().st_size,
        ranges=ranges,
        returned_bytes=len(pickle.dumps(writer.ranges)),
    )


def phase2(bcf: str, merged: Merged, n_tasks: int, workdir: Path) -> dict:
    """Every run's demux task, one after another in this process."""
    runs = runs_of_chunks(merged, n_tasks)
    tasks = [demux_task(bcf, r, merged.scan.chunk_length, workdir / f"part-{i:06d}") for i, r in enumerate(runs)]
    for i in range(len(runs)):
        (workdir / f"part-{i:06d}").unlink()
    total = {k: sum(t[k] for t in tasks) for k in tasks[0]}
    total["tasks"] = len(tasks)
    return total


@dataclass(frozen=True)
class Costs:
    """What the projection takes, per compressed MB of BCF unless named otherwise."""

    bcf_mb: float
    records: int
    samples: int
    scan_s_per_mb: float  # phase 1 task CPU
    scan_task_s: float  # phase 1 fixed CPU per task (header, set-up)
    demux_s_per_mb: float  # phase 2 task CPU
    demux_task_s: float
    plan_s_per_cut: float  # caller: cutting the file (a block scan near each cut, no CSI)
    merge_s_per_record: float  # caller: folding the partitions' record facts
    merge_s: float  # caller: merge's fixed cost
    gather_s_per_mb: float  # caller: unpickling phase 1's results
    record_bytes: float  # phase 1 results per record (the record facts)
    header_bytes: int  # phase 1 results per task: the parsed header (sample names)
    cache_per_bcf: float
    reinflate_frac: float  # phase 2's blocks inflated beyond its own bytes (edges)


def fit(one: float, many: float, tasks: int) -> tuple[float, float]:
    """(variable, fixed per task) CPU from the same work done as 1 task and as ``tasks``."""
    if tasks < 2:  # a file too small to cut (4 MiB a partition at least): no per-task cost seen
        return one, 0.0
    fixed = max(0.0, (many - one) / (tasks - 1))
    return one - fixed, fixed


def measure_costs(bcf: str, tasks: int, workdir: Path) -> tuple[Costs, dict]:
    """Each phase run as 1 task and as ``tasks`` tasks (the difference is the per-task cost),
    after a first run of each that loads the compiled kernels."""
    from vcfvirtual.cache.columns import CHUNK_LENGTH
    from vcfvirtual.scan.scanner import read_header

    bcf_mb = os.path.getsize(bcf) / MB
    merged, _ = phase1(bcf, tasks)  # loads the scan and partition kernels
    phase2(bcf, merged, 1, workdir)  # loads the demux kernels
    merged, one = phase1(bcf, 1)
    merged, many = phase1(bcf, tasks)
    p2_one = phase2(bcf, merged, 1, workdir)
    p2_many = phase2(bcf, merged, tasks, workdir)
    scan_var, scan_fixed = fit(one["scan_cpu"], many["scan_cpu"], many["partitions"])
    demux_var, demux_fixed = fit(p2_one["cpu"], p2_many["cpu"], p2_many["tasks"])
    n = merged.record_offsets.shape[0]
    records, seconds = np.array(many["merge_prefixes"], dtype=float).T
    per_record, fixed = np.polyfit(records, seconds, 1) if len(records) > 1 else (seconds[0] / records[0], 0.0)
    costs = Costs(
        bcf_mb=bcf_mb,
        records=n,
        samples=len(read_header(bcf).samples),
        scan_s_per_mb=scan_var / bcf_mb,
        scan_task_s=scan_fixed,
        demux_s_per_mb=demux_var / bcf_mb,
        demux_task_s=demux_fixed,
        plan_s_per_cut=many["plan_cpu"] / max(1, many["partitions"] - 1),
        merge_s_per_record=max(0.0, float(per_record)),
        merge_s=max(0.0, float(fixed)),
        gather_s_per_mb=many["gather_cpu"] / (many["returned_bytes"] / MB),
        record_bytes=many["record_bytes"] / n,
        header_bytes=many["header_bytes"],
        cache_per_bcf=p2_many["written"] / (bcf_mb * MB),
        reinflate_frac=p2_many["inflated"] / p2_many["demuxed"] - 1,
    )
    raw = dict(phase1_one=one, phase1_many=many, phase2_one=p2_one, phase2_many=p2_many, chunk_length=CHUNK_LENGTH)
    return costs, raw


# ---------------------------------------------------------------------------- projection


@dataclass(frozen=True)
class Scenario:
    """The run projected: a BCF of ``bcf_bytes`` compressed with ``samples`` samples."""

    bcf_bytes: int
    samples: int
    task_bytes: int  # compressed BCF bytes per task, both phases
    get_bytes: tuple[int, ...]  # range GET sizes counted
    multipart_bytes: int  # part upload chunk, when a part is uploaded in pieces
    refs_per_variant_chunk: int  # chunk references per variants chunk at ``samples``
    header_bytes: int  # a parsed header (pickled) at ``samples``: each phase 1 result carries one
    header_parse_s: float  # a task's parse of the header at ``samples`` (each task of each phase)
    chunk_length: int = 1_000


# Bytes a phase 2 task returns per segment range: two uint64.
RANGE_BYTES = 16


@dataclass(frozen=True)
class Projection:
    workers: int
    wall_s: float  # two phases, whole tasks per wave, serial work added
    amdahl_s: float  # serial + parallel CPU / workers
    speedup: float


def serial_seconds(
    c: Costs, s: Scenario, records: float, tasks: int, refs_s_per_chunk: float
) -> tuple[dict[str, float], float]:
    """The caller's serial work at scale (planning, receiving and merging phase 1's results,
    references), and the MB it receives."""
    chunk_refs = math.ceil(records / s.chunk_length) * s.refs_per_variant_chunk
    received = (c.record_bytes * records + s.header_bytes * tasks + RANGE_BYTES * chunk_refs) / MB
    seconds = dict(
        plan=c.plan_s_per_cut * (tasks - 1),
        gather=c.gather_s_per_mb * received,
        merge=c.merge_s + c.merge_s_per_record * records,
        refs=refs_s_per_chunk * chunk_refs,
    )
    return seconds, received


def project(c: Costs, s: Scenario, workers: list[int], refs_s_per_chunk: float) -> tuple[list[Projection], dict]:
    """Amdahl and whole-wave projections of the scenario on each worker count, the caller
    building the group and writing references at ``refs_s_per_chunk`` per chunk reference."""
    mb = s.bcf_bytes / MB
    # Records scale with bytes: a record's compressed size grows with the samples (GT-only data).
    records = mb / (c.bcf_mb / c.records * s.samples / c.samples)
    tasks = math.ceil(s.bcf_bytes / s.task_bytes)
    task_mb = mb / tasks
    # The fixed cost per task measured on the cohort, plus parsing the header at scale.
    t1 = c.scan_task_s + s.header_parse_s + c.scan_s_per_mb * task_mb
    t2 = c.demux_task_s + s.header_parse_s + c.demux_s_per_mb * task_mb * (1 + c.reinflate_frac)
    serial, received = serial_seconds(c, s, records, tasks, refs_s_per_chunk)
    serial_total = sum(serial.values())
    parallel_cpu = tasks * (t1 + t2)
    out = []
    for n in workers:
        waves = math.ceil(tasks / n)
        wall = serial_total + waves * (t1 + t2)
        out.append(Projection(n, wall, serial_total + parallel_cpu / n, (serial_total + parallel_cpu) / wall))
    facts = dict(
        records=records,
        tasks=tasks,
        task_mb=task_mb,
        task1_s=t1,
        task2_s=t2,
        serial=serial,
        serial_fraction=serial_total / (serial_total + parallel_cpu),
        parallel_cpu_s=parallel_cpu,
        caller_received_mb=received,
    )
    return out, facts


def requests(
    c: Costs, s: Scenario, tasks: int, refs_files: dict[str, int], rate: tuple[int, float]
) -> list[tuple[str, str]]:
    """Object-store requests of the scenario: range GETs of the BCF (two passes), PUTs of the
    parts (whole, or multipart), and the references; ``rate``: (workers, seconds of a phase 1
    task), for the GETs per second phase 1 asks of the store."""
    rows = []
    per_task = s.task_bytes
    for g in s.get_bytes:
        # Each pass: the task's bytes in GETs of g, plus one for the header (a later
        # task reads the file's first blocks) and, in phase 2, one for the block before its run.
        gets = tasks * (2 * math.ceil(per_task / g) + 2) + 1
        rows.append((f"BCF range GETs of {g // MIB} MiB, both phases", f"{gets:,}"))
    rows.append(("BCF GETs by the caller (a cut's block near each boundary)", f"{tasks - 1:,}"))
    workers, task_s = rate
    gets_per_s = workers * math.ceil(per_task / s.get_bytes[0]) / task_s
    rows.append(
        (f"peak GET rate, phase 1 on {workers} workers, {s.get_bytes[0] // MIB} MiB GETs", f"{gets_per_s:,.0f}/s")
    )
    part_bytes = c.cache_per_bcf * per_task
    multipart = math.ceil(part_bytes / s.multipart_bytes) + 2
    rows.append((f"part PUTs (one per task, {part_bytes / MB:,.0f} MB each)", f"{tasks:,}"))
    rows.append(
        (
            f"or multipart uploads of {s.multipart_bytes // MIB} MiB (create + parts + complete)",
            f"{tasks * multipart:,}",
        )
    )
    for name, files in refs_files.items():
        rows.append((f"references PUTs, {name}", f"{files:,}"))
    return rows


# ---------------------------------------------------------------------------- output


def costs_markdown(c: Costs, raw: dict) -> str:
    lines = ["| measured (one process) | value |", "| --- | ---: |"]
    lines += [
        f"| BCF | {c.bcf_mb:.1f} MB, {c.records:,} records, {c.samples:,} samples |",
        f"| phase 1 (scan_all) CPU per compressed MB | {1000 * c.scan_s_per_mb:.1f} ms |",
        f"| phase 1 fixed CPU per task | {1000 * c.scan_task_s:.0f} ms |",
        f"| phase 2 (re-inflate + demux + compress + write) CPU per compressed MB | {1000 * c.demux_s_per_mb:.1f} ms |",
        f"| phase 2 fixed CPU per task | {1000 * c.demux_task_s:.0f} ms |",
        f"| phase 2 re-inflated at run edges ({raw['phase2_many']['tasks']} tasks) | {100 * c.reinflate_frac:.2f}% |",
        f"| caller: planning, per cut (block scan, no CSI index) | {1000 * c.plan_s_per_cut:.1f} ms |",
        f"| caller: merge, per record + fixed | {1e6 * c.merge_s_per_record:.3f} us + {1000 * c.merge_s:.0f} ms |",
        f"| caller: unpickling phase 1 results, per MB | {1000 * c.gather_s_per_mb:.2f} ms |",
        f"| phase 1 result per record + per task (its header) | {c.record_bytes:.0f} B"
        f" + {c.header_bytes / 1e3:.0f} kB |",
        f"| cache / BCF | {c.cache_per_bcf:.3f} |",
    ]
    return "\n".join(lines) + "\n"


def projection_markdown(by_format: dict[str, tuple[list[Projection], dict]], s: Scenario) -> str:
    """One line of facts, the caller's serial work per references format, and the walls."""
    first = next(iter(by_format.values()))[1]
    serial = first["serial"]
    head = (
        f"{s.bcf_bytes / TB:g} TB BCF, {s.samples:,} samples: {first['records']:,.0f} records, "
        f"{first['tasks']:,} tasks of {first['task_mb']:,.0f} MB per phase ({first['task1_s']:.1f} s + "
        f"{first['task2_s']:.1f} s CPU each, {s.header_parse_s:.1f} s of each the header's parse); "
        f"parallel CPU {first['parallel_cpu_s'] / 3600:,.1f} h; the caller receives "
        f"{first['caller_received_mb']:,.0f} MB from the tasks and spends plan {serial['plan']:.1f} s, "
        f"receive {serial['gather']:.1f} s, merge {serial['merge']:.1f} s, then on the references: "
        + ", ".join(
            f"{name} {facts['serial']['refs']:,.0f} s (serial fraction {facts['serial_fraction']:.1e})"
            for name, (_, facts) in by_format.items()
        )
        + "\n\n"
    )
    names = list(by_format)
    lines = [
        "| workers | " + " | ".join(f"wall, {n} (speedup)" for n in names) + f" | Amdahl, {names[0]} |",
        "| ---: | " + " | ".join("---:" for _ in names) + " | ---: |",
    ]
    for i, n in enumerate(s_workers(by_format)):
        walls = [by_format[name][0][i] for name in names]
        cells = " | ".join(f"{_hms(p.wall_s)} ({p.speedup:,.0f}x)" for p in walls)
        lines.append(f"| {n} | {cells} | {_hms(walls[0].amdahl_s)} |")
    return head + "\n".join(lines) + "\n"


def s_workers(by_format: dict[str, tuple[list[Projection], dict]]) -> list[int]:
    return [p.workers for p in next(iter(by_format.values()))[0]]


def _hms(seconds: float) -> str:
    h, rest = divmod(int(round(seconds)), 3600)
    return f"{h} h {rest // 60:02d} min" if h else f"{rest // 60} min {rest % 60:02d} s"


def cohort(args: argparse.Namespace) -> str:
    """The BCF to time: the one given, or bench.py's 10,000-sample cohort (msprime seed 1,
    5 Mb, GT only), made once and kept in ``--workdir`` (default: the temporary folder's
    ``vcfvirtual-scale``)."""
    if args.bcf:
        return os.path.abspath(args.bcf)
    sys.path.insert(0, str(HERE))
    from bench import make_cohort

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir()) / "vcfvirtual-scale"
    workdir.mkdir(parents=True, exist_ok=True)
    return str(make_cohort(workdir, 10_000, 5e6, False, 1))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", choices=("refs", "model", "all"), help="references' size, the projection, or both")
    p.add_argument("bcf", nargs="?", help="BCF whose phases are timed (default: bench.py's 10,000-sample cohort)")
    p.add_argument("--variants", type=float, default=1e6, help="variants of the synthetic store (1e6)")
    p.add_argument("--samples", type=float, default=5e5, help="samples of the synthetic store and projection (5e5)")
    p.add_argument("--chunk-length", type=int, default=1_000, help="variants per chunk (bio2zarr's 1,000)")
    p.add_argument("--samples-chunk-size", type=int, default=10_000, help="samples per block (bio2zarr's 10,000)")
    p.add_argument("--parts", type=int, default=1_000, help="parts the store's chunks are spread over (1,000)")
    p.add_argument(
        "--formats", default="json,parquet,icechunk", type=lambda v: v.split(","), help="references formats written"
    )
    p.add_argument("--tasks", type=int, default=4, help="partitions / runs the cohort is cut into to time (4)")
    p.add_argument("--bcf-tb", type=float, default=1.0, help="compressed BCF projected, TB (1)")
    p.add_argument("--task-gb", type=float, default=1.0, help="compressed BCF per task at scale, GB (1)")
    p.add_argument(
        "--workers", default="8,64,256", type=lambda v: [int(x) for x in v.split(",")], help="workers projected"
    )
    p.add_argument("--workdir", help="where files are written (default: a temporary folder)")
    p.add_argument("--output", help="also write the markdown tables here")
    p.add_argument("--json", help="also write every number here")
    return p.parse_args(argv)


@dataclass
class Known:
    """What the references' run measured, for the projection; without one, estimates."""

    refs_s_per_chunk: dict[str, float] = dataclasses.field(default_factory=lambda: {"json": 3e-5})
    refs_files: dict[str, int] = dataclasses.field(default_factory=dict)
    per_chunk: int = 0  # chunk references per variants chunk
    header_bytes: int = 0  # the header pickled
    header_parse_s: float = 0.0


def known_from(rows: list[RefsRow], facts: dict) -> Known:
    """Per format: building the group and writing its references, per chunk reference."""
    per = {r.refs_format: (facts["build_group_s"] + r.write_s) / facts["chunk_refs"] for r in rows if r.parts == 1}
    return Known(
        refs_s_per_chunk=per,
        refs_files={f"{r.refs_format} ({r.parts:,} parts)": r.files for r in rows},
        per_chunk=facts["chunk_refs"] // facts["variant_chunks"],
        header_bytes=facts["header_pickle_bytes"],
        header_parse_s=facts["header_parse_s"],
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("ICECHUNK_LOG", "error")  # as the command line does: its warnings are not ours
    workdir = Path(tempfile.mkdtemp(prefix="scale-", dir=args.workdir))
    text, record = [f"load {os.getloadavg()[0]:.2f} at the start\n"], {}
    known = Known()
    try:
        if args.what in ("refs", "all"):
            refs_rows, facts = refs_table(args, workdir)
            text.append(refs_markdown(refs_rows, facts))
            record["refs"] = dict(facts=facts, rows=[dataclasses.asdict(r) for r in refs_rows])
            known = known_from(refs_rows, facts)
        if args.what in ("model", "all"):
            text.append(model_section(args, workdir, record, known))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text.append(f"load {os.getloadavg()[0]:.2f} at the end\n")
    out = "\n".join(text)
    print(out)
    if args.output:
        Path(args.output).write_text(out)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1, default=str))


def model_section(args: argparse.Namespace, workdir: Path, record: dict, known: Known) -> str:
    """Measure the phases on the cohort, then project the scenario."""
    from vcfvirtual.scan.scanner import read_header

    bcf = cohort(args)
    costs, raw = measure_costs(bcf, args.tasks, workdir)
    samples = int(args.samples)
    blocks = -(-samples // args.samples_chunk_size)
    # Without a refs run: the synthetic store's arrays (13 variants arrays, 6 call arrays),
    # and the cohort's header scaled to the samples (sample names are most of it).
    t0 = time.perf_counter()
    read_header(bcf)
    parse_s = known.header_parse_s or (time.perf_counter() - t0) * samples / costs.samples
    scenario = Scenario(
        bcf_bytes=int(args.bcf_tb * TB),
        samples=samples,
        task_bytes=int(args.task_gb * 1e9),
        get_bytes=(8 * MIB, 64 * MIB),
        multipart_bytes=64 * MIB,
        refs_per_variant_chunk=known.per_chunk or 13 + 6 * blocks,
        header_bytes=known.header_bytes or costs.header_bytes * samples // costs.samples,
        header_parse_s=parse_s,
        chunk_length=args.chunk_length,
    )
    by_format = {
        name: project(costs, scenario, args.workers, per_chunk) for name, per_chunk in known.refs_s_per_chunk.items()
    }
    record["model"] = dict(
        costs=dataclasses.asdict(costs),
        raw=raw,
        scenario=dataclasses.asdict(scenario),
        projection={
            name: dict(rows=[dataclasses.asdict(r) for r in rows], facts=facts)
            for name, (rows, facts) in by_format.items()
        },
    )
    facts = next(iter(by_format.values()))[1]
    req = requests(costs, scenario, facts["tasks"], known.refs_files, (max(args.workers), facts["task1_s"]))
    req_md = "| requests | count |\n| --- | ---: |\n" + "\n".join(f"| {a} | {b} |" for a, b in req) + "\n"
    return "\n".join([costs_markdown(costs, raw), projection_markdown(by_format, scenario), req_md])


if __name__ == "__main__":
    main()
