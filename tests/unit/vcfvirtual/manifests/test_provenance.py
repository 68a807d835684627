"""manifests/provenance: the store's ``vcfvirtual`` attribute read back as written, and every
malformed value (hand-written here) refused as untrusted input naming the references."""

from __future__ import annotations

import copy
import json
import os

import pytest

import vcfvirtual
from vcfvirtual.errors import UntrustedReferenceError
from vcfvirtual.manifests.provenance import Provenance

from .... import bcfdata

# The attribute as the index documents it (hand-written: two sources, a columns cache).
ATTRIBUTE = {
    "sources": [
        {"path": "/data/chr1.bcf", "size": 10, "mtime_ns": 1, "digest": "ab", "digest_kind": "crc32-sampled-v2"},
        {"path": "s3://bucket/chr2.bcf", "size": 20, "mtime_ns": 2, "digest": "cd", "digest_kind": "crc32-sampled-v2"},
    ],
    "cache": {
        "url": "file:///data/c.vcz.cache.columns",
        "layout": "columns",
        "size": 30,
        "mtime_ns": 3,
        "digest": "ef",
        "digest_kind": "crc32-sampled-v2",
    },
    "variants_chunk_size": 1000,
    "zero_copy": False,
    "samples_chunk_size": 10000,
    "fields": {"rename": {"INFO/filter": "filter_info"}, "omitted": ["FORMAT/PL"]},
    "dimensions": {"alleles": 3, "fields": {"INFO/AF": 2, "FORMAT/AD": 3}, "ploidy": 2},
    "scan": {
        "chunk_length": 1000,
        "records": 2500,
        "pos_range": [12, 99000],
        "rlen_range": [1, 40],
        "max_alleles": 3,
        "max_ploidy": 2,
        "info_stats": [[0, 9223372036854775807, -9223372036854775808], [2, 0, 120]],
        "format_stats": [[1, -1, 7], [0, 9223372036854775807, -9223372036854775808]],
    },
}


def test_the_attribute_reads_as_written_and_writes_back_key_for_key():
    provenance = Provenance.from_json(copy.deepcopy(ATTRIBUTE), "r.json")
    assert provenance.cache.url == "file:///data/c.vcz.cache.columns"
    assert provenance.cache.layout == "columns" and provenance.cache.size == 30
    assert [s.path for s in provenance.sources] == ["/data/chr1.bcf", "s3://bucket/chr2.bcf"]
    assert provenance.sources[1].fingerprint is not None and provenance.sources[1].fingerprint.size == 20
    assert (provenance.variants_chunk_size, provenance.samples_chunk_size, provenance.zero_copy) == (1000, 10000, False)
    assert provenance.dimensions is not None and provenance.dimensions.ploidy == 2
    assert dict(provenance.dimensions.fields) == {"INFO/AF": 2, "FORMAT/AD": 3}
    assert provenance.scan is not None and (provenance.scan.records, provenance.scan.pos_range) == (2500, (12, 99000))
    assert provenance.scan.info_stats[1] == (2, 0, 120)
    # Same keys, same order: references written before the dataclass stay byte for byte.
    assert json.dumps(provenance.to_json()) == json.dumps(ATTRIBUTE)


def test_an_indexed_store_reads_back_its_own_attribute(tmp_path):
    bcf = bcfdata.small_bcf(tmp_path / "s.bcf")
    refs = tmp_path / "s.vcz.json"
    vcfvirtual.index(bcf, refs_path=refs, cache_layout="bgzf", variants_chunk_size=3)
    attrs = json.loads(json.loads(refs.read_text())["refs"][".zattrs"])
    provenance = Provenance.from_attributes(attrs, refs)
    assert provenance.cache.url == "file://" + os.path.abspath(tmp_path / "s.bcf.vcz.cache.bcf")
    assert (
        provenance.cache.layout == "bgzf" and provenance.cache.size == (tmp_path / "s.bcf.vcz.cache.bcf").stat().st_size
    )
    assert [s.path for s in provenance.sources] == [os.path.abspath(bcf)]
    assert provenance.variants_chunk_size == 3 and provenance.samples_chunk_size is None
    assert json.dumps(provenance.to_json()) == json.dumps(attrs["vcfvirtual"])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda a: a.clear() or a.update(x=1), "names no cache URL"),
        (lambda a: a["cache"].pop("url"), "names no cache URL"),
        (lambda a: a["cache"].update(size="30"), "cache size '30' is not a byte count"),
        (lambda a: a["cache"].update(size=-1), "cache size -1 is not a byte count"),
        (lambda a: a["cache"].update(layout="zip"), "cache layout 'zip' is none of"),
        (lambda a: a.update(sources={"path": "x"}), "recorded sources are not a list of paths"),
        (lambda a: a["sources"][0].update(size=True), "source /data/chr1.bcf size True is not a byte count"),
        (lambda a: a.update(variants_chunk_size=1.5), "variants_chunk_size 1.5 is not a count"),
        (lambda a: a.update(samples_chunk_size="all"), "samples_chunk_size 'all' is not a count"),
        (lambda a: a.update(fields=["INFO/DP"]), "recorded field choice is not a JSON object"),
        (lambda a: a["dimensions"].update(alleles=None), "recorded dimensions"),
        (lambda a: a["dimensions"]["fields"].update({"INFO/AF": "2"}), "recorded dimensions"),
        (lambda a: a["scan"].update(chunk_length=0), "recorded scan"),
        (lambda a: a["scan"].update(records=-5), "recorded scan"),
        (lambda a: a["scan"].update(pos_range=[1]), "recorded scan"),
        (lambda a: a["scan"]["info_stats"].append([1, 2]), "recorded scan"),
        (lambda a: a.update(scan=[]), "recorded scan"),
    ],
)
def test_a_malformed_attribute_is_untrusted_and_names_the_references(change, problem):
    value = copy.deepcopy(ATTRIBUTE)
    change(value)
    with pytest.raises(UntrustedReferenceError, match=problem) as e:
        Provenance.from_json(value, "shared/r.json")
    assert e.value.path == "shared/r.json"


def test_a_value_that_is_no_object_or_is_missing_is_untrusted():
    with pytest.raises(UntrustedReferenceError, match="not a JSON object"):
        Provenance.from_json([ATTRIBUTE], "r.json")
    with pytest.raises(UntrustedReferenceError, match="no vcfvirtual attribute"):
        Provenance.from_attributes({"vcf_zarr_version": "0.3"}, "r.json")
