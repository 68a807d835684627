"""Command line: thin click commands over the library."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

# Importing this module must stay cheap (--help, relocate, inspect): the indexer's modules
# load zarr, VirtualiZarr and xarray (~1 s), so each command imports what it runs
# inside its function. The choices come from the lists' numpy-free modules.
from . import __version__, _json, interrupts
from ._gc import collector_paused
from .cache.names import LAYOUTS
from .errors import VcfVirtualError
from .interrupts import Interrupted
from .refs.formats import REFS_FORMATS, RefsFormat

if TYPE_CHECKING:
    from .api import IndexSummary

F = TypeVar("F", bound=Callable[..., Any])


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    from .scan.parallel import hold_signal

    if hold_signal(signum) or interrupts.defer(signum):
        return  # forking workers, or in native code: raised again once that is done
    # One signal is enough: further ones (a scheduler repeating its SIGTERM) must not
    # cut the cleanup short. SIGKILL still ends everything at once.
    for s in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(s) is _raise_interrupted:
            signal.signal(s, signal.SIG_IGN)
    interrupts.interrupt(signum)


@contextlib.contextmanager
def _cleanup_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into :class:`Interrupted` while a command writes, and exit
    as a process killed by that signal would report it (128 + its number), after the
    cleanup. Only the command line does this: the library leaves its host's signals alone.
    Worker processes (``-j``) leave signals to this process, which stops them and removes
    their parts (vcfvirtual.scan.parallel)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (e.g. the CLI invoked from a test's thread)
        return
    # A signal the caller set to be ignored (Ctrl-C for a shell's background job) stays so.
    previous = {
        s: signal.signal(s, _raise_interrupted)
        for s in (signal.SIGTERM, signal.SIGINT)
        if signal.getsignal(s) is not signal.SIG_IGN
    }
    previous_hook, sys.unraisablehook = sys.unraisablehook, interrupts.quiet_unraisable
    try:
        yield
    except Interrupted as e:
        click.echo(f"vcfvirtual: interrupted by {signal.Signals(e.signum).name}; temporaries removed", err=True)
        sys.exit(128 + e.signum)
    finally:
        sys.unraisablehook = previous_hook
        interrupts.clear()
        for s, handler in previous.items():
            signal.signal(s, handler)


# The library's errors name its Python arguments; the commands name their own flags.
_FLAGS = {
    "force=True": "--force",
    "refs_path=": "--output",
    "cache_path=": "--cache",
    "cache_url=": "--cache-url",
    "workers=": "--workers",
    "refs_format='json'": "--format json",
    "storage_options=": "--storage-options",
    "check=False": "--no-check",
    "source=": "--source",
}


def _fail(e: Exception) -> NoReturn:
    """One line for an error, naming the command's flags, and exit status 1."""
    if isinstance(e, OSError):
        # Not expected to reach here (the library types its errors), but never a traceback.
        where = e.filename or "<output>"
        e = VcfVirtualError(where, e.strerror or str(e))
    text = str(e)
    for argument, flag in _FLAGS.items():
        text = text.replace(argument, flag)
    click.echo(f"vcfvirtual: error: {text}", err=True)
    sys.exit(1)


def _setup_logging(verbose: int) -> None:
    """-v: vcfvirtual's own steps; -vv: its debug detail too. Other libraries (zarr,
    asyncio, fsspec...) stay at WARNING: their debug output dumps whole stores."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.getLogger("vcfvirtual").setLevel(level)
    # Icechunk's Rust side prints coloured WARN blocks about local-filesystem commits on every
    # open; they concern concurrent writers, which a vcfvirtual store never has. The command's
    # process is ours to quiet (errors still show; ICECHUNK_LOG set by the user wins); the library leaves it be.
    os.environ.setdefault("ICECHUNK_LOG", "error")


def _verbose_option(help: str = "More logging: -v for info, -vv for debug.") -> Callable[[F], F]:
    return click.option("-v", "--verbose", count=True, help=help)


def _count_option(*decls: str, minimum: int, default: int, help: str) -> Callable[[F], F]:
    """An integer option of at least ``minimum``, its default shown."""
    return click.option(*decls, type=click.IntRange(min=minimum), default=default, show_default=True, help=help)


def _workers_option(help: str) -> Callable[[F], F]:
    return _count_option("-j", "--workers", minimum=1, default=1, help=help)


def _progress_option(help: str) -> Callable[[F], F]:
    return click.option("--progress/--no-progress", default=None, help=help)


def _storage_option(help: str) -> Callable[[F], F]:
    return click.option("--storage-options", metavar="JSON", help=help)


def _check_option(help: str) -> Callable[[F], F]:
    return click.option("--check/--no-check", default=True, show_default=True, help=help)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vcfvirtual")
def main() -> None:
    """Serve BCF files as virtual VCF Zarr stores, without converting them."""
    # Before any command imports numpy: no command does linear algebra, and OpenBLAS's
    # threads, started by numpy's import and spinning while idle, cost ~60 ms of CPU a
    # process (the example's index: 330 -> 265 ms) and its workers inherit the setting.
    # A value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@main.command("index")
@click.argument("bcf", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "refs_path",
    type=click.Path(),
    help="References to write. Default: next to the BCF, <BCF>.vcz.json (<BCF>.vcz.parq for --format "
    "parquet, <BCF>.vcz.icechunk for --format icechunk); required with several BCFs.",
)
@click.option(
    "--cache",
    "cache_path",
    # A folder is a cache of the columns layout (a folder of parts) that --force may
    # replace; any other folder is refused by the index, never deleted.
    type=click.Path(),
    help="Transcode cache to write: a folder of parts in the columns layout (each written by "
    "the worker that made it), one file in bgzf/raw. Default: <BCF>.vcz.cache.columns next to "
    "the BCF (<BCF>.vcz.cache.bcf for --cache-layout bgzf/raw); with several BCFs, the --output "
    "name ending in .cache.columns (.cache.bcf).",
)
@click.option(
    "-c",
    "--variants-chunk-size",
    type=click.IntRange(min=1),
    help="Variants per chunk. Default: 1,000 in the columns layout (fewer when a chunk of "
    "every sample's calls would pass 256 MiB; 10,000 for a BCF with no samples); otherwise "
    "sized so a decoded call_genotype chunk is at most ~64 MiB, between 100 and 10,000.",
)
@click.option(
    "--cache-layout",
    type=click.Choice(LAYOUTS),
    default=None,
    help="How records are laid out in the cache. 'columns' (default for a compressed BCF): "
    "every array's chunks stored apart and compressed, samples chunked by "
    "--samples-chunk-size, so a read touches only its array and samples block (default "
    "cache <BCF>.vcz.cache.columns). 'bgzf': the BCF's own compressed blocks, re-cut so "
    "each variants chunk starts a block (about the BCF's size, a valid BCF bcftools reads, "
    "the fastest index; default cache <BCF>.vcz.cache.bcf). 'raw': the uncompressed BCF "
    "stream (many times larger; reads skip the inflate). An uncompressed BCF (bcftools "
    "view -Ou) is by default referenced as it is, with no cache (raw).",
)
@_count_option(
    "-s",
    "--samples-chunk-size",
    minimum=1,
    default=10_000,
    help="Samples per chunk of the arrays with a samples dimension (call_*), as bio2zarr's "
    "option. Used by the columns layout only: the bgzf and raw layouts keep all samples "
    "in one chunk.",
)
@click.option(
    "--local-alleles",
    is_flag=True,
    help="Expose the local alleles of bio2zarr's vcf2zarr convert --local-alleles: call_LA "
    "(each diploid call's distinct alleles), call_LAD and call_LPL in place of call_AD and "
    "call_PL, derived at read time from GT, AD and PL (nothing added to the cache). Needs "
    "diploid GT, as bio2zarr does.",
)
@_count_option(
    "--inflate-threads",
    minimum=0,
    default=0,
    help="Threads that inflate BGZF blocks ahead of the record scan. 0 inflates on "
    "the scanning thread, which measured as fast on 2 cores; try more on "
    "machines with many cores.",
)
@click.option(
    "--format",
    "refs_format",
    type=click.Choice(REFS_FORMATS),
    default="json",
    show_default=True,
    help="References to write: Kerchunk JSON; Kerchunk Parquet (a directory, default "
    "<BCF>.vcz.parq) for stores with millions of chunks; or an Icechunk repository "
    "(default <BCF>.vcz.icechunk) of virtual chunks, versioned.",
)
@click.option(
    "--cache-url",
    metavar="URL",
    help="Where readers of the Kerchunk JSON will find the cache, e.g. where you will "
    "upload it (s3://bucket/path/ or https://host/path/; a URL ending in / gets the "
    "cache's file name). Default: its local path. Change it later with "
    "vcfvirtual relocate.",
)
@_workers_option(
    "Processes that index in parallel. In the columns layout they count the records of "
    "the BCFs given, in parts (each contig, when a .csi index counts them and none is "
    "too large a share; else parts of at most 1 GiB cut at record starts the index "
    "names, or found by a block scan), then each writes parts of the cache (runs of "
    "whole variants chunks). The arrays are the same as a serial run's. Several BCFs "
    "without -j are written in one pass."
)
@click.option(
    "--dask-scheduler",
    metavar="ADDRESS",
    help="Index on a Dask cluster (e.g. tcp://host:8786) instead of local processes; "
    "its workers must see local BCFs and a local cache folder at the same paths (BCFs "
    "and a cache given as URLs they read and write themselves). Needs the distributed package.",
)
@_storage_option(
    "fsspec options for a BCF, cache or references given as a URL (s3://, gs://, "
    'https://), as JSON, e.g. \'{"endpoint_url": "http://host:9000", "anon": false}\'. '
    "Credentials otherwise come from the usual places (AWS_* variables, ~/.aws). "
    "Needs pip install 'vcfvirtual[remote]'."
)
@click.option(
    "--rename-field",
    "rename_fields",
    multiple=True,
    metavar="CATEGORY/ID=NAME",
    help="Store a field under another name, e.g. INFO/filter=filter_info makes "
    "variant_filter_info. Repeatable. The way through for a field whose array would "
    "replace a fixed one (INFO filter, id, position...; FORMAT genotype...), which is "
    "otherwise refused.",
)
@click.option(
    "--fields",
    metavar="LIST",
    help="Keep only these INFO/FORMAT fields, comma-separated, e.g. INFO/AF,FORMAT/DP "
    "(FORMAT/GT keeps the call_genotype arrays). Default: every field.",
)
@click.option(
    "--exclude-fields",
    metavar="LIST",
    help="Leave these INFO/FORMAT fields out, comma-separated, e.g. INFO/CSQ,FORMAT/PL. "
    "verify and inspect report them as omitted on request.",
)
@click.option(
    "--append",
    is_flag=True,
    help="Grow the store whose references --output names with these BCFs' records, after "
    "its own: only the new files are read, into new parts of its columns cache (the old "
    "parts are left as they are), and the references are written again. The files need "
    "the store's samples and a compatible header (as files indexed together); the store's "
    "chunking, fields and cache are kept, so --cache, -c, -s, --cache-layout, --format, "
    "--cache-url and the field options are refused with it.",
)
@click.option(
    "-f",
    "--force",
    is_flag=True,
    help="Replace existing outputs that vcfvirtual wrote (recognised by their contents). "
    "Anything else under an output's name (a directory, another file, a link) is "
    "refused, with or without --force.",
)
@_progress_option("Show a progress bar (default: only when stderr is a terminal).")
@_verbose_option()
def index_command(
    bcf: tuple[str, ...],
    dask_scheduler: str | None,
    storage_options: str | None,
    rename_fields: tuple[str, ...],
    verbose: int,
    **options: Any,
) -> None:
    """Scan BCF once and write its transcode cache and Kerchunk JSON references.

    Several BCFs (e.g. one per chromosome, same samples) make one store holding their
    records in the order given; their headers must agree on samples, contigs and fields.
    A VCF (.vcf, .vcf.gz, .vcf.bgz) is first converted to BCF with htslib; the cache then
    holds the BCF records.

    Open the result with vcfvirtual.open_store("<BCF>.vcz.json") and xarray.open_zarr.
    """
    _setup_logging(verbose)
    with collector_paused(freeze=True):  # the imported modules live as long as the process
        from .api import IndexOptions, run_index

    start = time.perf_counter()
    try:
        storage = _storage_options(storage_options)  # a typo fails before a cluster is reached
        renames = _renames(rename_fields)
        with _cleanup_on_signals(), _dask_client(dask_scheduler) as client:
            # The other options are IndexOptions' own fields, under their names.
            index_options = IndexOptions(**options, dask_client=client, storage_options=storage, rename_fields=renames)
            # The pass makes no reference cycles worth collecting: collections would only
            # walk the libraries' objects (0.3-1 s of a first run). The command owns its
            # process, so it, not the library, pauses the collector.
            with collector_paused():
                summary = run_index(bcf[0] if len(bcf) == 1 else list(bcf), index_options).summary
    except (VcfVirtualError, OSError) as e:
        _fail(e)
    click.echo(_summary(summary, time.perf_counter() - start), err=True)


_FORMAT_NAMES = {
    "json": "Kerchunk JSON references",
    "parquet": "Kerchunk Parquet references",
    "icechunk": "Icechunk repository",
}


def _summary(summary: IndexSummary, seconds: float) -> str:
    """What was written and how to open it."""
    refs = summary.references
    cache_at = summary.cache.removeprefix("file://")
    done = f"indexed {summary.records:,} records in {seconds:.2f}s"
    if summary.appended is not None:
        done = f"appended {summary.appended:,} records in {seconds:.2f}s: the store holds {summary.records:,}"
    lines = [
        f"{done}, in chunks of {summary.variants_chunk_size:,} variants",
        f"wrote  {refs}  ({_FORMAT_NAMES[summary.refs_format]})",
    ]
    if summary.zero_copy:
        lines.append(f"       no cache: the references point into {cache_at} itself (an uncompressed BCF)")
    else:
        parts = summary.cache_parts
        folder = f", a folder of {parts} part{'s' * (parts != 1)}" if parts else ""
        lines.append(f"       {cache_at}  (transcode cache, {summary.cache_layout} layout{folder})")
    lines.append(f"open:  xr.open_zarr(vcfvirtual.open_store({str(refs)!r}), consolidated=False)")
    return "\n".join(lines)


def _renames(values: tuple[str, ...]) -> dict[str, str]:
    """``--rename-field CATEGORY/ID=NAME`` options as a dict."""
    renames = {}
    for value in values:
        ident, sep, name = value.partition("=")
        if not sep or not ident.strip() or not name.strip():
            raise click.BadParameter(f"{value!r} is not CATEGORY/ID=NAME, e.g. INFO/filter=filter_info")
        renames[ident.strip()] = name.strip()
    return renames


def _storage_options(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        options = _json.loads(text)
    except json.JSONDecodeError as e:
        raise VcfVirtualError(None, f"--storage-options is not JSON ({e})") from None
    if not isinstance(options, dict):
        raise VcfVirtualError(None, "--storage-options must be a JSON object")
    return options


@contextlib.contextmanager
def _dask_client(address: str | None) -> Iterator[Any]:
    if address is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise VcfVirtualError(
            address, "--dask-scheduler needs the distributed package", hint="pip install 'vcfvirtual[dask]'"
        ) from None
    try:
        client = Client(address, timeout=30)
    except OSError as e:
        # The error names the scheduler's address where others name a file.
        raise VcfVirtualError(address, f"cannot reach the Dask scheduler ({e})") from None
    with client:
        yield client


@main.command("relocate")
@click.argument("refs", type=click.Path(dir_okay=False))
@click.argument("cache_url")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the relocated references here instead of rewriting REFS in place "
    "(an existing file there must be vcfvirtual references).",
)
@_check_option(
    "Read the cache at its new home and refuse it unless its size and sampled "
    "hash are those the references record. --no-check: point at a cache not "
    "uploaded yet."
)
@_storage_option(
    "fsspec options (JSON object) for reaching a cache URL (s3://, https://), "
    'e.g. \'{"endpoint_url": "http://host:9000"}\'.'
)
@_verbose_option()
def relocate_command(
    refs: str, cache_url: str, output: str | None, check: bool, storage_options: str | None, verbose: int
) -> None:
    """Point the Kerchunk JSON REFS at the cache's new home CACHE_URL.

    For example, after uploading the cache: vcfvirtual relocate cohort.bcf.vcz.json
    s3://bucket/cohorts/. CACHE_URL is a URL or a local path; a local folder, or a URL
    ending in /, gets the cache's file name. The cache found there must match the one
    indexed (unless --no-check). Only the cache's URL changes; the file is rewritten
    atomically. Prints the URL written.
    """
    _setup_logging(verbose)
    from .refs.relocate import relocate_file

    try:
        options = _storage_options(storage_options)
        with _cleanup_on_signals():
            out = relocate_file(refs, cache_url, output, check=check, storage_options=options)
        with open(out, encoding="utf-8") as f:
            url = json.load(f)["templates"]["cache"]  # what was written, as readers will see it
    except (VcfVirtualError, OSError) as e:
        _fail(e)
    click.echo(f"{out}: cache at {url}", err=True)


@main.command("refs")
@click.argument("store", type=click.Path())
@click.option(
    "--format",
    "refs_format",
    type=click.Choice(["json", "parquet", "icechunk"]),
    required=True,
    help="The references to write: Kerchunk JSON, Kerchunk Parquet (a directory) or an "
    "Icechunk repository (for a local cache).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(),
    help="Where to write them. Default: STORE with the format's suffix (.json, .parq, "
    ".icechunk) in place of its own, e.g. cohort.bcf.vcz.parq next to cohort.bcf.vcz.json.",
)
@click.option("--force", is_flag=True, help="Replace references vcfvirtual wrote at the output.")
@_storage_option("fsspec options (a JSON object) for a cache given as a URL.")
@_verbose_option()
def refs_command(
    store: str, refs_format: RefsFormat, output: str | None, force: bool, storage_options: str | None, verbose: int
) -> None:
    """Write the references of STORE (Kerchunk JSON or Parquet that index wrote) in another
    format, over the same cache.

    No BCF is scanned and the cache is not rewritten: the store's manifests are read back
    from STORE. The cache must still match its fingerprints (a changed cache is refused:
    index the BCF again with --force). For example, after vcfvirtual index cohort.bcf:
    vcfvirtual refs cohort.bcf.vcz.json --format icechunk.
    """
    _setup_logging(verbose)
    from .api import references_from

    names = {"json": "Kerchunk JSON", "parquet": "Kerchunk Parquet", "icechunk": "Icechunk"}
    try:
        with _cleanup_on_signals():
            out = references_from(
                store, refs_format, output, force=force, storage_options=_storage_options(storage_options)
            )
    except (VcfVirtualError, OSError) as e:
        _fail(e)
    click.echo(f"wrote  {out}  ({names[refs_format]} references, over the cache of {store})")


# --- inspect and verify --------------------------------------------------------------


@main.command("inspect")
@click.argument("store", type=click.Path())
@click.option(
    "--samples",
    is_flag=True,
    help="List the store's sample names, one per line, instead of describing it (as "
    "bcftools query -l and vcztools query -l do).",
)
@_storage_option(
    "fsspec options (a JSON object) for references or a cache given as a URL "
    "(s3://, https://), e.g. '{\"anon\": true}'."
)
@_verbose_option()
def inspect_command(store: str, samples: bool, storage_options: str | None, verbose: int) -> None:
    """Describe the store STORE (Kerchunk JSON, Parquet directory or Icechunk repository).

    Prints each array's dtype, stored bytes (the byte ranges its chunks reference, plus
    inlined chunks; variants arrays all reference the same records), decoded size, ratio,
    chunks, shape and codecs, as vcf2zarr inspect does, then the cache's location and
    layout, the sources, and whether the cache still matches the fingerprints recorded when
    it was indexed. Sizes come from the references; of the cache, only the fingerprint's
    sampled windows (at most ~2 MiB) are read.
    """
    _setup_logging(verbose)
    from .inspect import inspect_store, sample_names

    try:
        options = _storage_options(storage_options)
        if samples:
            for name in sample_names(store, storage_options=options):  # none for a sites-only store
                click.echo(name)
            return
        summary = inspect_store(store, storage_options=options)
    except VcfVirtualError as e:
        _fail(e)
    click.echo(summary.to_text())


@main.command("verify")
@click.argument("store", type=click.Path())
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="BCF",
    help="The BCF (or VCF) to compare with; repeat it for a store of several files, in "
    "the order they were indexed. Default: the sources recorded in the references.",
)
@_check_option(
    "Check the cache's fingerprints first and stop if it changed since indexing. "
    "--no-check decodes it anyway, to see which values changed."
)
@_storage_option("fsspec options (a JSON object) for references or a cache given as a URL.")
@_progress_option("Show a progress bar over records (default: only when stderr is a terminal).")
@_workers_option(
    "Processes that check chunks in parallel (each reads its chunks of the store and "
    "their records from the BCF; a BGZF BCF or VCF is needed for more than one)."
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    metavar="N",
    help="A quick check: compare only N variants chunks chosen at random (the record "
    "count and the header arrays are still checked whole). Default: every chunk.",
)
@click.option(
    "--seed",
    type=int,
    help="Seed of --sample's random choice, to repeat the same check.",
)
@_verbose_option("More output: -v lists every array compared; also info (-v) or debug (-vv) logging.")
def verify_command(
    store: str,
    sources: tuple[str, ...],
    check: bool,
    storage_options: str | None,
    progress: bool | None,
    workers: int,
    sample: int | None,
    seed: int | None,
    verbose: int,
) -> None:
    """Decode every array of STORE and compare it with htslib's reading of the source BCF.

    The source is read with htslib (through pysam, and its per-sample values as arrays)
    and encoded the way VCF Zarr 0.3 and bio2zarr store it; the store is read through its
    references and cache, a few variants chunks at a time, in -j processes.
    Prints one summary line, and a line per differing array (how many values differ,
    the first variant and sample, both values). Exit status 0 when every value is equal,
    1 on any difference or error.
    """
    _setup_logging(verbose)
    from .verify import verify_store

    try:
        report = verify_store(
            store,
            source=list(sources) or None,
            progress=progress,
            check=check,
            storage_options=_storage_options(storage_options),
            workers=workers,
            sample=sample,
            seed=seed,
        )
    except VcfVirtualError as e:
        _fail(e)
    click.echo(report.summary())
    for difference in report.differences:
        click.echo(f"  {difference.describe()}")
    for note in report.notes:
        click.echo(f"  note: {note}")
    if report.not_compared:
        click.echo(f"  not compared (no htslib counterpart): {', '.join(report.not_compared)}")
    if report.missing:
        click.echo(f"  missing (the header declares their fields): {', '.join(report.missing)}")
    if report.omitted:
        click.echo(f"  omitted on request when indexed: {', '.join(report.omitted)}")
    if verbose:
        click.echo(f"  compared: {', '.join(report.arrays_compared)}")
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":  # pragma: no cover
    main()
