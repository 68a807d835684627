"""Working buffers one codec instance reuses between its decodes, which callers never see.

A chunk's inflated BGZF records (``bgzf`` layout) and its decompressed segment (``columns``,
but for small ones: :data:`vcfvirtual_codec.columns.SMALL_SEGMENT`)
are working bytes: the values a decode returns are always arrays of their own, never views
of them. Allocating them fresh for every chunk costs a page fault per 4 KiB written, which
measured +32% CPU on a decode of call_PL (6 MB segments) and +21% on variant_position of the
bgzf layout (issue 22), so each codec instance keeps a few for its next decodes. Nothing
here is process-wide: the buffers go with the codec instance, and a copy of the codec (a
dask worker's) starts with none.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# Buffers kept per codec instance (zarr may decode several chunks of one array at once;
# past this many, a decode allocates its own), and the largest kept: an outsized chunk's
# buffer is dropped after its decode rather than held for the codec's life.
MAX_BUFFERS = 2
MAX_BUFFER_BYTES = 96 << 20


class Scratch:
    """A codec instance's reusable working buffers (uint8), safe to share between threads."""

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[Scratch], tuple[()]]:
        # A pickled codec (sent to a dask worker) carries no buffers, nor the lock.
        return Scratch, ()

    def take(self) -> np.ndarray | None:
        """A free buffer of any size, or None; :meth:`give` it back after the decode."""
        with self._lock:
            return self._free.pop() if self._free else None

    def give(self, buffer: np.ndarray) -> None:
        """Keep ``buffer`` for a later decode (unless there are enough, or it is outsized).
        Nothing the decode returned may be a view of it."""
        if buffer.shape[0] <= MAX_BUFFER_BYTES:
            with self._lock:
                if len(self._free) < MAX_BUFFERS:
                    self._free.append(buffer)

    @contextmanager
    def lend(self, size: int) -> Iterator[np.ndarray]:
        """``size`` uninitialised bytes for the length of the block, kept after it."""
        buffer = self.take()
        if buffer is None or buffer.shape[0] < size:
            buffer = np.empty(size, np.uint8)  # a smaller free one is dropped for it
        try:
            yield buffer[:size]
        finally:
            self.give(buffer)
