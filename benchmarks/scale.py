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
is a folder of one sparse part of that size whose first bytes are the real cache header, so
``open_store``'s checks run as on a real store. Each format is written through
``vcfvirtual.refs.write`` and opened with ``open_store`` then ``xarray.open_zarr``; the same
group with its chunks spread over parts (``part-NNNNNN`` files, one per run of variants
chunks, as the parallel writer writes them) is written again for the sizes.

``model`` times the partitioned columns writer's two phases with today's product code on a BCF
(default: a 10,000-sample msprime cohort from ``bench.py``'s ``make_cohort``), every task run
in this process one after another, as a worker would run it. Phase 1: ``plan_partitions`` (from
the CSI index when there is one), ``scan_all(..., facts="counts")`` per partition, what each
result pickles to, then the caller's ``count_merge``. Phase 2: ``plan_runs`` (one run per
partition a chunk starts in), then ``write_run`` per task: its CPU, the bytes it reads and
writes, the records it reads past (the run before's, ``skip``; and after its last, to the end
of the scan batch that raised ``RunComplete``: counted by wrapping the product's ``PartSink``),
then the caller's ``join_runs``. Each phase runs as 1 task and as ``--tasks``: the difference
is the per-task cost. The caller's own steps are then timed again at the projected size on
stand-ins of what the tasks return (``count_merge`` of the cohort's results repeated,
``plan_runs`` over as many counted partitions, each run's segment ranges laid out as in
``refs``, received and joined), with what the caller then holds. From these it projects the
wall time of a 1 TB BCF on 8, 64 and 256 workers, the partitions planned as
``write_cache_partitioned`` plans them (two per worker). Timers are Python's
(``time.perf_counter``, ``time.process_time``, which counts every thread of this process).
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
    """The store's arrays through the product's builder, over a sparse cache."""
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
    from vcfvirtual.manifests.virtual import ChunkTable, VirtualArray, VirtualGroup

    n_chunks = synthetic.chunk_starts.shape[0]
    run_of_chunk = np.arange(n_chunks) * n_parts // n_chunks
    part_start = synthetic.chunk_starts[np.searchsorted(run_of_chunk, run_of_chunk, side="left")]
    names = np.array([f"{cache_url}/part-{p:06d}" for p in range(n_parts)], dtype=np.dtypes.StringDType())
    arrays = {}
    for name, array in group.arrays.items():
        table = array.table
        if table is None or not table.paths.size:  # inlined values: no cache range
            arrays[name] = array
            continue
        # The variants chunk of every grid cell (the grid's first axis), broadcast over the rest.
        k = np.arange(table.paths.shape[0]).reshape(-1, *[1] * (table.paths.ndim - 1))
        present = table.paths != ""
        starts = np.broadcast_to(part_start[k].astype(np.uint64), table.paths.shape)
        paths = np.where(present, np.broadcast_to(names[run_of_chunk[k]], table.paths.shape), "")
        offsets = np.where(present, table.offsets - starts, np.uint64(0))
        arrays[name] = VirtualArray(array.metadata, ChunkTable(paths.astype(names.dtype), offsets, table.lengths))
    return VirtualGroup(arrays, dict(group.attributes))


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
    n_refs = sum(1 for a in group.arrays.values() for _ in a.chunk_entries())
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


def best_cpu(fn, repeat: int = 3) -> float:
    """The least CPU seconds of ``repeat`` calls of ``fn()`` (the caller's small steps)."""
    best = math.inf
    for _ in range(repeat):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def bytes_read() -> int:
    """Bytes this process has read so far through read calls (Linux's /proc/self/io
    ``rchar``): a task's reads of the BCF, as an object store would serve them."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def phase1(bcf: str, n_partitions: int, chunk_length: int) -> tuple[Merged, list, dict]:
    """The first phase as the product runs it (``scan_all`` counting, then
    ``count_merge``), each partition scanned apart in this process as a worker would, and
    what each result pickles to (what a worker sends back)."""
    from vcfvirtual.scan import parallel, partition

    t: dict = {}
    with cpu_timer(t, "plan"):
        cut = (lambda p: partition.plan_partitions(p, n_partitions)) if n_partitions > 1 else None
        parts = parallel.split_files([bcf], cut)
    scanned, task_cpu = [], []
    for p in parts:
        c0 = time.process_time()
        scanned += parallel.scan_all([p], parallel.InlineExecutor(), None, progress=False, facts="counts")
        task_cpu.append(time.process_time() - c0)
    shipped = [pickle.dumps(s[1], protocol=5) for s in scanned]
    with cpu_timer(t, "gather"):
        for blob in shipped:
            pickle.loads(blob)
    with cpu_timer(t, "merge"):
        merged = parallel.count_merge(scanned, chunk_length)
    t.update(partitions=len(parts), scan_cpu=sum(task_cpu), task_cpu=task_cpu, result_bytes=list(map(len, shipped)))
    return merged, scanned, t


class CountingSink:
    """Wraps the product's ``PartSink`` (``columns_parts.PartSink``, which ``write_run``
    makes) to count what a task reads beyond its own records: the records it passes
    (``skip``), those it reads after its last one up to ``RunComplete``, and the inflated
    bytes it is fed against those of its own records."""

    made: list[CountingSink] = []
    product: type | None = None  # the PartSink it stands in for

    def __init__(self, writer, skip: int, n_records: int):
        assert CountingSink.product is not None
        self.sink = CountingSink.product(writer, skip, n_records)
        self.skip, self.n_records = skip, n_records
        self.seen = self.fed = self.last = 0
        self.kept_from: int | None = None
        self.end: int | None = None  # where RunComplete said its last record ends
        CountingSink.made.append(self)

    @property
    def shift(self) -> int:
        return self.sink.shift

    @shift.setter
    def shift(self, value: int) -> None:
        self.sink.shift = value

    def header_parsed(self, header, chunk_length: int) -> None:
        self.sink.header_parsed(header, chunk_length)

    def add_block(self, raw, data) -> None:
        self.fed += len(data)
        self.sink.add_block(raw, data)

    def records_scanned(self, offsets: np.ndarray) -> None:
        from vcfvirtual.cache.columns_parts import RunComplete

        if self.kept_from is None and offsets.shape[0] > self.sink.skip:
            self.kept_from = int(offsets[self.sink.skip]) + self.sink.shift
        self.seen += offsets.shape[0]
        try:
            self.sink.records_scanned(offsets)
        except RunComplete as done:
            self.end = done.end
            raise

    def scanned_to(self, stream_offset: int) -> None:
        self.last = max(self.last, stream_offset + self.sink.shift)
        self.sink.scanned_to(stream_offset)

    def read_past(self) -> tuple[int, int, int]:
        """(records, inflated bytes before its first record, inflated bytes after its last)
        read that are not the run's own. The scan hands records over a batch at a time
        (``SCAN_BATCH`` inflated bytes), so a run reads on to its last record's batch end."""
        own_records = self.n_records - self.sink.left  # left: 0 once complete
        before = self.kept_from or 0  # the run's offsets count from its first byte read
        after = self.fed - (self.end if self.end is not None else self.last)
        return self.seen - own_records, before, after


@dataclass(frozen=True)
class TaskRow:
    """One phase 2 task (``write_run``) as measured."""

    records: int
    chunks: int
    skip: int  # records of the run before, passed
    overshoot: int  # records read after its last, up to RunComplete
    skip_bytes: int  # inflated bytes read before its first record
    overshoot_bytes: int  # inflated bytes read after its last record
    inflated: int  # inflated bytes fed to it
    read: int  # bytes read from files (the BCF, its header twice)
    written: int  # its part
    returned: int  # its RunResult, pickled
    cpu: float
    wall: float


def phase2(merged: Merged, workdir: Path) -> tuple[list[TaskRow], dict]:
    """The second phase as the product runs it: ``plan_runs``, then ``write_run`` per
    task (here one after another, each with one compression thread as in a worker),
    then the caller's ``join_runs``."""
    from vcfvirtual.cache import columns, columns_parts

    layout = columns.ColumnsLayout()
    t: dict = {}
    with cpu_timer(t, "plan_runs"):
        tasks = columns_parts.plan_runs(merged)
    folder = workdir / "parts"
    folder.mkdir()
    rows, results = [], []
    CountingSink.product, columns_parts.PartSink = columns_parts.PartSink, CountingSink
    try:
        for task in tasks:
            r0, c0, w0 = bytes_read(), time.process_time(), time.perf_counter()
            result = columns.write_run(task, str(folder), merged.scan.chunk_length, layout)
            cpu, wall, read = time.process_time() - c0, time.perf_counter() - w0, bytes_read() - r0
            sink = CountingSink.made.pop()
            past_records, before, after = sink.read_past()
            rows.append(
                TaskRow(
                    task.n_records,
                    task.n_chunks,
                    task.skip,
                    past_records - task.skip,
                    before,
                    after,
                    sink.fed,
                    read,
                    (folder / task.part).stat().st_size,
                    len(pickle.dumps(result, protocol=5)),
                    cpu,
                    wall,
                )
            )
            results.append(result)
    finally:
        columns_parts.PartSink = CountingSink.product
        columns.release_spare_buffers()
        shutil.rmtree(folder)
    t["join_cpu"] = best_cpu(lambda: columns_parts.join_runs(results))
    t["ranges"] = sum(r.lengths.size for r in columns_parts.join_runs(results).segments.values())
    return rows, t


@dataclass(frozen=True)
class Costs:
    """What the projection takes from the cohort, per compressed MB of BCF unless named."""

    bcf_mb: float
    records: int
    samples: int
    inflated_per_mb: float  # inflated bytes per compressed byte
    scan_s_per_mb: float  # phase 1 task CPU (inflate + count)
    scan_task_s: float  # phase 1 fixed CPU per task
    write_s_per_mb: float  # phase 2 task CPU (inflate + demux + compress + write)
    write_task_s: float  # phase 2 fixed CPU per task
    plan_s_per_cut: float  # caller: cutting the file (from its CSI index, when it has one)
    gather_s_per_mb: float  # caller: unpickling phase 1's results
    result_bytes: float  # a phase 1 result pickled, a partition after the file's first
    header_bytes: int  # the first partition's result carries the parsed header too
    cache_per_bcf: float


def fit(one: float, many: float, tasks: int, extra: float = 0.0) -> tuple[float, float]:
    """(variable, fixed per task) CPU from the same work done as 1 task and as ``tasks``,
    ``extra`` CPU of the ``tasks`` run being work the one task did not do (read past)."""
    if tasks < 2:  # a file too small to cut (4 MiB a partition at least): no per-task cost seen
        return one, 0.0
    return one, max(0.0, (many - one - extra) / (tasks - 1))


def measure_costs(bcf: str, n_tasks: int, chunk_length: int, workdir: Path) -> tuple[Costs, dict]:
    """Each phase run as 1 task and as ``n_tasks`` (the difference is the per-task cost),
    after a first run of each that loads the compiled kernels."""
    merged, _, _ = phase1(bcf, 1, chunk_length)  # loads the scan kernels
    phase2(merged, workdir)  # loads the demux kernels
    merged1, _, one = phase1(bcf, 1, chunk_length)
    merged, scanned, many = phase1(bcf, n_tasks, chunk_length)
    rows1, p2_one = phase2(merged1, workdir)
    rows, p2_many = phase2(merged, workdir)
    bcf_mb = os.path.getsize(bcf) / MB
    inflated_per_mb = rows1[0].inflated / (bcf_mb * MB)
    scan_var, scan_fixed = fit(one["scan_cpu"], many["scan_cpu"], many["partitions"])
    past = sum(r.skip_bytes + r.overshoot_bytes for r in rows)
    past_cpu = scan_var / bcf_mb * past / inflated_per_mb / MB
    write_var, write_fixed = fit(rows1[0].cpu, sum(r.cpu for r in rows), len(rows), past_cpu)
    costs = Costs(
        bcf_mb=bcf_mb,
        records=merged.scan.num_records,
        samples=len(merged.scan.header.samples),
        inflated_per_mb=inflated_per_mb,
        scan_s_per_mb=scan_var / bcf_mb,
        scan_task_s=scan_fixed,
        write_s_per_mb=write_var / bcf_mb,
        write_task_s=write_fixed,
        plan_s_per_cut=many["plan_cpu"] / max(1, many["partitions"] - 1),
        gather_s_per_mb=many["gather_cpu"] / (sum(many["result_bytes"]) / MB),
        result_bytes=float(np.mean(many["result_bytes"][1:] or many["result_bytes"])),
        header_bytes=many["result_bytes"][0],
        cache_per_bcf=sum(r.written for r in rows) / (bcf_mb * MB),
    )
    raw = dict(phase1_one=one, phase1_many=many, phase2_one=p2_one, phase2_many=p2_many)
    raw["tasks_one"] = [dataclasses.asdict(r) for r in rows1]
    raw["tasks_many"] = [dataclasses.asdict(r) for r in rows]
    return costs, dict(raw=raw, scanned=scanned, merged=merged, tasks=rows)


# ---------------------------------------------------------------------------- the caller at scale


def caller_at_scale(merged: Merged, scanned: list, ranges: SegmentRanges, records: int, partitions: int) -> dict:
    """The caller's own steps timed at the projected size, on stand-ins of what the tasks
    return: ``count_merge`` of ``partitions`` results (the cohort's, repeated),
    ``plan_runs`` over ``partitions`` counted partitions of ``records`` records, and
    receiving and joining one RunResult per run, their segment ranges laid out as the
    columns writer lays them (``ranges``: ``synthetic_ranges``). What it then holds."""
    from vcfvirtual.cache.base import ChunkRanges, SegmentRanges
    from vcfvirtual.cache.columns_parts import RunResult, join_runs, plan_runs
    from vcfvirtual.io.fingerprint import Fingerprint
    from vcfvirtual.scan import parallel
    from vcfvirtual.scan.results import RecordCounts, RunFacts

    later = [s for s in scanned if s[0].start is not None] or scanned
    repeated = [scanned[0], *(later[i % len(later)] for i in range(partitions - 1))]
    chunk_length = merged.scan.chunk_length
    merge_s = best_cpu(lambda: parallel.count_merge(repeated, chunk_length))
    first = merged.partitions[0]
    counted = [
        dataclasses.replace(first, first_index=i * records // partitions, n_records=records // partitions)
        for i in range(partitions)
    ]
    big = dataclasses.replace(merged, scan=dataclasses.replace(merged.scan, num_records=records), partitions=counted)
    tasks = []
    plan_runs_s = best_cpu(lambda: tasks.extend(plan_runs(big)), repeat=1)
    results = []
    for task in tasks:  # each run's ranges, from its own part's start
        lo, hi = task.first_chunk, task.first_chunk + task.n_chunks
        segs = {
            n: ChunkRanges(r.offsets[lo:hi] - r.offsets[lo].min(), r.lengths[lo:hi].copy())
            for n, r in ranges.segments.items()
        }
        part = SegmentRanges(
            segs, ranges.compressors, ranges.samples_chunk_size, (task.part,), np.zeros(hi - lo, np.int32)
        )
        rows = np.zeros((hi - lo, 6), np.int64)
        stats = merged.scan.info_stats
        facts = RunFacts(rows, RecordCounts(task.n_records, (1, 2), (1, 1), 2, 2), stats, stats)
        results.append(RunResult(task.part, part, Fingerprint(size=1, mtime_ns=0, digest="0" * 32), facts))
    shipped = [pickle.dumps(r, protocol=5) for r in results]
    gather_s = best_cpu(lambda: [pickle.loads(b) for b in shipped], repeat=1)
    join_s = best_cpu(lambda: join_runs(results), repeat=1)
    joined = join_runs(results)
    held = sum(r.offsets.nbytes + r.lengths.nbytes for r in joined.segments.values())
    assert joined.facts is not None
    held += joined.chunk_part.nbytes + joined.facts.region_rows.nbytes
    return dict(
        merge_s=merge_s,
        plan_runs_s=plan_runs_s,
        receive2_s=gather_s,
        join_s=join_s,
        received2_bytes=sum(map(len, shipped)),
        ranges=sum(r.lengths.size for r in joined.segments.values()),
        ranges_bytes=held,
        partition_bytes=len(pickle.dumps(counted, protocol=5)),
        runs=len(tasks),
    )


# ---------------------------------------------------------------------------- projection


@dataclass(frozen=True)
class Scenario:
    """The run projected: a BCF of ``bcf_bytes`` compressed with ``samples`` samples."""

    bcf_bytes: int
    samples: int
    task_bytes: int  # compressed BCF per partition; 0: as the product plans (2 per worker)
    refs_per_variant_chunk: int  # chunk references per variants chunk at ``samples``
    header_bytes: int  # a parsed header (pickled) at ``samples``: the first partition returns it
    header_parse_s: float  # a task's parse of the header at ``samples`` (each task of each phase)
    chunk_length: int = 1_000
    samples_chunk_size: int = 10_000


@dataclass(frozen=True)
class Projection:
    workers: int
    partitions: int  # phase 1 tasks; phase 2 has one run per partition
    task_mb: float
    task1_s: float
    task2_s: float
    past_mb: float  # compressed MB a phase 2 task reads past (half a chunk, plus the overshoot)
    serial: dict  # the caller's steps, s
    refs_s: dict  # per references format: building the group and writing them, s
    received_mb: float  # both phases' results
    memory_mb: float  # the caller's partitions, run results and joined ranges
    wall_s: dict  # per references format: serial + waves x (task1 + task2)


def project(c: Costs, s: Scenario, n: int, m: dict, refs_s_per_chunk: dict[str, float]) -> Projection:
    """The scenario on ``n`` workers, from the cohort's costs ``c`` and the caller's steps
    ``m`` timed at this partition count (:func:`caller_at_scale`)."""
    mb = s.bcf_bytes / MB
    # Records scale with bytes: a record's compressed size grows with the samples (GT-only data).
    record_mb = c.bcf_mb / c.records * s.samples / c.samples
    records = mb / record_mb
    partitions = m["runs"]
    task_mb = mb / partitions
    # A run starts at its partition's start and passes the run before's records there
    # (on average half a chunk), and reads on to its last record's scan batch end (on
    # average half a batch of inflated bytes): read (inflated and counted), not written.
    from vcfvirtual.scan.scanner import SCAN_BATCH

    past_mb = s.chunk_length / 2 * record_mb + SCAN_BATCH / 2 / c.inflated_per_mb / MB
    t1 = c.scan_task_s + s.header_parse_s + c.scan_s_per_mb * task_mb
    t2 = c.write_task_s + s.header_parse_s + c.write_s_per_mb * task_mb + c.scan_s_per_mb * past_mb
    received1 = c.result_bytes * (partitions - 1) + s.header_bytes
    serial = dict(
        plan=c.plan_s_per_cut * (partitions - 1),
        receive1=received1 / MB * c.gather_s_per_mb,
        merge=m["merge_s"],
        plan_runs=m["plan_runs_s"],
        receive2=m["receive2_s"],
        join=m["join_s"],
    )
    chunk_refs = math.ceil(records / s.chunk_length) * s.refs_per_variant_chunk
    refs_s = {name: per * chunk_refs for name, per in refs_s_per_chunk.items()}
    waves = math.ceil(partitions / n)
    wall = {name: sum(serial.values()) + r + waves * (t1 + t2) for name, r in refs_s.items()}
    memory = m["partition_bytes"] + 2 * m["ranges_bytes"]  # the results, then joined
    return Projection(
        n,
        partitions,
        task_mb,
        t1,
        t2,
        past_mb,
        serial,
        refs_s,
        (received1 + m["received2_bytes"]) / MB,
        memory / MB,
        wall,
    )


# ---------------------------------------------------------------------------- output


def costs_markdown(c: Costs, raw: dict) -> str:
    one, many = raw["phase1_one"], raw["phase1_many"]
    lines = ["| measured (one process) | value |", "| --- | ---: |"]
    lines += [
        f"| BCF | {c.bcf_mb:.1f} MB, {c.records:,} records, {c.samples:,} samples, {c.inflated_per_mb:.1f}x inflated |",
        f'| phase 1 (scan_all, facts="counts") CPU per compressed MB | {1000 * c.scan_s_per_mb:.1f} ms |',
        f"| phase 1 fixed CPU per task | {1000 * c.scan_task_s:.0f} ms |",
        f"| phase 1 result pickled: first partition (its header) / each other | {c.header_bytes / 1e3:.1f} kB"
        f" / {c.result_bytes:.0f} B |",
        "| phase 2 (write_run: inflate + demux + compress + write) CPU per compressed MB | "
        f"{1000 * c.write_s_per_mb:.1f} ms |",
        f"| phase 2 fixed CPU per task | {1000 * c.write_task_s:.0f} ms |",
        f"| caller: plan_partitions, per cut | {1000 * c.plan_s_per_cut:.1f} ms |",
        f"| caller: count_merge of {many['partitions']} results / 1 | {1000 * many['merge_cpu']:.2f} ms"
        f" / {1000 * one['merge_cpu']:.2f} ms |",
        f"| caller: plan_runs / join_runs ({raw['phase2_many']['ranges']:,} ranges) | "
        f"{1000 * raw['phase2_many']['plan_runs_cpu']:.2f} ms / {1000 * raw['phase2_many']['join_cpu']:.2f} ms |",
        f"| caller: unpickling phase 1 results, per MB | {1000 * c.gather_s_per_mb:.2f} ms |",
        f"| cache / BCF | {c.cache_per_bcf:.3f} |",
    ]
    tasks = [
        "| phase 2 task | records | skip: records, inflated MB | overshoot: records, inflated MB | read MB | written MB"
        " | returned kB | CPU s | wall s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, r in enumerate(raw["tasks_one"] + raw["tasks_many"]):
        name = "1 of 1" if i == 0 else f"{i} of {len(raw['tasks_many'])}"
        tasks.append(
            f"| {name} | {r['records']:,} | {r['skip']:,}, {r['skip_bytes'] / MB:.1f} "
            f"| {r['overshoot']:,}, {r['overshoot_bytes'] / MB:.1f} "
            f"| {r['read'] / MB:.1f} | {r['written'] / MB:.1f} | {r['returned'] / 1e3:.1f} "
            f"| {r['cpu']:.2f} | {r['wall']:.2f} |"
        )
    return "\n".join(lines) + "\n\n" + "\n".join(tasks) + "\n"


def projection_markdown(rows: list[Projection], s: Scenario, records: float) -> str:
    """The tasks and the caller per worker count, then the walls per references format."""
    head = (
        f"{s.bcf_bytes / TB:g} TB BCF, {s.samples:,} samples: {records:,.0f} records, "
        f"{math.ceil(records / s.chunk_length):,} variants chunks; each task parses the header "
        f"({s.header_parse_s:.2f} s); a phase 2 task reads past {rows[0].past_mb:.0f} MB of BCF "
        "(half a chunk, half a scan batch)\n\n"
    )
    lines = [
        "| workers | partitions = runs | task GB | phase 1 task s | phase 2 task s | caller s: plan, receive 1, "
        "count_merge, plan_runs, receive 2, join | received MB | caller holds MB |",
        "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for p in rows:
        steps = ", ".join(f"{v:.2f}" for v in p.serial.values())
        lines.append(
            f"| {p.workers} | {p.partitions:,} | {p.task_mb / 1e3:.1f} | {p.task1_s:,.0f} | {p.task2_s:,.0f} "
            f"| {steps} | {p.received_mb:,.1f} | {p.memory_mb:,.0f} |"
        )
    names = list(rows[0].wall_s)
    walls = [
        "| workers | " + " | ".join(f"{n}: references s, serial fraction, wall (speedup)" for n in names) + " |",
        "| ---: | " + " | ".join("---:" for _ in names) + " |",
    ]
    for p in rows:
        cells = []
        for name in names:
            serial = sum(p.serial.values()) + p.refs_s[name]
            cpu = serial + p.partitions * (p.task1_s + p.task2_s)
            cells.append(
                f"{p.refs_s[name]:,.0f} s, {serial / cpu:.1e}, {_hms(p.wall_s[name])} ({cpu / p.wall_s[name]:,.0f}x)"
            )
        walls.append(f"| {p.workers} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n\n" + "\n".join(walls) + "\n"


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
    p.add_argument("--tasks", type=int, default=4, help="partitions (so runs) the cohort is cut into to time (4)")
    p.add_argument("--bcf-tb", type=float, default=1.0, help="compressed BCF projected, TB (1)")
    p.add_argument(
        "--task-gb",
        type=float,
        default=0.0,
        help="compressed BCF per partition at scale, GB (0: two per worker, as planned)",
    )
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


def known_from(rows: list[RefsRow], facts: dict) -> Known:
    """Per format: building the group and writing its references, per chunk reference."""
    per = {r.refs_format: (facts["build_group_s"] + r.write_s) / facts["chunk_refs"] for r in rows if r.parts == 1}
    return Known(
        refs_s_per_chunk=per,
        refs_files={f"{r.refs_format} ({r.parts:,} parts)": r.files for r in rows},
        per_chunk=facts["chunk_refs"] // facts["variant_chunks"],
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
    """Measure the phases on the cohort, time the caller's steps at scale, project."""
    from vcfvirtual.bcf.header import parse_header_text

    bcf = cohort(args)
    costs, got = measure_costs(bcf, args.tasks, args.chunk_length, workdir)
    samples = int(args.samples)
    text = header_text(samples).encode()
    t0 = time.perf_counter()
    header = parse_header_text(text, "synthetic.bcf", len(text) + 9)
    parse_s = time.perf_counter() - t0
    scenario = Scenario(
        bcf_bytes=int(args.bcf_tb * TB),
        samples=samples,
        task_bytes=int(args.task_gb * 1e9),
        # Without a refs run: 13 variants arrays, 6 call arrays a samples block each.
        refs_per_variant_chunk=known.per_chunk or 13 + 6 * -(-samples // args.samples_chunk_size),
        header_bytes=len(pickle.dumps(header, protocol=5)),
        header_parse_s=parse_s,
        chunk_length=args.chunk_length,
        samples_chunk_size=args.samples_chunk_size,
    )
    records = scenario.bcf_bytes / MB / (costs.bcf_mb / costs.records * samples / costs.samples)
    n_chunks = math.ceil(records / scenario.chunk_length)
    ranges = synthetic_ranges(header, n_chunks, scenario.samples_chunk_size, 0).ranges
    rows, steps = [], {}
    for n in args.workers:
        # As write_cache_partitioned plans: two partitions per worker (or tasks of --task-gb).
        partitions = math.ceil(scenario.bcf_bytes / scenario.task_bytes) if scenario.task_bytes else 2 * n
        steps[n] = caller_at_scale(got["merged"], got["scanned"], ranges, int(records), partitions)
        rows.append(project(costs, scenario, n, steps[n], known.refs_s_per_chunk))
    record["model"] = dict(
        costs=dataclasses.asdict(costs),
        raw=got["raw"],
        scenario=dataclasses.asdict(scenario),
        caller_at_scale=steps,
        projection=[dataclasses.asdict(r) for r in rows],
    )
    return "\n".join([costs_markdown(costs, got["raw"]), projection_markdown(rows, scenario, records)])


if __name__ == "__main__":
    main()
