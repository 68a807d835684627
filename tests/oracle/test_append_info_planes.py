"""Appending to a store whose INFO segments were written before they were rearranged
(preamble flag 16 absent, configuration version 1): its partial last chunk is read as it
was written and completed rearranged, its INFO arrays become configuration version 3, and
the grown store is bio2zarr's conversion of the whole cohort (the oracle)."""

from __future__ import annotations

from vcfvirtual_codec import spec
from vcfvirtual_codec.columns import FLAG_INFO_PLANES, PREAMBLE

from vcfvirtual.cache import columns

from ..columns_reader import codec_versions, stored_segments
from .test_append import CHUNK, append, assert_is_the_whole, cohort, cut, first_index


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
