"""FORMAT Integer and Float values of every BCF width, through the columns layout's codec.

The codec decodes a sample block's values of full width in one pass per record, and falls
back to a per-value loop for a record with an end-of-vector or a value that does not fit the
array's dtype. The BCFs are written by htslib from VCF text, so that each field is stored as
int8, int16, int32 or float, with short vectors (htslib pads them with end-of-vector) and
missing values; the oracle is pysam's reading of the same BCF, as VCF Zarr and bio2zarr
encode it.
"""

from __future__ import annotations

import json

import numpy as np
import pysam
import pytest
import zarr
from vcfvirtual_codec.codec import BCFRecordsCodec
from vcfvirtual_codec.errors import ChunkDecodeError

import vcfvirtual

from ... import bcfdata

HEADER = (
    bcfdata.HEADER
    + """##FORMAT=<ID=I8,Number=2,Type=Integer,Description="int8 values">
##FORMAT=<ID=I16,Number=3,Type=Integer,Description="int16 values">
##FORMAT=<ID=I32,Number=2,Type=Integer,Description="int32 values">
##FORMAT=<ID=FV,Number=2,Type=Float,Description="float values">
"""
)
# Record 1: every vector full. Record 2: short vectors (end-of-vector padding) and missing
# values. Record 3: full vectors again, with missing values only. Samples chunks of 2 make
# a narrower last block.
RECORDS = [
    "chr1\t100\t.\tA\tT\t.\t.\t.\tGT:I8:I16:I32:FV\t0/1:1,2:300,-5,7:70000,-3:0.5,1.5\t"
    "1/1:3,4:1,2,3:1,2:2.5,3.5\t0/0:5,6:-3,0,100:-70000,4:4.5,5.5",
    "chr1\t200\t.\tA\tC\t.\t.\t.\tGT:I8:I16:I32:FV\t0/1:1:300:70000:0.5\t"
    "1/1:.,4:.,2,3:.,2:.,3.5\t0/0:5,6:-300,0:-70000,4:4.5,5.5",
    "chr1\t300\t.\tG\tT\t.\t.\t.\tGT:I8:I16:I32:FV\t0/1:.,.:.,.,.:.,.:.,.\t"
    "1/1:3,4:1,2,3:1,2:2.5,3.5\t0/0:5,6:-300,0,1000:-70000,4:4.5,5.5",
]
WIDTH = {"I8": 2, "I16": 3, "I32": 2, "FV": 2}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("format-values")
    bcf = bcfdata.write_bcf(bcfdata.vcf_text(RECORDS, header=HEADER), d / "values.bcf")
    refs = d / "values.vcz.json"
    vcfvirtual.index(
        bcf, refs_path=refs, cache_layout="columns", samples_chunk_size=2, variants_chunk_size=2, progress=False
    )
    return bcf, refs


def pysam_values(bcf, field: str) -> np.ndarray:
    """(variants, samples, width) as VCF Zarr encodes them: integers missing -1 and past a
    sample's values -2; floats as their bits, missing and past a sample's values both the
    missing NaN (0x7F800001), as bio2zarr writes a float vector's padding."""
    is_float = field == "FV"
    missing, past = (0x7F800001, 0x7F800001) if is_float else (-1, -2)
    rows = []
    with pysam.VariantFile(str(bcf)) as f:
        for rec in f:
            row = []
            for sample in rec.samples.values():
                value = sample[field]
                value = value if isinstance(value, tuple) else (value,)
                values = [missing if v is None else v for v in value]
                values = [int(np.float32(v).view(np.uint32)) if is_float and v is not missing else v for v in values]
                row.append(values + [past] * (WIDTH[field] - len(values)))
            rows.append(row)
    return np.array(rows, dtype=np.uint32 if is_float else np.int64)


@pytest.mark.parametrize("field", sorted(WIDTH))
def test_values_of_every_width_equal_htslib(store, field):
    bcf, refs = store
    got = zarr.open_group(vcfvirtual.open_store(refs), mode="r", zarr_format=2)[f"call_{field}"][:]
    expected = pysam_values(bcf, field)
    if field == "FV":
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), expected)
    else:
        assert got.dtype == {"I8": np.int8, "I16": np.int16, "I32": np.int32}[field]
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("chunk", ["0.0.0", "0.1.0", "1.1.0"], ids=["full", "short", "full-last"])
def test_a_stored_value_outside_a_narrower_dtype_is_refused_not_wrapped(store, chunk):
    """int16 values (300, -300) under a config that says int8: refused, naming the value,
    whether the record's vectors are full (one pass) or short (the per-value loop; the
    block's first record fits)."""
    _, refs = store
    references = json.loads(refs.read_text())
    meta = json.loads(references["refs"]["call_I16/.zarray"])
    config = {**meta["filters"][-1], "dtype": "|i1"}
    config.pop("id")
    url, offset, length = references["refs"][f"call_I16/{chunk}"]
    path = url.replace("{{cache}}", references["templates"]["cache"]).removeprefix("file://")  # {{cache}}/part-N
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    with pytest.raises(ChunkDecodeError, match=r"holds (-?300|1000), outside the array's int8"):
        BCFRecordsCodec(**config).decode(data)
