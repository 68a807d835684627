"""local_ranges: a local-allele chunk's range spans its field's and GT's segments only
where the columns cache lays them side by side."""

from __future__ import annotations

import numpy as np
import pytest

from vcfvirtual.cache.base import ChunkRanges, SegmentRanges
from vcfvirtual.errors import VcfVirtualError
from vcfvirtual.manifests.vcf_zarr import local_ranges

ONE_PART = (("part-000000",), np.zeros(1, np.int32))


def _ranges(offsets, lengths) -> ChunkRanges:
    return ChunkRanges(np.array(offsets, np.uint64), np.array(lengths, np.uint64))


def test_segments_apart_are_refused():
    apart = SegmentRanges(
        {"format/GT": _ranges([[100]], [[10]]), "format/AD": _ranges([[50]], [[20]])}, {}, 1, *ONE_PART
    )
    with pytest.raises(VcfVirtualError, match="does not hold FORMAT/AD beside GT"):
        local_ranges(apart, "local_ad")


def test_segments_side_by_side_make_one_range():
    beside = SegmentRanges(
        {
            "format/GT": _ranges([[70, 200]], [[10, 5]]),
            "format/AD": _ranges([[50, 180]], [[20, 20]]),
            "format/PL": _ranges([[80, 205]], [[3, 4]]),
        },
        {},
        1,
        *ONE_PART,
    )
    lad = local_ranges(beside, "local_ad")
    assert lad.offsets.tolist() == [[50, 180]] and lad.lengths.tolist() == [[30, 25]]
    lpl = local_ranges(beside, "local_pl")
    assert lpl.offsets.tolist() == [[70, 200]] and lpl.lengths.tolist() == [[13, 9]]
    assert local_ranges(beside, "local_alleles") is beside.segments["format/GT"]
