"""open_store checks an Icechunk repository's arrays as it checks a Kerchunk JSON's
(issue 21: "zarr.json codecs"): each array's zarr.json against its codec, the header and
the other arrays. A repository is edited as anyone with write access could: a commit on
main adding or replacing arrays. The unedited repository reads htslib's (pysam's) values.
"""

from __future__ import annotations

import pysam
import pytest
import xarray as xr

import vcfvirtual
from vcfvirtual.errors import UntrustedReferenceError

from .. import bcfdata

icechunk = pytest.importorskip("icechunk")
zarr = pytest.importorskip("zarr")


@pytest.fixture
def repo(tmp_path):
    bcf = bcfdata.fuzz_bcf(tmp_path / "seed.bcf")
    path = tmp_path / "seed.icechunk"
    vcfvirtual.index(
        bcf,
        refs_path=path,
        cache_path=tmp_path / "seed.cache",
        refs_format="icechunk",
        variants_chunk_size=2,
        progress=False,
    )
    return path, bcf


def edit(path, change) -> None:
    """A commit on main made by ``change(group)``."""
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    change(zarr.open_group(session.store, mode="a", zarr_format=3))
    session.commit("edited")


def test_the_unedited_repository_reads_htslibs_values(repo):
    path, bcf = repo
    ds = xr.open_zarr(vcfvirtual.open_store(path), consolidated=False)
    with pysam.VariantFile(str(bcf)) as vf:
        assert ds["variant_position"].values.tolist() == [r.pos for r in vf]


def test_an_array_the_index_did_not_write_is_refused(repo):
    path, _ = repo
    edit(path, lambda g: g.create_array("extra", shape=(3,), dtype="int8", dimension_names=["contigs"]))
    with pytest.raises(UntrustedReferenceError, match=r"arrays \['extra'\] are not arrays vcfvirtual index writes"):
        vcfvirtual.open_store(path)


def test_an_array_whose_codecs_lost_ours_is_refused(repo):
    path, _ = repo

    def replace(g):
        del g["call_DP"]
        g.create_array("call_DP", shape=(6, 3), chunks=(2, 3), dtype="int8", dimension_names=["variants", "samples"])

    edit(path, replace)
    with pytest.raises(UntrustedReferenceError, match="call_DP: its filters name no vcfvirtual.bcf codec"):
        vcfvirtual.open_store(path)
