"""Typed exceptions. Every error names the file, where it applies the byte offset, what
is wrong and, when there is one, what to do about it.

The base class and the errors the codec raises (a chunk that does not decode, a bad codec
configuration, damaged BGZF) are defined in ``vcfvirtual_codec``, which readers install
alone, and are the same classes here. The indexer's own errors are defined here, as
subclasses of the codec's :class:`VcfVirtualError`: ``except VcfVirtualError`` catches
what either package raises."""

from vcfvirtual_codec.errors import ChunkDecodeError, CodecConfigError, CorruptBCFError, VcfVirtualError

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


class NotBCFError(VcfVirtualError):
    """The input is not a BCF file at all (VCF text, some other format, empty)."""


class UnsupportedBCFError(VcfVirtualError):
    """A BCF this version cannot represent faithfully (e.g. BCF 2.1)."""


class HeaderError(VcfVirtualError):
    """The VCF header inside the BCF is missing, malformed or rejected by htslib."""


class StaleCacheError(VcfVirtualError):
    """The transcode cache no longer matches the references pointing at it."""


class UntrustedReferenceError(VcfVirtualError):
    """References that point somewhere other than the cache (and source) they declare,
    or whose metadata contradicts their codec configuration: ``open_store`` refuses to
    follow them (``check=False`` reads them as plain Kerchunk would)."""


class OutputExistsError(VcfVirtualError):
    """An output file exists and overwriting it was not asked for."""


class FieldShapeError(VcfVirtualError):
    """Records hold more values for a field than its declared Number allows."""


class FieldNameError(HeaderError):
    """An INFO/FORMAT field whose array would take another array's name (a fixed one such
    as ``variant_filter``, or another field's), or a field choice (``fields=``,
    ``exclude_fields=``, ``rename_fields=``) naming a field the header does not declare."""


class OutputWriteError(VcfVirtualError):
    """An output (cache or references) could not be written: no space, no permission."""


class RegionError(VcfVirtualError, ValueError):
    """A region string that is not ``contig[:start[-end]]``, or that ends before it starts
    (a ValueError too, as callers of ``vcfvirtual.select_region`` caught before)."""


class UnknownContigError(RegionError, KeyError):
    """A region on a contig the store does not have (a KeyError too, as before)."""

    def __str__(self) -> str:  # KeyError's own quotes its message
        return self._render()
