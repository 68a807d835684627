"""Reference stores: Kerchunk JSON (Zarr v2 metadata), and opening it again."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from urllib.parse import urlparse

import fsspec
import numpy as np
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore
from virtualizarr.writers.kerchunk import variable_to_kerchunk_arr_refs

from . import storage
from .errors import StaleCacheError, UntrustedReferenceError, VcfVirtualError
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
        arrays.update(
            {f"{name}/{key}": value for key, value in variable_to_kerchunk_arr_refs(var, name, zarr_format=2).items()}
        )
    refs = {
        "version": 1,
        "refs": {".zgroup": '{"zarr_format":2}', ".zattrs": ujson.dumps(dict(group.metadata.attributes)), **arrays},
    }
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
    with cache_mod.output_file(path, "the references", "refs_path=", mode="w", opener=open) as f:
        json.dump(refs, f, separators=(",", ":"))


def write_kerchunk_parquet(
    group: ManifestGroup, path: Path, cache_url: str | None = None, record_size: int = 100_000
) -> None:
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
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(prefix.removeprefix("file://")))
    )
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)), config, authorize_virtual_chunk_access=_icechunk_access(prefix)
    )
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
    repo = icechunk.Repository.open(
        storage, authorize_virtual_chunk_access=_icechunk_access(cache_url.rsplit("/", 1)[0] + "/")
    )
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
            raise VcfVirtualError(
                cache_url,
                "names no file, only a host or bucket",
                hint=f"end it with / to put the cache {cache_name} there: {cache_url}/",
            )
        return public_cache_url(cache_url, cache_name)
    path = cache_url.removeprefix("file://")
    folder = path.endswith(("/", os.sep)) or os.path.isdir(path)
    path = os.path.abspath(path)
    return "file://" + (os.path.join(path, cache_name) if folder else path)


def relocate(refs: dict, cache_url: str, refs_path=None) -> dict:
    """The same references, naming the cache at ``cache_url`` (see :func:`cache_target`)."""
    if CACHE_TEMPLATE not in refs.get("templates", {}):
        raise VcfVirtualError(
            refs_path,
            "these references name the cache in every chunk, not by a template",
            hint="re-index with vcfvirtual >= 0.2 to make them relocatable",
        )
    try:
        attrs = json.loads(refs["refs"][".zattrs"])
        name = os.path.basename(urlparse(attrs["vcfvirtual"]["cache"]["url"]).path)
    except (KeyError, TypeError, ValueError):
        raise VcfVirtualError(
            refs_path,
            "these references do not name a vcfvirtual cache",
            hint="relocate applies to references vcfvirtual index wrote",
        ) from None
    cache_url = cache_target(cache_url, name, refs_path)
    attrs["vcfvirtual"]["cache"]["url"] = cache_url
    return {
        **refs,
        "templates": {**refs["templates"], CACHE_TEMPLATE: cache_url},
        "refs": {**refs["refs"], ".zattrs": json.dumps(attrs, separators=(",", ":"))},
    }


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
        raise StaleCacheError(
            refs_path,
            f"cannot read the cache at {url}: {problem}",
            hint="put the cache there first, or pass check=False",
        ) from None
    problem = _copy_differs(expected, found)
    if problem:
        raise StaleCacheError(
            refs_path,
            f"the cache at {url} is not the one these references were made with: {problem}",
            hint="copy the cache the references name, or pass check=False",
        )


def _copy_differs(expected: Fingerprint, found: Fingerprint) -> str | None:
    """How a copy of the cache (uploaded, served, relocated) differs from the indexed one:
    size and sampled hash only, as a copy's modification time is its own."""
    if found.size != expected.size:
        return f"it is {found.size} bytes, it was {expected.size} when indexed"
    if expected.digest is not None and found.digest != expected.digest:
        return "its contents changed (sampled hash differs) since it was indexed"
    return None


def relocate_file(
    refs_path, cache_url: str, output=None, *, check: bool = True, storage_options: dict | None = None
) -> Path:
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
        raise VcfVirtualError(
            output,
            "is a symbolic link; it and what it points to are left alone",
            hint="give -o to write the relocated references elsewhere",
        )
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


def _attributes(refs: dict, refs_path=None) -> dict:
    try:
        value = refs["refs"][".zattrs"]
        attrs = json.loads(value) if isinstance(value, (str, bytes)) else value
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise UntrustedReferenceError(refs_path, f"the references have no readable group attributes ({e})") from None
    if not isinstance(attrs, dict):
        raise UntrustedReferenceError(refs_path, "the references' group attributes are not a JSON object")
    return attrs


def _declared_cache(refs: dict, refs_path) -> dict | None:
    """The ``vcfvirtual.cache`` attribute (url, size...), checked for shape; None when
    the references carry none (not written by vcfvirtual)."""
    info = _attributes(refs, refs_path).get("vcfvirtual")
    if info is None:
        return None
    cache = info.get("cache") if isinstance(info, dict) else None
    if not isinstance(cache, dict) or not isinstance(cache.get("url"), str):
        raise UntrustedReferenceError(refs_path, "the references' vcfvirtual attribute names no cache URL")
    size = cache.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise UntrustedReferenceError(refs_path, f"the references' cache size {size!r} is not a byte count")
    return cache


def check_cache(refs: dict, refs_path, storage_options: dict | None = None) -> None:
    """Refuse a store whose cache, or reachable source BCF, has changed since indexing.

    A remote cache (``s3://``, ``https://``...) is checked through range reads: its size
    and sampled hash (its modification time is the upload's, not the indexing's). A source
    that is not reachable (a collaborator without the BCF) is not checked: the cache alone
    holds the data. A reachable source is hashed (sampled) at every open, as the cache
    is: a same-size rewrite with its mtime put back no longer describes these references."""
    info = _attributes(refs, refs_path).get("vcfvirtual", {})
    cache = _declared_cache(refs, refs_path)
    if not cache:
        return
    url = cache["url"]
    if storage.is_url(url):
        _check_remote_cache(url, cache, refs_path, storage_options)
        return
    if not url.startswith("file://"):
        raise UntrustedReferenceError(
            refs_path,
            f"the cache URL {url!r} is neither a file:// nor a remote URL",
            hint="vcfvirtual relocate the references to the cache's URL",
        )
    path = url.removeprefix("file://")
    if not os.path.lexists(path):
        raise StaleCacheError(
            refs_path, f"the transcode cache {path} is missing", hint="re-run vcfvirtual index"
        ) from None
    # The cache is always hashed (at most ~2 MiB read): a copy that kept another file's
    # mtime (cp -p, rsync -t) must not pass on size and mtime alone. A FIFO, device or
    # directory is refused from its stat, never opened (a FIFO's open would block).
    problems = _local_differences(cache, path)
    if problems:
        raise StaleCacheError(
            refs_path,
            f"the transcode cache {path} does not match the references: " + "; ".join(problems),
            hint="re-run vcfvirtual index --force",
        )
    # "source" (one file) is how references before several-file stores named it.
    sources = info.get("sources") or [info.get("source") or {}]
    for source in sources if isinstance(sources, list) else []:
        if not isinstance(source, dict) or not isinstance(source.get("path"), str) or "size" not in source:
            continue
        if not os.path.isfile(source["path"]):  # unreachable, or not a regular file: not read
            continue
        problems = _local_differences(source, source["path"])
        if problems:
            raise StaleCacheError(
                refs_path,
                f"the source BCF {source['path']} changed since it was indexed: " + "; ".join(problems),
                hint="re-run vcfvirtual index --force",
            )


def _local_differences(recorded: dict, path: str) -> list[str]:
    """How the local file at ``path`` differs from the fingerprint the references record
    for it (always hashed); a recorded fingerprint that is not one, or a file that cannot be
    read, is a difference too."""
    try:
        return Fingerprint.from_json(recorded).differences(path, always_hash=True)
    except (OSError, KeyError, TypeError, ValueError) as e:
        return [f"cannot be fingerprinted ({e})"]


def _check_remote_cache(url: str, cache: dict, refs_path, storage_options) -> None:
    expected = Fingerprint.from_json(cache)
    try:
        found = storage.fingerprint(url, storage_options)
    except VcfVirtualError as e:
        # A library missing to reach the URL has its own fix (the install command), which
        # no URL or option change would give.
        raise StaleCacheError(
            refs_path,
            f"cannot reach the transcode cache {url}: {e.problem}",
            hint=e.hint
            if e.hint and e.hint.startswith("pip install")
            else "check the URL and storage_options=, or vcfvirtual relocate",
        ) from None
    problem = _copy_differs(expected, found)
    if problem:
        raise StaleCacheError(
            refs_path,
            f"the transcode cache {url} does not match the references: {problem}",
            hint="upload the cache these references were made with, or re-run vcfvirtual index",
        )


# --- references are untrusted input ------------------------------------------------------
# A Kerchunk JSON can name any URL, byte range and codec configuration. Plain Kerchunk
# follows them all (by design); open_store, when checking, follows only references into
# the one cache the attributes declare and fingerprint, within its size, through
# metadata that agrees with the codec configuration.

_UNTRUSTED_HINT = "open_store(..., check=False) reads them as plain Kerchunk would, if you trust their author"


def _check_chunk_ref(key, value, cache_url: str, cache_size: int, refs_path) -> None:
    """One ``[url, offset, length]`` chunk reference must stay inside the cache."""
    if len(value) != 3:
        raise UntrustedReferenceError(
            refs_path, f"reference {key!r} is not [url, offset, length]: {value!r}"[:300], hint=_UNTRUSTED_HINT
        )
    url, offset, length = value
    if url != cache_url:
        raise UntrustedReferenceError(
            refs_path,
            f"reference {key!r} points at {str(url)[:200]!r}, not at the cache {cache_url} the references declare",
            hint=_UNTRUSTED_HINT,
        )
    for what, x in (("offset", offset), ("length", length)):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0:
            raise UntrustedReferenceError(
                refs_path, f"reference {key!r} has {what} {x!r}, not a byte count", hint=_UNTRUSTED_HINT
            )
    if int(offset) + int(length) > cache_size:
        raise UntrustedReferenceError(
            refs_path,
            f"reference {key!r} reads bytes {offset}..{int(offset) + int(length)}, past the cache's {cache_size} bytes",
            hint=_UNTRUSTED_HINT,
        )


# Arrays whose codec kind follows from their name; INFO/FORMAT arrays are named after
# their field (variant_<INFO>, call_<FORMAT>).
_KIND_OF_ARRAY = {
    "variant_contig": "contig",
    "variant_position": "position",
    "variant_length": "length",
    "variant_id": "id",
    "variant_id_mask": "id_mask",
    "variant_allele": "allele",
    "variant_quality": "quality",
    "variant_filter": "filter",
    "call_genotype": "genotype",
    "call_genotype_phased": "genotype_phased",
    "call_genotype_mask": "genotype_mask",
}


def _store_header(refs: dict, refs_path):
    """The VCF header the store was indexed from (its ``vcf_header`` attribute), parsed
    as htslib parses it: the dictionary keys every codec config must agree with."""
    from .header import parse_header_text

    text = _attributes(refs, refs_path).get("vcf_header")
    if not isinstance(text, str):
        raise UntrustedReferenceError(
            refs_path,
            "the references carry no vcf_header attribute to check their codec configurations against",
            hint=_UNTRUSTED_HINT,
        )
    try:
        return parse_header_text(text.encode("utf-8"), refs_path, 0)
    except VcfVirtualError as e:
        raise UntrustedReferenceError(
            refs_path, f"the vcf_header attribute is not a header htslib reads: {e.problem}", hint=_UNTRUSTED_HINT
        ) from None


def _agrees_with_header(name: str, spec, meta: dict, header, layout) -> list[str]:
    """How ``spec`` differs from what the index writes for array ``name`` of this header."""
    problems = []
    if spec.array != name:
        problems.append(f"its config names array {spec.array!r}")
    if layout is not None and spec.layout != layout:
        problems.append(f"layout {spec.layout!r}, the cache's is {layout!r}")
    shape = meta.get("shape")
    if spec.num_records and isinstance(shape, list) and shape and shape[0] != spec.num_records:
        problems.append(f"{spec.num_records} records in its config, {shape[0]} in its shape")
    n_samples = len(header.samples)
    if name in _KIND_OF_ARRAY:
        if spec.kind != _KIND_OF_ARRAY[name]:
            problems.append(f"kind {spec.kind!r}, expected {_KIND_OF_ARRAY[name]!r}")
        elif spec.kind.startswith("genotype") and (spec.key != header.gt_key or spec.shape[0] != n_samples):
            problems.append(
                f"GT key {spec.key} and {spec.shape[0]} samples, the header's are {header.gt_key} and {n_samples}"
            )
        elif spec.kind == "length" and spec.key != header.end_key:
            problems.append(f"END key {spec.key}, the header's INFO/END key is {header.end_key}")
        elif spec.kind == "filter" and (
            list(spec.filter_columns) != header.filter_column_map() or spec.shape[0] != len(header.filters)
        ):
            problems.append(
                f"filter_columns {list(spec.filter_columns)}, the header's are {header.filter_column_map()}"
            )
        return problems
    category = {"info": "INFO", "format": "FORMAT"}.get(spec.kind)
    fields = header.info if category == "INFO" else header.formats
    prefix = "variant_" if category == "INFO" else "call_"
    field = next((f for f in fields if prefix + f.name == name), None) if category else None
    if field is None:
        problems.append(f"kind {spec.kind!r} is not that of an INFO or FORMAT field the header declares")
    elif spec.key != field.key or spec.vcf_type != field.type:
        problems.append(
            f"key {spec.key} and type {spec.vcf_type!r}, the header's {category}/{field.name} has "
            f"{field.key} and {field.type!r}"
        )
    elif category == "FORMAT" and spec.shape[0] != n_samples:
        problems.append(f"{spec.shape[0]} samples, the header has {n_samples}")
    return problems


def _check_array_metadata(key: str, value, refs_path, header=None, layout=None) -> None:
    """An array decoded by our codec: its metadata must agree with the codec's config,
    or zarr would reshape the decoded bytes into another shape (an untyped error)."""
    from vcfvirtual_codec.codec import CODEC_ID, ChunkSpec

    try:
        meta = json.loads(value) if isinstance(value, (str, bytes)) else value
    except json.JSONDecodeError as e:
        raise UntrustedReferenceError(refs_path, f"{key} is not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise UntrustedReferenceError(refs_path, f"{key} is not a JSON object")
    filters = meta.get("filters") or []
    if not isinstance(filters, list) or not all(isinstance(f, dict) for f in filters):
        raise UntrustedReferenceError(refs_path, f"{key}: filters are not a list of codec configs")
    ours = [f for f in filters if f.get("id") == CODEC_ID]
    if not ours:
        return
    name = key.rsplit("/", 1)[0]
    try:
        spec = ChunkSpec.from_config(ours[-1])
    except VcfVirtualError as e:
        raise UntrustedReferenceError(refs_path, f"array {name}: {e.problem}", hint=_UNTRUSTED_HINT) from None
    except (TypeError, ValueError) as e:
        raise UntrustedReferenceError(
            refs_path, f"array {name}: bad vcfvirtual.bcf config ({e})", hint=_UNTRUSTED_HINT
        ) from None
    problems = []
    if filters[-1] is not ours[-1] or len(ours) != 1:
        problems.append("the vcfvirtual.bcf codec is not the one, last filter")
    others = [f.get("id") for f in filters[:-1]]
    if others not in ([], ["vlen-utf8"]) or (others == ["vlen-utf8"]) != (spec.dtype == "str"):
        problems.append(f"filters {others} do not fit dtype {spec.dtype}")
    if meta.get("compressor") is not None:
        problems.append("a compressor runs before the codec")
    chunks = [spec.chunk_length, *[max(1, x) for x in spec.shape]]
    if meta.get("chunks") != chunks:
        problems.append(f"chunks {meta.get('chunks')} differ from the codec's {chunks}")
    shape = meta.get("shape")
    if not isinstance(shape, list) or shape[1:] != list(spec.shape):
        problems.append(f"shape {shape} differs from the codec's per-variant shape {list(spec.shape)}")
    dtype = meta.get("dtype")
    try:
        same_dtype = dtype == "|O" if spec.dtype == "str" else np.dtype(dtype) == np.dtype(spec.dtype)
    except TypeError:
        same_dtype = False
    if not same_dtype:
        problems.append(f"dtype {dtype!r} differs from the codec's {spec.dtype!r}")
    if header is not None:
        problems += _agrees_with_header(name, spec, meta, header, layout)
    if problems:
        raise UntrustedReferenceError(refs_path, f"array {name}: " + "; ".join(problems), hint=_UNTRUSTED_HINT)


def _check_references(refs: dict, refs_path, cache_url: str, cache_size: int, header=None, layout=None) -> None:
    """Every reference of a Kerchunk JSON names the declared cache (inline data aside)."""
    extra = set(refs) - {"version", "templates", "refs"}
    if extra:  # "gen" would generate references from templates we never see here
        raise UntrustedReferenceError(
            refs_path,
            f"the references hold {sorted(map(str, extra))}, which vcfvirtual never writes",
            hint=_UNTRUSTED_HINT,
        )
    templates = refs.get("templates", {})
    if not isinstance(templates, dict) or not all(isinstance(v, str) for v in templates.values()):
        raise UntrustedReferenceError(refs_path, "the references' templates are not a map of names to URLs")
    if CACHE_TEMPLATE in templates and templates[CACHE_TEMPLATE] != cache_url:
        raise UntrustedReferenceError(
            refs_path,
            f"the cache template names {templates[CACHE_TEMPLATE][:200]!r}, the attributes (whose "
            f"fingerprint is checked) name {cache_url}",
            hint="vcfvirtual relocate, or open_store(..., cache_url=...)",
        )
    if not isinstance(refs.get("refs"), dict):
        raise UntrustedReferenceError(refs_path, "the references hold no 'refs' map")
    template = "{{" + CACHE_TEMPLATE + "}}"
    for key, value in refs["refs"].items():
        if not isinstance(key, str):
            raise UntrustedReferenceError(refs_path, f"reference key {key!r} is not a string")
        if isinstance(value, list):
            # The URL as written, not as resolved here: Kerchunk resolves templates its own
            # way (str.format), so only the exact template or the cache URL itself pass.
            if value and value[0] == template and templates.get(CACHE_TEMPLATE) == cache_url:
                value = [cache_url, *value[1:]]
            _check_chunk_ref(key, value, cache_url, cache_size, refs_path)
        elif key.endswith(".zarray"):
            _check_array_metadata(key, value, refs_path, header, layout)
        elif not isinstance(value, (str, dict)):
            raise UntrustedReferenceError(refs_path, f"reference {key!r} is neither data nor [url, offset, length]")


def _guarded_reference_fs(cache_url: str, cache_size: int, refs_path, **kwargs):
    """A Kerchunk reference filesystem that fetches only ranges of the declared cache:
    what is checked eagerly for JSON is checked per fetch for lazily loaded Parquet."""
    from fsspec.implementations.reference import ReferenceFileSystem

    class GuardedReferenceFileSystem(ReferenceFileSystem):
        def _cat_common(self, path, start=None, end=None):
            key = self._strip_protocol(path)
            part = self.references.get(key) if hasattr(self.references, "get") else None
            if isinstance(part, (list, tuple)):
                _check_chunk_ref(key, list(part), cache_url, cache_size, refs_path)
            return super()._cat_common(path, start=start, end=end)

    return GuardedReferenceFileSystem(skip_instance_cache=True, **kwargs)


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


def open_store(refs_path, *, check: bool = True, cache_url: str | None = None, storage_options: dict | None = None):
    """A read-only zarr store over vcfvirtual references (Kerchunk JSON or Parquet, or an
    Icechunk repository), for ``xr.open_zarr``.

    ``cache_url`` reads the cache from elsewhere than the references say (a copy uploaded
    to ``s3://...`` or served over ``https://...``; a folder URL ending in ``/`` gets the
    cache's file name); ``storage_options`` are fsspec's for reaching it (e.g.
    ``{"endpoint_url": ...}`` for an S3-compatible service). The cache is checked against
    its fingerprint, locally or through range reads.

    References are treated as untrusted: with ``check`` (the default) every chunk must be
    a byte range of the one cache the attributes declare (and whose fingerprint is
    checked), and every array's metadata must agree with its codec configuration;
    anything else is ``UntrustedReferenceError``, before anything is fetched.
    ``check=False`` skips all of this and reads the references as plain Kerchunk does
    (which follows any URL they name): only for references whose author you trust."""
    from zarr.storage import FsspecStore

    refs_path = os.fspath(refs_path)
    if is_icechunk_repo(refs_path):
        if cache_url is not None:
            raise VcfVirtualError(
                refs_path,
                "an Icechunk repository names its cache's folder in its configuration",
                hint="write it again with vcfvirtual index --format icechunk",
            )
        return open_icechunk(refs_path, check=check)
    refs = _load(refs_path)
    if not isinstance(refs, dict) or not isinstance(refs.get("refs"), dict):
        raise UntrustedReferenceError(refs_path, "not Kerchunk references: no 'refs' map")
    if refs.get("parquet"):
        if cache_url is not None:
            raise VcfVirtualError(
                refs_path,
                "Parquet references name the cache in every chunk",
                hint="write them again with vcfvirtual index --format parquet --cache-url",
            )
        fo = refs_path
    else:
        if cache_url is not None:
            refs = relocate(refs, cache_url, refs_path)
        fo = refs
    cache = _declared_cache(refs, refs_path) if check else None
    if check and cache is None:
        raise UntrustedReferenceError(
            refs_path,
            "the references declare no vcfvirtual cache, so nothing they point at can be checked",
            hint=_UNTRUSTED_HINT,
        )
    if check:
        # The cache first (missing, changed, not a regular file), then every reference
        # against it; nothing the references name is fetched before both pass.
        check_cache(refs, refs_path, storage_options)
        header = _store_header(refs, refs_path)
        layout = cache.get("layout")
        if refs.get("parquet"):
            for key, value in refs["refs"].items():
                if isinstance(key, str) and key.endswith(".zarray"):
                    _check_array_metadata(key, value, refs_path, header, layout)
        else:
            _check_references(refs, refs_path, cache["url"], cache["size"], header, layout)
        url = cache["url"]
    elif refs.get("parquet"):
        url = _attributes(refs, refs_path)["vcfvirtual"]["cache"]["url"]
    else:
        url = refs.get("templates", {}).get(CACHE_TEMPLATE, "file://")
    protocol = urlparse(url).scheme or "file"
    # zarr reads the reference filesystem asynchronously; the cache's must match.
    remote_options = {**(storage_options or {}), "asynchronous": True} if protocol != "file" else None
    options = {"fo": fo, "asynchronous": True, "remote_protocol": protocol, "remote_options": remote_options}
    try:
        if check:
            fs = _guarded_reference_fs(url, cache["size"], refs_path, **options)
        else:
            fs = fsspec.filesystem("reference", **options)
    except ImportError as e:
        raise VcfVirtualError(
            url,
            f"reading this URL needs a library that is not installed ({e})",
            hint="pip install 'vcfvirtual[remote]'",
        ) from None
    return FsspecStore(fs=fs, read_only=True)
