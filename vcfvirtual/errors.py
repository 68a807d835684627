"""Typed exceptions. Every error names the file, where it applies the byte offset, what
is wrong and, when there is one, what to do about it.

They are defined in ``vcfvirtual_codec`` (which readers install alone, and whose codec
raises them too) and are the same classes here, so ``except vcfvirtual.errors.X``
catches what either package raises."""

from vcfvirtual_codec.errors import (
    ChunkDecodeError,
    CodecConfigError,
    CorruptBCFError,
    FieldShapeError,
    HeaderError,
    NotBCFError,
    OutputExistsError,
    OutputWriteError,
    StaleCacheError,
    UnsupportedBCFError,
    UntrustedReferenceError,
    VcfVirtualError,
)

__all__ = [
    "ChunkDecodeError",
    "CodecConfigError",
    "CorruptBCFError",
    "FieldShapeError",
    "HeaderError",
    "NotBCFError",
    "OutputExistsError",
    "OutputWriteError",
    "StaleCacheError",
    "UnsupportedBCFError",
    "UntrustedReferenceError",
    "VcfVirtualError",
    "RegionError",
    "UnknownContigError",
]


class RegionError(VcfVirtualError, ValueError):
    """A region string that is not ``contig[:start[-end]]``, or that ends before it starts
    (a ValueError too, as callers of ``select_region`` caught before)."""


class UnknownContigError(RegionError, KeyError):
    """A region on a contig the store does not have (a KeyError too, as before)."""

    def __str__(self) -> str:  # KeyError's own quotes its message
        return self._render()
