"""Spark's printed scan filters, turned back into typed sqlglot predicates.

``PushedFilters: [IsNotNull(a), GreaterThanOrEqual(d,1994-01-01), In(m, [MAIL,SHIP])]`` is the
``toString`` of Spark's data-source filters: values are printed **unquoted**, so a value's type comes
from the scan's ``ReadSchema``. Anything that cannot be read without guessing (an unknown column or
filter, a value that is not of its column's type, LIKE wildcards inside a string test) raises
`PredicateError`; the importer then quarantines the event rather than record a wrong predicate.
One ambiguity Spark's format leaves open: a string inside an ``In`` list that itself contains a comma
prints like two values. Such lists are read as printed; the SQL path has no such limit.

``DataFilters`` are Catalyst expressions, also printed with unquoted literals. Only the unambiguous
kinds are taken from them, which pushed filters cannot express: a comparison of a function of one
column with a number, e.g. ``(month(l_shipdate#50) = 12)``, and a comparison between columns (or
functions of them) with no literal at all, e.g. ``(l_commitdate#61 < l_receiptdate#62)``.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from querylog.errors import PredicateError
from querylog.predicates.parse import parse_condition

COMPARISONS: dict[str, type[exp.Expr]] = {
    "EqualTo": exp.EQ,
    "EqualNullSafe": exp.NullSafeEQ,
    "GreaterThan": exp.GT,
    "GreaterThanOrEqual": exp.GTE,
    "LessThan": exp.LT,
    "LessThanOrEqual": exp.LTE,
}
NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "byte", "short", "long", "integer")


def parse_read_schema(text: str) -> dict[str, str]:
    """``struct<a:int,b:decimal(15,2),c:struct<d:string>>`` -> {column: type} for top-level columns."""
    text = text.strip()
    if not text.startswith("struct<") or not text.endswith(">"):
        raise PredicateError(f"unreadable ReadSchema {text[:80]!r}")
    body = text[len("struct<") : -1]
    columns: dict[str, str] = {}
    for part in _split_top(body, ",", "(<[", ")>]"):
        name, sep, kind = part.partition(":")
        if not sep:
            raise PredicateError(f"unreadable ReadSchema field {part!r}")
        columns[name.strip().strip("`").lower()] = kind.strip().lower()
    return columns


def _split_top(text: str, separator: str, opening: str = "([", closing: str = ")]") -> list[str]:
    """Split at `separator` outside brackets (type strings also nest in ``<>``; filters do not, they
    contain comparison operators)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in opening:
            depth += 1
        elif char in closing:
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if current or parts:
        parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


def _literal(value: str, kind: str) -> exp.Expr:
    if value == "null":
        return exp.Null()
    if kind == "string":
        return exp.Literal.string(value)
    if kind == "boolean":
        if value not in ("true", "false"):
            raise PredicateError(f"not a boolean: {value!r}")
        return exp.Boolean(this=value == "true")
    if kind in NUMERIC or kind.startswith("decimal"):
        try:
            Decimal(value)
        except InvalidOperation as err:
            raise PredicateError(f"not a number: {value!r}") from err
        return exp.Literal.number(value)
    if kind == "date":
        if not re.fullmatch(r"-?\d{4,}-\d{2}-\d{2}", value):
            raise PredicateError(f"not a date: {value!r}")
        return exp.cast(exp.Literal.string(value), "DATE")
    if kind in ("timestamp", "timestamp_ntz"):
        if not re.fullmatch(r"-?\d{4,}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?", value):
            raise PredicateError(f"not a timestamp: {value!r}")
        return exp.cast(exp.Literal.string(value), "TIMESTAMP" if kind == "timestamp" else "TIMESTAMP_NTZ")
    raise PredicateError(f"values of type {kind} are not read from pushed filters")


def _column(name: str, schema: dict[str, str]) -> tuple[exp.Expr, str]:
    path = name.strip().strip("`")
    root = path.split(".")[0].lower()
    if path.lower() not in schema and root not in schema:
        raise PredicateError(f"pushed filter names unknown column {path!r}")
    return exp.column(path.lower()) if "." not in path else parse_condition(path.lower()), schema.get(
        path.lower(), schema.get(root, "")
    )


def parse_pushed_filter(text: str, schema: dict[str, str]) -> exp.Expr:
    """One data-source filter, e.g. ``GreaterThan(l_quantity,45.00)``, as a sqlglot predicate."""
    match = re.fullmatch(r"\s*(\w+)\((.*)\)\s*", text, re.S)
    if not match:
        raise PredicateError(f"unreadable pushed filter {text!r}")
    name, body = match.groups()
    if name in ("And", "Or"):
        left, right = _two(body)
        combine = exp.and_ if name == "And" else exp.or_
        return combine(parse_pushed_filter(left, schema), parse_pushed_filter(right, schema))
    if name == "Not":
        return exp.Not(this=parse_pushed_filter(body, schema))
    if name in ("IsNull", "IsNotNull"):
        column, _ = _column(body, schema)
        test = exp.Is(this=column, expression=exp.Null())
        return test if name == "IsNull" else exp.Not(this=test)
    if name == "AlwaysTrue":
        return exp.true()
    if name == "AlwaysFalse":
        return exp.false()
    attribute, sep, value = body.partition(",")
    if not sep:
        raise PredicateError(f"unreadable pushed filter {text!r}")
    column, kind = _column(attribute, schema)
    if name in COMPARISONS:
        return COMPARISONS[name](this=column, expression=_literal(value, kind))
    if name == "In":
        inner = value.strip()
        if not (inner.startswith("[") and inner.endswith("]")):
            raise PredicateError(f"unreadable In list {value!r}")
        items = inner[1:-1].split(",") if inner[1:-1] else []
        return exp.In(this=column, expressions=[_literal(item, kind) for item in items])
    if kind != "string":
        raise PredicateError(f"{name} on a non-string column")
    pattern = {"StringStartsWith": "{}%", "StringEndsWith": "%{}", "StringContains": "%{}%"}.get(name)
    if pattern is None:
        raise PredicateError(f"unknown pushed filter {name}")
    if any(w in value for w in ("%", "_", "\\")):
        raise PredicateError(f"{name} value {value!r} has LIKE wildcards")
    return exp.Like(this=column, expression=exp.Literal.string(pattern.format(value)))


def _two(body: str) -> tuple[str, str]:
    parts = _split_top(body, ",")
    if len(parts) != 2:
        raise PredicateError(f"expected two filters in {body!r}")
    return parts[0], parts[1]


def split_filter_list(text: str) -> list[str]:
    """``[A(x), B(y,1)]`` -> ``["A(x)", "B(y,1)"]``."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise PredicateError(f"unreadable filter list {text[:80]!r}")
    return _split_top(text[1:-1], ",")


def parse_data_filter(text: str, schema: dict[str, str]) -> exp.Expr | None:
    """A Catalyst data filter when it is a numeric comparison of a function of one known column, or a
    literal-free comparison of known columns, else None. ``(month(l_shipdate#50) = 12)`` ->
    ``MONTH(l_shipdate) = 12``; ``(l_commitdate#61 < l_receiptdate#62)`` as it reads."""
    cleaned = re.sub(r"#\d+L?\b", "", text)
    try:
        expression = parse_condition(cleaned).unnest()
    except PredicateError:
        return None
    if not isinstance(expression, exp.EQ | exp.GT | exp.GTE | exp.LT | exp.LTE):
        return None
    left, right = expression.this, expression.expression
    if _compares_columns(expression, schema):
        return expression
    if not isinstance(right, exp.Literal) or right.is_string:
        return None
    columns = list(left.find_all(exp.Column))
    if not isinstance(left, exp.Func) or len(columns) != 1 or columns[0].name.lower() not in schema:
        return None
    if any(isinstance(n, exp.Literal) and not n.is_string for n in left.walk()):
        return None  # an argument printed unquoted could be a string or a date: do not guess
    return expression


def _compares_columns(expression: exp.Expr, schema: dict[str, str]) -> bool:
    """Both sides reference known columns and nothing is a literal (no value to type or guess)."""
    columns = list(expression.find_all(exp.Column))
    return (
        not any(isinstance(n, exp.Literal) for n in expression.walk())
        and all(c.name.lower() in schema for c in columns)
        and expression.this.find(exp.Column) is not None
        and expression.expression.find(exp.Column) is not None
    )
