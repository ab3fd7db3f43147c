"""Cost model fitting and the cost-benefit decision."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from costmodel.benefit import Query, estimate_benefit, expected_queries, query_bytes, workload_queries
from costmodel.cost import DEFAULT_MODEL, CostModel, Run, fit, load
from optimizer.config import Thresholds
from optimizer.errors import CostModelError
from optimizer.skipping.filestats import Bounds, FileStats
from optimizer.skipping.pruning import prepare
from querylog.records import ScanRecord

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def test_calibration_recovers_known_coefficients_from_synthetic_timings():
    truth = CostModel(overhead=4.0, base=30.0, per_z=8.0, per_sop=3.0, per_additional=0.5)
    rng = random.Random(2)
    runs = []
    for size in (0.2e9, 0.5e9, 1e9, 2e9):
        for z, sop, add in ((1, 0, 0), (2, 0, 0), (4, 0, 0), (1, 4, 0), (1, 8, 4), (3, 8, 8), (2, 12, 0)):
            seconds = truth.predict(int(size), z, sop, add).seconds * rng.uniform(0.97, 1.03)
            runs.append(Run(int(size), z, sop, add, seconds))
    model = fit(runs)
    for name, expected in (
        ("overhead", 4.0),
        ("base", 30.0),
        ("per_z", 8.0),
        ("per_sop", 3.0),
        ("per_additional", 0.5),
    ):
        assert getattr(model, name) == pytest.approx(expected, rel=0.15, abs=0.3), name
    assert model.r2 is not None and model.r2 > 0.99


def test_cost_grows_with_size_and_features():
    model = DEFAULT_MODEL
    small = model.predict(10**9, 1, 0, 0).seconds
    assert model.predict(2 * 10**9, 1, 0, 0).seconds > small
    assert model.predict(10**9, 3, 0, 0).seconds >= small
    assert model.predict(10**9, 1, 8, 0).seconds >= small
    assert model.predict(10**9, 1, 0, 8).seconds >= small


def test_fit_needs_enough_runs_and_load_rejects_garbage(tmp_path):
    with pytest.raises(CostModelError, match="at least 5"):
        fit([Run(10**9, 1, 0, 0, 10.0)])
    bad = tmp_path / "model.json"
    bad.write_text("{not json")
    with pytest.raises(CostModelError, match="not a cost model"):
        load(bad)
    assert load(tmp_path / "absent.json") is DEFAULT_MODEL
    model = fit([Run(s, z, 0, 0, s / 1e8 + z) for s in (1e8, 2e8, 4e8) for z in (1, 2)])
    model.save(tmp_path / "m.json")
    assert load(tmp_path / "m.json") == model


def records(*filters, count=1, age=timedelta(hours=1)):
    return [ScanRecord(f"q{i}", NOW - age, "t", tuple(filters), ("x",), "test") for i in range(count)]


def files(ranges):
    return [FileStats(f"f{i}", 100, {"x": Bounds("number", low, high, 0)}) for i, (low, high) in enumerate(ranges)]


def sizes(stats):
    return {s.path: {"x": 1e6, "y": 4e6} for s in stats}


def test_a_workload_without_filters_gains_nothing():
    queries = workload_queries(records(count=10), NOW, 3600)
    current = files([(0, 100), (0, 100)])
    virtual = files([(0, 50), (51, 100)])
    result = estimate_benefit(queries, current, sizes(current), virtual, sizes(virtual), 100, 0.01, 1000, 10)
    assert result.benefit == 0 and result.p_before == result.p_after == 1.0


def test_a_selective_frequent_filter_on_unclustered_data_gains_a_lot():
    queries = workload_queries(records("x = 7", count=50), NOW, 3600)
    current = files([(0, 100)] * 10)  # every file holds every value
    virtual = files([(i * 10, i * 10 + 9) for i in range(10)])  # clustered: one file holds 7
    result = estimate_benefit(queries, current, sizes(current), virtual, sizes(virtual), 1000, 0.01, 1000, 50)
    assert result.p_before == 1.0 and result.p_after == pytest.approx(0.1)
    assert result.saved_mb_per_query == pytest.approx(9.0)  # 9 of 10 files' x column skipped
    assert result.benefit == pytest.approx(1000 * 9.0 * 0.01)


def test_already_clustered_data_gains_little():
    queries = workload_queries(records("x = 7", count=50), NOW, 3600)
    clustered = files([(i * 10, i * 10 + 9) for i in range(10)])
    result = estimate_benefit(queries, clustered, sizes(clustered), clustered, sizes(clustered), 1000, 0.01, 1000, 50)
    assert result.saved_mb_per_query == 0 and result.benefit == 0


def test_columns_read_decide_the_bytes():
    query = Query(prepare("x = 7"), frozenset({"x"}), 1.0)
    stats = files([(0, 9), (10, 19)])
    assert query_bytes(query, stats, sizes(stats)) == (1e6, 2e6)
    everything = Query(prepare("x = 7"), None, 1.0)
    assert query_bytes(everything, stats, sizes(stats)) == (5e6, 10e6)


def test_expected_queries_follow_recent_rate():
    day = 86400.0
    steady = [r for h in range(7 * 24) for r in records("x = 1", age=timedelta(hours=h))]  # one per hour for a week
    projected = expected_queries(steady, NOW, half_life=3 * day, window=7 * day, horizon=day)
    assert projected == pytest.approx(24, rel=0.1)
    recent = records("x = 1", count=100, age=timedelta(hours=1))  # a burst just now counts more than its average
    assert expected_queries(recent, NOW, 3 * day, 7 * day, day) > 100 / 7


@pytest.mark.spark
def test_estimate_decides_on_a_real_table(spark, tmp_path):
    from pyspark.sql import functions as F

    from costmodel.decision import estimate
    from optimizer.clustering import optimize
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    table = open_table(str(tmp_path / "t"))
    frame = (
        spark.range(40000)
        .withColumn("x", (F.col("id") * 7919) % 1000)
        .withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
    )
    table.create(spark, frame.repartition(8))
    log = QueryLogTable(str(tmp_path / "t_querylog"))
    log.append([r for v in range(0, 1000, 25) for r in records(f"x = {v}", count=3)])
    thresholds = Thresholds(
        min_new_bytes=1, target_file_size=200_000, sample_rows=20000, min_comparison_points=3, cost_per_mb_read=1.0
    )
    cheap = CostModel(overhead=1.0, base=10.0, per_z=1.0, per_sop=1.0, per_additional=0.1)

    decision = estimate(spark, table, "t", log, thresholds, cheap, NOW)
    assert decision.action == "optimize", decision.reason
    assert decision.features["z"] == ["x"]
    assert decision.benefit is not None and decision.benefit.p_after < 0.5 * decision.benefit.p_before

    too_little = estimate(spark, table, "t", log, Thresholds(min_new_bytes=10**12), cheap, NOW)
    assert too_little.action == "skip" and "too little new data" in too_little.reason

    optimize(spark, table, _features(decision), 200_000)
    again = estimate(spark, table, "t", log, thresholds, cheap, NOW, files=table.snapshot().files)
    assert again.benefit is not None and again.benefit.saved_mb_per_query < 0.2 * decision.benefit.saved_mb_per_query


def _features(decision):  # type: ignore[no-untyped-def]
    from optimizer.features import FeatureSet

    return FeatureSet.from_dict(decision.features)


def test_candidate_layouts_keep_left_out_features_as_statistics():
    from costmodel.decision import candidate_layouts
    from optimizer.features import FeatureSet, SopFeature, ZFeature

    features = FeatureSet(
        z=(ZFeature("a"), ZFeature("b")),
        sop=(SopFeature("s = 1"),),
        sop_add=(SopFeature("t = 2"),),
        sop_weights={"s = 1": 3.0},
    )
    layouts = dict(candidate_layouts(features))
    assert list(layouts) == ["as analysed", "Z-order only", "SOP only", "without Z feature b"]
    assert [f.predicate for f in layouts["Z-order only"].sop_add] == ["s = 1", "t = 2"]
    assert [f.expression for f in layouts["SOP only"].z_add] == ["a", "b"]
    assert [f.expression for f in layouts["without Z feature b"].z] == ["a"]
    assert [f.expression for f in layouts["without Z feature b"].z_add] == ["b"]
    assert candidate_layouts(FeatureSet(z=(ZFeature("a"),))) == [("as analysed", FeatureSet(z=(ZFeature("a"),)))]
