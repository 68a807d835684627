"""The package's layers import only downwards (docs/design.md, "Code layout").

Read from the source with ``ast``: every ``from . import`` / ``from vcfvirtual.x import`` in
a module of one layer must name its own layer or one listed below it. A cycle, or a low layer
reaching up (the scan importing the references, say), fails here naming the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "vcfvirtual"

# Lowest first. A module may import from its own layer and any earlier one.
LAYERS = [
    {"__init__", "errors", "_codecs", "_gc", "_progress"},
    {"io"},
    {"bcf"},
    {"scan"},
    {"cache"},
    {"manifests"},
    {"refs"},
    {"regions", "inspect"},
    {"verify"},
    {"plan"},
    {"api"},
    {"parser", "cli"},
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _unit(dotted: str) -> str:
    """The top-level unit (package or module) of ``vcfvirtual`` a dotted name belongs to."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute vcfvirtual module) for every import of our own code in ``path``."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = parts if is_package else parts[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            targets = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
        elif node.module and node.module.split(".")[0] == "vcfvirtual":
            targets = [node.module]
        else:
            targets = []
        found.extend((node.lineno, t) for t in targets)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_unit_has_a_layer():
    units = {_unit(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in MODULES}
    assert units <= set(RANK), f"place these in LAYERS: {sorted(units - set(RANK))}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(path):
    here = _unit(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
    upward = [
        f"line {line}: {target}"
        for line, target in _imports(path)
        if RANK.get(_unit(target), -1) > RANK[here] and target != "vcfvirtual.__version__"
    ]
    assert not upward, f"{path.name} ({here}) imports from a higher layer: {upward}"
