"""Check a store against htslib: decode every array of a vcfvirtual store and compare it
with htslib's reading of the source BCF(s), encoded the way VCF Zarr 0.3 and bio2zarr's
``vcf2zarr convert`` encode it.

The store's variants are cut into tasks of whole chunks, checked in parallel processes
(``workers``) or a random few of them (``sample``). One pass over the sources with pysam
first counts htslib's records and notes the BGZF offset where each task's first record
starts; a task then seeks there and reads its records twice in step, with pysam (the
fixed columns and INFO, one Python call per record) and with htslib's own
``bcf_get_format_values`` called through ctypes on the library pysam bundles (every
FORMAT field and GT of a record as one array, no Python per sample). Records are turned
into expected arrays a block at a time and compared with the store's chunks, decoded
through zarr (the codec, the cache, the references): memory stays at about one task's
chunks of every array plus one block, whatever the store's size.

Where the store follows a documented convention that pysam's raw reading does not
express, the expectation follows the convention (each is noted where it is built);
htslib's arrays are read the way pysam reads them, so the expectations are pysam's:

* a haploid call is phased (docs/design.md, "Limits"; htslib agrees, bio2zarr varies);
* a NaN inside an INFO/FORMAT float vector reads as missing, as bio2zarr stores it
  (docs/design.md, "Values and encodings"); a Number=1 INFO float's NaN stays NaN;
* pysam gives ``None`` for a GT allele index outside ``[0, n_alleles)`` where the store
  keeps the index htslib decoded; either is accepted (tests/README.md, "Oracle
  conventions");
* pysam reads GT only when it is a record's first FORMAT field; such records' genotypes
  are not compared, and the report counts them.

Which arrays are compared, and how each INFO/FORMAT field's expected values are built,
is decided in one place: ``_Checker._builders`` (the array -> field mapping) and
``_Field`` (the values of one field).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import dataclasses
import math
import os
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

# The block decoders of htslib's raw values, compiled ahead of time.
from vcfvirtual_codec._kernels.verify_cells import decode_cells as _decode_cells
from vcfvirtual_codec._kernels.verify_cells import decode_genotypes as _decode_genotypes

from .bcf.fields import FieldChoice, FieldMap, map_fields
from .errors import VcfVirtualError
from .refs.arrays import FIXED_ARRAYS, GENOTYPE_ARRAYS

if TYPE_CHECKING:  # imported where used: verify --help and the workers' start stay light
    import pysam
    import zarr
    from vcfvirtual_codec.spec import ChunkSpec

INT_MISSING, INT_FILL = -1, -2
# One value as pysam gives it (INFO, or one sample's FORMAT): a scalar, a tuple of
# them (None: "."), or None.
Scalar = str | int | float | None
PysamValue = Scalar | tuple[Scalar, ...]
# What verify_store takes as its source BCF(s).
SourceArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None
FLOAT_MISSING_BITS, FLOAT_FILL_BITS = 0x7F800001, 0x7F800002
STR_MISSING, STR_FILL = ".", ""

# A task holds chunks making 1/TASK_SHARE of index's ~64 MiB decoded call_genotype, and
# a block BLOCK_BYTES of raw htslib values: what a process holds beyond one chunk of each
# array (a larger chunk is still read whole).
TASK_SHARE = 4
BLOCK_BYTES = 16 << 20

# Arrays of the fixed VCF columns and of GT (one list: refs.arrays, what open_store expects).
_FIXED = FIXED_ARRAYS
_GENOTYPE = GENOTYPE_ARRAYS
_HEADER = ("contig_id", "contig_length", "filter_id", "filter_description", "sample_id")


@dataclass(frozen=True)
class ArrayDifference:
    """How one array differs from htslib's reading.

    Attributes
    ----------
    name : str
        The array.
    count : int
        Differing values (elements) over the whole array.
    first_variant : int or None
        Variant index of the first difference (None for arrays without a variants
        dimension, whose first differing index is ``first_index``).
    first_sample : int or None
        Sample index of the first difference, for arrays with a samples dimension.
    ours, expected : str
        The store's value and htslib's value there, as text.
    first_index : tuple of int
        Full index of the first differing element.
    """

    name: str
    count: int
    first_variant: int | None
    first_sample: int | None
    ours: str
    expected: str
    first_index: tuple[int, ...] = ()

    def describe(self) -> str:
        where = []
        if self.first_variant is not None:
            where.append(f"variant {self.first_variant}")
        if self.first_sample is not None:
            where.append(f"sample {self.first_sample}")
        if not where:
            where.append(f"index {list(self.first_index)}")
        return (
            f"{self.name}: {self.count} value{'s' if self.count != 1 else ''} differ; first at "
            f"{', '.join(where)}: store {self.ours}, htslib {self.expected}"
        )


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of ``verify_store``.

    Attributes
    ----------
    path : str
        The references verified.
    sources : tuple of str
        The BCF(s) read with pysam, in order.
    num_variants : int
        Records in the store.
    num_records : int
        Records htslib read from the sources.
    arrays_compared : tuple of str
        Every array compared.
    differences : tuple of ArrayDifference
        Arrays with at least one differing value, in store order.
    not_compared : tuple of str
        Arrays of the store with no htslib counterpart (none in a store ``vcfvirtual
        index`` writes).
    notes : tuple of str
        What was not compared and why (e.g. genotypes of records whose GT is not the
        first FORMAT field).
    sampled : tuple of int, optional
        The variants chunks a ``sample=`` check compared (indices, ascending); None when
        every chunk was compared.
    n_chunks : int
        Variants chunks in the store.
    missing : tuple of str
        Arrays of INFO/FORMAT fields the source's header declares that the store lacks,
        though they were not left out on request: each is a failure.
    omitted : tuple of str
        ``CATEGORY/ID`` of the fields left out on request when the store was indexed
        (``fields=``/``exclude_fields=``), as the store records them: not compared, not failures.
    """

    path: str
    sources: tuple[str, ...]
    num_variants: int
    num_records: int
    arrays_compared: tuple[str, ...]
    differences: tuple[ArrayDifference, ...]
    not_compared: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    sampled: tuple[int, ...] | None = None
    n_chunks: int = 0
    missing: tuple[str, ...] = ()
    omitted: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every array equals htslib's reading, none is missing and the record
        counts agree."""
        return not self.differences and not self.missing and self.num_records == self.num_variants

    def summary(self) -> str:
        """One line: equal, or how many arrays differ."""
        head = (
            f"{self.path}: {self.num_variants} records, {len(self.arrays_compared)} arrays compared with "
            f"htslib's reading of {', '.join(self.sources) or 'no source'}"
        )
        if self.sampled is not None:
            head += f" ({len(self.sampled)} of {self.n_chunks} chunks, chosen at random)"
        if self.omitted:
            head += f" ({len(self.omitted)} field{'s' if len(self.omitted) != 1 else ''} omitted on request)"
        if self.ok:
            return head + ": all equal"
        problems = []
        if self.num_records != self.num_variants:
            problems.append(f"htslib reads {self.num_records} records, the store holds {self.num_variants}")
        if self.differences:
            problems.append(
                f"{len(self.differences)} array{'s' if len(self.differences) != 1 else ''} differ ("
                + ", ".join(d.name for d in self.differences)
                + ")"
            )
        if self.missing:
            problems.append(
                f"{len(self.missing)} array{'s' if len(self.missing) != 1 else ''} of header fields missing ("
                + ", ".join(self.missing)
                + ")"
            )
        return head + ": " + "; ".join(problems)


def verify_store(
    refs: str | os.PathLike[str],
    *,
    source: SourceArg = None,
    progress: bool | None = None,
    check: bool = True,
    storage_options: dict[str, Any] | None = None,
    workers: int = 1,
    sample: int | None = None,
    seed: int | None = None,
) -> VerifyReport:
    """Decode every array of the store at ``refs`` and compare it with htslib's reading
    of its source BCF(s).

    Parameters
    ----------
    refs : str or os.PathLike
        Kerchunk JSON, Kerchunk Parquet directory or Icechunk repository written by
        ``vcfvirtual index``.
    source : str, os.PathLike or sequence of them, optional
        The BCF(s) (or VCFs) to compare with, in the store's order. Default: the sources
        recorded in the references (``vcfvirtual.sources[*].path``).
    progress : bool, optional
        Show a progress bar over records; by default only when stderr is a terminal.
    check : bool, default True
        Check the cache's fingerprints first, as ``open_store`` does (a changed cache
        raises ``StaleCacheError``). ``check=False`` decodes it anyway, to see which
        values changed.
    storage_options : dict, optional
        fsspec options for references or a cache given as a URL.
    workers : int, default 1
        Processes that check chunks in parallel (1: this process).
    sample : int, optional
        Check only this many variants chunks, chosen at random (a quick check); the
        record count and the header arrays are still checked whole. Default: every chunk.
    seed : int, optional
        Seed of the random choice of ``sample`` chunks, to repeat a check.

    Returns
    -------
    VerifyReport
        Per array, the count of differing values and the first one; ``report.ok``.

    Raises
    ------
    StaleCacheError
        With ``check=True``, when the cache (or a reachable source) changed since
        indexing.
    VcfVirtualError
        When the references, a source, or a chunk cannot be read (``ChunkDecodeError``).
    """
    from .inspect import open_group

    path = os.fspath(refs)
    _, group, info = open_group(path, check=check, storage_options=storage_options)
    sources = _source_paths(path, info, source)
    arrays = dict(group.arrays())
    if "variant_position" not in arrays:
        raise VcfVirtualError(path, "the store has no variant_position array to compare records by")
    if sample is not None and sample < 1:
        raise VcfVirtualError(path, f"sample={sample}: check at least one chunk")
    setup = _Setup(path, storage_options, tuple(sources), (info.get("cache") or {}).get("url"), info.get("fields"))
    checker = _Checker(setup, arrays)
    try:
        return _Verifier(checker, progress, max(1, int(workers)), sample, seed).run()
    finally:
        checker.close()


@dataclass(frozen=True)
class _Setup:
    """What a worker process needs to open the store and the sources itself."""

    path: str
    storage_options: dict[str, Any] | None
    sources: tuple[str, ...]
    cache_url: str | None
    fields: Any = None  # the store's vcfvirtual.fields attribute: renamed and omitted fields


@dataclass(frozen=True)
class _Task:
    """Variants ``[start, stop)`` (whole chunks), whose first record htslib reads from
    source ``source`` at BGZF virtual offset ``offset`` (None: the source is not BGZF
    and is read from its start)."""

    start: int
    stop: int
    source: int
    offset: int | None
    record_in_source: int


@dataclass
class _TaskResult:
    start: int
    records: int
    found: dict
    region_rows: np.ndarray
    skipped_gt: int


class _Verifier:
    """Plans the tasks, runs them (here or in worker processes) and folds their results
    into one report."""

    def __init__(
        self, checker: _Checker, progress: bool | None, workers: int, sample: int | None, seed: int | None
    ) -> None:
        self.checker = checker
        self.progress = progress
        self.workers = workers
        self.sample = sample
        self.seed = seed

    def run(self) -> VerifyReport:
        c = self.checker
        spans = self._spans()
        located = _Located(c.setup.sources, spans)
        if self.workers == 1 and self.sample is None:
            # One process reading every chunk in order reads the sources straight on:
            # no pass to find where tasks start.
            results = self._run_tasks(iter([_Task(s, e, 0, None, 0) for s, e in spans]), 1, len(spans))
            n_read = sum(r.records for r in results) + c.cursor.count_rest()
        else:
            workers = self.workers if located.seekable else 1
            results = self._run_tasks(located.tasks(), workers, len(spans))
            n_read = located.records
        found: dict[str, _Found] = {}
        skipped = 0
        rows = []
        for result in sorted(results, key=lambda r: r.start):
            skipped += result.skipped_gt
            rows.append(result.region_rows)
            for name, f in result.found.items():
                if name in found:
                    found[name].count += f.count
                else:
                    found[name] = f
        chunks = None if self.sample is None else {start // c.chunk for start, _ in spans}
        c.compare_header_arrays(found, rows, chunks)
        report = c.report(found, n_read, skipped)
        return dataclasses.replace(
            report, sampled=None if chunks is None else tuple(sorted(chunks)), n_chunks=-(-c.n_variants // c.chunk)
        )

    def _spans(self) -> list[tuple[int, int]]:
        """[start, stop) of each task: runs of whole chunks, or the sampled chunks."""
        c = self.checker
        n, chunk = c.n_variants, c.chunk
        n_chunks = -(-n // chunk)
        if self.sample is not None:
            picked = sorted(random.Random(self.seed).sample(range(n_chunks), min(self.sample, n_chunks)))
            return [(i * chunk, min((i + 1) * chunk, n)) for i in picked]
        # Enough tasks to keep every worker busy, no more chunks per task than make a
        # decoded call_genotype of ~64 MiB (so stores of small chunks are not read one
        # small chunk per zarr call).
        per_task = max(1, min(c.window_chunks(), -(-n_chunks // (4 * self.workers))))
        step = per_task * chunk
        return [(s, min(s + step, n)) for s in range(0, n, step)]

    def _run_tasks(self, tasks: Iterator[_Task], workers: int, n_tasks: int) -> list[_TaskResult]:
        """Runs the tasks as they come (the pass that locates them hands each one over as
        soon as it finds its start, so workers begin at once)."""
        from tqdm.auto import tqdm

        from .scan.parallel import executor_for

        workers = max(1, min(workers, n_tasks))
        bar = tqdm(
            total=self.checker.n_variants,
            unit=" records",
            desc="verify",
            disable=None if self.progress is None else not self.progress,
        )
        results = []
        with bar, executor_for(workers) as pool:
            futures = []
            for task in tasks:
                if workers == 1:
                    futures.append(pool.submit(self.checker.check, task))
                else:
                    futures.append(pool.submit(_check_in_worker, self.checker.setup, task))
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                bar.update(result.records)
                results.append(result)
        return results


class _Located:
    """One pass over the sources with pysam: htslib's record count (``records``, once
    ``tasks()`` is exhausted), and where each span's first record starts."""

    def __init__(self, sources: tuple[str, ...], spans: list[tuple[int, int]]) -> None:
        self.sources = sources
        self.spans = spans
        self.records = 0
        self.seekable = True
        for path in sources:
            reader = _open_source(path)
            self.seekable &= reader.compression == "BGZF"
            reader.close()

    def tasks(self) -> Iterator[_Task]:
        wanted = dict(self.spans)
        r = 0
        pending: _Task | None = None  # found at the end of a file: the next file may start it
        for si, path in enumerate(self.sources):
            reader = _open_source(path)
            try:
                first = r
                records = iter(reader)
                while True:
                    if r in wanted:
                        if pending is not None and pending.start != r:
                            yield pending
                        pending = None
                        if self.seekable:
                            pending = _Task(r, wanted[r], si, reader.tell(), r - first)
                        else:
                            pending = _Task(r, wanted[r], si, None, r - first)
                    try:
                        next(records)
                    except StopIteration:
                        break
                    except (OSError, ValueError) as e:
                        raise VcfVirtualError(path, f"htslib cannot read a record: {e}") from None
                    if pending is not None and pending.start == r:
                        yield pending
                        pending = None
                    r += 1
            finally:
                reader.close()
        # A span starting past htslib's last record has no records to compare: the
        # record count tells that the store holds more.
        self.records = r


# A worker process opens the store and the sources once, for all its tasks.
_WORKER: tuple[int, _Setup, _Checker] | None = None


def _check_in_worker(setup: _Setup, task: _Task) -> _TaskResult:
    global _WORKER
    from .inspect import open_group

    if _WORKER is None or _WORKER[0] != os.getpid() or _WORKER[1] != setup:
        # check=False: the process that started this one checked the fingerprints.
        _, group, _ = open_group(setup.path, check=False, storage_options=setup.storage_options)
        _WORKER = (os.getpid(), setup, _Checker(setup, dict(group.arrays())))
    return _WORKER[2].check(task)


def _field_map(path: str, header: pysam.VariantHeader, info: dict[str, Any]) -> FieldMap:
    """The arrays of the source header's INFO/FORMAT fields, under the renames and the
    selection the store recorded when it was indexed."""
    try:
        choice = FieldChoice.from_attribute(info, path)
        return map_fields(list(header.info), list(header.formats), choice, path)
    except VcfVirtualError as e:
        raise VcfVirtualError(path, f"the source's fields do not fit the store: {e.problem}", hint=e.hint) from None


# The local-allele arrays that stand in for a FORMAT field's array, and that field.
_LOCAL_REPLACES = {"call_LAD": "AD", "call_LPL": "PL"}


def _declared_type(definition: pysam.VariantMetadata) -> str:
    """The Type the header line declares: htslib reports Character as String."""
    declared = definition.record.get("Type") if definition.record is not None else None
    return declared if declared in ("Integer", "Float", "Flag", "Character", "String") else str(definition.type)


def _source_paths(refs_path: str, info: dict[str, Any], source: SourceArg) -> list[str]:
    if source is None:
        recorded = info.get("sources") or []
        paths = [s.get("path") for s in recorded if s.get("path")]
        if not paths:
            raise VcfVirtualError(
                refs_path, "these references record no source BCF to compare with", hint="pass the BCF as source="
            )
        missing = [p for p in paths if "://" not in p and not os.path.exists(p)]
        if missing:
            raise VcfVirtualError(
                refs_path,
                f"the source BCF {missing[0]} recorded in the references is not there",
                hint="pass its current path as source=",
            )
        return [str(p) for p in paths]
    if isinstance(source, (str, os.PathLike)):
        return [os.fspath(source)]
    paths = [os.fspath(s) for s in source]
    if not paths:
        raise VcfVirtualError(refs_path, "source= names no file")
    return paths


def _open_source(path: str) -> pysam.VariantFile:
    import pysam

    if "://" not in path and not os.path.isfile(path):
        raise VcfVirtualError(path, "cannot read the source BCF: no such file", hint="check source=")
    # htslib looks for an index it does not need here and says so on stderr.
    verbosity = pysam.set_verbosity(0)
    try:
        return pysam.VariantFile(path)
    except (OSError, ValueError) as e:
        raise VcfVirtualError(path, f"htslib cannot read the source: {e}") from None
    finally:
        pysam.set_verbosity(verbosity)


class _Checker:
    """The store's arrays and the sources' header in one process, and the check of one
    task: its records read from htslib, turned into expected arrays a block at a time,
    and compared with the store's chunks."""

    def __init__(self, setup: _Setup, arrays: dict[str, zarr.Array]) -> None:
        self.setup = setup
        self.path = setup.path
        self.arrays = arrays
        reader = _open_source(setup.sources[0])
        try:
            header = reader.header
            self.contigs = list(header.contigs)
            self.samples = list(header.samples)
            # filter_id: header order with PASS first (VCF Zarr 0.3, "Filter information").
            self.filters = ["PASS"] + [f for f in header.filters if f != "PASS"]
            self.contig_length = [
                -1 if header.contigs[c].length is None else header.contigs[c].length for c in self.contigs
            ]
            self.filter_description = [header.filters[f].description or "" for f in self.filters]
            self.field_map = _field_map(setup.path, header, {"fields": setup.fields})
            self.builders, self.not_compared = self._builders(header)
        finally:
            reader.close()
        self.contig_index = {c: i for i, c in enumerate(self.contigs)}
        self.filter_index = {f: i for i, f in enumerate(self.filters)}
        self.cache = (setup.cache_url or "").removeprefix("file://") or None
        self.n_variants = int(arrays["variant_position"].shape[0])
        self.chunk = int(arrays["variant_position"].chunks[0])
        self.cursor = _Cursor(setup.sources, len(self.samples))

    def close(self) -> None:
        self.cursor.close()

    def _builders(self, header: pysam.VariantHeader) -> tuple[dict[str, _Field | _Local | None], list[str]]:
        """Which arrays are compared, and the builder of each INFO/FORMAT array's expected
        values (None: the fixed columns and GT, built together by _Fixed and _Genotype;
        _Local: a local-allele array derived from GT and AD/PL)."""
        builders: dict[str, _Field | _Local | None] = {}
        not_compared: list[str] = []
        owners = self.field_map.fields_by_array()  # renamed fields under their arrays' names
        for name, array in self.arrays.items():
            if name in _HEADER or name == "region_index":
                continue
            if name in _FIXED or name in _GENOTYPE:
                builders[name] = None
                continue
            local = _local_builder(name, array, header)
            if local is not None:
                builders[name] = local
                continue
            f = None
            category, key = owners.get(name, ("", ""))
            if category == "INFO":
                f = _Field(name, key, _declared_type(header.info[key]), array.shape[1:], per_sample=False)
            elif category == "FORMAT":
                meta = header.formats[key]
                f = _Field(name, key, _declared_type(meta), array.shape[2:], per_sample=True, number=meta.number)
            if f is None or (f.per_sample and array.shape[1:2] != (len(self.samples),)):
                not_compared.append(name)
            else:
                builders[name] = f
        return builders, not_compared

    def _local_sources(self) -> dict[str, _Field]:
        """The FORMAT fields (AD, PL) the local-allele builders gather from, by a key no
        array has (they are not compared themselves: the store holds no call_AD then)."""
        return {"-" + n: b.source for n, b in self.builders.items() if isinstance(b, _Local) and b.source is not None}

    def window_chunks(self) -> int:
        """Chunks a task may hold: as many as make a decoded call_genotype of a quarter of
        the ~64 MiB ``index`` aims its chunks at (at least one), so stores of small chunks
        are not read one small chunk per zarr call, and a worker holds little more than
        one task's chunks of every array."""
        from .manifests.vcf_zarr import default_chunk_length

        target = default_chunk_length(len(self.samples), max(self._ploidy(), 1)) // TASK_SHARE
        return max(1, target // self.chunk)

    def _ploidy(self) -> int:
        a = self.arrays.get("call_genotype")
        return int(a.shape[2]) if a is not None and a.ndim == 3 else 0

    # --- one task ----------------------------------------------------------------------

    def check(self, task: _Task) -> _TaskResult:
        self.cursor.goto(task)
        ours = _Chunks(self, task.start, task.stop)
        found: dict[str, _Found] = {}
        rows = []
        skipped = 0
        m_total = 0
        block = self._block_length()
        for start in range(task.start, task.stop, block):
            n = min(block, task.stop - start)
            fixed = _Fixed(n, self)
            genotype = _Genotype(n, len(self.samples), self._ploidy(), self._genotype_dtype())
            fields = {name: b for name, b in self.builders.items() if isinstance(b, _Field)}
            # The FORMAT fields local alleles gather from (AD, PL), collected as call_AD's.
            fields.update(self._local_sources())
            for f in fields.values():
                f.start(n, len(self.samples))
            m = 0
            while m < n:
                got = self.cursor.next()
                if got is None:
                    break
                rec, hts = got
                fixed.add(m, rec)
                skipped += genotype.add(m, rec, hts, fixed.n_alleles[m])
                calls = None
                for f in fields.values():
                    calls = f.add(m, rec, hts, calls)
                m += 1
            expected = fixed.arrays()
            expected.update(genotype.arrays())
            for name, f in fields.items():
                expected[name] = f.array()
            for name, b in self.builders.items():
                if isinstance(b, _Local):
                    expected[name] = b.array(expected["call_genotype"])
            rows.append(self._region_rows(start, expected, m))
            self._compare_block(found, ours, start, m, expected, fixed, genotype)
            m_total += m
            if m < n:
                break
        region = np.concatenate(rows) if rows else np.zeros((0, 6), dtype=np.int64)
        return _TaskResult(task.start, m_total, found, region, skipped)

    def _block_length(self) -> int:
        """Records turned into expected arrays at once: ~BLOCK_BYTES of htslib's
        per-sample values (GT and every numeric FORMAT field), at least one record."""
        width = self._ploidy() + 1
        for b in (*self.builders.values(), *self._local_sources().values()):
            if isinstance(b, _Field) and b.per_sample:
                width += (b.width or 1) + 1
        return max(1, BLOCK_BYTES // max(1, 4 * width * max(1, len(self.samples))))

    def _genotype_dtype(self) -> np.dtype:
        a = self.arrays.get("call_genotype")
        return a.dtype if a is not None and np.dtype(a.dtype).kind == "i" else np.dtype(np.int32)

    def _compare_block(
        self,
        found: dict[str, _Found],
        ours: _Chunks,
        start: int,
        m: int,
        expected: dict[str, np.ndarray],
        fixed: _Fixed,
        genotype: _Genotype,
    ) -> None:
        n_alleles = fixed.n_alleles[:m]
        accepted = None
        for name in self.builders:
            if name not in expected:
                continue
            mine = ours.read(name, start, start + m)
            exp = expected[name][:m]
            if name == "call_genotype_mask" and accepted is not None:
                exp = exp & ~accepted
            diff = _differs(mine, exp)
            if name == "call_genotype":
                # pysam gives None (missing) for an allele index outside [0, n_alleles);
                # the store keeps the index htslib decoded.
                accepted = (exp == INT_MISSING) & (np.asarray(mine) >= n_alleles[:, None, None])
                diff &= ~accepted
            builder = self.builders[name]
            if name in _GENOTYPE or isinstance(builder, _Local):
                diff[genotype.skip[:m]] = False
            overflow: np.ndarray | None
            if name in _GENOTYPE:
                overflow = genotype.overflow
            elif isinstance(builder, _Local):
                overflow = builder.overflow(genotype.overflow)
            elif name == "variant_allele":
                overflow = fixed.allele_overflow
            elif isinstance(builder, _Field):
                overflow = builder.overflow
            else:
                overflow = None
            self._record(found, name, start, diff, mine, exp, None if overflow is None else overflow[:m])

    def _record(
        self,
        found: dict[str, _Found],
        name: str,
        start: int,
        diff: np.ndarray,
        ours: np.ndarray,
        exp: np.ndarray,
        overflow: np.ndarray | None = None,
    ) -> None:
        """Fold one block's differences into the array's running count and first place."""
        if overflow is not None and overflow.any():
            # htslib reads more values (alleles, ploidy, field values) than the store's
            # dimension holds: every value of that row or call differs.
            lead = overflow.reshape(overflow.shape + (1,) * (diff.ndim - overflow.ndim))
            diff = diff | np.broadcast_to(lead, diff.shape)
        count = int(diff.sum())
        if not count:
            return
        first = tuple(int(i) for i in np.argwhere(diff)[0])
        f = found.get(name)
        if f is None:
            dims = self._dims(name)
            sample = first[1] if len(dims) > 1 and dims[1] == "samples" else None
            found[name] = _Found(
                count, start + first[0], sample, _show(ours, first), _show(exp, first), (start + first[0], *first[1:])
            )
        else:
            f.count += count

    def _dims(self, name: str) -> tuple[str, ...]:
        a = self.arrays[name]
        meta = a.metadata
        dims = a.attrs.get("_ARRAY_DIMENSIONS") if meta.zarr_format == 2 else meta.dimension_names
        return tuple(str(d) for d in cast("Iterable[str | None]", dims or ()))

    def _region_rows(self, start: int, expected: dict, m: int) -> np.ndarray:
        # VCF Zarr 0.3 "Region index": one row per run of a contig within each chunk.
        # Blocks and tasks end at chunk boundaries or inside a chunk; rows of one chunk
        # split across blocks are joined again in compare_header_arrays.
        if m == 0:
            return np.zeros((0, 6), dtype=np.int64)
        contig = expected["variant_contig"][:m]
        pos = expected["variant_position"][:m]
        end = pos + expected["variant_length"][:m] - 1
        chunk = (start + np.arange(m)) // self.chunk
        cuts = np.flatnonzero((np.diff(contig) != 0) | (np.diff(chunk) != 0)) + 1
        starts = np.concatenate([[0], cuts])
        stops = np.concatenate([cuts, [m]])
        return np.stack(
            [
                chunk[starts],
                contig[starts],
                pos[starts],
                pos[stops - 1],
                np.maximum.reduceat(end, starts),
                stops - starts,
            ],
            axis=1,
        )

    # --- the whole store ---------------------------------------------------------------

    def compare_header_arrays(
        self, found: dict[str, _Found], region_rows: list[np.ndarray], chunks: set[int] | None
    ) -> None:
        """The arrays made from the header, and region_index (only the checked chunks'
        rows when ``chunks`` names them)."""
        expected = {
            "contig_id": np.array(self.contigs, dtype=object),
            "contig_length": np.array(self.contig_length, dtype=np.int64),
            "filter_id": np.array(self.filters, dtype=object),
            "filter_description": np.array(self.filter_description, dtype=object),
            "sample_id": np.array(self.samples, dtype=object),
            "region_index": _join_region_rows(region_rows),
        }
        for name, exp in expected.items():
            if name not in self.arrays:
                continue
            self.builders[name] = None
            ours = np.asarray(self.arrays[name][...])
            if name == "region_index" and chunks is not None:
                ours = ours[np.isin(ours[:, 0], list(chunks))] if ours.ndim == 2 else ours
            if ours.shape != exp.shape:
                found[name] = _Found(
                    max(ours.size, exp.size), None, None, f"shape {ours.shape}", f"shape {exp.shape}", ()
                )
                continue
            diff = _differs(ours, exp)
            if diff.any():
                first = tuple(int(i) for i in np.argwhere(diff)[0])
                found[name] = _Found(int(diff.sum()), None, None, _show(ours, first), _show(exp, first), first)

    def report(self, found: dict[str, _Found], n_read: int, skipped_gt: int) -> VerifyReport:
        order = list(self.arrays)
        compared = tuple(n for n in order if n in self.builders)
        differences = tuple(
            ArrayDifference(n, f.count, f.variant, f.sample, f.ours, f.expected, f.index)
            for n in order
            if (f := found.get(n)) is not None
        )
        notes = []
        if skipped_gt:
            records = "record" if skipped_gt == 1 else "records"
            notes.append(
                f"genotypes of {skipped_gt} {records} not compared: GT is not the first FORMAT "
                "field there, and pysam reads GT only when it is"
            )
        return VerifyReport(
            self.path,
            tuple(self.setup.sources),
            self.n_variants,
            n_read,
            compared,
            differences,
            tuple(self.not_compared),
            tuple(notes),
            missing=self._missing(),
            omitted=self.field_map.omitted,
        )

    def _missing(self) -> tuple[str, ...]:
        """The arrays every INFO/FORMAT field of the header gets, unless left out on
        request, that the store lacks: a field lost silently fails here."""
        wanted = list(self.field_map.arrays.values())
        if self.field_map.genotypes:
            wanted += list(_GENOTYPE)
        # With local alleles (index --local-alleles), call_LAD and call_LPL replace call_AD and call_PL.
        replaced = {"call_" + name for local, name in _LOCAL_REPLACES.items() if local in self.arrays}
        return tuple(name for name in wanted if name not in self.arrays and name not in replaced)


def _join_region_rows(rows: list[np.ndarray]) -> np.ndarray:
    """Region rows in variant order, with a (chunk, contig) run split between two blocks
    joined into one row."""
    rows = [r for r in rows if len(r)]
    if not rows:
        return np.zeros((0, 6), dtype=np.int64)
    r = np.concatenate(rows)
    same = (r[1:, 0] == r[:-1, 0]) & (r[1:, 1] == r[:-1, 1])
    if not same.any():
        return r
    keep = np.concatenate([[True], ~same])
    group = np.cumsum(keep) - 1
    out = r[keep].copy()
    last = np.flatnonzero(np.concatenate([keep[1:], [True]]))  # the last row of each run
    out[:, 3] = r[last, 3]
    out[:, 4] = np.maximum.reduceat(r[:, 4], np.flatnonzero(keep))
    out[:, 5] = np.bincount(group, weights=r[:, 5]).astype(np.int64)
    return out


class _Chunks:
    """The store's values for one task's variants, each array decoded once (whole chunks)
    when first asked for."""

    def __init__(self, checker: _Checker, start: int, stop: int) -> None:
        self.checker = checker
        self.start = start
        self.stop = stop
        self.values: dict[str, np.ndarray] = {}

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        if name not in self.values:
            self.values[name] = self._decode(name)
        return self.values[name][start - self.start : stop - self.start]

    def _decode(self, name: str) -> np.ndarray:
        try:
            return np.asarray(self.checker.arrays[name][self.start : self.stop])
        except VcfVirtualError as e:
            if e.path is not None:
                raise
            # The codec knows the chunk's bytes, not which file they came from.
            raise type(e)(self.checker.cache or self.path, e.problem, offset=e.offset, hint=e.hint) from None

    @property
    def path(self) -> str:
        return self.checker.path


# --- reading the sources: pysam and htslib in step ---------------------------------------


class _Cursor:
    """The sources' records from a task's first one on, each read twice in step: by
    pysam (a ``VariantRecord``) and by htslib through ctypes (``_HtsRecords``)."""

    def __init__(self, sources: tuple[str, ...], n_samples: int) -> None:
        self.sources = sources
        self.n_samples = n_samples
        self.file = -1
        self.pysam: Any = None
        self.records: Any = None
        self.hts: _HtsRecords | None = None
        self.next_record: int | None = None  # the store's index of the next record read

    def goto(self, task: _Task) -> None:
        if self.next_record == task.start:
            return  # the task before this one ended here (serial runs read straight on)
        self._open(task.source)
        assert self.pysam is not None and self.hts is not None
        if task.offset is not None:
            self.pysam.seek(task.offset)
            self.hts.seek(task.offset)
            self.records = iter(self.pysam)
        else:
            for _ in range(task.record_in_source):
                self.next()
        self.next_record = task.start

    def next(self) -> tuple[pysam.VariantRecord, _HtsRecords] | None:
        """(pysam record, htslib reader positioned on the same record), or None past the
        last source's last record."""
        while self.pysam is not None and self.hts is not None:
            path = self.sources[self.file]
            try:
                rec = next(self.records)
            except StopIteration:
                rec = None
            except (OSError, ValueError) as e:
                raise VcfVirtualError(path, f"htslib cannot read a record: {e}") from None
            if rec is not None:
                if not self.hts.read():
                    raise VcfVirtualError(path, "htslib read fewer records through ctypes than through pysam")
                if self.next_record is not None:
                    self.next_record += 1
                return rec, self.hts
            if self.file + 1 >= len(self.sources):
                return None
            self._open(self.file + 1)
        return None

    def count_rest(self) -> int:
        """Records after the last one read, to the end of the last source (a source
        holding more records than the store)."""
        if self.pysam is None:
            if self.next_record is not None or not self.sources:
                return 0
            self._open(0)
        n = 0
        while self.next() is not None:
            n += 1
        return n

    def _open(self, i: int) -> None:
        if i == self.file:
            return
        self._close_file()
        self.pysam = _open_source(self.sources[i])
        self.records = iter(self.pysam)
        self.hts = _HtsRecords(self.sources[i], self.n_samples)
        self.file = i

    def _close_file(self) -> None:
        if self.pysam is not None:
            self.pysam.close()
        if self.hts is not None:
            self.hts.close()
        self.pysam = self.hts = self.records = None
        self.file = -1

    def close(self) -> None:
        self._close_file()
        self.next_record = None


BCF_HT_INT, BCF_HT_REAL, BCF_HT_STR = 1, 2, 3
INT32_MISSING, INT32_VECTOR_END = -(2**31), -(2**31) + 1
# htslib's float sentinels, as raw bits (FLOAT_MISSING_BITS above is the same pattern).
FLOAT_VECTOR_END_BITS = 0x7F800002


def _htslib() -> ctypes.CDLL:
    """htslib as pysam bundles it (its libchtslib extension exports the C API), with
    the signatures of the few functions verify calls."""
    global _LIB
    if _LIB is None:
        import pysam.libchtslib

        lib = ctypes.CDLL(pysam.libchtslib.__file__)
        vp, cp, i, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64
        signatures = {
            "hts_open": (vp, [cp, cp]),
            "hts_close": (i, [vp]),
            "hts_get_bgzfp": (vp, [vp]),
            "hts_free": (None, [vp]),
            "bgzf_seek": (i64, [vp, i64, i]),
            "bcf_hdr_read": (vp, [vp]),
            "bcf_hdr_destroy": (None, [vp]),
            "bcf_init": (vp, []),
            "bcf_destroy": (None, [vp]),
            "bcf_read": (i, [vp, vp, vp]),
            "bcf_get_format_values": (i, [vp, vp, cp, ctypes.POINTER(vp), ctypes.POINTER(i), i]),
        }
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        _LIB = lib
    return _LIB


_LIB: ctypes.CDLL | None = None


class _HtsRecords:
    """One source read record by record by htslib; ``format`` gives one FORMAT field of
    the current record for every sample as one array, as ``bcf_get_format_values``
    decodes it (no Python per sample)."""

    def __init__(self, path: str, n_samples: int) -> None:
        self.lib = _htslib()
        self.path = path
        self.n_samples = n_samples
        self.fp = self.lib.hts_open(path.encode(), b"r")
        if not self.fp:
            raise VcfVirtualError(path, "htslib cannot open the source")
        self.hdr = self.lib.bcf_hdr_read(self.fp)
        self.rec = self.lib.bcf_init()
        # One buffer per kind: htslib counts a buffer's size in values (4 bytes for
        # GT, Integer, Float) or in bytes (String), so the two must not share one.
        self.buffers = {kind: (ctypes.c_void_p(), ctypes.c_int(0)) for kind in (BCF_HT_INT, BCF_HT_STR)}
        self._views: dict[int, tuple[tuple, np.ndarray]] = {}
        if not self.hdr or not self.rec:
            self.close()
            raise VcfVirtualError(path, "htslib cannot read the source's header")

    def seek(self, offset: int) -> None:
        bgzf = self.lib.hts_get_bgzfp(self.fp)
        if not bgzf or self.lib.bgzf_seek(bgzf, offset, 0) < 0:
            raise VcfVirtualError(self.path, f"htslib cannot seek to virtual offset {offset}")

    def read(self) -> bool:
        status = self.lib.bcf_read(self.fp, self.hdr, self.rec)
        if status < -1:
            raise VcfVirtualError(self.path, "htslib cannot read a record")
        return status == 0

    def format(self, tag: str, kind: int) -> np.ndarray | None:
        """(samples, values per sample): int32 (GT, Integer), float32 bits as uint32
        (Float) or bytes (String); None when the record has no such field."""
        buf, size = self.buffers[BCF_HT_STR if kind == BCF_HT_STR else BCF_HT_INT]
        n = self.lib.bcf_get_format_values(
            self.hdr, self.rec, tag.encode(), ctypes.byref(buf), ctypes.byref(size), kind
        )
        if n < 0 or not self.n_samples:
            return None
        dtype = {BCF_HT_INT: np.int32, BCF_HT_REAL: np.uint32, BCF_HT_STR: np.uint8}[kind]
        key = (buf.value, n)
        cached = self._views.get(kind)
        if cached is None or cached[0] != key:
            # A view of htslib's buffer, made again only when htslib moves it (it grows
            # it with realloc) or the record's shape changes: records of one shape are
            # read with no allocation. Valid until the next call; callers copy from it.
            nbytes = n * np.dtype(dtype).itemsize
            memory = (ctypes.c_char * nbytes).from_address(buf.value) if n else bytearray()
            cached = (key, np.frombuffer(memory, dtype=dtype).reshape(self.n_samples, n // self.n_samples))
            self._views[kind] = cached
        return cached[1]

    def close(self) -> None:
        lib = self.lib
        self._views.clear()
        for buf, _ in getattr(self, "buffers", {}).values():
            if buf:
                lib.hts_free(buf)
                buf.value = None
        if getattr(self, "rec", None):
            lib.bcf_destroy(self.rec)
            self.rec = None
        if getattr(self, "hdr", None):
            lib.bcf_hdr_destroy(self.hdr)
            self.hdr = None
        if self.fp:
            lib.hts_close(self.fp)
            self.fp = None


@dataclass
class _Found:
    count: int
    variant: int | None
    sample: int | None
    ours: str
    expected: str
    index: tuple


# --- expected values -----------------------------------------------------------------


class _Fixed:
    """The fixed columns of ``n`` records, encoded as VCF Zarr 0.3 stores them."""

    def __init__(self, n: int, v: _Checker) -> None:
        self.v = v
        arrays = v.arrays
        self.n_alleles = np.zeros(n, dtype=np.int64)
        self.contig = np.full(n, INT_FILL, dtype=np.int64)
        self.position = np.full(n, INT_FILL, dtype=np.int64)
        self.length = np.full(n, INT_FILL, dtype=np.int64)
        self.id = np.full(n, STR_FILL, dtype=object)
        width = arrays["variant_allele"].shape[1] if "variant_allele" in arrays else 0
        self.allele = np.full((n, width), STR_FILL, dtype=object)
        self.allele_overflow = np.zeros(n, dtype=bool)
        self.quality = np.full(n, np.float32(np.nan), dtype=np.float32)
        self.quality_missing = np.zeros(n, dtype=bool)
        self.filter = np.zeros((n, len(v.filters)), dtype=bool)

    def add(self, i: int, rec: pysam.VariantRecord) -> None:
        self.contig[i] = self.v.contig_index.get(rec.chrom, INT_MISSING)
        self.position[i] = rec.pos
        self.length[i] = rec.rlen
        self.id[i] = rec.id if rec.id is not None else STR_MISSING
        alleles = rec.alleles or ()
        self.n_alleles[i] = len(alleles)
        if len(alleles) > self.allele.shape[1]:
            self.allele_overflow[i] = True
        else:
            self.allele[i, : len(alleles)] = alleles
        if rec.qual is None:
            self.quality_missing[i] = True
        else:
            self.quality[i] = rec.qual
        for key in rec.filter:
            self.filter[i, self.v.filter_index[str(key)]] = True

    def arrays(self) -> dict[str, np.ndarray]:
        bits = self.quality.view(np.uint32).copy()
        bits[self.quality_missing] = FLOAT_MISSING_BITS
        return {
            "variant_contig": self.contig,
            "variant_position": self.position,
            "variant_length": self.length,
            "variant_id": self.id,
            "variant_id_mask": self.id == STR_MISSING,
            "variant_allele": self.allele,
            "variant_quality": bits.view(np.float32),
            "variant_filter": self.filter,
        }


class _Genotype:
    """GT of ``n`` records: alleles (-1 missing, -2 beyond the call's ploidy), phase, mask.

    htslib's GT of every sample of a record is kept raw (one extra value per call, so a
    call longer than the store's ploidy shows), and decoded for the whole block at once
    (``_decode_genotypes``) the way pysam decodes a call (``allele_indices``, ``phased``)."""

    def __init__(self, n: int, n_samples: int, ploidy: int, dtype: npt.DTypeLike) -> None:
        self.ploidy = ploidy
        self.dtype = np.dtype(dtype)
        self.raw = np.full((n, n_samples, ploidy + 1), INT32_VECTOR_END, dtype=np.int32)
        self.present = np.zeros(n, dtype=bool)
        self.n_alleles = np.zeros(n, dtype=np.int64)
        self.skip = np.zeros(n, dtype=bool)

    def add(self, i: int, rec: pysam.VariantRecord, hts: _HtsRecords, n_alleles: int) -> int:
        """Returns 1 when this record's genotypes cannot be compared."""
        if not hts.n_samples or "GT" not in rec.format:
            return 0
        if next(iter(rec.format)) != "GT":
            self.skip[i] = True
            return 1
        raw = hts.format("GT", BCF_HT_INT)
        if raw is None:
            return 0
        width = min(raw.shape[1], self.ploidy + 1)
        self.raw[i, :, :width] = raw[:, :width]
        self.present[i] = True
        self.n_alleles[i] = n_alleles
        return 0

    def arrays(self) -> dict[str, np.ndarray]:
        n, s, _ = self.raw.shape
        gt = np.empty((n, s, self.ploidy), dtype=self.dtype)
        phased = np.zeros((n, s), dtype=bool)
        self.overflow = np.zeros((n, s), dtype=bool)
        _decode_genotypes(self.raw, self.n_alleles, self.present, gt, phased, self.overflow, np.iinfo(self.dtype).max)
        return {"call_genotype": gt, "call_genotype_phased": phased, "call_genotype_mask": gt < 0}


class _Field:
    """An INFO (``variant_<name>``) or FORMAT (``call_<name>``) field of a block's records:
    the store array's expected values. INFO values come from pysam per record; numeric
    FORMAT values from htslib's array of every sample, read as pysam reads one sample's
    value; FORMAT strings from htslib's bytes when plain, else from pysam per sample."""

    def __init__(
        self,
        name: str,
        key: str,
        vcf_type: str,
        tail: tuple[int, ...],
        per_sample: bool,
        number: int | str | None = None,
    ) -> None:
        self.name = name
        self.key = key
        self.type = vcf_type
        self.width = tail[0] if tail else None
        self.per_sample = per_sample
        self.number = number  # the header's Number (FORMAT), for pysam's value count

    def start(self, n: int, n_samples: int) -> None:
        lead = (n, n_samples) if self.per_sample else (n,)
        shape = lead + (() if self.width is None else (self.width,))
        self.overflow = np.zeros(lead, dtype=bool)
        if self.per_sample and self.type in ("Integer", "Float"):
            # htslib's values of every call, kept raw (one more than the store's width,
            # so a longer call shows) and decoded for the block at once.
            self.raw = np.full((n, n_samples, (self.width or 1) + 1), self._end(), dtype=np.int32)
            self.present = np.zeros(n, dtype=bool)
            self.count = np.zeros(n, dtype=np.int64)
            return
        if self.type == "Flag":
            self.values = np.zeros(shape, dtype=bool)
        elif self.type == "Integer":
            self.values = np.full(shape, INT_MISSING, dtype=np.int64)
        elif self.type == "Float":
            # Floats are collected as values plus each cell's value count; NaN (missing,
            # or a NaN value, which bio2zarr also stores as missing) and the fill beyond
            # the count are set as bit patterns at the end.
            self.values = np.full(shape, np.nan, dtype=np.float32)
            self.counts = np.full(lead, -1 if self.width is None else self.width, dtype=np.int64)
            # A scalar INFO float's NaN value stays NaN (bio2zarr reads it as a scalar).
            self.nan_values = np.zeros(lead, dtype=bool)
        else:  # String, Character
            self.values = np.full(shape, STR_MISSING, dtype=object)

    def _end(self) -> int:
        return int(np.uint32(FLOAT_VECTOR_END_BITS).view(np.int32)) if self.type == "Float" else INT32_VECTOR_END

    def add(
        self, i: int, rec: pysam.VariantRecord, hts: _HtsRecords, calls: list[pysam.VariantRecordSample] | None
    ) -> list[pysam.VariantRecordSample] | None:
        """Adds record ``i``; returns pysam's calls of the record once made (``calls``
        passes them on to the next field, so they are made once per record)."""
        if self.per_sample:
            return self._add_format(i, rec, hts, calls)
        self._add_info(i, rec)
        return calls

    def _add_format(
        self, i: int, rec: pysam.VariantRecord, hts: _HtsRecords, calls: list[pysam.VariantRecordSample] | None
    ) -> list[pysam.VariantRecordSample] | None:
        if self.key not in rec.format:
            return calls  # absent: missing everywhere
        if self.type in ("Integer", "Float"):
            raw = hts.format(self.key, BCF_HT_INT if self.type == "Integer" else BCF_HT_REAL)
            if raw is not None:
                width = min(raw.shape[1], self.raw.shape[2])
                self.raw[i, :, :width] = raw[:, :width].view(np.int32)
                self.present[i] = True
                self.count[i], _ = self._count(len(rec.alleles or ()))
            return calls
        raw = hts.format(self.key, BCF_HT_STR)
        if raw is not None and self._put_strings(i, raw):
            return calls
        if calls is None:
            calls = list(rec.samples.values())
        for j, c in enumerate(calls):
            self._put((i, j), c[self.key])
        return calls

    def _add_info(self, i: int, rec: pysam.VariantRecord) -> None:
        if self.key in _HIDDEN_INFO:
            value = _info_from_text(rec, self.key, self.type)
            if value is not None:
                self._put((i,), value)
            return
        if self.key not in rec.info:
            return
        value = rec.info[self.key]
        if self.type in ("String", "Character") and value in (None, ()):
            # A key given without a value (bare, or with no characters): htslib holds no
            # value and pysam reads None or (); missing in every slot, as when absent.
            return
        if self.type == "Flag":
            self.values[i] = bool(value)
            return
        self._put((i,), value)

    def _put_strings(self, i: int, raw: np.ndarray) -> bool:
        """Record ``i``'s FORMAT strings of every sample from htslib's bytes (each call's
        bytes up to its trailing NULs), when every call holds one plain ASCII value (no
        comma, not empty, not htslib's missing 0x07): each then reads as pysam reads it,
        the value itself. Returns False, leaving the record to pysam, otherwise."""
        if raw.shape[1] == 0 or (raw >= 0x80).any() or (raw == ord(",")).any():
            return False
        if ((raw[:, 0] == 0) | (raw[:, 0] == 7)).any():
            return False
        # Character fields are <U1, as bio2zarr writes them (docs/design.md): a longer
        # value keeps its first character.
        first = raw[:, :1] if self.type == "Character" else raw
        text = np.ascontiguousarray(first).view(f"S{first.shape[1]}")[:, 0].astype(str).astype(object)
        if self.width is None:
            self.values[i] = text
        else:
            self.values[i][:, 0] = text
            self.values[i][:, 1:] = STR_FILL
        return True

    def _count(self, n_alleles: int) -> tuple[int, bool]:
        """pysam's (value count, scalar) for this FORMAT field in a record of
        ``n_alleles`` alleles: what it returns for a call with no value."""
        number = self.number
        if number == "A":
            return n_alleles - 1, False
        if number == "R":
            return n_alleles, False
        if number == "G":
            return n_alleles * (n_alleles + 1) // 2, False
        if isinstance(number, int):
            return number, number == 1
        return -1, False

    def _decoded_cells(self) -> np.ndarray:
        """The numeric FORMAT field's expected array, from the block's raw values."""
        n, s, _ = self.raw.shape
        is_float = self.type == "Float"
        w = self.width or 1
        values = np.full((n, s, w), FLOAT_MISSING_BITS if is_float else INT_MISSING, dtype=np.int64)
        n_items = np.zeros((n, s), dtype=np.int64)
        scalar = self._count(2)[1]
        fill_beyond = self.width is not None and not is_float
        _decode_cells(self.raw, values, self.present, self.count, scalar, fill_beyond, is_float, n_items, self.overflow)
        if not is_float:
            return values if self.width is not None else values[:, :, 0]
        bits = values.astype(np.uint32)
        if self.width is not None:
            # Within the record's own width (its longest call's), a float vector's
            # end-of-vector reads as missing, as bio2zarr stores it (docs/design.md,
            # "Values and encodings"); only beyond it is fill.
            longest = np.where(self.overflow, w, n_items).max(axis=1, initial=0)
            longest[~self.present] = w
            beyond = np.arange(w)[None, :] >= longest[:, None]
            bits[np.broadcast_to(beyond[:, None, :], bits.shape)] = FLOAT_FILL_BITS
        else:
            bits = bits[:, :, 0]
        return bits.view(np.float32)

    def _put(self, cell: tuple[int, ...], value: PysamValue) -> None:
        if self.type == "Flag":
            self.values[cell] = bool(value)
            return
        items = self._items(value)
        if self.width is None:
            if len(items) > 1:
                self.overflow[cell] = True
                return
            item = items[0] if items else None
            self.values[cell] = self._missing() if item is None else item
            if self.type == "Float" and not self.per_sample and item is not None and math.isnan(float(item)):
                self.nan_values[cell] = True
            return
        if len(items) > self.width:
            self.overflow[cell] = True
            return
        if not self.per_sample and self.type in ("Integer", "Float") and items == [None]:
            # An INFO value written "." (one missing value) is missing in every slot, as
            # bio2zarr stores it (docs/design.md, "Values and encodings").
            items = [None] * self.width
        row = [self._missing() if x is None else x for x in items]
        if self.type == "Float":
            self.values[cell][: len(row)] = row
            self.counts[cell] = len(row)
        else:
            self.values[cell] = row + [self._fill()] * (self.width - len(row))

    def _items(self, value: PysamValue) -> list[Scalar]:
        if self.type in ("String", "Character"):
            if value is None:
                # pysam gives None for a string with no characters at all, which the
                # store reads as "" (as bio2zarr does); "." is a missing string.
                return [STR_FILL]
            if isinstance(value, tuple):
                items: list[Scalar] = list(value)
            elif isinstance(value, str) and self.width is not None and self.type == "String":
                items = list(value.split(","))
            else:
                items = [value]
            if self.type == "Character":
                # Character fields are <U1, as bio2zarr writes them (docs/design.md), so
                # a longer value keeps its first character.
                items = [STR_FILL if x is None else str(x)[:1] for x in items]
            return [STR_FILL if x is None else x for x in items]
        if value is None:
            return [None]
        if isinstance(value, tuple):
            return list(value)
        return [value]

    def _missing(self) -> int | float | str:
        return {"Integer": INT_MISSING, "Float": math.nan}.get(self.type, STR_MISSING)

    def _fill(self) -> int | str:
        return INT_FILL if self.type == "Integer" else STR_FILL

    def array(self) -> np.ndarray:
        if self.per_sample and self.type in ("Integer", "Float"):
            return self._decoded_cells()
        if self.type != "Float":
            return self.values
        bits = self.values.view(np.uint32).copy()
        missing = np.isnan(self.values)
        if self.width is None:
            missing &= ~self.nan_values  # only a scalar keeps a NaN value
        bits[missing] = FLOAT_MISSING_BITS
        if self.width is not None:
            beyond = np.arange(self.width) >= self.counts[..., None]
            bits[beyond] = FLOAT_FILL_BITS
        return bits.view(np.float32)


# The local-allele arrays (index --local-alleles) and the FORMAT field each gathers.
_LOCAL_SOURCES = {"call_LA": None, "call_LAD": "AD", "call_LPL": "PL"}


def _codec_spec(array: zarr.Array) -> ChunkSpec | None:
    """The vcfvirtual.bcf codec configuration of a zarr array (v2 filters, v3 codecs), or None."""
    meta = array.metadata
    for codec in (*(getattr(meta, "filters", None) or ()), *(getattr(meta, "codecs", None) or ())):
        spec = getattr(codec, "spec", None)
        if spec is not None:
            return spec
    return None


def _local_builder(name: str, array: zarr.Array, header: pysam.VariantHeader) -> _Local | None:
    """A derived local-allele array's builder: call_LA, call_LAD or call_LPL where the
    header has no FORMAT field of that name (the index refuses local alleles beside one)."""
    if name not in _LOCAL_SOURCES or name[5:] in header.formats or "GT" not in header.formats:
        return None
    field_name = _LOCAL_SOURCES[name]
    if field_name is None:
        return _Local(name, None)
    spec = _codec_spec(array)
    if field_name not in header.formats or spec is None or not spec.source_width:
        return None
    width = int(spec.source_width)
    number = header.formats[field_name].number
    return _Local(name, _Field("call_" + field_name, field_name, "Integer", (width,), per_sample=True, number=number))


class _Local:
    """call_LA, call_LAD or call_LPL as bio2zarr defines them (vcz.compute_la_field and
    friends), computed here with numpy from htslib's GT and AD/PL (``source``, collected as
    call_AD/call_PL would be), apart from the codec's kernels."""

    def __init__(self, name: str, source: _Field | None) -> None:
        self.name = name
        self.source = source

    def overflow(self, genotype_overflow: np.ndarray) -> np.ndarray:
        if self.source is None:
            return genotype_overflow
        return genotype_overflow | self.source.overflow

    def array(self, gt: np.ndarray) -> np.ndarray:
        la = _expected_la(gt)
        if self.source is None:
            return la
        values = self.source.array()
        if self.name == "call_LAD":
            return _gather(values, [la[..., 0], la[..., 1]], [la[..., 0] >= 0, la[..., 1] >= 0])
        a, b = la[..., 0].astype(np.int64), la[..., 1].astype(np.int64)
        # PL's index of genotype a/b (a <= b) in the VCF's order: b(b+1)/2 + a.
        index = [a * (a + 1) // 2 + a, b * (b + 1) // 2 + a, b * (b + 1) // 2 + b]
        return _gather(values, index, [a >= 0, b >= 0, b >= 0])


def _expected_la(gt: np.ndarray) -> np.ndarray:
    """Each diploid call's distinct alleles, sorted, missing and repeats as -2: bio2zarr's
    sort with negatives placed last."""
    last = np.iinfo(np.int64).max
    g = np.where(gt < 0, last, gt.astype(np.int64))
    g.sort(axis=-1)
    g[..., 1] = np.where(g[..., 1] == g[..., 0], last, g[..., 1])
    return np.where(g == last, INT_FILL, g).astype(np.int8)


def _gather(values: np.ndarray, index: list[np.ndarray], valid: list[np.ndarray]) -> np.ndarray:
    """values[..., index[j]] where valid[j] (and inside the field's width), else -2."""
    width = values.shape[-1]
    out = []
    for idx, ok in zip(index, valid):
        ok = ok & (idx < width)
        taken = np.take_along_axis(values, np.where(ok, idx, 0)[..., None].astype(np.int64), axis=-1)[..., 0]
        out.append(np.where(ok, taken, INT_FILL))
    return np.stack(out, axis=-1)


# INFO keys pysam does not show in ``rec.info`` (END is folded into ``rec.stop``): their
# values are read from htslib's own VCF text of the record.
_HIDDEN_INFO = frozenset({"END"})


def _info_from_text(rec: pysam.VariantRecord, key: str, vcf_type: str) -> PysamValue:
    info = str(rec).split("\t", 8)[7]
    for entry in info.split(";"):
        name, _, text = entry.partition("=")
        if name != key:
            continue
        if vcf_type == "Flag":
            return True
        parts: list[str | int | float | None] = [None if t == "." else t for t in text.split(",")]
        if vcf_type == "Integer":
            parts = [None if t is None else int(t) for t in parts]
        elif vcf_type == "Float":
            parts = [None if t is None else float(t) for t in parts]
        return tuple(parts) if len(parts) > 1 else parts[0]
    return None


# --- comparing ---------------------------------------------------------------------------


def _differs(ours: npt.ArrayLike, expected: np.ndarray) -> np.ndarray:
    """Elementwise: does the store's value differ from the expected one?"""
    ours = np.asarray(ours)
    if ours.shape != expected.shape:
        raise VcfVirtualError(None, f"shape {ours.shape} read where {expected.shape} was expected")
    if expected.dtype == object or ours.dtype.kind in "OTU":
        return np.asarray(ours.astype(object) != expected.astype(object), dtype=bool)
    if expected.dtype.kind == "f":
        if ours.dtype.kind != "f":
            return np.ones(ours.shape, dtype=bool)
        a = ours.astype(np.float32).view(np.uint32)
        b = expected.astype(np.float32).view(np.uint32)
        sentinel = (FLOAT_MISSING_BITS, FLOAT_FILL_BITS)
        # Bit patterns, so missing and fill must match exactly; any other NaN (a QUAL
        # that is NaN without being missing) equals any NaN, as pysam's double cannot
        # carry the float's payload.
        loose = np.isnan(ours) & np.isnan(expected) & ~np.isin(a, sentinel) & ~np.isin(b, sentinel)
        return (a != b) & ~loose
    if expected.dtype == bool:
        return ours.astype(bool) != expected if ours.dtype == bool else np.ones(ours.shape, dtype=bool)
    # numpy compares mixed integer dtypes by value, without a widened copy of either.
    return ours != expected


def _show(values: npt.ArrayLike, index: tuple[int, ...]) -> str:
    values = np.asarray(values)
    x = values[index[: values.ndim]]
    if values.dtype.kind == "f":
        bits = int(np.asarray(x, dtype=np.float32).view(np.uint32))
        if bits == FLOAT_MISSING_BITS:
            return "NaN (missing)"
        if bits == FLOAT_FILL_BITS:
            return "NaN (fill)"
        return repr(float(x))
    if isinstance(x, np.generic):
        x = x.item()
    return repr(x)
