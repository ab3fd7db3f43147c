"""Layout health (Snowflake's clustering depth and overlaps) from Delta min/max statistics."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.skipping.health import column_health
from optimizer.table.access import DataFile


def files_with(ranges: list[tuple[int | None, int | None]]) -> list[DataFile]:
    return [
        DataFile(f"f{i}", 1, 1, min_values={"X": low} if low is not None else {}, max_values={"X": high})
        for i, (low, high) in enumerate(ranges)
    ]


def test_a_perfect_layout_and_a_random_one():
    perfect = column_health(files_with([(0, 9), (10, 19), (20, 29), (30, 30)]), "x")
    assert (perfect.average_overlaps, perfect.average_depth, perfect.constant_files) == (0.0, 1.0, 1)
    spread = column_health(files_with([(0, 30), (1, 29), (2, 28)]), "x")
    assert spread.average_overlaps == 2.0 and spread.average_depth == 2.0  # points 0,1,2,28,29,30: 1,2,3,3,2,1


def test_files_without_bounds_are_counted_apart():
    health = column_health(files_with([(0, 9), (None, None), (5, None)]), "x")
    assert health.files == 1 and health.without_stats == 2
    assert column_health(files_with([(0, 1), ("a", "b")]), "x").without_stats == 2  # no order across types


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), min_size=1, max_size=30))
def test_the_sweep_agrees_with_counting_pairs_and_points(pairs):
    ranges = [(low, low + width) for low, width in pairs]
    health = column_health(files_with(ranges), "x")
    overlaps = [
        sum(1 for j, (a, b) in enumerate(ranges) if j != i and a <= hi and lo <= b) for i, (lo, hi) in enumerate(ranges)
    ]
    points = sorted({v for pair in ranges for v in pair})
    depths = [sum(1 for a, b in ranges if a <= p <= b) for p in points]
    assert health.average_overlaps == round(sum(overlaps) / len(ranges), 2)
    assert health.average_depth == round(sum(depths) / len(points), 2)
