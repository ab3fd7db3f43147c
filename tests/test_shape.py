"""The code's shape limits (docs/ARCHITECTURE.md, "Conventions"): a product module past ~420 lines is
two concepts, a function past 60 lines is two steps, and past 6 positional parameters its call sites
cannot be read without the definition (options go keyword-only)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("querylog", "costmodel", "optimizer")
MAX_MODULE_LINES = 420
MAX_FUNCTION_LINES = 60
MAX_POSITIONAL = 6


def functions() -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node


def positional(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    return len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)


def test_no_module_past_the_limit():
    long = {
        str(p.relative_to(ROOT)): n
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if (n := p.read_text().count("\n")) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_past_the_limits():
    too_long = [
        f"{name} ({n.end_lineno - n.lineno + 1})"
        for name, n in functions()
        if n.end_lineno - n.lineno >= MAX_FUNCTION_LINES
    ]
    too_many = [f"{name} ({positional(n)})" for name, n in functions() if positional(n) > MAX_POSITIONAL]
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: {too_long}"
    assert not too_many, f"functions over {MAX_POSITIONAL} positional parameters: {too_many}"


def test_the_shape_check_sees_methods_and_nested_functions():
    """It must not be blind to what a regression would add: a method's `self` is not counted, a
    nested function is."""
    source = "class A:\n    def m(self, a, b, c, d, e, f):\n        def inner(a, b, c, d, e, f, g):\n            pass\n"
    found = {n.name: positional(n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert found == {"m": 6, "inner": 7}
