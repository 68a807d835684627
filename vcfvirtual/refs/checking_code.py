"""What identifies the code that checks references: the file of every module of ours a full
check runs, and pysam's version file (htslib parses the store's header). Results kept so
that a later process skips a check (``refs/verdicts``, ``refs/opened``) are keyed by it, so
an edit to any of them (an editable install changes code under one version) makes the
check run again.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..io import user_cache

# Every module of ours a full check runs (imports included), as files of their packages:
# tests/unit/vcfvirtual/refs/test_verdicts.py holds this list to what a check imports.
CHECKING_MODULES = (
    "vcfvirtual/__init__.py",
    "vcfvirtual/_json.py",
    "vcfvirtual/_codecs.py",
    "vcfvirtual/errors.py",
    "vcfvirtual/interrupts.py",
    "vcfvirtual/bcf/__init__.py",
    "vcfvirtual/bcf/fields.py",
    "vcfvirtual/bcf/header.py",
    "vcfvirtual/cache/__init__.py",
    "vcfvirtual/cache/names.py",
    "vcfvirtual/io/__init__.py",
    "vcfvirtual/io/fingerprint.py",
    "vcfvirtual/io/outputs.py",
    "vcfvirtual/io/parts.py",
    "vcfvirtual/io/remote.py",
    "vcfvirtual/io/user_cache.py",
    "vcfvirtual/manifests/__init__.py",
    "vcfvirtual/manifests/inline.py",
    "vcfvirtual/manifests/provenance.py",
    "vcfvirtual/refs/__init__.py",
    "vcfvirtual/refs/arrays.py",
    "vcfvirtual/refs/checked.py",
    "vcfvirtual/refs/checking_code.py",
    "vcfvirtual/refs/checks.py",
    "vcfvirtual/refs/formats.py",
    "vcfvirtual/refs/guard.py",
    "vcfvirtual/refs/header_cache.py",
    "vcfvirtual/refs/icechunk.py",
    "vcfvirtual/refs/kerchunk.py",
    "vcfvirtual/refs/opened.py",
    "vcfvirtual/refs/open.py",
    "vcfvirtual/refs/relocate.py",
    "vcfvirtual/refs/verdicts.py",
    "vcfvirtual_codec/__init__.py",
    "vcfvirtual_codec/_kernels/__init__.py",
    "vcfvirtual_codec/bcf/__init__.py",
    "vcfvirtual_codec/bcf/bgzf.py",
    "vcfvirtual_codec/bcf/records.py",
    "vcfvirtual_codec/checks.py",
    "vcfvirtual_codec/codec.py",
    "vcfvirtual_codec/columns.py",
    "vcfvirtual_codec/decode.py",
    "vcfvirtual_codec/errors.py",
    "vcfvirtual_codec/local_alleles.py",
    "vcfvirtual_codec/scratch.py",
    "vcfvirtual_codec/segment_transforms.py",
    "vcfvirtual_codec/spec.py",
)


def checking_files() -> list[str | None]:
    """The files of :data:`CHECKING_MODULES` as installed here, then pysam's version file."""
    roots = {package: _package_parent(package) for package in ("vcfvirtual", "vcfvirtual_codec")}
    files: list[str | None] = []
    for module in CHECKING_MODULES:
        root = roots[module.split("/", 1)[0]]
        files.append(None if root is None else os.path.join(root, module))
    return [*files, user_cache.installed_file("pysam", "version.py")]


def _package_parent(package: str) -> str | None:
    """The folder holding ``package`` (imported already by the open, else found unimported)."""
    module = sys.modules.get(package)
    origin = getattr(module, "__file__", None) or user_cache.installed_file(package)
    return None if origin is None else str(Path(origin).parent.parent)


def identity(tag: str) -> bytes:
    """A digest of ``tag`` and the identity of every file of :func:`checking_files`
    (:func:`~vcfvirtual.io.user_cache.files_identity`: any write to one changes it)."""
    return user_cache.files_identity(tag, checking_files())
