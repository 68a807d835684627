"""Demux + decode of every supported segment kind against bio2zarr (the oracle).

    PYTHONPATH=$PWD:$PWD/codec python -m pytest benchmarks/columns/test_columns.py -q

Inputs are the test suite's hand-written BCFs (tests/bcfdata.py: missing and partial GT,
haploid calls, mixed phasing, multi-allelic sites, FILTER combinations, INFO Flag/Float,
FORMAT Integer/Float, absent fields) and a random cohort, cut into small variants chunks
and samples blocks so that chunk and block edges fall inside the data. Character INFO/FORMAT
fields (none in these inputs) have no decode kernel yet and would be skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from columns import demux as D  # noqa: E402
from columns import layout as L  # noqa: E402
from columns import stream  # noqa: E402
from columns.measure import Decoder, b2z_array  # noqa: E402

from tests import bcfdata  # noqa: E402

CASES = {
    "small": lambda: bcfdata.vcf_text(bcfdata.SMALL_RECORDS),
    "fuzz_seed": lambda: bcfdata.vcf_text(bcfdata.FUZZ_RECORDS, header=bcfdata.FUZZ_HEADER),
    "cohort": lambda: bcfdata.random_cohort_vcf(40, 7, seed=3),
}


@pytest.mark.parametrize("gt_shift", [True, False])
@pytest.mark.parametrize("samples_chunk_size", [2, 10_000])
@pytest.mark.parametrize("case", sorted(CASES))
def test_segments_decode_as_bio2zarr(tmp_path, case, samples_chunk_size, gt_shift):
    from bio2zarr import vcf

    chunk_length = 3
    bcf = bcfdata.write_bcf(CASES[case](), tmp_path / f"{case}.bcf", index=True)
    store = tmp_path / "b2z.vcz"
    vcf.convert([str(bcf)], str(store), variants_chunk_size=chunk_length, samples_chunk_size=samples_chunk_size)
    group = zarr.open_group(str(store), mode="r")
    checked = set()
    for i, (header, buf, offs) in enumerate(stream.chunks(bcf, chunk_length)):
        islot, fslot = D.slot_maps([f.key for f in header.info], [f.key for f in header.formats])
        segs, bounds, err, at = D.demux_chunk(
            buf,
            offs,
            islot,
            fslot,
            len(header.info),
            len(header.formats),
            len(header.samples),
            samples_chunk_size,
            header.end_key,
            L.gt_slot(header) if gt_shift else -1,
        )
        assert err == 0, (err, at)
        names = L.segment_names(header, samples_chunk_size)
        assert len(names) == bounds.shape[0] - 1
        dec = Decoder(header, group, samples_chunk_size, gt_shifted=gt_shift)
        string_fields = {f"{d.category.lower()}/{d.name}" for d in (*header.info, *header.formats)}
        string_fields = {k for k in string_fields if _vcf_type(header, k) == "Character"}
        for s, name in enumerate(names):
            kind = L.segment_kind(name)
            if kind in string_fields:
                continue
            block = int(name.split("#")[1]) if "#" in name else 0
            n = len(offs)
            got = dec.decode(kind, segs[bounds[s] : bounds[s + 1]], n, block)
            ref = group[b2z_array(kind)][i * chunk_length : i * chunk_length + n]
            if kind.startswith("format/"):
                ref = ref[:, block * samples_chunk_size : block * samples_chunk_size + got.shape[1]]
            if got.dtype == object:
                assert got.tolist() == np.asarray(ref).astype(object).tolist(), (name, i)
            elif got.dtype.kind == "f":
                np.testing.assert_array_equal(got.view(np.uint32), np.asarray(ref).view(np.uint32), err_msg=name)
            else:
                np.testing.assert_array_equal(got, ref, err_msg=f"{name} chunk {i}")
            checked.add(kind)
    assert {"position", "contig", "rlen", "qual", "id", "alleles", "filter", "format/GT"} <= checked
    if case == "fuzz_seed":  # String INFO and FORMAT, Flag, Float
        assert {"info/NOTE", "format/FT", "info/SOMATIC", "format/QS", "info/AF"} <= checked


def _vcf_type(header, kind: str) -> str:
    cat, name = kind.split("/")
    defs = header.info if cat == "info" else header.formats
    return next(d.type for d in defs if d.name == name)


def test_phasing_decodes_as_bio2zarr(tmp_path):
    """call_genotype_phased from a GT block segment (the genotype kernel's second output)."""
    from bio2zarr import vcf
    from columns import decode as X

    bcf = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.SMALL_RECORDS), tmp_path / "s.bcf", index=True)
    store = tmp_path / "b2z.vcz"
    vcf.convert([str(bcf)], str(store), variants_chunk_size=100, samples_chunk_size=2)
    group = zarr.open_group(str(store), mode="r")
    header, buf, offs = next(stream.chunks(bcf, 100))
    islot, fslot = D.slot_maps([f.key for f in header.info], [f.key for f in header.formats])
    gt_index = L.gt_slot(header)
    segs, bounds, err, _ = D.demux_chunk(
        buf, offs, islot, fslot, len(header.info), len(header.formats), 3, 2, -1, gt_index
    )
    assert err == 0
    names = L.segment_names(header, 2)
    for block in (0, 1):
        s = names.index(f"format/GT#{block}")
        width = min(2, 3 - 2 * block)
        gt = np.empty((len(offs), width, 2), np.int8)
        phased = np.empty((len(offs), width), bool)
        assert X.genotypes(segs[bounds[s] : bounds[s + 1]], len(offs), gt, phased, 127, True)[0] == 0
        np.testing.assert_array_equal(phased, group["call_genotype_phased"][:, 2 * block : 2 * block + width])
        np.testing.assert_array_equal(gt, group["call_genotype"][:, 2 * block : 2 * block + width])


def test_damaged_segment_fails_loudly():
    """A segment whose header claims more values than it holds is refused, not read past."""
    from columns import decode as X

    seg = np.zeros(5 * 2 + 3, np.uint8)  # two records; counts say 4 int8 values each
    seg[0] = 4
    seg[4] = 4
    seg[8] = seg[9] = 1
    gt = np.empty((2, 2, 2), np.int8)
    err, _ = X.genotypes(seg, 2, gt, np.empty((0, 0), bool), 127)
    assert err == X.ERR_SEGMENT


def _small_cache(tmp_path, codecs):
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(bcfdata.FUZZ_RECORDS, header=bcfdata.FUZZ_HEADER), tmp_path / "f.bcf")
    cache = tmp_path / "f.columns"
    L.write(bcf, cache, 4, 2, codecs)
    return bcf, L.Columns.open(cache)


def test_cache_segments_read_back_as_bio2zarr(tmp_path):
    """Written, compressed, read back through the preamble checks: GT equals bio2zarr's."""
    from bio2zarr import vcf

    bcf, cols = _small_cache(tmp_path, {"*": "zstd-1", "format/GT": "blosc-lz4-bit-5"})
    store = tmp_path / "b2z.vcz"
    vcf.convert([str(bcf)], str(store), variants_chunk_size=4, samples_chunk_size=2)
    group = zarr.open_group(str(store), mode="r")
    header = next(stream.chunks(bcf, 4))[0]
    dec = Decoder(header, group, 2)
    names = cols.meta["segments"]
    for i in range(cols.n_records.shape[0]):
        n = int(cols.n_records[i])
        for b in range(2):
            got = dec.decode("format/GT", cols.read_segment(i, names.index(f"format/GT#{b}")), n, b)
            np.testing.assert_array_equal(got, group["call_genotype"][4 * i : 4 * i + n, 2 * b : 2 * b + 2])
    cols.close()


def test_damaged_cache_segment_fails_crc(tmp_path):
    """A flipped byte inside a stored (uncompressed) segment: the CRC32 check refuses it."""
    _, cols = _small_cache(tmp_path, {"*": "none"})
    s = cols.meta["segments"].index("format/GT#0")
    at = int(cols.offsets[0, s]) + L.PREAMBLE.size + int(cols.raw_lengths[0, s]) - 1  # last GT value byte
    data = bytearray(cols.path.read_bytes())
    data[at] ^= 0x02
    cols.path.write_bytes(bytes(data))
    with pytest.raises(L.SegmentError, match="CRC32"):
        cols.read_segment(0, s)
    cols.read_segment(0, s, crc=False)  # the damage is only visible to the CRC
    cols.close()


@pytest.mark.parametrize("other", ["format/GT#1", "format/DP#0", "position"])
def test_misplaced_segment_fails_preamble(tmp_path, other):
    """A reference pointing at another array's or block's segment is refused, not decoded."""
    _, cols = _small_cache(tmp_path, {"*": "zstd-1"})
    names = cols.meta["segments"]
    s, t = names.index("format/GT#0"), names.index(other)
    cols.offsets[0, s], cols.lengths[0, s] = cols.offsets[0, t], cols.lengths[0, t]
    with pytest.raises(L.SegmentError, match="preamble says"):
        cols.read_segment(0, s)
    cols.close()
