"""A cut tree meets the table it was not decided on: literals Spark cannot hold and columns whose type no
longer compares with the tree's literals are refused in one line before any work, and the leaf id Spark
computes is the same instant / day whatever the session's time zone (`clustering.cuts`, `cut_tree`)."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from decimal import Decimal

import pytest

from optimizer.clustering.cuts import leaf_ids
from optimizer.cut_tree import Cut, CutTree, parse_tree
from optimizer.errors import FeatureError
from optimizer.estimate.workload_cuts import _number
from optimizer.features import FeatureSet, ZFeature


def _one(column: str, kind: str, value: object) -> CutTree:
    return CutTree(Cut(column, "<", kind, value), CutTree(), CutTree())


@pytest.mark.parametrize(
    ("kind", "written"),
    [
        ("decimal", "1E+40"),
        ("decimal", "1E-40"),
        ("decimal", "0." + "1" * 39),
        ("integer", 2**63),
        ("integer", -(2**64)),
        ("timestamp", "0001-01-01T00:00:00+05:00"),  # its UTC instant is before year 1: Python overflows
    ],
)
def test_a_recorded_literal_spark_cannot_hold_is_refused_in_one_line(kind, written):
    """`F.lit` of 1E+40 (precision 41), 1E-40 (scale 40) or an integer past a long fails in the JVM while
    the job lays out; the record is refused where it is read."""
    node = {"column": "x", "op": "<", "type": kind, "value": written, "below": {}, "above": {}}
    with pytest.raises(FeatureError, match=f"malformed {kind} literal"):
        parse_tree(json.loads(json.dumps(node)))


def test_spark_holdable_decimals_still_read_back_and_the_builder_leaves_the_others_out():
    for written in ("1" + "0" * 37, "0." + "1" * 37, "-12.50", "1E+5"):
        tree = _one("x", "decimal", Decimal(written))
        assert parse_tree(json.loads(json.dumps(tree.as_json()))) == tree, written
    assert _number(Decimal("1E+40"), "number") is None  # a query's 1e40 on an integer column: no cut point
    assert _number(Decimal("1E-40"), "number") is None
    assert _number(Decimal("2.5"), "number") == ("decimal", Decimal("2.5"))


def _schema(**kinds: object):
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(name, kind) for name, kind in kinds.items()])  # type: ignore[arg-type]


def test_a_tree_whose_column_changed_type_or_went_away_is_refused_before_any_work():
    """Spark would cast one side: a timestamp cut on a TIMESTAMP_NTZ (or a date) column by the session's
    zone, a string column against an integer failing mid-job, an integer past 2^53 rounded on a double."""
    from pyspark.sql import types as T

    from optimizer.clustering.cuts import check_cut_types

    instant = dt.datetime(2024, 3, 10, 10, tzinfo=dt.UTC)
    refused = [
        (_one("t", "timestamp", instant), _schema(t=T.TimestampNTZType())),
        (_one("d", "timestamp", instant), _schema(d=T.DateType())),
        (_one("t", "date", dt.date(2024, 3, 10)), _schema(t=T.TimestampType())),
        (_one("d", "string", "2024-03-05"), _schema(d=T.DateType())),
        (_one("s", "integer", 2), _schema(s=T.StringType())),
        (_one("i", "string", "3"), _schema(i=T.LongType())),
        (_one("f", "integer", 2**53 + 1), _schema(f=T.DoubleType())),
        (_one("i", "double", 0.5), _schema(i=T.LongType())),
    ]
    for tree, schema in refused:
        with pytest.raises(FeatureError, match="the column's type changed"):
            check_cut_types(tree, schema)
    with pytest.raises(FeatureError, match="which the table no longer has"):
        check_cut_types(_one("gone", "integer", 1), _schema(x=T.LongType()))
    kept = [
        (_one("T", "timestamp", instant), _schema(t=T.TimestampType())),  # Spark resolves names case-blind
        (_one("d", "date", dt.date(2024, 3, 10)), _schema(d=T.DateType())),
        (_one("i", "decimal", Decimal("2.5")), _schema(i=T.IntegerType())),
        (_one("m", "integer", 3), _schema(m=T.DecimalType(10, 2))),
        (_one("f", "integer", 2**53), _schema(f=T.FloatType())),
        (_one("s", "string", "m"), _schema(s=T.StringType())),
    ]
    for tree, schema in kept:
        check_cut_types(tree, schema)


@pytest.mark.spark
def test_the_job_refuses_a_tree_on_a_timestamp_ntz_column_before_laying_out(spark):
    """Without the check the layout ran, its leaves moved by the session's time zone."""
    from pyspark.sql.types import LongType, TimestampNTZType

    from optimizer.clustering.layout import cluster_frame

    rows = [(dt.datetime(2024, 3, 10, h), h) for h in range(0, 24, 3)]
    frame = spark.createDataFrame(rows, _schema(t=TimestampNTZType(), y=LongType()))
    tree = _one("t", "timestamp", dt.datetime(2024, 3, 10, 10, tzinfo=dt.UTC))
    features = FeatureSet(z=(ZFeature("t"), ZFeature("y")), cuts=tree)
    with pytest.raises(FeatureError, match="'t' \\(timestamp_ntz\\) with a timestamp literal"):
        cluster_frame(frame, features, ["t", "y"], [], rows_per_file=4, files=2, fingerprint=False, file_column="f")


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["America/Los_Angeles", "Asia/Kolkata"])
def test_the_leaf_id_denotes_the_same_instant_and_day_in_any_session_zone(spark, zone):
    """A timestamp cut is an instant, a date cut a day: Spark's CASE WHEN under another session zone
    gives every row the leaf numpy gives it on the UTC values."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, TimestampType

    from optimizer.clustering.cuts import leaf_column

    utc = dt.datetime(2024, 3, 10, tzinfo=dt.UTC)
    columns = {
        "t": [utc + dt.timedelta(hours=h) for h in range(-14, 20, 3)] + [None],
        "d": [dt.date(2024, 3, 1 + h % 9) for h in range(12)] + [None],
    }
    tree = CutTree(
        Cut("t", "<", "timestamp", utc + dt.timedelta(hours=2, minutes=30)),
        _one("d", "date", dt.date(2024, 3, 5)),
        CutTree(Cut("d", "<=", "date", dt.date(2024, 3, 6)), CutTree(), CutTree()),
    )
    rows = list(zip(columns["t"], columns["d"], strict=True))
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        frame = spark.createDataFrame(rows, _schema(t=TimestampType(), d=DateType()))
        found = [r[0] for r in frame.select(leaf_column(tree, F.col)).collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert found == leaf_ids(tree, columns, len(rows)).tolist()
    assert len(set(found)) == 4, found


@pytest.mark.spark
def test_a_partitioned_table_budgets_leaves_per_partition(spark):
    """Files mix neither partitions nor leaves: a tree of a leaf per target file over 8 partitions wrote
    8 x 8 files where 8 (and a partition's own) were asked; the budget is `files // partitions`."""
    from pyspark.sql import functions as F

    from optimizer.clustering.cuts import leaf_ids
    from optimizer.clustering.file_cuts import aligned_cuts
    from optimizer.estimate.replay import Query
    from optimizer.estimate.workload_cuts import workload_cuts
    from optimizer.skipping.pruning import prepare

    sample = spark.range(800).select((F.col("id") * 7919 % 1000).alias("x"), (F.col("id") % 97).alias("y"))
    queries = [Query(prepare(f"x >= {a} AND x < {a + 90}"), None, 1.0) for a in range(0, 1000, 100)]
    features = FeatureSet(z=(ZFeature("x"), ZFeature("y")))
    alone = workload_cuts(sample, features, queries, 8)
    assert alone is not None and alone.leaves == 8, alone
    assert workload_cuts(sample, features, queries, 8, partitions=8) is None  # a file per partition already
    halved = workload_cuts(sample, features, queries, 8, partitions=2)
    assert halved is not None and halved.leaves <= 4, halved
    xs = [r.x for r in sample.collect()]
    part = [i % 2 for i in range(len(xs))]
    leaves = leaf_ids(halved, {"x": xs}, len(xs)).tolist()
    assert len(aligned_cuts([part, leaves, xs], 8, 2)) + 1 <= 8


@pytest.mark.spark
def test_a_recurring_predicate_on_a_column_no_curve_orders_is_cut_where_it_skips(spark):
    """Two thirds of the scans ask ``mode IN ('b', 'e')`` (2 of 6 values, a third of the rows), a column the
    curve (x, y) leaves out, the others ranges of x: the tree cuts both (a child of only other modes is
    skipped by those scans), never the partition column `p` every scan also tests (a cut there would skip
    half the rows for every scan: files never mix partitions anyway). With half the scans on `mode`, the
    tree cuts x only: weighted by their selectivity (`cut_growth.relative`), the narrow x ranges lead."""
    from pyspark.sql import functions as F

    from optimizer.estimate.replay import Query
    from optimizer.estimate.workload_cuts import workload_cuts
    from optimizer.skipping.pruning import prepare
    from optimizer.table.key_stats import key_columns

    modes = F.substring(F.lit("abcdef"), (F.col("id") % 6 + 1).cast("int"), 1)
    sample = spark.range(1200).select(
        (F.col("id") * 7919 % 1000).alias("x"),
        (F.col("id") % 97).alias("y"),
        modes.alias("mode"),
        (F.col("id") % 2).alias("p"),
    )
    texts = [f"x >= {a} AND x < {a + 90} AND p = 1" for a in range(0, 1000, 100)]
    texts += ["mode IN ('b', 'e') AND p = 1"] * 20
    queries = [Query(prepare(text), None, 1.0) for text in texts]
    features = FeatureSet(z=(ZFeature("x"), ZFeature("y")))
    tree = workload_cuts(sample, features, queries, 16, partition_columns=["P"])
    assert tree is not None and set(tree.columns) == {"x", "mode"}, tree
    with_tree = FeatureSet(z=features.z, cuts=tree)  # a valid record: the tree cuts plain columns
    assert key_columns(with_tree) == ["x", "y", "mode"]  # its columns get min/max
    curve_only = workload_cuts(sample.drop("mode"), features, queries, 16, partition_columns=["p"])
    assert curve_only is not None and curve_only.columns == ("x",), curve_only


@pytest.mark.spark
def test_a_collated_string_column_gives_no_cut_points(spark):
    """Under UTF8_LCASE 'B' sorts after 'a', where Python (and binary order) put it before: the builder
    cut such a column and the job's check then refused the tree the estimate had chosen."""
    from pyspark.sql import functions as F

    from optimizer.clustering.cuts import check_cut_types
    from optimizer.estimate.replay import Query
    from optimizer.estimate.workload_cuts import workload_cuts
    from optimizer.skipping.pruning import prepare

    letters = F.substring(F.lit("aBcDeFgHiJ"), (F.col("id") % 10 + 1).cast("int"), 1)
    sample = spark.range(400).select(F.collate(letters, "UTF8_LCASE").alias("s"), (F.col("id") % 89).alias("y"))
    queries = [Query(prepare(f"s >= '{a}' AND s < '{b}'"), None, 1.0) for a, b in (("B", "D"), ("F", "H"))]
    features = FeatureSet(z=(ZFeature("s"), ZFeature("y")))
    tree = workload_cuts(sample, features, queries, 8)
    assert tree is None or "s" not in tree.columns, tree
    binary = sample.select(F.collate("s", "UTF8_BINARY").alias("s"), "y")
    cut = workload_cuts(binary, features, queries, 8)  # the same column in binary order is cut
    assert cut is not None and cut.columns == ("s",), cut
    check_cut_types(cut, binary.schema)
    with pytest.raises(FeatureError, match="the column's type changed"):
        check_cut_types(cut, sample.schema)


def test_a_recorded_tree_of_more_leaves_than_deltaopt_builds_is_refused_in_one_line():
    """The job nests a CASE branch per leaf: a hand-written or corrupted record of more leaves than the
    builder makes is refused where the feature set is read, not compiled mid-job."""
    from optimizer.cut_tree import MAX_LEAVES

    def balanced(low: int, high: int) -> CutTree:  # a leaf per value of x in low..high-1
        if high - low == 1:
            return CutTree()
        middle = (low + high) // 2
        return CutTree(Cut("x", "<", "integer", middle), balanced(low, middle), balanced(middle, high))

    def read(leaves: int) -> FeatureSet:
        recorded = json.loads(json.dumps(balanced(0, leaves).as_json()))
        return FeatureSet(z=(ZFeature("x"), ZFeature("y")), cuts=parse_tree(recorded))

    assert read(MAX_LEAVES).cuts is not None and read(MAX_LEAVES).cuts.leaves == MAX_LEAVES
    with pytest.raises(FeatureError, match=f"a cut tree of {MAX_LEAVES + 1} leaves .* at most {MAX_LEAVES}"):
        read(MAX_LEAVES + 1)


@pytest.mark.spark
def test_nan_partition_values_are_one_group_above_the_numbers_as_spark_orders_them(spark):
    """Every NaN a sample of a float partition column holds is a distinct Python float that is not equal
    to itself: each became a group of its own with a file of its own (300 NaN rows, 300+ files). They are
    one group, after every number, as Spark groups and sorts them, and Spark's file index agrees."""
    from pyspark.sql import functions as F

    from optimizer.clustering.cut_search import with_cut_index
    from optimizer.clustering.file_cuts import aligned_cuts

    rng = random.Random(5)
    part = [float("nan") for _ in range(300)] + [1.0] * 300 + [None] * 100  # as Arrow gives them
    keys = [rng.randrange(1000) for _ in part]
    cuts = aligned_cuts([part, keys], 8, 1)
    assert len(cuts) + 1 <= 8, cuts
    opening = [c for c in cuts if c[1] is None]  # each group after the first opens with (its value, NULL)
    assert len(opening) == 2 and opening[0][0] == 1.0 and math.isnan(opening[1][0])
    frame = spark.createDataFrame(list(zip(part, keys, strict=True)), "p double, k long")
    indexed = with_cut_index(frame, [F.col("p"), F.col("k")], cuts, "f").select("p", "f").collect()
    by_group: dict[str, set[int]] = {}
    for row in indexed:
        group = "null" if row.p is None else "nan" if math.isnan(row.p) else "one"
        by_group.setdefault(group, set()).add(row.f)
    assert max(by_group["null"]) < min(by_group["one"]) and max(by_group["one"]) < min(by_group["nan"]), by_group
    assert len(by_group["nan"]) >= 2  # its share of the files, not one file per NaN row
    sizes = [sum(1 for r in indexed if r.f == f) for f in range(len(cuts) + 1)]
    assert min(sizes) >= 50, sizes  # even within a group: its cuts in Spark's order (the keys' NaN-free)


def test_float_keys_rank_as_spark_orders_them_nan_one_value_above_infinity():
    """Ranked as Python objects, every NaN was a value of its own and broke the order of the numbers around
    it (1.0 ranked below 0.5): cuts out of Spark's order made uneven and empty files."""
    from optimizer.clustering.file_cuts import _ranks, file_cuts

    nan, inf = float("nan"), float("inf")
    assert _ranks([float("nan") for _ in range(6)]).tolist() == [0] * 6
    assert _ranks([1.0, nan, 0.5, None, 2.0, inf, -0.0, 0.0]).tolist() == [2, 5, 1, -1, 3, 4, 0, 0]
    rng = random.Random(9)
    values = [rng.choice([nan, inf, -inf, -0.0, 0.0, None, rng.random()]) for _ in range(2000)]
    cuts = [c[0] for c in file_cuts([values], 8)]

    def spark_order(v: float | None) -> tuple[int, float]:
        return (0, 0.0) if v is None else (2, 0.0) if math.isnan(v) else (1, v)

    assert [spark_order(c) for c in cuts] == sorted(spark_order(c) for c in cuts), cuts
