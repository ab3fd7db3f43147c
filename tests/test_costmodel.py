"""Cost model fitting and the cost-benefit decision."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from costmodel.benefit import Compression
from costmodel.cost import DEFAULT_MODEL, CostModel, Run, fit, load
from costmodel.rate import project_rate
from optimizer.config import Thresholds
from optimizer.errors import CostModelError
from optimizer.estimate.replay import Query, estimate_benefit, query_bytes, workload_queries
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


def poisson(rate_per_hour: float, start_hours_ago: float, end_hours_ago: float = 0.0, seed: int = 1) -> list:
    """Arrival times of a Poisson stream between two ages, as of NOW."""
    rng = random.Random(seed)
    times, age = [], start_hours_ago
    while True:
        age -= rng.expovariate(rate_per_hour)
        if age <= end_hours_ago:
            return times
        times.append(NOW - timedelta(hours=age))


def rate_of(times, **kwargs) -> float:  # type: ignore[no-untyped-def]
    """Projected queries per hour with the default window (7d) and half-life (3d)."""
    settings = {"half_life": 3 * DAY, "window": 7 * DAY, **kwargs}
    return project_rate(times, NOW, **settings).per_day / 24


DAY = 86400.0


def test_a_young_log_is_measured_over_the_hours_it_has_existed():
    """7 hours of log at 60/h: dividing by the whole 7-day window would say ~5/h."""
    assert rate_of(poisson(60, 7)) == pytest.approx(60, rel=0.1)


def test_an_old_log_is_measured_over_the_window():
    times = poisson(10, 14 * 24, seed=2)
    in_window = [t for t in times if t >= NOW - timedelta(days=7)]
    assert rate_of(in_window, recorded_before_window=True) == pytest.approx(10, rel=0.1)


def test_a_gap_when_the_log_was_not_recording_is_left_out():
    """Two days of imported history, three silent days, then two days from a recorder."""
    times = poisson(30, 7 * 24, 5 * 24, seed=3) + poisson(30, 2 * 24, seed=4)
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert len(rate.gaps) == 1, "the three silent days are one gap"
    assert rate.per_day / 24 == pytest.approx(30, rel=0.1)
    assert rate.covered_seconds == pytest.approx(4 * DAY, rel=0.02)


def test_quiet_nights_of_a_daytime_workload_are_not_gaps():
    """Queries 8 hours a day: the 16-hour nights are real quiet time (shorter than `log_gap`)."""
    times = [t for day in range(7) for t in poisson(90, 24 * (day + 1), 24 * (day + 1) - 8, seed=10 + day)]
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.gaps == ()
    assert rate.per_day / 24 == pytest.approx(90 * 8 / 24, rel=0.15)


def test_a_short_burst_barely_moves_the_rate():
    """A one-hour burst at 4x the rate a day ago moves a week-long stream's rate by under 10%."""
    times = poisson(20, 7 * 24, seed=5) + poisson(60, 25, 24, seed=6)
    assert rate_of(times, recorded_before_window=True) == pytest.approx(20, rel=0.1)


def test_a_stream_that_stopped_stops_paying():
    """Four days at 20/h and three silent days up to now: the silence counts, and pulls the rate down."""
    times = poisson(20, 7 * 24, 3 * 24, seed=7)
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.gaps == (), "the silence up to now is never a gap"
    assert rate.per_day / 24 < 0.6 * 20


def test_a_sparse_stream_keeps_its_silences():
    """One query every ~2 days: its silences are its rate, not gaps in the log."""
    times = [NOW - timedelta(days=d) for d in (6.5, 4.4, 2.6, 0.5)]
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.gaps == ()
    assert 0.3 < rate.per_day < 0.8


def test_the_projection_scales_with_the_horizon_and_needs_a_stream():
    times = poisson(60, 7)
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.expected(7 * DAY) == pytest.approx(7 * rate.expected(DAY))
    assert project_rate([], NOW, half_life=3 * DAY, window=7 * DAY).per_day == 0
    single = project_rate(times[:1], NOW, half_life=3 * DAY, window=7 * DAY)
    assert single.per_day == 0, "one query marks where the log starts; it is not yet a rate"
    two_quick = project_rate([NOW - timedelta(seconds=2), NOW - timedelta(seconds=1)], NOW, half_life=DAY, window=DAY)
    assert two_quick.per_day <= 24 * 1.02, "at least an hour is assumed (one query per hour, decayed)"


def test_compression_shrinks_the_bytes_every_query_reads():
    """A ratio of 0.5 on column y halves y's bytes after, filtered or not, and is its own term."""
    both = [ScanRecord(f"q{i}", NOW, "t", (), ("x", "y"), "test") for i in range(10)]
    queries = workload_queries(both, NOW, 3600)  # no filter: nothing to skip
    current = files([(0, 100), (0, 100)])
    virtual = files([(0, 50), (51, 100)])
    compression = Compression({"x": 1.0, "y": 0.5}, "SNAPPY", "SNAPPY", 1000, 600)
    result = estimate_benefit(
        queries, current, sizes(current), virtual, sizes(virtual), 100, 0.01, 1000, 10, compression=compression
    )
    assert result.bytes_per_query_before == 10e6
    assert result.bytes_per_query_after_skipping == 10e6
    assert result.bytes_per_query_after == pytest.approx(2e6 + 4e6)
    assert result.benefit_skipping == 0
    assert result.benefit_compression == pytest.approx(100 * 4.0 * 0.01)
    assert result.benefit == pytest.approx(result.benefit_compression)


def test_skipping_and_compression_terms_add_up():
    queries = workload_queries(records("x = 7", count=50), NOW, 3600)
    current = files([(0, 100)] * 10)
    virtual = files([(i * 10, i * 10 + 9) for i in range(10)])
    compression = Compression({"x": 0.8, "y": 0.9}, "SNAPPY", "ZSTD", 1000, 880)
    result = estimate_benefit(
        queries, current, sizes(current), virtual, sizes(virtual), 1000, 0.01, 1000, 50, compression=compression
    )
    assert result.bytes_per_query_after_skipping == pytest.approx(1e6)  # x of 1 file in 10
    assert result.bytes_per_query_after == pytest.approx(0.8e6)
    assert result.benefit == pytest.approx(result.benefit_skipping + result.benefit_compression)


@pytest.mark.spark
def test_estimate_decides_on_a_real_table(spark, tmp_path):
    from pyspark.sql import functions as F

    from optimizer.clustering import optimize
    from optimizer.estimate.decision import estimate
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

    log.append(records("x = 3", count=2, age=timedelta(days=30)))  # outside the 7-day window
    decision = estimate(spark, table, "t", log, thresholds, cheap, NOW)
    assert decision.action == "optimize", decision.reason
    assert decision.features["z"] == ["x"]
    assert decision.search is not None and decision.search["chosen"] == ["z: x"]  # the benefit search chose it
    (candidate,) = decision.search["candidates"]
    assert candidate["chosen"] and candidate["marginal_benefit"] > candidate["marginal_cost"] > 0
    assert decision.seconds["search"] >= 0
    assert decision.outside_window is not None and decision.outside_window["count"] == 2
    assert decision.benefit is not None and decision.benefit.rate is not None
    assert decision.benefit.rate.period_start == NOW - timedelta(days=7), "older records: the whole window counts"
    assert "queries expected" in decision.reason and "MB per query" in decision.reason
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
    from optimizer.estimate.decision import candidate_layouts
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


@pytest.mark.spark
def test_estimated_compression_matches_a_real_rewrite(spark, tmp_path):
    """The estimate prices the bytes the clustered files will really store (within 1.25x): small files
    compacted (real rows, full density) and rows clustered (the sample), and leaves no scratch behind."""
    from pyspark.sql import functions as F

    from optimizer.clustering import optimize
    from optimizer.estimate.decision import estimate
    from optimizer.skipping.scan import column_sizes
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    table = open_table(str(tmp_path / "t"))
    frame = (
        spark.range(60000)
        .withColumn("x", ((F.col("id") * 7919) % 600).cast("int"))
        .withColumn("day", F.date_add(F.lit("2024-01-01"), ((F.col("id") * 104729) % 300).cast("int")))
        .withColumn("flag", F.when(F.col("id") % 3 == 0, "A").otherwise("B"))
    )
    table.create(spark, frame.repartition(24))  # small files, as a streaming writer leaves them
    log = QueryLogTable(str(tmp_path / "t_querylog"))
    log.append([r for v in range(0, 600, 20) for r in records(f"x = {v}", count=3)])
    thresholds = Thresholds(min_new_bytes=1, target_file_size=150_000, sample_rows=20000, min_comparison_points=3)
    decision = estimate(spark, table, "t", log, thresholds, DEFAULT_MODEL, NOW)
    assert decision.benefit is not None and decision.benefit.compression is not None, decision.reason
    compression = decision.benefit.compression
    assert compression.codec_before == "SNAPPY" and compression.codec_after == "ZSTD", "Spark wrote, ZSTD rewrites"
    assert compression.clustering["x"] < 0.8, "a sorted column of 600 values compresses better"
    assert compression.compaction["day"] < 0.95, "24 small files each repeat a 300-date dictionary"

    before = table.snapshot().files
    sizes_before = {c: sum(column_sizes(table, f)[c] for f in before) for c in ("id", "x", "day", "flag")}
    estimated_after = sum(size * compression.ratios[c] for c, size in sizes_before.items())
    optimize(spark, table, _features(decision), 150_000)
    after = table.snapshot().files
    measured_after = sum(sum(column_sizes(table, f).values()) for f in after)
    assert 1 / 1.25 <= estimated_after / measured_after <= 1.25, (estimated_after, measured_after)
    scratch = tmp_path / "t" / "_deltaopt_scratch"
    assert not scratch.exists() or not any(scratch.iterdir()), "the estimate's scratch files are removed"


def test_decisions_say_what_the_window_left_out(tmp_path):
    from querylog.store import QueryLogTable

    log = QueryLogTable(str(tmp_path / "log"))
    log.append(records("x = 1", count=4, age=timedelta(days=30)) + records("x = 2", count=2))
    older = log.older("t", NOW - timedelta(days=7))
    assert older.count == 4
    assert older.first == older.last == NOW - timedelta(days=30)
    assert log.older("t", NOW - timedelta(days=60)).count == 0
    assert log.older("other", NOW).count == 0


@pytest.mark.spark
def test_layouts_are_scored_for_the_tables_readers(spark, tmp_path):
    """A filter on a derived expression is skippable only with deltaopt's expression min/max: for a
    table read by standard engines the layout is worth nothing, for deltaopt's readers it pays."""
    from pyspark.sql import functions as F

    from optimizer.estimate.decision import estimate
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    table = open_table(str(tmp_path / "t"))
    frame = (
        spark.range(40000)
        .withColumn("x", (F.col("id") * 7919) % 1000)
        .withColumn("y", (F.col("id") * 104729) % 1000)
        .withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
    )
    table.create(spark, frame.repartition(8))
    log = QueryLogTable(str(tmp_path / "t_querylog"))
    log.append([r for v in range(0, 2000, 40) for r in records(f"x + y > {v}", f"x + y < {v + 30}", count=3)])
    cheap = CostModel(overhead=1.0, base=10.0, per_z=1.0, per_sop=1.0, per_additional=0.1)
    settings = {
        "min_new_bytes": 1,
        "target_file_size": 200_000,
        "sample_rows": 20000,
        "cost_per_mb_read": 1.0,
        "estimate_compression": False,  # skipping alone: compression reaches every reader
    }

    deltaopt = estimate(spark, table, "t", log, Thresholds(**settings, readers="deltaopt"), cheap, NOW)
    assert deltaopt.action == "optimize", deltaopt.reason
    assert deltaopt.features["z"] == ["x + y"]
    readers = deltaopt.benefit.readers
    assert readers["deltaopt"]["share"] == 1.0 and readers["standard"]["share"] == 0.0
    assert readers["deltaopt"]["bytes_per_query_after"] < 0.5 * readers["deltaopt"]["bytes_per_query_before"]
    assert readers["standard"]["bytes_per_query_after_skipping"] >= 0.9 * readers["standard"]["bytes_per_query_before"]
    assert "deltaopt readers (100%)" in deltaopt.reason and "standard readers (0%)" in deltaopt.reason

    standard = estimate(spark, table, "t", log, Thresholds(**settings), cheap, NOW)
    assert standard.action == "skip", standard.reason
    mixed = estimate(spark, table, "t", log, Thresholds(**settings, readers={"standard": 1, "deltaopt": 1}), cheap, NOW)
    assert mixed.benefit is not None and deltaopt.benefit is not None
    assert 0.3 * deltaopt.benefit.benefit < mixed.benefit.benefit < 0.7 * deltaopt.benefit.benefit


def test_combined_estimate_weighs_each_reader_by_its_share():
    from dataclasses import replace

    from costmodel.benefit import combine

    queries = [Query(prepare("x < 10"), None, 1.0)]
    current = files([(0, 100), (0, 100)])
    clustered = files([(0, 49), (50, 100)])
    deltaopt = estimate_benefit(queries, current, sizes(current), clustered, sizes(clustered), 100, 0.01, 1000, 10)
    standard = replace(deltaopt, benefit=0.0, bytes_per_query_after=deltaopt.bytes_per_query_before)
    mixed = combine({"deltaopt": deltaopt, "standard": standard}, {"standard": 0.75, "deltaopt": 0.25})
    assert mixed.benefit == pytest.approx(0.25 * deltaopt.benefit, abs=1e-3)
    assert mixed.readers["standard"]["share"] == 0.75 and mixed.readers["deltaopt"]["benefit"] == deltaopt.benefit
    with pytest.raises(ValueError, match="no estimate for any reader"):
        combine({"deltaopt": deltaopt}, {"standard": 1.0})
