"""Soundness of join-induced skipping when the dimension changes between layout and query.

A fact table is laid out (by its dimension attribute, as joined features do, or in any order), each
file keeping its key set and min/max of the join key; then the dimension changes (attributes
reassigned, keys added or removed); then a query filters the dimension, and the join-derived filters
(`optimizer.joins.key_filters`, the deriver's own code) are judged by the pruning against the files'
statistics. No file holding a fact row that joins a dimension row satisfying the filter may be skipped,
whatever the change."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optimizer.joins import key_filters
from optimizer.skipping.filestats import FileStats, column_bounds
from optimizer.skipping.pruning import might_match, prepare
from tests.skipping.tiers import DEFAULT_TIER, SLOW_TIER

ATTRIBUTES = 5


@st.composite
def scenarios(draw):  # type: ignore[no-untyped-def]
    size = draw(st.integers(1, 60))
    before = {k: draw(st.integers(0, ATTRIBUTES - 1)) for k in range(size)}
    facts = draw(st.lists(st.one_of(st.none(), st.integers(0, size + 10)), min_size=1, max_size=80))
    by_attribute = draw(st.booleans())
    if by_attribute:  # laid out by the attribute as it was (a joined feature), NULL and unknown keys first
        facts = sorted(facts, key=lambda k: (k is not None and k in before, before.get(k, -1) if k is not None else -1))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(len(facts) - 1, 1)), max_size=8))))
    files = [facts[a:b] for a, b in zip([0, *cuts], [*cuts, len(facts)], strict=True) if facts[a:b]]
    without_keys = draw(st.sets(st.integers(0, len(files) - 1)))  # files whose key set was too large to keep
    after = dict(before)
    for key in draw(st.lists(st.integers(0, size + 10), max_size=10)):
        after[key] = draw(st.integers(0, ATTRIBUTES - 1))  # reassigned, or a new key
    for key in draw(st.lists(st.integers(0, size + 10), max_size=5)):
        after.pop(key, None)
    wanted = draw(st.sets(st.integers(0, ATTRIBUTES - 1), min_size=1, max_size=3))
    limits = draw(st.sampled_from([(1, 4), (3, 10), (32, 1000), (2, 0)]))
    return files, without_keys, after, wanted, limits


def _stats(index: int, rows: list[int | None], with_keys: bool) -> FileStats:
    present = [k for k in rows if k is not None]
    low, high = (min(present), max(present)) if present else (None, None)
    bounds = column_bounds("bigint", low, high, len(rows) - len(present), True)
    keys = {"k": frozenset(present)} if with_keys else {}
    return FileStats(f"f{index}", len(rows), {"k": bounds}, keys=keys)


def _check(files, without_keys, after, wanted, limits):  # type: ignore[no-untyped-def]
    max_in, max_keys = limits
    joining = sorted(k for k, a in after.items() if a in wanted)
    if not joining:
        return  # nothing joins: the deriver states no filter, the scan is unfiltered
    conjuncts = key_filters("k", joining, joining[0], joining[-1], max_in=max_in, max_keys=max_keys)
    predicate = prepare(" AND ".join(f"({c})" for c in conjuncts))
    for i, rows in enumerate(files):
        holds_match = any(k is not None and after.get(k) in wanted for k in rows)
        if holds_match:
            stats = _stats(i, rows, i not in without_keys)
            assert might_match(predicate, stats), f"file {rows} skipped by {conjuncts}"


@DEFAULT_TIER
@given(scenarios())
def test_no_file_joining_the_changed_dimension_is_skipped(scenario):
    _check(*scenario)


@pytest.mark.slow
@SLOW_TIER
@given(scenarios())
def test_the_same_on_5000_examples(scenario):
    """The issue's slow-tier property (`make test-slow`)."""
    _check(*scenario)


def test_key_sets_skip_where_min_max_cannot():
    """The property has teeth: a file whose key range covers the derived keys but holds none of them
    is skipped by its key set alone (and read without one)."""
    conjuncts = key_filters("k", [1, 2, 9], 1, 9, max_in=2, max_keys=10)
    assert any(" IN " in c for c in conjuncts), conjuncts  # scattered: the list besides the range
    predicate = prepare(" AND ".join(f"({c})" for c in conjuncts))
    assert not might_match(predicate, _stats(0, [0, 3, 10], True))
    assert might_match(predicate, _stats(0, [0, 3, 10], False))
    assert might_match(predicate, _stats(0, [3, 9], True))
