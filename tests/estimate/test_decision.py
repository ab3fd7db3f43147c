"""The cost-benefit decision on real tables: features, layouts compared, readers weighed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from costmodel.cost import DEFAULT_MODEL, CostModel
from optimizer.config import Thresholds
from optimizer.estimate.replay import Query, estimate_benefit
from optimizer.skipping.pruning import prepare
from tests.estimate.workloads import NOW, files, records, sizes


@pytest.mark.spark
def test_estimate_decides_on_a_real_table(spark, tmp_path):
    from pyspark.sql import functions as F

    from optimizer.analysis import TableContext
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
    decision = estimate(TableContext(spark, table, "t", log, thresholds, NOW, cheap))
    assert decision.action == "optimize", decision.reason
    assert decision.features is not None and [f.expression for f in decision.features.z] == ["x"]
    assert decision.search is not None and decision.search.chosen_names == ["z: x"]  # the benefit search chose it
    (candidate,) = decision.search.outcomes
    assert candidate.chosen_in_round is not None
    assert candidate.marginal_benefit is not None and candidate.marginal_cost is not None
    assert candidate.marginal_benefit > candidate.marginal_cost > 0
    assert decision.seconds["search"] >= 0
    assert decision.outside_window is not None and decision.outside_window.count == 2
    assert decision.benefit is not None and decision.benefit.rate is not None
    assert decision.benefit.rate.period_start == NOW - timedelta(days=7), "older records: the whole window counts"
    assert "queries expected" in decision.reason and "MB per query" in decision.reason
    assert decision.benefit is not None and decision.benefit.p_after < 0.5 * decision.benefit.p_before

    too_little = estimate(TableContext(spark, table, "t", log, Thresholds(min_new_bytes=10**12), NOW, cheap))
    assert too_little.action == "skip" and "too little new data" in too_little.reason

    optimize(spark, table, _features(decision), 200_000)
    again = estimate(TableContext(spark, table, "t", log, thresholds, NOW, cheap), files=table.snapshot().files)
    assert again.benefit is not None and again.benefit.saved_mb_per_query < 0.2 * decision.benefit.saved_mb_per_query


def _features(decision):  # type: ignore[no-untyped-def]
    return decision.features


def test_candidate_layouts_keep_left_out_features_as_statistics():
    from dataclasses import replace

    from optimizer.estimate.candidates import candidate_layouts
    from optimizer.features import FeatureSet, SopFeature, ZFeature

    features = FeatureSet(
        z=(ZFeature("a"), ZFeature("b")),
        sop=(SopFeature("s = 1"),),
        sop_add=(SopFeature("t = 2"),),
        sop_weights={"s = 1": 3.0},
    )
    layouts = dict(candidate_layouts(features))
    names = ["as analysed", "SOP id leading", "Z-order only", "SOP only", "without Z feature b", "Hilbert curve"]
    assert list(layouts) == names
    assert layouts["SOP id leading"] == replace(features, sop_leads=True)
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

    from optimizer.analysis import TableContext
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
    decision = estimate(TableContext(spark, table, "t", log, thresholds, NOW, DEFAULT_MODEL))
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

    from optimizer.analysis import TableContext
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

    deltaopt = estimate(TableContext(spark, table, "t", log, Thresholds(**settings, readers="deltaopt"), NOW, cheap))
    assert deltaopt.action == "optimize", deltaopt.reason
    assert deltaopt.as_dict()["features"]["z"] == ["x + y"]
    readers = deltaopt.benefit.readers
    assert readers["deltaopt"]["share"] == 1.0 and readers["standard"]["share"] == 0.0
    assert readers["deltaopt"]["bytes_per_query_after"] < 0.5 * readers["deltaopt"]["bytes_per_query_before"]
    assert readers["standard"]["bytes_per_query_after_skipping"] >= 0.9 * readers["standard"]["bytes_per_query_before"]
    assert "deltaopt readers (100%)" in deltaopt.reason and "standard readers (0%)" in deltaopt.reason

    standard = estimate(TableContext(spark, table, "t", log, Thresholds(**settings), NOW, cheap))
    assert standard.action == "skip", standard.reason
    mixed = estimate(
        TableContext(spark, table, "t", log, Thresholds(**settings, readers={"standard": 1, "deltaopt": 1}), NOW, cheap)
    )
    assert mixed.benefit is not None and deltaopt.benefit is not None
    assert 0.3 * deltaopt.benefit.benefit < mixed.benefit.benefit < 0.7 * deltaopt.benefit.benefit


def test_combined_estimate_weighs_each_reader_by_its_share():
    from dataclasses import replace

    from costmodel.benefit import combine

    queries = [Query(prepare("x < 10"), None, 1.0)]
    current = files([(0, 100), (0, 100)])
    clustered = files([(0, 49), (50, 100)])
    deltaopt = estimate_benefit(
        queries,
        current,
        sizes(current),
        clustered,
        sizes(clustered),
        expected=100,
        cost_per_mb=0.01,
        sample_rows=1000,
        queries_in_window=10,
    )
    standard = replace(deltaopt, benefit=0.0, bytes_per_query_after=deltaopt.bytes_per_query_before)
    mixed = combine({"deltaopt": deltaopt, "standard": standard}, {"standard": 0.75, "deltaopt": 0.25})
    assert mixed.benefit == pytest.approx(0.25 * deltaopt.benefit, abs=1e-3)
    assert mixed.readers["standard"]["share"] == 0.75 and mixed.readers["deltaopt"]["benefit"] == deltaopt.benefit
    with pytest.raises(ValueError, match="no estimate for any reader"):
        combine({"deltaopt": deltaopt}, {"standard": 1.0})


@pytest.mark.spark
def test_compaction_of_a_file_past_the_cap_is_measured_on_its_leading_rows(spark, tmp_path, monkeypatch):
    """A file larger than COMPACTION_BYTES is measured on that share of its rows (the scan stops early),
    against the same share of its footer bytes: the ratios agree with rewriting the whole file."""
    from pyspark.sql import functions as F

    from optimizer.estimate import stored_bytes
    from optimizer.table import open_table
    from optimizer.table.output import OutputSettings, resolve_output

    table = open_table(str(tmp_path / "t"))
    frame = (
        spark.range(80000)
        .withColumn("x", (F.rand(seed=1) * 600).cast("int"))
        .withColumn("day", F.date_add(F.lit("2024-01-01"), (F.rand(seed=2) * 300).cast("int")))
        .withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
        .withColumn("id", (F.rand(seed=3) * 1e12).cast("long"))
    )  # random, not sequential or periodic: those compress better the more of them zstd sees
    snapshot = table.create(spark, frame.coalesce(1))
    (data_file,) = snapshot.files
    options = resolve_output(OutputSettings(), snapshot.configuration).writer_options()
    rewritten_rows: list[int] = []
    measure = stored_bytes.written_sizes

    def spy(table, frame, options):  # type: ignore[no-untyped-def]
        rewritten_rows.append(frame.count())
        return measure(table, frame, options)

    monkeypatch.setattr(stored_bytes, "written_sizes", spy)
    sample = table.read_files(spark, snapshot.files, snapshot)
    whole = stored_bytes._compaction(table, snapshot, snapshot.files, target_files=1, sample=sample, options=options)
    monkeypatch.setattr(stored_bytes, "COMPACTION_BYTES", data_file.size // 4)
    share = stored_bytes._compaction(table, snapshot, snapshot.files, target_files=1, sample=sample, options=options)
    assert rewritten_rows[0] == 80000 and rewritten_rows[1] == pytest.approx(20000, abs=2)
    assert whole.keys() == share.keys()
    for column, ratio in whole.items():
        assert share[column] == pytest.approx(ratio, rel=0.1), column
    assert whole["pad"] < 0.8, whole  # Spark wrote hex strings with snappy; the job writes zstd


@pytest.mark.spark
def test_compaction_weighs_small_appends_and_larger_files_by_their_rows(spark, tmp_path, monkeypatch):
    """A job that rewrites a day's small appends with larger files (a liquid table's unsealed cube) saves
    dictionaries on the appends mostly: the estimated compaction matches rewriting every file in its
    current order, whichever class the log lists first (one run of the appends priced the larger files
    as if they were appends, one run of a larger file the reverse), into output files of about a larger
    file's size or into one file far larger than any (Delta's 1 GiB maxFileSize against small tables)."""
    from pyspark.sql import functions as F

    from optimizer.estimate import stored_bytes
    from optimizer.estimate.virtual_files import in_stored_order
    from optimizer.skipping.scan import column_sizes
    from optimizer.table import open_table
    from optimizer.table.footers import total_sizes, written_sizes
    from optimizer.table.output import OutputSettings, resolve_output

    def rows(start: int, count: int):  # type: ignore[no-untyped-def]
        return (
            spark.range(start, start + count)
            .withColumn("day", F.date_add(F.lit("2024-01-01"), (F.rand(seed=start) * 300).cast("int")))
            .withColumn("x", (F.rand(seed=start + 1) * 600).cast("int"))
        )

    path = str(tmp_path / "t")
    rows(0, 80_000).coalesce(2).write.format("delta").save(path)  # two larger files
    rows(80_000, 80_000).repartition(80).write.format("delta").mode("append").save(path)  # 80 appends
    table = open_table(path)
    snapshot = table.snapshot()
    options = resolve_output(OutputSettings(), snapshot.configuration).writer_options()
    sample = table.read_files(spark, snapshot.files, snapshot)
    now = total_sizes(column_sizes(table, f) for f in snapshot.files)
    # runs capped at a third of the table, as 32 MiB caps them in a table of gigabytes
    monkeypatch.setattr(stored_bytes, "COMPACTION_BYTES", sum(f.size for f in snapshot.files) // 3)
    assert [len(c) for c in stored_bytes.size_classes(snapshot.files, stored_bytes.COMPACTION_BYTES)] == [80, 2]
    for target in (4, 1):
        for listed in (sorted(snapshot.files, key=lambda f: f.size), sorted(snapshot.files, key=lambda f: -f.size)):
            every = table.read_files(spark, listed, snapshot)
            written = written_sizes(table, in_stored_order(every, snapshot, target), options)
            rewritten = total_sizes(written.values())
            estimated = stored_bytes._compaction(
                table, snapshot, listed, target_files=target, sample=sample, options=options
            )
            assert estimated["day"] < 0.9, "80 small files each repeat a 300-date dictionary"
            for column in ("day", "x"):
                truth = rewritten[column] / now[column]
                assert estimated[column] == pytest.approx(truth, rel=0.05), (column, target, listed[0].size)


@pytest.mark.spark
def test_compaction_is_measured_within_a_partition(spark, tmp_path):
    """No job writes rows of two partitions into one file, so neither does the measurement (review 64:
    20 partitions of one file each were rewritten as one file, estimated 0.65 for a 0.87 truth)."""
    from pyspark.sql import functions as F

    from optimizer.estimate import stored_bytes
    from optimizer.estimate.virtual_files import in_stored_order
    from optimizer.skipping.scan import column_sizes
    from optimizer.table import open_table
    from optimizer.table.footers import total_sizes, written_sizes
    from optimizer.table.output import OutputSettings, resolve_output

    path = str(tmp_path / "t")
    (
        spark.range(0, 40_000)
        .withColumn("part", (F.col("id") % 20).cast("int"))
        .withColumn("day", F.date_add(F.lit("2024-01-01"), (F.rand(seed=3) * 300).cast("int")))
        .withColumn("x", (F.rand(seed=4) * 600).cast("int"))
        .repartition(1)
        .write.format("delta")
        .partitionBy("part")
        .save(path)
    )
    table = open_table(path)
    snapshot = table.snapshot()
    assert len(snapshot.files) == 20
    options = resolve_output(OutputSettings(), snapshot.configuration).writer_options()
    rewritten = total_sizes(  # what a rewrite writes: each partition on its own, one file in, one out
        total_sizes(
            written_sizes(table, in_stored_order(table.read_files(spark, [f], snapshot), snapshot, 1), options).values()
        )
        for f in snapshot.files[:4]
    )
    now_four = total_sizes(column_sizes(table, f) for f in snapshot.files[:4])
    sample = table.read_files(spark, snapshot.files, snapshot)
    estimated = stored_bytes._compaction(
        table, snapshot, snapshot.files, target_files=1, sample=sample, options=options
    )
    for column in ("day", "x"):
        assert estimated[column] == pytest.approx(rewritten[column] / now_four[column], rel=0.05), column


@pytest.mark.spark
@pytest.mark.parametrize(
    "layout",
    [{"z": ["x"]}, {"z": ["x", "y"]}, {"z": ["x"], "sop": ["flag = 'A'"]}, {}],
    ids=["one Z", "two Z", "Z + SOP", "none"],
)
def test_virtual_files_by_file_index_equal_the_files_the_layout_would_write(spark, tmp_path, layout):
    """Without a compression measure, virtual files are aggregated by each row's file index instead of
    rows moved into one partition per file: the same rows land in the same files (row counts and
    statistics equal), except for no layout at all, where only the counts' total is the same."""
    from pyspark.sql import functions as F

    from optimizer.estimate.virtual_files import virtual_files
    from optimizer.features import FeatureSet
    from optimizer.table import open_table

    table = open_table(str(tmp_path / "t"))
    frame = (
        spark.range(20000)
        .withColumn("x", ((F.col("id") * 7919) % 5000).cast("int"))
        .withColumn("y", F.when(F.col("id") % 7 == 0, None).otherwise((F.col("id") * 31) % 97))
        .withColumn("flag", F.when(F.col("id") % 3 == 0, "A").otherwise("B"))
    )
    snapshot = table.create(spark, frame.repartition(4))
    sample = table.read_files(spark, snapshot.files, snapshot).cache()
    features = FeatureSet.from_dict(layout)
    by_index = virtual_files(sample, snapshot, features, 12)
    written = virtual_files(sample, snapshot, features, 12, measure=lambda _: {})
    assert sum(by_index.rows.values()) == sum(written.rows.values()) == 20000
    if layout:
        assert by_index.rows == written.rows
        assert sorted(by_index.files, key=lambda f: f.path) == sorted(written.files, key=lambda f: f.path)
        assert len(by_index.rows) >= 10, by_index.rows  # about the 12 files asked for


def test_output_files_are_counted_as_the_writer_counts_them():
    """deltaopt's job rounds bytes / target to the nearest whole file; Delta's OPTIMIZE writes
    max(1, bytes / maxFileSize) files per partition, an integer division (`as_delta_writes` sets
    ``file_count: down``): 2.6 files' worth of bytes are 3 of deltaopt's files and 2 of Delta's, and
    ten partitions of 0.4 files' worth each are 4 of deltaopt's and 10 of Delta's."""
    from optimizer.estimate.layouts import output_files
    from optimizer.table.access import DataFile

    def files(*sizes: int, partitions: int = 1) -> list[DataFile]:
        return [DataFile(f"f{i}", size, None, 0, {"p": str(i % partitions)}) for i, size in enumerate(sizes)]

    ours = Thresholds(target_file_size=1000)
    delta = ours.model_copy(update={"file_count": "down"})
    assert [output_files(files(size), ours) for size in (400, 2400, 2600)] == [1, 2, 3]
    assert [output_files(files(size), delta) for size in (400, 2600, 2999, 3000)] == [1, 2, 2, 3]
    assert output_files(files(1300, 1300), delta) == 2  # one partition: 2,600 bytes
    spread = files(*[400] * 10, partitions=10)
    assert (output_files(spread, ours), output_files(spread, delta)) == (4, 10)


def test_a_compaction_run_without_row_counts_stops_at_an_output_file_of_bytes():
    """Where the log counts no rows, a run of appends still gathers one output file's worth (by bytes):
    it stopped after the first file, pricing no compaction at all (review 64b)."""
    from optimizer.estimate.stored_bytes import _run
    from optimizer.table.access import DataFile

    uncounted = [DataFile(f"a{i}", 100, None) for i in range(50)]
    assert len(_run(uncounted, 0, 1000)) == 10
    counted = [DataFile(f"a{i}", 100, 10) for i in range(50)]
    assert len(_run(counted, 40, 1000)) == 4  # rows first where counted


@pytest.mark.spark
def test_a_partition_filter_prunes_the_files_before_and_the_virtual_files_after(spark, tmp_path):
    """Queries that filter an int partition column read one partition of four, before (the real files'
    partition values) and after (each virtual file's range of the partition column): the estimate used to
    price every partition on both sides, four times the saving a reader sees."""
    from pyspark.sql import functions as F

    from optimizer.analysis import TableContext
    from optimizer.estimate.decision import estimate
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    table = open_table(str(tmp_path / "t"))
    frame = (
        spark.range(40000)
        .withColumn("part", (F.col("id") % 4).cast("int"))
        .withColumn("x", (F.col("id") * 7919) % 1000)
        .withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
    )
    table.create(spark, frame.repartition(8), partition_by=["part"])
    log = QueryLogTable(str(tmp_path / "t_querylog"))
    log.append([r for v in range(0, 1000, 25) for r in records(f"part = {v % 4}", f"x = {v}", count=3)])
    thresholds = Thresholds(min_new_bytes=1, target_file_size=100_000, sample_rows=20000, min_comparison_points=3)
    decision = estimate(TableContext(spark, table, "t", log, thresholds, NOW, DEFAULT_MODEL))
    benefit = decision.benefit
    assert benefit is not None, decision.reason
    total = benefit.bytes_per_query_total
    assert 0.2 * total < benefit.bytes_per_query_before < 0.3 * total  # one partition of four, every file of it
    assert benefit.bytes_per_query_after_skipping < 0.5 * benefit.bytes_per_query_before  # x, within that partition
