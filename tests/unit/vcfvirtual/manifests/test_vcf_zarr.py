"""manifests/vcf_zarr: the arrays' dtypes and dimensions are bio2zarr's (vcf2zarr on the
same BCF), chunk byte ranges and integer widths as hand-computed from their definitions."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import vcfvirtual
from vcfvirtual.cache.base import MAX_CHUNK_LENGTH
from vcfvirtual.manifests import vcf_zarr
from vcfvirtual.scan.chunking import MIN_CHUNK_LENGTH

from .... import bcfdata
from ....conftest import bio2zarr_convert

FIELDS_VCF_HEADER = bcfdata.HEADER + (
    '##INFO=<ID=AF,Number=A,Type=Float,Description="Allele frequency">\n'
    '##INFO=<ID=DB,Number=0,Type=Flag,Description="dbSNP">\n'
    '##INFO=<ID=BIG,Number=1,Type=Integer,Description="Needs 32 bits">\n'
    '##INFO=<ID=TAGS,Number=.,Type=String,Description="Free text">\n'
    '##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Depth">\n'
    '##FORMAT=<ID=AD,Number=R,Type=Integer,Description="Allele depths">\n'
)
FIELDS_RECORDS = [
    "chr1\t100\trs1\tA\tT,G\t30\tPASS\tDP=5;AF=0.5,0.25;DB;BIG=100000;TAGS=x,y\tGT:DP:AD\t0/1:3:1,2,0\t1/2:.:.\t./.:7:7,0,0",
    "chr1\t200\t.\tC\tG\t.\t.\tDP=1;AF=0.1\tGT:DP\t0|0:1\t0|1:2\t1|1:300",
    "chr2\t5\t.\tT\t.\t.\tq10\tBIG=-5\tGT\t0\t.\t0/0",
]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    work = tmp_path_factory.mktemp("manifests")
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(FIELDS_RECORDS, header=FIELDS_VCF_HEADER), work / "fields.bcf")
    store = vcfvirtual.index(bcf, refs_path=False, cache_path=work / "fields.cache", variants_chunk_size=2, force=True)
    ours = zarr.open_group(store, mode="r", zarr_format=3)
    theirs = bio2zarr_convert(bcf, work / "fields.vcz", 2)
    return ours, theirs


def _dims(array: zarr.Array) -> list[str]:
    if array.metadata.zarr_format == 3 and array.metadata.dimension_names:
        return list(array.metadata.dimension_names)
    return list(array.attrs["_ARRAY_DIMENSIONS"])


def test_arrays_are_bio2zarrs(both):
    ours, theirs = both
    ours_names = {n for n, _ in ours.arrays()}
    theirs_names = {n for n, _ in theirs.arrays()}
    assert theirs_names - ours_names == set()


def test_dtypes_dimensions_and_shapes_are_bio2zarrs(both):
    ours, theirs = both
    problems = []
    for name, ref in theirs.arrays():
        array = ours[name]
        ours_dtype = "str" if array.dtype.kind in "OT" else np.dtype(array.dtype).str
        theirs_dtype = "str" if ref.dtype.kind in "OTU" else np.dtype(ref.dtype).str
        if ours_dtype != theirs_dtype:
            problems.append(f"{name}: dtype {ours_dtype} vs bio2zarr {theirs_dtype}")
        if _dims(array) != _dims(ref):
            problems.append(f"{name}: dims {_dims(array)} vs bio2zarr {_dims(ref)}")
        if array.shape != ref.shape:
            problems.append(f"{name}: shape {array.shape} vs bio2zarr {ref.shape}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [(-2, 127, "i1"), (-129, 0, "i2"), (0, 32768, "i4"), (-(2**31) - 1, 0, "i8"), (-1, -1, "i1")],
)
def test_min_int_dtype_is_the_smallest_signed_type(lo, hi, expected):
    assert vcf_zarr.min_int_dtype(lo, hi) == np.dtype(expected)


def test_min_int_dtype_past_64_bits_overflows():
    with pytest.raises(OverflowError):
        vcf_zarr.min_int_dtype(0, 2**63)


@pytest.mark.parametrize(
    ("samples", "ploidy", "expected"),
    [(1, 2, MAX_CHUNK_LENGTH), (10**7, 2, MIN_CHUNK_LENGTH), (4096, 2, 8192)],
)
def test_default_chunk_length_keeps_genotype_chunks_near_64_mib(samples, ploidy, expected):
    # 64 MiB / (4096 samples x 2 bytes) = 8192 variants; clipped to [100, 10000] otherwise.
    assert vcf_zarr.default_chunk_length(samples, ploidy) == expected


@pytest.mark.parametrize(
    ("samples", "expected"),
    [(1, 1_000), (10_000, 1_000), (100_000, 1_000), (200_000, 671), (10**7, MIN_CHUNK_LENGTH)],
)
def test_columns_chunk_length_is_bio2zarrs_within_a_memory_bound(samples, expected):
    # bio2zarr's 1,000 variants, but no chunk of all samples' diploid calls past 256 MiB:
    # 256 MiB / (200,000 samples x 2 bytes) = 671 variants.
    assert vcf_zarr.default_chunk_length(samples, 2, layout="columns") == expected
    assert vcf_zarr.default_chunk_length(samples, 2, layout="bgzf") == vcf_zarr.default_chunk_length(samples, 2)
