"""Checks before reading references: the cache and sources still match their
fingerprints, and every reference names only the declared cache, within its size,
with codec configs that agree with the store's own header.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import logging
import os
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from .. import _json
from ..cache.names import part_url
from ..errors import StaleCacheError, UntrustedReferenceError, VcfVirtualError
from ..io.fingerprint import Fingerprint
from ..manifests.provenance import ATTRIBUTE, Provenance, RecordedCache, RecordedSource
from . import arrays
from .guard import UNTRUSTED_HINT, ChunkTargets, check_chunk_ref
from .kerchunk import CACHE_TEMPLATE, KerchunkRefs

if TYPE_CHECKING:
    from vcfvirtual_codec.spec import ChunkSpec

    from ..bcf.fields import FieldMap
    from ..bcf.header import BCFHeader
    from ..cache.names import LayoutName

PathLike = str | os.PathLike[str] | None

logger = logging.getLogger(__name__)


def group_attributes(refs: KerchunkRefs, refs_path: PathLike = None) -> dict[str, Any]:
    """The references' group attributes (their ``.zattrs``), as a dict.

    Raises
    ------
    UntrustedReferenceError
        There are none, or they are not a JSON object."""
    try:
        value = refs["refs"][".zattrs"]
        # A copy: the parse is shared by every caller that reads the same text.
        attrs = copy.deepcopy(_parsed_json(value)) if isinstance(value, (str, bytes)) else value
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise UntrustedReferenceError(refs_path, f"the references have no readable group attributes ({e})") from None
    if not isinstance(attrs, dict):
        raise UntrustedReferenceError(refs_path, "the references' group attributes are not a JSON object")
    return attrs


@functools.lru_cache(maxsize=8)
def _parsed_json(text: str | bytes) -> Any:
    """``json.loads``, once per text: the group attributes hold the whole VCF header (1 MB
    at 100,000 samples, ~5 ms to parse) and one open reads them four times."""
    return _json.loads(text)


def declared_provenance(refs: KerchunkRefs, refs_path: PathLike) -> Provenance | None:
    """The ``vcfvirtual`` attribute (sources, cache, chunking...), checked for shape; None
    when the references carry none (not written by vcfvirtual).

    Raises
    ------
    UntrustedReferenceError
        The attribute is malformed: no cache URL, no byte count for its size... (see
        :meth:`~vcfvirtual.manifests.provenance.Provenance.from_json`)."""
    attrs = group_attributes(refs, refs_path)
    return Provenance.from_attributes(attrs, refs_path) if ATTRIBUTE in attrs else None


def declared_cache(refs: KerchunkRefs, refs_path: PathLike) -> dict[str, Any] | None:
    """The ``vcfvirtual.cache`` attribute (url, size...) as JSON, checked for shape (as
    :func:`declared_provenance`); None when the references carry none."""
    provenance = declared_provenance(refs, refs_path)
    return None if provenance is None else provenance.cache.to_json()


def check_cache(refs: KerchunkRefs, refs_path: PathLike, storage_options: dict[str, Any] | None = None) -> None:
    """Refuse a store whose cache, or reachable source BCF, has changed since indexing.

    A remote cache (``s3://``, ``https://``...) is checked through range reads: its size
    and sampled hash (its modification time is the upload's, not the indexing's). A source
    that is not reachable (a collaborator without the BCF) is not checked: the cache alone
    holds the data. A reachable source is hashed (sampled) at every open, as the cache
    is: a same-size rewrite with its mtime put back no longer describes these references.

    Raises
    ------
    StaleCacheError
        The cache is missing, unreachable or differs from its fingerprint, or a reachable
        source differs from its own.
    UntrustedReferenceError
        The cache attribute is malformed, or its URL neither ``file://`` nor remote."""
    provenance = declared_provenance(refs, refs_path)
    if provenance is None:
        return
    cache = provenance.cache
    url = cache.url
    if not url.startswith("file://"):
        _check_remote_caches(cache, refs_path, storage_options)
        return
    path = url.removeprefix("file://")
    if not os.path.lexists(path):
        raise StaleCacheError(
            refs_path, f"the transcode cache {path} is missing", hint="re-run vcfvirtual index"
        ) from None
    files = cache_files(cache)
    for file in files:
        _check_local_file(file, refs_path)
    # Every part starts with the same header; the first one's stands for them all.
    first = files[0].url.removeprefix("file://")
    problem = _cache_header_problem(first, group_attributes(refs, refs_path).get("vcf_header"))
    if problem:
        raise UntrustedReferenceError(refs_path, f"the transcode cache {first} {problem}", hint=UNTRUSTED_HINT)
    changed = _source_differences(provenance.sources)
    if changed is not None:
        source_path, problems = changed
        raise StaleCacheError(
            refs_path,
            f"the source BCF {source_path} changed since it was indexed: " + "; ".join(problems),
            hint="re-run vcfvirtual index --force",
        )


def local_files_read(refs: KerchunkRefs, refs_path: PathLike) -> tuple[list[str], list[str]] | None:
    """The files :func:`check_cache` reads for references to a local (``file://``) cache:
    the cache's files, and the recorded sources it reads when they are there; None for a
    remote cache or none declared.

    Raises
    ------
    UntrustedReferenceError
        As :func:`declared_provenance`."""
    provenance = declared_provenance(refs, refs_path)
    if provenance is None or not provenance.cache.url.startswith("file://"):
        return None
    cache = [file.url.removeprefix("file://") for file in cache_files(provenance.cache)]
    return cache, [source.path for source in provenance.sources if source.fingerprint is not None]


def _check_remote_caches(cache: RecordedCache, refs_path: PathLike, storage_options: dict[str, Any] | None) -> None:
    """:func:`check_cache` of a cache that is not a ``file://`` one: through range reads
    when its URL is remote (the remote module, imported here: a local open never needs it).

    Raises
    ------
    StaleCacheError, UntrustedReferenceError
        As :func:`check_cache`."""
    from ..io import remote as storage

    if not storage.is_url(cache.url):
        raise UntrustedReferenceError(
            refs_path,
            f"the cache URL {cache.url!r} is neither a file:// nor a remote URL",
            hint="vcfvirtual relocate the references to the cache's URL",
        )
    files = cache_files(cache)
    # Every part's size, then every part's windows, each round asked at once.
    # An object verified before at the size and version the first round gives (ETag,
    # Last-Modified) has its windows skipped: docs/design.md, "Remote caches".
    found = storage.fingerprints(
        [f.url for f in files],
        storage_options,
        [f.fingerprint.kind for f in files],
        expected=[f.fingerprint.digest for f in files],
    )
    for file, fingerprint in zip(files, found):
        _check_remote_cache(file, fingerprint, refs_path)


# eq=False: never compared (nor hashed) by value, and each generated method costs ~0.3 ms
# of every fresh open's import (docs/benchmarks.md, "open_store").
@dataclasses.dataclass(frozen=True, eq=False)
class CacheFile:
    """One file of the cache as the references record it: the cache itself, or one part
    of a cache made of parts (``columns``: a folder of ``part-NNNNNN`` files)."""

    url: str
    fingerprint: Fingerprint
    what: str  # how errors name it: "the transcode cache", "the transcode cache part"


def cache_files(cache: RecordedCache) -> tuple[CacheFile, ...]:
    """The files whose fingerprints the references record for ``cache``: each part of a
    folder of parts (the folder's own record is only their total size), else the one file."""
    if not cache.parts:
        return (CacheFile(cache.url, cache.fingerprint, "the transcode cache"),)
    return tuple(CacheFile(part_url(cache.url, p.name), p.fingerprint, "the transcode cache part") for p in cache.parts)


def _check_local_file(file: CacheFile, refs_path: PathLike) -> None:
    """A local file of the cache: there, and matching its fingerprint."""
    path = file.url.removeprefix("file://")
    if not os.path.lexists(path):
        raise StaleCacheError(refs_path, f"{file.what} {path} is missing", hint="re-run vcfvirtual index") from None
    # The cache is always hashed (at most ~2 MiB read a file, ~0.2 ms): a copy that kept
    # another file's mtime (cp -p, rsync -t) must not pass on size and mtime alone. A FIFO,
    # device or directory is refused from its stat, never opened (a FIFO's open would block).
    problems = _local_differences(file.fingerprint, path)
    if problems:
        raise StaleCacheError(
            refs_path,
            f"{file.what} {path} does not match the references: " + "; ".join(problems),
            hint="re-run vcfvirtual index --force",
        )


def _cache_header_problem(path: str, text: Any) -> str | None:
    """How the header the (fingerprinted) cache starts with differs from the references'
    ``vcf_header`` attribute, which every codec config and width is checked against:
    pinned to the cache, an edited header cannot vouch for edited arrays. A columns or raw
    cache holds the header as BCF does; a BGZF one in its first blocks. None when equal."""
    import gzip
    import zlib

    from ..io.outputs import BCF_MAGIC, COLUMNS_CACHE_MAGIC

    if not isinstance(text, str):
        return None  # refused later, with the other header checks
    want = text.encode("utf-8")
    try:
        with open(path, "rb") as raw:
            head = raw.read(len(COLUMNS_CACHE_MAGIC))
            raw.seek(0 if head != COLUMNS_CACHE_MAGIC else len(COLUMNS_CACHE_MAGIC))
            stream = gzip.GzipFile(fileobj=raw) if head[:2] == b"\x1f\x8b" else raw
            prefix = stream.read(9)
            if prefix[:5] != BCF_MAGIC + b"\x02":
                return "does not start with a BCF 2.2 header"
            size = int.from_bytes(prefix[5:9], "little")
            # Read no more than the attribute can match (a NUL ends the stored text).
            if not len(want) <= size <= len(want) + 1:
                return f"holds a {size}-byte header, the references' vcf_header is {len(want)} bytes"
            stored = stream.read(size).rstrip(b"\x00")
    except (OSError, EOFError, zlib.error) as e:
        return f"has no readable header ({e})"
    return None if stored == want else "starts with another header than the references' vcf_header attribute"


def _source_differences(sources: tuple[RecordedSource, ...]) -> tuple[str, list[str]] | None:
    """(path, problems) of the first recorded source BCF that is here, as a regular file,
    and no longer matches its fingerprint; None when every one that is here matches."""
    for source in sources:
        if source.fingerprint is None or not os.path.isfile(source.path):  # unreachable, or not a regular file
            continue
        problems = _local_differences(source.fingerprint, source.path)
        if problems:
            return source.path, problems
    return None


def _local_differences(recorded: Fingerprint, path: str) -> list[str]:
    """How the local file at ``path`` differs from the fingerprint the references record
    for it (always hashed); a file that cannot be read is a difference too."""
    try:
        return recorded.differences(path, always_hash=True)
    except (OSError, ValueError) as e:
        return [f"cannot be fingerprinted ({e})"]


def _check_remote_cache(file: CacheFile, found: Fingerprint | VcfVirtualError, refs_path: PathLike) -> None:
    """A remote file of the cache: its size and sampled hash as found through range reads
    (:func:`vcfvirtual.io.remote.fingerprints`), or why they could not be."""
    url, expected = file.url, file.fingerprint
    if isinstance(found, VcfVirtualError):
        # A library missing to reach the URL has its own fix (the install command), which
        # no URL or option change would give.
        raise StaleCacheError(
            refs_path,
            f"cannot reach {file.what} {url}: {found.problem}",
            hint=found.hint
            if found.hint and found.hint.startswith("pip install")
            else "check the URL and storage_options=, or vcfvirtual relocate",
        ) from None
    problem = copy_differs(expected, found)
    if problem:
        raise StaleCacheError(
            refs_path,
            f"{file.what} {url} does not match the references: {problem}",
            hint="upload the cache these references were made with, or re-run vcfvirtual index",
        )


# --- references are untrusted input ------------------------------------------------------
# A Kerchunk JSON can name any URL, byte range and codec configuration. Plain Kerchunk
# follows them all (by design); open_store, when checking, follows only references into
# the one cache the attributes declare and fingerprint, within its size, through
# metadata that agrees with the codec configuration.


@dataclasses.dataclass(frozen=True)
class InlineChunk:
    """A header array's inline chunk whose key was checked and whose data is checked when
    first read (:func:`check_inline_chunk`): ``check_references(..., defer_inline=True)``."""

    name: str
    leaf: str
    meta: dict[str, Any]


def check_inline_chunk(chunk: InlineChunk, value: str, refs_path: PathLike) -> None:
    """The deferred data check of ``chunk`` (:func:`arrays.check_plain_chunk_data`),
    holding ``value``: run before its bytes are handed to a reader.

    Raises
    ------
    UntrustedReferenceError
        It is not base64 of exactly one chunk's values."""
    arrays.check_plain_chunk_data(chunk.name, chunk.leaf, value, chunk.meta, refs_path)


def check_references(
    refs: KerchunkRefs,
    refs_path: PathLike,
    cache: dict[str, Any],
    *,
    metadata_only: bool = False,
    defer_inline: bool = False,
) -> dict[str, InlineChunk]:
    """Refuse references that would make a reader fetch or decode anything but the cache.

    Parameters
    ----------
    refs
        Kerchunk references as :func:`vcfvirtual.refs.kerchunk.load_references` returns them
        (for Parquet, their metadata only: chunks are then checked as they are fetched, by
        :func:`guarded_reference_fs`).
    refs_path
        The references, as errors name them.
    cache
        The cache they declare (:func:`declared_cache`), whose fingerprint was checked.
    metadata_only
        Check the keys' metadata only (an Icechunk repository's, see
        :func:`icechunk_as_references`): its virtual chunks are the repository's to check.
    defer_inline
        Check the header arrays' inline chunks' keys now and their data when each is first
        read, by the store (at 100,000 samples, 1.7 MB of base64 decoded to count the
        names). The store must then call :func:`check_inline_chunk` before serving one.

    Returns
    -------
    dict
        With ``defer_inline``, the inline chunks left to check, by key; else empty.

    Raises
    ------
    UntrustedReferenceError
        A chunk names another URL or reads past the cache; an array's metadata disagrees
        with its codec configuration, the other arrays, the store's own header or the
        sizes the index recorded; the references hold keys or arrays vcfvirtual never
        writes (see ``refs/arrays.py``)."""
    verdict = reference_verdict(refs, refs_path, cache, metadata_only=metadata_only)
    if metadata_only:
        return {}
    return apply_verdict(refs, refs_path, cache, verdict, defer_inline=defer_inline)


# eq=False: never compared (nor hashed) by value, and each generated method costs ~0.3 ms
# of every fresh open's import (docs/benchmarks.md, "open_store").
@dataclasses.dataclass(frozen=True, eq=False)
class ReferenceVerdict:
    """What :func:`reference_verdict` found of references that passed: a function of
    their bytes (and of the checking code, and of the htslib reading their header) alone,
    so ``refs/verdicts`` keeps it for the next process opening the same bytes. What the
    full check reads of anything else, the cache, is left to :func:`apply_verdict`, which
    runs at every open."""

    # The header arrays' inline chunks (array, chunk key), whose data is checked when
    # first read (or at once, without defer_inline).
    inline: tuple[tuple[str, str], ...] = ()
    # The call_genotype_mask chunks left out, each of which its GT block must allow.
    omitted_masks: tuple[str, ...] = ()
    # What htslib silently repairs in the header (logged by the check that parsed it).
    header_warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "inline": [list(x) for x in self.inline],
            "omitted_masks": list(self.omitted_masks),
            "header_warnings": list(self.header_warnings),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ReferenceVerdict:
        """The verdict :meth:`to_json` wrote; anything of another shape raises (KeyError,
        TypeError, ValueError)."""
        inline, masks, warnings = d["inline"], d["omitted_masks"], d["header_warnings"]
        if not all(isinstance(x, list) and len(x) == 2 for x in inline):
            raise ValueError("inline chunks are not (array, key) pairs")
        if not all(isinstance(x, str) for x in (*masks, *warnings, *(y for x in inline for y in x))):
            raise ValueError("not strings")
        return cls(tuple((name, leaf) for name, leaf in inline), tuple(masks), tuple(warnings))

    def fits(self, refs: KerchunkRefs) -> bool:
        """Whether what this verdict names is in ``refs`` (the references its key says it
        was found on): each inline chunk a header array's, the genotype arrays there when
        mask chunks are left out. A kept verdict that does not is not used."""
        keys = refs["refs"]
        inline = all(name in arrays.PLAIN_ARRAYS and f"{name}/{leaf}" in keys for name, leaf in self.inline)
        masks = not self.omitted_masks or (f"{MASK}/.zarray" in keys and f"{GENOTYPE}/.zarray" in keys)
        return inline and masks


def reference_verdict(
    refs: KerchunkRefs, refs_path: PathLike, cache: dict[str, Any], *, metadata_only: bool = False
) -> ReferenceVerdict:
    """Every check of :func:`check_references` that reads the references alone (all of them
    but what a local cache holds: the last chunk's record count, the left-out masks' GT
    blocks; and the inline chunks' data, which the caller checks now or at their first read).

    Raises
    ------
    UntrustedReferenceError
        As :func:`check_references`."""
    parquet = bool(refs.get("parquet")) or metadata_only
    templates = {} if parquet else _check_top_level(refs, refs_path, cache["url"])
    keys = arrays.StoreKeys()
    for key, value in refs["refs"].items():
        if not isinstance(key, str):
            raise UntrustedReferenceError(refs_path, f"reference key {key!r} is not a string")
        arrays.split_key(keys, key, value, refs_path)
    header = store_header(refs, refs_path)
    attrs = group_attributes(refs, refs_path)
    provenance = Provenance.from_attributes(attrs, refs_path)
    metas = _check_arrays(keys, refs_path, header, attrs["vcf_header"], provenance)
    warnings = _header_warnings(_split_samples(attrs["vcf_header"])[0])
    if parquet:
        return ReferenceVerdict(header_warnings=warnings)
    targets = chunk_targets(cache, templates, refs_path)
    inline: list[tuple[str, str]] = []
    for name in metas:
        if name in arrays.PLAIN_ARRAYS:
            for leaf in keys.chunks.get(name, []):
                arrays.check_plain_chunk_key(name, leaf, refs["refs"][f"{name}/{leaf}"], metas[name], refs_path)
                inline.append((name, leaf))
        else:
            arrays.check_codec_chunks(name, metas[name], keys, refs_path)
    # Every codec chunk is a reference (checked above); the header arrays' are inline.
    for key, value in refs["refs"].items():
        if type(value) is list:
            check_chunk_ref(key, value, targets, refs_path)
    omitted = omitted_mask_chunks(metas, keys, provenance.cache.layout, refs_path)
    return ReferenceVerdict(tuple(inline), omitted, warnings)


def apply_verdict(
    refs: KerchunkRefs,
    refs_path: PathLike,
    cache: dict[str, Any],
    verdict: ReferenceVerdict,
    *,
    defer_inline: bool = False,
) -> dict[str, InlineChunk]:
    """The rest of :func:`check_references` for references whose ``verdict`` was found
    (now, or by an earlier process for the same bytes): what a local cache says of them
    (its last chunk's record count, the left-out masks' GT blocks), and the inline chunks'
    data, checked now or, with ``defer_inline``, returned for the store to check on read.

    Raises
    ------
    UntrustedReferenceError
        As :func:`check_references`."""
    if refs.get("parquet"):
        return {}
    recorded = RecordedCache.from_json(cache, refs_path)
    targets = targets_of(recorded, template=refs.get("templates", {}).get(CACHE_TEMPLATE) == cache["url"])
    metas: dict[str, dict[str, Any]] = {}

    def meta(name: str) -> dict[str, Any]:  # each array's .zarray, parsed when needed
        if name not in metas:
            metas[name] = arrays.json_object(refs["refs"][f"{name}/.zarray"], f"{name}/.zarray", refs_path)
        return metas[name]

    if cache["url"].startswith("file://"):
        if "variant_position/.zarray" in refs["refs"]:
            _check_record_count(refs["refs"], meta("variant_position"), targets, recorded.layout, refs_path)
        if verdict.omitted_masks:
            _check_omitted_blocks(refs["refs"], verdict.omitted_masks, meta(MASK), meta(GENOTYPE), targets, refs_path)
    inline = {f"{name}/{leaf}": InlineChunk(name, leaf, meta(name)) for name, leaf in verdict.inline}
    if defer_inline:
        return inline
    for key, chunk in inline.items():
        check_inline_chunk(chunk, refs["refs"][key], refs_path)
    return {}


MASK, GENOTYPE = "call_genotype_mask", "call_genotype"


def omitted_mask_chunks(
    metas: dict[str, dict[str, Any]], keys: arrays.StoreKeys, layout: LayoutName | None, refs_path: PathLike
) -> tuple[str, ...]:
    """The call_genotype_mask chunks the references leave out (read as False, the fill
    value), each of which must be one whose GT block says so (:func:`_check_omitted_blocks`):
    only the columns layout's segments say it.

    Raises
    ------
    UntrustedReferenceError
        Chunks are left out of a store whose cache is not of the columns layout."""
    leaves = keys.chunks.get(MASK, [])
    if MASK not in metas:
        return ()
    grid = [max(1, -(-s // c)) for s, c in zip(metas[MASK]["shape"], metas[MASK]["chunks"])]
    if not metas[MASK]["shape"][0] or len(leaves) == np.prod(grid):
        return ()
    if layout != "columns" or GENOTYPE not in metas:
        raise UntrustedReferenceError(
            refs_path, f"{MASK} leaves out chunks, which only a columns cache's complete GT blocks allow"
        )
    every = map(".".join, itertools.product(*(map(str, range(n)) for n in grid)))
    return tuple(sorted(set(every) - set(leaves)))


def _check_omitted_blocks(
    refs: dict[str, Any],
    omitted: tuple[str, ...],
    mask_meta: dict[str, Any],
    gt_meta: dict[str, Any],
    targets: ChunkTargets,
    refs_path: PathLike,
) -> None:
    """Each left-out mask chunk's GT block (:func:`omitted_mask_chunks`) says it may be left
    out: its segment's preamble (call_genotype's chunk of the same key) holds a complete
    count of the array's ploidy, every call that many alleles, none missing. Read from a
    local cache (36 bytes per chunk left out) at every open, as the cache's bytes are no
    part of the references' verdict; not over a network, where ``vcfvirtual verify``
    compares the mask with htslib's calls."""
    if not targets.cache_url.startswith("file://"):
        return
    complete = _GTBlockClaim(mask_meta["shape"][-1], gt_meta["filters"][-1]["key"])
    fds: dict[str, int] = {}
    try:
        for leaf in omitted:
            # call_genotype's chunk of the same key: its grid is the mask's (both checked
            # against the codec configs), each of its chunks a range of the cache.
            gt = refs.get(f"{GENOTYPE}/{leaf}")
            if type(gt) is list and gt[0] not in fds:
                fds[gt[0]] = os.open(targets.files[gt[0]][0].removeprefix("file://"), os.O_RDONLY)
            if type(gt) is not list or not complete.holds(fds[gt[0]], gt[1]):
                raise UntrustedReferenceError(
                    refs_path,
                    f"{MASK} leaves out chunk {leaf}, but its GT block does not hold {complete.ploidy} alleles in "
                    "every call: zarr would read its missing calls as not missing",
                    hint=UNTRUSTED_HINT,
                )
    finally:
        for fd in fds.values():
            os.close(fd)


class _GTBlockClaim:
    """What a left-out mask chunk's GT block must say in its preamble: a GT segment (FORMAT
    key ``gt_key``) whose complete count is ``ploidy``. One ``pread`` per block (~1 us)."""

    def __init__(self, ploidy: int, gt_key: int) -> None:
        from vcfvirtual_codec import columns as codec_columns

        self.ploidy, self.gt_key = ploidy, gt_key
        self.size, self.unpack = codec_columns.PREAMBLE.size, codec_columns.PREAMBLE.unpack_from
        self.magics, self.kind = codec_columns.READ_MAGICS, codec_columns.SEGMENT_KINDS["format"]

    def holds(self, fd: int, offset: int) -> bool:
        data = os.pread(fd, self.size, offset)
        if len(data) != self.size:
            return False
        magic, kind, _, complete_count, key, *_ = self.unpack(data)
        return magic in self.magics and kind == self.kind and key == self.gt_key and complete_count == self.ploidy


def _check_record_count(
    refs: dict[str, Any], meta: dict[str, Any], targets: ChunkTargets, layout: LayoutName | None, refs_path: PathLike
) -> None:
    """The records the arrays declare against the cache's: the last chunk of
    variant_position must hold exactly the remainder. The codec cannot tell a last chunk
    from another (numcodecs does not say which chunk it decodes), so it accepts a full one
    there, and num_records lowered by one in every array would drop a record silently.
    Read from the fingerprinted cache where its layout counts a chunk's records cheaply
    (:meth:`~vcfvirtual.cache.base.CacheLayout.chunk_records`: not a BGZF cache's)."""
    config = meta["filters"][-1]
    n, length = config["num_records"], config["chunk_length"]
    if not n or layout is None:
        return
    last = (n - 1) // length
    url, offset, size = refs[f"variant_position/{last}"]
    path = targets.files[url][0].removeprefix("file://")  # checked: a local file of the cache
    with open(path, "rb") as f:
        found = chunk_records(layout, f, offset, size)
    if found is not None and found != n - last * length:
        raise UntrustedReferenceError(
            refs_path,
            f"the arrays declare {n} records, but the cache's last chunk holds {found}, not {n - last * length}",
            hint=UNTRUSTED_HINT,
        )


# What the checks read of each layout, apart from its writer: cache.layouts imports the
# scan and every writer (~60 ms, most of a fresh open's imports) for these two facts.
# tests/unit/vcfvirtual/refs/test_checks.py holds them equal to the writers' own
# (CacheLayout.rlen_resolved, CacheLayout.chunk_records).
RLEN_RESOLVED: frozenset[LayoutName] = frozenset({"columns"})


def chunk_records(layout: LayoutName, f: BinaryIO, offset: int, size: int) -> int | None:
    """How many records the chunk at ``offset`` (``size`` bytes) of a ``layout`` cache
    open as ``f`` holds, as :meth:`~vcfvirtual.cache.base.CacheLayout.chunk_records`
    reads it: a columns segment's preamble (-1 for bytes that are no segment), a raw
    chunk's records walked by their lengths, None for a BGZF chunk (that needs a decode)."""
    if layout == "bgzf":
        return None
    f.seek(offset)
    if layout == "columns":
        from vcfvirtual_codec import columns as codec_columns

        data = f.read(codec_columns.PREAMBLE.size)
        if len(data) != codec_columns.PREAMBLE.size:
            return -1
        fields = codec_columns.PREAMBLE.unpack_from(data)
        return int(fields[5]) if fields[0] in codec_columns.READ_MAGICS else -1
    data = f.read(size)
    found, at = 0, 0
    while at + 8 <= len(data):  # l_shared and l_indiv before each record
        at += 8 + int.from_bytes(data[at : at + 4], "little") + int.from_bytes(data[at + 4 : at + 8], "little")
        found += 1
    return found


def _check_arrays(
    keys: arrays.StoreKeys, refs_path: PathLike, header: BCFHeader, header_text: str, provenance: Provenance
) -> dict[str, dict[str, Any]]:
    """Every array's metadata: the codec arrays' against their configs, the header and one
    another, the header arrays' against the header. Returns each array's ``.zarray``."""
    field_map = _store_fields(refs_path, header_text, provenance)
    # The local-allele arrays (index --local-alleles) stand in for call_AD and call_PL.
    expected = arrays.expected_arrays(header, field_map, local_alleles="call_LA" in keys.metas)
    arrays.check_names(keys, expected, refs_path)
    shared = _Expected(header, field_map.fields_by_array(), provenance.cache.layout)
    metas = {name: arrays.json_object(value, f"{name}/.zarray", refs_path) for name, value in keys.metas.items()}
    specs = {
        name: _check_array_metadata(name, meta, refs_path, shared)
        for name, meta in metas.items()
        if expected[name] == "codec"
    }
    arrays.check_codec_arrays(specs, header, provenance, refs_path)
    n_records = next(iter(specs.values())).num_records if specs else 0
    for name, meta in metas.items():
        if expected[name] == "plain":
            arrays.check_plain_array(name, meta, header, n_records, refs_path)
    arrays.check_dimension_names(keys, metas, refs_path)
    return metas


def _check_top_level(refs: KerchunkRefs, refs_path: PathLike, cache_url: str) -> dict[str, str]:
    """A Kerchunk JSON holds only version, templates and refs; its one template names the
    declared cache. Returns the templates."""
    extra = set(refs) - {"version", "templates", "refs"}
    if extra:  # "gen" would generate references from templates we never see here
        raise UntrustedReferenceError(
            refs_path,
            f"the references hold {sorted(map(str, extra))}, which vcfvirtual never writes",
            hint=UNTRUSTED_HINT,
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
    return templates


def targets_of(cache: RecordedCache, *, template: bool) -> ChunkTargets:
    """The :class:`~vcfvirtual.refs.guard.ChunkTargets` of ``cache``; with ``template``, the
    template forms too."""
    files: dict[str, tuple[str, int]] = {}
    prefix = "{{" + CACHE_TEMPLATE + "}}"
    for file in cache_files(cache):
        target = (file.url, file.fingerprint.size)
        files[file.url] = target
        if template:
            files[prefix + file.url[len(cache.url) :]] = target
    return ChunkTargets(files, cache.url)


def chunk_targets(cache: dict[str, Any], templates: dict[str, Any], refs_path: PathLike) -> ChunkTargets:
    """The targets of the declared ``cache`` (:func:`declared_cache`), the template forms
    included when ``templates`` (as checked by :func:`check_references`) define the cache's.

    The URL as written, not as resolved here: Kerchunk resolves templates its own way
    (str.format), so only the exact template forms (naming the cache) or the cache's URLs pass."""
    recorded = RecordedCache.from_json(cache, refs_path)
    return targets_of(recorded, template=templates.get(CACHE_TEMPLATE) == cache["url"])


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


def store_header(refs: KerchunkRefs, refs_path: PathLike) -> BCFHeader:
    """The VCF header the store was indexed from (its ``vcf_header`` attribute), parsed
    as htslib parses it: the dictionary keys every codec config must agree with."""
    text = group_attributes(refs, refs_path).get("vcf_header")
    if not isinstance(text, str):
        raise UntrustedReferenceError(
            refs_path,
            "the references carry no vcf_header attribute to check their codec configurations against",
            hint=UNTRUSTED_HINT,
        )
    try:
        return _parsed_header(text)
    except VcfVirtualError as e:
        raise UntrustedReferenceError(
            refs_path, f"the vcf_header attribute is not a header htslib reads: {e.problem}", hint=UNTRUSTED_HINT
        ) from None


@functools.lru_cache(maxsize=8)
def _parsed_header(text: str) -> BCFHeader:
    """The header htslib makes of ``text`` (BCFHeader is frozen): parsed once per text, as
    through pysam it costs a temporary file and a few ms at every open of the same store;
    and once per text across processes (:mod:`~vcfvirtual.refs.header_cache`, keyed by a
    digest of the text and the parser), as importing pysam alone costs ~20 ms of a fresh
    open; so is the verdict that the samples are distinct (a set of 100,000 names, ~25 ms).
    Errors and htslib's warnings name the attribute; the caller names the references."""
    from ..bcf.header import parse_header_text
    from . import header_cache

    full = text
    text, samples = _split_samples(text)
    if samples is not None and not header_cache.samples_distinct(full):
        if len(set(samples)) != len(samples) or "" in samples:
            # What htslib refuses in a #CHROM line ("Duplicated sample name", "Empty sample name").
            raise VcfVirtualError("vcf_header", "its #CHROM line names a sample twice, or an empty sample")
        header_cache.mark_samples_distinct(full)
    header = header_cache.load(text)
    if header is None:
        header = parse_header_text(text.encode("utf-8"), "vcf_header", 0)
        header_cache.store(text, header)  # only a header htslib accepted
    else:
        for warning in _header_warnings(text):  # as the parse logs them
            logger.warning("%s: %s", "vcf_header", warning)
    return header if samples is None else dataclasses.replace(header, samples=samples)


@functools.lru_cache(maxsize=8)
def _header_warnings(text: str) -> tuple[str, ...]:
    """What htslib silently repairs or drops in header ``text`` (cut after its first
    sample, as :func:`_parsed_header` parses it), worked out once per text."""
    from ..bcf.header import header_line_warnings

    return tuple(header_line_warnings(text))


# Two callers per check of one header (its parse and its warnings): the names are split
# once (~95 ms at 10^6 samples); the tuple kept is the one the parsed header holds anyway.
@functools.lru_cache(maxsize=2)
def _split_samples(text: str) -> tuple[str, tuple[str, ...] | None]:
    """The header text with its #CHROM line cut after the first sample, and every sample.

    htslib builds a dictionary entry per sample name, which costs ~0.3 s at 100,000 samples
    (through pysam) at every open; the codec configs are checked only against the field,
    filter and contig keys, which the samples do not change, and against the number of
    samples, counted here. (None, the text unchanged) when there is no sample to cut."""
    cut = text.rfind("\n#CHROM\t", 0, len(text) - 1)
    if cut < 0:
        return text, None
    line = text[cut + 1 :]
    end = line.find("\n")
    if end >= 0 and line[end + 1 :].strip("\n\x00"):
        return text, None  # something follows the #CHROM line: left to htslib as it is
    line = line[:end] if end >= 0 else line
    columns = line.rstrip("\r").split("\t")
    if len(columns) <= 10:
        return text, None
    return text[: cut + 1] + "\t".join(columns[:10]) + "\n", tuple(columns[9:])


# eq=False: never compared (nor hashed) by value, and each generated method costs ~0.3 ms
# of every fresh open's import (docs/benchmarks.md, "open_store").
@dataclasses.dataclass(frozen=True, eq=False)
class _Expected:
    """What every codec configuration of one store must agree with: its header, the array
    of each INFO/FORMAT field (``array -> (category, ID)``, under the store's recorded
    renames and selection), and its cache's layout."""

    header: BCFHeader
    fields: dict[str, tuple[str, str]]
    layout: LayoutName | None


def _store_fields(refs_path: PathLike, header_text: str, provenance: Provenance) -> FieldMap:
    """The INFO/FORMAT fields' arrays, as the index named them (``vcfvirtual.fields``)."""
    recorded = provenance.fields
    try:
        # Keyed by the header's text (its hash is kept with the string), not the header.
        return _fields_of(header_text, json.dumps(recorded, sort_keys=True))
    except VcfVirtualError as e:
        raise UntrustedReferenceError(
            refs_path, f"the recorded field choice does not fit the store's header: {e.problem}", hint=UNTRUSTED_HINT
        ) from None


@functools.lru_cache(maxsize=8)
def _fields_of(text: str, recorded: str) -> FieldMap:
    """The field map of one header text and recorded choice, made once per store as its
    header is parsed once (a header of 1,000 INFO keys takes ~1 ms). Callers only read it."""
    from ..bcf.fields import FieldChoice, map_fields

    header = _parsed_header(text)
    choice = FieldChoice.from_attribute({"fields": json.loads(recorded)})
    return map_fields([f.name for f in header.info], [f.name for f in header.formats], choice)


def _agrees_with_header(name: str, spec: ChunkSpec, meta: dict[str, Any], expected: _Expected) -> list[str]:
    """How ``spec`` differs from what the index writes for array ``name`` of this header."""
    header, layout = expected.header, expected.layout
    problems = []
    if spec.array != name:
        problems.append(f"its config names array {spec.array!r}")
    if layout is not None and spec.layout != layout:
        problems.append(f"layout {spec.layout!r}, the cache's is {layout!r}")
    shape = meta.get("shape")
    if isinstance(shape, list) and shape and shape[0] != spec.num_records:
        problems.append(f"{spec.num_records} records in its config, {shape[0]} in its shape")
    if name in _KIND_OF_ARRAY:
        return problems + _fixed_array_problems(name, spec, header, layout)
    if spec.kind in _LOCAL_ARRAY_OF_KIND:
        return problems + _local_array_problems(name, spec, header)
    return problems + _field_array_problems(name, spec, header, expected.fields.get(name))


# The local-allele arrays (index --local-alleles) and the FORMAT field each gathers.
_LOCAL_ARRAY_OF_KIND = {
    "local_alleles": ("call_LA", "GT"),
    "local_ad": ("call_LAD", "AD"),
    "local_pl": ("call_LPL", "PL"),
}


def _local_array_problems(name: str, spec: ChunkSpec, header: BCFHeader) -> list[str]:
    """A local-allele array's config: its name, and GT's and its field's keys and type."""
    expected, field_name = _LOCAL_ARRAY_OF_KIND[spec.kind]
    if name != expected:
        return [f"kind {spec.kind!r} is call_{expected.removeprefix('call_')}'s, not {name}'s"]
    field = next((f for f in header.formats if f.name == field_name), None)
    typed = field is not None and (field.type == "Integer" or spec.kind == "local_alleles")
    if field is None or spec.gt_key != header.gt_key or spec.key != field.key or not typed:
        found = "none" if field is None else f"{field.key} ({field.type})"
        return [f"GT key {spec.gt_key} and {field_name} key {spec.key}, the header's are {header.gt_key} and {found}"]
    if spec.shape[0] != len(header.samples):
        return [f"{spec.shape[0]} samples, the header has {len(header.samples)}"]
    return []


def _fixed_array_problems(name: str, spec: ChunkSpec, header: BCFHeader, layout: LayoutName | None = None) -> list[str]:
    """A fixed-field array's config: its kind, and the header keys it decodes with."""
    # A cache holding rlen already resolved from END (columns): variant_length reads no key.
    end_key = -1 if layout in RLEN_RESOLVED else header.end_key
    n_samples = len(header.samples)
    if spec.kind != _KIND_OF_ARRAY[name]:
        return [f"kind {spec.kind!r}, expected {_KIND_OF_ARRAY[name]!r}"]
    if spec.kind.startswith("genotype") and (spec.key != header.gt_key or spec.shape[0] != n_samples):
        return [f"GT key {spec.key} and {spec.shape[0]} samples, the header's are {header.gt_key} and {n_samples}"]
    if spec.kind == "length" and spec.key != end_key:
        return [f"END key {spec.key}, the header's INFO/END key is {end_key}"]
    if spec.kind == "filter" and (
        list(spec.filter_columns) != header.filter_column_map() or spec.shape[0] != len(header.filters)
    ):
        return [f"filter_columns {list(spec.filter_columns)}, the header's are {header.filter_column_map()}"]
    return []


def _field_array_problems(name: str, spec: ChunkSpec, header: BCFHeader, owner: tuple[str, str] | None) -> list[str]:
    """An INFO/FORMAT array's config: a field the header declares, whose array is ``name``
    under the store's field choice (``owner``: that field), with its key and type."""
    category = {"info": "INFO", "format": "FORMAT"}.get(spec.kind)
    if category is None or owner is None or owner[0] != category:
        return [f"kind {spec.kind!r} is not that of an INFO or FORMAT field the header declares"]
    fields = header.info if category == "INFO" else header.formats
    field = next((f for f in fields if f.name == owner[1]), None)
    if field is None:
        return [f"kind {spec.kind!r} is not that of an INFO or FORMAT field the header declares"]
    if spec.key != field.key or spec.vcf_type != field.type:
        return [
            f"key {spec.key} and type {spec.vcf_type!r}, the header's {category}/{field.name} has "
            f"{field.key} and {field.type!r}"
        ]
    if category == "FORMAT" and spec.shape[0] != len(header.samples):
        return [f"{spec.shape[0]} samples, the header has {len(header.samples)}"]
    return []


def _check_array_metadata(name: str, meta: dict[str, Any], refs_path: PathLike, expected: _Expected) -> ChunkSpec:
    """An array the index writes for our codec: the codec is its one, last filter, and its
    metadata agrees with the codec's config (or zarr would reshape the decoded bytes into
    another shape, an untyped error) and the config with the store's header. An array
    naming the codec nowhere, or as its compressor, is refused: it would reach zarr
    unchecked. Returns the config."""
    from vcfvirtual_codec.spec import CODEC_ID

    filters = meta.get("filters") or []
    if not isinstance(filters, list) or not all(isinstance(f, dict) for f in filters):
        raise UntrustedReferenceError(refs_path, f"{name}/.zarray: filters are not a list of codec configs")
    ours = [f for f in filters if f.get("id") == CODEC_ID]
    if not ours:
        where = " (it is the compressor)" if _names_codec(meta.get("compressor")) else ""
        raise UntrustedReferenceError(
            refs_path,
            f"array {name}: its filters name no vcfvirtual.bcf codec{where}, which the index writes for it",
            hint=UNTRUSTED_HINT,
        )
    spec = _chunk_spec(name, ours[-1], refs_path)
    problems = arrays.common_problems(meta)
    if filters[-1] is not ours[-1] or len(ours) != 1:
        problems.append("the vcfvirtual.bcf codec is not the one, last filter")
    problems += _metadata_problems(meta, filters, spec)
    problems += _agrees_with_header(name, spec, meta, expected)
    if problems:
        raise UntrustedReferenceError(refs_path, f"array {name}: " + "; ".join(problems), hint=UNTRUSTED_HINT)
    return spec


def _names_codec(compressor: Any) -> bool:
    from vcfvirtual_codec.spec import CODEC_ID

    return isinstance(compressor, dict) and compressor.get("id") == CODEC_ID


def _chunk_spec(name: str, config: dict[str, Any], refs_path: PathLike) -> ChunkSpec:
    from vcfvirtual_codec.spec import ChunkSpec

    try:
        return ChunkSpec.from_config(config)
    except VcfVirtualError as e:
        raise UntrustedReferenceError(refs_path, f"array {name}: {e.problem}", hint=UNTRUSTED_HINT) from None
    except (TypeError, ValueError) as e:
        raise UntrustedReferenceError(
            refs_path, f"array {name}: bad vcfvirtual.bcf config ({e})", hint=UNTRUSTED_HINT
        ) from None


def _metadata_problems(meta: dict[str, Any], filters: list[dict[str, Any]], spec: ChunkSpec) -> list[str]:
    """How the .zarray's filters, compressor, chunks, shape and dtype differ from what the codec decodes."""
    problems = []
    others = [f.get("id") for f in filters[:-1]]
    if others not in ([], ["vlen-utf8"]) or (others == ["vlen-utf8"]) != (spec.dtype == "str"):
        problems.append(f"filters {others} do not fit dtype {spec.dtype}")
    if meta.get("compressor") is not None:
        problems.append("a compressor runs before the codec")
    # Zarr chunks have no zero-length side; a columns sample array's chunk is one samples block.
    chunks = [spec.chunk_length, *[max(1, x) for x in spec.chunk_shape[1:]]]
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
    return problems


def guarded_reference_fs(
    targets: ChunkTargets, refs_path: PathLike, inline: dict[str, InlineChunk] | None = None, **kwargs: Any
) -> Any:
    """A Kerchunk reference filesystem that fetches only ranges of the declared cache:
    what is checked eagerly for JSON is checked per fetch for lazily loaded Parquet.

    Parameters
    ----------
    targets
        The declared cache's files (its parts, for a cache made of parts), whose
        fingerprints were checked, as fsspec resolves the references' URLs (no template forms).
    refs_path
        The references, as errors name them.
    inline
        Inline chunks whose data is checked when first read (``check_references(...,
        defer_inline=True)``).
    **kwargs
        fsspec's ``ReferenceFileSystem`` arguments (``fo``, ``remote_protocol``...).

    Returns
    -------
    fsspec.implementations.reference.ReferenceFileSystem
        Raising ``UntrustedReferenceError`` on a fetch outside the cache."""
    from fsspec.implementations.reference import ReferenceFileSystem

    class GuardedReferenceFileSystem(ReferenceFileSystem):
        # fsspec's async hook for reading one reference (what zarr's reads go through);
        # ReferenceFileSystem has no public per-reference hook to guard.
        def _cat_common(self, path: str, start: int | None = None, end: int | None = None) -> Any:
            key = self._strip_protocol(path)
            part = self.references.get(key) if hasattr(self.references, "get") else None
            if isinstance(part, (list, tuple)):
                check_chunk_ref(key, list(part), targets, refs_path)
            elif inline and key in inline:
                value = part.decode("latin-1") if isinstance(part, bytes) else part
                check_inline_chunk(inline[key], value if isinstance(value, str) else "", refs_path)
                inline.pop(key, None)
            return super()._cat_common(path, start=start, end=end)

    return GuardedReferenceFileSystem(skip_instance_cache=True, **kwargs)


def copy_differs(expected: Fingerprint, found: Fingerprint) -> str | None:
    """How a copy of the cache (uploaded, served, relocated) differs from the indexed one:
    size and sampled hash only, as a copy's modification time is its own; None when it does not."""
    if found.size != expected.size:
        return f"it is {found.size} bytes, it was {expected.size} when indexed"
    if expected.digest is not None and found.digest != expected.digest:
        return "its contents changed (sampled hash differs) since it was indexed"
    return None


# Zarr v3 data types as the v2 dtype strings the checks compare with the codec's.
_V2_DTYPES = {
    "bool": "|b1",
    "int8": "|i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "|u1",
    "float32": "<f4",
    "float64": "<f8",
    "string": "|O",
}


def icechunk_as_references(group: Any, attrs: dict[str, Any], refs_path: PathLike) -> KerchunkRefs:
    """An Icechunk repository's metadata as the Kerchunk references it stands for, so the
    same checks read it: each array's zarr.json becomes a ``.zarray`` (its array-to-bytes
    codec and ``vlen-utf8`` as filters, our codec last) and its dimension names a ``.zattrs``.
    Anything the index never writes there (another codec, a storage transformer, a
    nested group, a data type with no v2 spelling) is refused.

    Raises
    ------
    UntrustedReferenceError
        As described."""
    out: dict[str, Any] = {".zgroup": {"zarr_format": 2}, ".zattrs": attrs}
    for name, node in group.members():
        meta = json.loads(json.dumps(node.metadata.to_dict(), default=str))  # lists, as JSON has them
        if meta.get("node_type") != "array" or meta.get("storage_transformers"):
            raise UntrustedReferenceError(
                refs_path, f"{name} is not an array vcfvirtual index writes", hint=UNTRUSTED_HINT
            )
        out[f"{name}/.zarray"] = _v2_metadata(name, meta, refs_path)
        out[f"{name}/.zattrs"] = {"_ARRAY_DIMENSIONS": list(meta.get("dimension_names") or [])}
    return {"refs": out}


def _v2_metadata(name: str, meta: dict[str, Any], refs_path: PathLike) -> dict[str, Any]:
    from vcfvirtual_codec.spec import CODEC_ID

    codecs = meta.get("codecs") or []
    first = codecs[0].get("name") if codecs and isinstance(codecs[0], dict) else None
    rest = [c for c in codecs[1:] if isinstance(c, dict)]
    grid = meta.get("chunk_grid", {})
    dtype = _V2_DTYPES.get(str(meta.get("data_type")))
    if first not in ("bytes", "vlen-utf8") or len(rest) != len(codecs) - 1 or dtype is None:
        raise UntrustedReferenceError(
            refs_path, f"array {name}: codecs {codecs!r}"[:300] + " are not what the index writes", hint=UNTRUSTED_HINT
        )
    filters: list[dict[str, Any]] = [{"id": "vlen-utf8"}] if first == "vlen-utf8" else []
    filters += [{"id": c.get("name"), **(c.get("configuration") or {})} for c in rest]
    theirs = [f for f in filters if f.get("id") not in ("vlen-utf8", CODEC_ID)]
    return {
        "shape": meta.get("shape"),
        "chunks": grid.get("configuration", {}).get("chunk_shape") if grid.get("name") == "regular" else None,
        "dtype": dtype,
        "filters": [f for f in filters if f not in theirs] or None,
        "compressor": theirs[0] if theirs else None,
        "order": "C",
        "zarr_format": 2,
        "fill_value": meta.get("fill_value"),
    }
