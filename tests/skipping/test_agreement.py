"""Which predicates' SOP bits pruning uses (`optimizer.skipping.agreement`): the grammar's edges, and
bits of clock-dependent literals (review 66, finding 1: ``TIMESTAMP 'now'`` is read when the query runs,
so a bit computed earlier says nothing about it)."""

from __future__ import annotations

import pytest

from optimizer.skipping.agreement import predicate_agrees
from optimizer.skipping.filestats import FileStats, column_bounds
from optimizer.skipping.pruning import might_match, prepare
from querylog.predicates.tree import rendered

TYPES = {"i": "bigint", "p": "decimal(15,2)", "s": "string", "d": "date", "t": "timestamp", "b": "boolean"}
TYPES |= {"g": "float", "c": "char(5)", "a": "array<int>"}

AGREE = [
    "s IN ('MAIL', 'SHIP')",
    "s LIKE '%x%' AND NOT s IN ('a', 'b')",
    "p * (1 - p) > 100",
    "SUBSTRING(s, 1, 4) IN ('DELI', 'NONE')",
    "MONTH(d) = 3 OR YEAR(d) > 1995",
    "d < t",
    "d >= DATE '1995-01-01' AND d > '1995-01-01'",
    "d > DATE '1995-01-01' + INTERVAL 30 DAY",
    "DATEDIFF(d, d) > 20 AND DATE_ADD(d, 30) > d",
    "DATE_TRUNC('MONTH', d) = DATE '2024-02-01' AND d - INTERVAL '1' YEAR > d",
    "COALESCE(s, 'x') = 'x' AND CASE WHEN i > 1 THEN p ELSE 0 END > 1",
    "b AND s IS NOT NULL",
]
REFUSED = [
    "g = 16777217",  # FLOAT
    "c = 'ab'",  # CHAR pads
    "SIZE(a) > 1",
    "s > 1",  # a string meeting a number
    "d IN ('2024-2-29', '2024-03-01')",  # a date meeting a list of strings
    "b = (s LIKE 't%')",  # a predicate used as a value
    "'900' || i + 1 = 9001",
    "t <= TIMESTAMP 'now'",
    "d < DATE 'tomorrow'",
    "d = 'today'",
    "t > '12:00:00'",
    "d < CURRENT_DATE()",
    "MY_UDF(s) = 1",
    "IF(i <> '3000000000', d, NULL) IS NOT NULL",  # review 66's run: IS NULL of a value outside the grammar
    "d + INTERVAL '23' HOUR >= d",  # review 66b: a timestamp in the session zone
    "DATEDIFF(HOUR, d, t) = 23",  # review 66b: hours across a daylight-saving day differ between zones
    "DATE_TRUNC('HOUR', d) = DATE_TRUNC('HOUR', t)",
]


@pytest.mark.parametrize("text", AGREE)
def test_shapes_workloads_use_are_in_the_grammar(text):
    assert all(predicate_agrees(c, TYPES) for c in prepare(text).conjuncts), text


@pytest.mark.parametrize("text", REFUSED)
def test_shapes_a_reader_may_read_otherwise_are_not(text):
    assert not all(predicate_agrees(c, TYPES) for c in prepare(text).conjuncts), text


@pytest.mark.parametrize("text", ["t <= TIMESTAMP 'now'", "d < DATE 'tomorrow'", "d >= 'yesterday'"])
def test_a_bit_of_a_clock_dependent_literal_is_not_used(text):
    """The bit says no row matched when it was computed; a row dated after that matches later."""
    columns = {
        "t": column_bounds("timestamp", None, None, 0, True),
        "d": column_bounds("date", None, None, 0, True),
    }
    (conjunct,) = prepare(text, zone="UTC").conjuncts
    stats = FileStats("f", 1, columns, sop={rendered(conjunct): False}, zone="UTC")
    assert might_match(prepare(text, zone="UTC"), stats), text
