"""The offline race's emulated min/max reader (`benchmarks.race_offline`): sound, and exact on single rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.race_offline import Coded, Layout, units
from optimizer.clustering.cut_growth import Comparison

MODES = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"]


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.integers(0, 20), min_size=1, max_size=60),
    op=st.sampled_from(["<", "<=", ">", ">=", "=", "in"]),
    literals=st.lists(st.integers(-2, 22), min_size=1, max_size=3),
    cuts=st.lists(st.integers(1, 59), max_size=8),
)
def test_a_unit_holding_a_matching_row_is_always_kept_and_a_row_is_kept_exactly_when_it_matches(
    rows, op, literals, cuts
):
    coded = Coded.of(pa.table({"x": pa.array(rows, pa.int64())}))
    values = tuple(literals) if op in ("in", "=") else (literals[0],)
    comparison = Comparison("x", op, "number", values[:1] if op == "=" else values)
    ranks = coded.ranks["x"]
    matches = np.array([_holds(v, comparison) for v in rows])
    assert (coded.may_hold(comparison, ranks, ranks) == matches).all()
    starts = np.unique(np.array([0, *[c for c in cuts if c < len(rows)]]))
    low, high = np.minimum.reduceat(ranks, starts), np.maximum.reduceat(ranks, starts)
    kept = coded.may_hold(comparison, low, high)
    unit = np.searchsorted(starts, np.arange(len(rows)), side="right") - 1
    assert kept[unit[matches]].all()  # never a unit skipped that holds a matching row


def _holds(value: int, comparison: Comparison) -> bool:
    literal = comparison.values[0]
    return {
        "<": value < literal,
        "<=": value <= literal,
        ">": value > literal,
        ">=": value >= literal,
        "=": value == literal,
        "in": value in comparison.values,
    }[comparison.op]


def test_a_string_in_list_skips_the_units_between_its_items_by_min_and_max_only():
    coded = Coded.of(pa.table({"m": MODES}))
    ranks = coded.ranks["m"]
    comparison = Comparison("m", "in", "string", ("MAIL", "SHIP"))
    # units {AIR, FOB}, {MAIL, RAIL}, {REG AIR}, {SHIP, TRUCK}: the first and third hold neither
    starts = np.array([0, 2, 4, 5])
    kept = coded.may_hold(comparison, np.minimum.reduceat(ranks, starts), np.maximum.reduceat(ranks, starts))
    assert kept.tolist() == [False, True, False, True]


def test_files_are_cut_into_row_groups_of_equal_rows_in_proportion_to_their_size():
    files = np.array([0] * 8 + [1] * 4 + [2] * 12)
    starts = units(Layout("x", np.arange(24), files), row_groups=2, file_rows=8)
    assert starts.tolist() == [0, 4, 8, 12, 16, 20]  # 2 groups in 8 rows, 1 in 4, 3 in 12
