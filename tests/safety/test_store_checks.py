"""open_store checks every array of the references, not only those whose ``.zarray``
names the codec where the index puts it (issue 21, items 4 and 2 of "What to build").

Each case edits references that ``vcfvirtual index`` wrote for the fuzz seed BCF (htslib
wrote it) and opens them with ``open_store``: a typed ``UntrustedReferenceError`` naming
the references is the only acceptable outcome, before any chunk is decoded. The unedited
store reads htslib's (pysam's) values, so the checks refuse nothing the index writes.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import numpy as np
import pysam
import pytest
import xarray as xr
import zarr
from numcodecs import Zstd

import vcfvirtual
from vcfvirtual.errors import UntrustedReferenceError, VcfVirtualError
from vcfvirtual.refs.checked import check_store

from .. import bcfdata

CHUNK = 2


@pytest.fixture(scope="module", params=["columns", "bgzf"])
def store(request, tmp_path_factory):
    """(references as a dict, their path, the BCF) for the seed in one cache layout."""
    work = tmp_path_factory.mktemp(f"storechecks-{request.param}")
    bcf = bcfdata.fuzz_bcf(work / "seed.bcf")
    refs = work / "seed.json"
    vcfvirtual.index(
        bcf,
        refs_path=refs,
        cache_path=work / "seed.cache",
        variants_chunk_size=CHUNK,
        cache_layout=request.param,
        force=True,
        progress=False,
    )
    return json.loads(refs.read_text()), refs, bcf


def meta(doc: dict, name: str) -> dict:
    return json.loads(doc["refs"][f"{name}/.zarray"])


def set_meta(doc: dict, name: str, value: dict) -> None:
    doc["refs"][f"{name}/.zarray"] = json.dumps(value)


def inline_strings(encoded: bytes) -> str:
    """A header string array's chunk as the index inlines it: vlen-utf8 bytes in a Zstandard
    frame (numcodecs'), base64."""
    return "base64:" + base64.b64encode(Zstd(level=7).encode(encoded)).decode()


def refused(doc: dict, path: Path, match: str) -> str:
    """open_store refuses ``doc`` (written beside the store) with a typed error matching ``match``."""
    edited = path.with_name("edited.json")
    edited.write_text(json.dumps(doc))
    with pytest.raises(UntrustedReferenceError, match=match) as e:
        xr.open_zarr(vcfvirtual.open_store(edited), consolidated=False).load()
    assert str(edited) in str(e.value)
    return str(e.value)


def test_the_unedited_store_reads_htslibs_values(store):
    doc, path, bcf = store
    ds = xr.open_zarr(vcfvirtual.open_store(path), consolidated=False)
    with pysam.VariantFile(str(bcf)) as vf:
        rows = list(vf)
        samples = list(vf.header.samples)
    assert ds["variant_position"].values.tolist() == [r.pos for r in rows]
    dp = [[-1 if r.samples[s].get("DP") is None else r.samples[s]["DP"] for s in samples] for r in rows]
    assert ds["call_DP"].values.tolist() == dp


def test_codec_removed_from_the_filters_is_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    m = meta(doc, "call_DP")
    m["filters"] = None
    set_meta(doc, "call_DP", m)
    refused(doc, path, "call_DP: its filters name no vcfvirtual.bcf codec")


def test_codec_placed_as_the_compressor_is_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    m = meta(doc, "variant_position")
    m["compressor"], m["filters"] = m["filters"][-1], None
    set_meta(doc, "variant_position", m)
    refused(doc, path, r"variant_position: its filters name no vcfvirtual.bcf codec \(it is the compressor\)")


def test_codec_named_by_a_header_array_is_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    m = meta(doc, "sample_id")
    m["filters"] = [*m["filters"], meta(doc, "variant_id")["filters"][-1]]
    set_meta(doc, "sample_id", m)
    refused(doc, path, "sample_id: .*filters")


@pytest.mark.parametrize("key", ["call_DP/zarr.json", "zarr.json", ".zmetadata", "call_DP/x/.zarray"])
def test_keys_the_index_never_writes_are_refused(store, key):
    """zarr reads a zarr.json before the checked .zarray; .zmetadata before either."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"][key] = json.dumps({"zarr_format": 3, "node_type": "array", "shape": [6, 3]})
    refused(doc, path, "which vcfvirtual never writes")


def test_an_array_the_index_did_not_write_is_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"]["extra/.zarray"] = doc["refs"]["contig_length/.zarray"]
    doc["refs"]["extra/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": ["contigs"]})
    doc["refs"]["extra/0"] = "base64:" + base64.b64encode(np.zeros(3, "<i8").tobytes()).decode()
    refused(doc, path, r"arrays \['extra'\] are not arrays vcfvirtual index writes")


def test_an_array_of_the_header_missing_is_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    for key in [k for k in doc["refs"] if k.startswith("call_QS/")]:
        del doc["refs"][key]
    refused(doc, path, r"lack arrays \['call_QS'\]")


def widen(doc: dict, name: str, axis_config: str, width: int, dim: str) -> dict:
    """``name`` made ``width`` wide on its last axis, config, metadata and dimension names
    consistent, as a careful sender would write it."""
    doc = copy.deepcopy(doc)
    m = meta(doc, name)
    config = m["filters"][-1]
    if axis_config == "append":
        config["shape"] = [*config["shape"], width]
        m["shape"], m["chunks"] = [*m["shape"], width], [*m["chunks"], width]
        attrs = json.loads(doc["refs"][f"{name}/.zattrs"])
        attrs["_ARRAY_DIMENSIONS"].append(dim)
        doc["refs"][f"{name}/.zattrs"] = json.dumps(attrs)
        doc["refs"] = {
            (f"{k}.0" if k.startswith(f"{name}/") and k[len(name) + 1].isdigit() else k): v
            for k, v in doc["refs"].items()
        }
    else:  # the ploidy axis
        config["shape"][-1] = config["ploidy"] = width
        m["shape"][-1] = m["chunks"][-1] = width
    set_meta(doc, name, m)
    return doc


def test_format_width_beyond_number_1_is_refused(store):
    """Issue item 2: call_DP (FORMAT Number=1) redeclared 20 values per call."""
    doc, path, _ = store
    problem = refused(widen(doc, "call_DP", "append", 20, "FORMAT_DP_dim"), path, "call_DP is 20 wide")
    assert "Number=1" in problem


def test_info_number_a_width_beyond_the_alleles_is_refused(store):
    doc, path, _ = store
    m = meta(doc, "variant_AF")
    edited = copy.deepcopy(doc)
    m["filters"][-1]["shape"] = [5]
    m["shape"][-1] = m["chunks"][-1] = 5
    set_meta(edited, "variant_AF", m)
    # alt_alleles is 5 long here and 2 in no other array: the width check names Number=A.
    refused(edited, path, "variant_AF is 5 wide, where Number=A with 3 alleles gives 2")


def test_genotype_mask_ploidy_beyond_the_stores_is_refused(store):
    """Issue item 1's shape: call_genotype_mask alone redeclared with ploidy 100."""
    doc, path, _ = store
    refused(widen(doc, "call_genotype_mask", "ploidy", 100, ""), path, "ploidy")


def test_ploidy_raised_everywhere_but_the_record_is_refused(store):
    doc, path, _ = store
    for name in ("call_genotype", "call_genotype_mask"):
        doc = widen(doc, name, "ploidy", 9, "")
    m = meta(doc, "call_genotype_phased")
    m["filters"][-1]["ploidy"] = 9
    set_meta(doc, "call_genotype_phased", m)
    refused(doc, path, "genotype arrays of ploidy \\[9\\], the index recorded 2")


def test_records_raised_in_one_array_are_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    m = meta(doc, "call_genotype_mask")
    m["filters"][-1]["num_records"] = m["shape"][0] = 1_000_000
    set_meta(doc, "call_genotype_mask", m)
    refused(doc, path, "call_genotype_mask")


def test_inline_segment_for_a_codec_array_is_refused(store):
    """The issue's attacks decode an inline segment: the index writes none, and inline
    bytes are outside the cache the fingerprint covers."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"]["call_DP/0.0"] = "base64:" + base64.b64encode(b"VVS2" + bytes(40)).decode()
    refused(doc, path, "call_DP has a chunk of inline data")


def test_a_missing_chunk_is_refused_not_filled(store):
    """zarr fills a missing chunk with fill_value: values that would read as data."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    del doc["refs"]["variant_position/1"]
    refused(doc, path, "variant_position has 2 chunks of its grid's 3")


def test_a_chunk_outside_the_grid_is_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"]["variant_position/7"] = doc["refs"]["variant_position/0"]
    refused(doc, path, "variant_position has 4 chunks of its grid's 3")
    del doc["refs"]["variant_position/7"]
    doc["refs"]["variant_position/1.0"] = doc["refs"].pop("variant_position/1")
    refused(doc, path, r"chunk variant_position/1\.0 is outside the array.s chunk grid \[3\]")


def test_header_array_chunk_of_the_wrong_size_is_refused(store):
    """zarr would reshape it (an untyped ValueError); the index writes each chunk whole."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"]["sample_id/0"] = inline_strings(b"\x02\x00\x00\x00\x01\x00\x00\x00A\x01\x00\x00\x00B")
    refused(doc, path, "sample_id/0 holds 2 strings, not the 3 values")


def test_a_header_array_chunk_is_checked_before_its_first_read(store):
    """open_store leaves decoding the header arrays' inline chunks (at 100,000 samples their
    names are most of an open) to each one's first read: a wrong one still never reaches a
    reader, while the other arrays read htslib's values. A chunk that is not inline data
    at all is refused at open, as before."""
    doc, path, bcf = store
    doc = copy.deepcopy(doc)
    doc["refs"]["sample_id/0"] = inline_strings(b"\x02\x00\x00\x00\x01\x00\x00\x00A\x01\x00\x00\x00B")
    edited = path.with_name("edited.json")
    edited.write_text(json.dumps(doc))
    group = zarr.open_group(vcfvirtual.open_store(edited), mode="r", zarr_format=2)
    with pysam.VariantFile(str(bcf)) as vf:
        assert group["variant_position"][:].tolist() == [r.pos for r in vf]
    for _ in range(2):  # refused at every read, not only the first
        with pytest.raises(UntrustedReferenceError, match="sample_id/0 holds 2 strings, not the 3 values"):
            group["sample_id"][:]
    # Writers building on the store (append, convert) check it all at once, as before.
    with pytest.raises(UntrustedReferenceError, match="sample_id/0 holds 2 strings, not the 3 values"):
        check_store(edited)
    with pytest.raises(UntrustedReferenceError, match="sample_id/0 holds 2 strings"):
        vcfvirtual.api.references_from(edited, "json", edited.with_name("converted.json"))
    doc["refs"]["sample_id/0"] = doc["refs"]["variant_position/0"]
    edited.write_text(json.dumps(doc))
    with pytest.raises(UntrustedReferenceError, match="sample_id/0 is not inline data"):
        vcfvirtual.open_store(edited)


def zstd_frame(payload: bytes, declared: int | None, trailing: bytes = b"") -> bytes:
    """A Zstandard frame written by hand (RFC 8878): ``payload`` as one raw block, the frame
    header declaring ``declared`` bytes (8-byte field) or, with None, no size at all."""
    head = b"\x28\xb5\x2f\xfd" + (b"\x00\x00" if declared is None else b"\xe0" + declared.to_bytes(8, "little"))
    return head + ((len(payload) << 3) | 1).to_bytes(3, "little") + payload + trailing


THREE_NAMES = b"\x03\x00\x00\x00" + b"".join(b"\x01\x00\x00\x00" + c for c in (b"A", b"B", b"C"))


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        # 1 TiB claimed by 40 bytes: refused before anything is allocated (numpy would raise
        # MemoryError, not the typed error, had the check let it through)
        (
            zstd_frame(THREE_NAMES, 1 << 40),
            r"sample_id/0's Zstandard frame claims 1099511627776 bytes from 35.*refusing to allocate",
        ),
        # no size stated: numcodecs would grow a buffer as long as the frame inflates
        (zstd_frame(THREE_NAMES, None), "sample_id/0 is not one Zstandard frame that states its decompressed size"),
        # bytes after the frame, which zarr's decoder would ignore or read as another frame
        (zstd_frame(THREE_NAMES, len(THREE_NAMES), b"\x00" * 8), "sample_id/0 is not one Zstandard frame"),
        # a size that is not the frame's: zstd refuses to decompress into it
        (zstd_frame(THREE_NAMES, 5), "sample_id/0 does not decompress"),
    ],
    ids=["claims-a-tebibyte", "no-size", "trailing-bytes", "wrong-size"],
)
def test_a_crafted_zstandard_frame_in_a_header_array_is_refused(store, frame, match):
    """The header's string arrays are inlined as Zstandard frames; the check bounds the size
    a frame claims as the codec bounds a segment's and decompresses into exactly that."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"]["sample_id/0"] = "base64:" + base64.b64encode(frame).decode()
    refused(doc, path, match)


def test_the_hand_written_frame_is_read_as_written(store):
    """The refusals above are of the frames' claims, not of hand-written frames: the same
    frame stating its true size reads the names it holds."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"]["sample_id/0"] = "base64:" + base64.b64encode(zstd_frame(THREE_NAMES, len(THREE_NAMES))).decode()
    edited = path.with_name("edited.json")
    edited.write_text(json.dumps(doc))
    group = zarr.open_group(vcfvirtual.open_store(edited), mode="r", zarr_format=2)
    assert group["sample_id"][:].tolist() == ["A", "B", "C"]


ZSTD7 = {"id": "zstd", "level": 7, "checksum": False}
VLEN = {"id": "vlen-utf8"}


@pytest.mark.parametrize(
    ("name", "filters", "compressor"),
    [
        ("sample_id", [VLEN, {"id": "zstd", "level": 1, "checksum": False}], None),
        ("sample_id", [VLEN], {"id": "blosc", "cname": "zstd", "clevel": 7, "shuffle": 0, "blocksize": 0}),
        ("sample_id", [VLEN, ZSTD7, ZSTD7], None),
        ("region_index", None, ZSTD7),
        ("region_index", [ZSTD7], None),
    ],
    ids=["other-level", "blosc", "twice", "on-integers", "on-integers-as-a-filter"],
)
def test_a_codec_the_index_does_not_write_on_a_header_array_is_refused(store, name, filters, compressor):
    """Only the header's strings are compressed, and only as the index does it: any other
    codec would reach zarr's decoders unchecked."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    m = meta(doc, name)
    m["filters"], m["compressor"] = filters, compressor
    set_meta(doc, name, m)
    refused(doc, path, rf"array {name}: codecs .* \(filters, then compressor\), the index writes")


def test_references_with_uncompressed_header_strings_still_open(store):
    """References written before the header's strings were compressed (vlen-utf8 inline,
    no compressor) are still the index's: they open and read htslib's names."""
    doc, path, bcf = store
    doc = copy.deepcopy(doc)
    for name in ("sample_id", "contig_id", "filter_id", "filter_description"):
        m = meta(doc, name)
        assert m["filters"] == [VLEN, Zstd(level=7).get_config()] and m["compressor"] is None
        m["filters"] = [VLEN]
        set_meta(doc, name, m)
        for key in [k for k in doc["refs"] if k.startswith(f"{name}/") and "/." not in k]:
            frame = base64.b64decode(doc["refs"][key].removeprefix("base64:"))
            doc["refs"][key] = "base64:" + base64.b64encode(Zstd().decode(frame)).decode()
    edited = path.with_name("edited.json")
    edited.write_text(json.dumps(doc))
    ds = xr.open_zarr(vcfvirtual.open_store(edited), consolidated=False)
    with pysam.VariantFile(str(bcf)) as vf:
        assert ds["sample_id"].values.tolist() == list(vf.header.samples)
        assert ds["contig_id"].values.tolist() == list(vf.header.contigs)
        assert ds["filter_id"].values.tolist() == list(vf.header.filters)


DEEP = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit for json.loads


@pytest.mark.parametrize("key", [".zattrs", "variant_position/.zarray", "variant_position/.zattrs"])
def test_metadata_nested_too_deep_is_refused_with_a_typed_error(store, key):
    """The standard library's json.loads raises RecursionError on such text, which no
    handler caught: open_store raised an untyped error. Now it is not JSON, typed."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"][key] = DEEP
    edited = path.with_name("edited.json")
    edited.write_text(json.dumps(doc))
    with pytest.raises(UntrustedReferenceError, match="nested deeper than Python's recursion limit") as e:
        vcfvirtual.open_store(edited)
    assert str(edited) in str(e.value)


def test_a_reference_file_nested_too_deep_is_refused_with_a_typed_error(store):
    _, path, _ = store
    edited = path.with_name("edited.json")
    edited.write_text('{"version": 1, "refs": ' + DEEP + "}")
    with pytest.raises(VcfVirtualError, match="not a Kerchunk JSON file.*nested deeper") as e:
        vcfvirtual.open_store(edited)
    assert str(edited) in str(e.value)


def test_header_array_longer_than_the_header_says_is_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    m = meta(doc, "contig_id")
    m["shape"] = [1 << 40]
    set_meta(doc, "contig_id", m)
    refused(doc, path, r"contig_id: shape \[1099511627776\], the header gives \[3\]")


@pytest.mark.parametrize(("field", "value"), [("order", "F"), ("dimension_separator", "/"), ("zarr_format", 3)])
def test_layout_fields_that_reorder_or_hide_values_are_refused(store, field, value):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    m = meta(doc, "call_genotype")
    m[field] = value
    set_meta(doc, "call_genotype", m)
    refused(doc, path, f"call_genotype: .*{field}")


def test_dimension_names_that_conflict_are_refused(store):
    """xarray raises its own ValueError on a dimension of two sizes."""
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"]["variant_filter/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": ["variants", "samples_x"]})
    doc["refs"]["variant_AF/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": ["variants", "samples_x"]})
    refused(doc, path, "dimension 'samples_x' is")


def test_references_without_recorded_dimensions_are_refused(store):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    attrs = json.loads(doc["refs"][".zattrs"])
    del attrs["vcfvirtual"]["dimensions"]
    doc["refs"][".zattrs"] = json.dumps(attrs)
    assert "re-run vcfvirtual index" in refused(doc, path, "record no dimensions")


def test_a_header_edited_to_vouch_for_wider_arrays_is_refused(store):
    """The vcf_header attribute must be the header the fingerprinted cache starts with:
    an edited Number (1 -> .) cannot make room for a widened call_DP."""
    doc, path, _ = store
    doc = widen(doc, "call_DP", "append", 20, "FORMAT_DP_dim")
    attrs = json.loads(doc["refs"][".zattrs"])
    attrs["vcf_header"] = attrs["vcf_header"].replace("ID=DP,Number=1,", "ID=DP,Number=.,")
    attrs["vcfvirtual"]["dimensions"]["fields"]["FORMAT/DP"] = 20
    doc["refs"][".zattrs"] = json.dumps(attrs)
    refused(doc, path, "starts with another header than the references' vcf_header")


@pytest.mark.parametrize("layout", ["columns", "raw"])
def test_a_store_of_no_samples_with_a_gt_header_opens(tmp_path, layout):
    """Its sample arrays have a samples axis of 0 with one chunk across it (a zarr chunk is
    never 0 wide): a complete grid, not a chunk outside it. Oracle: pysam's positions."""
    vcf = (
        Path(__file__).parents[1]
        / "data/corpus/sgkit-dev+bio2zarr/tests/data/vcf/sample_no_genotypes_with_gt_header.vcf.gz"
    )
    refs = tmp_path / "r.json"
    vcfvirtual.index(vcf, refs_path=refs, cache_path=tmp_path / "c", cache_layout=layout, variants_chunk_size=3)
    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    with pysam.VariantFile(str(vcf)) as vf:
        assert ds["variant_position"].values.tolist() == [r.pos for r in vf]
    assert ds["call_genotype"].shape[1] == 0


@pytest.mark.parametrize("value", ["5", '{"zarr_format": 3}', ["/etc/passwd", 0, 10]])
def test_a_group_that_is_not_zarr_v2s_is_refused(store, value):
    doc, path, _ = store
    doc = copy.deepcopy(doc)
    doc["refs"][".zgroup"] = value
    refused(doc, path, ".zgroup")


@pytest.mark.parametrize("layout", ["columns", "raw"])
def test_records_lowered_by_one_in_every_array_are_refused(tmp_path, layout):
    """5 records over the 6 of 3 full chunks: the codec accepts a full last chunk (it cannot
    tell which chunk it decodes), so zarr would drop the 6th record silently (the refs
    fuzzer's seed 11, case 11). The cache's last chunk holds 2 records, not 1."""
    bcf = bcfdata.fuzz_bcf(tmp_path / "seed.bcf")
    refs = tmp_path / "r.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=tmp_path / "c", cache_layout=layout, variants_chunk_size=2)
    doc = json.loads(refs.read_text())
    for key in [k for k in doc["refs"] if k.endswith("/.zarray")]:
        m = json.loads(doc["refs"][key])
        if m.get("filters") and m["filters"][-1].get("id") == "vcfvirtual.bcf":
            m["filters"][-1]["num_records"] = m["shape"][0] = 5
            doc["refs"][key] = json.dumps(m)
    refused(doc, refs, "the arrays declare 5 records, but the cache's last chunk holds 2, not 1")
