"""af-dist, the VCF Zarr paper's benchmark, computed from a VCF Zarr store chunk by chunk.

The same histogram as `bcftools +af-dist` (its PROB_DIST lines) on a BCF whose INFO/AF is
the allele frequency of the genotypes: for each biallelic site, AF from the calls, then
every heterozygous call counts in the bin of 2*AF*(1-AF) and every hom-alt call in the bin
of AF^2 (10 bins over [0, 1]).

Written as a user would write it for speed: zarr reads the chunks of call_genotype on a few
threads, a little ahead, each into a buffer reused from chunk to chunk, while the main
thread counts each chunk's calls with a numba kernel and adds them up per variant.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import zarr
from zarr.core.buffer import default_buffer_prototype

NUM_BINS = 10
# Chunks read at once, ahead of the counting: enough that both cores always have one to
# decode while the main thread counts or Python hands chunks over; each holds one buffer.
READS_AHEAD = 4
READ_THREADS = 2
# Calls counted into 16-bit counters before they are added to the row's total: a block's
# REF alleles (at most 2 per call) must fit in 65,535.
BLOCK_CALLS = 16384


def open_genotypes(store: str) -> zarr.Array:
    """call_genotype of a vcfvirtual Kerchunk JSON or of a VCF Zarr directory."""
    if str(store).endswith(".json"):
        import vcfvirtual

        return zarr.open_group(vcfvirtual.open_store(store), mode="r", zarr_format=2)["call_genotype"]
    return zarr.open_group(str(Path(store)), mode="r")["call_genotype"]


@numba.njit(nogil=True, cache=True)
def _count_calls(gt, ref_alleles, het, hom_alt, called):
    """Per variant, added to the arrays given: REF alleles, het and hom-alt diploid calls,
    and called alleles, of any integer calls."""
    for i in range(gt.shape[0]):
        n_ref = 0
        n_het = 0
        n_hom_alt = 0
        n_called = 0
        for j in range(gt.shape[1]):
            a = gt[i, j, 0]
            b = gt[i, j, 1]
            ok = (a >= 0) & (b >= 0)
            n_called += 2 * ok
            n_ref += ok * ((a == 0) + (b == 0))
            n_het += ok & (a != b)
            n_hom_alt += ok & (a == b) & (a > 0)
        ref_alleles[i] += n_ref
        het[i] += n_het
        hom_alt[i] += n_hom_alt
        called[i] += n_called


@numba.njit(nogil=True, cache=True)
def _count_diploid_int8(pairs, ref_alleles, het, hom_alt, called):
    """_count_calls for int8 diploid calls, each call read as one int16 (first allele in
    the low byte). Every test is a mask and compare on the int16 itself, and the counters
    of a block are 16-bit, so LLVM keeps all of it in 16-bit lanes: 16 calls per AVX2
    instruction (~10x the byte-pair version on a 1,000 x 10,000 chunk)."""
    n = pairs.shape[1]
    for i in range(pairs.shape[0]):
        row = pairs[i]
        n_ref = 0
        n_het = 0
        n_hom_alt = 0
        n_ok = 0
        for start in range(0, n, BLOCK_CALLS):
            stop = min(n, start + BLOCK_CALLS)
            r = np.uint16(0)
            h = np.uint16(0)
            m = np.uint16(0)
            k = np.uint16(0)
            # Unsigned indices: numba adds no negative-index wraparound to the loads.
            for j in range(np.uint64(start), np.uint64(stop)):
                x = row[j]
                ok = (x & 0x8080) == 0  # neither allele negative (missing or fill)
                first_ref = (x & 0xFF) == 0
                second_ref = (x & 0xFF00) == 0
                same = ((x ^ (x >> 8)) & 0xFF) == 0
                # The casts keep each sum 16-bit (numba would widen it to int64).
                r = np.uint16(r + (ok & first_ref) + (ok & second_ref))
                h = np.uint16(h + (ok & ~same))
                m = np.uint16(m + (ok & same & ~first_ref))
                k = np.uint16(k + ok)
            n_ref += r
            n_het += h
            n_hom_alt += m
            n_ok += k
        ref_alleles[i] += n_ref
        het[i] += n_het
        hom_alt[i] += n_hom_alt
        called[i] += 2 * n_ok


def count_calls(gt: np.ndarray, ref_alleles, het, hom_alt, called) -> None:
    """Per-variant counts of a (variants, samples, 2) genotype block, added to the arrays given.
    Diploid calls only, as bcftools +af-dist counts them: the kernels read two alleles a
    call without bounds checks, so any other ploidy is refused here."""
    if gt.ndim != 3 or gt.shape[2] != 2:
        raise ValueError(f"af-dist counts diploid calls; this call_genotype block has shape {gt.shape}")
    if gt.dtype == np.int8 and sys.byteorder == "little":
        pairs = np.ascontiguousarray(gt).view(np.int16).reshape(gt.shape[0], gt.shape[1])
        _count_diploid_int8(pairs, ref_alleles, het, hom_alt, called)
    else:
        _count_calls(gt, ref_alleles, het, hom_alt, called)


def _chunk_boxes(gt: zarr.Array) -> Iterator[tuple[slice, slice]]:
    """The (variants, samples) slices of every chunk, variant chunk by variant chunk: on a
    wide cohort a row of chunks is GBs, one chunk ~20 MB."""
    n_variants, n_samples = gt.shape[:2]
    step, width = gt.chunks[:2]
    for start in range(0, n_variants, step):
        for first in range(0, n_samples, width):
            yield slice(start, min(n_variants, start + step)), slice(first, min(n_samples, first + width))


def _read(gt: zarr.Array, box: tuple[slice, slice], buffer: np.ndarray) -> np.ndarray:
    """The box's calls, decoded into the front of a reused buffer: zarr copies each chunk
    into it instead of into a new ~20 MB array (new memory is zeroed by the kernel as it is
    first touched)."""
    shape = (box[0].stop - box[0].start, box[1].stop - box[1].start, *gt.shape[2:])
    block = buffer[: int(np.prod(shape))].reshape(shape)
    gt.get_basic_selection(box, out=default_buffer_prototype().nd_buffer.from_numpy_array(block))
    return block


def call_counts(gt: zarr.Array) -> np.ndarray:
    """REF alleles, het calls, hom-alt calls and called alleles per variant (4 rows)."""
    counts = np.zeros((4, gt.shape[0]), np.int64)
    boxes = _chunk_boxes(gt)
    chunk_size = int(np.prod(gt.chunks))
    pending: deque[tuple[tuple[slice, slice], np.ndarray, Future[np.ndarray]]] = deque()
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for box in boxes:
            buffer = np.empty(chunk_size, gt.dtype)
            pending.append((box, buffer, pool.submit(_read, gt, box, buffer)))
            if len(pending) == READS_AHEAD:
                break
        # numba loads the compiled kernel from its cache in the first call of a process
        # (~0.4 s of Python setting up its typing): done while the first chunks decode.
        count_calls(np.zeros((1, 1, *gt.shape[2:]), gt.dtype), *np.zeros((4, 1), np.int64))
        while pending:
            box, buffer, future = pending.popleft()
            count_calls(future.result(), *counts[:, box[0]])
            next_box = next(boxes, None)
            if next_box is not None:  # the counted chunk's buffer takes the next read
                pending.append((next_box, buffer, pool.submit(_read, gt, next_box, buffer)))
    return counts


def afdist(store: str) -> np.ndarray:
    """PROB_DIST counts of the store's call_genotype, one per bin."""
    ref_alleles, het, hom_alt, called = call_counts(open_genotypes(store))
    with np.errstate(divide="ignore", invalid="ignore"):
        af = np.where(called > 0, (called - ref_alleles) / called, 0.0)
    # bcftools reads AF as the float32 INFO value and computes the probabilities in
    # float32: at AF near 0.5 that rounds 2*AF*(1-AF) up to exactly 0.5, the edge of a bin.
    af = af.astype(np.float32)
    one, two = np.float32(1), np.float32(2)
    p_het = two * af * (one - af)
    p_hom_alt = af * af
    bins = np.linspace(0, 1.0, NUM_BINS + 1)
    bins[-1] += 0.0125  # AF = 1 falls in the last bin, as bcftools counts it
    counts = np.bincount(np.digitize(p_het, bins), weights=het, minlength=NUM_BINS + 2) + np.bincount(
        np.digitize(p_hom_alt, bins), weights=hom_alt, minlength=NUM_BINS + 2
    )
    return counts[1 : NUM_BINS + 1].astype(np.int64)
