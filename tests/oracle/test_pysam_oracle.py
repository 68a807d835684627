"""Values read through vcfvirtual equal what htslib itself (via pysam) reads, on every cache
layout (columns: samples blocks of 2 for the 3-sample file, 7 for the 120-sample cohort)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pysam
import pytest

from ..conftest import layout_options, open_both


def pysam_expectation(bcf):
    """Per-record facts as pysam reads them, in VCF Zarr conventions."""
    return _pysam_expectation(str(bcf), Path(bcf).stat().st_mtime_ns)


@functools.cache  # read once per file, not once per cache layout (the files are the session's)
def _pysam_expectation(bcf: str, mtime_ns: int):
    with pysam.VariantFile(bcf) as vf:
        contigs = list(vf.header.contigs)
        samples = list(vf.header.samples)
        rows = []
        for rec in vf:
            gts, phased = [], []
            for s in samples:
                call = rec.samples[s]
                gt = call.get("GT") if "GT" in rec.format else None
                gts.append([-1 if a is None else a for a in gt] if gt is not None else None)
                phased.append(call.phased)
            rows.append(
                dict(
                    contig=contigs.index(rec.chrom),
                    pos=rec.pos,
                    rlen=rec.rlen,
                    id=rec.id or ".",
                    alleles=list(rec.alleles),
                    qual=rec.qual,
                    filters=list(rec.filter.keys()),
                    gts=gts,
                    phased=phased,
                )
            )
    return contigs, samples, rows


@pytest.mark.parametrize("which", ["small", "cohort"])
def test_values_match_pysam(which, small_bcf, cohort_bcf, tmp_path, cache_layout):
    bcf = small_bcf if which == "small" else cohort_bcf
    contigs, samples, rows = pysam_expectation(bcf)
    for ds in open_both(bcf, 64, tmp_path, **layout_options(cache_layout, 2 if which == "small" else 7)):
        assert ds["contig_id"].values.tolist() == contigs
        assert ds["sample_id"].values.tolist() == samples
        filter_ids = ds["filter_id"].values.tolist()
        assert filter_ids[0] == "PASS"
        v = {name: ds[name].values for name in ds.data_vars if "variants" in ds[name].dims}
        assert v["variant_position"].shape[0] == len(rows)
        for i, r in enumerate(rows):
            assert v["variant_contig"][i] == r["contig"]
            assert v["variant_position"][i] == r["pos"]
            assert v["variant_length"][i] == r["rlen"]
            assert v["variant_id"][i] == r["id"]
            assert v["variant_id_mask"][i] == (r["id"] == ".")
            alleles = v["variant_allele"][i].tolist()
            assert alleles[: len(r["alleles"])] == r["alleles"]
            assert all(a == "" for a in alleles[len(r["alleles"]) :])
            if r["qual"] is None:
                assert np.asarray(v["variant_quality"][i]).view(np.uint32) == 0x7F800001
            else:
                assert v["variant_quality"][i] == np.float32(r["qual"])
            assert [filter_ids[j] for j in np.nonzero(v["variant_filter"][i])[0]] == r["filters"]
            gt = v["call_genotype"][i]
            # A record's calls at once (sample by sample cost ~10 s of the cohort's
            # 180,000 calls): pysam's alleles then -2 padding, -1 throughout where pysam
            # has no GT; the phase of every call of two or more alleles, unphased where none.
            width = gt.shape[1]
            calls = r["gts"]
            want = [[-1] * width if call is None else call + [-2] * (width - len(call)) for call in calls]
            assert np.array_equal(gt, np.array(want, dtype=gt.dtype).reshape(gt.shape)), (i, gt.tolist(), want)
            phased = v["call_genotype_phased"][i]
            absent = np.array([call is None for call in calls], bool)
            several = np.array([call is not None and len(call) > 1 for call in calls], bool)
            assert not phased[absent].any(), i
            assert np.array_equal(phased[several], np.array(r["phased"], bool)[several]), i
            assert (v["call_genotype_mask"][i] == (gt < 0)).all()
