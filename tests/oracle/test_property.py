"""Property test: hypothesis-generated VCFs, as BCF, read the same through vcfvirtual as
through bio2zarr (the generator bio2zarr itself is tested with), on every cache layout:
each example is indexed once per layout (columns: samples blocks of 2, so up to 3
samples make a narrower last block) and compared with the one bio2zarr conversion."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pysam
from hypothesis import HealthCheck, assume, given, settings
from hypothesis_vcf import vcf

from ..bcfdata import bcftools
from ..conftest import CACHE_LAYOUTS, bio2zarr_convert, differences_from_bio2zarr, layout_options, open_both, snapshot


def _bcf_from_text(text: str, work: Path) -> Path | None:
    (work / "in.vcf").write_text(text)
    bcf = work / "in.bcf"
    try:
        bcftools("sort", "-T", work / "sort-tmp", "-Ob", "-o", bcf, work / "in.vcf")
        bcftools("index", "-f", bcf)
    except pysam.utils.SamtoolsError:
        return None
    return bcf


_HEALTH = [HealthCheck.too_slow, HealthCheck.filter_too_much]
# The suite runs a fixed, derandomized set of examples so its run time is stable;
# VCFVIRTUAL_HYPOTHESIS=deep explores 300 fresh examples.
settings.register_profile(
    "suite", max_examples=12, derandomize=True, database=None, deadline=None, suppress_health_check=_HEALTH
)
settings.register_profile("deep", max_examples=300, deadline=None, suppress_health_check=_HEALTH)
PROFILE = os.environ.get("VCFVIRTUAL_HYPOTHESIS", "suite")


# Positions stop short of 2^31 - 1: there bio2zarr's region_index max-end wraps around in
# int32 arithmetic, while ours saturates (tested in test_regions.py).
@settings(settings.get_profile(PROFILE))
@given(vcf_string=vcf(max_pos=2**31 - 1000, max_variants=6, max_samples=3, max_info_fields=3, max_format_fields=3))
def test_generated_vcfs_match_bio2zarr(vcf_string):
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bcf = _bcf_from_text(vcf_string, work)
        assume(bcf is not None)  # htslib refuses some generated text; nothing to compare
        try:
            ref = snapshot(bio2zarr_convert(bcf, work / "ref.vcz", 2))  # read once, compared six times
        except Exception:
            assume(False)  # the oracle cannot convert it
        for layout in CACHE_LAYOUTS:
            for ds in open_both(bcf, 2, work, **layout_options(layout)):
                problems = differences_from_bio2zarr(ds, ref)
                assert not problems, f"{layout} layout:\n" + "\n".join(problems) + "\n" + vcf_string
