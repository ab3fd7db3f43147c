"""Pruning reads a query as Spark types it: a list stays a list, an OR of equalities an OR, and a LIKE
with an ESCAPE a LIKE. Each fact below was checked in pyspark 4.0 in both ANSI modes."""

from __future__ import annotations

import datetime as dt

import pytest

from optimizer.skipping.filestats import FileStats, column_bounds
from optimizer.skipping.pruning import might_match, prepare

LEAP_DAY = dt.date(2024, 2, 29)
ONLY_LEAP_DAY = FileStats("f", 1, {"d": column_bounds("date", LEAP_DAY, LEAP_DAY, 0, True)})


@pytest.mark.parametrize(
    "text",
    [
        "d NOT IN ('2024-2-29')",  # without ANSI the list compares as text: '2024-02-29' is not '2024-2-29'
        "NOT d IN ('2024-02-29 ')",
        "d NOT IN ('2024-2-29', '2024-2-28')",
        "NOT (d IN ('2024-2-29') OR d IN ('2025-01-01'))",
    ],
)
def test_a_date_against_strings_not_spelled_as_spark_writes_dates_keeps_the_file(text):
    """TRUE on 2024-02-29 without ANSI (FALSE with it): the normaliser made ``d = '2024-2-29'`` of the list,
    which compares as dates in both modes, and the file was skipped."""
    assert might_match(prepare(text), ONLY_LEAP_DAY)


def test_a_date_against_strings_spelled_as_spark_writes_dates_still_prunes():
    assert not might_match(prepare("d NOT IN ('2024-02-29')"), ONLY_LEAP_DAY)
    assert not might_match(prepare("d IN ('2024-03-01', '2025-01-01')"), ONLY_LEAP_DAY)


def test_a_timestamp_against_strings_keeps_the_file():
    moment = dt.datetime(2024, 2, 29, 12, tzinfo=dt.UTC)
    stats = FileStats("f", 1, {"t": column_bounds("timestamp", moment, moment, 0, True)})
    assert might_match(prepare("t NOT IN ('2024-02-29 12:00:00')", zone="UTC"), stats)


def test_like_with_an_escape_is_not_a_prefix_test():
    """``'a!x' LIKE 'a!!%' ESCAPE '!'`` is TRUE (the prefix is ``a!``); the normaliser made it
    ``STARTSWITH(s, 'a!!') ESCAPE '!'``, a text no parser reads, so the query log could not keep it."""
    from querylog.predicates.normalize import canonical_conjuncts, parse_canonical
    from querylog.predicates.parse import parse_condition

    stats = FileStats("f", 1, {"s": column_bounds("string", "a!x", "a!x", 0, True)})
    assert might_match(prepare("s LIKE 'a!!%' ESCAPE '!'"), stats)
    (text,) = canonical_conjuncts(parse_condition("s LIKE 'a!!%' ESCAPE '!'"))
    assert text == "s LIKE 'a!!%' ESCAPE '!'" and parse_canonical(text) is not None
