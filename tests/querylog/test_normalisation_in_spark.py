"""Canonical text means in Spark what the query meant, in both ANSI modes: SOP bits and expression ranges
are computed by Spark on canonical text and used for queries Spark runs as written (review 65's reviews
found passes that changed Spark's types: ``3.0`` made ``3``, ``b1 = (b2 IS NULL)`` made ``b1 = b2 IS NULL``,
ORed date equalities made a list Spark compares as strings without ANSI).

Each example evaluates a batch of predicates, as written and as their canonical conjuncts, on the same
rows in one Spark query per mode, and compares the three-valued results row by row. Predicates come from
the pruning oracle's language plus shapes that meet Spark's typing rules."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.skipping.oracle import SINGLES, predicate_strategy, row_strategy

pytestmark = pytest.mark.spark

SCHEMA = "i bigint, f double, s string, d date, t timestamp, b boolean, p decimal(10,2), g float, b2 boolean"
TYPED_SHAPES = [  # Spark's typing meets the normaliser: literal spellings, parentheses, lists, strings and numbers
    "i / 3.0 = 0.333333",
    "i * 10.0 > 5",
    "p * 1.0 / 3 > 0.1",
    "b = (b2 IS NULL)",
    "b <> (s LIKE '%b')",
    "b = (i > 2)",
    "(i > 2) = (s IS NULL)",
    "d = '2024-2-29' OR d = '2024-03-01'",
    "d = '2024-02-29' OR d = '1970-01-01'",
    "s = 1 OR s = 2",
    "s = '1' OR s = '2'",
    "COALESCE(s, '0') = 0",
    "p = 3.50 OR p = 99.990",
    "g = 16777217 OR g = 0.5",
    "f = 2.0 OR f = 2.25",
    "NOT (i IN (1, 2.0))",
    # drawn in a run as NOT (d IN ('2024-03-01 ')): TRUE on 2024-02-29 as written without ANSI (the list compares
    # as text), FALSE as canonical text (a one-element list is an equality, which compares as dates)
    "NOT (d IN ('2024-02-29 '))",
    "NOT (d IN ('2024-2-29'))",
    "i BETWEEN 1.0 AND 3",
    "b = (b2 <=> (i > 2))",  # review 65e: a <=> left unparenthesised, LIKE and BETWEEN bound apart, chains
    "b = s LIKE 't%'",
    "b = b2 BETWEEN b AND (i > 2)",
    "b2 < (i > 2) = b",
]


NULLS = dict.fromkeys(c.split()[0] for c in SCHEMA.split(", "))


def _rows() -> st.SearchStrategy:
    extra = {"b2": st.one_of(st.none(), st.booleans()), "s": st.sampled_from(["1", "01", "2", "a", None, "x" * 33])}
    return st.lists(
        st.builds(
            lambda r, b2, s: {**r, "b2": b2, "s": s if s is not None else r["s"]}, row_strategy(), *extra.values()
        ),
        min_size=8,
        max_size=16,
    )


def _canonical(text: str) -> list[str]:
    from querylog.predicates.normalize import canonical_conjuncts
    from querylog.predicates.parse import parse_condition

    return canonical_conjuncts(parse_condition(text))


def _joined(conjuncts: list[str]) -> str:
    return " AND ".join(f"({c})" for c in conjuncts) if conjuncts else "TRUE"


def _frame(spark: Any, rows: list[dict[str, Any]]) -> Any:
    columns = [c.split()[0] for c in SCHEMA.split(", ")]
    return spark.createDataFrame([tuple(r[c] for c in columns) for r in rows], SCHEMA)


def _values(spark: Any, frame: Any, texts: list[str], ansi: bool) -> list[tuple[Any, ...]] | None:
    """Each row's value of every text, in one query; None when Spark refuses the batch in this mode."""
    from pyspark.sql import functions as F

    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
    try:
        selected = frame.select(*[F.expr(t).alias(f"c{i}") for i, t in enumerate(texts)])
        return [tuple(r) for r in selected.collect()]
    except Exception:  # an error in one mode (a bad cast under ANSI): the query reads nothing there
        return None
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


def _check(spark: Any, texts: list[str], rows: list[dict[str, Any]]) -> None:
    """Each text against its canonical form, row by row, in both modes (all in one query per mode, or text
    by text where the batch fails: a text that fails alone reads nothing in that mode). Where a row makes
    the text TRUE and its canonical form not, the form's bits and ranges must never be used: pruning
    leaves it outside the grammar its bits are used in (`agreement`), since they are computed on the
    canonical text; or pruning reads the query itself by no conjunct in that grammar: it reads a query by its
    `SAFE_PASSES` conjuncts, never by the canonical text (``NOT (d IN ('2024-03-01 '))``: Spark compares the
    list as text without ANSI, its canonical ``NOT d = '2024-03-01 '`` as a date; pruning keeps the list, which
    it does not read: tests/skipping/test_lists_as_spark_types_them.py keeps such a file)."""
    frame = _frame(spark, rows)
    pairs = [(text, _joined(_canonical(text))) for text in texts]
    for ansi in (False, True):
        batch = _values(spark, frame, [t for pair in pairs for t in pair], ansi)
        for k, (text, normal) in enumerate(pairs):
            values = [v[2 * k : 2 * k + 2] for v in batch] if batch is not None else None
            values = values if values is not None else _values(spark, frame, [text, normal], ansi) or []
            lost = [
                rows[n] for n, (original, canonical) in enumerate(values) if original is True and canonical is not True
            ]
            assert not lost or _unused(_canonical(text)) or _unused(_pruned(text)), (ansi, text, normal, lost[:3])


def _pruned(text: str) -> list[str]:
    """The conjuncts pruning reads `text` by: `prepare`'s own."""
    from optimizer.skipping.pruning import prepare
    from querylog.predicates.normalize import sql

    return [sql(c) for c in prepare(text).conjuncts]


def _unused(conjuncts: list[str]) -> bool:
    """Whether pruning uses no bit or range for `conjuncts` (none is in `agreement`'s grammar)."""
    from optimizer.skipping.agreement import predicate_agrees
    from querylog.predicates.normalize import parse_canonical

    types = {c.split()[0]: c.split()[1] for c in SCHEMA.split(", ")}
    return not any(predicate_agrees(parse_canonical(c), types, frozenset({"s"})) for c in conjuncts)


@pytest.mark.parametrize("text", TYPED_SHAPES)
def test_typed_shapes_mean_the_same_in_spark(spark, text):
    rows = [
        {
            "i": 1,
            "f": 2.0,
            "s": "01",
            "d": dt.date(2024, 2, 29),
            "t": None,
            "b": True,
            "p": Decimal("3.50"),
            "g": SINGLES[4],
            "b2": None,
        },
        {
            "i": 3,
            "f": 2.25,
            "s": "1",
            "d": dt.date(1970, 1, 1),
            "t": None,
            "b": False,
            "p": Decimal("99.99"),
            "g": 0.5,
            "b2": False,
        },
        {"i": 300000000, "f": None, "s": "a", "d": None, "t": None, "b": None, "p": None, "g": None, "b2": True},
        {**NULLS, "b": False, "b2": True},
        {**NULLS, "b": True, "s": "1", "b2": False, "i": 3},
    ]
    _check(spark, [text], rows)


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(predicates=st.lists(predicate_strategy(), min_size=25, max_size=25), rows=_rows())
def test_generated_predicates_mean_the_same_in_spark(spark, predicates, rows):
    _check(spark, [text for text, _ in predicates], rows)
