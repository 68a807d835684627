"""The vcfvirtual.bcf codec contract: JSON config, registries, decode errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from vcfvirtual_codec.codec import BCFRecordsCodec, BCFRecordsZarrCodec, ChunkSpec

import vcfvirtual
from vcfvirtual.errors import ChunkDecodeError, CodecConfigError

from ...conftest import chunk_bytes

# A configuration as the index writes it (format version 1), with numcodecs' "id".
CONFIG = {
    "id": "vcfvirtual.bcf",
    "array": "call_genotype",
    "kind": "genotype",
    "dtype": "|i1",
    "shape": [3, 2],
    "chunk_length": 4,
    "key": 4,
    "ploidy": 2,
    "vcf_type": "",
    "filter_columns": [],
    "layout": "raw",
    "version": 1,
    "num_records": 8,
}


def test_config_round_trips_through_json():
    codec = BCFRecordsCodec(**{k: v for k, v in CONFIG.items() if k != "id"})
    config = json.loads(json.dumps(codec.get_config()))
    assert config == CONFIG
    v3 = BCFRecordsZarrCodec.from_dict({"name": "vcfvirtual.bcf", "configuration": codec.spec.to_config()})
    assert v3.spec == codec.spec
    assert BCFRecordsZarrCodec.from_dict(v3.to_dict()) == v3


def test_codecs_resolve_in_a_fresh_process_through_entry_points():
    script = f"""
import json, sys, numcodecs
from zarr.registry import get_codec_class
codec = numcodecs.get_codec(json.loads({json.dumps(json.dumps(CONFIG))}))
print(type(codec).__module__, type(codec).__name__, get_codec_class("vcfvirtual.bcf").__name__)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["vcfvirtual_codec.codec", "BCFRecordsCodec", "BCFRecordsZarrCodec"]


def test_unknown_kind_and_newer_version_are_refused():
    with pytest.raises(ValueError, match="unknown vcfvirtual.bcf kind"):
        ChunkSpec.from_config({**CONFIG, "kind": "nonsense"})
    with pytest.raises(ValueError, match=r"pip install -U \./codec"):
        ChunkSpec.from_config({**CONFIG, "version": 99})


def test_bytes_that_are_not_whole_records_raise():
    codec = BCFRecordsCodec(**{k: v for k, v in CONFIG.items() if k != "id"})
    with pytest.raises(ChunkDecodeError):
        codec.decode(np.frombuffer(b"\xff" * 37, dtype=np.uint8))
    with pytest.raises(ChunkDecodeError):
        codec.decode(b"")


def test_encode_is_refused():
    with pytest.raises(NotImplementedError, match="read-only"):
        BCFRecordsCodec(**{k: v for k, v in CONFIG.items() if k != "id"}).encode(b"")


def test_decode_reads_only_whole_records_of_a_chunk(small_bcf, tmp_path):
    """Chunk bytes cut short by one byte are refused, not decoded into wrong values."""
    refs = tmp_path / "s.json"
    vcfvirtual.index(small_bcf, refs_path=refs, cache_path=tmp_path / "s.cache", variants_chunk_size=3)
    doc = json.loads(refs.read_text())["refs"]
    zarray = json.loads(doc["call_genotype/.zarray"])
    codec = BCFRecordsCodec(**{k: v for k, v in zarray["filters"][0].items() if k != "id"})
    data = chunk_bytes(refs, "call_genotype/0.0.0")
    values = np.frombuffer(codec.decode(data), dtype=np.int8).reshape(3, 3, 2)
    assert values[0].tolist() == [[0, 1], [-1, -1], [1, 1]]  # 0|1 ./. 1/1 as written in bcfdata
    with pytest.raises(ChunkDecodeError):
        codec.decode(data[:-1])


def _chunk(small_bcf, tmp_path, layout, chunk_length=3, array="call_genotype"):
    refs = tmp_path / f"s.{layout}.json"
    vcfvirtual.index(
        small_bcf,
        refs_path=refs,
        cache_path=tmp_path / f"s.{layout}.cache",
        variants_chunk_size=chunk_length,
        cache_layout=layout,
        force=True,
    )
    doc = json.loads(refs.read_text())["refs"]
    zarray = json.loads(doc[f"{array}/.zarray"])
    key = f"{array}/" + ".".join("0" for _ in zarray["shape"])
    config = next(f for f in zarray["filters"] if f["id"] == "vcfvirtual.bcf")
    return chunk_bytes(refs, key), {k: v for k, v in config.items() if k != "id"}


def test_config_without_num_records_is_refused():
    """No released vcfvirtual wrote a config without num_records: it is refused by name,
    not decoded with an unchecked record count."""
    old = {k: v for k, v in CONFIG.items() if k not in ("id", "num_records")}
    with pytest.raises(CodecConfigError, match="lacks \\['num_records'\\]"):
        BCFRecordsCodec(**old)


def test_a_chunk_of_an_array_with_no_records_is_refused(small_bcf, tmp_path):
    """num_records 0 is an empty store's config (valid); no chunk of it can be decoded."""
    data, config = _chunk(small_bcf, tmp_path, "bgzf", array="variant_position")
    codec = BCFRecordsCodec(**{**config, "num_records": 0})
    with pytest.raises(ChunkDecodeError, match="has no records"):
        codec.decode(data)


@pytest.mark.parametrize("layout", ["bgzf", "raw"])
def test_chunk_with_the_wrong_record_count_is_refused(small_bcf, tmp_path, layout):
    data, config = _chunk(small_bcf, tmp_path, layout)  # 3 records of 7
    # As if the references said 4 records a chunk: 3 is neither 4 nor the last chunk's 3.
    wrong = {**config, "chunk_length": 4, "num_records": 8}
    with pytest.raises(ChunkDecodeError, match="holds 3 records, expected 4"):
        BCFRecordsCodec(**wrong).decode(data)
    # The same bytes are fine as the last chunk of a 7-record array in chunks of 4.
    BCFRecordsCodec(**{**wrong, "num_records": 7}).decode(data)


def test_integer_values_outside_the_indexed_dtype_are_refused(data_dir, tmp_path):
    """A chunk holding INFO values the array's dtype cannot hold (as when the cache is
    not what was indexed) is an error, not silently wrapped values."""
    from ... import bcfdata

    records = ["chr1\t1\t.\tA\tT\t.\t.\tDP=5\tGT\t0|1\t0|0\t1|1", "chr1\t2\t.\tA\tT\t.\t.\tDP=300\tGT\t0|1\t0|0\t1|1"]
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(records), data_dir / "dp300.bcf")
    data, config = _chunk(bcf, tmp_path, "raw", chunk_length=2, array="variant_DP")
    assert config["dtype"] == "<i2"
    assert np.frombuffer(BCFRecordsCodec(**config).decode(data), "<i2").tolist() == [5, 300]
    with pytest.raises(ChunkDecodeError, match="outside the array's int8"):
        BCFRecordsCodec(**{**config, "dtype": "|i1"}).decode(data)


def test_error_codes_are_distinct_and_explained():
    """Kernels return bare integer codes; two meanings sharing a code would mislabel errors
    (a merge once gave a new GT check the FILTER check's code)."""
    from vcfvirtual_codec import decode
    from vcfvirtual_codec.bcf import records

    codes = {name: value for name, value in vars(records).items() if name.startswith("ERR_")}
    assert len(set(codes.values())) == len(codes), codes
    assert set(records.ERROR_TEXT) == set(codes.values()), codes
    # The decode kernels use the one table: they define no codes of their own.
    assert not [name for name in vars(decode) if name.startswith("ERR_") or name == "ERROR_TEXT"]


@pytest.mark.parametrize("layout", ["bgzf", "columns"])
def test_working_buffers_kept_by_a_codec_never_reach_its_results(small_bcf, tmp_path, layout, monkeypatch):
    """A codec instance reuses the buffer it inflates (bgzf) or decompresses (columns) a
    chunk into: a chunk decoded earlier keeps its values while the same codec decodes
    others, and shares no memory with the buffers it keeps. (A columns segment this small
    decompresses into a fresh buffer: the threshold is lowered so that these use the kept one.)"""
    from vcfvirtual_codec import columns

    monkeypatch.setattr(columns, "SMALL_SEGMENT", 0)
    refs = tmp_path / f"s.{layout}.json"
    vcfvirtual.index(
        small_bcf, refs_path=refs, cache_path=tmp_path / f"s.{layout}.cache", variants_chunk_size=3, cache_layout=layout
    )
    doc = json.loads(refs.read_text())["refs"]
    zarray = json.loads(doc["call_genotype/.zarray"])
    config = next(f for f in zarray["filters"] if f["id"] == "vcfvirtual.bcf")
    codec = BCFRecordsCodec(**{k: v for k, v in config.items() if k != "id"})
    keys = sorted(k for k in doc if k.startswith("call_genotype/") and not k.split("/")[1].startswith("."))
    assert len(keys) > 1
    first = codec.decode(chunk_bytes(refs, keys[0]))
    for key in keys[1:] * 3:
        codec.decode(chunk_bytes(refs, key))
    kept = codec._scratch._free
    assert kept, "the codec keeps its working buffer"
    assert not any(np.shares_memory(first, buffer) for buffer in kept)
    values = np.frombuffer(first, dtype=np.int8).reshape(3, -1, 2)
    assert values[0].tolist()[:3] == [[0, 1], [-1, -1], [1, 1]]  # 0|1 ./. 1/1 as written in bcfdata
