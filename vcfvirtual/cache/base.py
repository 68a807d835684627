"""What every cache layout provides (:class:`CacheLayout`), and the chunk byte ranges
they all produce, computed here only."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any, BinaryIO, NamedTuple, Protocol

import numpy as np

from ..bcf.header import BCFHeader
from ..io.outputs import output_file
from ..scan.parallel import Merged
from ..scan.results import ScanResult

ChunkLengthFor = Callable[[BCFHeader], int]


class ChunkRanges(NamedTuple):
    """Where each variants chunk is in the cache: ``offsets[k]`` and ``lengths[k]``
    (uint64) of chunk k."""

    offsets: np.ndarray
    lengths: np.ndarray


class SegmentRanges(NamedTuple):
    """Where each segment is in a cache that stores every array apart (the ``columns``
    layout): per segment name (``position``, ``info/DP``, ``format/GT``...), a
    :class:`ChunkRanges` whose arrays have shape ``(n_chunks,)``, or ``(n_chunks,
    n_blocks)`` for a FORMAT field cut into samples blocks."""

    segments: dict[str, ChunkRanges]


# What a layout's writer returns: one range per variants chunk shared by every array
# (raw, bgzf), or each array's own (columns).
CacheRanges = ChunkRanges | SegmentRanges


def chunk_byte_ranges(chunk_starts: np.ndarray, end: int) -> ChunkRanges:
    """The byte range of each chunk: from its start to the next chunk's start.

    Parameters
    ----------
    chunk_starts : numpy.ndarray
        Offset in the cache where each chunk begins, ascending.
    end : int
        Offset where the last chunk ends.

    Returns
    -------
    ChunkRanges
        Offsets and lengths, uint64.
    """
    offsets = np.asarray(chunk_starts).astype(np.uint64)
    ends = np.append(offsets[1:], np.uint64(end))
    return ChunkRanges(offsets, ends - offsets)


def open_cache(tmp_cache: Path) -> AbstractContextManager[IO[Any]]:
    """The cache's temporary opened for writing, flushed to disk on success; OS errors
    made one :class:`~vcfvirtual.errors.OutputWriteError`.

    Parameters
    ----------
    tmp_cache : Path
        Where the cache is written until complete (renamed into place by the caller).

    Returns
    -------
    context manager
        Yielding the binary file.
    """
    return output_file(tmp_cache, "the cache", "cache_path=")


class CacheLayout(Protocol):
    """One layout of the transcode cache: how it is written from one serial scan, and
    from partitions scanned apart. A new layout is one module implementing this and one
    entry in :data:`vcfvirtual.cache.layouts.LAYOUT_WRITERS`."""

    name: str
    # Whether partition workers must write their inflated stream bytes (segments) for
    # write_partitioned; otherwise it reads the source blocks (Merged.pieces) itself.
    needs_segments: bool
    # Whether write_partitioned cuts the merged stream by record, and so needs every
    # record's offset kept by the merge (Merged.record_offsets).
    needs_record_offsets: bool

    def write_serial(
        self,
        bcf_path: str | Path,
        tmp_cache: Path,
        chunk_length_for: ChunkLengthFor,
        progress: bool | None = None,
        threads: int = 0,
        fileobj: BinaryIO | None = None,
    ) -> tuple[ScanResult, CacheRanges]:
        """Scan ``bcf_path`` once, writing the cache to ``tmp_cache`` as it goes.

        Parameters
        ----------
        bcf_path : str or Path
            The BCF (with ``fileobj``, only its name in messages).
        tmp_cache : Path
            The cache's temporary name.
        chunk_length_for : callable
            Records per variants chunk, given the header.
        progress : bool, optional
            Show a progress bar (None: when on a terminal).
        threads : int
            Inflate threads (see :func:`vcfvirtual.scan.scanner.scan_bcf`).
        fileobj : file object, optional
            The BCF already open (a URL's stream).

        Returns
        -------
        tuple of (ScanResult, ChunkRanges or SegmentRanges)
            What the scan learnt, and where each chunk (or segment) is in the cache.

        Raises
        ------
        OutputWriteError
            The cache could not be written.
        """
        ...

    def write_partitioned(self, merged: Merged, tmp_cache: Path) -> CacheRanges:
        """Write the cache of partitions scanned apart and merged.

        Parameters
        ----------
        merged : Merged
            The merged scan, with the source pieces and (if ``needs_segments``) the
            partitions' segments, in stream order.
        tmp_cache : Path
            The cache's temporary name.

        Returns
        -------
        ChunkRanges
            Where each chunk is in the cache.

        Raises
        ------
        OutputWriteError
            The cache could not be written.
        """
        ...
