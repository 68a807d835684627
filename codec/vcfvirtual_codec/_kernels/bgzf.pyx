# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""BGZF block framing: the sizes of the whole blocks at the front of a buffer, in one call.

The index reads a BCF 4 MiB at a time and splits each read into its BGZF blocks (~64 KiB
inflated each, ~32,000 for a 2 GB stream); walking their headers block by block in Python
cost more than the walk itself. This walks them in C. It accepts exactly the headers
``bgzf.block_size`` accepts: where that function raises, this stops with ``BAD`` at the
block and the caller calls ``block_size`` there for the error (one message, written once).
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t

# Why the walk stopped (the third value returned).
cdef enum:
    DONE = 0  # every byte of the buffer is in a whole block
    PARTIAL = 1  # what is left is shorter than a header, or than the block its header claims
    BAD = 2  # the header at the position is not a BGZF block header (block_size raises there)

# The smallest bytes a header must have before its size can be read (as _whole_blocks).
cdef int64_t MIN_HEADER = 18


def codes():
    """The stop codes, by name."""
    return {"DONE": DONE, "PARTIAL": PARTIAL, "BAD": BAD}


cdef inline int64_t _block_size(const uint8_t* p, int64_t pos, int64_t limit) noexcept nogil:
    """The size of the block at ``p[pos]`` as its BC subfield says, or -1 where
    ``block_size`` raises: bad magic or flags, an extra field past ``limit``, no BC
    subfield, or a size smaller than the block's own header and footer."""
    cdef int64_t xlen, i, slen, size
    if p[pos] != 0x1F or p[pos + 1] != 0x8B or p[pos + 2] != 8 or p[pos + 3] != 4:
        return -1
    xlen = p[pos + 10] | (<int64_t>p[pos + 11] << 8)
    if pos + 12 + xlen > limit:  # the extra field runs past the bytes there are
        return -1
    i = 0
    while i + 4 <= xlen:
        slen = p[pos + 12 + i + 2] | (<int64_t>p[pos + 12 + i + 3] << 8)
        if i + 4 + slen > xlen:  # a subfield running past XLEN: the header is damaged
            return -1
        if p[pos + 12 + i] == 66 and p[pos + 12 + i + 1] == 67 and slen == 2:  # 'B', 'C'
            size = (p[pos + 12 + i + 4] | (<int64_t>p[pos + 12 + i + 5] << 8)) + 1
            if size < 12 + xlen + 8:
                return -1
            return size
        i += 4 + slen
    return -1


def block_sizes(const uint8_t[::1] buf):
    """The sizes of the whole BGZF blocks at the front of ``buf``.

    Returns (sizes (int64), count, stop code, stop position): the walk stops at the end
    of ``buf`` (DONE), where a block is cut short by it (PARTIAL), or at a header that is
    not a BGZF block's (BAD)."""
    cdef int64_t limit = buf.shape[0]
    # A block is at least 26 bytes (a header with its BC subfield, the footer).
    sizes_array = np.empty(limit // 26 + 1, dtype=np.int64)
    cdef int64_t[::1] sizes = sizes_array
    cdef int64_t pos = 0, n = 0, size
    cdef int stop = DONE
    cdef const uint8_t* p = &buf[0] if limit else NULL
    with nogil:
        while pos < limit:
            if limit - pos < MIN_HEADER:
                stop = PARTIAL
                break
            size = _block_size(p, pos, limit)
            if size < 0:
                stop = BAD
                break
            if pos + size > limit:
                stop = PARTIAL
                break
            if n >= sizes.shape[0]:  # cannot happen (size >= 26): kept as the bound's guard
                stop = BAD
                break
            sizes[n] = size
            n += 1
            pos += size
    return sizes_array[:n], n, stop, pos
