"""af-dist, the VCF Zarr paper's benchmark, computed from a VCF Zarr store chunk by chunk.

The same histogram as `bcftools +af-dist` (its PROB_DIST lines) on a BCF whose INFO/AF is
the allele frequency of the genotypes: for each biallelic site, AF from the calls, then
every heterozygous call counts in the bin of 2*AF*(1-AF) and every hom-alt call in the bin
of AF^2 (10 bins over [0, 1]).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import zarr

NUM_BINS = 10


def open_genotypes(store: str) -> zarr.Array:
    """call_genotype of a vcfvirtual Kerchunk JSON or of a VCF Zarr directory."""
    if str(store).endswith(".json"):
        import vcfvirtual

        return zarr.open_group(vcfvirtual.open_store(store), mode="r", zarr_format=2)["call_genotype"]
    return zarr.open_group(str(Path(store)), mode="r")["call_genotype"]


@numba.njit(nogil=True, cache=True)
def _count_calls(gt, ref_alleles, het, hom_alt, called):
    """Per variant: REF alleles, het and hom-alt diploid calls, and called alleles.
    Branch-free over the calls, so LLVM can vectorise the inner loop."""
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
        ref_alleles[i] = n_ref
        het[i] = n_het
        hom_alt[i] = n_hom_alt
        called[i] = n_called


@numba.njit(nogil=True, cache=True)
def _count_diploid_int8(pairs, ref_alleles, het, hom_alt, called):
    """_count_calls for int8 diploid calls, each call read as one int16 (first allele in
    the low byte): contiguous 16-bit loads vectorise, where the interleaved byte pairs
    above do not (measured ~25x faster on 1,000 x 10,000 calls)."""
    for i in range(pairs.shape[0]):
        n_ref = 0
        n_het = 0
        n_hom_alt = 0
        n_called = 0
        for j in range(pairs.shape[1]):
            x = pairs[i, j]
            a = np.int8(x & 0xFF)
            b = x >> 8  # arithmetic: the second allele's sign
            ok = (a >= 0) & (b >= 0)
            n_called += 2 * ok
            n_ref += ok * ((a == 0) + (b == 0))
            n_het += ok & (a != b)
            n_hom_alt += ok & (a == b) & (a > 0)
        ref_alleles[i] = n_ref
        het[i] = n_het
        hom_alt[i] = n_hom_alt
        called[i] = n_called


def count_calls(gt: np.ndarray, ref_alleles, het, hom_alt, called) -> None:
    """Per-variant counts of a (variants, samples, 2) genotype block, into the arrays given."""
    if gt.dtype == np.int8 and gt.ndim == 3 and gt.shape[2] == 2 and sys.byteorder == "little":
        pairs = np.ascontiguousarray(gt).view(np.int16).reshape(gt.shape[0], gt.shape[1])
        _count_diploid_int8(pairs, ref_alleles, het, hom_alt, called)
    else:
        _count_calls(gt, ref_alleles, het, hom_alt, called)


def afdist(store: str) -> np.ndarray:
    """PROB_DIST counts of the store's call_genotype, one per bin."""
    gt = open_genotypes(store)
    n_variants = gt.shape[0]
    step = gt.chunks[0]
    ref_alleles = np.zeros(n_variants, np.int64)
    het = np.zeros(n_variants, np.int64)
    hom_alt = np.zeros(n_variants, np.int64)
    called = np.zeros(n_variants, np.int64)

    def count(start):
        stop = min(n_variants, start + step)
        count_calls(gt[start:stop], ref_alleles[start:stop], het[start:stop], hom_alt[start:stop], called[start:stop])

    # One chunk per task on as many threads as cores: reading and counting release the GIL.
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(count, range(0, n_variants, step)))
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
