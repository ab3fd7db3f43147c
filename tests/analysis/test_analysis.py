"""Workload analyser: the thesis's worked examples, correlation properties, robustness, end to end."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.analysis.analyser import Role, analyse
from optimizer.analysis.correlation import (
    ZSample,
    mean_square_contingency,
    ordered_pair_counts,
    sop_correlation_graph,
    sort_index,
    tie_aware_sort_index,
    z_correlation_graph,
)
from optimizer.analysis.sample import Evaluation
from optimizer.analysis.traversal import traverse
from optimizer.config import Thresholds
from querylog.records import ScanRecord

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def brute_force(values: list[int]) -> tuple[int, int]:
    """The thesis's O(n²) definition, counting both directions."""
    ascending = descending = 0
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            ascending += values[j] > values[i]
            descending += values[j] < values[i]
    return ascending, descending


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=-3, max_value=3), max_size=60))
def test_sort_index_equals_the_quadratic_definition_with_ties(values):
    ascending, descending = brute_force(values)
    assert ordered_pair_counts(np.array(values)) == (ascending, descending)
    n = len(values)
    expected = 1.0 if n < 2 else ascending / (n * (n - 1) / 2)
    assert sort_index(np.array(values)) == pytest.approx(expected, abs=1e-12)


def test_thesis_example_array():
    assert sort_index(np.array([1, 3, 5, 2, 4])) == pytest.approx(0.7)


def z_sample(values) -> ZSample:
    codes = np.unique(np.asarray(values), return_inverse=True)[1]
    return ZSample(codes.astype(np.int64), np.zeros(len(values), dtype=bool))


def test_table_4_2_year_and_items_sold_are_correlated_by_order():
    year = [2017, 2018, 2015, 2014]
    items = [1024, 770, 3400, 3800]
    graph = z_correlation_graph({"year": z_sample(year), "items_sold": z_sample(items)}, epsilon=0.05)
    assert graph.has_edge("year", "items_sold")
    assert graph.edges["year", "items_sold"]["index"] == 0.0  # perfectly descending


def test_table_4_3_value_and_parity_correlate_by_contingency_not_by_order():
    value = np.arange(1, 201)
    parity = value % 2
    assert mean_square_contingency(value, parity) == pytest.approx(1.0)
    graph = z_correlation_graph({"value": z_sample(value), "parity": z_sample(parity)}, epsilon=0.05)
    assert not graph.has_edge("value", "parity")


def test_constant_column_is_not_a_false_correlation():
    rng = np.random.default_rng(3)
    a = rng.permutation(500)
    constant = np.zeros(500)
    assert sort_index(constant) == 0.0  # the thesis's index calls it sorted ...
    assert tie_aware_sort_index(constant) is None  # ... the tie-aware one does not
    graph = z_correlation_graph({"a": z_sample(a), "c": z_sample(constant), "d": z_sample(constant)}, 0.05)
    assert graph.number_of_edges() == 0
    assert mean_square_contingency(a % 2, constant) is None


def test_sop_graph_on_complementary_and_independent_bits():
    rng = np.random.default_rng(5)
    a = rng.random(2000) < 0.3
    graph = sop_correlation_graph({"a": a, "not_a": ~a, "b": rng.random(2000) < 0.5}, phi=0.8)
    assert set(graph.edges) == {("a", "not_a")}


def test_figure_4_4_traversal():
    graph = nx.Graph([(1, 2), (1, 3), (2, 3), (2, 4), (4, 5), (4, 6), (5, 6)])
    frequency = {1: 100, 4: 90, 2: 50, 3: 40, 5: 30, 6: 20}
    walk = traverse(graph, frequency, limit=4)
    assert set(walk.primary) == {1, 4}
    assert set(walk.correlated) == {2, 3, 5, 6}
    assert walk.correlated[3][0] == 1 and walk.correlated[2][0] == 4
    assert walk.unvisited == ()


def test_traversal_stops_at_the_limit_and_at_min_frequency():
    graph = nx.empty_graph(["a", "b", "c", "d"])
    frequency = {"a": 10, "b": 8, "c": 6, "d": 1}
    assert traverse(graph, frequency, limit=2).primary == ("a", "b")
    walk = traverse(graph, frequency, limit=10, min_frequency=5)
    assert walk.primary == ("a", "b", "c") and walk.unvisited == ("d",)


# ---- the analyser on hand-made workloads ----------------------------------------------------------------


def scans(*filter_sets, ts=NOW) -> list[ScanRecord]:
    return [ScanRecord(f"q{i}", ts, "t", tuple(f), ("*",), "test") for i, f in enumerate(filter_sets)]


def fixed_evaluator(z: dict[str, np.ndarray], sop: dict[str, np.ndarray], failures: dict[str, str] | None = None):
    """An evaluator over pre-computed sample columns (no Spark), like `sample.evaluate` returns."""

    def evaluator(z_expressions, sop_predicates):
        bad = {k: v for k, v in (failures or {}).items() if k in {*z_expressions, *sop_predicates}}
        return Evaluation(
            z={e: z_sample(z[e]) for e in z_expressions if e in z and e not in bad},
            sop={p: sop[p] for p in sop_predicates if p in sop and p not in bad},
            failures=bad,
            rows=len(next(iter(z.values()))),
        )

    return evaluator


def test_analyser_chooses_explains_and_rejects():
    rng = np.random.default_rng(7)
    a = rng.permutation(1000)
    workload = []
    for i in range(60):
        workload.append([f"a > {i}", f"b < {i * 2}", "s LIKE '%x%'"])
    for i in range(30):
        workload.append([f"c >= {i}", "k = 1", "MY_UDF(s) = 1"])
    workload.append(["rare = 1"])
    evaluation = fixed_evaluator(
        z={"a": a, "b": a * 2, "c": rng.permutation(1000), "k": np.ones(1000)},
        sop={
            "s LIKE '%x%'": rng.random(1000) < 0.2,
            "k = 1": np.ones(1000, dtype=bool),
        },
        failures={"MY_UDF(s) = 1": "not evaluable: not on the evaluation allow-list: my_udf()"},
    )
    thresholds = Thresholds(min_comparison_points=5, min_sop_frequency=0.05, selection="frequency")
    result = analyse("t", scans(*workload), evaluation, thresholds, NOW)
    roles = {c.feature: (c.role, c.reason) for c in result.candidates}

    assert [f.expression for f in result.features.z] == ["a", "c"]
    assert roles["b"][0] is Role.Z_ADD and "correlated with a" in roles["b"][1]
    assert roles["k"][0] is Role.REJECTED and "too few comparison points (1 < theta=5)" in roles["k"][1]
    assert [f.predicate for f in result.features.sop] == ["s LIKE '%x%'"]
    assert roles["k = 1"][0] is Role.REJECTED and "true on every sampled row" in roles["k = 1"][1]
    assert roles["MY_UDF(s) = 1"][0] is Role.REJECTED and "not evaluable" in roles["MY_UDF(s) = 1"][1]
    assert roles["rare = 1"][0] is Role.REJECTED and "infrequent" in roles["rare = 1"][1]
    assert result.features.sop_weights["s LIKE '%x%'"] == pytest.approx(60)
    assert result.scans == 91


def test_analyser_respects_the_z_limit_and_recency():
    rng = np.random.default_rng(1)
    columns = {name: rng.permutation(500) for name in "abcde"}
    old = NOW - timedelta(days=30)
    workload = scans(*[[f"{name} > {i}"] for name in "abcd" for i in range(10)])
    workload += scans(*[[f"e > {i}"] for i in range(20)], ts=old)  # frequent long ago: decayed
    result = analyse(
        "t", workload, fixed_evaluator(columns, {}), Thresholds(max_z_features=3, selection="frequency"), NOW
    )
    assert len(result.features.z) == 3 and "e" not in {f.expression for f in result.features.z}
    reasons = {c.feature: c.reason for c in result.candidates}
    assert "over the limit" in reasons[next(f.expression for f in result.features.z_add if f.expression != "e")]
    assert "infrequent" in reasons["e"]


def test_analyser_survives_empty_logs_tiny_samples_and_constants():
    assert analyse("t", [], fixed_evaluator({"a": np.array([1])}, {}), Thresholds(), NOW).features.is_empty
    tiny = analyse(
        "t", scans(*[[f"a > {i}"] for i in range(10)]), fixed_evaluator({"a": np.array([5])}, {}), Thresholds(), NOW
    )
    (report,) = tiny.candidates
    assert report.role is Role.Z_ADD and "constant on the sample" in report.reason


@pytest.mark.spark
def test_analyse_table_end_to_end(spark, tmp_path):
    """Spark sample + log table: a correlated pair, a constant, a UDF, and a frequent LIKE."""
    from pyspark.sql import functions as F

    from optimizer.analysis import TableContext, analyse_table
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    table = open_table(str(tmp_path / "t"))
    df = (
        spark.range(20000)
        .withColumn("a", (F.col("id") * 7919) % 20000)
        .withColumn("b", F.col("a") * 3 + 1)
        .withColumn("c", F.rand(seed=3))
        .withColumn("k", F.lit(1))
        .withColumn("s", F.when(F.col("id") % 5 == 0, F.lit("xx")).otherwise(F.lit("yy")))
    )
    table.create(spark, df.repartition(4))
    log = QueryLogTable(str(tmp_path / "t_querylog"))
    rows = [[f"a > {i * 100}", f"b < {i * 300}"] for i in range(30)]
    rows += [[f"c < 0.{i}", "s LIKE '%x%'"] for i in range(1, 10)] * 3
    rows += [["k = 1"], ["MY_UDF(s) = 1"], ["MY_UDF(s) = 1"], ["MY_UDF(s) = 1"]] * 3
    ts = NOW - timedelta(hours=1)
    log.append([ScanRecord(f"q{i}", ts, "t", tuple(f), ("*",), "test") for i, f in enumerate(rows)])

    result = analyse_table(TableContext(spark, table, "t", log, Thresholds(sample_rows=5000), NOW))
    roles = {c.feature: c for c in result.candidates}
    assert [f.expression for f in result.features.z] == ["a", "c"]
    assert roles["b"].role is Role.Z_ADD and roles["b"].correlated_with == "a"
    assert [f.predicate for f in result.features.sop] == ["s LIKE '%x%'"]
    assert "my_udf()" in roles["MY_UDF(s) = 1"].reason
    assert 4000 <= result.sample_rows <= 5000


def test_malformed_log_rows_are_skipped_and_counted():
    rows = scans(*[[f"a > {i}"] for i in range(10)], ["a >>> 3"], ["NOT (("])
    result = analyse("t", rows, fixed_evaluator({"a": np.arange(100)}, {}), Thresholds(), NOW)
    assert result.malformed_rows == 2 and result.scans == 10
    assert [f.expression for f in result.features.z] == ["a"]


def test_in_lists_and_ranges_on_one_expression_are_one_family():
    """`x IN (..)`, `x = ..` and ranges on one expression count as one Z candidate whatever the
    literals; a derived expression over two columns compared with changing literals is one too."""
    from optimizer.analysis.workload import summarize

    workload = summarize(
        scans(
            ["mode IN ('A', 'B')"],
            ["mode IN ('C', 'A')"],
            ["mode = 'D'"],
            ["price * (1 - discount) > 10"],
            ["price * (1 - discount) > 20", "mode IN ('B', 'E')"],
            ["NOT mode IN ('A')"],
        ),
        NOW,
        3600.0,
    )
    mode = workload.z["mode"]
    assert mode.points == {"'A'", "'B'", "'C'", "'D'", "'E'"} and mode.scans == 4
    assert mode.ops == {"in", "="} and not mode.has_ranges
    revenue = workload.z["price * (1 - discount)"]
    assert revenue.points == {"10", "20"} and revenue.has_ranges and revenue.scans == 2
    assert workload.predicates["NOT mode IN ('A')"].z_expression is None  # NOT IN stays a SOP candidate


def test_benefit_selection_only_prefilters():
    """With selection: benefit, theta does not reject a family with changing literals and the feature
    limits do not cut the pool: the search decides."""
    columns = {name: np.arange(200) * (k + 1) % 97 for k, name in enumerate("abcdef")}
    workload = scans(*[[f"{name} > {i}"] for name in "abcdef" for i in range(3)])
    frequency = analyse("t", workload, fixed_evaluator(columns, {}), Thresholds(selection="frequency"), NOW)
    benefit = analyse("t", workload, fixed_evaluator(columns, {}), Thresholds(), NOW)
    assert frequency.features.z == ()  # 3 points < theta = 5
    assert len(benefit.features.z) == 6  # more than max_z_features = 4: a pool for the search


@pytest.mark.spark
def test_sample_evaluation_ranks_every_type_like_python_ordering(spark):
    """Candidates are collected through Arrow; their ranks and NULL masks must be what Python's own
    ordering of the collected values gives (dates, far timestamps, decimals, strings, NULLs)."""
    import datetime as dt
    from decimal import Decimal

    from optimizer.analysis.sample import evaluate

    rows = [
        (1, Decimal("2.50"), dt.date(2024, 1, 2), dt.datetime(9999, 12, 31, 23, 0, tzinfo=UTC), "b"),
        (None, Decimal("-1.00"), dt.date(1970, 1, 1), dt.datetime(1900, 1, 1, tzinfo=UTC), None),
        (3, None, None, None, "a"),
        (1, Decimal("2.50"), dt.date(2024, 1, 2), dt.datetime(2024, 5, 1, 12, tzinfo=UTC), "b"),
    ]
    frame = spark.createDataFrame(rows, "i long, p decimal(10,2), d date, t timestamp, s string")
    names = ["i", "p", "d", "t", "s"]
    result = evaluate(frame, names, ["i > 1", "s LIKE 'a%'"])
    collected = [r.asDict() for r in frame.collect()]
    for name in names:
        values = [r[name] for r in collected]
        order = sorted({v for v in values if v is not None})
        expected_ranks = [order.index(v) if v is not None else 0 for v in values]
        sample = result.z[name]
        assert list(sample.nulls) == [v is None for v in values], f"{name}: NULL mask"
        assert list(sample.ranks) == expected_ranks, f"{name}: ranks differ from Python's ordering"
    assert list(result.sop["i > 1"]) == [False, False, True, False], "i > 1 bits (NULL is not TRUE)"
    assert list(result.sop["s LIKE 'a%'"]) == [False, False, True, False], "LIKE bits"


def _z_graph_by_definition(samples, epsilon):
    """Algorithm 2 computed the long way: every ordered pair, then edges where both directions pass."""
    from optimizer.analysis.correlation import sort_index_after_ordering

    graph = nx.Graph()
    graph.add_nodes_from(samples)
    directed = {}
    for i in samples:
        for j in samples:
            if i != j:
                s = sort_index_after_ordering(samples[i].ranks, samples[j].ranks, samples[i].nulls, samples[j].nulls)
                if s is not None and (s > 1 - epsilon or s < epsilon):
                    directed[(i, j)] = s
    for (i, j), index in directed.items():
        if i < j and (j, i) in directed:
            back = directed[(j, i)]
            graph.add_edge(i, j, index=round(index if abs(index - 0.5) <= abs(back - 0.5) else back, 4))
    return graph


@settings(max_examples=60, deadline=None)
@given(
    columns=st.lists(st.lists(st.integers(0, 4), min_size=12, max_size=12), min_size=3, max_size=6),
    nulls=st.lists(st.booleans(), min_size=12, max_size=12),
    names=st.permutations(["e", "b", "d", "a", "f", "c"]),
)
def test_z_graph_skips_reverse_directions_without_changing_the_graph(columns, nulls, names):
    """Only pairs whose first direction passes are checked the other way; edges, their indices and
    their order must equal the definition's."""
    from optimizer.analysis.correlation import ZSample

    base = np.arange(12)
    samples = {}
    for k, values in enumerate(columns):
        ranks = base * (1 - k % 2 * 2) if k < 3 else np.array(values)  # three sorted columns, then random
        samples[names[k]] = ZSample(ranks, np.array(nulls) if k == len(columns) - 1 else np.zeros(12, bool))
    fast = z_correlation_graph(samples, 0.05)
    slow = _z_graph_by_definition(samples, 0.05)
    assert list(fast.edges(data=True)) == list(slow.edges(data=True)), "edges, indices or their order differ"
    assert list(fast.nodes) == list(slow.nodes), "nodes differ"


def test_sample_reads_evenly_spaced_files_past_its_scan_budget():
    """Past `scan_bytes`, the sample reads every k-th file in commit order (about the budget, at least
    eight files), so the whole period of arrivals is represented; below it, every file."""
    from optimizer.analysis.sample import MIN_SCANNED_FILES, scanned_files
    from optimizer.table.access import DataFile

    files = [DataFile(f"part-{i:03d}.parquet", 100, 10) for i in range(80)]
    assert scanned_files(files, 0) == files
    assert scanned_files(files, 8000) == files
    chosen = scanned_files(files, 2000)
    assert len(chosen) == 20 and sum(f.size for f in chosen) >= 2000
    positions = [files.index(f) for f in chosen]
    assert positions == sorted(positions) and positions[0] < 4 and positions[-1] >= 76
    assert {b - a for a, b in itertools.pairwise(positions)} == {4}
    assert len(scanned_files(files, 100)) == MIN_SCANNED_FILES
    assert scanned_files(files[:MIN_SCANNED_FILES], 100) == files[:MIN_SCANNED_FILES]


def test_the_sample_evaluates_a_bounded_number_of_candidates_whatever_the_log_holds():
    """Generated queries: 30 scans of 64 distinct equality conjuncts each (1,920 SOP candidates, each in
    3% of the scans). The sample evaluates only the most frequent `MAX_EVALUATED`; the rest are
    reported, not evaluated (evaluating every one ran the driver out of heap)."""
    from optimizer.analysis.analyser import MAX_EVALUATED

    workload = [[f"c{j % 8} = {i * 1000 + j}" for j in range(64)] for i in range(30)]
    workload += [["hot = 1"]] * 5
    asked: list[int] = []
    rng = np.random.default_rng(3)

    def evaluator(z_expressions, sop_predicates):
        asked.append(len(sop_predicates))
        return Evaluation(sop={p: rng.random(100) < 0.5 for p in sop_predicates}, rows=100)

    thresholds = Thresholds(min_sop_frequency=0.01, selection="frequency")
    result = analyse("t", scans(*workload), evaluator, thresholds, NOW)
    assert asked and max(asked) == MAX_EVALUATED
    roles = {c.feature: c for c in result.candidates if c.kind == "sop"}
    assert len(roles) == 30 * 64 + 1  # every candidate is still reported
    unevaluated = [c for c in roles.values() if "not among the 128 most frequent SOP candidates" in c.reason]
    assert len(unevaluated) == len(roles) - MAX_EVALUATED
    assert roles["hot = 1"].role is not Role.REJECTED  # the most frequent candidate is evaluated
