"""refs/kerchunk: the Kerchunk v2 references a hand-built array yields, read back with
fsspec's ReferenceFileSystem and zarr (the readers the Kerchunk and Zarr v2 specs describe),
and the Parquet libraries' absence as a typed error."""

from __future__ import annotations

import base64
import json
import sys

import fsspec
import numpy as np
import pytest
import zarr
from numcodecs import VLenUTF8

from vcfvirtual.errors import VcfVirtualError
from vcfvirtual.manifests.virtual import ArrayMetadata, ChunkTable, VirtualArray, VirtualGroup, manifest_array
from vcfvirtual.refs import kerchunk

# A 5 x 2 int32 array in two chunks of 3 rows (the last one partial), stored raw
# (little-endian) in one file after a 7-byte prefix, second chunk first.
VALUES = np.arange(10, dtype="<i4").reshape(5, 2) * 1000 - 3
NAMES = ["chr1", "chrÅ/2", ""]


def _metadata(*, shape, dtype, chunk_shape, fill_value, codecs, dimension_names, attributes=None):
    return ArrayMetadata(
        shape=shape,
        dtype=dtype,
        chunk_shape=chunk_shape,
        fill_value=fill_value,
        codecs=tuple(codecs),
        attributes=attributes or {},
        dimension_names=dimension_names,
    )


def _table(grid, entries):
    """A chunk table of ``grid`` holding ``entries`` ({index: (path, offset, length)})."""
    paths = np.full(grid, "", dtype=np.dtypes.StringDType())
    offsets, lengths = np.zeros(grid, np.uint64), np.zeros(grid, np.uint64)
    for where, (path, offset, length) in entries.items():
        paths[where], offsets[where], lengths[where] = path, offset, length
    return ChunkTable(paths, offsets, lengths)


@pytest.fixture
def group(tmp_path):
    chunk0 = np.ascontiguousarray(VALUES[:3]).tobytes()
    chunk1 = np.zeros((3, 2), "<i4")
    chunk1[:2] = VALUES[3:]
    chunk1_bytes = chunk1.tobytes()
    data = tmp_path / "data.bin"
    data.write_bytes(b"PREFIX!" + chunk1_bytes + chunk0)
    url = "file://" + str(data)
    ints = VirtualArray(
        _metadata(
            shape=(5, 2),
            dtype=np.dtype("int32"),
            chunk_shape=(3, 2),
            fill_value=-1,
            codecs=[{"name": "bytes", "configuration": {"endian": "little"}}],
            attributes={"description": "ints"},
            dimension_names=("variants", "pair"),
        ),
        _table((2, 1), {(0, 0): (url, 7 + len(chunk1_bytes), len(chunk0)), (1, 0): (url, 7, len(chunk1_bytes))}),
    )
    encoded = bytes(VLenUTF8().encode(np.array(NAMES, dtype=object)))
    names = VirtualArray(
        _metadata(
            shape=(3,),
            dtype=str,
            chunk_shape=(3,),
            fill_value="",
            codecs=[{"name": "vlen-utf8"}],
            dimension_names=("contigs",),
        ),
        inline={"0": encoded},
    )
    return VirtualGroup({"ints": ints, "names": names}, {"note": "a/b", "n": 3}), data


def _read(refs, name):
    fs = fsspec.filesystem("reference", fo=refs, remote_protocol="file")
    root = zarr.open_group(fs.get_mapper(""), mode="r", zarr_format=2)
    return root[name][...], root


def test_references_read_back_through_fsspec_and_zarr(group):
    g, _ = group
    refs = kerchunk.kerchunk_refs(g)
    ints, root = _read(refs, "ints")
    np.testing.assert_array_equal(ints, VALUES)
    names, _ = _read(refs, "names")
    assert names.tolist() == NAMES
    assert dict(root.attrs) == {"note": "a/b", "n": 3}
    assert dict(root["ints"].attrs) == {"description": "ints", "_ARRAY_DIMENSIONS": ["variants", "pair"]}
    assert dict(root["names"].attrs) == {"_ARRAY_DIMENSIONS": ["contigs"]}


def test_zarray_follows_the_zarr_v2_spec(group):
    g, data = group
    refs = kerchunk.kerchunk_refs(g)["refs"]
    assert json.loads(refs[".zgroup"]) == {"zarr_format": 2}
    ints = json.loads(refs["ints/.zarray"])
    assert ints["zarr_format"] == 2
    assert (ints["shape"], ints["chunks"], ints["dtype"], ints["order"]) == ([5, 2], [3, 2], "<i4", "C")
    assert ints["compressor"] is None and ints["filters"] is None and ints["dimension_separator"] == "."
    # No fill value: the arrays carry their own sentinels, which xarray must not mask.
    assert ints["fill_value"] is None
    names = json.loads(refs["names/.zarray"])
    assert names["dtype"] == "|O" and names["filters"] == [{"id": "vlen-utf8"}]
    # Chunk keys of the Zarr v2 spec ("row.col"); a local file named by path, as Kerchunk does.
    assert refs["ints/0.0"][0] == str(data) and refs["ints/1.0"][1:] == [7, 24]
    assert refs["names/0"] == "base64:" + base64.b64encode(VLenUTF8().encode(np.array(NAMES, dtype=object))).decode()


def test_zarray_is_virtualizarrs_v2_conversion_without_the_fill_value(group):
    """Each ``.zarray`` is the text VirtualiZarr's own public conversion gives (its
    ``convert_v3_to_v2_metadata`` and ``to_kerchunk_json``), less the fill value, which
    xarray would turn into a mask, and the attributes, which are the ``.zattrs``'s."""
    import dataclasses

    from virtualizarr.utils import convert_v3_to_v2_metadata
    from virtualizarr.writers.kerchunk import to_kerchunk_json

    g, _ = group
    for array in g.arrays.values():
        marr = manifest_array(array)
        v2 = dataclasses.replace(convert_v3_to_v2_metadata(marr.metadata), fill_value=None, attributes={})
        assert kerchunk.array_refs(array)[".zarray"] == to_kerchunk_json(v2)


def test_chunks_are_virtualizarrs_manifest_entries(group):
    """The chunk references are the entries of VirtualiZarr's own ChunkManifest of each
    array (missing chunks left out, inlined ones as their bytes), in its order."""
    g, _ = group
    for array in g.arrays.values():
        refs = {k: v for k, v in kerchunk.array_refs(array).items() if not k.startswith(".z")}
        expected = {}
        for key, entry in manifest_array(array).manifest.dict().items():
            if "data" in entry:
                expected[key] = "base64:" + base64.b64encode(entry["data"]).decode()
            else:
                expected[key] = [entry["path"].removeprefix("file://"), entry["offset"], entry["length"]]
        assert list(refs.items()) == list(expected.items())


def test_missing_chunks_are_left_out(tmp_path):
    """A chunk whose path is empty (call_genotype_mask's all-False chunks) has no key: it
    reads as the fill value."""
    table = _table((3, 2), {(0, 1): ("file:///c", 5, 6), (2, 0): ("file:///c", 11, 7)})
    meta = _metadata(
        shape=(6, 4),
        dtype=np.dtype("bool"),
        chunk_shape=(2, 2),
        fill_value=False,
        codecs=[],
        dimension_names=("a", "b"),
    )
    refs = kerchunk.array_refs(VirtualArray(meta, table))
    assert {k: v for k, v in refs.items() if not k.startswith(".z")} == {"0.1": ["/c", 5, 6], "2.0": ["/c", 11, 7]}


def test_group_attributes_escape_slashes_as_virtualizarr_does(group):
    g, _ = group
    text = kerchunk.kerchunk_refs(g)["refs"][".zattrs"]
    assert text == '{"note":"a\\/b","n":3}'
    assert json.loads(text) == {"note": "a/b", "n": 3}


def test_codec_filters_keep_their_configuration(tmp_path):
    from vcfvirtual_codec.codec import CODEC_ID, ChunkSpec

    spec = ChunkSpec(array="x", kind="position", dtype="<i4", shape=(), chunk_length=4, num_records=4)
    array = VirtualArray(
        _metadata(
            shape=(4,),
            dtype=np.dtype("int32"),
            chunk_shape=(4,),
            fill_value=0,
            codecs=[
                {"name": "bytes", "configuration": {"endian": "little"}},
                {"name": CODEC_ID, "configuration": spec.to_config()},
            ],
            dimension_names=("variants",),
        ),
        _table((1,), {(0,): ("file:///c", 0, 10)}),
    )
    meta = json.loads(kerchunk.array_refs(array)[".zarray"])
    assert meta["filters"] == [{"id": CODEC_ID, **spec.to_config()}]
    assert ChunkSpec.from_config(meta["filters"][0]) == spec


def test_cache_template_names_the_cache_once(group):
    g, data = group
    url = "file://" + str(data)
    moved = kerchunk.templated_refs(
        VirtualGroup(dict(g.arrays), {"vcfvirtual": {"cache": {"url": url}}}), "s3://bucket/data.bin"
    )
    assert moved["templates"] == {"cache": "s3://bucket/data.bin"}
    assert moved["refs"]["ints/0.0"][0] == "{{cache}}"
    assert json.loads(moved["refs"][".zattrs"])["vcfvirtual"]["cache"]["url"] == "s3://bucket/data.bin"


def _without(monkeypatch, missing):
    """Make ``import missing`` fail as it does when the library is not installed: a None
    entry in sys.modules stops the import system with an ImportError."""
    for mod in list(sys.modules):
        if mod.startswith(missing + "."):
            monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, missing, None)


@pytest.mark.parametrize("missing", ["fastparquet", "kerchunk"])
def test_parquet_writer_without_its_libraries_is_a_typed_error(group, tmp_path, monkeypatch, missing):
    g, _ = group
    _without(monkeypatch, missing)
    out = tmp_path / "refs.parq"
    with pytest.raises(VcfVirtualError) as e:
        kerchunk.write_kerchunk_parquet(g, out)
    assert e.value.hint == "pip install 'vcfvirtual[parquet]'"
    assert missing in e.value.problem and str(out) in str(e.value)
    assert not out.exists()


def test_parquet_reader_without_its_libraries_is_a_typed_error(tmp_path, monkeypatch):
    from vcfvirtual.refs.open import open_store

    parquet = tmp_path / "refs.parq"
    parquet.mkdir()
    (parquet / ".zmetadata").write_text(json.dumps({"metadata": {".zgroup": '{"zarr_format":2}'}, "record_size": 10}))
    _without(monkeypatch, "fastparquet")
    with pytest.raises(VcfVirtualError) as e:
        open_store(parquet, check=False)
    assert e.value.hint == "pip install 'vcfvirtual[parquet]'"


def test_load_references_refuses_what_is_not_kerchunk(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(VcfVirtualError, match="not a Kerchunk JSON file"):
        kerchunk.load_references(bad)
    with pytest.raises(VcfVirtualError, match="cannot read references"):
        kerchunk.load_references(tmp_path / "absent.json")
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(VcfVirtualError, match="not a Kerchunk Parquet directory"):
        kerchunk.load_references(folder)
