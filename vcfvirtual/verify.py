"""Check a store against htslib: decode every array of a vcfvirtual store and compare it
with pysam's reading of the source BCF(s), encoded the way VCF Zarr 0.3 and bio2zarr's
``vcf2zarr convert`` encode it.

The comparison runs a window of whole variants chunks at a time (about the ~64 MiB of
decoded genotypes ``index`` sizes its default chunks to, and at least one chunk): the
store's chunks are decoded through zarr (the codec, the cache, the references), the same
records are read from the source with pysam, and the two are compared as arrays, so
memory stays at about one window of every array whatever the store's size. Python loops over
pysam's records and calls are the cost here; the comparison itself is vectorised.

Where the store follows a documented convention that pysam's raw reading does not
express, the expectation follows the convention (each is noted where it is built):

* a haploid call is phased (docs/design.md, "Limits"; htslib agrees, bio2zarr varies);
* a NaN inside an INFO/FORMAT float vector reads as missing, as bio2zarr stores it
  (docs/design.md, "Values and encodings");
* pysam gives ``None`` for a GT allele index outside ``[0, n_alleles)`` where the store
  keeps the index htslib decoded; either is accepted (tests/README.md, "Oracle
  conventions");
* pysam reads GT only when it is a record's first FORMAT field; such records' genotypes
  are not compared, and the report counts them.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass

import numpy as np

from .bcf.fields import FieldChoice, FieldMap, map_fields
from .errors import VcfVirtualError

INT_MISSING, INT_FILL = -1, -2
FLOAT_MISSING_BITS, FLOAT_FILL_BITS = 0x7F800001, 0x7F800002
STR_MISSING, STR_FILL = ".", ""

# Arrays of the fixed VCF columns, and the arrays derived from the header.
_FIXED = (
    "variant_contig",
    "variant_position",
    "variant_length",
    "variant_id",
    "variant_id_mask",
    "variant_allele",
    "variant_quality",
    "variant_filter",
)
_GENOTYPE = ("call_genotype", "call_genotype_phased", "call_genotype_mask")
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
    refs, *, source=None, progress: bool | None = None, check: bool = True, storage_options: dict | None = None
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
    readers = [_open_source(s) for s in sources]
    try:
        return _Verifier(path, arrays, sources, readers, progress, info).run()
    finally:
        for r in readers:
            r.close()


def _field_map(path: str, header, info: dict) -> FieldMap:
    """The arrays of the source header's INFO/FORMAT fields, under the renames and the
    selection the store recorded when it was indexed."""
    try:
        choice = FieldChoice.from_attribute(info, path)
        return map_fields(list(header.info), list(header.formats), choice, path)
    except VcfVirtualError as e:
        raise VcfVirtualError(path, f"the source's fields do not fit the store: {e.problem}", hint=e.hint) from None


def _declared_type(definition) -> str:
    """The Type the header line declares: htslib reports Character as String."""
    declared = definition.record.get("Type") if definition.record is not None else None
    return declared if declared in ("Integer", "Float", "Flag", "Character", "String") else definition.type


def _source_paths(refs_path: str, info: dict, source) -> list[str]:
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


def _open_source(path: str):
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


class _Verifier:
    def __init__(self, path, arrays: dict, sources, readers, progress, info: dict | None = None):
        self.path = path
        self.arrays = arrays
        self.sources = sources
        self.readers = readers
        self.progress = progress
        header = readers[0].header
        self.contigs = list(header.contigs)
        self.contig_index = {c: i for i, c in enumerate(self.contigs)}
        self.samples = list(header.samples)
        # filter_id: header order with PASS first (VCF Zarr 0.3, "Filter information").
        self.filters = ["PASS"] + [f for f in header.filters if f != "PASS"]
        self.filter_index = {f: i for i, f in enumerate(self.filters)}
        self.header = header
        info = info or {}
        self.cache = ((info.get("cache") or {}).get("url") or "").removeprefix("file://") or None
        self.field_map = _field_map(path, header, info)
        self.skipped_gt = 0
        self.n_variants = int(arrays["variant_position"].shape[0]) if "variant_position" in arrays else 0
        self.chunk = int(arrays["variant_position"].chunks[0]) if "variant_position" in arrays else 1
        self.builders, self.not_compared = self._builders()
        self.found: dict[str, _Found] = {}
        self.region_rows: list[np.ndarray] = []

    def _builders(self) -> tuple[dict[str, _Field | _Local | None], list[str]]:
        builders: dict[str, _Field | _Local | None] = {}
        not_compared: list[str] = []
        header = self.header
        owners = self.field_map.fields_by_array()
        for name, array in self.arrays.items():
            if name in _HEADER or name == "region_index":
                continue
            if name in _FIXED or name in _GENOTYPE:
                builders[name] = None  # built together, by _Fixed and _Genotype
                continue
            local = _local_builder(name, array, header)
            if local is not None:
                builders[name] = local
                continue
            field = None
            category, key = owners.get(name, ("", ""))
            if category == "INFO":
                field = _Field(name, key, _declared_type(header.info[key]), array.shape[1:], per_sample=False)
            elif category == "FORMAT":
                field = _Field(name, key, _declared_type(header.formats[key]), array.shape[2:], per_sample=True)
            if field is None or (field.per_sample and array.shape[1:2] != (len(self.samples),)):
                not_compared.append(name)
            else:
                builders[name] = field
        return builders, not_compared

    def _local_sources(self) -> dict[str, _Field]:
        """The FORMAT fields (AD, PL) the local-allele builders gather from, by a key no
        array has (they are not compared themselves: the store holds no call_AD then)."""
        return {"-" + n: b.source for n, b in self.builders.items() if isinstance(b, _Local) and b.source is not None}

    # --- the comparison, chunk by chunk -------------------------------------------------

    def run(self) -> VerifyReport:
        from tqdm.auto import tqdm

        records = self._records()
        n_read = 0
        bar = tqdm(
            total=self.n_variants,
            unit=" records",
            desc="verify",
            disable=None if self.progress is None else not self.progress,
        )
        with bar:
            window = self._window()
            for start in range(0, self.n_variants, window):
                stop = min(start + window, self.n_variants)
                fixed = _Fixed(stop - start, self)
                genotype = _Genotype(stop - start, len(self.samples), self._ploidy())
                fields = {n: b for n, b in self.builders.items() if isinstance(b, _Field)}
                # The FORMAT fields local alleles gather from (AD, PL), collected as call_AD's.
                fields.update(self._local_sources())
                for f in fields.values():
                    f.start(stop - start, len(self.samples))
                m = 0
                for rec in records:
                    calls = list(rec.samples.values()) if self.samples else []
                    fixed.add(m, rec)
                    self.skipped_gt += genotype.add(m, rec, calls)
                    for f in fields.values():
                        f.add(m, rec, calls)
                    m += 1
                    if m % 256 == 0:
                        bar.update(256)
                    if m == stop - start:
                        break
                bar.update(m % 256)
                n_read += m
                expected = fixed.arrays()
                expected.update(genotype.arrays())
                for name, f in fields.items():
                    expected[name] = f.array()
                for name, b in self.builders.items():
                    if isinstance(b, _Local):
                        expected[name] = b.array(expected["call_genotype"])
                self._region_rows(start, expected, m)
                self._compare_chunk(start, m, expected, fixed, genotype)
                if m < stop - start:
                    break
        n_read += sum(1 for _ in records)  # records beyond the store's
        self._compare_header_arrays()
        return self._report(n_read)

    def _records(self):
        def generate():
            for reader in self.readers:
                try:
                    yield from reader
                except (OSError, ValueError) as e:
                    raise VcfVirtualError(reader.filename.decode(), f"htslib cannot read a record: {e}") from None

        return generate()

    def _read(self, name: str, start: int, stop: int):
        try:
            return self.arrays[name][start:stop]
        except VcfVirtualError as e:
            if e.path is not None:
                raise
            # The codec knows the chunk's bytes, not which file they came from.
            raise type(e)(self.cache or self.path, e.problem, offset=e.offset, hint=e.hint) from None

    def _ploidy(self) -> int:
        a = self.arrays.get("call_genotype")
        return int(a.shape[2]) if a is not None and a.ndim == 3 else 0

    def _compare_chunk(self, start: int, m: int, expected: dict, fixed: _Fixed, genotype: _Genotype):
        n_alleles = fixed.n_alleles[:m]
        accepted = None
        for name in self.builders:
            if name not in expected:
                continue
            ours = self._read(name, start, start + m)
            exp = expected[name][:m]
            if name == "call_genotype_mask" and accepted is not None:
                exp = exp & ~accepted
            diff = _differs(ours, exp)
            if name == "call_genotype":
                # pysam gives None (missing) for an allele index outside [0, n_alleles);
                # the store keeps the index htslib decoded.
                accepted = (exp == INT_MISSING) & (np.asarray(ours) >= n_alleles[:, None, None])
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
            self._record(name, start, diff, ours, exp, None if overflow is None else overflow[:m])

    def _record(self, name, start, diff, ours, exp, overflow=None):
        """Fold one chunk's differences into the array's running count and first place."""
        if overflow is not None and overflow.any():
            # htslib reads more values (alleles, ploidy, field values) than the store's
            # dimension holds: every value of that row or call differs.
            lead = overflow.reshape(overflow.shape + (1,) * (diff.ndim - overflow.ndim))
            diff = diff | np.broadcast_to(lead, diff.shape)
        count = int(diff.sum())
        if not count:
            return
        first = tuple(int(i) for i in np.argwhere(diff)[0])
        found = self.found.get(name)
        if found is None:
            dims = self._dims(name)
            sample = first[1] if len(dims) > 1 and dims[1] == "samples" else None
            self.found[name] = _Found(
                count, start + first[0], sample, _show(ours, first), _show(exp, first), (start + first[0], *first[1:])
            )
        else:
            found.count += count

    def _dims(self, name):
        a = self.arrays[name]
        meta = a.metadata
        dims = a.attrs.get("_ARRAY_DIMENSIONS") if meta.zarr_format == 2 else meta.dimension_names
        return tuple(dims or ())

    def _window(self) -> int:
        """Variants compared at once: whole chunks, as many as make a decoded
        call_genotype of about the size ``index`` aims its chunks at (at least one), so
        stores of small chunks are not read one small chunk per zarr call."""
        from .manifests.vcf_zarr import default_chunk_length

        target = default_chunk_length(len(self.samples), max(self._ploidy(), 1))
        return self.chunk * max(1, target // self.chunk)

    def _region_rows(self, start: int, expected: dict, m: int):
        # VCF Zarr 0.3 "Region index": one row per run of a contig within each chunk.
        if m == 0:
            return
        contig = expected["variant_contig"][:m]
        pos = expected["variant_position"][:m]
        end = pos + expected["variant_length"][:m] - 1
        chunk = (start + np.arange(m)) // self.chunk
        cuts = np.flatnonzero((np.diff(contig) != 0) | (np.diff(chunk) != 0)) + 1
        starts = np.concatenate([[0], cuts])
        stops = np.concatenate([cuts, [m]])
        rows = np.stack(
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
        self.region_rows.append(rows)

    def _compare_header_arrays(self):
        h = self.header
        expected = {
            "contig_id": np.array(self.contigs, dtype=object),
            "contig_length": np.array(
                [-1 if h.contigs[c].length is None else h.contigs[c].length for c in self.contigs], dtype=np.int64
            ),
            "filter_id": np.array(self.filters, dtype=object),
            "filter_description": np.array([h.filters[f].description or "" for f in self.filters], dtype=object),
            "sample_id": np.array(self.samples, dtype=object),
            "region_index": (
                np.concatenate(self.region_rows) if self.region_rows else np.zeros((0, 6), dtype=np.int64)
            ),
        }
        for name, exp in expected.items():
            if name not in self.arrays:
                continue
            self.builders[name] = None
            ours = self.arrays[name][...]
            if ours.shape != exp.shape:
                self.found[name] = _Found(
                    max(ours.size, exp.size), None, None, f"shape {ours.shape}", f"shape {exp.shape}", ()
                )
                continue
            diff = _differs(ours, exp)
            if diff.any():
                first = tuple(int(i) for i in np.argwhere(diff)[0])
                self.found[name] = _Found(int(diff.sum()), None, None, _show(ours, first), _show(exp, first), first)

    def _report(self, n_read: int) -> VerifyReport:
        order = list(self.arrays)
        compared = tuple(n for n in order if n in self.builders)
        differences = tuple(
            ArrayDifference(n, f.count, f.variant, f.sample, f.ours, f.expected, f.index)
            for n in order
            if (f := self.found.get(n)) is not None
        )
        notes = []
        if self.skipped_gt:
            records = "record" if self.skipped_gt == 1 else "records"
            notes.append(
                f"genotypes of {self.skipped_gt} {records} not compared: GT is not the first FORMAT "
                "field there, and pysam reads GT only when it is"
            )
        return VerifyReport(
            self.path,
            tuple(self.sources),
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

    def __init__(self, n: int, v: _Verifier):
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

    def add(self, i: int, rec):
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
            self.filter[i, self.v.filter_index[key]] = True

    def arrays(self) -> dict:
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
    """GT of ``n`` records: alleles (-1 missing, -2 beyond the call's ploidy), phase, mask."""

    def __init__(self, n: int, n_samples: int, ploidy: int):
        self.ploidy = ploidy
        # A record without GT reads as all missing and unphased (VCF Zarr 0.3: "false if
        # unphased (or not present)").
        self.gt = np.full((n, n_samples, ploidy), INT_MISSING, dtype=np.int32)
        self.phased = np.zeros((n, n_samples), dtype=bool)
        self.skip = np.zeros(n, dtype=bool)
        self.overflow = np.zeros((n, n_samples), dtype=bool)

    def add(self, i: int, rec, calls) -> int:
        """Returns 1 when this record's genotypes cannot be compared."""
        if not calls or "GT" not in rec.format:
            return 0
        if next(iter(rec.format)) != "GT":
            self.skip[i] = True
            return 1
        alleles = [c.allele_indices for c in calls]
        phased = [c.phased for c in calls]
        p = self.ploidy
        if set(map(len, alleles)) == {p}:
            # One ploidy: numpy reads None as NaN, so missing alleles map without a
            # Python loop per allele.
            flat = np.array(list(itertools.chain.from_iterable(alleles)), dtype=np.float64)
            self.gt[i] = np.nan_to_num(flat, nan=INT_MISSING).astype(np.int32).reshape(len(calls), p)
        else:
            for j, a in enumerate(alleles):
                if len(a) > p:
                    self.overflow[i, j] = True
                    continue
                self.gt[i, j, : len(a)] = [INT_MISSING if x is None else x for x in a]
                self.gt[i, j, len(a) :] = INT_FILL
        # htslib (pysam) calls a haploid call phased, as the store does by the project's
        # convention (docs/design.md, "Limits"): phased is taken as pysam gives it.
        self.phased[i] = phased
        return 0

    def arrays(self) -> dict:
        return {"call_genotype": self.gt, "call_genotype_phased": self.phased, "call_genotype_mask": self.gt < 0}


class _Field:
    """An INFO (``variant_<name>``) or FORMAT (``call_<name>``) field of a chunk's records."""

    def __init__(self, name: str, key: str, vcf_type: str, tail: tuple, per_sample: bool):
        self.name = name
        self.key = key
        self.type = vcf_type
        self.width = tail[0] if tail else None
        self.per_sample = per_sample

    def start(self, n: int, n_samples: int):
        lead = (n, n_samples) if self.per_sample else (n,)
        shape = lead + (() if self.width is None else (self.width,))
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
        else:  # String, Character
            self.values = np.full(shape, STR_MISSING, dtype=object)
        self.overflow = np.zeros(lead, dtype=bool)

    def add(self, i: int, rec, calls):
        if self.per_sample:
            if self.key not in rec.format:
                return  # absent: missing everywhere
            for j, c in enumerate(calls):
                self._put((i, j), c[self.key])
            if self.type == "Float" and self.width is not None:
                # Within the record's own width (its longest call's), a float vector's
                # end-of-vector reads as missing, as bio2zarr stores it (docs/design.md,
                # "Values and encodings"); only beyond it is fill.
                self.counts[i] = self.counts[i].max(initial=0)
            return
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

    def _put(self, cell: tuple, value):
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

    def _items(self, value) -> list:
        if self.type in ("String", "Character"):
            if value is None:
                # pysam gives None for a string with no characters at all, which the
                # store reads as "" (as bio2zarr does); "." is a missing string.
                return [STR_FILL]
            items = (
                list(value)
                if isinstance(value, tuple)
                else (value.split(",") if self.width is not None and self.type == "String" else [value])
            )
            if self.type == "Character":
                # Character fields are <U1, as bio2zarr writes them (docs/design.md), so
                # a longer value keeps its first character.
                items = [STR_FILL if x is None else x[:1] for x in items]
            return [STR_FILL if x is None else x for x in items]
        if value is None:
            return [None]
        if isinstance(value, tuple):
            return list(value)
        return [value]

    def _missing(self):
        return {"Integer": INT_MISSING, "Float": math.nan}.get(self.type, STR_MISSING)

    def _fill(self):
        return INT_FILL if self.type == "Integer" else STR_FILL

    def array(self) -> np.ndarray:
        if self.type != "Float":
            return self.values
        bits = self.values.view(np.uint32).copy()
        bits[np.isnan(self.values)] = FLOAT_MISSING_BITS
        if self.width is not None:
            beyond = np.arange(self.width) >= self.counts[..., None]
            bits[beyond] = FLOAT_FILL_BITS
        return bits.view(np.float32)


# The local-allele arrays (index --local-alleles) and the FORMAT field each gathers.
_LOCAL_SOURCES = {"call_LA": None, "call_LAD": "AD", "call_LPL": "PL"}


def _codec_spec(array):
    """The vcfvirtual.bcf codec configuration of a zarr array (v2 filters, v3 codecs), or None."""
    meta = array.metadata
    for codec in (*(getattr(meta, "filters", None) or ()), *(getattr(meta, "codecs", None) or ())):
        spec = getattr(codec, "spec", None)
        if spec is not None:
            return spec
    return None


# The local-allele arrays that stand in for a FORMAT field's array, and that field.
_LOCAL_REPLACES = {"call_LAD": "AD", "call_LPL": "PL"}


def _local_builder(name: str, array, header) -> _Local | None:
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
    return _Local(name, _Field("call_" + field_name, field_name, "Integer", (width,), per_sample=True))


class _Local:
    """call_LA, call_LAD or call_LPL as bio2zarr defines them (vcz.compute_la_field and
    friends), computed here with numpy from htslib's GT and AD/PL (``source``, collected as
    call_AD/call_PL would be), apart from the codec's kernels."""

    def __init__(self, name: str, source: _Field | None):
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


def _gather(values: np.ndarray, index: list, valid: list) -> np.ndarray:
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


def _info_from_text(rec, key: str, vcf_type: str):
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


def _differs(ours, expected: np.ndarray) -> np.ndarray:
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


def _show(values, index) -> str:
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
