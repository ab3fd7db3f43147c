"""The code's shape limits (docs/ARCHITECTURE.md, "Conventions"): a module past ~420 lines is two concepts (a
benchmark's too), a product function past 60 lines is two steps, and past 5 positional parameters its call
sites cannot be read without the definition (options go keyword-only). The line limit is not met by packing:
no `a, b = f(), g()` and no `# fmt: skip` except on data laid out in rows, benchmarks included."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("querylog", "costmodel", "optimizer")
WITH_BENCHMARKS = (*PACKAGES, "benchmarks")  # module length and packing; the function limits are the product's
MAX_MODULE_LINES = 420
MAX_FUNCTION_LINES = 60
MAX_POSITIONAL = 5
FMT_SKIP = re.compile(r"#\s*fmt:\s*skip\b")
# what a data-shaped statement is made of: names, constants, attribute reads, calls and displays, no logic
DATA_NODES = (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Load)


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
        for package in WITH_BENCHMARKS
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
    assert min(found.values()) > MAX_POSITIONAL, "six positional parameters are past the limit"


def packed_assignments(tree: ast.AST) -> list[int]:
    """Lines of tuple assignments from two or more calls (`a, b = f(), g()`): two statements on one
    line. Unpacking one call's result (`a, b = f()`) is one statement."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Tuple | ast.List) for target in node.targets)
        and isinstance(node.value, ast.Tuple | ast.List)
        and sum(isinstance(e, ast.Call) for e in node.value.elts) >= 2
    ]


def data_shaped(statement: ast.stmt) -> bool:
    """A display of plain values (a table written as rows), or a call with positional arguments only,
    each a plain value: the mirror of a constructor's fields in their order (Delta's `AddFile`, called
    through py4j, which has no keyword arguments). No operators, conditions, comprehensions or keywords."""
    value = getattr(statement, "value", None)
    if isinstance(value, ast.Call) and not value.keywords:
        parts = value.args
    elif isinstance(value, ast.Dict | ast.List | ast.Tuple | ast.Set):
        parts = [value]
    else:
        return False
    return all(isinstance(node, DATA_NODES) for part in parts for node in ast.walk(part))


def unjustified_fmt_skips(source: str) -> list[int]:
    """Lines of `# fmt: skip` comments that do not end a data-shaped statement (`data_shaped`)."""
    ends: dict[int, ast.stmt] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            known = ends.get(node.end_lineno)
            if known is None or node.lineno > known.lineno:  # the innermost statement ending there
                ends[node.end_lineno] = node
    comments = [
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and FMT_SKIP.search(token.string)
    ]
    return [line for line in comments if line not in ends or not data_shaped(ends[line])]


def test_no_statement_packed_to_meet_a_limit():
    packed = []
    for package in WITH_BENCHMARKS:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text()
            where = str(path.relative_to(ROOT))
            packed += [f"{where}:{n} tuple of calls" for n in packed_assignments(ast.parse(source))]
            packed += [f"{where}:{n} fmt: skip" for n in unjustified_fmt_skips(source)]
    assert not packed, f"statements packed onto one line (split the function instead): {packed}"


def test_the_packing_check_sees_tuples_of_calls_and_skips_around_logic():
    """Planted: what it must flag, and the data-shaped forms it must let through."""
    tuples = (
        "def f(x):\n"
        "    a, b = g(), h(x)\n"
        "    c, d = g()\n"
        "    e, k = g(), x\n"
        "    def inner():\n"
        "        m, n = [p(), q()]\n"
        "        o, r = p(), p()\n"
        "        rows = [p(), q()]\n"
    )
    assert packed_assignments(ast.parse(tuples)) == [2, 6, 7]
    skips = (
        'ROWS = {\n    "a": 1, "b": (2, None),\n}  # fmt: skip\n'
        "def f(a, none):\n"
        "    return make(\n        a.path(), convert(a.jvm, none), False,\n    )  # fmt: skip\n"
        "def g(a):\n"
        "    x, y = make(\n        a, b=1,\n    )  # fmt: skip\n"
        "    z = make(a + 1,\n             a)  # fmt: skip\n"
        "    u = 1; v = 2  # fmt: skip\n"
        "def h(a, b, c,\n      d):  # fmt: skip\n"
        "    return [v for v in a]  # fmt: skip\n"
    )
    assert unjustified_fmt_skips(skips) == [11, 13, 14, 16, 17]
