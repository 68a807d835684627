"""parser: BCFParser in VirtualiZarr's parser protocol gives a ManifestStore that reads
htslib's values (pysam), and refuses remote URLs with a typed error."""

from __future__ import annotations

import numpy as np
import pysam
import pytest
import zarr
from obspec_utils.registry import ObjectStoreRegistry
from virtualizarr.manifests import ManifestStore

import vcfvirtual
from vcfvirtual.errors import VcfVirtualError


def test_parser_store_reads_htslibs_positions_and_genotypes(small_bcf, tmp_path):
    parser = vcfvirtual.BCFParser(cache_path=tmp_path / "c.cache", variants_chunk_size=3)
    store = parser(f"file://{small_bcf}", ObjectStoreRegistry())  # a registry reaching nothing: the cache is local
    assert isinstance(store, ManifestStore)
    assert (tmp_path / "c.cache").is_file()
    group = zarr.open_group(store, mode="r", zarr_format=3)
    with pysam.VariantFile(str(small_bcf)) as vf:
        records = list(vf)
        samples = list(vf.header.samples)
    assert group["variant_position"][:].tolist() == [r.pos for r in records]
    gt = group["call_genotype"][:]
    for i, r in enumerate(records):
        for j, s in enumerate(samples):
            alleles = r.samples[s].get("GT") if "GT" in r.format else None
            expected = [-1 if a is None else a for a in (alleles or ())]
            got = [int(x) for x in gt[i, j] if x != -2]
            assert got == (expected or [-1] * len(got)), (r.pos, s)
    assert np.asarray(group["sample_id"][:]).tolist() == samples


@pytest.mark.parametrize("url", ["s3://bucket/x.bcf", "https://host/x.bcf"])
def test_remote_urls_are_a_typed_error(url):
    with pytest.raises(VcfVirtualError) as e:
        vcfvirtual.BCFParser()(url, ObjectStoreRegistry())
    assert e.value.path == url and "local BCFs only" in e.value.problem
