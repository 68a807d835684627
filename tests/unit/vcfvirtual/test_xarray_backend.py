"""The xarray backend (registered by vcfvirtual-codec): ``engine="vcfvirtual"`` opens the
Kerchunk JSON, local or at a URL, with its cache checked by vcfvirtual.open_store when the
full package is installed and as plain references when it is not, reading htslib's
values; it claims ``.vcz.json`` names only. (Its zarr 2 and zarr 3 environments without
vcfvirtual: tests/integration/test_reader_env.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pysam
import pytest
import xarray as xr
from vcfvirtual_codec.xarray_backend import VcfVirtualBackend

import vcfvirtual
from vcfvirtual.errors import StaleCacheError

from ... import bcfdata
from ...conftest import serve_in_thread


@pytest.fixture(scope="module")
def refs(small_bcf, tmp_path_factory):
    d = tmp_path_factory.mktemp("backend")
    bcf = d / "small.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, variants_chunk_size=3, progress=False)
    return d / "small.bcf.vcz.json"


def test_engine_reads_htslib_values(refs, small_bcf):
    ds = xr.open_dataset(refs, engine="vcfvirtual")
    with pysam.VariantFile(str(small_bcf)) as f:
        recs = list(f)
    assert ds["variant_position"].values.tolist() == [r.pos for r in recs]
    assert ds["sample_id"].values.tolist() == ["S1", "S2", "S3"]


def test_engine_is_registered():
    assert "vcfvirtual" in xr.backends.list_engines()


def test_drop_variables(refs):
    ds = xr.open_dataset(refs, engine="vcfvirtual", drop_variables=["call_genotype"])
    assert "call_genotype" not in ds and "variant_position" in ds


@pytest.mark.parametrize(
    "name,claimed",
    [("cohort.bcf.vcz.json", True), ("cohort.json", False), ("cohort.vcz.parq", False), ("x.bcf", False)],
)
def test_guess_can_open(name, claimed, tmp_path):
    assert VcfVirtualBackend().guess_can_open(name) is claimed
    assert VcfVirtualBackend().guess_can_open(tmp_path / name) is claimed


def test_guess_can_open_refuses_non_paths():
    assert VcfVirtualBackend().guess_can_open(object()) is False


def test_changed_cache_is_refused_unless_unchecked(small_bcf, tmp_path):
    bcf = tmp_path / "x.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, progress=False)
    cache = bcfdata.cache_file(tmp_path / "x.bcf.vcz.cache.columns")  # its one part
    cache.write_bytes(cache.read_bytes() + b"\x00")  # size no longer the fingerprint's
    with pytest.raises(StaleCacheError):
        xr.open_dataset(tmp_path / "x.bcf.vcz.json", engine="vcfvirtual")
    ds = xr.open_dataset(tmp_path / "x.bcf.vcz.json", engine="vcfvirtual", check=False)
    assert "variant_position" in ds


def test_chunks_like_open_zarr(refs, small_bcf):
    """chunks={}: one dask chunk per zarr chunk (3 variants here), as xr.open_zarr gives."""
    ds = xr.open_dataset(refs, engine="vcfvirtual", chunks={})
    with pysam.VariantFile(str(small_bcf)) as f:
        n = sum(1 for _ in f)
    assert ds["call_genotype"].chunks[0] == (3,) * (n // 3) + ((n % 3,) if n % 3 else ())
    assert (
        ds["variant_position"].values.tolist()
        == xr.open_dataset(refs, engine="vcfvirtual")["variant_position"].values.tolist()
    )


def test_a_json_at_a_url_is_checked_before_it_is_read(small_bcf, tmp_path):
    """With vcfvirtual installed, a shared https:// JSON goes through open_store: a cache
    changed on the server is refused, an intact one reads htslib's values."""
    import http.server

    from vcfvirtual.refs.relocate import relocate_file

    from ...integration.test_remote_read import RangeHandler

    served = tmp_path / "www"
    served.mkdir()
    bcf = tmp_path / "x.bcf"
    shutil.copy(small_bcf, bcf)
    vcfvirtual.index(bcf, refs_path=tmp_path / "x.vcz.json", cache_path=served / "x.cache", progress=False)
    handler = type("Handler", (RangeHandler,), {"directory": str(served), "stats": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_thread(server)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        relocate_file(tmp_path / "x.vcz.json", base, served / "x.vcz.json")
        ds = xr.open_dataset(base + "x.vcz.json", engine="vcfvirtual")
        with pysam.VariantFile(str(small_bcf)) as f:
            assert ds["variant_position"].values.tolist() == [r.pos for r in f]
        cache = bcfdata.cache_file(served / "x.cache")
        cache.write_bytes(cache.read_bytes() + b"\x00")
        with pytest.raises(StaleCacheError):
            xr.open_dataset(base + "x.vcz.json", engine="vcfvirtual")
    finally:
        server.shutdown()


# The codec alone: vcfvirtual hidden, as on a collaborator's Python 3.10/3.11.
WITHOUT_VCFVIRTUAL = """
import sys
sys.modules["vcfvirtual"] = None  # not installed
import xarray as xr
import vcfvirtual_codec.xarray_backend
assert not [m for m in sys.modules if m.startswith("vcfvirtual.")]
ds = xr.open_dataset(sys.argv[1], engine="vcfvirtual")
print(ds["variant_position"].values.tolist())
"""


def test_without_vcfvirtual_plain_references_are_read(refs, small_bcf):
    proc = subprocess.run([sys.executable, "-c", WITHOUT_VCFVIRTUAL, str(refs)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with pysam.VariantFile(str(small_bcf)) as f:
        assert proc.stdout.strip() == str([r.pos for r in f])


def test_importing_the_backend_does_not_import_the_indexer():
    """The codec depends on nothing of vcfvirtual's: the backend looks for it only when
    a dataset is opened."""
    script = "import sys, vcfvirtual_codec.xarray_backend; print('vcfvirtual' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout == (
        "False\n"
    )


# The codec alone, and no s3fs: the error says what to install, as the docs say it.
WITHOUT_S3FS = """
import sys
sys.modules["vcfvirtual"] = None
sys.modules["s3fs"] = None  # not installed
import xarray as xr
from vcfvirtual_codec.errors import VcfVirtualError
try:
    xr.open_dataset("s3://bucket/c.vcz.json", engine="vcfvirtual")
except VcfVirtualError as e:
    print(e)
"""


def test_without_s3fs_the_error_names_the_codecs_extra():
    out = subprocess.run([sys.executable, "-c", WITHOUT_S3FS], capture_output=True, text=True, check=True).stdout
    assert out.startswith("s3://bucket/c.vcz.json: reading this needs a library that is not installed"), out
    assert out.rstrip().endswith('(pip install "./codec[s3]")'), out
