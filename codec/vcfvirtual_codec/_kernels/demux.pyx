# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The columns writer's kernels: one chunk of BCF records split into per-array segments
(``demux_chunk``), what a GT block segment says of its calls (``gt_block_summary``), and
the block packed as the codec's alleles in the same pass (``gt_block_encode``).

The segment layouts are described in vcfvirtual.cache.columns_demux, which gives these
kernels their slot maps. Every read is bounded: a locate pass checks each record's
fields against its own lengths before the copy pass moves a byte, and the copy pass
clips each range to both buffers, so no read or write leaves ``buf`` or the output
whatever the bytes say.
"""

import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cimport vcfvirtual_codec._kernels.bcf as B

cdef enum:
    C_SEG_CONTIG = 0
    C_SEG_POSITION = 1
    C_SEG_RLEN = 2
    C_SEG_QUAL = 3
    C_SEG_ID = 4
    C_SEG_ALLELES = 5
    C_SEG_FILTER = 6
    C_N_FIXED_SEGMENTS = 7
    # int8 GT bytes are stored minus this (vcfvirtual_codec.columns.GT_SHIFT, which the
    # decoder adds back; a test checks they agree).
    C_GT_SHIFT = 2
    # Columns of the locate tables: (type, count, data start) of a field; count -1: absent.
    LOC_TYPE = 0
    LOC_COUNT = 1
    LOC_DATA = 2

SEG_CONTIG, SEG_POSITION, SEG_RLEN, SEG_QUAL = C_SEG_CONTIG, C_SEG_POSITION, C_SEG_RLEN, C_SEG_QUAL
SEG_ID, SEG_ALLELES, SEG_FILTER, N_FIXED_SEGMENTS = C_SEG_ID, C_SEG_ALLELES, C_SEG_FILTER, C_N_FIXED_SEGMENTS
GT_SHIFT = C_GT_SHIFT


# The upper halves of the AVX registers cleared (vzeroupper) before a kernel's SSE2 loops,
# where the host has AVX. A library that leaves them dirty (ISA-L's crc32, which the writer
# calls for every segment it seals) makes every legacy-SSE instruction after it wait on
# them: measured on this project's AMD EPYC host, a GT block's encode took 6.5 ms instead
# of 2.0 and its summary 1.9 instead of 0.6 in any process that had called
# isal_zlib.crc32 once. Compiled for AVX alone (the function's target), called only where
# the CPU has it.
cdef extern from *:
    """
    #if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    #include <immintrin.h>
    __attribute__((target("avx"))) static void demux_zeroupper_avx(void) { _mm256_zeroupper(); }
    static int demux_has_avx = -1;
    static void demux_clear_upper(void) {
        if (demux_has_avx < 0) {
            __builtin_cpu_init();
            demux_has_avx = __builtin_cpu_supports("avx") ? 1 : 0;
        }
        if (demux_has_avx) demux_zeroupper_avx();
    }
    #else
    static void demux_clear_upper(void) {}
    #endif
    """
    void clear_upper "demux_clear_upper"() noexcept nogil


def clear_avx_upper():
    """Clear the upper halves of the calling thread's AVX registers (nothing where the CPU
    has no AVX): for a caller about to run other compiled SSE code (a compressor) after
    ISA-L's crc32 on the same thread."""
    clear_upper()


cdef inline B.Bytes _ptr(const uint8_t[::1] buf) noexcept:
    return &buf[0] if buf.shape[0] else NULL


# What the locate pass reads and fills for one chunk: the slot maps, the per-record
# locate tables (rows of 2 or 3 int64), and each segment's size.
cdef struct Chunk:
    B.Bytes buf
    int64_t buf_len
    const int32_t* info_slot
    int64_t n_info_keys
    const int32_t* fmt_slot
    int64_t n_fmt_keys
    int64_t n_info
    int64_t n_fmt
    int64_t n_samples
    int64_t samples_chunk_size
    int64_t nb
    int64_t end_key
    int64_t* id_loc  # (n, 2): data start, length
    int64_t* allele_loc  # (n, 2): start of the first allele's descriptor, n_allele
    int64_t* filt_loc  # (n, 3)
    int64_t* info_loc  # (n, max(n_info, 1), 3)
    int64_t* fmt_loc  # (n, max(n_fmt, 1), 3)
    int64_t* rlens
    int64_t* sizes
    int64_t total_alleles


cdef inline void put_i32(uint8_t* out, int64_t p, int64_t value) noexcept nogil:
    """The low 32 bits of ``value`` at ``out[p]``, little-endian."""
    cdef uint32_t v = <uint32_t>value  # modulo 2^32
    out[p] = v & 0xFF
    out[p + 1] = (v >> 8) & 0xFF
    out[p + 2] = (v >> 16) & 0xFF
    out[p + 3] = (v >> 24) & 0xFF


cdef inline void put_loc(int64_t* loc, int64_t t, int64_t c, int64_t d) noexcept nogil:
    loc[LOC_TYPE] = t
    loc[LOC_COUNT] = c
    loc[LOC_DATA] = d


cdef int64_t locate_fixed(Chunk* ch, int64_t k, int64_t pos, int64_t end) noexcept nogil:
    """rlen, ID, alleles and FILTER of record ``k`` (shared part ending at ``end``):
    returns the index of its first INFO key, or a negative error code."""
    cdef B.Bytes buf = ch.buf
    cdef int64_t rlen, t, c, d, n_allele, i, a, size
    # rlen: htslib's replacement of a damaged one needs REF and END, both in this record.
    rlen = B.i32(buf, pos + B.OFF_RLEN)
    if rlen < 0:
        rlen = B.htslib_rlen(buf, pos, ch.end_key)
        if rlen < 0:
            return -B.ERR_OVERRUN
        if rlen > 2147483647:
            return -B.ERR_RLEN
    ch.rlens[k] = rlen
    t, c, d = B.typed_descriptor(buf, pos + B.OFF_ID, end)
    if d < 0 or d + c > end:
        return -B.ERR_OVERRUN
    if t != B.BT_CHAR:
        return -B.ERR_ID_TYPE
    ch.id_loc[2 * k] = d
    ch.id_loc[2 * k + 1] = c
    ch.sizes[C_SEG_ID] += c
    n_allele = B.u32(buf, pos + B.OFF_N_ALLELE_INFO) >> 16
    if n_allele == 0:
        return -B.ERR_NO_REF
    i = d + c
    ch.allele_loc[2 * k] = i
    ch.allele_loc[2 * k + 1] = n_allele
    ch.total_alleles += n_allele
    for a in range(n_allele):
        t, c, d = B.typed_descriptor(buf, i, end)
        if d < 0 or d + c > end or t != B.BT_CHAR:
            return -B.ERR_OVERRUN
        ch.sizes[C_SEG_ALLELES] += c
        i = d + c
    t, c, d = B.typed_descriptor(buf, i, end)
    if d < 0:
        return -B.ERR_OVERRUN
    size = B.type_size(t)
    if d + c * size > end or (c > 0 and (t < B.BT_INT8 or t > B.BT_INT32)):
        return -B.ERR_OVERRUN
    put_loc(ch.filt_loc + 3 * k, t, c, d)
    ch.sizes[C_SEG_FILTER] += c * size
    return d + c * size


cdef int64_t locate_info(Chunk* ch, int64_t k, int64_t pos, int64_t i, int64_t end) noexcept nogil:
    """The INFO fields of record ``k``, from its first key at ``i``: OK or an error code."""
    cdef B.Bytes buf = ch.buf
    cdef int64_t n_info_rec = B.u32(buf, pos + B.OFF_N_ALLELE_INFO) & 0xFFFF
    cdef int64_t f, key, j, t, c, d, size, s
    cdef int64_t* loc
    for f in range(n_info_rec):
        key, j = B.read_key(buf, i, end)
        if j < 0:
            return B.ERR_OVERRUN
        t, c, d = B.typed_descriptor(buf, j, end)
        if d < 0:
            return B.ERR_OVERRUN
        size = B.type_size(t)
        if d + c * size > end:
            return B.ERR_OVERRUN
        if t == B.BT_NULL and c > 0:
            return B.ERR_NULL_VALUES
        if key < 0 or key >= ch.n_info_keys or ch.info_slot[key] < 0 or ch.info_slot[key] >= ch.n_info:
            return B.ERR_UNKNOWN_KEY
        s = ch.info_slot[key]
        loc = ch.info_loc + 3 * (k * max(ch.n_info, 1) + s)
        if loc[LOC_COUNT] < 0:  # htslib (find_info) takes a key's first value
            put_loc(loc, t, c, d)
            ch.sizes[C_N_FIXED_SEGMENTS + s] += c * size
        i = d + c * size
    return B.OK


cdef int64_t locate_format(Chunk* ch, int64_t k, int64_t pos, int64_t end, int64_t rec_end) noexcept nogil:
    """The FORMAT fields of record ``k`` (per-sample part ``end:rec_end``): every field is
    n_sample vectors, each samples block a contiguous sub-range. OK or an error code."""
    cdef B.Bytes buf = ch.buf
    cdef int64_t n_fmt_rec = buf[pos + B.OFF_N_FMT_SAMPLE + 3]
    cdef int64_t n_sample_rec = B.n_sample(buf, pos)
    cdef int64_t j = end, g, key, kj, t, c, d, size, nxt, f, b, s0, s1
    cdef int64_t* loc
    if n_fmt_rec > 0 and n_sample_rec != ch.n_samples:
        return B.ERR_SAMPLES
    for g in range(n_fmt_rec):
        key, kj = B.read_key(buf, j, rec_end)
        if kj < 0:
            return B.ERR_OVERRUN
        t, c, d = B.typed_descriptor(buf, kj, rec_end)
        if d < 0:
            return B.ERR_BAD_TYPE
        if t == B.BT_NULL and c > 0:
            return B.ERR_NULL_VALUES
        size = B.type_size(t)
        nxt = d + n_sample_rec * c * size
        if nxt > rec_end:
            return B.ERR_OVERRUN
        if key < 0 or key >= ch.n_fmt_keys or ch.fmt_slot[key] < 0 or ch.fmt_slot[key] >= ch.n_fmt:
            return B.ERR_UNKNOWN_KEY
        f = ch.fmt_slot[key]
        loc = ch.fmt_loc + 3 * (k * max(ch.n_fmt, 1) + f)
        if loc[LOC_COUNT] < 0:
            put_loc(loc, t, c, d)
            for b in range(ch.nb):
                s0 = b * ch.samples_chunk_size
                s1 = min(s0 + ch.samples_chunk_size, ch.n_samples)
                ch.sizes[C_N_FIXED_SEGMENTS + ch.n_info + f * ch.nb + b] += (s1 - s0) * c * size
        j = nxt
    return B.OK


cdef (int64_t, int64_t) locate_records(Chunk* ch, const int64_t* offsets, int64_t n) noexcept nogil:
    """The locate pass: walks descriptors only (O(fields) per record, never per sample),
    fills the locate tables and sizes every segment. Returns (error code, offset)."""
    cdef B.Bytes buf = ch.buf
    cdef int64_t k, pos, l_shared, end, rec_end, i, err
    for k in range(n):
        pos = offsets[k]
        if pos < 0 or pos + 32 > ch.buf_len:
            return B.ERR_TRAILING, pos
        l_shared = B.u32(buf, pos)
        if l_shared < B.MIN_L_SHARED:
            return B.ERR_SHORT_SHARED, pos
        end = pos + 8 + l_shared
        rec_end = end + <int64_t>B.u32(buf, pos + 4)
        if rec_end > ch.buf_len:
            return B.ERR_TRAILING, pos
        i = locate_fixed(ch, k, pos, end)
        if i < 0:
            return -i, pos
        err = locate_info(ch, k, pos, i, end)
        if err == B.OK:
            err = locate_format(ch, k, pos, end, rec_end)
        if err != B.OK:
            return err, pos
    return B.OK, 0


cdef void copy_fixed(Chunk* ch, const int64_t* offsets, int64_t n, uint8_t* out,
                     const int64_t* bounds, const uint8_t* sel) noexcept nogil:
    """CHROM, POS, rlen and QUAL (int32/uint32 columns), ID (a typed column of chars) and
    the alleles (n_allele[n], lengths, bytes) of the located records: those selected
    (``sel``, one flag per segment; the others have no bytes in ``out``)."""
    cdef B.Bytes buf = ch.buf
    cdef int64_t k
    # A loop per column: each is a few thousand bytes, and a column not selected has no
    # room in ``out`` to be written to.
    if sel[C_SEG_CONTIG]:
        for k in range(n):
            put_i32(out, bounds[C_SEG_CONTIG] + 4 * k, B.i32(buf, offsets[k] + B.OFF_CHROM))
    if sel[C_SEG_POSITION]:
        for k in range(n):
            put_i32(out, bounds[C_SEG_POSITION] + 4 * k, B.i32(buf, offsets[k] + B.OFF_POS))
    if sel[C_SEG_RLEN]:
        for k in range(n):
            put_i32(out, bounds[C_SEG_RLEN] + 4 * k, ch.rlens[k])
    if sel[C_SEG_QUAL]:
        for k in range(n):
            memcpy(out + bounds[C_SEG_QUAL] + 4 * k, buf + offsets[k] + B.OFF_QUAL, 4)
    if sel[C_SEG_ID]:
        copy_ids(ch, n, out, bounds[C_SEG_ID])
    if sel[C_SEG_ALLELES]:
        copy_alleles(ch, n, out, bounds[C_SEG_ALLELES])


cdef void copy_ids(Chunk* ch, int64_t n, uint8_t* out, int64_t start) noexcept nogil:
    """The ID segment at ``out[start:]``: a typed column of chars."""
    cdef B.Bytes buf = ch.buf
    cdef int64_t k, p = start + 5 * n
    for k in range(n):
        put_i32(out, start + 4 * k, ch.id_loc[2 * k + 1])
        out[start + 4 * n + k] = B.BT_CHAR
        memcpy(out + p, buf + ch.id_loc[2 * k], ch.id_loc[2 * k + 1])
        p += ch.id_loc[2 * k + 1]


cdef void copy_alleles(Chunk* ch, int64_t n, uint8_t* out, int64_t start) noexcept nogil:
    """The alleles segment at ``out[start:]``: n_allele[n], each allele's length, the bytes."""
    cdef B.Bytes buf = ch.buf
    cdef int64_t k, i, a, t, c, d
    cdef int64_t q = start + 4 * n  # lengths
    cdef int64_t p = q + 4 * ch.total_alleles  # bytes
    for k in range(n):
        put_i32(out, start + 4 * k, ch.allele_loc[2 * k + 1])
        i = ch.allele_loc[2 * k]
        for a in range(ch.allele_loc[2 * k + 1]):
            t, c, d = B.typed_descriptor(buf, i, ch.buf_len)
            put_i32(out, q, c)
            q += 4
            memcpy(out + p, buf + d, c)
            p += c
            i = d + c


cdef void typed_column(B.Bytes buf, int64_t buf_len, uint8_t* out, int64_t out_len, int64_t start,
                       const int64_t* locs, int64_t n, int64_t stride, int64_t s0, int64_t s1,
                       bint per_sample, bint shift_gt) noexcept nogil:
    """Write one typed column at ``out[start:]`` from the locate table rows ``locs +
    stride * k`` (type, count, data) of the ``n`` records.

    With ``per_sample`` the field holds vectors of ``count`` values and only those of
    samples ``s0:s1`` are copied (one contiguous range per record). ``shift_gt``: int8
    values are stored minus GT_SHIFT."""
    cdef int64_t p = start + 5 * n, k, c, t, width, d, m, todo
    cdef const int64_t* loc
    for k in range(n):
        loc = locs + stride * k
        c = loc[LOC_COUNT]
        put_i32(out, start + 4 * k, c)
        if c < 0:
            out[start + 4 * n + k] = 0
            continue
        t = loc[LOC_TYPE]
        out[start + 4 * n + k] = <uint8_t>t
        width = c * B.type_size(t)
        d = loc[LOC_DATA]
        if per_sample:
            d += s0 * width
            m = (s1 - s0) * width
        else:
            m = width
        # Clipped to both buffers: never past either, whatever the table says.
        todo = min(m, buf_len - d, out_len - p)
        if todo > 0 and d >= 0:
            # One copy loop for every field, the shift 0 but for int8 GT: a loop under its
            # own branch this deep in the inlined copy pass was guessed cold by gcc and left
            # scalar (3x slower on GT blocks than the vectorised one, measured).
            shifted_copy(buf + d, out + p, todo, C_GT_SHIFT if shift_gt and t == B.BT_INT8 else 0)
        p += m


cdef inline void shifted_copy(const uint8_t* src, uint8_t* dst, int64_t m, uint8_t shift) noexcept nogil:
    """``dst[:m] = src[:m] - shift``: uint8 arithmetic wraps modulo 256, and the loop
    vectorises (SSE2)."""
    cdef int64_t b
    for b in range(m):
        dst[b] = src[b] - shift


cdef void copy_columns(Chunk* ch, int64_t n, uint8_t* out, int64_t out_len, const int64_t* bounds,
                       int64_t gt_slot, const uint8_t* sel) noexcept nogil:
    """FILTER, each INFO key and each FORMAT key's samples blocks: typed columns, those
    selected (``sel``, one flag per segment)."""
    cdef int64_t s, f, b, s0, s1, info_w = max(ch.n_info, 1), fmt_w = max(ch.n_fmt, 1)
    if sel[C_SEG_FILTER]:
        typed_column(ch.buf, ch.buf_len, out, out_len, bounds[C_SEG_FILTER], ch.filt_loc, n, 3, 0, 1, False, False)
    for s in range(ch.n_info):
        if sel[C_N_FIXED_SEGMENTS + s]:
            typed_column(ch.buf, ch.buf_len, out, out_len, bounds[C_N_FIXED_SEGMENTS + s], ch.info_loc + 3 * s,
                         n, 3 * info_w, 0, 1, False, False)
    for f in range(ch.n_fmt):
        for b in range(ch.nb):
            s = C_N_FIXED_SEGMENTS + ch.n_info + f * ch.nb + b
            if not sel[s]:
                continue
            s0 = b * ch.samples_chunk_size
            s1 = min(s0 + ch.samples_chunk_size, ch.n_samples)
            typed_column(ch.buf, ch.buf_len, out, out_len, bounds[s], ch.fmt_loc + 3 * f, n, 3 * fmt_w, s0, s1,
                         True, f == gt_slot)


def demux_chunk(
    const uint8_t[::1] buf,
    const int64_t[::1] offsets,
    const int32_t[::1] info_slot,
    const int32_t[::1] fmt_slot,
    int64_t n_info,
    int64_t n_fmt,
    int64_t n_samples,
    int64_t samples_chunk_size,
    int64_t end_key,
    int64_t gt_slot,
    scratch,
    select=None,
):
    """Segments of one chunk: returns (out uint8, bounds int64, error code, error offset).

    ``offsets`` (int64) are the records' starts in ``buf``; ``info_slot``/``fmt_slot``
    (int32, vcfvirtual.cache.columns_demux.slot_maps) map dictionary keys to segment
    slots; ``gt_slot``: FORMAT slot of GT, whose int8 values are stored minus GT_SHIFT
    (-1: none). ``scratch``: a uint8 buffer reused for ``out`` when it is large enough
    (``out`` is then a view of it, valid until the caller reuses it): an index pass that
    allocates each chunk's output afresh pays a page fault per 4 KiB of it; ``None``:
    locate and size only, ``out`` empty and ``bounds`` every segment's as if all were
    written (the caller sizes its buffers by them).

    ``select`` (uint8, one flag per segment; ``None``: all): only the segments flagged are
    written; the others are empty in ``bounds``. A selected segment's bytes are the same
    whatever else is selected, so a chunk can be demuxed a few segments at a time (the
    columns writer, one samples block at a time), each call locating every record again:
    a corrupt record is reported by every call, whatever it selects."""
    cdef int64_t n = offsets.shape[0]
    if samples_chunk_size < 1:  # no block width to cut samples by
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), B.ERR_SHAPE, 0
    if n_info < 0 or n_fmt < 0 or n_samples < 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), B.ERR_SHAPE, 0
    cdef int64_t nb = max(1, (n_samples + samples_chunk_size - 1) // samples_chunk_size)
    cdef int64_t n_seg = C_N_FIXED_SEGMENTS + n_info + n_fmt * nb
    select_array = np.ones(n_seg, np.uint8) if select is None else np.ascontiguousarray(select, np.uint8)
    if select_array.ndim != 1 or select_array.shape[0] != n_seg:  # not one flag per segment
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), B.ERR_SHAPE, 0
    cdef const uint8_t[::1] sel = select_array
    empty = np.zeros(0, np.uint8)
    bounds_array = np.zeros(n_seg + 1, np.int64)
    sizes_array = np.zeros(n_seg, np.int64)
    id_loc = np.zeros((n, 2), np.int64)
    allele_loc = np.zeros((n, 2), np.int64)
    filt_loc = np.zeros((n, 3), np.int64)
    info_loc = np.full((n, max(n_info, 1), 3), -1, np.int64)
    fmt_loc = np.full((n, max(n_fmt, 1), 3), -1, np.int64)
    rlens = np.zeros(n, np.int64)
    cdef int64_t[::1] bounds = bounds_array, sizes = sizes_array, rl = rlens
    cdef int64_t[:, ::1] il = id_loc, al = allele_loc, fl = filt_loc
    cdef int64_t[:, :, ::1] inl = info_loc, fml = fmt_loc
    cdef Chunk ch
    ch.buf = _ptr(buf)
    ch.buf_len = buf.shape[0]
    ch.info_slot = &info_slot[0] if info_slot.shape[0] else NULL
    ch.n_info_keys = info_slot.shape[0]
    ch.fmt_slot = &fmt_slot[0] if fmt_slot.shape[0] else NULL
    ch.n_fmt_keys = fmt_slot.shape[0]
    ch.n_info, ch.n_fmt, ch.n_samples = n_info, n_fmt, n_samples
    ch.samples_chunk_size, ch.nb, ch.end_key = samples_chunk_size, nb, end_key
    ch.id_loc = &il[0, 0] if n else NULL
    ch.allele_loc = &al[0, 0] if n else NULL
    ch.filt_loc = &fl[0, 0] if n else NULL
    ch.info_loc = &inl[0, 0, 0] if n else NULL
    ch.fmt_loc = &fml[0, 0, 0] if n else NULL
    ch.rlens = &rl[0] if n else NULL
    ch.sizes = &sizes[0]
    ch.total_alleles = 0
    cdef const int64_t* offs = &offsets[0] if n else NULL
    cdef int64_t err, at, s
    with nogil:
        clear_upper()  # the BGZF inflate's crc32 (ISA-L) ran on this thread
        err, at = locate_records(&ch, offs, n)
    if err != B.OK:
        return empty, bounds_array, err, at
    # Segment sizes: headers plus the values counted above.
    for s in range(4):
        sizes[s] = 4 * n
    sizes[C_SEG_ID] += 5 * n
    sizes[C_SEG_ALLELES] += 4 * n + 4 * ch.total_alleles
    for s in range(C_SEG_FILTER, n_seg):
        sizes[s] += 5 * n
    if scratch is None:  # sizes only
        for s in range(n_seg):
            bounds[s + 1] = bounds[s] + sizes[s]
        return empty, bounds_array, B.OK, 0
    for s in range(n_seg):
        bounds[s + 1] = bounds[s] + (sizes[s] if sel[s] else 0)
    cdef int64_t total = bounds[n_seg]
    out_array = scratch[:total] if scratch.shape[0] >= total else np.empty(total, np.uint8)
    cdef uint8_t[::1] out = out_array
    cdef uint8_t* o = &out[0] if total else NULL
    if n:
        with nogil:
            copy_fixed(&ch, offs, n, o, &bounds[0], &sel[0])
            copy_columns(&ch, n, o, total, &bounds[0], gt_slot, &sel[0])
    return out_array, bounds_array, B.OK, 0


def gt_block_summary(const uint8_t[::1] seg, int64_t n, int64_t block_samples):
    """What a GT block segment (``demux_chunk``'s, int8 bytes stored minus GT_SHIFT) says
    of its calls as a whole, so that call_genotype_mask and call_genotype_phased can be
    read without decompressing it: ``(count, all_phased, none_phased)``.

    ``count``: the number of alleles every record holds, when every record holds GT as
    int8, that many for every sample, and no allele is missing, an end-of-vector or not an
    allele at all (a stored byte of 0x7E or more); else 0. ``all_phased`` / ``none_phased``:
    every record holds GT as int8 with at least two alleles, and the phase bit of every
    call's second allele (what the codec reads as phased) is set / clear. A segment shorter
    than its counts say (or not a typed column at all) claims nothing."""
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t length = seg.shape[0]
    cdef int64_t count = -1
    cdef bint complete = True, phase_known = True, any_set = False, any_clear = False, valid = True
    if n < 0 or block_samples < 0 or length < 5 * n:
        return 0, False, False
    with nogil:
        clear_upper()
        valid = block_summary(p, length, n, block_samples, &count, &complete, &phase_known, &any_set,
                              &any_clear)
    if not valid:
        return 0, False, False
    complete_count = count if complete and count > 0 else 0
    return complete_count, bool(phase_known and not any_clear), bool(phase_known and not any_set)


cdef bint block_summary(B.Bytes seg, int64_t length, int64_t n, int64_t block_samples, int64_t* count,
                        bint* complete, bint* phase_known, bint* any_set, bint* any_clear) noexcept nogil:
    """gt_block_summary's walk over the records of a segment at least ``5 * n`` long;
    False when a record's values would pass its end or its type is not BCF's."""
    cdef int64_t p = 5 * n, k, c, t, size, m
    cdef uint8_t top, ors, ands
    for k in range(n):
        c = B.i32(seg, 4 * k)
        t = seg[4 * n + k]
        if c <= 0:  # absent (missing calls) or empty (end-of-vector only)
            complete[0] = False
            phase_known[0] = False
            continue
        size = B.type_size(t)
        if size < 0:
            return False
        m = block_samples * c * size
        if p + m > length:  # not a block demux_chunk wrote: claim nothing, read no further
            return False
        if t != B.BT_INT8:
            complete[0] = False
            phase_known[0] = False
            p += m
            continue
        if count[0] < 0:
            count[0] = c
        complete[0] = complete[0] and c == count[0]
        phase_known[0] = phase_known[0] and c >= 2
        top, ors, ands = calls_summary(seg + p, m, c, block_samples)
        # Stored minus 2: alleles 0..62 are 0x00..0x7D; a missing allele (0x00/0x01) wraps
        # to 0xFE/0xFF, int8 missing and end-of-vector (0x80, 0x81) become 0x7E, 0x7F, and
        # the bytes no allele makes (0x82..0xFF, refused by the codec) 0x80..0xFD.
        complete[0] = complete[0] and top < 0x7E
        if c >= 2:  # the phase bit (bit 0, which the shift keeps) of every second allele
            any_set[0] = any_set[0] or (ors & 1) != 0
            any_clear[0] = any_clear[0] or (ands & 1) == 0
        p += m
    return True


cdef (uint8_t, uint8_t, uint8_t) calls_summary(B.Bytes values, int64_t m, int64_t c,
                                               int64_t block_samples) noexcept nogil:
    """(largest byte, OR and AND of every call's second allele byte) of one record's
    ``block_samples`` calls of ``c`` int8 alleles (``m`` bytes). Branch-free loops."""
    cdef uint8_t top = 0, ors = 0, ands = 0xFF, v, w
    cdef int64_t b, s
    if c == 2:  # diploid calls: one pass over (first, second) allele pairs
        for s in range(block_samples):
            v = values[2 * s]
            w = values[2 * s + 1]
            v = v if v > w else w
            top = top if top > v else v
            ors |= w
            ands &= w
        return top, ors, ands
    for b in range(m):
        v = values[b]
        top = top if top > v else v
    if c > 2:
        for s in range(block_samples):
            ors |= values[s * c + 1]
            ands &= values[s * c + 1]
    return top, ors, ands


# -- a GT block's summary and packing in one pass (the writer's kernel) ---------------------

# Per-byte constants of the SWAR steps (8 lanes of one byte in a 64-bit word).
cdef uint64_t _LOW7 = 0x7F7F7F7F7F7F7F7FULL
cdef uint64_t _HIGH = 0x8080808080808080ULL
cdef uint64_t _TWOS = 0x0202020202020202ULL
cdef uint64_t _ONES = 0x0101010101010101ULL
# Bit 0 of lanes 1, 3, 5, 7: the phase bits of four diploid calls.
cdef uint64_t _ODD_LOW = 0x0100010001000100ULL
# c_i (byte i, 0 or 1) times 2^(56 - 7i) lands at bit 56 + i: the top byte gathers the 8 codes
# (gt_bits' 1-bit packing, little-endian within the byte).
cdef uint64_t _GATHER1 = 0x0102040810204080ULL


# The pass's 16-byte steps where the host has SSE2 (every x86-64): the OR and the AND of the
# vectors as the word loop's below, their largest byte (for the "0x7E or more" test and "all
# 0..3"), and, unless ``dst`` is NULL, each vector's 16 codes (bit 1 of each byte, moved to
# bit 7 by a 16-bit shift left of 6 that no neighbouring byte's bits reach) gathered by one
# movemask into two packed bytes. The vectors' lanes i and i + 8 fold onto word lane i (same
# parity, so a diploid call's phase bits stay in the odd lanes). Returns the vectors done, an
# even number (0 without SSE2: the word loop then does every byte). A 20 MB block of cohort
# A: 0.9 ms, against 1.8 ms in words.
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define DEMUX_GT_VECTORS 1
    static int64_t demux_gt_vectors(const uint8_t *v, int64_t nvec, uint8_t *dst, uint64_t *ors,
                                    uint64_t *ands, uint8_t *largest) {
        __m128i o = _mm_setzero_si128(), a = _mm_set1_epi8(-1), top = _mm_setzero_si128();
        uint64_t w[2];
        uint8_t b[16];
        nvec -= nvec % 2;  /* two at a time: their 32 codes one 4-byte store (x86: little-endian) */
        if (dst != NULL) {
            for (int64_t j = 0; j < nvec; j += 2) {
                __m128i x = _mm_loadu_si128((const __m128i *)(v + 16 * j));
                __m128i y = _mm_loadu_si128((const __m128i *)(v + 16 * j + 16));
                uint32_t codes = (uint32_t)_mm_movemask_epi8(_mm_slli_epi16(x, 6))
                                 | (uint32_t)_mm_movemask_epi8(_mm_slli_epi16(y, 6)) << 16;
                o = _mm_or_si128(o, _mm_or_si128(x, y));
                a = _mm_and_si128(a, _mm_and_si128(x, y));
                top = _mm_max_epu8(top, _mm_max_epu8(x, y));
                memcpy(dst + 2 * j, &codes, 4);
            }
        } else {
            for (int64_t j = 0; j < nvec; j += 2) {
                __m128i x = _mm_loadu_si128((const __m128i *)(v + 16 * j));
                __m128i y = _mm_loadu_si128((const __m128i *)(v + 16 * j + 16));
                o = _mm_or_si128(o, _mm_or_si128(x, y));
                a = _mm_and_si128(a, _mm_and_si128(x, y));
                top = _mm_max_epu8(top, _mm_max_epu8(x, y));
            }
        }
        _mm_storeu_si128((__m128i *)w, o);
        *ors |= w[0] | w[1];
        _mm_storeu_si128((__m128i *)w, a);
        *ands &= w[0] & w[1];
        _mm_storeu_si128((__m128i *)b, top);
        for (int i = 0; i < 16; i++) *largest = b[i] > *largest ? b[i] : *largest;
        return nvec;
    }
    #else
    #define DEMUX_GT_VECTORS 0
    static int64_t demux_gt_vectors(const uint8_t *v, int64_t nvec, uint8_t *dst, uint64_t *ors,
                                    uint64_t *ands, uint8_t *largest) {
        return 0;
    }
    #endif
    """
    bint HAS_VECTORS "DEMUX_GT_VECTORS"
    int64_t _vectors "demux_gt_vectors"(B.Bytes v, int64_t nvec, uint8_t* dst, uint64_t* ors,
                                         uint64_t* ands, uint8_t* largest) noexcept nogil


# A block with missing calls, ends of vector or alleles above 1 (all phased or none) packs at
# 2 or 4 bits: each value's code is the allele the codec decodes plus 2 (gt_bits). From the
# stored byte s that is (s >> 1) + 2 for an allele (s below 0x7E: alleles 0..62); s = 0x7E,
# 0xFE, 0xFF (missing) and 0x7F (end of vector) are the bytes whose bits 1..6 are all set
# ("sentinels"), where (s >> 1) + 2 is 0x41 or 0x81, which masked to 2 or 4 bits is 1 (the
# missing code), less 1 for an end (code 0). The OR of the codes of every other byte says the
# width: at most 3 (2 bits) or 15 (4 bits); the bytes no allele makes (0x80..0xFD) are above
# either. Ends are flagged for the check that nothing but ends follows one in its call (the
# codec reads whatever follows as -2 too). The accumulators of the stored bytes are the 1-bit
# pass's (OR, AND, largest byte, the "0x7E or more" bits), so that the summary comes from the
# same pass. Vectors (SSE2): 64 bytes a step, 2-bit codes joined in 16-bit lanes by a shift
# and an OR, in 32-bit lanes by a multiply-add, then narrowed by two packs into 16 bytes;
# 4-bit codes two to a byte by one shift, one pack per 32 values. Words elsewhere (and for the
# tests).
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    typedef struct {
        uint64_t ors, ands, high;  /* of the stored bytes, as the 1-bit pass keeps them */
        uint8_t largest;           /* largest stored byte (vectors; words keep high) */
        uint8_t codes;             /* OR of the codes of every byte but the sentinels */
        uint8_t ends;              /* any end of vector */
    } demux_gt_acc;

    static inline uint64_t demux_gt_load8(const uint8_t *p) {
        return ((uint64_t)p[0]) | ((uint64_t)p[1]) << 8 | ((uint64_t)p[2]) << 16 | ((uint64_t)p[3]) << 24
               | ((uint64_t)p[4]) << 32 | ((uint64_t)p[5]) << 40 | ((uint64_t)p[6]) << 48
               | ((uint64_t)p[7]) << 56;
    }

    /* 0x80 in each lane of ``y`` that is 0, else 0 (no carry crosses a lane). */
    static inline uint64_t demux_gt_zero_lanes(uint64_t y) {
        const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL;
        return ~(((y & low7) + low7) | y | low7);
    }

    /* The codes of 8 stored bytes into ``codes`` (lanes masked to ``keep``), and the
       accumulators' share of them. */
    static inline uint64_t demux_gt_code_word(uint64_t x, uint64_t keep, uint64_t *codes, uint64_t *ends) {
        const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL;
        uint64_t raw = ((x >> 1) & low7) + 0x0202020202020202ULL;  /* at most 0x81: no carry */
        uint64_t end = demux_gt_zero_lanes(x ^ 0x7F7F7F7F7F7F7F7FULL);
        uint64_t sentinel = (demux_gt_zero_lanes(~(x | 0x8181818181818181ULL)) >> 7) * 0xFF;
        *codes |= raw & ~sentinel & keep;
        *ends |= end & keep;
        return (raw - (end >> 7)) & keep;  /* an end's 0x41 less 1: no borrow */
    }

    /* Stored bytes [8 * first, 8 * last) in words: the accumulators, and the codes of
       ``bits`` (2 or 4) each written at their place from ``dst`` (value 0's byte). */
    static void demux_gt_code_words(const uint8_t *v, int64_t first, int64_t last, int bits, uint8_t *dst,
                                    demux_gt_acc *acc) {
        const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL;
        uint64_t ors = 0, ands = ~(uint64_t)0, hi = 0, codes = 0, ends = 0;
        for (int64_t j = first; j < last; j++) {
            uint64_t x = demux_gt_load8(v + 8 * j);
            uint64_t code = demux_gt_code_word(x, ~(uint64_t)0, &codes, &ends);
            ors |= x;
            ands &= x;
            hi |= ((x & low7) + 0x0202020202020202ULL) | x;
            if (bits == 2) {
                uint64_t c = code & 0x0303030303030303ULL;
                dst[2 * j] = (uint8_t)(((c & 0xFFFFFFFFULL) * 0x01041040ULL) >> 24);
                dst[2 * j + 1] = (uint8_t)(((c >> 32) * 0x01041040ULL) >> 24);
            } else {
                uint64_t c = code & 0x0F0F0F0F0F0F0F0FULL;
                c |= c >> 4;
                dst[4 * j] = (uint8_t)c;
                dst[4 * j + 1] = (uint8_t)(c >> 16);
                dst[4 * j + 2] = (uint8_t)(c >> 32);
                dst[4 * j + 3] = (uint8_t)(c >> 48);
            }
        }
        for (int i = 0; i < 8; i++) acc->codes |= (uint8_t)(codes >> (8 * i));
        acc->ors |= ors;
        acc->ands &= ands;
        acc->high |= hi;
        acc->ends |= ends != 0;
    }

    /* The block's last ``rem`` (< 8) stored bytes, from ``start`` (a multiple of 8): as a
       word whose lanes past them are 0, their codes masked to 0 (gt_bits' spare bits); the
       OR and the high bits as the 1-bit pass's tail keeps them (no AND). */
    static void demux_gt_code_tail(const uint8_t *v, int64_t start, int64_t rem, int bits, uint8_t *dst,
                                   demux_gt_acc *acc) {
        uint64_t x = 0, code, codes = 0, ends = 0, keep = ((uint64_t)1 << (8 * rem)) - 1;
        for (int64_t i = 0; i < rem; i++) x |= ((uint64_t)v[start + i]) << (8 * i);
        code = demux_gt_code_word(x, keep, &codes, &ends);
        for (int i = 0; i < 8; i++) acc->codes |= (uint8_t)(codes >> (8 * i));
        acc->ends |= ends != 0;
        acc->ors |= x;
        acc->high |= ((x & 0x7F7F7F7F7F7F7F7FULL) + 0x0202020202020202ULL) | x;
        if (bits == 2) {
            uint64_t c = code & 0x0303030303030303ULL;
            dst[start / 4] = (uint8_t)(((c & 0xFFFFFFFFULL) * 0x01041040ULL) >> 24);
            if (rem > 4) dst[start / 4 + 1] = (uint8_t)(((c >> 32) * 0x01041040ULL) >> 24);
        } else {
            uint64_t c = code & 0x0F0F0F0F0F0F0F0FULL;
            c |= c >> 4;
            for (int64_t i = 0; i < (rem + 1) / 2; i++) dst[start / 2 + i] = (uint8_t)(c >> (16 * i));
        }
    }

    #if defined(__SSE2__)
    #include <emmintrin.h>
    /* One vector: the accumulators, and its codes masked to ``mask``. */
    #define DEMUX_GT_CODE_STEP(p, c)                                                              \
        do {                                                                                      \
            __m128i x_ = _mm_loadu_si128((const __m128i *)(p));                                   \
            __m128i raw_ = _mm_add_epi8(_mm_and_si128(_mm_srli_epi16(x_, 1), low7), twos);        \
            __m128i end_ = _mm_cmpeq_epi8(x_, low7);                                              \
            __m128i sentinel_ = _mm_cmpeq_epi8(_mm_or_si128(x_, sentinel_bits), all);             \
            o = _mm_or_si128(o, x_);                                                              \
            a = _mm_and_si128(a, x_);                                                             \
            top = _mm_max_epu8(top, x_);                                                          \
            codes = _mm_or_si128(codes, _mm_andnot_si128(sentinel_, raw_));                       \
            ends = _mm_or_si128(ends, end_);                                                      \
            (c) = _mm_and_si128(_mm_add_epi8(raw_, end_), mask);                                  \
        } while (0)

    /* ``nvec`` vectors (rounded down to a multiple of 4) at 2 or 4 bits; the vectors done. */
    static int64_t demux_gt_code_vectors(const uint8_t *v, int64_t nvec, int bits, uint8_t *dst,
                                         demux_gt_acc *acc) {
        __m128i o = _mm_setzero_si128(), a = _mm_set1_epi8(-1), top = _mm_setzero_si128();
        __m128i codes = _mm_setzero_si128(), ends = _mm_setzero_si128(), c0, c1, c2, c3;
        const __m128i low7 = _mm_set1_epi8(0x7F), twos = _mm_set1_epi8(2), all = _mm_set1_epi8(-1);
        const __m128i sentinel_bits = _mm_set1_epi8((char)0x81), low_bytes = _mm_set1_epi16(0x00FF);
        const __m128i join4 = _mm_set1_epi32(0x00100001);  /* per 32 bits: low + 16 * high half */
        uint64_t w[2];
        uint8_t b[16];
        nvec -= nvec % 4;
        if (bits == 2) {
            const __m128i mask = _mm_set1_epi8(3);
            for (int64_t j = 0; j < nvec; j += 4) {
                DEMUX_GT_CODE_STEP(v + 16 * j, c0);
                DEMUX_GT_CODE_STEP(v + 16 * j + 16, c1);
                DEMUX_GT_CODE_STEP(v + 16 * j + 32, c2);
                DEMUX_GT_CODE_STEP(v + 16 * j + 48, c3);
                /* 16-bit lanes: c0 | c1 << 2 (4 bits); 32-bit lanes: that of the low half
                   plus 16 times the high's, a byte; the packs keep each lane's byte. */
    #define DEMUX_GT_JOIN2(c) \
                (c) = _mm_madd_epi16(_mm_and_si128(_mm_or_si128((c), _mm_srli_epi16((c), 6)), low_bytes), join4)
                DEMUX_GT_JOIN2(c0);
                DEMUX_GT_JOIN2(c1);
                DEMUX_GT_JOIN2(c2);
                DEMUX_GT_JOIN2(c3);
    #undef DEMUX_GT_JOIN2
                _mm_storeu_si128((__m128i *)(dst + 4 * j),
                                 _mm_packus_epi16(_mm_packs_epi32(c0, c1), _mm_packs_epi32(c2, c3)));
            }
        } else {
            const __m128i mask = _mm_set1_epi8(15);
            for (int64_t j = 0; j < nvec; j += 4) {
                DEMUX_GT_CODE_STEP(v + 16 * j, c0);
                DEMUX_GT_CODE_STEP(v + 16 * j + 16, c1);
                DEMUX_GT_CODE_STEP(v + 16 * j + 32, c2);
                DEMUX_GT_CODE_STEP(v + 16 * j + 48, c3);
    #define DEMUX_GT_JOIN4(c) (c) = _mm_and_si128(_mm_or_si128((c), _mm_srli_epi16((c), 4)), low_bytes)
                DEMUX_GT_JOIN4(c0);
                DEMUX_GT_JOIN4(c1);
                DEMUX_GT_JOIN4(c2);
                DEMUX_GT_JOIN4(c3);
    #undef DEMUX_GT_JOIN4
                _mm_storeu_si128((__m128i *)(dst + 8 * j), _mm_packus_epi16(c0, c1));
                _mm_storeu_si128((__m128i *)(dst + 8 * j + 16), _mm_packus_epi16(c2, c3));
            }
        }
        _mm_storeu_si128((__m128i *)w, o);
        acc->ors |= w[0] | w[1];
        _mm_storeu_si128((__m128i *)w, a);
        acc->ands &= w[0] & w[1];
        _mm_storeu_si128((__m128i *)b, top);
        for (int i = 0; i < 16; i++) acc->largest = b[i] > acc->largest ? b[i] : acc->largest;
        _mm_storeu_si128((__m128i *)b, codes);
        for (int i = 0; i < 16; i++) acc->codes |= b[i];
        acc->ends |= _mm_movemask_epi8(ends) != 0;
        return nvec;
    }
    #undef DEMUX_GT_CODE_STEP
    #else
    static int64_t demux_gt_code_vectors(const uint8_t *v, int64_t nvec, int bits, uint8_t *dst,
                                         demux_gt_acc *acc) {
        return 0;
    }
    #endif
    """
    ctypedef struct GtAcc "demux_gt_acc":
        uint64_t ors
        uint64_t ands
        uint64_t high
        uint8_t largest
        uint8_t codes
        uint8_t ends
    void _code_words "demux_gt_code_words"(B.Bytes v, int64_t first, int64_t last, int bits, uint8_t* dst,
                                            GtAcc* acc) noexcept nogil
    void _code_tail "demux_gt_code_tail"(B.Bytes v, int64_t start, int64_t rem, int bits, uint8_t* dst,
                                          GtAcc* acc) noexcept nogil
    int64_t _code_vectors "demux_gt_code_vectors"(B.Bytes v, int64_t nvec, int bits, uint8_t* dst,
                                                  GtAcc* acc) noexcept nogil

# Bytes of a block between the pass's checks of what it can still be packed at (64 KB): a
# block that cannot (a byte no width holds, mixed phasing) is then summarised alone; one whose
# width grows (a missing call: 1 -> 2 bits; an allele above 1: 4 bits) is packed again from
# its start at the new width, which the first such byte usually ends after a few KB.
cdef int64_t STEP_BYTES = 1 << 16

# Whether gt_block_encode's pass takes 16-byte vectors on this host (tests run both ways).
GT_VECTORS = HAS_VECTORS


cdef inline uint64_t _load(B.Bytes p, int64_t k) noexcept nogil:
    """``k`` (<= 8) bytes as a little-endian word, the rest 0 (any host byte order; the
    compiler makes 8 of them one load)."""
    cdef uint64_t x = 0
    cdef int64_t i
    for i in range(k):
        x |= (<uint64_t>p[i]) << (8 * i)
    return x


cdef inline uint64_t _load8(B.Bytes p) noexcept nogil:
    return ((<uint64_t>p[0]) | (<uint64_t>p[1]) << 8 | (<uint64_t>p[2]) << 16 | (<uint64_t>p[3]) << 24
            | (<uint64_t>p[4]) << 32 | (<uint64_t>p[5]) << 40 | (<uint64_t>p[6]) << 48 | (<uint64_t>p[7]) << 56)


cdef inline uint8_t _lanes_or(uint64_t x) noexcept nogil:
    x |= x >> 32
    x |= x >> 16
    x |= x >> 8
    return <uint8_t>x


cdef int64_t uniform_count(B.Bytes seg, int64_t length, int64_t n, int64_t block_samples) noexcept nogil:
    """The alleles per call of a GT block segment whose every record holds GT as int8 with
    the same count c >= 2, its values exactly ``n * block_samples * c`` bytes (a table the
    codec's alleles block keeps, every call carrying a phase bit); 0 for any other."""
    cdef int64_t c, k, rest
    if n < 1 or block_samples < 1 or length < 5 * n:
        return 0
    c = B.i32(seg, 0)
    if c < 2:
        return 0
    for k in range(n):
        if B.i32(seg, 4 * k) != c or seg[4 * n + k] != B.BT_INT8:
            return 0
    # length == 5n + n * block_samples * c, by divisions (no product to overflow).
    rest = length - 5 * n
    if rest % n or (rest // n) % block_samples or (rest // n) // block_samples != c:
        return 0
    return c


cdef void one_bit_range(B.Bytes v, int64_t start, int64_t end, int64_t m, uint8_t* dst, bint vectors,
                        GtAcc* acc) noexcept nogil:
    """Stored bytes [start, end) (``start`` a multiple of 16; ``end`` of 8 or ``m``) into the
    accumulators and, unless ``dst`` is NULL, their 1-bit codes (bit 1 of each byte) at their
    place from ``dst``. Vectors first where the host has them, then words: the OR of the
    bytes (any above 3?), whether any is 0x7E or more (an incomplete call: missing,
    end-of-vector or no allele; (b & 0x7F) + 2 carries into bit 7 exactly from 0x7E, b >=
    0x80 has it already, no lane carries into the next), the AND for the phase bits, and 8
    codes into one byte; the block's last bytes as a word whose lanes past them are 0 (codes
    0, as pack_fewest's; no AND)."""
    cdef int64_t j, first = start // 8, full = end // 8, rem = end - 8 * full, done = 0
    cdef uint64_t x
    if vectors:
        done = _vectors(v + start, (end - start) // 16, dst + start // 8 if dst != NULL else NULL, &acc.ors,
                        &acc.ands, &acc.largest)
    for j in range(first + 2 * done, full):
        x = _load8(v + 8 * j)
        acc.ors |= x
        acc.ands &= x
        acc.high |= ((x & _LOW7) + _TWOS) | x
        if dst != NULL:
            dst[j] = <uint8_t>((((x >> 1) & _ONES) * _GATHER1) >> 56)
    if rem and end == m:
        x = _load(v + 8 * full, rem)
        acc.ors |= x
        acc.high |= ((x & _LOW7) + _TWOS) | x
        if dst != NULL:
            dst[full] = <uint8_t>((((x >> 1) & _ONES) * _GATHER1) >> 56)


cdef void codes_range(B.Bytes v, int64_t start, int64_t end, int64_t m, int bits, uint8_t* dst, bint vectors,
                      GtAcc* acc) noexcept nogil:
    """Stored bytes [start, end) as :func:`one_bit_range`, their codes of ``bits`` (2 or 4)
    written at their place from ``dst``, the OR of the codes and whether any is an end kept
    (``demux_gt_code_*``)."""
    cdef int64_t full = end // 8, rem = end - 8 * full, done = 0
    if vectors:
        done = _code_vectors(v + start, (end - start) // 16, bits, dst + start * bits // 8, acc)
    _code_words(v, start // 8 + 2 * done, full, bits, dst, acc)
    if rem and end == m:
        _code_tail(v, 8 * full, rem, bits, dst, acc)


cdef bint ends_close_calls(B.Bytes v, int64_t calls, int64_t c) noexcept nogil:
    """Whether every end-of-vector (stored 0x7F) in ``calls`` calls of ``c`` stored bytes is
    followed in its call by ends alone (as htslib pads a short call), so that each value's
    code is its own byte's: the codec reads whatever follows an end as -2."""
    cdef int64_t s, a
    cdef bint ended, regular = True
    if c == 2:  # only a first allele can be followed
        for s in range(calls):
            regular &= not (v[2 * s] == 0x7F and v[2 * s + 1] != 0x7F)
        return regular
    for s in range(calls):
        ended = False
        for a in range(c):
            regular &= not (ended and v[s * c + a] != 0x7F)
            ended |= v[s * c + a] == 0x7F
    return regular


def gt_block_encode(const uint8_t[::1] seg, int64_t n, int64_t block_samples, uint8_t[::1] out,
                    bint vectors=True):
    """A GT block segment (``demux_chunk``'s, int8 bytes stored minus GT_SHIFT): its summary
    as :func:`gt_block_summary` gives it, and, where the calls are all phased or none, the
    packed alleles block the codec's own path makes of it (``alleles_block`` then
    ``packed_block`` of vcfvirtual_codec.columns), from one pass over its values instead of
    three: ``(count, all_phased, none_phased, packed_length)``.

    The blocks packed: every record int8 with one count c >= 2 (:func:`uniform_count`),
    the calls all phased or none, and every stored byte one whose allele the fewest bits
    hold. The codec decodes stored byte ``s`` to allele ``s >> 1`` below 0x7E (alleles
    0..62), missing for 0x7E, 0xFE and 0xFF (BCF's 0x80, 0x00, 0x01), -2 for 0x7F (end of
    vector, and what follows it in its call), and refuses the rest. All 0..3 (alleles 0 and
    1, no missing value: the common block): 1 bit, each code bit 1 of its byte. Else, with
    the alleles -2..1 (missing calls, haploid calls padded by ends) 2 bits, -2..13 4 bits,
    each code the allele plus 2, where every end is followed in its call by ends alone (so
    that each value is its own byte's). The pass packs at 1 bit until a byte needs more,
    then packs what it has read again at the wider width and goes on at that.

    ``out[:packed_length]`` then holds the table, the bits and the codes. ``packed_length``
    0: no such block (``out`` undefined), for the caller's path through the codec's
    functions (an allele of 14 or more, a byte no allele makes, mixed phasing, an end
    followed by a value, a table of other counts or types). ``out`` must hold ``len(seg) +
    1`` bytes (never fewer than the packed block's). ``vectors`` False: words alone, as a
    host without SSE2 runs it (for tests; the same results)."""
    cdef int64_t length = seg.shape[0]
    cdef B.Bytes p = _ptr(seg)
    cdef int64_t c, m, full, rem, i, packed_length, start, end
    cdef int bits = 1
    cdef B.Bytes v
    cdef uint8_t* dst
    cdef uint64_t phase_ors = 0, phase_ands = 0xFF, w
    cdef GtAcc acc
    acc.ors = 0
    acc.ands = ~(<uint64_t>0)
    acc.high = 0
    acc.largest = 0
    acc.codes = 0
    acc.ends = 0
    c = uniform_count(p, length, n, block_samples)
    if c == 0:
        count, all_phased, none_phased = gt_block_summary(seg, n, block_samples)
        return count, all_phased, none_phased, 0
    if out.shape[0] < length + 1:
        raise ValueError(f"a buffer of {out.shape[0]} bytes for a GT block of {length} bytes (needs {length + 1})")
    m = length - 5 * n
    full = m // 8
    rem = m - 8 * full
    v = p + 5 * n
    dst = &out[5 * n + 1]
    with nogil:
        clear_upper()
        # bits: the width the codes so far are written at (1, 2, 4), 0 once none can be (the
        # rest summarised alone). Checked after each step of STEP_BYTES.
        start = 0
        while start < m:
            end = min(m, start + STEP_BYTES)
            if bits == 1:
                one_bit_range(v, start, end, m, dst, vectors, &acc)
                if _lanes_or(acc.ors) > 3:
                    bits = 2
                    codes_range(v, 0, end, m, bits, dst, vectors, &acc)
            elif bits:
                codes_range(v, start, end, m, bits, dst, vectors, &acc)
            else:
                one_bit_range(v, start, end, m, NULL, vectors, &acc)
            if bits == 2 and acc.codes > 3:
                bits = 4
                codes_range(v, 0, end, m, bits, dst, vectors, &acc)
            if bits == 4 and acc.codes > 15:
                bits = 0
            if c == 2 and acc.ors & _ODD_LOW and ~acc.ands & _ODD_LOW:  # phase bits set and clear
                bits = 0
            start = end
        if c == 2:
            # Second alleles are the odd bytes (each record's values are whole calls): odd
            # lanes of the words, then the tail's odd bytes.
            phase_ors = 1 if acc.ors & _ODD_LOW else 0
            phase_ands = 0 if ~acc.ands & _ODD_LOW else 1  # all ones when no word was read
            for i in range(8 * full + 1, m, 2):
                phase_ors |= v[i] & 1
                phase_ands &= v[i] & 1
        else:
            for i in range(m // c):
                w = v[i * c + 1]
                phase_ors |= w & 1
                phase_ands &= w & 1
        if bits > 1 and acc.ends and not ends_close_calls(v, m // c, c):
            bits = 0
    complete_count = c if (acc.high & _HIGH) == 0 and acc.largest < 0x7E else 0
    all_phased = (phase_ands & 1) == 1
    none_phased = (phase_ors & 1) == 0
    if bits == 0 or not (all_phased or none_phased):
        return complete_count, all_phased, none_phased, 0
    out[: 5 * n] = seg[: 5 * n]
    out[5 * n] = bits
    packed_length = 5 * n + 1 + (m * bits + 7) // 8
    return complete_count, all_phased, none_phased, packed_length
