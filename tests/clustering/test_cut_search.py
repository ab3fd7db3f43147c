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
from optimizer.clustering.zorder import _range_ids, quantile_boundaries

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
        assert got == _range_ids(rows, boundaries).tolist(), (ranges, boundaries)
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

    ids = [_range_ids([r[i] for r in keyed], boundaries) for i in range(3)]
    assert [r[3] for r in keyed] == interleave_ids(ids, [11, 11, 11]).tolist()
