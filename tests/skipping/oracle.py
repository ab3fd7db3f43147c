"""The pruning tests' oracle: Spark's semantics on a small predicate language, hypothesis strategies
for predicates and rows, and file statistics produced the ways the Delta log gets them.

The evaluator is independent of deltaopt (three-valued logic, NaN equal to itself and above every
number, ``IN`` with NULL never FALSE). Statistics come from deltaopt's writer (encoded with
`delta_stats_json`, decoded as delta-rs does) and from other writers (float maxima that ignore NaN,
timestamp maxima truncated to milliseconds, long strings truncated).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from optimizer.skipping.extended import ExtendedStats, ValueRange, from_json, key_set, to_json
from optimizer.skipping.filestats import file_stats
from optimizer.table.access import DataFile
from optimizer.table.stats import StatsColumn, delta_stats_json

TYPES = {
    "i": "bigint",
    "f": "double",
    "s": "string",
    "d": "date",
    "t": "timestamp",
    "b": "boolean",
    "p": "decimal(10,2)",
    "g": "float",
}
UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
ANSI = "__ansi"  # a row key the generated predicates read: compare as Spark with ANSI on (default) or off


def single(value: float) -> float:
    """`value` rounded to float32 (as Spark casts to FLOAT), as a Python float."""
    rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    return rounded


# doubles no decimal constant names exactly, and one past float32's and double's exact integers
INEXACT = [0.1, 0.30000000000000004, 16777216.0, 9007199254740992.0]
# values a FLOAT column holds (float32s: 0.1 is 0.100000001490116..., 16777217 is not one)
SINGLES = [single(0.1), single(0.3), single(-1 / 3), 2.5, 16777216.0, 16777218.0, float("nan"), -0.0]
# number constants as spelled in a query: (text, how Spark types it, the value it folds to in that type)
SPELLED = [
    ("0.1", "decimal", Decimal("0.1")),
    ("0.3", "decimal", Decimal("0.3")),
    ("0.30000001", "decimal", Decimal("0.30000001")),
    ("-0.3333333", "decimal", Decimal("-0.3333333")),
    ("2.5", "decimal", Decimal("2.5")),
    ("1E-1", "double", 0.1),
    ("0.1D", "double", 0.1),
    ("CAST(0.3 AS DOUBLE)", "double", 0.3),
    ("0.1F", "float", single(0.1)),
    ("CAST(0.3 AS FLOAT)", "float", single(0.3)),
    ("2", "integer", 2),
    ("16777216", "integer", 16777216),
    ("16777217", "integer", 16777217),
    ("9007199254740993", "integer", 9007199254740993),
    ("CAST(2.5 AS INT)", "integer", 2),
]
SOP_FEATURES = ("s LIKE '%x%'", "i IN (1, 2, 3)", "i > 5", "STARTSWITH(s, 'ab')")
KEY_COLUMNS = ("i", "s", "d")  # the columns whose exact value sets deltaopt's files keep

# ---- the oracle: Spark's semantics on a small predicate language ------------------------------------


def compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    a_nan = isinstance(a, float) and math.isnan(a)
    b_nan = isinstance(b, float) and math.isnan(b)
    if a_nan or b_nan:
        order = 0 if a_nan and b_nan else (1 if a_nan else -1)  # NaN above every number
    else:
        order = (a > b) - (a < b)
    return {"=": order == 0, "<>": order != 0, "<": order < 0, "<=": order <= 0, ">": order > 0, ">=": order >= 0}[op]


def and3(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def or3(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def not3(a: bool | None) -> bool | None:
    return None if a is None else not a


# A generated predicate is (SQL text, row -> True/False/None).


def _number(v: Any) -> str:
    return str(v)


def _string(v: str) -> str:
    return f"'{v}'"


def _date(v: dt.date) -> str:
    return f"DATE '{v.isoformat()}'"


def _date_as_string(v: dt.date) -> str:
    return f"'{v.isoformat()}'"


def _stamp(v: dt.datetime) -> str:
    return f"TIMESTAMP '{v.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _comparison(column: str, values: st.SearchStrategy, render: Any) -> st.SearchStrategy:
    ops = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    return st.tuples(ops, values).map(
        lambda ov: (f"{column} {ov[0]} {render(ov[1])}", lambda r, op=ov[0], v=ov[1]: compare(op, r[column], v))
    )


def _in_list(column: str, values: st.SearchStrategy, render: Any) -> st.SearchStrategy:
    def build(items: list[Any], with_null: bool) -> tuple[str, Any]:
        rendered = [render(v) for v in items] + (["NULL"] if with_null else [])

        def evaluate(r: dict[str, Any]) -> bool | None:
            if r[column] is None:
                return None
            if any(compare("=", r[column], v) for v in items):
                return True
            return None if with_null else False

        return f"{column} IN ({', '.join(rendered)})", evaluate

    return st.builds(build, st.lists(values, min_size=1, max_size=3), st.booleans())


# a date spelled as a string, and the date Spark casts it to (with ANSI, a list compares as dates)
DATE_SPELLINGS = [
    ("2024-02-29", dt.date(2024, 2, 29)),
    ("2024-2-29", dt.date(2024, 2, 29)),
    ("2024-03-01 ", dt.date(2024, 3, 1)),
    ("1970-01-01", dt.date(1970, 1, 1)),
    ("9999-12-31", dt.date(9999, 12, 31)),
]


def _date_strings_in_list() -> st.SearchStrategy:
    """``d IN ('2024-2-29', ..)``: without ANSI Spark compares the date as text (``yyyy-MM-dd``), with
    ANSI the strings as dates."""

    def build(items: list[tuple[str, dt.date]], with_null: bool) -> tuple[str, Any]:
        rendered = [f"'{text}'" for text, _ in items] + (["NULL"] if with_null else [])

        def evaluate(r: dict[str, Any]) -> bool | None:
            if r["d"] is None:
                return None
            ansi = r.get(ANSI, True)
            if any(r["d"] == day if ansi else r["d"].isoformat() == text for text, day in items):
                return True
            return None if with_null else False

        return f"d IN ({', '.join(rendered)})", evaluate

    return st.builds(build, st.lists(st.sampled_from(DATE_SPELLINGS), min_size=1, max_size=3), st.booleans())


def _month(op_value: tuple[str, int]) -> tuple[str, Any]:
    op, value = op_value
    return f"MONTH(d) {op} {value}", lambda r: compare(op, None if r["d"] is None else r["d"].month, value)


def _prefix(p: str) -> tuple[str, Any]:
    return f"s LIKE '{p}%'", lambda r: None if r["s"] is None else r["s"].startswith(p)


def _contains(p: str) -> tuple[str, Any]:
    return f"s LIKE '%{p}%'", lambda r: None if r["s"] is None else p in r["s"]


def compared_values(column: str, spelled: list[tuple[str, str, Any]], ansi: bool) -> list[float]:
    """The values of `spelled` constants as Spark compares them with `column` (f: DOUBLE, g: FLOAT): a
    FLOAT column with integers only compares in float32 without ANSI and in double with it, with FLOAT
    constants in float32; anything else in double (a decimal or double constant widens the comparison)."""
    kinds = {kind for _, kind, _ in spelled}
    if column == "g" and kinds <= {"integer", "float"} and ("float" in kinds or not ansi):
        return [single(float(value)) for _, _, value in spelled]
    return [float(value) for _, _, value in spelled]


def _spelled_comparison(column: str) -> st.SearchStrategy:
    def build(op: str, entry: tuple[str, str, Any]) -> tuple[str, Any]:
        def evaluate(r: dict[str, Any]) -> bool | None:
            (value,) = compared_values(column, [entry], r.get(ANSI, True))
            return compare(op, r[column], value)

        return f"{column} {op} {entry[0]}", evaluate

    return st.builds(build, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), st.sampled_from(SPELLED))


def _spelled_in_list(column: str) -> st.SearchStrategy:
    """Lists of spelled constants, FLOAT constants left out (how Spark widens a list mixing them with
    integers differs by mode and is not modelled here; pruning keeps the file for any FLOAT constant)."""

    def build(items: list[tuple[str, str, Any]], with_null: bool) -> tuple[str, Any]:
        rendered = [text for text, _, _ in items] + (["NULL"] if with_null else [])

        def evaluate(r: dict[str, Any]) -> bool | None:
            if r[column] is None:
                return None
            if any(compare("=", r[column], v) for v in compared_values(column, items, r.get(ANSI, True))):
                return True
            return None if with_null else False

        return f"{column} IN ({', '.join(rendered)})", evaluate

    entries = st.sampled_from([e for e in SPELLED if e[1] != "float"])
    return st.builds(build, st.lists(entries, min_size=1, max_size=3), st.booleans())


def _is_null(column: str) -> tuple[str, Any]:
    return f"{column} IS NULL", lambda r: r[column] is None


def atom_strategy() -> st.SearchStrategy:
    ints = st.integers(-3, 8)
    floats = st.sampled_from([-1.5, 0.0, 1.5, 2.25, 7.0])
    strings = st.sampled_from(["", "a", "ab", "abc", "abx", "b", "x" * 40, "xa", "zz"])
    dates = st.sampled_from([dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(2024, 3, 1), dt.date(9999, 12, 31)])
    stamps = st.sampled_from([EPOCH.replace(year=2024) + dt.timedelta(microseconds=m) for m in (0, 999, 1500)])
    decimals = st.sampled_from([Decimal("-1.25"), Decimal("0"), Decimal("3.50"), Decimal("99.99")])
    ops = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    return st.one_of(
        _comparison("i", ints, _number),
        _comparison("f", floats, _number),
        _comparison("f", ints, _number),
        _comparison("s", strings, _string),
        _comparison("d", dates, _date),
        _comparison("d", dates, _date_as_string),
        _comparison("t", stamps, _stamp),
        _comparison("p", decimals, _number),
        _comparison("b", st.booleans(), lambda v: str(v).upper()),
        _in_list("i", ints, _number),
        _in_list("s", strings, _string),
        _in_list("f", floats, _number),
        _date_strings_in_list(),
        _spelled_comparison("f"),
        _spelled_comparison("g"),
        _spelled_in_list("f"),
        _spelled_in_list("g"),
        st.sampled_from(list(TYPES)).map(_is_null),
        st.sampled_from(["a", "ab", "abc", "x"]).map(_prefix),
        st.sampled_from(["x", "ab"]).map(_contains),
        st.tuples(ops, st.integers(1, 12)).map(_month),
    )


def predicate_strategy() -> st.SearchStrategy:
    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        pairs = st.tuples(children, children)
        return st.one_of(
            pairs.map(
                lambda ab: (f"({ab[0][0]}) AND ({ab[1][0]})", lambda r, a=ab[0][1], b=ab[1][1]: and3(a(r), b(r)))
            ),
            pairs.map(lambda ab: (f"({ab[0][0]}) OR ({ab[1][0]})", lambda r, a=ab[0][1], b=ab[1][1]: or3(a(r), b(r)))),
            children.map(lambda a: (f"NOT ({a[0]})", lambda r, f=a[1]: not3(f(r)))),
        )

    return st.recursive(atom_strategy(), extend, max_leaves=5)


def row_strategy() -> st.SearchStrategy:
    def maybe(values: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(st.none(), values)

    dates = [dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(2024, 3, 1), dt.date(9999, 12, 31)]
    return st.fixed_dictionaries(
        {
            "i": maybe(st.integers(-5, 10)),
            "f": maybe(st.sampled_from([-2.0, 0.0, 1.5, 2.25, 3.0, 7.0, float("nan"), -0.0, *INEXACT])),
            "s": maybe(st.sampled_from(["", "a", "ab", "abc", "abcd", "abx", "ba", "x" * 33, "x" * 40 + "b", "xa"])),
            "d": maybe(st.sampled_from(dates)),
            "t": maybe(
                st.sampled_from(
                    [EPOCH.replace(year=2024) + dt.timedelta(microseconds=m) for m in (0, 999, 1000, 1500, 999999)]
                )
            ),
            "b": maybe(st.booleans()),
            "p": maybe(st.sampled_from([Decimal("-1.25"), Decimal("0.00"), Decimal("3.50"), Decimal("99.99")])),
            "g": maybe(st.sampled_from(SINGLES)),
        }
    )


# ---- statistics as the log would hold them ------------------------------------------------------------


def spark_min_max(values: list[Any]) -> tuple[Any, Any]:
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    if isinstance(present[0], float):
        numbers = [v for v in present if not math.isnan(v)]
        low = min(numbers) if numbers else float("nan")
        high = float("nan") if len(numbers) < len(present) else max(numbers)
        return low, high
    return min(present), max(present)


def decode(values: dict[str, Any]) -> dict[str, Any]:
    """JSON statistics typed the way delta-rs returns them."""
    out: dict[str, Any] = {}
    for column, value in values.items():
        kind = TYPES[column]
        if kind == "double":
            out[column] = float(value)
        elif kind == "float":  # delta-rs reads a FLOAT column's statistics as float32
            out[column] = single(float(value))
        elif kind == "date":
            out[column] = dt.date.fromisoformat(value)
        elif kind == "timestamp":
            out[column] = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif kind == "bigint":
            out[column] = int(value)
        else:
            out[column] = value
    return out


def ours(rows: list[dict[str, Any]], path: str) -> DataFile:
    """Statistics as deltaopt writes them (delta_stats_json), decoded as delta-rs decodes them."""
    columns = [StatsColumn((c,), t, minmax=True) for c, t in TYPES.items()]
    aggregate: dict[str, Any] = {"__rows": len(rows)}
    for i, (column, kind) in enumerate(TYPES.items()):
        low, high = spark_min_max([r[column] for r in rows])
        if kind == "timestamp":
            low, high = (None if v is None else (v - EPOCH) // dt.timedelta(microseconds=1) for v in (low, high))
        aggregate[f"min_{i}"], aggregate[f"max_{i}"] = low, high
        aggregate[f"nulls_{i}"] = sum(r[column] is None for r in rows)
    document = json.loads(delta_stats_json(aggregate, columns), parse_float=Decimal)
    return DataFile(
        path, 1, len(rows), 0, {}, decode(document["minValues"]), decode(document["maxValues"]), document["nullCount"]
    )


def foreign(rows: list[dict[str, Any]], path: str) -> DataFile:
    """Statistics as another writer leaves them: NaN-blind float max, timestamp max truncated to the
    millisecond, strings truncated to 32 characters without a tie-breaker."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    for column, kind in TYPES.items():
        present = [
            r[column]
            for r in rows
            if r[column] is not None and not (isinstance(r[column], float) and math.isnan(r[column]))
        ]
        if not present:
            continue
        low, high = min(present), max(present)
        if kind == "timestamp":
            low = low.replace(microsecond=low.microsecond // 1000 * 1000)
            high = high.replace(microsecond=high.microsecond // 1000 * 1000)
        if kind == "string":
            low, high = low[:32], high[:32]
        mins[column], maxs[column] = low, high
    nulls = {c: sum(r[c] is None for r in rows) for c in TYPES}
    return DataFile(path, 1, len(rows), 0, {}, mins, maxs, nulls)


SOP_ORACLE = {
    "s LIKE '%x%'": lambda r: r["s"] is not None and "x" in r["s"],
    "i IN (1, 2, 3)": lambda r: r["i"] in (1, 2, 3),
    "i > 5": lambda r: r["i"] is not None and r["i"] > 5,
    "STARTSWITH(s, 'ab')": lambda r: r["s"] is not None and r["s"].startswith("ab"),
}


def extended(rows: list[dict[str, Any]]) -> ExtendedStats:
    months = [r["d"].month for r in rows if r["d"] is not None]
    month_range = ValueRange(
        "int", min(months, default=None), max(months, default=None), sum(r["d"] is None for r in rows)
    )
    bits = "".join("1" if any(SOP_ORACLE[f](r) for r in rows) else "0" for f in SOP_FEATURES)
    key_types = {c: TYPES[c] for c in KEY_COLUMNS}
    found = {c: key_set(t, {r[c] for r in rows if r[c] is not None}) for c, t in key_types.items()}
    keys = {c: v for c, v in found.items() if v is not None}
    stats = ExtendedStats("run", {"MONTH(d)": month_range}, SOP_FEATURES, bits, True, keys)
    return from_json(json.loads(json.dumps(to_json(stats, key_types))))  # as the index stores them


def stats_for(rows: list[dict[str, Any]], writer: str = "ours", path: str = "f") -> Any:
    if writer == "ours":
        return file_stats(ours(rows, path), TYPES, extended(rows))
    return file_stats(foreign(rows, path), TYPES, None)


BASE: dict[str, Any] = dict.fromkeys(TYPES)


def row_from_json(values: dict[str, Any]) -> dict[str, Any]:
    """A row of the golden files: JSON values typed by the oracle's columns; absent columns are NULL."""
    row = dict(BASE)
    for column, value in values.items():
        kind = TYPES[column]
        if value is None:
            row[column] = None
        elif kind in ("double", "float"):
            row[column] = float(value)
        elif kind == "date":
            row[column] = dt.date.fromisoformat(value)
        elif kind == "timestamp":
            row[column] = dt.datetime.fromisoformat(value)
        elif kind.startswith("decimal"):
            row[column] = Decimal(value)
        else:
            row[column] = value
    return row


class OutsideLanguage(Exception):
    """A tree the oracle cannot evaluate (its language is what the strategies generate)."""


def evaluate_tree(node: Any, row: dict[str, Any]) -> Any:
    """Spark's value of a sqlglot tree of the generated language on `row` (three-valued for predicates)."""
    import re

    from sqlglot import exp

    node = node.unnest()
    if isinstance(node, exp.And):
        value: Any = True
        for part in node.flatten():
            value = and3(value, evaluate_tree(part, row))
        return value
    if isinstance(node, exp.Or):
        value = False
        for part in node.flatten():
            value = or3(value, evaluate_tree(part, row))
        return value
    if isinstance(node, exp.Not):
        return not3(evaluate_tree(node.this, row))
    if isinstance(node, exp.Column):
        return row[node.name]
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else Decimal(node.this)
    if isinstance(node, exp.Neg):
        return -evaluate_tree(node.this, row)
    if isinstance(node, exp.Cast | exp.TryCast):
        text = evaluate_tree(node.this, row)
        kind = node.to.sql("spark").upper()
        numbers = {"DOUBLE": float, "FLOAT": lambda v: single(float(v)), "INT": int, "BIGINT": int}
        if kind in numbers:
            return numbers[kind](text)
        return dt.date.fromisoformat(text) if kind == "DATE" else dt.datetime.fromisoformat(text).replace(tzinfo=UTC)
    if isinstance(node, exp.Month):
        value = evaluate_tree(node.this, row)
        return None if value is None else value.month
    if isinstance(node, exp.TsOrDsToDate):
        return evaluate_tree(node.this, row)
    ops = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
    if type(node) in ops:
        left, right = evaluate_tree(node.this, row), evaluate_tree(node.expression, row)
        if not row.get(ANSI, True):  # without ANSI a FLOAT column meets an integer in float32
            left = _in_float32(left) if _is_float_column(node.expression) and _is_integer(node.this) else left
            right = _in_float32(right) if _is_float_column(node.this) and _is_integer(node.expression) else right
        left, right = _coerce(left, right), _coerce(right, left)
        return compare(ops[type(node)], left, right)
    if isinstance(node, exp.In):
        value = evaluate_tree(node.this, row)
        items = [evaluate_tree(v, row) for v in node.expressions]
        if value is None:
            return None
        if (
            not row.get(ANSI, True)
            and _is_float_column(node.this)
            and all(_is_integer(v) or isinstance(v, exp.Null) for v in node.expressions)
        ):
            items = [_in_float32(v) for v in items]  # a list of integers meets a FLOAT column in float32 too
        as_text = not row.get(ANSI, True) and isinstance(value, dt.date) and any(isinstance(v, str) for v in items)
        if as_text:  # without ANSI Spark compares a date with a list of strings as text
            items = [v.isoformat() if isinstance(v, dt.date) else v for v in items]
            value = value.isoformat()
        if any(compare("=", value, _coerce(v, value)) for v in items if v is not None):
            return True
        return None if any(v is None for v in items) else False
    if isinstance(node, exp.Is):
        return evaluate_tree(node.this, row) is None
    if isinstance(node, exp.StartsWith):
        value = evaluate_tree(node.this, row)
        return None if value is None else value.startswith(evaluate_tree(node.expression, row))
    if isinstance(node, exp.Like):
        value = evaluate_tree(node.this, row)
        pattern = "".join(
            ".*" if c == "%" else "." if c == "_" else re.escape(c) for c in evaluate_tree(node.expression, row)
        )
        return None if value is None else re.fullmatch(pattern, value, re.S) is not None
    raise OutsideLanguage(f"the test language has no {type(node).__name__}")


def _is_float_column(node: Any) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Column) and TYPES.get(node.name) == "float"


def _is_integer(node: Any) -> bool:
    """An integer constant as the generated language spells one (``16777217``, ``-3``, ``CAST(2.5 AS INT)``)."""
    from sqlglot import exp

    node = node.this if isinstance(node, exp.Neg) else node
    if isinstance(node, exp.Cast):
        return node.to.is_type(*exp.DataType.INTEGER_TYPES)
    return isinstance(node, exp.Literal) and not node.is_string and node.this.lstrip("-").isdigit()


def _in_float32(value: Any) -> Any:
    return None if value is None else single(float(value))


def _coerce(value: Any, other: Any) -> Any:
    """Spark casts a string compared with a date to a date (``'2024-2-29 '`` too)."""
    if isinstance(value, str) and isinstance(other, dt.date) and not isinstance(other, dt.datetime):
        year, month, day = value.strip().split("-")
        return dt.date(int(year), int(month), int(day))
    if isinstance(value, Decimal | int) and not isinstance(value, bool) and isinstance(other, float):
        return float(value)  # Spark (ANSI) compares a number with a floating-point column in double
    return value
