"""Typed exceptions. Every error names the file, where it applies the byte offset, what
is wrong and, when there is one, what to do about it."""

from __future__ import annotations


class VcfVirtualError(Exception):
    """Base class of every error vcfvirtual raises on purpose."""

    def __init__(self, path, problem: str, *, offset: int | None = None, hint: str | None = None):
        self.path = str(path) if path is not None else None
        self.problem = problem
        self.offset = offset
        self.hint = hint
        super().__init__(self._render())

    def __reduce__(self):
        # Errors raised in worker processes travel back pickled; the default would call
        # __init__ with the rendered message alone.
        return _rebuild, (type(self), self.path, self.problem, self.offset, self.hint)

    def _render(self) -> str:
        where = self.path or "<input>"
        if self.offset is not None:
            where += f" (byte offset {self.offset})"
        text = f"{where}: {self.problem}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class NotBCFError(VcfVirtualError):
    """The input is not a BCF file at all (VCF text, some other format, empty)."""


class UnsupportedBCFError(VcfVirtualError):
    """A BCF this version cannot represent faithfully (e.g. BCF 2.1)."""


class CorruptBCFError(VcfVirtualError):
    """The BGZF container or the BCF records are damaged or truncated."""


class HeaderError(VcfVirtualError):
    """The VCF header inside the BCF is missing, malformed or rejected by htslib."""


class StaleCacheError(VcfVirtualError):
    """The transcode cache no longer matches the references pointing at it."""


class ChunkDecodeError(VcfVirtualError):
    """A chunk's bytes do not hold the records the codec was configured for."""


class CodecConfigError(ChunkDecodeError, ValueError):
    """A ``vcfvirtual.bcf`` codec configuration that this version would never write (a
    kind, dtype, shape or filter column that does not fit): refused before any decode.
    Also a ``ValueError``, which is what numcodecs and zarr expect of a bad config."""


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


def _rebuild(cls, path, problem, offset, hint):
    return cls(path, problem, offset=offset, hint=hint)
