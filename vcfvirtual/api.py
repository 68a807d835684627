"""The library entry points: index a BCF, open what was indexed."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from vcfvirtual_codec.bcf import bgzf
from virtualizarr.manifests import ManifestStore

from .bcf import vcf_input as transcode
from .bcf.vcf_input import as_bcf
from .cache.layouts import LAYOUTS
from .cache.write import write_cache_partitioned, write_cache_serial
from .errors import OutputExistsError, OutputWriteError, StaleCacheError, VcfVirtualError
from .io import outputs
from .io import remote as storage
from .io.fingerprint import Fingerprint
from .manifests import vcf_zarr as manifest
from .manifests.vcf_zarr import build_store_group
from .refs.write import write_references
from .scan.scanner import scan_bcf

logger = logging.getLogger(__name__)
REFS_FORMATS = ("json", "parquet", "icechunk")


def index(
    bcf_path,
    *,
    refs_path=None,
    cache_path=None,
    variants_chunk_size: int | None = None,
    cache_layout: str | None = None,
    force: bool = False,
    progress: bool | None = None,
    inflate_threads: int = 0,
    cache_url: str | None = None,
    refs_format: str = "json",
    workers: int = 1,
    dask_client=None,
    storage_options: dict | None = None,
) -> ManifestStore:
    """Index ``bcf_path``: write the transcode cache and Kerchunk JSON, return the store.

    The returned :class:`~virtualizarr.manifests.ManifestStore` reads directly with
    ``xr.open_zarr(store, zarr_format=3, consolidated=False)``. ``refs_path=False``
    skips the Kerchunk JSON. Outputs default to ``<bcf>.vcz.json`` and
    ``<bcf>.vcz.cache.bcf`` next to the BCF; existing outputs need ``force=True``, and
    only outputs vcfvirtual wrote (recognised by their contents) are ever replaced:
    anything else under an output's name (a directory, another file, a symbolic link)
    is refused with :class:`~vcfvirtual.errors.OutputExistsError`.

    ``bcf_path`` may be a list of files (e.g. one per chromosome, same samples): one
    store holds their records in the order given. Their headers must agree (samples,
    contigs, field definitions); the store keeps the first one's. Name the outputs
    (``refs_path``; the cache defaults to its name with ``.cache.bcf``).

    ``workers`` > 1 scans files, and parts of large BGZF files, in that many processes;
    ``dask_client`` (a ``distributed.Client``) scans them on its cluster instead, whose
    workers must see the same paths. The store is the same as a serial run's.
    ``inflate_threads`` > 0 inflates BGZF blocks on that many threads ahead of a serial scan.
    ``cache_url`` is where readers of the Kerchunk JSON will find the cache (e.g. where it
    will be uploaded: ``s3://bucket/path/``; a URL ending in ``/`` gets the cache's name);
    by default its local path. The returned store reads the local cache.
    The BCF, the cache and the references may be URLs (``s3://``, ``gs://``; the BCF also
    ``https://``), reached through fsspec with ``storage_options`` (e.g. ``{"endpoint_url":
    ..., "key": ..., "secret": ...}``): the BCF is streamed once, outputs are written
    locally and uploaded when complete. One BCF per store, scanned serially, so far.
    ``refs_format="parquet"`` writes Kerchunk Parquet references (a directory, default
    ``<bcf>.vcz.parq``) instead of JSON, for stores with millions of chunks;
    ``"icechunk"`` an Icechunk repository (default ``<bcf>.vcz.icechunk``) whose arrays are
    virtual chunks of the cache.
    """
    sources = _sources(bcf_path)
    if refs_format not in REFS_FORMATS:
        raise VcfVirtualError(None, f"unknown references format {refs_format!r}", hint=f"use one of {REFS_FORMATS}")
    partitioned = len(sources) > 1 or workers > 1 or dask_client is not None
    _refuse_folder_names(refs_path, cache_path)
    remote = _Remote.plan(sources, refs_path, cache_path, refs_format, partitioned, storage_options)
    if remote is not None:
        refs_path, cache_path = remote.local_refs, remote.local_cache
    refs_path, cache_path = _output_paths(sources, refs_path, cache_path, refs_format)
    if remote is not None:
        remote.local_refs, remote.local_cache = refs_path, cache_path
    if cache_layout is not None and cache_layout not in LAYOUTS:
        raise VcfVirtualError(None, f"unknown cache layout {cache_layout!r}", hint=f"use one of {LAYOUTS}")
    if variants_chunk_size is not None and variants_chunk_size < 1:
        raise VcfVirtualError(None, f"variants chunk size must be at least 1, got {variants_chunk_size}")
    if workers < 1:
        raise VcfVirtualError(None, f"workers must be at least 1, got {workers}")
    fingerprints = [_source_fingerprint(p, storage_options) for p in sources]
    uncompressed = [_is_uncompressed(p, storage_options) for p in sources]
    # An uncompressed BCF is its own raw cache: the references point into it, no copy.
    # Asking for the bgzf layout still compresses it into a cache.
    # (A remote uncompressed BCF gets a cache: the references must name local or uploaded bytes.)
    single_plain = len(sources) == 1 and uncompressed[0] and remote is None
    cache_layout = cache_layout or ("raw" if single_plain else "bgzf")
    zero_copy = single_plain and cache_layout == "raw"
    if zero_copy:
        cache_path = sources[0]
    if any(c in os.path.abspath(cache_path) for c in "#?"):
        # Readers take the cache's file URL apart at these (obstore: fragment and query).
        raise VcfVirtualError(
            cache_path,
            "the cache path contains '#' or '?', which its file URL cannot carry",
            hint="choose another cache_path=",
        )
    _refuse_overlaps(sources, None if zero_copy else cache_path, refs_path)
    # A killed run's leftovers go first: an output it had set aside is put back, and is
    # then judged like any existing output.
    for output in (cache_path, refs_path):
        if output is not None:
            for stale in outputs.remove_stale_temporaries(output):
                logger.warning("removed %s, left by an index run that was killed", stale)
    # Only outputs of this tool are replaced, and only with force.
    if not zero_copy:
        outputs.refuse_foreign_output(cache_path, outputs.CACHE, force=force, option="cache_path=")
    if refs_path is not None:
        outputs.refuse_foreign_output(refs_path, outputs.REFS, force=force, option="refs_path=")
    if remote is not None and not force:
        remote.refuse_existing()

    def chunk_length_for(header):
        return variants_chunk_size or manifest.default_chunk_length(len(header.samples), 2)

    tmp_refs = outputs.temporary_name(refs_path) if refs_path is not None else None
    try:
        if remote is not None:
            remote.stage()  # only now that everything is checked: removed on every way out below
        with as_bcf(sources, cache_path) as scan_paths:
            # The cache is renamed into place before the references that point at it.
            writing = contextlib.nullcontext(sources[0]) if zero_copy else outputs.atomic_output(cache_path, force=True)
            with writing as tmp_cache:
                if zero_copy:
                    scan = scan_bcf(scan_paths[0], chunk_length_for, progress=progress, threads=inflate_threads)
                    ranges = None
                elif partitioned:
                    scan, ranges = write_cache_partitioned(
                        scan_paths,
                        tmp_cache,
                        cache_path,
                        cache_layout,
                        chunk_length_for,
                        workers,
                        dask_client,
                        progress,
                    )
                else:
                    fileobj = storage.open_input(sources[0], storage_options) if remote and remote.source else None
                    scan, ranges = write_cache_serial(
                        scan_paths[0], tmp_cache, cache_layout, chunk_length_for, progress, inflate_threads, fileobj
                    )
                for path, fingerprint in zip(sources, fingerprints):
                    same = (
                        storage.unchanged(path, fingerprint, storage_options)
                        if storage.is_url(path)
                        else fingerprint.same_stat(path)
                    )
                    if not same:
                        raise StaleCacheError(
                            path,
                            "the BCF changed while it was being indexed",
                            hint="index it again once nothing writes to it",
                        )
                cache_location = remote.cache_location if remote else "file://" + os.path.abspath(cache_path)
                group = build_store_group(
                    scan, sources, fingerprints, cache_location, tmp_cache, cache_layout, ranges, zero_copy
                )
                if tmp_refs is not None:
                    write_references(
                        group,
                        tmp_refs,
                        refs_path,
                        refs_format,
                        cache_url or remote_public(remote),
                        cache_path,
                        cache_location,
                    )
            if remote is not None:
                remote.upload_cache()
        if tmp_refs is not None:
            outputs.replace_output(tmp_refs, refs_path)
        if remote is not None:
            remote.upload_refs()
    except OutputWriteError as e:
        if remote is not None:
            remote.abandon()
            if storage.is_url(e.path or ""):
                raise
        if tmp_refs is not None:
            _remove(tmp_refs)
        # Name the output the user asked for, not its temporary: the references' writer
        # names them already; the cache's names its temporary.
        path = refs_path if refs_path is not None and e.path == str(refs_path) else cache_path
        raise OutputWriteError(path, e.problem, hint=e.hint) from None
    except BaseException:
        if tmp_refs is not None:
            _remove(tmp_refs)
        if remote is not None:
            remote.abandon()
        raise
    if remote is not None:
        remote.finish()
        if remote.cache_url:
            return ManifestStore(group, registry=storage.object_store_registry(remote.cache_url, storage_options))
    logger.info(
        "%s: %d records in %d-variant chunks -> %s",
        ", ".join(map(str, sources)),
        scan.num_records,
        group.metadata.attributes["vcfvirtual"]["variants_chunk_size"],
        cache_path,
    )
    return ManifestStore(group, registry=local_registry())


def _source(p):
    return p if storage.is_url(p) else Path(p)


def _sources(bcf_path) -> list:
    """The input file(s) as paths (URLs kept as strings); the same file twice would
    double its records."""
    if isinstance(bcf_path, (str, os.PathLike)):
        return [_source(bcf_path)]
    sources = [_source(p) for p in bcf_path]
    if not sources:
        raise VcfVirtualError(None, "no input files given")
    seen = {}
    for p in sources:
        key = p if storage.is_url(p) else os.path.realpath(p)
        if key in seen:
            raise VcfVirtualError(p, f"given twice (also as {seen[key]})", hint="name each input file once")
        seen[key] = p
    return sources


def _refuse_folder_names(refs_path, cache_path) -> None:
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


def _refuse_overlaps(sources, cache_path, refs_path) -> None:
    """The cache and the references must not be an input, nor each other."""

    def same(a, b):
        try:
            return os.path.samefile(a, b)
        except OSError:
            return os.path.abspath(a) == os.path.abspath(b)

    for output, option in ((cache_path, "cache_path="), (refs_path, "refs_path=")):
        if output is None:
            continue
        for source in sources:
            if not storage.is_url(source) and same(output, source):
                raise OutputExistsError(
                    output, f"is the input {source}; it would be overwritten", hint=f"give another {option}"
                )
    if cache_path is not None and refs_path is not None and same(cache_path, refs_path):
        raise OutputExistsError(
            refs_path,
            "is named both as the cache and as the references",
            hint="give refs_path= and cache_path= different names",
        )


def references_path(bcf_path, refs_path=None, cache_path=None, refs_format: str = "json"):
    """Where :func:`index` writes the references for these arguments: ``refs_path`` when
    given (a path or URL), else the default named after the input (or the cache)."""
    if isinstance(refs_path, str) and storage.is_url(refs_path):
        return refs_path
    return _output_paths(_sources(bcf_path), refs_path, cache_path, refs_format)[0]


def _output_paths(sources: list[Path], refs_path, cache_path, refs_format: str) -> tuple[Path | None, Path]:
    """(references, cache) paths: asked for, or named after the input."""
    suffix = {"json": ".json", "parquet": ".parq", "icechunk": ".icechunk"}[refs_format]
    if len(sources) == 1:
        # A remote BCF's outputs default to the working directory, under its name.
        local = Path(sources[0].rsplit("/", 1)[-1]) if storage.is_url(sources[0]) else sources[0]
        default_refs, default_cache = outputs.default_paths(local)
        default_refs = default_refs.with_name(default_refs.name.removesuffix(".json") + suffix)
    else:
        # Several inputs have no one name to derive outputs from: the caller names the store.
        if not refs_path and not cache_path:
            raise VcfVirtualError(
                None,
                f"{len(sources)} input files: name the store to write",
                hint="give refs_path= (and optionally cache_path=)",
            )
        if refs_path:
            stem = Path(refs_path)
            default_cache = stem.with_name(stem.name.removesuffix(suffix) + ".cache.bcf")
        else:
            default_cache = None
        default_refs = (
            Path(cache_path).with_name(Path(cache_path).name.removesuffix(".cache.bcf") + suffix)
            if cache_path
            else None
        )
    cache_path = Path(cache_path) if cache_path else default_cache
    refs_path = None if refs_path is False else Path(refs_path) if refs_path else default_refs
    return refs_path, cache_path


def _source_fingerprint(path, storage_options=None) -> Fingerprint:
    if storage.is_url(path):
        return storage.fingerprint(path, storage_options)
    try:
        with open(path, "rb"):
            pass
        return Fingerprint.of(path)
    except IsADirectoryError:
        raise VcfVirtualError(path, "cannot read: it is a directory", hint="give the path of a BCF file") from None
    except OSError as e:
        raise VcfVirtualError(path, f"cannot read: {e.strerror}") from None


def _is_uncompressed(path, storage_options=None) -> bool:
    """An uncompressed BCF (not BGZF, not VCF); empty files are left to the scan to report."""
    if transcode.is_vcf_path(path):
        return False
    with storage.open_input(path, storage_options) if storage.is_url(path) else open(path, "rb") as f:
        return f.read(2) not in (bgzf.GZIP_MAGIC, b"")


def remote_public(remote) -> str | None:
    return remote.cache_location if remote is not None and storage.is_url(remote.cache_location) else None


class _Remote:
    """A run whose BCF or outputs are URLs: outputs are made in a local staging folder
    and uploaded, the cache before the references that name it."""

    def __init__(self, source, refs_url, cache_url, storage_options, staging: Path, local_refs, local_cache):
        self.source = source  # the BCF's URL, or None when it is local
        self.refs_url, self.cache_url = refs_url, cache_url
        self.storage_options = storage_options
        self.staging = staging
        self.local_refs, self.local_cache = local_refs, local_cache
        self.uploaded: list[str] = []

    @classmethod
    def plan(cls, sources, refs_path, cache_path, refs_format, partitioned, storage_options):
        refs_url = refs_path if isinstance(refs_path, str) and storage.is_url(refs_path) else None
        cache_url = cache_path if isinstance(cache_path, str) and storage.is_url(cache_path) else None
        source = next((s for s in sources if storage.is_url(s)), None)
        if source is None and refs_url is None and cache_url is None:
            return None
        if partitioned:
            raise VcfVirtualError(
                source or refs_url or cache_url,
                "URLs are indexed one BCF at a time, serially, so far",
                hint="index local files for several files or workers=",
            )
        if source is not None and transcode.is_vcf_path(source):
            raise VcfVirtualError(
                source,
                "a remote VCF is not converted in place",
                hint="convert it to BCF (bcftools view -Ob) or download it first",
            )
        if refs_url is not None and refs_format != "json":
            raise VcfVirtualError(
                refs_url,
                f"{refs_format} references are written to local paths only, so far",
                hint="write them locally and upload the folder, or use refs_format='json'",
            )
        # Named now, so the outputs' local paths are known while checking; made by stage().
        staging = Path(tempfile.gettempdir()) / f"vcfvirtual-upload-{os.getpid()}-{secrets.token_hex(6)}"
        local_refs = staging / refs_url.rsplit("/", 1)[-1] if refs_url else refs_path
        local_cache = staging / cache_url.rsplit("/", 1)[-1] if cache_url else cache_path
        return cls(source, refs_url, cache_url, storage_options, staging, local_refs, local_cache)

    def stage(self) -> None:
        """Make the local staging folder (private, as mkdtemp makes one)."""
        self.staging.mkdir(mode=0o700)

    @property
    def cache_location(self) -> str:
        return self.cache_url or "file://" + os.path.abspath(self.local_cache)

    def refuse_existing(self) -> None:
        for url in (self.cache_url, self.refs_url):
            if url and storage.exists(url, self.storage_options):
                raise OutputExistsError(url, "output already exists", hint="pass force=True to overwrite it")

    def upload_cache(self) -> None:
        if self.cache_url:
            logger.info("uploading the cache to %s", self.cache_url)
            storage.upload(self.local_cache, self.cache_url, self.storage_options)
            self.uploaded.append(self.cache_url)

    def upload_refs(self) -> None:
        if self.refs_url:
            storage.upload(self.local_refs, self.refs_url, self.storage_options)
            self.uploaded.append(self.refs_url)

    def abandon(self) -> None:
        """A failed run: what was uploaded goes, so nothing half-made has the final names."""
        for url in self.uploaded:
            storage.remove(url, self.storage_options)
        self.finish()

    def finish(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def local_registry() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": LocalStore()})
