"""Issue 48's race measure (`benchmarks.kept_share`): which conjuncts a min/max reader can test, and the kept
share over the bound on a table whose files' ranges are known by construction."""

from __future__ import annotations

import math

import pytest

from benchmarks.kept_share import kept_over_bound, min_max_where, race


def test_only_a_bare_column_against_literals_is_testable_by_min_max():
    where = (
        "(5 < x) AND (y BETWEEN 1 AND 2) AND (z IS NULL) AND (d IN (1, 2)) AND (MONTH(t) = 12) AND (b = c)"
        " AND (s LIKE '%a%') AND (t >= CAST('1998-05-15' AS DATE)) AND (x > -3) AND (x > 1 OR y < 2)"
    )
    assert min_max_where(where) == (
        "(5 < x) AND (y BETWEEN 1 AND 2) AND (z IS NULL) AND (d IN (1, 2)) AND (t >= CAST('1998-05-15' AS DATE))"
        " AND (x > -3)"
    )
    assert min_max_where("MONTH(t) = 12") is None
    assert min_max_where("x = 1") == "(x = 1)"
    assert min_max_where(None) is None


def test_the_summary_leaves_out_scans_without_a_bound_and_takes_the_geometric_mean():
    kept = [(1.0, 4.0), (2.0, 4.0), (4.0, 4.0), (1.0, 4.0)]  # shares 0.25, 0.5, 1, 0.25
    summary = kept_over_bound(kept, [0.25, 0.125, None, 0.0])
    assert (summary.scans, summary.left_out) == (2, 2)
    assert summary.geometric_mean == pytest.approx(math.sqrt(1.0 * 4.0))
    assert summary.p90 == pytest.approx(4.0)
    assert summary.kept_total == pytest.approx(8.0 / 16.0)
    assert summary.ratios == pytest.approx((1.0, 4.0, None, None))  # per scan, in order, for the report's JSON


@pytest.mark.spark
def test_a_range_sorted_table_keeps_a_file_per_quarter_of_the_range(spark, tmp_path):
    """Four files of 100 ids each, in order: `id < 100` keeps one file of four (bound a quarter: 1x),
    `id < 50` keeps the same file for an eighth of the rows (2x), a filter min/max cannot test is left out."""
    from optimizer.table import open_table

    path = str(tmp_path / "t")
    spark.range(400).selectExpr("id", "id * 7 % 13 AS v").repartitionByRange(4, "id").write.format("delta").save(path)
    held = [("id < 100", ("v",)), ("id < 50", ("v",)), ("id % 2 = 0", ("v",))]
    (figures,) = race(spark, {"t": open_table(path)}, held).values()
    assert (figures.scans, figures.left_out) == (2, 1)
    assert figures.geometric_mean == pytest.approx(math.sqrt(2.0), rel=0.1)
    assert figures.p90 == pytest.approx(2.0, rel=0.1)
