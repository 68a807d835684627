"""Reference stores: Kerchunk JSON (Zarr v2 metadata), and opening it again."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from urllib.parse import urlparse

import fsspec
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore
from virtualizarr.writers.kerchunk import variable_to_kerchunk_arr_refs

from . import storage
from .errors import StaleCacheError, VcfVirtualError
from .fingerprint import Fingerprint


def kerchunk_refs(group: ManifestGroup) -> dict:
    """Kerchunk references (Zarr v2 metadata) for ``group`` through VirtualiZarr's writer.

    Each array goes through VirtualiZarr's per-array writer directly. Going through a
    virtual xarray Dataset (``ManifestStore.to_virtual_dataset``, then
    ``dataset_to_kerchunk_refs``) gives the same references but costs time quadratic in
    the number of arrays (zarr lists the whole store, and formats it, for every array it
    opens): 20-40 s for a header of 1,000 INFO fields, 0.6 s this way
    (benchmarks/wide_header.py)."""
    import ujson
    import xarray as xr

    arrays = {}
    for name, marr in group.arrays.items():
        dims = [str(d) for d in (marr.metadata.dimension_names or ())]
        # The attributes go to the array's .zattrs, as a virtual Dataset's variable holds
        # them; its metadata (.zarray) keeps none.
        bare = ManifestArray(metadata=dataclasses.replace(marr.metadata, attributes={}), chunkmanifest=marr.manifest)
        var = xr.Variable(dims, bare, attrs=dict(marr.metadata.attributes or {}))
        arrays.update({f"{name}/{key}": value
                       for key, value in variable_to_kerchunk_arr_refs(var, name, zarr_format=2).items()})
    refs = {"version": 1, "refs": {".zgroup": '{"zarr_format":2}', ".zattrs": ujson.dumps(dict(group.metadata.attributes)),
                                   **arrays}}
    for key, value in refs["refs"].items():
        if key.endswith(".zarray"):
            meta = json.loads(value)
            # xarray turns a Zarr v2 fill_value into a mask, which would make the
            # genotype 0 or the allele "" read as NaN; our values carry the spec's own
            # missing and fill sentinels, so the arrays declare no fill value.
            meta["fill_value"] = None
            refs["refs"][key] = json.dumps(meta, separators=(",", ":"))
    return refs


# Kerchunk template naming the cache: every chunk reference is ["{{cache}}", offset,
# length], so moving the cache (uploading it, sharing it) rewrites one string.
CACHE_TEMPLATE = "cache"


def with_cache_template(refs: dict, cache_url: str | None = None) -> dict:
    """Kerchunk version-1 references whose chunks name the cache through a template
    pointing at ``cache_url`` (by default where it was written); the group attributes
    record the URL too."""
    attrs = json.loads(refs["refs"][".zattrs"])
    local = attrs["vcfvirtual"]["cache"]["url"]
    cache_url = cache_url or local
    names = {local, local.removeprefix("file://")}
    template = "{{" + CACHE_TEMPLATE + "}}"
    out = {}
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value and value[0] in names:
            value = [template, *value[1:]]
        out[key] = value
    attrs["vcfvirtual"]["cache"]["url"] = cache_url
    out[".zattrs"] = json.dumps(attrs, separators=(",", ":"))
    return {"version": 1, "templates": {CACHE_TEMPLATE: cache_url}, "refs": out}


def write_kerchunk_json(group: ManifestGroup, path: Path, cache_url: str | None = None) -> None:
    from . import cache as cache_mod

    refs = with_cache_template(kerchunk_refs(group), cache_url)
    # Flushed to disk before the rename that publishes it, as the cache is: after a crash
    # the final name holds the whole old or the whole new references, never an empty file.
    with cache_mod.output_file(path, "the references", "--output", mode="w", opener=open) as f:
        json.dump(refs, f, separators=(",", ":"))


def write_kerchunk_parquet(group: ManifestGroup, path: Path, cache_url: str | None = None,
                           record_size: int = 100_000) -> None:
    """Kerchunk Parquet references (a directory) for stores with millions of chunks.

    Parquet references have no templates, so chunks name the cache's URL itself;
    relocating them means writing them again (or ``open_store(..., cache_url=...)``)."""
    from kerchunk.df import refs_to_dataframe

    refs = with_cache_template(kerchunk_refs(group), cache_url)
    refs_to_dataframe({"version": 1, "refs": _resolve_templates(refs)}, str(path), record_size=record_size)


def write_icechunk(group: ManifestGroup, path: Path, cache_url: str) -> str:
    """An Icechunk repository at ``path`` whose arrays are virtual chunks of the cache.

    The cache's folder is the repository's virtual chunk container (local files); the
    first commit holds the whole store. Returns the snapshot id."""
    icechunk = _import_icechunk(path)

    prefix = cache_url.rsplit("/", 1)[0] + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(prefix.removeprefix("file://"))))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)), config,
                                      authorize_virtual_chunk_access=_icechunk_access(prefix))
    session = repo.writable_session("main")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*chunk shape larger than their array shape")
        vds = ManifestStore(group).to_virtual_dataset()
    vds.vz.to_icechunk(session.store)
    return session.commit(f"vcfvirtual index: {cache_url}")


def _import_icechunk(path):
    try:
        import icechunk
    except ImportError:
        raise VcfVirtualError(path, "Icechunk is not installed", hint="pip install 'vcfvirtual[icechunk]'") from None
    if "ICECHUNK_LOG" not in os.environ:
        # Icechunk's Rust side prints coloured WARN blocks about local-filesystem commits on
        # every open; they concern concurrent writers, which a vcfvirtual store never has.
        # Errors still show; ICECHUNK_LOG set by the user wins.
        icechunk.set_logs_filter("error")
    return icechunk


def _icechunk_access(prefix: str) -> dict:
    import icechunk

    return {prefix: icechunk.credentials.LocalFileSystemAccess}


def is_icechunk_repo(path) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "repo"))


def open_icechunk(path, *, check: bool = True, branch: str = "main"):
    """A read-only store over the Icechunk repository that ``index --format icechunk`` wrote."""
    import zarr

    icechunk = _import_icechunk(path)

    storage = icechunk.local_filesystem_storage(os.fspath(path))
    probe = icechunk.Repository.open(storage)
    attrs = dict(zarr.open_group(probe.readonly_session(branch).store, mode="r", zarr_format=3).attrs)
    cache_url = attrs["vcfvirtual"]["cache"]["url"]
    if check:
        check_cache({"refs": {".zattrs": attrs}}, path)
    repo = icechunk.Repository.open(storage, authorize_virtual_chunk_access=_icechunk_access(
        cache_url.rsplit("/", 1)[0] + "/"))
    return repo.readonly_session(branch).store


def _resolve_templates(refs: dict) -> dict:
    templates = refs.get("templates", {})
    out = {}
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value and isinstance(value[0], str) and "{{" in value[0]:
            url = value[0]
            for name, target in templates.items():
                url = url.replace("{{" + name + "}}", target)
            value = [url, *value[1:]]
        out[key] = value
    return out


def public_cache_url(cache_url: str, cache_name: str) -> str:
    """``--cache-url`` as given, or with the cache's file name when it names a folder."""
    return cache_url + cache_name if cache_url.endswith("/") else cache_url


def cache_target(cache_url, cache_name: str, refs_path=None) -> str:
    """The URL references should name for the cache given as ``cache_url``: a URL, or a
    local path (made an absolute ``file://`` URL, not percent-encoded, as the index writes
    it). A local folder, or a URL ending in ``/``, gets ``cache_name``; a URL naming no
    path at all (``http://host:port``) is refused, since no cache can be there."""
    cache_url = os.fspath(cache_url)
    if not cache_url:
        raise VcfVirtualError(refs_path, "no cache URL given", hint="give the URL or path the cache is at")
    if storage.is_url(cache_url):
        # For object stores the bucket is the host: the object's key is the path.
        if urlparse(cache_url).path in ("", "/") and not cache_url.endswith("/"):
            raise VcfVirtualError(cache_url, "names no file, only a host or bucket",
                                  hint=f"end it with / to put the cache {cache_name} there: {cache_url}/")
        return public_cache_url(cache_url, cache_name)
    path = cache_url.removeprefix("file://")
    folder = path.endswith(("/", os.sep)) or os.path.isdir(path)
    path = os.path.abspath(path)
    return "file://" + (os.path.join(path, cache_name) if folder else path)


def relocate(refs: dict, cache_url: str, refs_path=None) -> dict:
    """The same references, naming the cache at ``cache_url`` (see :func:`cache_target`)."""
    if CACHE_TEMPLATE not in refs.get("templates", {}):
        raise VcfVirtualError(refs_path, "these references name the cache in every chunk, not by a template",
                              hint="re-index with vcfvirtual >= 0.2 to make them relocatable")
    try:
        attrs = json.loads(refs["refs"][".zattrs"])
        name = os.path.basename(urlparse(attrs["vcfvirtual"]["cache"]["url"]).path)
    except (KeyError, TypeError, ValueError):
        raise VcfVirtualError(refs_path, "these references do not name a vcfvirtual cache",
                              hint="relocate applies to references vcfvirtual index wrote") from None
    cache_url = cache_target(cache_url, name, refs_path)
    attrs["vcfvirtual"]["cache"]["url"] = cache_url
    return {**refs, "templates": {**refs["templates"], CACHE_TEMPLATE: cache_url},
            "refs": {**refs["refs"], ".zattrs": json.dumps(attrs, separators=(",", ":"))}}


def check_relocated_cache(refs: dict, refs_path, storage_options: dict | None = None) -> None:
    """Refuse to point references at a cache that is not there, or not theirs: its size
    and sampled hash must be those recorded when it was indexed (its mtime is a copy's)."""
    from .errors import StaleCacheError

    cache = _attributes(refs)["vcfvirtual"]["cache"]
    url = cache["url"]
    expected = Fingerprint.from_json(cache)
    try:
        if storage.is_url(url):
            found = storage.fingerprint(url, storage_options)
        else:
            found = Fingerprint.of(url.removeprefix("file://"))
    except (VcfVirtualError, OSError) as e:
        problem = e.problem if isinstance(e, VcfVirtualError) else e.strerror
        raise StaleCacheError(refs_path, f"cannot read the cache at {url}: {problem}",
                              hint="put the cache there first, or pass --no-check (check=False)") from None
    if found.size != expected.size:
        problem = f"it is {found.size} bytes, the indexed cache was {expected.size}"
    elif expected.digest is not None and found.digest != expected.digest:
        problem = "its contents differ from the indexed cache's (sampled hash)"
    else:
        return
    raise StaleCacheError(refs_path, f"the cache at {url} is not the one these references were made with: {problem}",
                          hint="copy the cache the references name, or pass --no-check (check=False)")


def relocate_file(refs_path, cache_url: str, output=None, *, check: bool = True,
                  storage_options: dict | None = None) -> Path:
    """Rewrite a Kerchunk JSON to name its cache at ``cache_url`` (atomically).

    ``cache_url`` is normalised as :func:`cache_target` says. Unless ``check=False``, the
    cache must be there and match the fingerprint the references record. ``output``
    writes a new file instead; an existing one there must be vcfvirtual references too."""
    from . import cache as cache_mod

    refs_path = Path(refs_path)
    output = Path(output) if output else refs_path
    refs = relocate(_load(refs_path), cache_url, refs_path)
    if check:
        check_relocated_cache(refs, refs_path, storage_options)
    if output.is_symlink():
        raise VcfVirtualError(output, "is a symbolic link; it and what it points to are left alone",
                              hint="give -o to write the relocated references elsewhere")
    if output != refs_path:
        cache_mod.refuse_foreign_output(output, cache_mod.REFS, force=True, option="-o")
    cache_mod.remove_stale_temporaries(output)
    tmp = cache_mod.temporary_name(output)
    try:
        with cache_mod.output_file(tmp, "the references", "-o", mode="w", opener=open) as f:
            json.dump(refs, f, separators=(",", ":"))
        cache_mod.replace_output(tmp, output)
    finally:
        cache_mod._delete(tmp)
    return output


def _attributes(refs: dict) -> dict:
    value = refs["refs"][".zattrs"]
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def check_cache(refs: dict, refs_path, storage_options: dict | None = None) -> None:
    """Refuse a store whose cache, or reachable source BCF, has changed since indexing.

    A remote cache (``s3://``, ``https://``...) is checked through range reads: its size
    and sampled hash (its modification time is the upload's, not the indexing's). A source
    that is not reachable (a collaborator without the BCF) is not checked: the cache alone
    holds the data."""
    info = _attributes(refs).get("vcfvirtual", {})
    cache = info.get("cache")
    if not cache:
        return
    url = cache["url"]
    if storage.is_url(url):
        _check_remote_cache(url, cache, refs_path, storage_options)
        return
    if not url.startswith("file://"):
        return
    path = url.removeprefix("file://")
    if not os.path.exists(path):
        raise StaleCacheError(refs_path, f"the transcode cache {path} is missing",
                              hint="re-run vcfvirtual index") from None
    # The cache is always hashed (at most ~2 MiB read): a copy that kept another file's
    # mtime (cp -p, rsync -t) must not pass on size and mtime alone. The source is only
    # hashed when its size or mtime moved, as it may be far larger and is only a check.
    problems = Fingerprint.from_json(cache).differences(path, always_hash=True)
    if problems:
        raise StaleCacheError(refs_path, f"the transcode cache {path} does not match the references: "
                              + "; ".join(problems), hint="re-run vcfvirtual index --force")
    # "source" (one file) is how references before several-file stores named it.
    for source in info.get("sources") or [info.get("source", {})]:
        if source.get("path") and os.path.isfile(source["path"]) and "size" in source:
            problems = Fingerprint.from_json(source).differences(source["path"])
            if problems:
                raise StaleCacheError(refs_path, f"the source BCF {source['path']} changed since it was indexed: "
                                      + "; ".join(problems), hint="re-run vcfvirtual index --force")


def _check_remote_cache(url: str, cache: dict, refs_path, storage_options) -> None:
    expected = Fingerprint.from_json(cache)
    try:
        found = storage.fingerprint(url, storage_options)
    except VcfVirtualError as e:
        raise StaleCacheError(refs_path, f"cannot reach the transcode cache {url}: {e.problem}",
                              hint="check the URL and --storage-options, or vcfvirtual relocate") from None
    if found.size != expected.size:
        problem = f"it is {found.size} bytes, it was {expected.size} when indexed"
    elif expected.digest is not None and found.digest != expected.digest:
        problem = "its contents changed (sampled hash differs) since it was indexed"
    else:
        return
    raise StaleCacheError(refs_path, f"the transcode cache {url} does not match the references: {problem}",
                          hint="upload the cache these references were made with, or re-run vcfvirtual index")


def _load(refs_path) -> dict:
    """Kerchunk references from a JSON file, or the metadata of a Parquet directory."""
    if os.path.isdir(refs_path):
        try:
            with open(os.path.join(refs_path, ".zmetadata"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise VcfVirtualError(refs_path, f"not a Kerchunk Parquet directory ({e})") from None
        return {"refs": meta["metadata"], "parquet": True}
    try:
        with open(refs_path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise VcfVirtualError(refs_path, f"cannot read references: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise VcfVirtualError(refs_path, f"not a Kerchunk JSON file ({e})") from None


def open_store(refs_path, *, check: bool = True, cache_url: str | None = None,
               storage_options: dict | None = None):
    """A read-only zarr store over vcfvirtual references (Kerchunk JSON or Parquet, or an
    Icechunk repository), for ``xr.open_zarr``.

    ``cache_url`` reads the cache from elsewhere than the references say (a copy uploaded
    to ``s3://...`` or served over ``https://...``; a folder URL ending in ``/`` gets the
    cache's file name); ``storage_options`` are fsspec's for reaching it (e.g.
    ``{"endpoint_url": ...}`` for an S3-compatible service). The cache is checked against
    its fingerprint, locally or through range reads (``check=False`` skips that)."""
    from zarr.storage import FsspecStore

    refs_path = os.fspath(refs_path)
    if is_icechunk_repo(refs_path):
        if cache_url is not None:
            raise VcfVirtualError(refs_path, "an Icechunk repository names its cache's folder in its configuration",
                                  hint="write it again with vcfvirtual index --format icechunk")
        return open_icechunk(refs_path, check=check)
    refs = _load(refs_path)
    if refs.get("parquet"):
        if cache_url is not None:
            raise VcfVirtualError(refs_path, "Parquet references name the cache in every chunk",
                                  hint="write them again with vcfvirtual index --format parquet --cache-url")
        if check:
            check_cache(refs, refs_path, storage_options)
        url = _attributes(refs)["vcfvirtual"]["cache"]["url"]
        fo = refs_path
    else:
        if cache_url is not None:
            refs = relocate(refs, cache_url, refs_path)
        if check:
            check_cache(refs, refs_path, storage_options)
        url = refs.get("templates", {}).get(CACHE_TEMPLATE, "file://")
        fo = refs
    protocol = urlparse(url).scheme or "file"
    # zarr reads the reference filesystem asynchronously; the cache's must match.
    remote_options = {**(storage_options or {}), "asynchronous": True} if protocol != "file" else None
    try:
        fs = fsspec.filesystem("reference", fo=fo, asynchronous=True, remote_protocol=protocol,
                               remote_options=remote_options)
    except ImportError as e:
        raise VcfVirtualError(url, f"reading this URL needs a library that is not installed ({e})",
                              hint="pip install 'vcfvirtual[remote]'") from None
    return FsspecStore(fs=fs, read_only=True)
