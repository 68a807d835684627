"""Typed exceptions. Every error names the file, where it applies the byte offset, what
is wrong and, when there is one, what to do about it.

Only the classes the codec raises live here (the reader installs this package alone);
the indexer's own errors subclass :class:`VcfVirtualError` in ``vcfvirtual.errors``, so
``except VcfVirtualError`` catches what either package raises."""

from __future__ import annotations

import os
from collections.abc import Callable

# What an error names as its file: a path, a URL, or None for input of no file. (An
# operator union, not typing.Union: ~50 us less of every process importing the codec.)
FilePath = str | os.PathLike[str] | None


class VcfVirtualError(Exception):
    """Base class of every error vcfvirtual raises on purpose."""

    def __init__(self, path: FilePath, problem: str, *, offset: int | None = None, hint: str | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.problem = problem
        self.offset = offset
        self.hint = hint
        super().__init__(self._render())

    def __reduce__(self) -> tuple[Callable[..., VcfVirtualError], tuple[object, ...]]:
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


class CorruptBCFError(VcfVirtualError):
    """The BGZF container or the BCF records are damaged or truncated."""


class ChunkDecodeError(VcfVirtualError):
    """A chunk's bytes do not hold the records the codec was configured for."""


class CodecConfigError(ChunkDecodeError, ValueError):
    """A ``vcfvirtual.bcf`` codec configuration that this version would never write (a
    kind, dtype, shape or filter column that does not fit): refused before any decode.
    Also a ``ValueError``, which is what numcodecs and zarr expect of a bad config."""


def _rebuild(
    cls: type[VcfVirtualError], path: str | None, problem: str, offset: int | None, hint: str | None
) -> VcfVirtualError:
    return cls(path, problem, offset=offset, hint=hint)
