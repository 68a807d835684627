"""Typed exceptions. Every error names the file, where it applies the byte offset, what
is wrong and, when there is one, what to do about it.

They are defined in ``vcfvirtual_codec`` (which readers install alone, and whose codec
raises them too) and are the same classes here, so ``except vcfvirtual.errors.X``
catches what either package raises."""

from vcfvirtual_codec.errors import (
    ChunkDecodeError,
    CodecConfigError,
    CorruptBCFError,
    FieldNameError,
    FieldShapeError,
    HeaderError,
    NotBCFError,
    OutputExistsError,
    OutputWriteError,
    RegionError,
    StaleCacheError,
    UnknownContigError,
    UnsupportedBCFError,
    UntrustedReferenceError,
    VcfVirtualError,
)

__all__ = [
    "ChunkDecodeError",
    "CodecConfigError",
    "CorruptBCFError",
    "FieldNameError",
    "FieldShapeError",
    "HeaderError",
    "NotBCFError",
    "OutputExistsError",
    "OutputWriteError",
    "RegionError",
    "StaleCacheError",
    "UnknownContigError",
    "UnsupportedBCFError",
    "UntrustedReferenceError",
    "VcfVirtualError",
]
