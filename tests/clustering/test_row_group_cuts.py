"""Row-group cuts (`CutTree.row_group`): a cut tree grown on past its file cuts to about a leaf per row group,
each file a run of consecutive leaves, so the boxes standard readers skip by footers are the tree's."""

from __future__ import annotations

import itertools

import pytest

from optimizer.features import FeatureSet, ZFeature


def test_a_leafs_box_is_what_its_cuts_allow_and_open_where_none_bounds():
    from optimizer.clustering.cuts import leaf_boxes
    from optimizer.cut_tree import Cut, CutTree

    inner = CutTree(Cut("m", "<=", "string", "k"), CutTree(), CutTree(), row_group=True)
    tree = CutTree(Cut("x", "<", "integer", 5), inner, CutTree(Cut("x", "<", "integer", 9), CutTree(), CutTree()))
    assert leaf_boxes(tree) == [
        {"x": (None, 5), "m": (None, "k")},  # below both: at most 5 (a bound, not exclusive) and at most 'k'
        {"x": (None, 5), "m": ("k", None)},  # above a cut: at least its value, and NULL or NaN may be there
        {"x": (5, 9)},
        {"x": (9, None)},
    ]


def test_a_group_that_may_hold_nulls_has_no_null_count_and_bounds_even_when_its_sample_was_all_null():
    """Review 61b: NULLs go above every cut, so a group of the leaf above ``x < 5`` may hold NULLs and any x
    from 5 up, whatever its ~200 sampled rows showed (all NULL, or none NULL); the group below holds none."""
    from optimizer.cut_tree import Cut, CutTree
    from optimizer.estimate.leaf_boxes import LeafBoxes
    from optimizer.skipping.filestats import file_stats
    from optimizer.skipping.pruning import might_match, prepare
    from optimizer.table.access import DataFile

    boxes = LeafBoxes(CutTree(Cut("x", "<", "integer", 5), CutTree(), CutTree(), row_group=True), {"x": "x"}, "leaf")

    def group(n: int, leaf: int, stats: tuple) -> tuple:
        return {"__file": 0, "__group": n, "__leaf_low": leaf, "__leaf_high": leaf}, (200, *stats)

    groups = [
        group(0, 0, ({"x": 1}, {"x": 4}, {"x": 0})),
        group(1, 1, ({}, {}, {"x": 200})),  # every sampled row NULL
        group(2, 1, ({"x": 6}, {"x": 50}, {"x": 0})),  # no sampled row NULL
    ]
    stats = [
        file_stats(DataFile(f"f#{n}", 0, count, 0, {}, mins, maxs, nulls), {"x": "bigint"}, None)
        for n, (_, (count, mins, maxs, nulls)) in enumerate(boxes.bounded(groups))
    ]
    assert [might_match(prepare("x >= 10"), s) for s in stats] == [False, True, True]
    assert [might_match(prepare("x IS NULL"), s) for s in stats] == [False, True, True]
    assert [might_match(prepare("x < 3"), s) for s in stats] == [True, False, False]


def test_the_builder_stops_at_the_depth_a_record_may_have_and_refuses_a_file_cut_under_a_row_group_cut():
    """Review 61b: weights growing geometrically grew a 106-level tree its own record refused; and a tree
    made in process with a file cut under a row-group cut was accepted, then refused when read back."""
    import json

    from optimizer.clustering.cut_growth import Comparison, Scan, build_tree
    from optimizer.cut_tree import MAX_DEPTH, Cut, CutTree, parse_tree
    from optimizer.errors import FeatureError

    rows = 20_000
    scans = [Scan(3.0**i, (Comparison("x", ">=", "integer", (rows - 100 * (i + 1),)),)) for i in range(190)]
    tree = build_tree({"x": list(range(rows))}, scans, max_leaves=16, min_leaf_rows=rows // 32, row_groups=(256, 20))
    assert tree.depth == MAX_DEPTH and parse_tree(json.loads(json.dumps(tree.as_json()))) == tree
    leaf = CutTree()
    nested = CutTree(
        Cut("x", "<", "integer", 5), CutTree(Cut("x", "<", "integer", 2), leaf, leaf), leaf, row_group=True
    )
    with pytest.raises(FeatureError, match="a file cut under a row-group cut"):
        FeatureSet(z=(ZFeature("x"), ZFeature("y")), cuts=nested)


def _workload() -> list:
    """Narrow x ranges, and a recurring ``mode IN ('b', 'e')`` (a third of the rows) on a column the curve
    (x, y) leaves out."""
    from querylog.records import ScanRecord
    from tests.estimate.workloads import NOW

    ranges = [(f"x >= {a}", f"x < {a + 60}") for a in range(0, 1000, 125)]
    modes = [("mode IN ('b', 'e')",)] * 8
    return [ScanRecord(f"q{i}", NOW, "t", f, ("pad",), "test") for i, f in enumerate(ranges + modes)]


@pytest.mark.spark
def test_row_group_cuts_make_files_of_consecutive_leaves_whose_row_groups_readers_skip(spark, tmp_path):
    """Grown on with row-group cuts, the tree cuts `mode` too; laid out for real into 2 files of small row
    groups, every row is kept (count + both hashes), each file holds a run of consecutive leaves, exactly
    the leaves under one of its file cuts' leaves, and the workload reads fewer bytes (files and row groups,
    as standard readers skip) than with the file cuts alone on the same data."""
    from pyspark.sql import functions as F

    from optimizer.clustering import optimize
    from optimizer.clustering.cuts import leaf_column
    from optimizer.estimate.workload_cuts import workload_cuts
    from optimizer.spark_expr import expression_column
    from optimizer.table import open_table
    from optimizer.table.fingerprint import fingerprint
    from optimizer.table.output import OutputSettings
    from tests.clustering.test_precision import _mean_bytes_read
    from tests.estimate.workloads import replayed

    modes = F.substring(F.lit("abcdef"), (F.col("id") % 6 + 1).cast("int"), 1)
    frame = spark.range(6000).select(
        (F.col("id") * 7919 % 1000).alias("x"),
        (F.col("id") * 104_729 % 997).alias("y"),
        modes.alias("mode"),
        F.sha2(F.col("id").cast("string"), 256).alias("pad"),
    )
    table = open_table(str(tmp_path / "t"))
    snapshot = table.create(spark, frame.repartition(2))
    sample = table.read_files(spark, snapshot.files, snapshot).cache()
    records = _workload()
    thresholds, replay = replayed(table, snapshot, records, 2)
    features = FeatureSet(z=(ZFeature("x"), ZFeature("y")))
    coarse = workload_cuts(sample, features, replay.queries, 2)
    fine = workload_cuts(sample, features, replay.queries, 2, row_groups=16)
    assert coarse is not None and coarse.leaves == 2 and not coarse.has_row_groups, coarse
    assert fine is not None and fine.leaves > 8 and set(fine.columns) == {"x", "mode"}, fine
    assert fine.file_level() == coarse  # the same file cuts, grown on within them
    before = fingerprint(sample)
    output = OutputSettings(row_group_bytes=16 << 10)  # about 16 row groups a file
    read = {}
    for grain, tree in (("file", coarse), ("row_group", fine)):
        laid_out = FeatureSet(z=features.z, cuts=tree)
        current = table.snapshot().files
        optimize(spark, table, laid_out, sum(f.size for f in current) // 2 + 1, files=current, output=output)
        after = table.snapshot()
        assert fingerprint(table.read_files(spark, after.files, after)) == before
        read[grain] = _mean_bytes_read(table, records, thresholds)
    leaves = (
        table.read_files(spark, after.files, after)
        .select(
            F.input_file_name().alias("file"),
            leaf_column(fine, expression_column).alias("leaf"),
            leaf_column(coarse, expression_column).alias("file_leaf"),
        )
        .groupBy("file")
        .agg(
            F.min("leaf").alias("low"),
            F.max("leaf").alias("high"),
            F.countDistinct("leaf").alias("count"),
            F.countDistinct("file_leaf").alias("file_leaves"),
        )
        .orderBy("low")
        .collect()
    )
    assert len(leaves) >= 2 and any(r["count"] > 1 for r in leaves), leaves  # files mix leaves...
    assert all(r["count"] == r["high"] - r["low"] + 1 for r in leaves), leaves  # ...a run of consecutive ones
    assert all(a["high"] <= b["low"] for a, b in itertools.pairwise(leaves)), leaves  # in order
    assert all(r["file_leaves"] == 1 for r in leaves), leaves  # never two of the file cuts' leaves
    print(f"bytes per query, leaves as files and as row groups: {read}")
    assert read["row_group"] < 0.85 * read["file"], read


@pytest.mark.spark
def test_a_row_group_trees_other_columns_are_priced_by_its_leaves_boxes_not_the_sample(spark, tmp_path, monkeypatch):
    """Review 61a: `q` is cut by the row-group tree (``q < 100``) and no curve orders it; 0.2% of rows hold
    q = 5000. A virtual row group's few hundred sampled rows mostly miss that value, so bounding groups by
    the sample estimated ``q = 5000`` would read 0.39 of the bytes where the real layout reads 0.91. By
    the leaves' boxes (`estimate.leaf_boxes`), the estimate is within 25% of the real share for both."""
    from pyspark.sql import functions as F

    from optimizer.clustering import optimize
    from optimizer.estimate import replay as replay_module
    from optimizer.estimate.layouts import workload_replay
    from optimizer.estimate.replay import query_bytes
    from optimizer.table import open_table
    from optimizer.table.output import OutputSettings
    from querylog.predicates.normalize import sql
    from querylog.records import ScanRecord
    from tests.estimate.workloads import NOW, price_only, priced_layouts, replayed

    rare = F.pmod(F.xxhash64("id"), F.lit(500)) == 7
    frame = spark.range(60_000).select(
        (F.col("id") * 7919 % 1000).alias("x"),
        (F.col("id") * 104_729 % 997).alias("y"),
        F.when(rare, F.lit(5000)).otherwise(F.pmod(F.xxhash64(F.col("id") + 1), F.lit(1000))).alias("q"),
        F.sha2(F.col("id").cast("string"), 256).alias("pad"),
    )
    table = open_table(str(tmp_path / "t"))
    snapshot = table.create(spark, frame.repartition(4))
    sample = table.read_files(spark, snapshot.files, snapshot).sample(fraction=0.1, seed=3).cache()
    total = sum(f.size for f in snapshot.files)
    filters = [(f"x >= {a}", f"x < {a + 60}") for a in range(0, 1000, 125)] + [("q < 100",)] * 3
    filters += [("q = 5000",)] * 24
    records = [ScanRecord(f"q{i}", NOW, "t", f, ("pad",), "test") for i, f in enumerate(filters)]
    thresholds, replay = replayed(table, snapshot, records, 4, row_group_size=total // 32)
    price_only(monkeypatch, "cut tree, row groups")
    estimated: dict[str, float] = {}
    inner = replay_module._mean_bytes

    def recording(queries, now, virtual):  # each query's share of bytes on the virtual files
        for query in queries:
            (read, of), _ = replay_module._query_bytes(
                query, virtual.files, (virtual.now, virtual.written), virtual.groups
            )
            estimated[" AND ".join(sql(c) for c in query.predicate.conjuncts)] = read / of if of else 1.0
        return inner(queries, now, virtual)

    monkeypatch.setattr(replay_module, "_mean_bytes", recording)
    priced = priced_layouts(table, snapshot, sample, replay, FeatureSet(z=(ZFeature("x"), ZFeature("y"))), thresholds)
    features = priced["cut tree, row groups"].features
    assert features.cuts is not None and "q" in features.cuts.columns, features.cuts
    optimize(spark, table, features, total // 4, output=OutputSettings(row_group_bytes=total // 32))
    after = table.snapshot()
    real = workload_replay(table, after, after.files, records=records, thresholds=thresholds, now=NOW)
    for query in real.queries:
        text = " AND ".join(sql(c) for c in query.predicate.conjuncts)
        read, of = query_bytes(query, real.current, real.current_bytes, real.current_groups)
        if text in ("q = 5000", "q < 100"):
            print(f"{text}: estimated {estimated[text]:.3f}, real {read / of:.3f}")
            assert 0.8 <= estimated[text] / (read / of) <= 1.25, (text, estimated[text], read / of)
