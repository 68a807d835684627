"""Fuzzing: mutated BCF bytes and mutated chunk bytes give either the values htslib reads
from the same bytes, or a typed vcfvirtual error; never a crash, a hang or other values.

The suite runs a fixed, derandomized set of cases; VCFVIRTUAL_HYPOTHESIS=deep explores many
fresh ones (see tests/README.md). Run an exploration once with NUMBA_BOUNDSCHECK=1 too, so
an out-of-bounds read in a kernel raises instead of reading past the buffer.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pysam
import pytest
import zarr
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import vcfvirtual
from vcfvirtual.codec import ChunkSpec, decode_chunk
from vcfvirtual.errors import VcfVirtualError

from . import bcfdata
from .conftest import chunk_bytes

_HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]
settings.register_profile("fuzz-suite", max_examples=60, derandomize=True, database=None, deadline=10_000,
                          suppress_health_check=_HEALTH)
settings.register_profile("fuzz-deep", max_examples=3000, deadline=10_000, suppress_health_check=_HEALTH)
PROFILE = "fuzz-deep" if os.environ.get("VCFVIRTUAL_HYPOTHESIS") == "deep" else "fuzz-suite"

pysam.set_verbosity(0)  # htslib's complaints about mutated input are expected


@pytest.fixture(scope="module")
def fuzz_bcf(tmp_path_factory) -> Path:
    """Small but varied: multi-allelic sites, missing and partial calls, several contigs,
    FILTERs and an INFO field, records crossing no block (the mutations do the damage)."""
    return bcfdata.small_bcf(tmp_path_factory.mktemp("fuzz") / "f.bcf")


@pytest.fixture(scope="module", autouse=True)
def compiled_kernels(fuzz_bcf, tmp_path_factory):
    """Compile (or load) every kernel before the timed cases: a first compilation with
    NUMBA_BOUNDSCHECK=1 takes longer than any case's deadline."""
    work = tmp_path_factory.mktemp("warm")
    for layout in ("bgzf", "raw"):
        store = vcfvirtual.index(fuzz_bcf, refs_path=False, cache_path=work / f"{layout}.cache", cache_layout=layout)
        group = zarr.open_group(store, mode="r", zarr_format=3)
        for name in group.array_keys():
            group[name][...]


def mutate(data: bytes, kind: str, at: int, value: int, length: int) -> bytes:
    at = at % max(len(data), 1)
    if kind == "flip":
        out = bytearray(data)
        out[at] ^= value or 1
        return bytes(out)
    if kind == "set":
        out = bytearray(data)
        out[at] = value
        return bytes(out)
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + bytes([value]) * length + data[at:]
    return data[:at] + data[at + length :]  # delete


mutations = st.tuples(
    st.sampled_from(["flip", "set", "truncate", "insert", "delete"]),
    st.integers(min_value=0, max_value=2**20),
    st.integers(min_value=0, max_value=255),
    st.integers(min_value=1, max_value=16),
)


def htslib_reading(path: Path):
    """(positions, alleles, genotypes) as htslib reads the whole file, or None if it cannot."""
    try:
        with pysam.VariantFile(str(path)) as vf:
            samples = list(vf.header.samples)
            rows = []
            for rec in vf:
                gts = [rec.samples[s].get("GT") if "GT" in rec.format else None for s in samples]
                rows.append((rec.contig, rec.pos, tuple(rec.alleles or ()), gts))
            return rows
    except Exception:  # noqa: BLE001 - any htslib refusal means "no reference reading"
        return None


def our_reading(store):
    g = zarr.open_group(store, mode="r", zarr_format=3)
    contigs = g["contig_id"][:].tolist()
    chrom = g["variant_contig"][:]
    pos = g["variant_position"][:]
    alleles = g["variant_allele"][:]
    gt = g["call_genotype"][:] if "call_genotype" in g else None
    rows = []
    for k in range(len(pos)):
        row_alleles = tuple(a for a in alleles[k].tolist() if a != "")
        gts = None
        if gt is not None:
            gts = [tuple(None if a == -1 else int(a) for a in call if a != -2) for call in gt[k]]
        rows.append((contigs[chrom[k]], int(pos[k]), row_alleles, gts))
    return rows


def comparable(rows):
    """Calls as both readers can state them: htslib's GT of a record without GT is None
    per sample where ours is all missing; and pysam reads an allele index past the
    record's alleles as None, where we (like bio2zarr, and bcftools view) keep the index."""
    out = []
    for contig, pos, alleles, gts in rows:
        n = len(alleles)
        calls = []
        for g in gts or []:
            g = None if g is None else tuple(None if a is None or (n and a >= n) else a for a in g)
            calls.append(None if g is None or all(a is None for a in g) else g)
        out.append((contig, pos, alleles, calls))
    return out


@settings(settings.get_profile(PROFILE))
@given(mutation=mutations)
def test_mutated_uncompressed_bcf_reads_as_htslib_reads_it_or_fails_cleanly(fuzz_bcf, tmp_path, mutation):
    plain = gzip.decompress(fuzz_bcf.read_bytes())
    path = tmp_path / "m.bcf"
    path.write_bytes(mutate(plain, *mutation))
    try:
        store = vcfvirtual.index(path, refs_path=False, cache_path=tmp_path / "m.cache", force=True,
                                 variants_chunk_size=3)
        ours = our_reading(store)
    except VcfVirtualError:
        return  # a typed, clear refusal
    expected = htslib_reading(path)
    if expected is not None:
        assert comparable(ours) == comparable(expected), mutation


@settings(settings.get_profile(PROFILE))
@given(mutation=mutations)
def test_mutated_bgzf_bcf_is_refused_or_read_unchanged(fuzz_bcf, tmp_path, mutation):
    """Every byte of a BGZF block is covered by its CRC32, its size fields or its header
    checks, except the gzip MTIME/XFL/OS bytes, which change nothing read."""
    path = tmp_path / "m.bcf"
    path.write_bytes(mutate(fuzz_bcf.read_bytes(), *mutation))
    try:
        store = vcfvirtual.index(path, refs_path=False, cache_path=tmp_path / "m.cache", force=True,
                                 variants_chunk_size=3)
        ours = our_reading(store)
    except VcfVirtualError:
        return
    assert comparable(ours) == comparable(htslib_reading(fuzz_bcf)), mutation


@pytest.fixture(scope="module")
def chunks(fuzz_bcf, tmp_path_factory):
    """The first chunk's bytes and codec spec of several arrays, in both layouts."""
    out = {}
    work = tmp_path_factory.mktemp("chunks")
    for layout in ("bgzf", "raw"):
        refs = work / f"{layout}.json"
        vcfvirtual.index(fuzz_bcf, refs_path=refs, cache_path=work / f"{layout}.cache", cache_layout=layout,
                         variants_chunk_size=4)
        doc = json.loads(refs.read_text())["refs"]
        for array in ("call_genotype", "variant_position", "variant_allele", "variant_DP", "variant_filter"):
            zarray = json.loads(doc[f"{array}/.zarray"])
            config = next(f for f in zarray["filters"] if f["id"] == "vcfvirtual.bcf")
            spec = ChunkSpec.from_config({k: v for k, v in config.items() if k != "id"})
            data = chunk_bytes(refs, f"{array}/" + ".".join("0" for _ in zarray["shape"]))
            out[(layout, array)] = (data, spec)
        if layout == "raw":
            # The raw cache is the uncompressed stream: its header is what precedes chunk 0.
            _, offset, _ = doc["variant_position/0"]
            out[("raw", "header")] = ((work / "raw.cache").read_bytes()[:offset], None)
    return out


def _decoded(data: bytes, spec: ChunkSpec):
    result = decode_chunk(np.frombuffer(data, np.uint8), spec)
    return result if isinstance(result, bytes) else np.asarray(result).tobytes()


@settings(settings.get_profile(PROFILE))
@given(mutation=mutations, array=st.sampled_from(
    ["call_genotype", "variant_position", "variant_allele", "variant_DP", "variant_filter"]))
def test_mutated_bgzf_chunk_is_refused_or_decodes_unchanged(chunks, mutation, array):
    data, spec = chunks[("bgzf", array)]
    expected = _decoded(data, spec)
    try:
        got = _decoded(mutate(data, *mutation), spec)
    except VcfVirtualError:
        return
    assert got == expected, mutation


@settings(settings.get_profile(PROFILE))
@given(mutation=mutations, array=st.sampled_from(
    ["call_genotype", "variant_position", "variant_allele", "variant_DP", "variant_filter"]))
# Found by a deep run: a GT byte 0x82 (negative, neither missing nor end) decoded as -64.
@example(mutation=("flip", 188058, 128, 1), array="call_genotype")
def test_mutated_raw_chunk_decodes_as_htslib_reads_it_or_fails_cleanly(chunks, tmp_path, mutation, array):
    """The raw layout has no checksum: a changed value inside a record is, as far as any
    reader can tell, the value (the sampled fingerprint checked at open is what guards a
    raw cache). So the oracle is htslib reading the header plus the same mutated records:
    where it reads them, our positions and genotypes must be its; otherwise a typed error
    or values, never a crash."""
    data, spec = chunks[("raw", array)]
    mutated = mutate(data, *mutation)
    try:
        decoded = decode_chunk(np.frombuffer(mutated, np.uint8), spec)
    except VcfVirtualError:
        return
    if array not in ("call_genotype", "variant_position"):
        return
    header, _ = chunks[("raw", "header")]
    path = tmp_path / "records.bcf"
    path.write_bytes(header + mutated)
    expected = htslib_reading(path)
    if expected is None or len(expected) > spec.chunk_length:
        return
    n = len(expected)
    if array == "variant_position":
        assert np.asarray(decoded)[:n].tolist() == [pos for _, pos, _, _ in expected], mutation
    else:
        gt = np.asarray(decoded).reshape(spec.chunk_length, *spec.shape)[:n]
        ours = [[tuple(None if a == -1 else int(a) for a in call if a != -2) for call in row] for row in gt]
        assert comparable([(0, 0, alleles, g) for g, (_, _, alleles, _) in zip(ours, expected)]) == \
            comparable([(0, 0, alleles, g) for _, _, alleles, g in expected]), mutation
