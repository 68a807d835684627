"""What an index run will do, decided before it writes anything.

:func:`plan_index` makes every check and naming decision of :func:`vcfvirtual.index`:
the inputs, the options, the outputs' names, whether the references point into an
uncompressed input itself (zero copy), and for a run with URLs, where its outputs are
staged locally. It reads the inputs' first bytes and fingerprints (and a local VCF's header
lines, whose fields it checks before htslib converts the file) and nothing else: it
creates, removes and uploads nothing, so a refused run leaves no trace.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vcfvirtual_codec.bcf import bgzf

from .bcf.fields import FieldChoice, FieldMap, map_fields
from .bcf.vcf_input import is_vcf_path, vcf_field_ids
from .cache.base import CacheLayout
from .cache.columns import DEFAULT_SAMPLES_CHUNK_SIZE
from .cache.layouts import DEFAULT_LAYOUT, LAYOUT_WRITERS, LAYOUTS, STREAM_LAYOUT, chunk_length_rule, layout_writer
from .cache.names import LayoutName, layout_name
from .errors import OutputExistsError, VcfVirtualError
from .io import outputs
from .io import remote as storage
from .io.fingerprint import Fingerprint
from .refs.formats import REFS_FORMATS, REFS_SUFFIXES, RefsFormat

if TYPE_CHECKING:
    from .bcf.header import BCFHeader
    from .scan.chunking import ChunkLengthRule

__all__ = [
    "LAYOUTS",
    "REFS_FORMATS",
    "IndexOptions",
    "IndexPlan",
    "RemotePlan",
    "plan_index",
    "references_path",
]


#: An input: a local path, or a URL kept as a string.
Source = Path | str
#: An output argument: a path, a URL, ``None`` for the default, ``False`` for none (references only).
OutputArg = str | os.PathLike[str] | Literal[False] | None


@dataclass(frozen=True)
class IndexOptions:
    """The keyword arguments of :func:`vcfvirtual.index`, with their defaults.

    Parameters
    ----------
    refs_path : str, path, False or None
        References to write (a path or URL); ``None`` names them after the input;
        ``False`` writes none.
    cache_path : str, path or None
        Transcode cache to write (a path or URL); ``None`` names it after the input.
    variants_chunk_size : int or None
        Variants per chunk; ``None`` sizes chunks from the number of samples.
    cache_layout : {"bgzf", "raw", "columns"} or None
        The cache's layout; ``None`` chooses ``raw`` (zero copy) for one uncompressed
        local BCF, else ``columns`` (each array's chunks stored apart). ``bgzf``: the
        BCF's own blocks, a cache that is itself a BCF.
    samples_chunk_size : int
        Samples per chunk of the arrays with a samples dimension, in the ``columns``
        layout only (``bgzf`` and ``raw`` keep the samples dimension whole).
    local_alleles : bool
        Expose bio2zarr's local alleles (``call_LA``, ``call_LAD``, ``call_LPL`` in place
        of ``call_AD`` and ``call_PL``), derived at read time from GT, AD and PL.
    force : bool
        Replace existing outputs that vcfvirtual wrote.
    progress : bool or None
        Show a progress bar; ``None``: only when stderr is a terminal.
    inflate_threads : int
        Threads inflating BGZF blocks ahead of a serial scan (0: none).
    cache_url : str or None
        Where readers of the references will find the cache.
    refs_format : {"json", "parquet", "icechunk"}
        The references' format.
    workers : int
        Processes scanning in parallel.
    dask_client : distributed.Client or None
        Scan on this Dask cluster instead of local processes.
    storage_options : dict or None
        fsspec options for inputs and outputs given as URLs.
    rename_fields : dict or None
        New names of INFO/FORMAT fields' arrays, ``{"INFO/filter": "filter_info"}``.
    fields : iterable of str, str or None
        Keep only these INFO/FORMAT fields (``CATEGORY/ID``); None keeps every field.
    exclude_fields : iterable of str, str or None
        Leave these INFO/FORMAT fields out.
    append : bool
        Grow the store at ``refs_path`` with the files' records (:func:`plan_append`).
    """

    refs_path: OutputArg = None
    cache_path: str | os.PathLike[str] | None = None
    variants_chunk_size: int | None = None
    cache_layout: LayoutName | None = None
    samples_chunk_size: int = DEFAULT_SAMPLES_CHUNK_SIZE
    local_alleles: bool = False
    force: bool = False
    progress: bool | None = None
    inflate_threads: int = 0
    cache_url: str | None = None
    refs_format: RefsFormat = "json"
    workers: int = 1
    dask_client: Any = None
    storage_options: dict | None = None
    rename_fields: Mapping[str, str] | None = None
    fields: Iterable[str] | str | None = None
    exclude_fields: Iterable[str] | str | None = None
    append: bool = False

    def __post_init__(self) -> None:
        # Read more than once (the plan, the cache, the manifests): an iterator would be
        # spent after the first; a tuple is also what a frozen options object should hold.
        for name in ("fields", "exclude_fields"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                object.__setattr__(self, name, tuple(value))

    @property
    def field_choice(self) -> FieldChoice:
        """The fields' renames and selection, as one typed value."""
        return FieldChoice.of(self.rename_fields, self.fields, self.exclude_fields)


@dataclass(frozen=True)
class RemotePlan:
    """A run with URLs: its outputs are made in the local folder ``staging`` (named, not
    created: :class:`vcfvirtual.io.staging.Staging` makes it) and uploaded."""

    source: str | None  # the BCF's URL, None when it is local
    refs_url: str | None
    cache_url: str | None
    staging: Path
    local_refs: Path | None
    local_cache: Path
    # A cache made of parts (columns) named by URL is written there in place, each part
    # uploaded by whoever writes it: nothing of it is staged locally.
    cache_in_place: bool = False


@dataclass(frozen=True)
class IndexPlan:
    """Every decision of an index run, read by its stages.

    ``refs_path`` and ``cache_path`` are the local files written (inside the staging
    folder for outputs named by URL; ``cache_path`` is the input itself when
    ``zero_copy``); ``refs_target`` is where the references end up, as the user named
    them (a path or URL, None when none are written).
    """

    sources: tuple[Source, ...]
    fingerprints: tuple[Fingerprint, ...]
    refs_format: RefsFormat
    cache_layout: LayoutName
    refs_path: Path | None
    cache_path: Path
    refs_target: Path | str | None
    cache_location: str  # the cache as the store's attributes name it: file:// URL or upload URL
    public_cache_url: str | None  # where readers of the references find it, when not cache_location
    zero_copy: bool
    partitioned: bool
    remote: RemotePlan | None
    options: IndexOptions

    @property
    def chunk_length_for(self) -> ChunkLengthRule:
        """Variants per chunk for a header, as asked or sized from its samples by the
        layout, once the fields are checked against it (what the scan is handed)."""
        o = self.options
        return chunk_length_rule(self.cache_layout, o.variants_chunk_size, o.field_choice, self.sources[0])

    @property
    def layout(self) -> CacheLayout:
        """The cache's layout, with the run's options."""
        o = self.options
        return layout_writer(self.cache_layout, o.samples_chunk_size, o.local_alleles, o.field_choice)

    def field_map(self, header: BCFHeader) -> FieldMap:
        """The arrays of the header's INFO/FORMAT fields under the run's choice
        (:meth:`ChunkLengthRule.field_map <vcfvirtual.scan.chunking.ChunkLengthRule.field_map>`)."""
        return self.chunk_length_for.field_map(header)


def plan_index(bcf_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], options: IndexOptions) -> IndexPlan:
    """Check the inputs and options of an index run and name its outputs.

    Parameters
    ----------
    bcf_path : str, path, or a sequence of them
        The BCF or VCF file(s) to index; URLs are kept as strings.
    options : IndexOptions
        The run's options.

    Returns
    -------
    IndexPlan
        The run's decisions. Nothing is created on disk: the staging folder of a
        run with URLs is only named.

    Raises
    ------
    VcfVirtualError
        An input given twice, unreadable or missing; an unknown references format or
        cache layout; a chunk size or worker count below 1; several inputs with no
        output named; URLs with several inputs or workers, a remote VCF, or non-JSON
        references to a URL; a cache path containing '#' or '?'.
    OutputExistsError
        An output named as a folder (ending in a separator), or naming an input or the
        other output.
    """
    sources = normalise_sources(bcf_path)
    if options.refs_format not in REFS_FORMATS:
        raise VcfVirtualError(
            None, f"unknown references format {options.refs_format!r}", hint=f"use one of {REFS_FORMATS}"
        )
    partitioned = len(sources) > 1 or options.workers > 1 or options.dask_client is not None
    _refuse_folder_names(options.refs_path, options.cache_path)
    _check_numbers(options)
    # An uncompressed BCF is its own raw cache: the references point into it, no copy.
    # Asking for another layout still writes a cache. (A run with URLs gets a cache: the
    # references must name local or uploaded bytes.) Chosen first: it names the cache.
    with_urls = _run_urls(sources, options) != (None, None, None)
    single_plain = len(sources) == 1 and not with_urls and _is_uncompressed(sources[0], options.storage_options)
    layout = layout_name(options.cache_layout) or (STREAM_LAYOUT if single_plain else DEFAULT_LAYOUT)
    remote = _plan_remote(sources, options, partitioned, layout)
    refs_path, cache_path = _local_outputs(sources, options, remote, layout)
    fingerprints = tuple(_source_fingerprint(p, options.storage_options) for p in sources)
    zero_copy = single_plain and LAYOUT_WRITERS[layout].uncompressed_stream
    if zero_copy:
        cache_path = Path(sources[0])
    _refuse_url_characters(cache_path)
    _refuse_overlaps(sources, None if zero_copy else cache_path, refs_path)
    _check_vcf_fields(sources, options)
    cache_url = remote.cache_url if remote is not None else None
    return IndexPlan(
        sources=sources,
        fingerprints=fingerprints,
        refs_format=options.refs_format,
        cache_layout=layout,
        refs_path=refs_path,
        cache_path=cache_path,
        refs_target=(remote.refs_url if remote is not None else None) or refs_path,
        cache_location=cache_url or "file://" + os.path.abspath(cache_path),
        public_cache_url=options.cache_url or cache_url,
        zero_copy=zero_copy,
        partitioned=partitioned,
        remote=remote,
        options=options,
    )


@dataclass(frozen=True)
class AppendPlan:
    """What an append run was asked: the new files (and their fingerprints), the
    references of the store they grow, and the run's options."""

    sources: tuple[Source, ...]
    fingerprints: tuple[Fingerprint, ...]
    refs_path: Path
    options: IndexOptions


# Options an append takes from the store it grows: asking for anything else is refused.
# (The chunk sizes may be given as the store has them: checked once it is read.)
_STORE_OPTIONS = {
    "cache_path": None,
    "cache_layout": None,
    "local_alleles": False,
    "cache_url": None,
    "refs_format": "json",
    "rename_fields": None,
    "fields": None,
    "exclude_fields": None,
}


def plan_append(
    bcf_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], options: IndexOptions
) -> AppendPlan:
    """Check the inputs and options of an append run (``index --append``).

    Raises
    ------
    VcfVirtualError
        No references named, or none there; references named by URL; an option the
        store decides (its chunking, layout, fields, cache) asked for; a file given twice.
    """
    refs = options.refs_path
    if refs is None or refs is False:
        raise VcfVirtualError(None, "--append needs the references of the store to grow", hint="name them with -o")
    if storage.is_url(os.fspath(refs)):
        raise VcfVirtualError(
            refs, "--append rewrites local references, so far", hint="download them, append, and upload them again"
        )
    refs_path = Path(refs)
    if not os.path.lexists(refs_path):
        raise VcfVirtualError(
            refs_path, "no references to append to", hint="index the first files without --append, then append"
        )
    asked = [
        f"{name}="
        for name, default in _STORE_OPTIONS.items()
        if getattr(options, name) != default and not (default is None and not getattr(options, name))
    ]
    if asked:
        raise VcfVirtualError(
            refs_path,
            f"--append keeps the store's own chunking, layout and fields: {', '.join(asked)} asked for",
            hint="leave them out: the grown store is chunked, laid out and its fields chosen as it was",
        )
    _check_numbers(options)
    sources = normalise_sources(bcf_path)
    fingerprints = tuple(_source_fingerprint(p, options.storage_options) for p in sources)
    _refuse_overlaps(sources, None, refs_path)
    return AppendPlan(sources, fingerprints, refs_path, options)


def references_path(
    bcf_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    refs_path: OutputArg = None,
    cache_path: str | os.PathLike[str] | None = None,
    refs_format: RefsFormat = "json",
) -> Path | str | None:
    """Where :func:`vcfvirtual.index` writes the references for these arguments.

    Parameters
    ----------
    bcf_path : str, path, or a sequence of them
        The input file(s), as given to :func:`vcfvirtual.index`.
    refs_path : str, path, False or None
        The references asked for; ``None`` for the default.
    cache_path : str, path or None
        The cache asked for (several inputs name the references after it).
    refs_format : {"json", "parquet", "icechunk"}
        The references' format, which gives the default's suffix.

    Returns
    -------
    Path, str or None
        ``refs_path`` when given (a URL is returned as it is), else the default named
        after the input (or the cache); None when ``refs_path`` is False.

    Raises
    ------
    VcfVirtualError
        An input given twice, or several inputs with neither output named.
    """
    if isinstance(refs_path, str) and storage.is_url(refs_path):
        return refs_path
    return _output_paths(normalise_sources(bcf_path), refs_path, cache_path, refs_format)[0]


def normalise_sources(
    bcf_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
) -> tuple[Source, ...]:
    """The input file(s) as paths (URLs kept as strings); the same file twice would
    double its records."""
    if isinstance(bcf_path, (str, os.PathLike)):
        return (_source(bcf_path),)
    sources = tuple(_source(p) for p in bcf_path)
    if not sources:
        raise VcfVirtualError(None, "no input files given")
    seen: dict[str, Source] = {}
    for p in sources:
        key = p if isinstance(p, str) else os.path.realpath(p)
        if key in seen:
            raise VcfVirtualError(p, f"given twice (also as {seen[key]})", hint="name each input file once")
        seen[key] = p
    return sources


def _source(p: str | os.PathLike[str]) -> Source:
    return p if isinstance(p, str) and storage.is_url(p) else Path(p)


def _check_numbers(options: IndexOptions) -> None:
    if options.cache_layout is not None and options.cache_layout not in LAYOUTS:
        raise VcfVirtualError(None, f"unknown cache layout {options.cache_layout!r}", hint=f"use one of {LAYOUTS}")
    if options.variants_chunk_size is not None and options.variants_chunk_size < 1:
        raise VcfVirtualError(None, f"variants chunk size must be at least 1, got {options.variants_chunk_size}")
    if options.workers < 1:
        raise VcfVirtualError(None, f"workers must be at least 1, got {options.workers}")
    scs = options.samples_chunk_size
    if isinstance(scs, bool) or not isinstance(scs, int) or scs < 1:
        raise VcfVirtualError(None, f"samples chunk size must be an integer of at least 1, got {scs!r}")


def _check_vcf_fields(sources: Sequence[Source], options: IndexOptions) -> None:
    """A local VCF's fields, checked from its header text before it is converted (a BCF's
    are checked once the scan has its header, before any record: chunk_length_for)."""
    source = next((s for s in sources if not isinstance(s, str) and is_vcf_path(s)), None)
    ids = vcf_field_ids(source) if source is not None else None
    if ids is not None:
        map_fields(*ids, options.field_choice, source)


def _refuse_folder_names(refs_path: OutputArg, cache_path: str | os.PathLike[str] | None) -> None:
    """Outputs are files (Parquet and Icechunk references: directories this tool makes
    whole), named in full: a name ending in a separator asks to write into a folder."""
    for path, option in ((refs_path, "refs_path="), (cache_path, "cache_path=")):
        if isinstance(path, str) and not storage.is_url(path) and path.endswith(("/", os.sep)):
            raise OutputExistsError(
                path,
                "names a directory; outputs are written under names of their own",
                hint=f"give {option} a file name, e.g. {path}cohort.vcz.json"
                if option == "refs_path="
                else f"give {option} a file name",
            )


def _refuse_url_characters(cache_path: Path) -> None:
    if any(c in os.path.abspath(cache_path) for c in "#?"):
        # Readers take the cache's file URL apart at these (obstore: fragment and query).
        raise VcfVirtualError(
            cache_path,
            "the cache path contains '#' or '?', which its file URL cannot carry",
            hint="choose another cache_path=",
        )


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _refuse_overlaps(sources: Sequence[Source], cache_path: Path | None, refs_path: Path | None) -> None:
    """The cache and the references must not be an input, nor each other."""
    for output, option in ((cache_path, "cache_path="), (refs_path, "refs_path=")):
        if output is None:
            continue
        for source in sources:
            if not isinstance(source, str) and _same_file(output, source):
                raise OutputExistsError(
                    output, f"is the input {source}; it would be overwritten", hint=f"give another {option}"
                )
    if cache_path is not None and refs_path is not None and _same_file(cache_path, refs_path):
        raise OutputExistsError(
            refs_path,
            "is named both as the cache and as the references",
            hint="give refs_path= and cache_path= different names",
        )


def _url(path: object) -> str | None:
    return path if isinstance(path, str) and storage.is_url(path) else None


def _run_urls(sources: Sequence[Source], options: IndexOptions) -> tuple[str | None, str | None, str | None]:
    """(a remote input, the references' URL, the cache's URL): all None for a local run."""
    source = next((s for s in sources if isinstance(s, str)), None)
    return source, _url(options.refs_path), _url(options.cache_path)


def _plan_remote(
    sources: Sequence[Source], options: IndexOptions, partitioned: bool, layout: LayoutName
) -> RemotePlan | None:
    """The URLs of a run, and where its outputs are staged (named, not created)."""
    source, refs_url, cache_url = _run_urls(sources, options)
    if (source, refs_url, cache_url) == (None, None, None):
        return None
    if partitioned and layout != "columns":
        raise VcfVirtualError(
            source or refs_url or cache_url,
            f"URLs are indexed by several workers or files in the columns layout only (not {layout})",
            hint="use the columns layout (the default), or index local files",
        )
    if source is not None and is_vcf_path(source):
        raise VcfVirtualError(
            source,
            "a remote VCF is not converted in place",
            hint="convert it to BCF (bcftools view -Ob) or download it first",
        )
    if refs_url is not None and options.refs_format != "json":
        raise VcfVirtualError(
            refs_url,
            f"{options.refs_format} references are written to local paths only, so far",
            hint="write them locally and upload the folder, or use refs_format='json'",
        )
    staging = Path(tempfile.gettempdir()) / f"vcfvirtual-upload-{os.getpid()}-{secrets.token_hex(6)}"
    local_refs, local_cache = _output_paths(
        sources,
        staging / refs_url.rsplit("/", 1)[-1] if refs_url else options.refs_path,
        staging / cache_url.rsplit("/", 1)[-1] if cache_url else options.cache_path,
        options.refs_format,
        layout,
    )
    in_place = cache_url is not None and layout == "columns"
    return RemotePlan(source, refs_url, cache_url, staging, local_refs, local_cache, in_place)


def _local_outputs(
    sources: Sequence[Source], options: IndexOptions, remote: RemotePlan | None, layout: LayoutName
) -> tuple[Path | None, Path]:
    """(references, cache): the local files the run writes."""
    if remote is not None:
        return remote.local_refs, remote.local_cache
    return _output_paths(sources, options.refs_path, options.cache_path, options.refs_format, layout)


def _output_paths(
    sources: Sequence[Source],
    refs_path: OutputArg,
    cache_path: str | os.PathLike[str] | None,
    refs_format: RefsFormat,
    layout: LayoutName | None = None,
) -> tuple[Path | None, Path]:
    """(references, cache) paths: asked for, or named after the input."""
    suffix = REFS_SUFFIXES[refs_format]
    default_refs: Path | None
    default_cache: Path | None
    if len(sources) == 1:
        # A remote BCF's outputs default to the working directory, under its name.
        source = sources[0]
        local = Path(source.rsplit("/", 1)[-1]) if isinstance(source, str) else source
        default_refs = local.with_name(local.name + outputs.REFS_SUFFIX.removesuffix(".json") + suffix)
        default_cache = local.with_name(local.name + _cache_suffix(layout))
    else:
        # Several inputs have no one name to derive outputs from: the caller names the store.
        if not refs_path and not cache_path:
            raise VcfVirtualError(
                None,
                f"{len(sources)} input files: name the store to write",
                hint="give refs_path= (and optionally cache_path=)",
            )
        cache_suffix = _cache_suffix(layout).removeprefix(".vcz")
        stem = Path(refs_path) if refs_path else None
        default_cache = stem.with_name(stem.name.removesuffix(suffix) + cache_suffix) if stem else None
        cache = Path(cache_path) if cache_path else None
        # Either layout's suffix: a cache named by hand may be of another layout than asked.
        bare = cache.name if cache else ""
        for other in sorted({w.suffix for w in LAYOUT_WRITERS.values()}):
            bare = bare.removesuffix(other.removeprefix(".vcz"))
        default_refs = cache.with_name(bare + suffix) if cache else None
    cache = Path(cache_path) if cache_path else default_cache
    assert cache is not None  # several inputs: one of the two names was given, checked above
    refs = None if refs_path is False else Path(refs_path) if refs_path else default_refs
    return refs, cache


def _cache_suffix(layout: LayoutName | None) -> str:
    """The default suffix of a cache of ``layout`` (None: a BCF stream's)."""
    return LAYOUT_WRITERS[layout or "raw"].suffix


def _source_fingerprint(path: Source, storage_options: dict | None = None) -> Fingerprint:
    if isinstance(path, str):
        return storage.fingerprint(path, storage_options)
    try:
        with open(path, "rb"):
            pass
        return Fingerprint.of(path)
    except IsADirectoryError:
        raise VcfVirtualError(path, "cannot read: it is a directory", hint="give the path of a BCF file") from None
    except OSError as e:
        raise VcfVirtualError(path, f"cannot read: {e.strerror}") from None


def _is_uncompressed(path: Source, storage_options: dict | None = None) -> bool:
    """An uncompressed BCF (not BGZF, not VCF); empty files are left to the scan to report."""
    if is_vcf_path(path):
        return False
    try:
        with storage.open_input(path, storage_options) if isinstance(path, str) else open(path, "rb") as f:
            return f.read(2) not in (bgzf.GZIP_MAGIC, b"")
    except OSError:
        return False  # unreadable: its fingerprint, taken next, names the problem
