"""What a scan hands its bytes to: the :class:`RecordSink` protocol, and the sinks that
need nothing of the records (none at all, a plain file).

The scan calls a sink's methods in this order: ``add_block`` for each piece of the
stream as it is read (header included), ``header_parsed`` once the header is whole,
then, per batch of records walked, ``records_scanned`` with their stream offsets and
``scanned_to`` with the offset every byte before which belongs to a walked record (or to
the header). ``add_block`` runs ahead of the others by at most one batch of inflated bytes.
"""

from __future__ import annotations

from typing import IO, Any, Protocol, runtime_checkable

import numpy as np

from ..bcf.header import BCFHeader


class RecordSink(Protocol):
    """Receives every inflated byte a scan reads, and where the records are."""

    def header_parsed(self, header: BCFHeader, chunk_length: int) -> None:
        """The header is whole; records are grouped ``chunk_length`` to a variants chunk.

        Parameters
        ----------
        header : BCFHeader
            The parsed header; ``header.size`` is where the first record starts.
        chunk_length : int
            Records per variants chunk (0 when the scan does not know it: a partition).
        """

    def add_block(self, raw: bytes | memoryview | None, data: bytes | memoryview) -> None:
        """The next piece of the stream, in order.

        Parameters
        ----------
        raw : bytes or memoryview or None
            The whole compressed BGZF block ``data`` was inflated from, or None when
            ``data`` is not exactly one block's bytes (an uncompressed source, a block cut
            at a partition's bound).
        data : bytes or memoryview
            Inflated bytes, never reused by the scan: a sink may keep them.
        """

    def records_scanned(self, offsets: np.ndarray) -> None:
        """Stream offsets (int64, ascending) of the next records walked.

        Parameters
        ----------
        offsets : numpy.ndarray
            One per record, continuing the previous call's.
        """

    def scanned_to(self, stream_offset: int) -> None:
        """Every record starting before ``stream_offset`` has been given.

        Parameters
        ----------
        stream_offset : int
            Offset in the uncompressed stream (a record's start or the stream's end).
        """


@runtime_checkable
class StreamLender(RecordSink, Protocol):
    """A sink that keeps every byte it is given from the first record not yet scanned on
    (the columns writer's window): the scan walks the records there instead of copying
    them into a stage of its own."""

    def unscanned(self, start: int) -> np.ndarray:
        """The stream's bytes from offset ``start`` (where the scan has walked to) to the
        last byte given: a view, used by the scan before it calls any other method.

        Parameters
        ----------
        start : int
            Offset in the uncompressed stream, at or after the sink's first kept byte.
        """
        ...


class ScanStop(Exception):
    """Raised by a sink's ``records_scanned`` when it has every record it wants: the scan
    ends there, returning what it walked (``end``: where the sink's records end, in its
    own offsets). A partitioned run's task stops so once its last chunk is whole."""

    def __init__(self, end: int):
        super().__init__(end)
        self.end = end


class NullSink:
    """A sink that keeps nothing (a scan for the facts alone)."""

    def header_parsed(self, header: BCFHeader, chunk_length: int) -> None:
        pass

    def add_block(self, raw: bytes | memoryview | None, data: bytes | memoryview) -> None:
        pass

    def records_scanned(self, offsets: np.ndarray) -> None:
        pass

    def scanned_to(self, stream_offset: int) -> None:
        pass


class FileSink(NullSink):
    """Writes the inflated stream, as read, to a binary file (the raw cache, a partition's
    segment)."""

    def __init__(self, fileobj: IO[Any]):
        self.fileobj = fileobj

    def add_block(self, raw: bytes | memoryview | None, data: bytes | memoryview) -> None:
        self.fileobj.write(data)
