"""The workload's Z-order bit pattern as the estimate measures it (`estimate.workload_bits`): a pattern
that stays the same from one run to the next for the same workload (merging and drift find runs by their
layout key), and filters that fail on the sample without hiding a bug in deltaopt."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.clustering.curves import key_bit_order
from optimizer.clustering.groups import layout_key
from optimizer.clustering.precision import allocate_bits, allocation_bits, workload_pattern
from optimizer.estimate import workload_bits
from optimizer.estimate.replay import Query
from optimizer.features import DIMENSION_BITS, KEY_BITS, FeatureSet, ZFeature
from optimizer.skipping.pruning import prepare

TWO = FeatureSet(z=(ZFeature("x"), ZFeature("y")))


def _queries() -> list[Query]:
    """24 narrow scans of x, 2 broad ones of y (as `tests/clustering/test_precision.py`'s workload)."""
    narrow = [Query(prepare(f"x >= {a} AND x < {a + 10}"), None, 1.0) for a in range(15, 975, 40)]
    broad = [Query(prepare(f"y >= {b} AND y < {b + 500}"), None, 1.0) for b in (0, 400)]
    return narrow + broad


def _counted(rows: int, queries: list[Query]):
    """`_matching_rows` as Spark would count the workload on a sample of `rows` rows of x in 0..999 and y
    in 0..996 spread evenly: 1% of the rows for a narrow x filter, about half for a broad y one."""

    def matching(sample, features, filters):
        assert set(filters) == {(q, 0) for q in range(24)} | {(24, 1), (25, 1)}
        return rows, {pair: rows // 100 if pair[1] == 0 else rows // 2 for pair in filters}

    return matching


def test_the_same_workload_gives_the_same_pattern_whatever_the_file_count(monkeypatch):
    """Merging finds the runs to join the new data by the chosen layout's key, drift the groups laid out
    another way: a pattern that followed the run's file count (its bits per dimension) changed with the
    bytes each tick rewrites, so no run laid out with workload bits ever matched the next decision's."""
    queries = _queries()
    monkeypatch.setattr(workload_bits, "_matching_rows", _counted(20_000, queries))
    patterns = {files: workload_bits.workload_precision(None, TWO, queries, files) for files in (24, 80, 300)}
    assert patterns[24][:3] == (0, 0, 0), patterns  # x's narrow, frequent filters lead the key
    assert len(set(patterns.values())) == 1, patterns
    keys = {layout_key(FeatureSet(z=TWO.z, precision=p)) for p in patterns.values()}
    assert len(keys) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 100), min_size=2, max_size=9),
    st.data(),
)
def test_the_job_orders_its_bits_as_the_greedy_over_the_bits_it_has(weights, data):
    """The pattern is given out over every bit a dimension can have; a job whose range ids have fewer
    (its file count, a dimension of few distinct values) passes over the rest: its key is the greedy's
    own over its bits, so pricing the pattern prices the allocation the docs describe."""
    d = len(weights)
    cap = allocation_bits(d)[0]
    assert d * cap <= KEY_BITS and cap <= DIMENSION_BITS
    bits = data.draw(st.lists(st.integers(1, cap), min_size=d, max_size=d))
    pattern = workload_pattern(weights, bits)
    FeatureSet(z=tuple(ZFeature(f"c{i}") for i in range(d)), precision=pattern)  # a pattern the record accepts
    assert key_bit_order(bits, pattern) == key_bit_order(bits, allocate_bits(weights, bits))


@pytest.mark.spark
def test_a_filter_the_sample_refuses_is_a_warning_but_a_bug_keeps_its_traceback(spark, monkeypatch, caplog):
    """Filters shared by queries are counted once; one the allow-list or Spark refuses drops the candidate
    with a warning naming why; a wrong call in deltaopt is not taken for a refused filter."""
    from pyspark.sql import functions as F

    from optimizer.spark_expr import predicate_bit

    sample = spark.range(100).select(F.col("id").alias("x"), (F.col("id") % 7).alias("y"))
    counted = workload_bits._matching_rows(sample, TWO, {(0, 0): ["x >= 10", "x < 20"], (1, 1): ["y = 3"]})
    assert counted == (100, {(0, 0): 10, (1, 1): 14})
    with caplog.at_level(logging.WARNING, logger=workload_bits.__name__):
        assert workload_bits._matching_rows(sample, TWO, {(0, 0): ["rand() > 0.5"]}) is None  # the allow-list
        assert workload_bits._matching_rows(sample, TWO, {(0, 0): ["z > 1"]}) is None  # Spark's analysis
    warned = [r.getMessage() for r in caplog.records if r.name == workload_bits.__name__]
    assert len(warned) == 2 and all("workload bits not priced" in m for m in warned), warned
    assert "allow-list" in warned[0] and "`z`" in warned[1], warned  # each names why

    calls: list[str] = []

    def counting(text: str):
        calls.append(text)
        return predicate_bit(text)

    monkeypatch.setattr(workload_bits, "predicate_bit", counting)
    shared = {(0, 0): ["x >= 10", "x < 20"], (1, 0): ["x >= 10", "x < 20"], (1, 1): ["y = 3"], (2, 1): ["y = 3"]}
    assert workload_bits._matching_rows(sample, TWO, shared) == (100, {(0, 0): 10, (1, 0): 10, (1, 1): 14, (2, 1): 14})
    assert sorted(calls) == ["x < 20", "x >= 10", "y = 3"]  # one count per distinct filter, not per query

    def wrong_call(text: str):
        raise TypeError("a wrong call in deltaopt")

    monkeypatch.setattr(workload_bits, "predicate_bit", wrong_call)
    with pytest.raises(TypeError, match="wrong call"):
        workload_bits._matching_rows(sample, TWO, {(0, 0): ["x >= 10"]})


def test_a_workload_of_many_literals_counts_only_its_heaviest_distinct_filters(monkeypatch):
    """One distinct filter per parameter value: the aggregation would grow with the workload. The count is
    capped at the filters the workload weighs most; the rest, the lightest, are not counted."""
    monkeypatch.setattr(workload_bits, "MAX_DISTINCT_FILTERS", 8)
    queries = [Query(prepare(f"x = {v}"), None, 1.0 + v / 100) for v in range(40)]
    queries += [Query(prepare("y < 5"), None, 0.5)]
    counted: list[set[tuple[int, int]]] = []

    def matching(sample, features, filters):
        counted.append(set(filters))
        return 1000, dict.fromkeys(filters, 10)

    monkeypatch.setattr(workload_bits, "_matching_rows", matching)
    workload_bits.workload_precision(None, TWO, queries, 64)

    assert counted == [{(q, 0) for q in range(32, 40)}]  # the 8 heaviest x filters; y's lightest is left out
