"""Start-up of the command line is a product property (issue 12: `vcfvirtual index` within
3x one `bgzip -dc` pass, of which imports were a third): what a command loads, checked in
a fresh interpreter, and the codecs still registered by the modules that read stores once
`import vcfvirtual` no longer registers them."""

from __future__ import annotations

import json
import subprocess
import sys

from vcfvirtual_codec import spec

import vcfvirtual
from vcfvirtual import cli, plan

from ... import bcfdata
from ...conftest import bio2zarr_convert, differences_from_bio2zarr
from ..vcfvirtual_codec.test_codec import CONFIG as CODEC_CONFIG

# Libraries of the indexer and of readers, each ~0.05-0.4 s to import.
HEAVY = ("numpy", "numba", "zarr", "xarray", "virtualizarr", "pandas", "pysam", "numcodecs")


def loaded_after(code: str) -> list[str]:
    """The HEAVY modules in sys.modules after ``code`` runs in a fresh interpreter."""
    script = f"{code}\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_help_loads_none_of_the_indexers_libraries():
    code = (
        "from vcfvirtual.cli import main\n"
        "for command in ([], ['index'], ['relocate'], ['inspect'], ['verify']):\n"
        "    try:\n"
        "        main([*command, '--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
    )
    assert loaded_after(code) == []


def test_relocate_loads_none_of_them(tmp_path):
    """Relocating rewrites one URL in the JSON (after checking the cache's fingerprint):
    no zarr, VirtualiZarr or numba, which made it ~1 s of imports."""
    bcf = bcfdata.small_bcf(tmp_path / "small.bcf")
    refs, cache = tmp_path / "small.vcz.json", tmp_path / "small.cache"
    vcfvirtual.index(bcf, refs_path=refs, cache_path=cache, force=True)
    moved = tmp_path / "moved"
    moved.mkdir()
    cache.rename(moved / cache.name)
    code = (
        "from vcfvirtual.cli import main\n"
        "try:\n"
        f"    main(['relocate', {str(refs)!r}, {str(moved)!r}])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
    )
    assert loaded_after(code) == ["numpy"]  # numpy alone: vcfvirtual.refs.checks uses it
    with open(refs) as f:  # and it did relocate: the template names the moved cache
        assert json.load(f)["templates"]["cache"].endswith(f"moved/{cache.name}")


def test_import_vcfvirtual_loads_none_of_them():
    assert loaded_after("import vcfvirtual, vcfvirtual.errors") == []


def test_every_public_name_still_resolves():
    """The package loads its API on first use (PEP 562): each name of __all__, from a
    fresh interpreter, is the object its module defines."""
    code = (
        "import importlib, vcfvirtual\n"
        "for name in vcfvirtual.__all__:\n"
        "    value = getattr(vcfvirtual, name)\n"
        "    if name != '__version__':\n"
        "        module, attr = vcfvirtual._LAZY[name]\n"
        "        assert value is getattr(importlib.import_module('vcfvirtual.' + module), attr), name\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr


def test_cli_choices_are_the_librarys():
    # The CLI names them itself so as not to import vcfvirtual.plan for --help.
    assert cli.LAYOUTS == plan.LAYOUTS == spec.LAYOUTS
    assert cli.REFS_FORMATS == plan.REFS_FORMATS


def test_opening_stores_registers_the_codecs_without_entry_points():
    """An environment whose entry points are stale (an editable build not reinstalled):
    the modules that read stores register the codec themselves, with numcodecs and zarr."""
    code = """
import importlib.metadata as md
real = md.entry_points
def without_ours(**kw):
    eps = real(**kw)
    return md.EntryPoints(ep for ep in eps if not ep.value.startswith("vcfvirtual"))
md.entry_points = without_ours
import numcodecs
from zarr.registry import get_codec_class
try:
    numcodecs.get_codec({"id": "vcfvirtual.bcf"})
    raise SystemExit("the codec resolved without its entry points: the test proves nothing")
except ValueError:
    pass
import vcfvirtual
vcfvirtual.open_store  # what a reader calls first
codec = numcodecs.get_codec(CONFIG)
print(type(codec).__name__, get_codec_class("vcfvirtual.bcf").__name__)
"""
    # A configuration as the index writes it.
    config = CODEC_CONFIG
    code = code.replace("CONFIG", repr(config))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["BCFRecordsCodec", "BCFRecordsZarrCodec"]


def test_index_loads_neither_zarr_nor_virtualizarr(tmp_path):
    """`vcfvirtual index` writing Kerchunk JSON builds its own manifests
    (vcfvirtual.manifests.virtual): VirtualiZarr's types import xarray, pandas and zarr,
    ~0.5 s of CPU, a fifth of indexing a 10,000-sample cohort (issue 24). What it wrote
    reads as bio2zarr's conversion of the same BCF."""
    bcf = bcfdata.small_bcf(tmp_path / "small.bcf")
    refs = tmp_path / "small.vcz.json"
    code = (
        "from vcfvirtual.cli import main\n"
        "try:\n"
        f"    main(['index', {str(bcf)!r}, '-o', {str(refs)!r}, '--no-progress'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
    )
    # pysam: htslib reads the header, so the store's header is the one htslib reads.
    assert loaded_after(code) == ["numpy", "pysam", "numcodecs"]
    import xarray as xr

    ds = xr.open_zarr(vcfvirtual.open_store(refs), consolidated=False)
    ref = bio2zarr_convert(bcf, tmp_path / "bio2zarr.vcz", 1000)
    assert not differences_from_bio2zarr(ds, ref)
