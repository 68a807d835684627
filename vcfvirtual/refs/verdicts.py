"""What the reference checks found, kept by digest so that a fresh process opening the
same references again skips the work (at 100,000 samples ~28 ms of a ~54 ms open: the
keys split, every codec config against the header, every chunk reference).

:func:`~vcfvirtual.refs.checks.reference_verdict` is a function of the references' bytes,
of our checking code and of the htslib reading their header, nothing else: it reads no
file but the references (the cache's checks are apart, in
:func:`~vcfvirtual.refs.checks.apply_verdict`, and :func:`~vcfvirtual.refs.checks.check_cache`,
run at every open), no environment variable, no clock. So a verdict is kept under a key
made of exactly those: a digest of the bytes as read, the cache URL they were pointed at
(``open_store(cache_url=...)`` rewrites them), and a digest of what identifies the file of
every module the check runs and pysam's version file (:mod:`~vcfvirtual.refs.checking_code`:
any write to one changes it). Only a passing
verdict is kept, and what it records (the inline chunks to check on first read, the mask
chunks left out, htslib's warnings about the header) is what the full check returns or
logs, so a later open returns and logs the same.

Entries live in ``verdicts/`` of the user's cache folder (:mod:`vcfvirtual.io.user_cache`);
one that does not read back as a verdict of this key is ignored and the references
checked in full; a folder that cannot be written means every open checks in full.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path
from typing import Any

from ..io import user_cache
from . import checking_code
from .checks import ReferenceVerdict, reference_verdict
from .kerchunk import KerchunkRefs

logger = logging.getLogger("vcfvirtual.refs.checks")  # the warnings as the full check logs them

# Bumped when the entries' layout changes: an entry of another format is never read.
FORMAT = 1


@functools.cache
def _code_digest() -> bytes:
    return checking_code.identity(f"vcfvirtual-verdicts-{FORMAT}")


def key_of(refs_digest: str, cache_url: str) -> str:
    """The key of the verdict on references whose bytes have digest ``refs_digest``, as
    pointed at ``cache_url`` (the cache URL they declare once relocated, if they were)."""
    h = hashlib.blake2b(_code_digest(), digest_size=32)
    h.update(refs_digest.encode())
    h.update(b"\x00" + cache_url.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def cache_dir() -> Path:
    """The folder holding the verdicts (``verdicts/`` below the user's vcfvirtual cache)."""
    return user_cache.folder("verdicts")


def load(key: str) -> ReferenceVerdict | None:
    """The verdict kept under ``key``, or None when there is none usable."""
    entry = user_cache.read_entry(cache_dir() / f"{key}.json", FORMAT, key)
    if entry is None:
        return None
    try:
        return ReferenceVerdict.from_json(entry["verdict"])
    except (KeyError, TypeError, ValueError):
        return None


def store(key: str, verdict: ReferenceVerdict) -> None:
    """Keep ``verdict`` (of references that passed) under ``key``, or nothing when the
    folder cannot be written."""
    user_cache.write_entry(cache_dir() / f"{key}.json", {"format": FORMAT, "key": key, "verdict": verdict.to_json()})


def verdict_once(refs: KerchunkRefs, refs_path: str, cache: dict[str, Any], key: str | None) -> ReferenceVerdict:
    """The verdict on ``refs``' bytes: the one kept under ``key``, or found (and kept there)
    by :func:`~vcfvirtual.refs.checks.reference_verdict`; htslib's warnings about the header
    logged either way.

    Raises
    ------
    UntrustedReferenceError
        As ``reference_verdict``."""
    verdict = load(key) if key is not None else None
    if verdict is None or not verdict.fits(refs):
        verdict = reference_verdict(refs, refs_path, cache)
        if key is not None:
            store(key, verdict)
    else:
        for warning in verdict.header_warnings:  # as the header's parse or check logs them
            logger.warning("%s: %s", "vcf_header", warning)
    return verdict
