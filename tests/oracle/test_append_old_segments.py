"""Appending to a store whose cache was written before issue 24's encodings (segment
format "VVS2": plain positions, GT in Blosc lz4 frames): its partial last chunk is read
as it was written and completed in the new format, and the grown store is bio2zarr's
conversion of the whole cohort (the oracle), old chunks and new."""

from __future__ import annotations

import json

import xarray as xr
from numcodecs import Blosc, Zstd
from vcfvirtual_codec import columns as codec_columns
from vcfvirtual_codec import spec

import vcfvirtual
from vcfvirtual.cache import columns

from ..conftest import assert_matches_bio2zarr, bio2zarr_convert
from .test_append import CHUNK, append, assert_is_the_whole, cohort, cut, first_index


def old_writer(monkeypatch) -> None:
    """The index as it wrote caches before: magic VVS2, positions and INFO plain (INFO
    arrays configuration version 1), GT lz4 level 9."""
    monkeypatch.setattr(codec_columns, "MAGIC", b"VVS2")
    monkeypatch.setattr(columns, "FLAG_POSITION_DELTA", 0)
    monkeypatch.setattr(columns, "FLAG_INFO_PLANES", 0)
    monkeypatch.setattr(spec, "INFO_SEGMENT_VERSION", 1)
    monkeypatch.setattr(
        columns, "COMPRESSORS", {"blosc": Blosc(cname="lz4", clevel=9, shuffle=Blosc.BITSHUFFLE), "zstd": Zstd(1)}
    )


def magics(refs, array: str) -> list[bytes]:
    doc = json.loads(refs.read_text())
    out = []
    for key, value in sorted(doc["refs"].items()):
        if key.startswith(array + "/") and isinstance(value, list):
            path = value[0].replace("{{cache}}", doc["templates"]["cache"]).removeprefix("file://")
            with open(path, "rb") as f:
                f.seek(value[1])
                out.append(f.read(4))
    return out


def test_an_old_store_grows_into_the_new_format(tmp_path, monkeypatch):
    whole, (old, new) = cut(cohort(700), [500], tmp_path, "old")  # the old store's last chunk: 200 of 300
    with monkeypatch.context() as m:
        old_writer(m)
        refs, _ = first_index(old, tmp_path)
    assert set(magics(refs, "variant_position")) == {b"VVS2"}
    store = append(new, refs)
    kinds = magics(refs, "variant_position")
    assert kinds[: 500 // CHUNK] == [b"VVS2"] * (500 // CHUNK)  # the whole old chunks, as they were
    assert set(kinds[500 // CHUNK :]) == {b"VVS3"}  # the completed chunk and the new ones
    assert_is_the_whole(store, refs, whole, tmp_path)


def test_an_old_store_opens_and_reads_as_bio2zarr(tmp_path, monkeypatch):
    """A cache written before (VVS2 throughout, its last chunk included) is still opened
    (open_store reads the last chunk's record count from a preamble of either format) and
    read as bio2zarr's conversion."""
    whole, _ = cut(cohort(400), [310], tmp_path, "old")
    with monkeypatch.context() as m:
        old_writer(m)
        refs, _ = first_index(whole, tmp_path)
    assert set(magics(refs, "variant_position")) == {b"VVS2"}
    ref = bio2zarr_convert(whole, tmp_path / "ref.vcz", CHUNK)
    assert_matches_bio2zarr(xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False), ref)
