"""Appending to a store whose INFO segments were written before they were rearranged
(preamble flag 16 absent, configuration version 1): its partial last chunk is read as it
was written and completed rearranged, its INFO arrays become configuration version 3, and
the grown store is bio2zarr's conversion of the whole cohort (the oracle)."""

from __future__ import annotations

import xarray as xr
from vcfvirtual_codec import spec
from vcfvirtual_codec.columns import FLAG_INFO_PLANES, PREAMBLE

import vcfvirtual
from vcfvirtual.cache import columns

from .. import bcfdata
from ..columns_reader import codec_versions, stored_segments
from ..conftest import assert_matches_bio2zarr, bio2zarr_convert
from .test_append import (
    CHUNK,
    append,
    assert_is_the_whole,
    cohort,
    cut,
    first_index,
    header_and_records,
    pysam_header_text,
)


def info_flags(refs, array: str) -> tuple[list[int], int]:
    """Each chunk's preamble flags (in chunk order) and the array's configuration version."""
    return [PREAMBLE.unpack_from(seg)[2] for seg in stored_segments(refs, array)], codec_versions(refs)[array]


def test_a_store_of_plain_info_segments_grows_rearranged(tmp_path, monkeypatch):
    whole, (old, new) = cut(cohort(700), [500], tmp_path, "old")  # the old store's last chunk: 200 of 300
    with monkeypatch.context() as m:
        m.setattr(columns, "FLAG_INFO_PLANES", 0)
        m.setattr(spec, "INFO_SEGMENT_VERSION", 1)
        refs, _ = first_index(old, tmp_path)
    assert info_flags(refs, "variant_DP") == ([0] * -(-500 // CHUNK), 1)
    store = append(new, refs)
    flags, version = info_flags(refs, "variant_DP")
    whole_old = 500 // CHUNK
    assert flags[:whole_old] == [0] * whole_old  # the whole old chunks, as they were
    assert set(flags[whole_old:]) == {FLAG_INFO_PLANES} and version == 3  # the completed chunk and the new ones
    assert_is_the_whole(store, refs, whole, tmp_path)


def test_a_store_of_plain_info_segments_appended_no_records_keeps_version_1(tmp_path, monkeypatch):
    """A header-only file appended to a store of plain INFO segments: no chunk is written,
    so every INFO segment is still plain and the rewritten references mark its INFO arrays
    version 1 as before (a codec that reads up to version 2 opens them), and read as
    bio2zarr's conversion of the old file (the oracle)."""
    whole, (old, new) = cut(cohort(400), [310], tmp_path, "old")
    with monkeypatch.context() as m:
        m.setattr(columns, "FLAG_INFO_PLANES", 0)
        m.setattr(spec, "INFO_SEGMENT_VERSION", 1)
        refs, _ = first_index(old, tmp_path)
    before = codec_versions(refs)
    header, _ = header_and_records(pysam_header_text(old))
    append(bcfdata.write_bcf(header, tmp_path / "empty.bcf"), refs)
    flags, version = info_flags(refs, "variant_DP")
    assert set(flags) == {0} and version == 1
    assert codec_versions(refs) == before
    with monkeypatch.context() as m:
        m.setattr(spec, "FORMAT_VERSION", 2)  # a codec from before INFO segments were rearranged
        ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
        assert_matches_bio2zarr(ds, bio2zarr_convert(old, tmp_path / "ref.vcz", CHUNK))
