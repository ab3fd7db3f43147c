"""The import layers (docs/ARCHITECTURE.md): querylog and costmodel below optimizer, and no import
cycle between optimizer's subpackages and modules. Read from the source with `ast`, so a lazy import
inside a function counts too."""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("querylog", "costmodel", "optimizer")
ALLOWED = {"querylog": {"querylog"}, "costmodel": {"costmodel"}, "optimizer": set(PACKAGES)}
MODULE_PACKAGES = (*PACKAGES, "benchmarks")
# module import cycles that exist today, each from its alphabetically first module (none since issue 50;
# `test_no_import_cycle_between_modules` fails both on a cycle not listed and on a listed one that is gone)
KNOWN_CYCLES: set[tuple[str, ...]] = set()


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


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def module_sources() -> dict[str, ast.Module]:
    """Every module of the product packages and of the benchmarks, parsed."""
    return {
        module_name(path): ast.parse(path.read_text())
        for package in MODULE_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imported_modules(tree: ast.AST, known: Collection[str]) -> set[str]:
    """The project modules `tree` imports anywhere: at the top, under TYPE_CHECKING, inside functions.
    `from a import b` imports the module `a.b` when there is one, else `a` (the name is defined there)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & set(known)


def module_cycles(trees: Mapping[str, ast.AST]) -> set[tuple[str, ...]]:
    """The import cycles between modules, each from its alphabetically first module on."""
    graph = nx.DiGraph()
    for module, tree in trees.items():
        graph.add_edges_from((module, target) for target in imported_modules(tree, trees) if target != module)
    cycles = set()
    for cycle in nx.simple_cycles(graph):
        first = cycle.index(min(cycle))
        cycles.add(tuple(cycle[first:] + cycle[:first]))
    return cycles


def test_no_import_cycle_between_modules():
    """Finer than the units' check: two files of one subpackage (or of the benchmarks) that import each
    other are a circle too, even through a type-only or a lazy import. `KNOWN_CYCLES` must match exactly:
    a cycle that is gone fails as well, so the list cannot go stale."""
    cycles = module_cycles(module_sources())
    new = sorted(cycles - KNOWN_CYCLES)
    gone = sorted(KNOWN_CYCLES - cycles)
    assert not new, "module import cycles: " + "; ".join(" -> ".join((*c, c[0])) for c in new)
    assert not gone, f"no longer a cycle, remove from KNOWN_CYCLES: {gone}"


def test_the_module_cycle_check_sees_type_only_lazy_and_package_imports():
    """A planted cycle through a TYPE_CHECKING import, an import inside a function and `from pkg import
    module` is found; a module that only imports into it is not part of it."""
    planted = {
        "pkg": "",
        "pkg.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "pkg.b": "def f():\n    from pkg import c\n",
        "pkg.c": "import pkg.a\n",
        "pkg.d": "from pkg.a import A\n",
    }
    assert module_cycles({m: ast.parse(s) for m, s in planted.items()}) == {("pkg.a", "pkg.b", "pkg.c")}
    trees = module_sources()
    assert "benchmarks.replay_report" in imported_modules(trees["benchmarks.replay_bench"], trees)
