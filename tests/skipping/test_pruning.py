"""Sound pruning: a file holding a matching row is never skipped (property tests against the oracle
in `tests.skipping.oracle`), and what each rule skips (golden cases in fixtures/skipping/pruning.txt)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.skipping.pruning import might_match, prepare
from tests.golden import load_cases
from tests.skipping.oracle import ANSI, predicate_strategy, row_from_json, row_strategy, stats_for


def _check_soundness(rows: list[dict[str, Any]], cuts: list[int], predicate: tuple[str, Any], writer: str) -> None:
    text, oracle = predicate
    bounds = sorted({0, len(rows), *[c % (len(rows) + 1) for c in cuts]})
    prepared = prepare(text)
    for n, (start, end) in enumerate(itertools.pairwise(bounds)):
        part = rows[start:end]
        # a row matching in either ANSI mode (users' sessions have either) must keep its file
        if part and any(oracle({**r, ANSI: ansi}) is True for r in part for ansi in (True, False)):
            assert might_match(prepared, stats_for(part, writer, f"f{n}")), (text, writer, part)


SOUNDNESS_CASES = {
    "rows": st.lists(row_strategy(), min_size=1, max_size=24),
    "cuts": st.lists(st.integers(0, 24), max_size=5),
    "predicate": predicate_strategy(),
    "writer": st.sampled_from(["ours", "foreign"]),
}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SOUNDNESS_CASES)
def test_a_file_with_a_matching_row_is_never_skipped(rows, cuts, predicate, writer):
    _check_soundness(rows, cuts, predicate, writer)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SOUNDNESS_CASES)
def test_soundness_on_many_more_examples(rows, cuts, predicate, writer):
    """The same property with 5000 examples (`make test-slow`)."""
    _check_soundness(rows, cuts, predicate, writer)


PRUNING_CASES = load_cases("skipping/pruning.txt")


@pytest.mark.parametrize("case", PRUNING_CASES, ids=lambda c: c.title)
def test_pruning_cases(case):
    rows = [row_from_json(r) for r in json.loads(case.meta["rows"])]
    stats = stats_for(rows, case.meta.get("writer", "ours"))
    kept = might_match(prepare(case.source), stats)
    (expected,) = case.expected
    assert ("keep" if kept else "skip") == expected, f"{case.source!r} on {case.meta['rows']}"


CHECKED_SKIP_CASES = 13  # every golden 'skip' case today; a case outside the oracle's language lowers it


def test_every_skip_answer_has_no_matching_row():
    """The golden 'skip' answers are themselves checked: no row of a skipped file matches (oracle)."""
    from querylog.predicates.parse import parse_condition
    from tests.skipping.oracle import OutsideLanguage, evaluate_tree

    skips = [case for case in PRUNING_CASES if case.expected == ("skip",)]
    outside = []
    for case in skips:
        rows = [row_from_json(r) for r in json.loads(case.meta["rows"])]
        try:
            tree = parse_condition(case.source)
            values = [evaluate_tree(tree, row) for row in rows]
        except OutsideLanguage:
            outside.append(case.title)  # the SOP/extended statistics decide those
            continue
        assert not any(v is True for v in values), f"{case.title}: a row matches, yet the case says skip"
    checked = len(skips) - len(outside)
    assert checked >= CHECKED_SKIP_CASES, f"only {checked} of {len(skips)} skip cases checked; outside: {outside}"


def test_the_sop_bit_for_a_file_without_matches_is_clear():
    stats = stats_for([row_from_json({"i": 0, "s": "ba"})])
    assert stats.sop["i > 5"] is False, "no row has i > 5, so its bit must be clear"


@settings(max_examples=400, deadline=None)
@given(
    low=st.one_of(st.none(), st.integers(-20, 20)),
    width=st.one_of(st.none(), st.integers(0, 15)),
    nan=st.booleans(),
    items=st.lists(st.one_of(st.none(), st.integers(-30, 30)), min_size=1, max_size=40),
)
def test_an_in_list_is_judged_as_its_values_one_by_one(low, width, nan, items):
    """The IN leaf's binary search over the sorted list answers what comparing each value did (the
    per-value answers of `_compare`, with NULL items never making the list FALSE)."""
    from sqlglot import exp

    from optimizer.skipping.filestats import Bounds, FileStats
    from optimizer.skipping.pruning import _compare, _in

    high = None if width is None else (low or 0) + width
    bounds = Bounds("number", low, high, nulls=0, nan_possible=nan, type_name="bigint")
    stats = FileStats("f", 100, {"x": bounds})
    node = exp.In(this=exp.column("x"), expressions=[exp.Null() if i is None else exp.Literal.number(i) for i in items])
    present = [i for i in items if i is not None]
    expected = (
        any(_compare(exp.EQ, bounds, v)[0] for v in present),
        None not in items and all(_compare(exp.EQ, bounds, v)[1] for v in present),
    )
    assert _in(node, stats) == expected
