"""The grammar SOP bits and expression ranges are used in (`optimizer.skipping.agreement`), checked
against Spark: wherever a query, as written, is TRUE on a row in a session with ANSI on or off, every
conjunct pruning reads it as (`SAFE_PASSES`) that is in the grammar is TRUE on that row as deltaopt's
session evaluates a feature of that text (rendered by `spark_expr.safe_sql`, ANSI off). A conjunct
outside the grammar is never used, so it is not held to this.

Predicates are generated over every kind of operand the grammar knows and some it refuses (a FLOAT
column, strings meeting numbers, a date meeting a list of strings), on rows of edge values (integer
limits, strings that read as numbers past INT, NaN, NULL). A query that fails on a row in a mode reads
nothing there; such rows are found by evaluating the text row by row."""

from __future__ import annotations

import datetime as dt
import functools
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.spark

SCHEMA = (
    "k int, i bigint, n int, p decimal(10,2), q decimal(38,0), f double, g float, s string, d date, "
    "t timestamp, b boolean, b2 boolean"
)
TYPES = {c.split()[0]: c.split()[1] for c in SCHEMA.split(", ")}
_T = dt.datetime
ROWS = [
    (1, 1, 2, Decimal("3.50"), Decimal(1), 0.5, 0.1, "1", dt.date(2024, 2, 29), _T(2024, 2, 29, 12), True, None),
    (2, 2**63 - 1, 2**31 - 1, Decimal("99999999.99"), Decimal(10**37), 1e308, 16777216.0, "3000000000",
     dt.date(1970, 1, 1), _T(1970, 1, 1), False, False),
    (3, -(2**63), -(2**31), Decimal("-0.01"), Decimal(-1), float("nan"), float("nan"), " 1",
     dt.date(9999, 12, 31), None, None, True),
    (4, 0, 0, Decimal(0), Decimal(0), -0.0, -0.0, "", dt.date(2000, 1, 1), _T(2000, 1, 1), True, False),
    (5, None, None, None, None, None, None, None, None, None, None, None),
    (6, 3000000000, 7, Decimal("0.50"), Decimal(5), 2.5, 2.5, "2024-02-29", dt.date(2024, 3, 1),
     _T(2024, 3, 1, 0, 0, 1), True, False),
    (7, -1, 16777217, Decimal("1.01"), Decimal(2), 0.1, 0.3, "a", dt.date(2024, 2, 29), None, False, True),
    (8, 16777217, 1, Decimal("2.00"), Decimal(16777217), 16777217.0, 16777218.0, "01", None,
     _T(2024, 2, 29), None, None),
]  # fmt: skip

LITERALS = {
    "number": [
        *("0", "1", "-1", "2", "2.5", "0.5", "0.50", "3000000000", "2147483648", "9223372036854775807"),
        *("16777217", "1E1", "0.1D", "100000000000000000000", "CAST(1 AS INT)", "CAST(2.5 AS DECIMAL(10,2))"),
        "NULL",
    ],
    "string": ["'1'", "'01'", "'a'", "''", "'3000000000'", "'2024-02-29'", "' 1'", "'1.0'", "'NaN'", "NULL"],
    "date": ["DATE '2024-02-29'", "CAST('1970-01-01' AS DATE)", "TIMESTAMP '2024-02-29 12:00:00'", "NULL"],
    "boolean": ["TRUE", "FALSE", "NULL"],
}
COLUMNS = {"number": ["i", "n", "p", "q", "f", "g"], "string": ["s"], "date": ["d", "t"], "boolean": ["b", "b2"]}
KINDS = list(COLUMNS)
_UNITS = st.sampled_from(["DAY", "MONTH", "YEAR", "HOUR"])


@functools.cache  # built once per (kind, depth): a flatmap asks again on every draw, and rebuilding and
def _value(kind: str, depth: int) -> st.SearchStrategy[str]:  # validating the tree was 80% of the test's CPU
    """Text of a value of `kind`; sometimes (a string meeting a number) of another kind."""
    leaves = st.sampled_from(COLUMNS[kind] + LITERALS[kind])
    if depth == 0:
        return leaves
    inner = _value(kind, depth - 1)
    shapes: list[st.SearchStrategy[str]] = [
        leaves,
        st.builds("COALESCE({}, {})".format, inner, inner),
        st.builds("IF({}, {}, {})".format, _predicate(depth - 1), inner, inner),
        st.builds("CASE WHEN {} THEN {} ELSE {} END".format, _predicate(depth - 1), inner, inner),
    ]
    if kind == "number":
        texts = _value("string", depth - 1)
        dates = _value("date", depth - 1)
        shapes += [
            st.builds("({} {} {})".format, inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner),
            st.builds("-({})".format, inner),
            st.builds("LENGTH({})".format, texts),
            st.builds("DATEDIFF({}, {})".format, dates, dates),
            st.builds("{}({})".format, st.sampled_from(["YEAR", "MONTH", "DAY", "DAYOFWEEK", "HOUR"]), dates),
            st.builds("{}({})".format, st.sampled_from(["ABS", "FLOOR", "CEIL", "SIGN"]), inner),
            st.builds("ROUND({}, 1)".format, inner),
            st.builds("CAST({} AS {})".format, inner, st.sampled_from(["BIGINT", "INT", "DOUBLE", "DECIMAL(12,3)"])),
            st.builds("({} + {})".format, inner, texts),  # a string in arithmetic: outside the grammar
        ]
    if kind == "string":
        numbers = _value("number", depth - 1)
        shapes += [
            st.builds("{}({})".format, st.sampled_from(["UPPER", "LOWER", "TRIM"]), inner),
            st.builds("SUBSTRING({}, {}, 2)".format, inner, st.sampled_from(["1", "2", "-1"])),
            st.builds("({} || {})".format, inner, inner),
            st.builds("CONCAT({}, {})".format, inner, inner),
            st.builds("CAST({} AS STRING)".format, numbers),  # a number made text: outside the grammar
        ]
    if kind == "date":
        amounts = st.sampled_from(["1", "-1", "n", "i", "2.5", "2147483647"])
        shapes += [
            st.builds("CAST({} AS DATE)".format, st.sampled_from(["t", "d", "s"])),
            st.builds("{}({}, {})".format, st.sampled_from(["DATE_ADD", "DATE_SUB", "ADD_MONTHS"]), inner, amounts),
            st.builds("({} {} INTERVAL '{}' {})".format, inner, st.sampled_from("+-"), amounts, _UNITS),
            st.builds("DATE_TRUNC('{}', {})".format, _UNITS, inner),
        ]
    return st.one_of(*shapes)


def _list(literals: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(literals), min_size=1, max_size=3).map(", ".join)


@functools.cache  # as `_value`: strategies are immutable, so one per depth draws the same texts
def _predicate(depth: int) -> st.SearchStrategy[str]:
    kind = st.sampled_from(KINDS)
    comparison = st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "<=>"])
    same = kind.flatmap(lambda k: st.builds("{} {} {}".format, _value(k, depth), comparison, _value(k, depth)))
    mixed = st.builds(
        "{} {} {}".format, _value("number", depth), comparison, st.sampled_from(["s", "'3000000000'", "'1.0'"])
    )
    dated = st.builds("{} {} {}".format, st.sampled_from(["d", "t"]), comparison, st.sampled_from(LITERALS["string"]))
    listed = kind.flatmap(lambda k: st.builds("{} IN ({})".format, _value(k, depth), _list(LITERALS[k])))
    text = _value("string", depth)
    patterns = st.sampled_from(["'1%'", "'%1'", "'_'", "'a%'", "'%'", "''"])
    shapes = [
        same,
        same,
        mixed,
        dated,
        listed,
        st.builds("d IN ({})".format, _list(LITERALS["string"][:-1])),
        kind.flatmap(lambda k: st.builds("{} BETWEEN {} AND {}".format, _value(k, depth), _value(k, 0), _value(k, 0))),
        st.builds("{} LIKE {}".format, text, patterns),
        st.builds("{} RLIKE {}".format, text, st.sampled_from(["'^1'", "'a'", "'[0-9]+'"])),
        st.builds("STARTSWITH({}, {})".format, text, st.sampled_from(["'1'", "'2024'", "''"])),
        kind.flatmap(lambda k: st.builds("{} IS {}".format, _value(k, depth), st.sampled_from(["NULL", "NOT NULL"]))),
        st.sampled_from(["b", "b2", "NOT b"]),
    ]
    leaf = st.one_of(*shapes)
    if depth == 0:
        return leaf
    inner = _predicate(depth - 1)
    return st.one_of(
        leaf,
        st.builds("({}) AND ({})".format, inner, inner),
        st.builds("({}) OR ({})".format, inner, inner),
        st.builds("NOT ({})".format, inner),
    )


def _values(spark: Any, texts: list[str], ansi: bool, keys: list[int] | None = None) -> list[tuple[Any, ...]] | None:
    """(k, value of each text) for every row (or the rows `keys`), in one query; None when Spark fails it."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(ROWS, SCHEMA)
    if keys is not None:
        frame = frame.where(F.col("k").isin(keys))
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
    try:
        return [tuple(r) for r in frame.select("k", *[F.expr(t).alias(f"c{i}") for i, t in enumerate(texts)]).collect()]
    except Exception:  # the query fails in this mode: it reads nothing
        return None
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


def _true_rows(spark: Any, text: str, ansi: bool) -> set[int]:
    """The rows (by k) on which `text` is TRUE in the mode, where a query over that row alone succeeds."""
    found = _values(spark, [text], ansi)
    if found is None:
        found = [v for row in ROWS for v in _values(spark, [text], ansi, [row[0]]) or []]
    return {k for k, value in found if value is True}


def _agreeing_conjuncts(text: str) -> list[str]:
    """The conjuncts pruning reads `text` as (`SAFE_PASSES`) whose bits and ranges it uses, as deltaopt's
    session renders a feature of that text for Spark."""
    from optimizer.skipping.agreement import predicate_agrees
    from optimizer.spark_expr import safe_sql
    from querylog.errors import QueryLogError
    from querylog.predicates.normalize import SAFE_PASSES, normalize_conjuncts, sql
    from querylog.predicates.parse import parse_condition

    try:
        conjuncts = normalize_conjuncts(parse_condition(text), passes=SAFE_PASSES)
        return [safe_sql(sql(c)) for c in conjuncts if predicate_agrees(c, TYPES)]
    except QueryLogError:
        return []  # not read as a predicate, or its text not as a feature: nothing computed from it


def _check(spark: Any, texts: list[str]) -> None:
    pairs = [(text, c) for text in texts for c in _agreeing_conjuncts(text)]
    if not pairs:
        return
    computed = _values(spark, [f"COALESCE(({c}), FALSE)" for _, c in pairs], ansi=False)
    for n, (text, conjunct) in enumerate(pairs):
        if computed is None:
            rows = _values(spark, [f"COALESCE(({conjunct}), FALSE)"], ansi=False)
            bits = {k for k, v in rows or [] if v is True}
            if rows is None:
                continue  # deltaopt's session fails on the feature: it has no bits
        else:
            bits = {row[0] for row in computed if row[1 + n] is True}
        for ansi in (False, True):
            lost = _true_rows(spark, text, ansi) - bits
            assert not lost, f"ANSI {ansi}: {text!r} is TRUE on rows {sorted(lost)}, its conjunct {conjunct!r} not"


SHAPES = [  # from the reviews: outside the grammar, or in it and agreeing
    "g = 16777217",
    "s > 1",
    "i < '3000000000'",
    "s = 1 OR s = 2",
    "d = '2024-02-29' OR d = '1970-01-01'",
    "b = s LIKE 't%'",
    "'900' || i + 1 = 9001",
    "q = 0.5",
    "d > '2024-02-28'",
    "t >= '2024-02-29'",
    "LENGTH(s) > 0 AND p * (1 - f) > 1",
    "SUBSTRING(s, 1, 4) IN ('2024', '3000')",
    "MONTH(d) = 2 AND s LIKE '%1'",
    "CAST(i AS INT) = 1",
    "n + 1 < 0",
    "d > DATE '2024-01-31' + INTERVAL '1' MONTH",
    "DATEDIFF(d, t) > 1 AND DATE_ADD(d, n) < DATE '2025-01-01'",
    "DATE_TRUNC('MONTH', t) = DATE '2024-02-01'",
    "IF(CAST(1 AS INT) <> '3000000000', DATE '2024-02-29', t) IS NOT NULL",
]


@pytest.mark.parametrize("text", SHAPES)
def test_review_shapes_agree_or_are_unused(spark, text):
    _check(spark, [text])


def _generated(examples: int) -> Any:
    """The property over `examples` lists of 30 generated predicates (a Spark query per mode each)."""

    @settings(
        max_examples=examples,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # a shrink costs a Spark query a step: the failure names its conjunct
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(predicates=st.lists(_predicate(2), min_size=30, max_size=30))
    def check(spark: Any, predicates: list[str]) -> None:
        _check(spark, predicates)

    return check


# Every run draws 60 predicates (25 s in a full run on a slow day, both examples); the slow tier draws 1,200.
test_generated_predicates_agree_where_the_grammar_says = _generated(2)
test_generated_predicates_agree_where_the_grammar_says_at_length = pytest.mark.slow(_generated(40))
