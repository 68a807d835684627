"""Importing the codec loads what every read needs, and nothing only some layouts or arrays
need: those modules are imported by the first chunk that needs them, in a fresh process
(every reader of a store is one), and the chunk still decodes to the records' values."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import vcfvirtual

from ...conftest import chunk_bytes

# Each imported by the first chunk (or config) that needs it, never by the codec's import.
GENOTYPES = ("vcfvirtual_codec._kernels.genotypes",)  # the GT arrays' kernel
LOCAL_ALLELES = ("vcfvirtual_codec.local_alleles",)  # call_LA, call_LAD, call_LPL
# The raw and bgzf layouts' decoder, with every kernel it decodes records with.
RECORDS_LAYOUTS = ("vcfvirtual_codec.decode", "vcfvirtual_codec._kernels.records", *GENOTYPES, *LOCAL_ALLELES)
BGZF_LAYOUT = ("vcfvirtual_codec.bcf.bgzf", "vcfvirtual_codec._kernels.bgzf", "deflate")
LAZY = (
    *RECORDS_LAYOUTS,
    *BGZF_LAYOUT,
    "vcfvirtual_codec._kernels.gt_bits",  # packed GT blocks (columns)
    "vcfvirtual_codec._kernels.info_planes",  # rearranged INFO segments (columns)
)

# In a fresh process: the lazy modules loaded after importing the codec, after decoding a
# variant_position chunk, then after a call_genotype chunk; and the two chunks' values.
SCRIPT = """
import json, sys
import numpy as np
lazy, arrays = json.loads(sys.argv[1]), json.loads(sys.argv[2])
loaded = lambda: [m for m in lazy if m in sys.modules]
from vcfvirtual_codec.codec import BCFRecordsCodec
report = {"import": loaded()}
for name, (config, path, dtype) in arrays.items():
    with open(path, "rb") as f:
        values = np.frombuffer(BCFRecordsCodec(**config).decode(f.read()), dtype)
    report[name] = [loaded(), values.tolist()]
print(json.dumps(report))
"""


def _first_chunk(refs, tmp_path, name: str) -> tuple[dict, str, str]:
    """(codec configuration, file holding the array's first chunk, dtype) of ``name``."""
    doc = json.loads(refs.read_text())["refs"]
    zarray = json.loads(doc[f"{name}/.zarray"])
    config = next({k: v for k, v in f.items() if k != "id"} for f in zarray["filters"] if f["id"] == "vcfvirtual.bcf")
    key = f"{name}/" + ".".join("0" * len(zarray["shape"]))
    path = tmp_path / f"{name}.chunk"
    path.write_bytes(chunk_bytes(refs, key))
    return config, str(path), zarray["dtype"]


@pytest.mark.parametrize("layout", ["columns", "raw", "bgzf"])
def test_a_fresh_codec_import_loads_no_layout_or_array_specific_module(small_bcf, tmp_path, layout):
    refs = tmp_path / f"small.{layout}.json"
    vcfvirtual.index(
        small_bcf, refs_path=refs, cache_path=tmp_path / f"small.{layout}.cache", variants_chunk_size=3,
        cache_layout=layout,
    )  # fmt: skip
    arrays = {name: _first_chunk(refs, tmp_path, name) for name in ("variant_position", "call_genotype")}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(LAZY), json.dumps(arrays)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["import"] == []
    # What each chunk needed, and nothing else: the records layouts' decoder (and the BGZF
    # inflate for bgzf alone) from the first chunk; in the columns layout, the genotype
    # kernel for GT alone (these calls mix phased and unphased: the block holds BCF's GT
    # bytes, which the kernel decodes, not alleles to unpack).
    records = RECORDS_LAYOUTS + (BGZF_LAYOUT if layout == "bgzf" else ()) if layout != "columns" else ()
    loaded, positions = report["variant_position"]
    assert sorted(loaded) == sorted(records)
    # chr1:100, 200, 250: the first three records of tests/bcfdata.py SMALL_RECORDS.
    assert positions == [100, 200, 250]
    loaded, genotypes = report["call_genotype"]
    assert sorted(loaded) == sorted(set(records + GENOTYPES))
    # 0|1 ./. 1/1; 0/2 1/. 2|2; 0/0 0|0 ./. as written there.
    assert genotypes == [0, 1, -1, -1, 1, 1, 0, 2, 1, -1, 2, 2, 0, 0, 0, 0, -1, -1]
