"""The vcfvirtual.bcf codec contract: JSON config, registries, decode errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import vcfvirtual
from vcfvirtual.codec import BCFRecordsCodec, BCFRecordsZarrCodec, ChunkSpec
from vcfvirtual.errors import ChunkDecodeError

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
    assert out.split() == ["vcfvirtual.codec", "BCFRecordsCodec", "BCFRecordsZarrCodec"]


def test_unknown_kind_and_newer_version_are_refused():
    with pytest.raises(ValueError, match="unknown vcfvirtual.bcf kind"):
        ChunkSpec.from_config({**CONFIG, "kind": "nonsense"})
    with pytest.raises(ValueError, match="upgrade vcfvirtual"):
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
    path, offset, length = doc["call_genotype/0.0.0"]
    zarray = json.loads(doc["call_genotype/.zarray"])
    codec = BCFRecordsCodec(**{k: v for k, v in zarray["filters"][0].items() if k != "id"})
    data = open(path, "rb").read()[offset : offset + length]
    values = np.frombuffer(codec.decode(data), dtype=np.int8).reshape(3, 3, 2)
    assert values[0].tolist() == [[0, 1], [-1, -1], [1, 1]]  # 0|1 ./. 1/1 as written in bcfdata
    with pytest.raises(ChunkDecodeError):
        codec.decode(data[:-1])
