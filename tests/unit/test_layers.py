"""Both packages' layers import only downwards (docs/design.md, "Code layout").

Read from the source with ``ast``: every import of a package's own code (``from . import``,
``from vcfvirtual.x import``, ``import vcfvirtual_codec.x``; inside functions too, so a lazy
import does not hide a cycle) in a module of one layer must name its own layer or one
listed below it. A cycle, or a low layer reaching up (the scan importing the references,
say), fails here naming the import. The codec, which readers install alone, never imports
the indexer, and no module of either package is part of an import cycle.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Package:
    name: str
    path: Path
    layers: list[set[str]]  # lowest first; a module may import its own layer and earlier ones

    @property
    def rank(self) -> dict[str, int]:
        return {unit: i for i, layer in enumerate(self.layers) for unit in layer}


INDEXER = Package(
    "vcfvirtual",
    ROOT / "vcfvirtual",
    [
        {"__init__", "errors", "interrupts", "_codecs", "_gc", "_json", "_progress"},
        {"io"},
        {"bcf"},
        {"scan"},
        {"cache"},
        {"manifests"},
        {"refs"},
        {"append"},  # what growing a store reads of it and folds: above the manifests and references
        {"regions", "inspect"},
        {"verify"},
        {"plan"},
        {"api"},
        {"parser", "cli"},
    ],
)
# One module a layer: the codec is small, so its order is total and any cycle fails.
CODEC = Package(
    "vcfvirtual_codec",
    ROOT / "codec" / "vcfvirtual_codec",
    [
        {"__init__", "errors"},
        {"_kernels"},  # compiled (Cython): their .pyx import nothing of the package, only cimport bcf.pxd
        {"spec"},
        {"bcf"},  # BCF records and BGZF blocks: the format, shared with the indexer
        {"checks"},  # what both decoders check: bounds, kernel errors, dtypes, UTF-8
        {"scratch"},  # a codec instance's reusable working buffers
        {"local_alleles"},
        {"segment_transforms"},  # the columns segments' byte planes and deltas, undone after decompression
        {"columns"},  # the columns layout's decoder
        {"decode"},  # the raw and bgzf layouts' decoder: whole records
        {"codec"},  # the codecs, over the columns decoder and (imported by a first chunk) the records'
        {"xarray_backend"},
    ],
)
PACKAGES = [INDEXER, CODEC]
# The codec's one import of the indexer: the xarray backend uses vcfvirtual.open_store's
# checks when the full package is installed, imported when a dataset is opened and
# optional (ImportError: plain references). Any other is a dependency on the indexer.
CODEC_IMPORTS_OF_THE_INDEXER = {("xarray_backend.py", "vcfvirtual.refs.open")}


def _unit(dotted: str) -> str:
    """The top-level unit (package or module) of its package a dotted name belongs to."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(package: Package, path: Path) -> tuple[list[str], bool]:
    parts = [package.name, *path.relative_to(package.path).with_suffix("").parts]
    is_package = parts[-1] == "__init__"
    return (parts[:-1] if is_package else parts), is_package


def _is_module(package: Package, dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (package.path / rel).with_suffix(".py").is_file() or (package.path / rel / "__init__.py").is_file()


def _imports(package: Package, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in ``path``: relative ones resolved, and
    ``from x import y`` naming module ``x.y`` where ``y`` is a module."""
    parts, is_package = _module_name(package, path)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = parts if is_package else parts[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        root = module.split(".")[0]
        subs = [f"{module}.{a.name}" for a in node.names if root in (INDEXER.name, CODEC.name)]
        subs = [s for s in subs if _is_module(INDEXER if root == INDEXER.name else CODEC, s)]
        found.extend((node.lineno, t) for t in (subs or [module]))
    return found


def _own(package: Package, target: str) -> bool:
    return target == package.name or target.startswith(package.name + ".")


def _modules(package: Package) -> list[Path]:
    return sorted(package.path.rglob("*.py"))


CASES = [(package, path) for package in PACKAGES for path in _modules(package)]


def _case_id(case: tuple[Package, Path]) -> str:
    package, path = case
    return f"{package.name}/{path.relative_to(package.path)}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_every_unit_has_a_layer(package):
    units = {_unit(".".join(_module_name(package, p)[0])) for p in _modules(package)}
    assert units <= set(package.rank), f"place these in {package.name}'s layers: {sorted(units - set(package.rank))}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_imports_only_go_down(case):
    package, path = case
    rank = package.rank
    here = _unit(".".join(_module_name(package, path)[0]))
    upward = [
        f"line {line}: {target}"
        for line, target in _imports(package, path)
        if _own(package, target)
        and rank.get(_unit(target), -1) > rank[here]
        and target != f"{package.name}.__version__"
    ]
    assert not upward, f"{path.name} ({here}) imports from a higher layer: {upward}"


@pytest.mark.parametrize("path", _modules(CODEC), ids=lambda p: str(p.relative_to(CODEC.path)))
def test_the_codec_never_imports_the_indexer(path):
    rel = str(path.relative_to(CODEC.path))
    found = [
        f"line {line}: {target}"
        for line, target in _imports(CODEC, path)
        if _own(INDEXER, target) and (rel, target) not in CODEC_IMPORTS_OF_THE_INDEXER
    ]
    assert not found, f"{rel} imports the indexer: {found}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_no_import_cycles(package):
    graph = {}
    for path in _modules(package):
        name = ".".join(_module_name(package, path)[0])
        # A package's own __init__ is imported with every module below it: not an edge.
        graph[name] = {
            t for _, t in _imports(package, path) if _own(package, t) and t != name and not name.startswith(t + ".")
        }
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle in {package.name}: {' -> '.join(cycle or [])}"


def test_a_cycle_is_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
