"""A date literal plus or minus an interval literal, as TPC-H writes its ranges (Q1's ``l_shipdate <=
DATE '1998-12-01' - INTERVAL '90' DAY``, Q6's ``< DATE '1994-01-01' + INTERVAL '1' YEAR``): pruning folds
it as Spark does (pyspark 4.0, both ANSI modes: 1998-09-02, 1995-01-01, and a month past its end clamped,
``DATE '2024-01-31' + INTERVAL '1' MONTH`` is 2024-02-29), so such a range skips files by Delta's
statistics. Before, it was no constant to pruning and every file was read."""

from __future__ import annotations

import datetime as dt

import pytest

from optimizer.skipping.filestats import FileStats, column_bounds
from optimizer.skipping.pruning import might_match, prepare


def _holding(day: dt.date) -> FileStats:
    return FileStats("f", 1, {"d": column_bounds("date", day, day, 0, True)})


@pytest.mark.parametrize(
    ("text", "last_matching", "first_not"),
    [
        ("d <= DATE '1998-12-01' - INTERVAL '90' DAY", dt.date(1998, 9, 2), dt.date(1998, 9, 3)),
        ("d < DATE '1994-01-01' + INTERVAL '1' YEAR", dt.date(1994, 12, 31), dt.date(1995, 1, 1)),
        ("d < DATE '2024-01-31' + INTERVAL '1' MONTH", dt.date(2024, 2, 28), dt.date(2024, 2, 29)),
        ("d < DATE '2024-03-31' - INTERVAL 1 MONTH", dt.date(2024, 2, 28), dt.date(2024, 2, 29)),
        ("d < DATE '2024-02-29' + INTERVAL 1 YEAR", dt.date(2025, 2, 27), dt.date(2025, 2, 28)),
    ],
)
def test_a_date_shifted_by_an_interval_prunes_as_spark_folds_it(text, last_matching, first_not):
    assert might_match(prepare(text), _holding(last_matching))
    assert not might_match(prepare(text), _holding(first_not))


@pytest.mark.parametrize(
    "text",
    [
        "d < DATE '1994-01-01' + INTERVAL '1' HOUR",
        "d < DATE '1994-01-01' + INTERVAL '1-2' YEAR TO MONTH",
        # review 66b: a string minus an interval is the string '2024-03-02 00:00:00' to Spark, which a list
        # compares with a date as text without ANSI (TRUE on 2024-03-02)
        "d NOT IN ('2024-04-01' - INTERVAL 30 DAY)",
        "d <> '2024-04-01' - INTERVAL 30 DAY",
    ],
)
def test_an_interval_pruning_does_not_fold_keeps_the_file(text):
    assert might_match(prepare(text), _holding(dt.date(2100, 1, 1)))
    assert might_match(prepare(text), _holding(dt.date(2024, 3, 2)))
