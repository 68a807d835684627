"""The two distributions' versions are each written once, and vcfvirtual pins the codec it was
released with."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _version_in(init: Path) -> str:
    """``__version__`` as setuptools' ``attr:`` reads it: the literal assigned in the module."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{init} assigns no __version__")


def test_versions_come_from_the_packages():
    for pyproject, attr in (
        (ROOT / "pyproject.toml", "vcfvirtual.__version__"),
        (ROOT / "codec" / "pyproject.toml", "vcfvirtual_codec.__version__"),
    ):
        meta = tomllib.loads(pyproject.read_text())
        assert "version" not in meta["project"], pyproject
        assert "version" in meta["project"]["dynamic"], pyproject
        assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": attr}, pyproject


def test_codec_pin_is_the_codec_version():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in deps if d.replace(" ", "").startswith("vcfvirtual-codec")]
    assert pins == [f"vcfvirtual-codec=={_version_in(ROOT / 'codec' / 'vcfvirtual_codec' / '__init__.py')}"]


def test_parquet_libraries_are_an_extra():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split(">")[0].split("=")[0].split("[")[0] for d in meta["dependencies"]]
    assert "kerchunk" not in names and "fastparquet" not in names and "ujson" not in names
    extras = meta["optional-dependencies"]
    for lib in ("kerchunk", "fastparquet"):
        assert any(d.startswith(lib) for d in extras["parquet"]), lib
        assert any(d.startswith(lib) for d in extras["test"]), lib


def test_the_xarray_engine_has_one_owner_the_codec():
    """engine="vcfvirtual" is registered by vcfvirtual-codec alone (a collaborator's only
    install), and its s3 extra brings what reading from S3 needs."""
    codec = tomllib.loads((ROOT / "codec" / "pyproject.toml").read_text())["project"]
    full = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert codec["entry-points"]["xarray.backends"] == {
        "vcfvirtual": "vcfvirtual_codec.xarray_backend:VcfVirtualBackend"
    }
    assert "xarray.backends" not in full.get("entry-points", {})
    assert codec["optional-dependencies"]["s3"] == ["s3fs"]


def test_readme_command_1_installs_no_test_extras():
    """README command 1 installs what indexing needs; the test tools come with command 2."""
    text = (ROOT / "README.md").read_text()
    first = text.split("```bash\n", 1)[1].split("\n```", 1)[0]
    assert ".venv/bin/pip install -e ./codec -e . &&" in first and "[test]" not in first
