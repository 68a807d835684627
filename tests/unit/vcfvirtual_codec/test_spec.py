"""ChunkSpec: every value a configuration may hold is checked, and the config is JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from vcfvirtual_codec.errors import CodecConfigError
from vcfvirtual_codec.spec import CODEC_ID, ChunkSpec

GENOTYPE = {
    "array": "call_genotype",
    "kind": "genotype",
    "dtype": "|i1",
    "shape": [3, 2],
    "chunk_length": 4,
    "num_records": 10,
    "key": 4,
    "ploidy": 2,
    "vcf_type": "",
    "filter_columns": [],
    "layout": "bgzf",
    "version": 1,
}
FILTER = {"array": "variant_filter", "kind": "filter", "dtype": "|b1", "shape": [3], "chunk_length": 4,
          "num_records": 10, "filter_columns": [0, -1, 2, 1]}  # fmt: skip  # IDX= out of order
INFO = {"array": "variant_DP", "kind": "info", "dtype": "<i2", "shape": [], "chunk_length": 4,
        "num_records": 10, "key": 3, "vcf_type": "Integer"}  # fmt: skip


@pytest.mark.parametrize(
    "base,change,named",
    [
        (GENOTYPE, {"kind": "nonsense"}, "kind 'nonsense'"),
        (GENOTYPE, {"layout": "zip"}, "layout 'zip'"),
        (GENOTYPE, {"version": 4}, "version 4 is newer"),
        (GENOTYPE, {"version": 2}, "config version 2 is not a 'genotype' array's ('bgzf' layout): that is 1"),
        (GENOTYPE, {"version": 3}, "config version 3 is not a 'genotype' array's ('bgzf' layout): that is 1"),
        (INFO, {"version": 3}, "config version 3 is not a 'info' array's ('raw' layout): that is 1"),
        (
            INFO,
            {"version": 2, "layout": "columns", "compressor": "zstd"},
            "config version 2 is not a 'info' array's ('columns' layout): that is 3",
        ),
        (GENOTYPE, {"version": 0}, "version is 0"),
        (GENOTYPE, {"version": True}, "version must be an integer, got True"),
        (GENOTYPE, {"chunk_length": 0}, "chunk_length is 0"),
        (GENOTYPE, {"chunk_length": 2.5}, "chunk_length must be an integer, got 2.5"),
        (GENOTYPE, {"chunk_length": "4"}, "chunk_length must be an integer, got '4'"),
        (GENOTYPE, {"chunk_length": 2**40}, f"chunk_length is {2**40}"),
        (GENOTYPE, {"num_records": -1}, "num_records is -1"),
        (GENOTYPE, {"num_records": -6}, "num_records is -6"),
        (GENOTYPE, {"key": -2}, "key is -2"),
        (GENOTYPE, {"key": -1}, "needs GT's key"),
        (GENOTYPE, {"ploidy": 0}, "ploidy 0"),
        (GENOTYPE, {"ploidy": 3}, "does not end in the ploidy 3"),
        (GENOTYPE, {"shape": [-3, 2]}, "shape is -3"),
        (GENOTYPE, {"shape": "3"}, "shape and filter_columns must be lists"),
        (GENOTYPE, {"shape": [3]}, "shape [3] has rank 1"),
        (GENOTYPE, {"shape": [2**24, 2]}, "16777216 samples"),
        (GENOTYPE, {"dtype": "<f8"}, "dtype '<f8'"),
        (GENOTYPE, {"dtype": 8}, "dtype and vcf_type must be strings"),
        (GENOTYPE, {"vcf_type": "Integer"}, "takes no vcf_type, got 'Integer'"),
        (GENOTYPE, {"filter_columns": [0]}, "takes no filter_columns"),
        (GENOTYPE, {"array": 5}, "array name 5"),
        (FILTER, {"filter_columns": [0, 3]}, "filter_columns [0, 3] name a column past the 3 filters"),
        (FILTER, {"filter_columns": [-2]}, "filter_columns is -2"),
        # Issue 21 item 6: maps no header gives, which decoded a wrong variant_filter.
        (FILTER, {"filter_columns": [0, 1, 1]}, "name column(s) [1] for more than one FILTER key"),
        (FILTER, {"filter_columns": [0, -1, 2]}, "name no FILTER key for column(s) [1]"),
        (FILTER, {"filter_columns": [0, 1]}, "name no FILTER key for column(s) [2]"),
        (FILTER, {"key": 1}, "takes no dictionary key, got 1"),
        (FILTER, {"ploidy": 2}, "takes no ploidy, got 2"),
        (INFO, {"key": -1}, "needs its dictionary key"),
        (INFO, {"vcf_type": "Nonsense"}, "vcf_type 'Nonsense'"),
        (INFO, {"vcf_type": "Float"}, "dtype '<i2'"),
        (INFO, {"shape": [2, 2]}, "has rank 2"),
        ({**INFO, "kind": "format", "shape": [3]}, {"vcf_type": "Flag", "dtype": "|b1"}, "'Flag' is not a FORMAT"),
        (
            {**GENOTYPE, "kind": "allele", "dtype": "str", "key": -1, "ploidy": 0},
            {"shape": [2**16]},
            "65536 alleles",
        ),  # fmt: skip
    ],
)
def test_each_bad_value_is_a_config_error_naming_it(base, change, named):
    with pytest.raises(CodecConfigError) as e:
        ChunkSpec.from_config({**base, **change})
    assert named in str(e.value)
    assert isinstance(e.value, ValueError)  # what numcodecs and zarr expect of a bad config


def test_the_base_configs_are_valid():
    for config in (GENOTYPE, FILTER, INFO):
        ChunkSpec.from_config(config)


def test_config_shape_problems_outside_the_values():
    with pytest.raises(CodecConfigError, match="is a JSON object, got list"):
        ChunkSpec.from_config([])  # type: ignore[arg-type]  # the refusal of a non-dict is what is tested
    with pytest.raises(CodecConfigError, match=r"unknown vcfvirtual.bcf config keys \['source'\]"):
        ChunkSpec.from_config({**GENOTYPE, "source": "x.bcf"})
    for key in ("array", "kind", "dtype", "shape", "chunk_length", "num_records"):
        with pytest.raises(CodecConfigError, match=f"lacks \\['{key}'\\]"):
            ChunkSpec.from_config({k: v for k, v in GENOTYPE.items() if k != key})


@pytest.mark.parametrize("config", [GENOTYPE, FILTER, INFO], ids=["genotype", "filter", "info"])
def test_config_round_trips_through_json(config):
    spec = ChunkSpec.from_config({"id": CODEC_ID, **config})
    again = ChunkSpec.from_config(json.loads(json.dumps(spec.to_config())))
    assert again == spec
    assert isinstance(spec.shape, tuple) and isinstance(spec.filter_columns, tuple)
    assert {k: v for k, v in spec.to_config().items() if k in config} == config


def test_numcodecs_get_codec_in_a_fresh_process():
    """A process that never imports vcfvirtual_codec resolves the codec id through the
    entry point and gets the same configuration back."""
    config = {"id": CODEC_ID, **GENOTYPE}
    script = (
        "import json, sys, numcodecs\n"
        "codec = numcodecs.get_codec(json.loads(sys.argv[1]))\n"
        "print(json.dumps([type(codec).__module__, type(codec).__name__, codec.get_config()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, json.dumps(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    module, name, got = json.loads(done.stdout)
    assert (module, name) == ("vcfvirtual_codec.codec", "BCFRecordsCodec")
    assert got == config


# The columns layout: a samples block of call_genotype, and a variants-only array.
COLUMNS_GT = {**GENOTYPE, "layout": "columns", "samples_chunk_size": 2, "compressor": "blosc"}
COLUMNS_INFO = {**INFO, "layout": "columns", "compressor": "zstd"}


@pytest.mark.parametrize(
    "base,change,named",
    [
        (COLUMNS_GT, {"samples_chunk_size": 0}, "samples_chunk_size 0 is outside [1, 3]"),
        (COLUMNS_GT, {"samples_chunk_size": 4}, "samples_chunk_size 4 is outside [1, 3]"),
        (COLUMNS_GT, {"samples_chunk_size": -1}, "samples_chunk_size is -1"),
        (COLUMNS_GT, {"samples_chunk_size": 2**24}, "samples_chunk_size is 16777216"),
        (COLUMNS_GT, {"samples_chunk_size": True}, "samples_chunk_size must be an integer, got True"),
        (COLUMNS_GT, {"samples_chunk_size": 1.5}, "samples_chunk_size must be an integer, got 1.5"),
        (COLUMNS_GT, {"compressor": ""}, "compressor '' is not one of ('zstd', 'blosc')"),
        (COLUMNS_GT, {"compressor": "gzip"}, "compressor 'gzip' is not one of"),
        (COLUMNS_GT, {"compressor": 1}, "compressor must be a string, got 1"),
        (COLUMNS_INFO, {"samples_chunk_size": 2}, "samples_chunk_size 2 is only for sample arrays"),
        (GENOTYPE, {"samples_chunk_size": 2}, "samples_chunk_size 2 is only for sample arrays in the columns"),
        (GENOTYPE, {"compressor": "zstd"}, "compressor 'zstd' is only for the columns layout, not 'bgzf'"),
    ],
)
def test_each_bad_columns_value_is_a_config_error_naming_it(base, change, named):
    with pytest.raises(CodecConfigError) as e:
        ChunkSpec.from_config({**base, **change})
    assert named in str(e.value)
    assert isinstance(e.value, ValueError)


def test_columns_configs_round_trip_and_others_stay_unchanged():
    for config in (COLUMNS_GT, COLUMNS_INFO):
        spec = ChunkSpec.from_config(config)
        assert ChunkSpec.from_config(json.loads(json.dumps(spec.to_config()))) == spec
        assert {k: v for k, v in spec.to_config().items() if k in config} == config
    # A config of the other layouts is written without the new keys, as before.
    assert set(ChunkSpec.from_config(GENOTYPE).to_config()) == set(GENOTYPE)
    # Sample arrays decode one samples block per chunk; the others whole variants chunks.
    assert ChunkSpec.from_config(COLUMNS_GT).chunk_shape == (4, 2, 2)
    assert ChunkSpec.from_config(GENOTYPE).chunk_shape == (4, 3, 2)
    assert ChunkSpec.from_config(COLUMNS_INFO).chunk_shape == (4,)


def test_the_written_out_methods_are_what_a_frozen_dataclass_generates():
    """ChunkSpec writes its dataclass methods out (an import-time saving): they must behave
    as the stdlib's dataclass(frozen=True) makes them for the same fields: signature and
    defaults, repr, equality, hash, and refusing assignment and deletion."""
    import dataclasses
    import inspect

    fields = dataclasses.fields(ChunkSpec)
    made = dataclasses.make_dataclass(
        "ChunkSpec", [(f.name, f.type, dataclasses.field(default=f.default)) for f in fields], frozen=True
    )
    assert list(inspect.signature(ChunkSpec).parameters.values()) == list(inspect.signature(made).parameters.values())
    specs = [ChunkSpec.from_config(c) for c in (GENOTYPE, FILTER, INFO, COLUMNS_GT)]
    for spec in specs:
        same = made(**{f.name: getattr(spec, f.name) for f in fields})
        assert repr(spec) == repr(same)
        assert hash(spec) == hash(same)
        assert spec == ChunkSpec.from_config(spec.to_config()) and spec != same  # another class: unequal
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'kind'"):
            spec.kind = "genotype"
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'kind'"):
            del spec.kind
        assert dataclasses.replace(spec, array="other").array == "other"
    assert len({*specs, *(ChunkSpec.from_config(s.to_config()) for s in specs)}) == len(specs)
