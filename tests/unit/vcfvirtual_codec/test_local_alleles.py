"""The local-allele kernels against bio2zarr's own functions, the Zstd frame walk against
numcodecs' frames, and the configs and ranges a local-allele chunk is read with."""

from __future__ import annotations

import numpy as np
import pytest
from numcodecs import Blosc, Zstd
from vcfvirtual_codec import local_alleles as la_mod
from vcfvirtual_codec.errors import ChunkDecodeError, CodecConfigError
from vcfvirtual_codec.spec import ChunkSpec

LAD = {
    "array": "call_LAD",
    "kind": "local_ad",
    "dtype": "|i1",
    "shape": [3, 2],
    "chunk_length": 4,
    "num_records": 10,
    "key": 5,
    "gt_key": 4,
    "ploidy": 2,
    "source_width": 3,
}


def _random_calls(rng, rows: int, samples: int, alleles: int) -> np.ndarray:
    gt = rng.integers(0, alleles, (rows, samples, 2)).astype(np.int8)
    gt[rng.random(gt.shape) < 0.1] = -1  # missing alleles
    haploid = rng.random((rows, samples)) < 0.1
    gt[haploid, 1] = -2  # haploid calls in diploid data
    return gt


@pytest.mark.parametrize("alleles", [2, 3, 6])
def test_kernels_equal_bio2zarr_functions(alleles):
    from bio2zarr import vcz

    rng = np.random.default_rng(alleles)
    gt = _random_calls(rng, 50, 40, alleles)
    width_pl = alleles * (alleles + 1) // 2
    ad = rng.integers(-2, 60, (50, 40, alleles)).astype(np.int16)
    pl = rng.integers(-2, 300, (50, 40, width_pl)).astype(np.int16)
    la = np.empty(gt.shape, np.int8)
    la_mod.local_alleles(gt, la)
    lad = np.empty(gt.shape, np.int16)
    la_mod.local_ad(ad, la, lad)
    lpl = np.empty((50, 40, 3), np.int16)
    la_mod.local_pl(pl, la, lpl)
    for k in range(gt.shape[0]):
        expected_la = vcz.compute_la_field(gt[k])
        assert la[k].tolist() == expected_la.tolist()
        assert lad[k].tolist() == vcz.compute_lad_field(ad[k], expected_la).tolist()
        assert lpl[k].tolist() == vcz.compute_lpl_field(pl[k], expected_la).tolist()


def test_values_past_the_field_width_read_fill():
    """bio2zarr indexes past a too-short AD (IndexError); the kernel gives the fill."""
    gt = np.array([[[0, 2]]], np.int8)
    la = np.empty((1, 1, 2), np.int8)
    la_mod.local_alleles(gt, la)
    out = np.empty((1, 1, 2), np.int8)
    la_mod.local_ad(np.array([[[7, 8]]], np.int8), la, out)
    assert out.tolist() == [[[7, -2]]]


@pytest.mark.parametrize("size", [0, 10, 200_000, 1_500_000])
@pytest.mark.parametrize("checksum", [False, True])
def test_zstd_frame_length_is_the_frame(size, checksum):
    rng = np.random.default_rng(size)
    data = np.concatenate([rng.integers(0, 4, size // 2, dtype=np.uint8), np.zeros(size - size // 2, np.uint8)])
    frame = np.frombuffer(Zstd(level=1, checksum=checksum).encode(data), np.uint8)
    tail = np.frombuffer(b"VVS2 and more bytes after the frame", np.uint8)
    assert la_mod.zstd_frame_length(np.concatenate([frame, tail])) == frame.shape[0]
    assert la_mod.zstd_frame_length(frame[:-1]) is None  # cut short


def test_blosc_frame_length_is_its_header_cbytes():
    frame = np.frombuffer(Blosc(cname="lz4", clevel=9, shuffle=Blosc.BITSHUFFLE).encode(bytes(5000)), np.uint8)
    assert la_mod._frame_length(np.concatenate([frame, np.zeros(40, np.uint8)])) == frame.shape[0]


def test_a_range_holding_one_segment_is_refused():
    spec = ChunkSpec.from_config({**LAD, "layout": "columns", "samples_chunk_size": 3, "compressor": "zstd"})
    frame = np.frombuffer(Zstd(level=1).encode(bytes(100)), np.uint8)
    one = np.concatenate([np.zeros(36, np.uint8), frame])
    with pytest.raises(ChunkDecodeError, match="two whole segments"):
        la_mod.split_segments(one, spec, 36)


@pytest.mark.parametrize(
    "change,named",
    [
        ({"gt_key": -1}, "needs GT's key"),
        ({"ploidy": 3}, "ploidy 2"),
        ({"shape": [3, 3]}, "does not end in 2"),
        ({"source_width": 0}, "source_width 0"),
        ({"dtype": "<f4"}, "dtype '<f4'"),
        ({"vcf_type": "Integer"}, "takes no vcf_type"),
        ({"kind": "local_alleles", "dtype": "<i2"}, "dtype '<i2'"),
        ({"kind": "local_alleles", "key": 4, "source_width": 3}, "reads GT alone"),
        ({"kind": "format", "vcf_type": "Integer", "ploidy": 0}, "only for local-allele kinds"),
        ({"gt_key": True}, "gt_key must be an integer"),
    ],
)
def test_local_configs_are_checked(change, named):
    with pytest.raises(CodecConfigError, match=named):
        ChunkSpec.from_config({**LAD, **change})


def test_local_fields_only_in_local_configs():
    assert ChunkSpec.from_config(LAD).to_config()["source_width"] == 3
    plain = {k: v for k, v in LAD.items() if k not in ("gt_key", "source_width")}
    config = ChunkSpec.from_config({**plain, "kind": "format", "vcf_type": "Integer", "ploidy": 0}).to_config()
    assert "gt_key" not in config and "source_width" not in config
