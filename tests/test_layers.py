"""The import layers (docs/ARCHITECTURE.md): querylog and costmodel below optimizer, and no import
cycle between optimizer's subpackages and modules. Read from the source with `ast`, so a lazy import
inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("querylog", "costmodel", "optimizer")
ALLOWED = {"querylog": {"querylog"}, "costmodel": {"costmodel"}, "optimizer": set(PACKAGES)}


def unit(module: str) -> str:
    """The layer unit of a module: a top-level package, or optimizer's subpackage or root module."""
    parts = module.split(".")
    if parts[0] == "optimizer" and len(parts) > 1:
        return f"optimizer.{parts[1]}"
    return parts[0]


def imports() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, file) for every import between the project's packages."""
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for name in names:
                    if name.split(".")[0] in PACKAGES and unit(name) != unit(module):
                        found.append((unit(module), unit(name), str(path.relative_to(ROOT))))
    return found


def test_no_relative_imports():
    """The layer check reads absolute imports; a relative one would slip past it (ruff's TID252 bans them
    too, this keeps the check honest whatever the linter's configuration)."""
    relative = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert not relative, f"relative imports: {relative}"


def test_lower_packages_never_import_higher_ones():
    for source, target, path in imports():
        top, imported = source.split(".")[0], target.split(".")[0]
        assert imported in ALLOWED[top], f"{path}: {top} may not import {imported}"


def test_no_import_cycle_between_optimizer_units():
    graph = nx.DiGraph()
    for source, target, path in imports():
        graph.add_edge(source, target, path=path)
    cycles = list(nx.simple_cycles(graph))
    described = [" -> ".join(c) + f" (e.g. {graph.edges[c[0], c[1 % len(c)]]['path']})" for c in cycles[:5]]
    assert not cycles, "import cycles: " + "; ".join(described)


def test_the_layer_check_sees_imports_inside_functions():
    """The check must not be blind to lazy imports (the usual way a cycle sneaks back in)."""
    found = {(s, t) for s, t, _ in imports()}
    assert ("optimizer.service", "optimizer.estimate") in found
    assert ("optimizer.estimate", "costmodel") in found
