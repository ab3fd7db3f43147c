"""The binary search Spark runs a step per projection (`cut_search`): the same place among the cuts as the
driver's search, for every type a key may have, at every padding edge, and code small enough to compile."""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from typing import Any

import pytest

from optimizer.clustering.cut_search import with_cut_index, with_range_id
from optimizer.clustering.zorder import quantile_boundaries, range_ids

pytestmark = pytest.mark.spark

BASE_DAY = dt.date(2024, 1, 1)
BASE_TIME = dt.datetime(2024, 3, 31, 0, 30, tzinfo=dt.UTC)


def _values(kind: str, rng: random.Random, count: int) -> list[Any]:
    """`count` values of one Spark type, a tenth NULL, floats with NaN, infinities and both zeros."""
    draw = {
        "long": lambda: rng.randint(-500, 500),
        "double": lambda: rng.choice([rng.uniform(-5, 5), math.nan, math.inf, -math.inf, 0.0, -0.0]),
        "string": lambda: f"s{rng.randint(0, 300):03d}",
        "date": lambda: BASE_DAY + dt.timedelta(days=rng.randint(0, 400)),
        "timestamp": lambda: BASE_TIME + dt.timedelta(minutes=rng.randint(0, 5000)),
        "decimal(10,2)": lambda: Decimal(rng.randint(-99999, 99999)) / 100,
    }[kind]
    return [None if rng.random() < 0.1 else draw() for _ in range(count)]


@pytest.mark.parametrize("kind", ["long", "double", "string", "date", "timestamp", "decimal(10,2)"])
def test_range_ids_equal_the_drivers_for_every_type_and_padding(spark, kind):
    """The driver computes the sample's range ids to cut files; Spark computes every row's. They must agree,
    or files come out uneven: at 0 cuts, one, a full power-of-two array (7, 15: no padding) and one past it
    (8, 16: the most padding), values equal to a cut, below the first and above the last."""
    from pyspark.sql import functions as F

    rng = random.Random(kind)
    rows = _values(kind, rng, 400)
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(rows)], f"i long, v {kind}")
    present = [v for v in rows if v is not None]
    for ranges in (1, 2, 8, 9, 16, 17):
        boundaries = quantile_boundaries(present, ranges)
        named = with_range_id(frame, "v", boundaries, "rid")
        got = [r.rid for r in named.orderBy("i").select("rid").collect()]
        assert got == range_ids(rows, boundaries).tolist(), (ranges, boundaries)
        assert named.schema["rid"].dataType.simpleString() == "bigint"
        assert named.select(F.max("rid")).first()[0] <= len(boundaries) + 1


def _spark_order(value: Any) -> tuple:
    """A value's place in Spark's ascending order: NULL first, NaN above every number, -0.0 = 0.0."""
    if value is None:
        return (0,)
    if isinstance(value, float) and math.isnan(value):
        return (2,)
    return (1, value)


@pytest.mark.parametrize("kinds", [("long",), ("double", "long"), ("string", "date", "double")])
def test_cut_index_counts_the_cuts_at_or_below_each_key_in_sparks_order(spark, kinds):
    """A row's file: the number of cuts <= its key, lexicographically, NULL before any value, as rows
    are sorted within files. Cuts hold NULLs (an aligned group's opening cut) and NaN."""
    from pyspark.sql import functions as F

    rng = random.Random(len(kinds))
    columns = [_values(kind, rng, 300) for kind in kinds]
    rows = list(zip(*columns, strict=True))
    frame = spark.createDataFrame(
        [(i, *row) for i, row in enumerate(rows)], ", ".join(["i long", *(f"c{j} {k}" for j, k in enumerate(kinds))])
    )
    keys = sorted({tuple(map(_spark_order, row)) for row in rows})
    for count in (0, 1, 3, 4, 31, 32):
        chosen = sorted(rng.sample(range(len(keys)), min(count, len(keys))))
        by_order = {tuple(map(_spark_order, row)): row for row in rows}
        cuts = [by_order[keys[k]] for k in chosen]
        if count >= 3:  # a cut ending in NULLs, as `aligned_cuts` opens a group
            cuts[1] = (*cuts[1][:1], *([None] * (len(kinds) - 1)))
            cuts = sorted(set(cuts), key=lambda c: tuple(map(_spark_order, c)))
        ordered = [tuple(map(_spark_order, c)) for c in cuts]
        key_columns = [F.col(f"c{j}") for j in range(len(kinds))]
        got = [r.f for r in with_cut_index(frame, key_columns, cuts, "f").orderBy("i").select("f").collect()]
        want = [sum(tuple(map(_spark_order, row)) >= c for c in ordered) for row in rows]
        assert got == want, (count, cuts)


def test_a_key_of_three_11_bit_dimensions_compiles(spark):
    """At 1023 boundaries a dimension's range id was a nested CASE of 2047 branches: three of them in one
    stage passed Janino's 64 KB per method, and Spark fell back from whole-stage code generation (3.4x the
    time, an 8.5 MiB task binary). With whole-stage code generation on and its fallback off (as the old
    key failed), the key of three 11-bit dimensions must compile and equal the driver's."""
    from pyspark.sql import functions as F

    from optimizer.clustering.zorder import Dimension, Helpers, _with_key

    boundaries = tuple(float(b) for b in range(1, 1024))
    dimensions = [Dimension(f"c{i}", boundaries) for i in range(3)]
    assert dimensions[0].bits == 11
    columns = [((F.col("id") * (7 + 2 * i)) % 1100).cast("double").alias(f"c{i}") for i in range(3)]
    frame = spark.range(3000).select(*columns)
    required = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.fallback": "false"}
    previous = {key: spark.conf.get(key) for key in required}
    for key, value in required.items():
        spark.conf.set(key, value)
    try:
        keyed = _with_key(frame, dimensions, Helpers(), ("z", ())).select("c0", "c1", "c2", "__zkey").collect()
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value)
    from optimizer.clustering.curves import interleave_ids

    ids = [range_ids([r[i] for r in keyed], boundaries) for i in range(3)]
    assert [r[3] for r in keyed] == interleave_ids(ids, [11, 11, 11]).tolist()


@pytest.mark.parametrize(
    ("python_zone", "timestamp_type"), [("Asia/Kolkata", "TIMESTAMP_LTZ"), ("UTC", "TIMESTAMP_NTZ")]
)
def test_dates_and_timestamps_search_as_the_driver_whatever_the_zones(spark, monkeypatch, python_zone, timestamp_type):
    """Cuts were PySpark literals: a naive datetime (a TIMESTAMP_NTZ value) was read in the Python process's
    zone, not as its wall clock (a cut inside Los Angeles' DST gap moved an hour, 1900 by Kolkata's old
    offset), a date before year 1000 failed the query, and 0001-01-01 came out a day off. Cast from ISO text
    to the type itself (the name "timestamp" is NTZ where `spark.sql.timestampType` says so), each is its own
    value in any session zone, any process zone and either default timestamp type."""
    import time

    from pyspark.sql import functions as F

    from optimizer.clustering.cut_search import sample_literal

    monkeypatch.setenv("TZ", python_zone)
    time.tzset()
    settings = {"spark.sql.session.timeZone": "America/Los_Angeles", "spark.sql.timestampType": timestamp_type}
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        instants = [dt.datetime(2024, 3, 9, 20, tzinfo=dt.UTC) + dt.timedelta(minutes=7 * k) for k in range(200)]
        frame = spark.createDataFrame(list(enumerate(instants)), "i long, v timestamp_ltz")
        boundaries = quantile_boundaries(instants, 16)
        got = [r.rid for r in with_range_id(frame, "v", boundaries, "rid").orderBy("i").select("rid").collect()]
        assert got == range_ids(instants, boundaries).tolist()
        texts = [dt.date(999, 12, 31), dt.datetime(2024, 3, 10, 2, 30), dt.datetime(1, 1, 1, tzinfo=dt.UTC)]
        shown = spark.range(1).select(*[sample_literal(v).cast("string") for v in texts]).first()
        assert list(shown) == ["0999-12-31", "2024-03-10 02:30:00", "0000-12-31 16:07:02"]  # the instant, in LA

        rng = random.Random(python_zone)
        gap, old = dt.datetime(2024, 3, 10, 2, 30), dt.datetime(1900, 1, 1)
        walls = [dt.datetime(2024, 1, 1) + dt.timedelta(minutes=rng.randint(0, 200_000)) for _ in range(300)]
        walls += [gap, old, dt.datetime(1800, 1, 1), None]
        frame = spark.createDataFrame(list(enumerate(walls)), "i long, v timestamp_ntz")
        boundaries = tuple(sorted({*quantile_boundaries(walls, 32), gap, old}))
        got = [r.rid for r in with_range_id(frame, "v", boundaries, "rid").orderBy("i").select("rid").collect()]
        assert got == range_ids(walls, boundaries).tolist()

        days = [dt.date(1, 1, 1), dt.date(999, 12, 31), dt.date(2024, 1, 1), dt.date(1582, 10, 15), None]
        instant = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
        rows = [(i, d, instant if i % 2 else None) for i, d in enumerate(days)]
        frame = spark.createDataFrame(rows, "i long, d date, t timestamp_ltz")
        cuts = [(d,) for d in days[:4]]
        indexed = with_cut_index(frame, [F.col("d")], sorted(cuts), "f").orderBy("i").select("f").collect()
        assert [r.f for r in indexed] == [sum(d is not None and d >= c for (c,) in cuts) for d in days]
        at_instant = with_cut_index(frame, [F.col("t")], [(instant,)], "f").orderBy("i").select("f").collect()
        assert [r.f for r in at_instant] == [i % 2 for i in range(len(days))]  # at the cut: file 1; NULL: 0
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value) if value is not None else spark.conf.unset(key)
        monkeypatch.undo()
        time.tzset()


def test_the_result_may_take_the_name_of_a_column_it_reads(spark):
    """The search keeps its position in a column of its own: written straight into `name`, a `name` that
    is the key column itself was overwritten by the first step and every later step read the position."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(i, i) for i in range(10)], "i long, k long")
    cuts = [(3,), (6,), (8,)]
    by_other = [r.f for r in with_cut_index(frame, [F.col("k")], cuts, "f").orderBy("i").collect()]
    by_itself = [r.k for r in with_cut_index(frame, [F.col("k")], cuts, "k").orderBy("i").collect()]
    assert by_other == by_itself == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]
    ranged = [r.k for r in with_range_id(frame, "k", (3, 6, 8), "k").orderBy("i").collect()]
    assert ranged == [1, 1, 1, 2, 2, 2, 3, 3, 4, 4]
    taken = frame.withColumnRenamed("k", "f_search")  # the search's own column name is taken: it picks another
    searched = with_cut_index(taken, [F.col("f_search")], cuts, "f").orderBy("i").collect()
    assert [r.f for r in searched] == by_other and [r.f_search for r in searched] == list(range(10))
