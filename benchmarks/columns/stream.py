"""Stream a BCF as variants chunks of inflated records (what the raw cache holds per chunk).

Research helper for demux/measure: BGZF blocks are inflated (ISA-L, on a worker thread,
vcfvirtual_codec.bgzf.read_blocks), the header is parsed by vcfvirtual.header, and records
are cut into chunks of ``chunk_length`` whole records; only the current chunk and the
partial record after it are held in memory.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numba
import numpy as np

from ._compat import bgzf
from ._compat import header as H
from ._compat import records as R


@numba.njit(nogil=True, cache=True)
def walk_records(buf, pos, end, offsets, count):
    """Record whole records from ``pos`` while they fit in ``buf[:end]`` and ``offsets`` has room.

    Returns (next position, count, error code)."""
    while count < offsets.shape[0] and pos + 8 <= end:
        total = 8 + np.int64(R.u32(buf, pos)) + np.int64(R.u32(buf, pos + 4))
        if np.int64(R.u32(buf, pos)) < R.MIN_L_SHARED:
            return pos, count, R.ERR_SHORT_SHARED
        if pos + total > end:
            break
        offsets[count] = pos
        count += 1
        pos += total
    return pos, count, R.OK


def chunks(
    path: Path, chunk_length: int, threads: int = 1, copy: bool = True
) -> Iterator[tuple[H.BCFHeader, np.ndarray, np.ndarray]]:
    """(header, records bytes, record offsets) per variants chunk, in file order.

    With ``copy=False`` the bytes and offsets are views of buffers the next iteration
    overwrites (no per-chunk copy: the index pass consumes each chunk before asking for
    the next)."""
    header = None
    buf = np.empty(1 << 24, np.uint8)
    filled = 0  # bytes of buf holding data
    scan = 0  # where the next record starts
    offsets = np.empty(chunk_length, np.int64)
    count = 0
    with open(path, "rb") as f:
        for block in bgzf.read_blocks(f, path, threads=threads):
            data = block.data
            if filled + len(data) > buf.shape[0]:
                grown = np.empty(max(2 * buf.shape[0], filled + len(data)), np.uint8)
                grown[:filled] = buf[:filled]
                buf = grown
            buf[filled : filled + len(data)] = np.frombuffer(data, np.uint8)
            filled += len(data)
            if header is None:
                if filled < H.BCF_PREFIX_SIZE:
                    continue
                (l_text,) = struct.unpack_from("<I", buf, 5)
                if filled < H.BCF_PREFIX_SIZE + l_text:
                    continue
                header = H.parse_header_text(bytes(buf[H.BCF_PREFIX_SIZE : H.BCF_PREFIX_SIZE + l_text]), path, 0)
                scan = H.BCF_PREFIX_SIZE + l_text
                # Keep record offsets relative to the chunk start from here on.
                buf[: filled - scan] = buf[scan:filled].copy()
                filled -= scan
                scan = 0
            while True:
                scan, count, err = walk_records(buf, scan, filled, offsets, count)
                if err != R.OK:
                    raise ValueError(f"{path}: {R.ERROR_TEXT[int(err)]}")
                if count < chunk_length:
                    break
                if copy:
                    yield header, buf[:scan].copy(), offsets.copy()
                else:
                    yield header, buf[:scan], offsets
                # The partial record after the chunk moves to the front (less than a
                # record, so the overlap-safe copy is small).
                rest = filled - scan
                buf[:rest] = buf[scan:filled].copy()
                filled = rest
                scan = 0
                count = 0
    if header is not None and count:
        yield header, buf[:scan].copy(), offsets[:count].copy()
    if scan != filled:
        raise ValueError(f"{path}: data ends inside a record")


def chunks_ahead(
    path: Path, chunk_length: int, buffers: int = 3
) -> Iterator[tuple[H.BCFHeader, np.ndarray, np.ndarray]]:
    """``chunks`` run on a producer thread, one chunk ahead of the consumer.

    Inflating and cutting the next chunk overlaps the caller's work on this one (the
    inflate releases the GIL, as do the numba kernels). Chunks are copied into ``buffers``
    rotating buffers (3: one being consumed, one queued, one being filled), so a chunk
    stays valid until the caller asks for the one after next; memory is three chunks."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=buffers - 2)
    pool = [np.empty(0, np.uint8) for _ in range(buffers)]
    stop = threading.Event()

    def produce():
        try:
            for i, (header, buf, offs) in enumerate(chunks(path, chunk_length, copy=False)):
                k = i % buffers
                if pool[k].shape[0] < buf.shape[0]:
                    pool[k] = np.empty(int(buf.shape[0] * 1.25), np.uint8)
                pool[k][: buf.shape[0]] = buf
                item = (header, pool[k][: buf.shape[0]], offs.copy())
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(None)
        except BaseException as e:  # handed to the consumer, raised there
            q.put(e)

    thread = threading.Thread(target=produce, name="columns-inflate", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
