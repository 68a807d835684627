# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""GT alleles packed into 1, 2 or 4 bits a value (the columns layout's FLAG_GT_PACKED).

A packed GT block holds int8 alleles as codes of ``bits`` bits, little-endian within each
byte: value ``i`` at bit ``(i * bits) % 8`` of byte ``(i * bits) // 8``. A 1-bit code is
the allele itself (0 or 1); a 2- or 4-bit code is the allele plus 2 (-2, the fill past a
call's end, is 0; -1, missing, is 1). The spare bits of the last byte are written 0 and
ignored on read.

Packing takes whole words: each output byte gathers 8, 4 or 2 input bytes with one
multiply (1 and 2 bits: every code lands on its own bits of the product, no two
overlapping, so no carry disturbs them). Unpacking is one table lookup per input byte
writing its 8, 4 or 2 int8 values. Loops are branch-free over the bytes; only the last,
partial byte is handled apart.
"""

from libc.stdint cimport int8_t, uint8_t, uint16_t, uint64_t
from libc.string cimport memcpy

# Each byte's values as the int8 alleles they stand for, one table per width (plain byte
# arrays: the copy out is the same whatever the host's byte order).
cdef uint8_t _UNPACK1[256][8]
cdef uint8_t _UNPACK2[256][4]
cdef uint8_t _UNPACK4[256][2]


cdef void _build_tables() noexcept:
    cdef int b, i
    for b in range(256):
        for i in range(8):
            _UNPACK1[b][i] = (b >> i) & 1
        for i in range(4):
            _UNPACK2[b][i] = <uint8_t>(((b >> (2 * i)) & 3) - 2)
        for i in range(2):
            _UNPACK4[b][i] = <uint8_t>(((b >> (4 * i)) & 15) - 2)


_build_tables()

# Per-byte constants of the SWAR steps (8 lanes of one byte in a 64-bit word).
cdef uint64_t _LOW7 = 0x7F7F7F7F7F7F7F7FULL
cdef uint64_t _HIGH = 0x8080808080808080ULL
cdef uint64_t _TWOS = 0x0202020202020202ULL
# c_i (byte i, 0 or 1) times 2^(56 - 7i) lands at bit 56 + i: the byte of the top 8 bits.
cdef uint64_t _GATHER1 = 0x0102040810204080ULL
# c_i (byte i, 0..3, of 4) times 2^(24 - 6i) lands at bits 24 + 2i.
cdef uint64_t _GATHER2 = 0x01041040ULL


cdef inline uint64_t _load(const uint8_t* p, Py_ssize_t k) noexcept nogil:
    """``k`` (<= 8) bytes as a little-endian word, the rest 0 (any host byte order)."""
    cdef uint64_t x = 0
    cdef Py_ssize_t i
    for i in range(k):
        x |= (<uint64_t>p[i]) << (8 * i)
    return x


cdef inline uint64_t _load8(const uint8_t* p) noexcept nogil:
    # Spelled out byte by byte (any host byte order); the compiler makes it one load.
    return ((<uint64_t>p[0]) | (<uint64_t>p[1]) << 8 | (<uint64_t>p[2]) << 16 | (<uint64_t>p[3]) << 24
            | (<uint64_t>p[4]) << 32 | (<uint64_t>p[5]) << 40 | (<uint64_t>p[6]) << 48 | (<uint64_t>p[7]) << 56)


cdef inline uint64_t _load4(const uint8_t* p) noexcept nogil:
    return (<uint64_t>p[0]) | (<uint64_t>p[1]) << 8 | (<uint64_t>p[2]) << 16 | (<uint64_t>p[3]) << 24


cdef inline uint64_t _load2(const uint8_t* p) noexcept nogil:
    return (<uint64_t>p[0]) | (<uint64_t>p[1]) << 8


cdef inline uint64_t _codes(uint64_t x, int bits) noexcept nogil:
    """Each byte's code: the allele's low bit (1 bit), or the allele plus 2 modulo 256
    (2, 4 bits; added lane by lane, no carry between bytes), masked to ``bits``."""
    if bits == 1:
        return x & 0x0101010101010101ULL
    return _plus_two(x) & (0x0303030303030303ULL if bits == 2 else 0x0F0F0F0F0F0F0F0FULL)


cdef inline uint64_t _plus_two(uint64_t x) noexcept nogil:
    """Each byte lane plus 2 modulo 256, no carry between lanes."""
    return ((x & _LOW7) + _TWOS) ^ (x & _HIGH)


cdef inline uint8_t _lanes_or(uint64_t x) noexcept nogil:
    """The OR of a word's 8 byte lanes."""
    x |= x >> 32
    x |= x >> 16
    x |= x >> 8
    return <uint8_t>x


cdef inline uint8_t _gather(uint64_t c, int bits) noexcept nogil:
    """One packed byte from the codes in the low 8 / 4 / 2 bytes of ``c``."""
    if bits == 1:
        return <uint8_t>((c * _GATHER1) >> 56)
    if bits == 2:
        return <uint8_t>((c * _GATHER2) >> 24)
    return <uint8_t>((c | (c >> 4)) & 0xFF)


cdef inline uint64_t _spread2(uint64_t x) noexcept nogil:
    """The 8 2-bit codes of 2 bytes (low 16 bits), one per byte lane, in order."""
    x = (x | (x << 24)) & 0x000000FF000000FFULL
    x = (x | (x << 12)) & 0x000F000F000F000FULL
    return (x | (x << 6)) & 0x0303030303030303ULL


cdef inline uint64_t _spread4(uint64_t x) noexcept nogil:
    """The 8 4-bit codes of 4 bytes (low 32 bits), one per byte lane, in order."""
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFULL
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFULL
    return (x | (x << 4)) & 0x0F0F0F0F0F0F0F0FULL


cdef inline uint64_t _minus_two(uint64_t x) noexcept nogil:
    """Each byte lane (a code, < 0x80) minus 2 modulo 256, no borrow between lanes."""
    return ((x | _HIGH) - _TWOS) ^ _HIGH


# One 8-byte store on a little-endian host: gcc did not merge the byte stores of the
# portable spelling here (unpacking 20 M values of 4 bits: 6.3 ms byte by byte, 2.0 ms so).
cdef extern from *:
    """
    #include <string.h>
    static inline void gt_bits_store8(uint8_t *p, uint64_t x) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(p, &x, 8);
    #else
        for (int i = 0; i < 8; i++) p[i] = (uint8_t)(x >> (8 * i));
    #endif
    }
    """
    void _store8 "gt_bits_store8"(uint8_t* p, uint64_t x) noexcept nogil


def packed_size(Py_ssize_t values, int bits):
    """Bytes of ``values`` codes of ``bits`` bits."""
    return (values * bits + 7) // 8


cdef int _width_of(uint8_t plain, uint8_t shifted) noexcept:
    """The fewest bits (1, 2 or 4) whose codes hold every value, or 0 when none do (1 when
    all are 0 or 1, 2 when all are -2..1, 4 when all are -2..13), from the OR of the
    values' bytes and of their bytes plus 2: the values are all at most 2^k - 1 exactly
    when their OR is."""
    if plain <= 1:
        return 1
    if shifted <= 3:
        return 2
    if shifted <= 15:
        return 4
    return 0


def pack_fewest(const uint8_t[::1] values, uint8_t[::1] out):
    """The int8 values (their bytes) packed into the fewest bits that hold them
    (:func:`_width_of`), and those bits (0: none do, ``out`` then undefined). The
    packed bytes are ``out[:packed_size(n, bits)]``; ``out`` must hold the 4-bit size.
    One pass in the common case: the 1-bit packing and the width's ORs together; a block
    that needs 2 or 4 bits is packed again at its width."""
    cdef Py_ssize_t n = values.shape[0]
    if out.shape[0] < (n * 4 + 7) // 8:
        raise ValueError(f"{out.shape[0]} bytes cannot hold {n} values of up to 4 bits")
    cdef Py_ssize_t full = n // 8, rem = n - full * 8, j
    cdef const uint8_t* src = &values[0] if n else NULL
    cdef uint8_t* dst = &out[0] if out.shape[0] else NULL
    cdef uint64_t x, plain = 0, shifted = 0, tail
    with nogil:
        for j in range(full):
            x = _load8(src + 8 * j)
            plain |= x
            shifted |= _plus_two(x)
            dst[j] = _gather(x & 0x0101010101010101ULL, 1)
        if rem:
            tail = (<uint64_t>1 << (8 * rem)) - 1  # the lanes holding values
            x = _load(src + 8 * full, rem)
            plain |= x
            shifted |= _plus_two(x) & tail
            dst[full] = _gather(x & 0x0101010101010101ULL, 1)
    bits = _width_of(_lanes_or(plain), _lanes_or(shifted))
    if bits > 1:
        pack(values, bits, out[: (n * bits + 7) // 8])
    return bits


cdef int _check_packing(Py_ssize_t n, int bits, Py_ssize_t size, str relation) except -1:
    """ValueError unless ``bits`` is a width and ``size`` bytes are exactly ``n`` values of it."""
    if bits not in (1, 2, 4):
        raise ValueError(f"bits per value {bits} is not 1, 2 or 4")
    if size != (n * bits + 7) // 8:
        raise ValueError(f"{size} bytes {relation} {n} values of {bits} bits")
    return 0


def pack(const uint8_t[::1] values, int bits, uint8_t[::1] out):
    """The int8 values (their bytes) packed into ``out`` (exactly
    :func:`packed_size` bytes) as codes of ``bits`` bits. Values outside the width's
    range (:func:`_width_of`) are stored as their masked code: the caller picks the width."""
    cdef Py_ssize_t n = values.shape[0]
    _check_packing(n, bits, out.shape[0], "cannot hold exactly")
    cdef Py_ssize_t per = 8 // bits, full = n // per, rem = n - full * per, j
    cdef const uint8_t* src = &values[0] if n else NULL
    cdef uint8_t* dst = &out[0] if out.shape[0] else NULL
    with nogil:
        # One loop per width, its constants literal, so that each load is one word.
        if bits == 1:
            for j in range(full):
                dst[j] = _gather(_codes(_load8(src + 8 * j), 1), 1)
        elif bits == 2:
            for j in range(full):
                dst[j] = _gather(_codes(_load4(src + 4 * j), 2), 2)
        else:
            for j in range(full):
                dst[j] = _gather(_codes(_load2(src + 2 * j), 4), 4)
        if rem:
            # Spare bits 0: lanes past the values masked off after the codes (plus 2 made them 2).
            dst[full] = _gather(
                _codes(_load(src + full * per, rem), bits) & ((<uint64_t>1 << (8 * rem)) - 1), bits
            )


def unpack(const uint8_t[::1] packed, int bits, int8_t[::1] out):
    """The int8 values of ``out.shape[0]`` codes of ``bits`` bits in ``packed`` (exactly
    :func:`packed_size` bytes; the last byte's spare bits ignored), written into ``out``."""
    cdef Py_ssize_t n = out.shape[0]
    _check_packing(n, bits, packed.shape[0], "are not")
    cdef Py_ssize_t per = 8 // bits, full = n // per, rem = n - full * per, j
    cdef const uint8_t* src = &packed[0] if packed.shape[0] else NULL
    cdef uint8_t* dst = <uint8_t*>&out[0] if n else NULL
    cdef uint64_t word
    with nogil:
        if bits == 1:
            for j in range(full):
                memcpy(dst + 8 * j, _UNPACK1[src[j]], 8)
            if rem:
                memcpy(dst + 8 * full, _UNPACK1[src[full]], rem)
        elif bits == 2:
            # Four packed bytes at a time: each two's 8 codes spread to 8 byte lanes, one store.
            for j in range(full // 4):
                word = _load4(src + 4 * j)
                _store8(dst + 16 * j, _minus_two(_spread2(word & 0xFFFF)))
                _store8(dst + 16 * j + 8, _minus_two(_spread2(word >> 16)))
            for j in range(full - full % 4, full):
                memcpy(dst + 4 * j, _UNPACK2[src[j]], 4)
            if rem:
                memcpy(dst + 4 * full, _UNPACK2[src[full]], rem)
        else:
            for j in range(full // 4):
                _store8(dst + 8 * j, _minus_two(_spread4(_load4(src + 4 * j))))
            for j in range(full - full % 4, full):
                memcpy(dst + 2 * j, _UNPACK4[src[j]], 2)
            if rem:
                memcpy(dst + 2 * full, _UNPACK4[src[full]], rem)
