"""References read and checked as opening them checks them, without opening a store: what
:func:`~vcfvirtual.refs.open.open_store` runs first, and what writers that build on a store
(appending, converting, the index keeping its verdict) run alone. Apart from open.py so
that they import no zarr (~0.2 s of the index's CPU)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..errors import UntrustedReferenceError, VcfVirtualError
from .checks import UNTRUSTED_HINT, InlineChunk, apply_verdict, check_cache, declared_cache
from .kerchunk import KerchunkRefs, read_references, require_parquet
from .verdicts import key_of, verdict_once


def load_for_reading(
    refs_path: str, cache_url: str | None, storage_options: dict[str, Any] | None
) -> tuple[KerchunkRefs, str]:
    """The references, pointed at ``cache_url`` when given (Kerchunk JSON only), and the
    digest of their bytes as read (:func:`~vcfvirtual.refs.kerchunk.read_references`)."""
    refs, digest = read_references(refs_path, storage_options)
    if not isinstance(refs, dict) or not isinstance(refs.get("refs"), dict):
        raise UntrustedReferenceError(refs_path, "not Kerchunk references: no 'refs' map")
    if refs.get("parquet"):
        require_parquet(refs_path)
        if cache_url is not None:
            raise VcfVirtualError(
                refs_path,
                "Parquet references name the cache in every chunk",
                hint="write them again with vcfvirtual index --format parquet --cache-url",
            )
    elif cache_url is not None:
        from .relocate import relocate

        refs = relocate(refs, cache_url, refs_path)
    return refs, digest


def check_store(refs_path: str | os.PathLike[str], *, storage_options: dict[str, Any] | None = None) -> None:
    """Every check :func:`open_store` makes of Kerchunk references (JSON or Parquet), all
    at once: the header arrays' inline data too, which a store checks when first read.
    For writers that build on a store (appending) rather than read it.

    Raises
    ------
    StaleCacheError, UntrustedReferenceError, VcfVirtualError
        As :func:`open_store`."""
    refs_path = os.fspath(refs_path)
    refs, digest = load_for_reading(refs_path, None, storage_options)
    checked_cache(refs, refs_path, storage_options, digest, defer=False)


@dataclasses.dataclass(frozen=True, eq=False)
class CheckedCache:
    """What :func:`checked_cache` found: the declared cache (its ``vcfvirtual.cache``
    attribute as JSON), the inline chunks the store is left to check when first read
    (none when not deferred), and htslib's warnings about the store's header."""

    cache: dict[str, Any]
    inline: dict[str, InlineChunk]
    header_warnings: tuple[str, ...]


def checked_cache(
    refs: KerchunkRefs, refs_path: str, storage_options: dict[str, Any] | None, digest: str, *, defer: bool = True
) -> CheckedCache:
    """The declared cache, once it and every reference passed their checks: the cache first
    (missing, changed, not a regular file), then every reference against it, so nothing
    the references name is fetched before both pass; and, with ``defer``, the header
    arrays' inline chunks whose data the store checks when each is first read.

    The cache is checked at every open (its files change); what the references' bytes
    alone decide is taken from an earlier process's verdict on the same bytes (``digest``)
    when there is one (:mod:`~vcfvirtual.refs.verdicts`)."""
    cache = required_cache(refs, refs_path)
    check_cache(refs, refs_path, storage_options)
    verdict = verdict_once(refs, refs_path, cache, key_of(digest, cache["url"]))
    inline = apply_verdict(refs, refs_path, cache, verdict, defer_inline=defer)
    return CheckedCache(cache, inline, verdict.header_warnings)


def required_cache(refs: KerchunkRefs, refs_path: str) -> dict[str, Any]:
    """The cache the references declare (:func:`declared_cache`), which checked reading needs.

    Raises
    ------
    UntrustedReferenceError
        They declare none (not written by vcfvirtual), or a malformed one."""
    cache = declared_cache(refs, refs_path)
    if cache is None:
        raise UntrustedReferenceError(
            refs_path,
            "the references declare no vcfvirtual cache, so nothing they point at can be checked",
            hint=UNTRUSTED_HINT,
        )
    return cache
