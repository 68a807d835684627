"""The cyclic garbage collector paused for a stretch of work: the command line's imports
and index run (the library leaves its host's collector alone)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused(*, freeze: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off for the block, and back as it was after.

    Loading the libraries (VirtualiZarr, xarray, zarr) and the index pass
    allocate enough objects to set off full collections that find no garbage: 0.2-1 s of a
    run. With ``freeze``, what exists at the end (the imported modules, which live until
    the process exits) is frozen, so no later collection walks it (nor the one at exit)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()
