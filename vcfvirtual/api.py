"""The library entry points: index a BCF, open what was indexed."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

import numpy as np
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr.manifests import ManifestStore

from . import bgzf
from . import cache as cache_mod
from . import manifest, transcode, writers
from .errors import OutputWriteError, StaleCacheError, VcfVirtualError
from .fingerprint import Fingerprint
from .scan import scan_bcf

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
) -> ManifestStore:
    """Index ``bcf_path``: write the transcode cache and Kerchunk JSON, return the store.

    The returned :class:`~virtualizarr.manifests.ManifestStore` reads directly with
    ``xr.open_zarr(store, zarr_format=3, consolidated=False)``. ``refs_path=False``
    skips the Kerchunk JSON. Outputs default to ``<bcf>.vcz.json`` and
    ``<bcf>.vcz.cache.bcf`` next to the BCF; existing outputs need ``force=True``.
    ``inflate_threads`` > 0 inflates BGZF blocks on that many threads ahead of the scan.
    ``cache_url`` is where readers of the Kerchunk JSON will find the cache (e.g. where it
    will be uploaded: ``s3://bucket/path/``; a URL ending in ``/`` gets the cache's name);
    by default its local path. The returned store reads the local cache.
    ``refs_format="parquet"`` writes Kerchunk Parquet references (a directory, default
    ``<bcf>.vcz.parq``) instead of JSON, for stores with millions of chunks;
    ``"icechunk"`` an Icechunk repository (default ``<bcf>.vcz.icechunk``) whose arrays are
    virtual chunks of the cache.
    """
    bcf_path = Path(bcf_path)
    default_refs, default_cache = cache_mod.default_paths(bcf_path)
    cache_path = Path(cache_path) if cache_path else default_cache
    if refs_format not in REFS_FORMATS:
        raise VcfVirtualError(None, f"unknown references format {refs_format!r}", hint=f"use one of {REFS_FORMATS}")
    if refs_format != "json":
        suffix = {"parquet": ".parq", "icechunk": ".icechunk"}[refs_format]
        default_refs = default_refs.with_name(default_refs.name.removesuffix(".json") + suffix)
    refs_path = None if refs_path is False else Path(refs_path) if refs_path else default_refs
    if cache_layout is not None and cache_layout not in cache_mod.LAYOUTS:
        raise VcfVirtualError(None, f"unknown cache layout {cache_layout!r}", hint=f"use one of {cache_mod.LAYOUTS}")
    if variants_chunk_size is not None and variants_chunk_size < 1:
        raise VcfVirtualError(None, f"variants chunk size must be at least 1, got {variants_chunk_size}")
    try:
        source = Fingerprint.of(bcf_path)
        with open(bcf_path, "rb") as f:
            uncompressed = not transcode.is_vcf_path(bcf_path) and f.read(2) not in (bgzf.GZIP_MAGIC, b"")
    except IsADirectoryError:
        raise VcfVirtualError(bcf_path, "cannot read: it is a directory", hint="give the path of a BCF file") from None
    except OSError as e:
        raise VcfVirtualError(bcf_path, f"cannot read: {e.strerror}") from None
    # An uncompressed BCF is its own raw cache: the references point into it, no copy.
    # Asking for the bgzf layout still compresses it into a cache.
    cache_layout = cache_layout or ("raw" if uncompressed else "bgzf")
    zero_copy = uncompressed and cache_layout == "raw"
    if zero_copy:
        cache_path = bcf_path
    if any(c in os.path.abspath(cache_path) for c in "#?"):
        # Readers take the cache's file URL apart at these (obstore: fragment and query).
        raise VcfVirtualError(cache_path, "the cache path contains '#' or '?', which its file URL cannot carry",
                              hint="choose another --cache path")
    if not force:
        for p in ((None if zero_copy else cache_path), refs_path):
            if p is not None and p.exists():
                raise cache_mod.OutputExistsError(p, "output already exists", hint="pass --force to overwrite it")

    for output in (cache_path, refs_path):
        if output is not None:
            for stale in cache_mod.remove_stale_temporaries(output):
                logger.warning("removed %s, left by an index run that was killed", stale)
    scan_path = bcf_path
    if transcode.is_vcf_path(bcf_path):
        # VCF input: htslib writes it as a BCF first (named as a temporary of the cache,
        # so a killed run's copy is cleaned up like any other).
        scan_path = cache_path.with_name(f".{cache_path.name}.tmp-vcf-{os.getpid()}")
        logger.info("%s: VCF input, converting to BCF with htslib", bcf_path)
        try:
            transcode.vcf_to_bcf(bcf_path, scan_path)
        except BaseException:
            scan_path.unlink(missing_ok=True)
            raise
    tmp_refs = cache_mod.temporary_name(refs_path) if refs_path is not None else None
    try:
        # The cache is renamed into place before the references that point at it.
        writing = contextlib.nullcontext(bcf_path) if zero_copy else cache_mod.atomic_output(cache_path, force=True)
        with writing as tmp_cache:
            # The scan reduces what it learns per chunk (and the BGZF cache lays chunks
            # out as it goes), so N is fixed from the header: samples, assuming diploid.
            def chunk_length_for(header):
                return variants_chunk_size or manifest.default_chunk_length(len(header.samples), 2)

            if zero_copy:
                scan = scan_bcf(scan_path, chunk_length_for, progress=progress, threads=inflate_threads)
                ranges = None
            elif cache_layout == "bgzf":
                scan, starts, end = cache_mod.write_bgzf_cache(
                    scan_path, tmp_cache, chunk_length_for, progress=progress, threads=inflate_threads)
                ranges = (starts, np.append(starts[1:], np.uint64(end)) - starts)
            else:
                scan = cache_mod.write_raw_cache(scan_path, tmp_cache, chunk_length_for, progress=progress,
                                                 threads=inflate_threads)
                ranges = None
            # A chunk longer than the array only makes the chunk grid irregular; with at
            # most one chunk, the per-chunk summaries hold for any longer N.
            chunk_length = max(1, min(scan.chunk_length, scan.num_records))
            if not source.same_stat(bcf_path):
                raise StaleCacheError(bcf_path, "the BCF changed while it was being indexed",
                                      hint="index it again once nothing writes to it")
            n = scan.num_records
            # Not percent-encoded: obstore and fsspec take the path after file:// literally.
            local_cache_url = "file://" + os.path.abspath(cache_path)
            attrs = {
                "vcfvirtual": {
                    # Fingerprints let readers refuse a cache or source that has changed.
                    "source": {"path": os.path.abspath(bcf_path), **source.to_json()},
                    "cache": {"url": local_cache_url, "layout": cache_layout, **Fingerprint.of(tmp_cache).to_json()},
                    "variants_chunk_size": chunk_length,
                    "zero_copy": zero_copy,
                }
            }
            try:
                group = manifest.build_group(scan, local_cache_url, chunk_length, ranges=ranges, layout=cache_layout,
                                             extra_attributes=attrs)
            except VcfVirtualError as e:
                if e.path is None:  # pure builders do not know the file: name it here
                    raise type(e)(bcf_path, e.problem, offset=e.offset, hint=e.hint) from None
                raise
            if tmp_refs is not None:
                try:
                    public = writers.public_cache_url(cache_url, cache_path.name) if cache_url else None
                    if refs_format == "icechunk":
                        if public and not public.startswith("file://"):
                            raise VcfVirtualError(None, "Icechunk output reads local caches only, so far",
                                                  hint="leave out --cache-url, or write json")
                        writers.write_icechunk(group, tmp_refs, public or local_cache_url)
                    else:
                        write = (writers.write_kerchunk_parquet if refs_format == "parquet"
                                 else writers.write_kerchunk_json)
                        write(group, tmp_refs, cache_url=public)
                except OSError as e:
                    raise OutputWriteError(refs_path, f"cannot write the references: {e.strerror}",
                                           hint=cache_mod.write_hint(e, "--output")) from None
        if tmp_refs is not None:
            if refs_path.is_dir():
                shutil.rmtree(refs_path)  # a directory cannot be replaced in one rename
            os.replace(tmp_refs, refs_path)
    except OutputWriteError as e:
        if tmp_refs is not None:
            _remove(tmp_refs)
        # Name the output the user asked for, not its temporary.
        path = refs_path if "references" in e.problem else cache_path
        raise OutputWriteError(path, e.problem, hint=e.hint) from None
    except BaseException:
        if tmp_refs is not None:
            _remove(tmp_refs)
        raise
    finally:
        if scan_path != bcf_path:
            scan_path.unlink(missing_ok=True)
    logger.info("%s: %d records in %d-variant chunks -> %s", bcf_path, n, chunk_length, cache_path)
    return ManifestStore(group, registry=local_registry())


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def local_registry() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": LocalStore()})


open_store = writers.open_store
