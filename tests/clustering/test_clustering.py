"""SOP clustering (C1), ordering (C2) and Z-order helpers (C3), without Spark."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.clustering.file_cuts import file_cuts
from optimizer.clustering.ordering import file_vectors, order_partitions, zero_bits
from optimizer.clustering.sop import SopPartition, cluster, merge_delta, objective
from optimizer.clustering.zorder import (
    hash_partition_keys,
    quantile_boundaries,
    range_id_of,
    ranges_for,
    zorder,
)


def vector(bits: str) -> int:
    """'010' -> feature 2 set (the dissertation writes feature 1 first)."""
    return sum(1 << k for k, c in enumerate(bits) if c == "1")


WEIGHTS = [50, 20, 10]
V1, V2, V3, V4 = (vector("010"), 12), (vector("001"), 11), (vector("000"), 19), (vector("110"), 10)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(V1, V2, -340), (V1, V3, -380), (V1, V4, -600), (V2, V3, -190), (V2, V4, -870), (V3, V4, -1330)],
)
def test_dissertation_worked_example_deltas(a, b, expected):
    assert merge_delta(a[0], a[1], b[0], b[1], WEIGHTS) == expected


def test_dissertation_first_merge_is_v2_v3():
    """With a minimum size above 30, V2+V3 = (001, 30) is formed first and stays in the pool."""
    partitions = cluster([V1, V2, V3, V4], WEIGHTS, min_size=25)
    assert partitions[0] == SopPartition(vector("001"), 30, (vector("000"), vector("001")))
    assert partitions[1] == SopPartition(vector("110"), 22, (vector("010"), vector("110")))


def brute_force_cluster(vectors, weights, min_size):
    """The dissertation's loop, O(n^3): always merge the pair with the largest delta."""
    result, pool = [], [(v, n, (v,)) for v, n in sorted(vectors) if n > 0]
    for v, n, _ in [p for p in pool if p[1] > min_size]:
        if n >= 2 * min_size:
            chunks = n // min_size
            base, extra = divmod(n, chunks)
            result += [SopPartition(v, base + (i < extra), (v,)) for i in range(chunks)]
        else:
            result.append(SopPartition(v, n, (v,)))
    pool = [p for p in pool if p[1] <= min_size]
    while len(pool) > 1:
        best = max(
            (merge_delta(pool[i][0], pool[i][1], pool[j][0], pool[j][1], weights), -i, -j)
            for i in range(len(pool))
            for j in range(i + 1, len(pool))
        )
        i, j = -best[1], -best[2]
        merged = (pool[i][0] | pool[j][0], pool[i][1] + pool[j][1], tuple(sorted(pool[i][2] + pool[j][2])))
        pool = [p for k, p in enumerate(pool) if k not in (i, j)]
        if merged[1] > min_size:
            result.append(SopPartition(*merged))
        else:
            pool.append(merged)
    result += [SopPartition(*p) for p in pool]
    return result


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 63), st.integers(1, 40)), min_size=1, max_size=25, unique_by=lambda t: t[0]),
    st.lists(st.floats(0.1, 10), min_size=6, max_size=6),
    st.integers(5, 60),
)
def test_heap_clustering_reaches_the_quadratic_loops_objective(vectors, weights, min_size):
    fast = cluster(vectors, weights, min_size)
    slow = brute_force_cluster(vectors, weights, min_size)
    assert sum(p.count for p in fast) == sum(n for _, n in vectors)
    assert {m for p in fast for m in p.members} == {v for v, _ in vectors}
    merged = [m for p in fast if len(p.members) > 1 for m in p.members]
    assert len(merged) == len(set(merged))  # a vector is merged into one partition at most
    assert objective(fast, weights) == pytest.approx(objective(slow, weights))


def test_large_vectors_are_split_into_target_chunks():
    partitions = cluster([(vector("1"), 1050), (vector("0"), 3)], [1.0], min_size=100)
    chunks = [p for p in partitions if p.members == (vector("1"),)]
    assert len(chunks) == 10 and sum(p.count for p in chunks) == 1050
    assert all(100 <= p.count < 200 for p in chunks)


def test_partitions_respect_the_minimum_size():
    rng = random.Random(4)
    vectors = {}
    for _ in range(20000):
        v = sum(1 << k for k in range(10) if rng.random() < 0.2)
        vectors[v] = vectors.get(v, 0) + 1
    partitions = cluster(list(vectors.items()), [rng.random() for _ in range(10)], min_size=400)
    sizes = sorted(p.count for p in partitions)
    assert sum(sizes) == 20000
    assert all(400 < s <= 800 for s in sizes[1:])  # all but possibly the last merged one


def test_mst_ordering_keeps_at_least_as_many_zero_bits_as_identity_order():
    """Files cut along the SOP-id order OR their partitions' vectors (Figure 4.2): the chosen order
    never keeps fewer zeros than the order partitions came in, and clearly more than an arbitrary one."""
    rng = random.Random(8)
    features = 11
    gains = []
    for _ in range(20):
        partitions = [
            SopPartition(sum(1 << k for k in range(features) if rng.random() < 0.25), 100, ()) for _ in range(60)
        ]
        ordered = order_partitions(partitions, rows_per_file=300, weights=[1.0] * features)
        assert sorted(p.vector for p in ordered) == sorted(p.vector for p in partitions)

        def zeros(sequence):  # type: ignore[no-untyped-def]
            return zero_bits([v for v, _ in file_vectors(sequence, 300)], features)

        assert zeros(ordered) >= zeros(partitions)
        gains.append(zeros(ordered) / max(zeros(partitions), 1))
    assert sum(gains) / len(gains) > 1.1


def test_quantile_boundaries_and_range_ids():
    values = [None, *range(100), float("nan")]
    boundaries = quantile_boundaries(values, 4)
    assert boundaries == (25, 50, 75)
    assert [range_id_of(v, boundaries) for v in (None, 0, 24, 25, 99)] == [0, 1, 1, 2, 4]
    assert quantile_boundaries(["b", "a", "a", "c"], 8) == ("b", "c")
    assert quantile_boundaries([], 8) == ()
    assert ranges_for(1000, 1) == 0 and 16 <= ranges_for(1000, 3) <= 1024


def test_file_cuts_split_a_sample_evenly_with_nulls_first():
    keys = [(1, k) for k in range(29, -1, -1)] + [(None, 5)] * 10  # unsorted; NULLs sort first
    cuts = file_cuts([[k[0] for k in keys], [k[1] for k in keys]], 4)
    assert cuts == [(1, 0), (1, 10), (1, 20)]  # the NULL keys lead; no cut at the smallest key
    assert file_cuts([[1] * 50], 8) == []  # ties cannot be split: one file
    assert file_cuts([[]], 8) == [] and file_cuts([], 8) == []
    words = ["b", None, "a", "c", "a", None, "d", "b"]
    assert file_cuts([words], 4) == [("a",), ("b",), ("c",)]
    rng = random.Random(2)
    values = [rng.choice([None, *range(20)]) for _ in range(400)]
    expected = sorted(values, key=lambda v: (v is not None, v or 0))
    cuts = file_cuts([values], 5)
    assert cuts == [(v,) for v in dict.fromkeys(expected[400 * k // 5] for k in range(1, 5)) if v != expected[0]]


def test_rows_land_in_their_files_partition(spark):
    """The file index decides the shuffle partition exactly (Spark's hash partitioning of the probed
    keys), so no two files share a task and every file gets its rows."""
    from pyspark.sql import functions as F

    frame = spark.range(5000).withColumn("v", (F.col("id") * 7919) % 1000)
    laid_out, dimensions = zorder(frame, ["v"], 9, rows=5000, sample_rows=5000)
    assert [d.column for d in dimensions] == ["v"]
    tagged = laid_out.withColumn("p", F.spark_partition_id()).groupBy("p").agg(F.min("v"), F.max("v"), F.count("*"))
    spans = sorted(tuple(r) for r in tagged.collect())
    assert [p for p, *_ in spans] == list(range(9))
    assert all(low <= high for _, low, high, _ in spans)
    assert all(spans[i][2] <= spans[i + 1][1] for i in range(8))  # file ranges in key order, not overlapping
    assert all(400 <= n <= 700 for *_, n in spans)  # about 5000 / 9 rows each
    keys = hash_partition_keys(frame, 9)
    spread = spark.createDataFrame([(k,) for k in keys], "k long").repartition(9, "k")
    assert spread.select(F.spark_partition_id().alias("p"), "k").orderBy("p").collect() == [
        (p, k) for p, k in enumerate(keys)
    ]


def test_the_drivers_z_values_are_the_ones_spark_computes(spark):
    """File boundaries come from Z-values computed on the driver; they must be the values Spark gives
    the same rows, or files would come out uneven."""
    from pyspark.sql import functions as F

    from optimizer.clustering.curves import interleave, interleave_ids, interleave_value
    from optimizer.clustering.cut_search import with_range_id
    from optimizer.clustering.zorder import range_ids

    rng = random.Random(4)
    rows = [
        (rng.choice([None, rng.randint(-50, 50)]), rng.choice([None, f"s{rng.randint(0, 30)}"])) for _ in range(300)
    ]
    boundaries = [(-20, 0, 0, 7, 33), ("s1", "s25", "s9")]
    bits = [3, 3]
    frame = spark.createDataFrame(rows, "a int, b string")
    for c, b in zip("ab", boundaries, strict=True):
        frame = with_range_id(frame, c, b, f"id_{c}")
    from_spark = [r[0] for r in frame.select(interleave([F.col("id_a"), F.col("id_b")], bits)).collect()]
    scalar = [interleave_value([range_id_of(v, b) for v, b in zip(row, boundaries, strict=True)], bits) for row in rows]
    columns = [range_ids([row[i] for row in rows], boundaries[i]) for i in range(2)]
    assert from_spark == scalar == interleave_ids(columns, bits).tolist()


@pytest.mark.parametrize("sop", [False, True])
def test_a_layout_never_written_with_its_rows_known_is_the_layout_counted(spark, sop):
    """The estimator prices every candidate on one counted sample: given that count, a layout never
    written skips pass 1 where it has no SOP feature (nothing to verify, no vector to count), and puts
    every row in the file and row group the counted layout does; with SOP features it still counts."""
    from pyspark.sql import functions as F

    from optimizer.clustering.layout import cluster_frame
    from optimizer.clustering.zorder import GroupIndex
    from optimizer.features import FeatureSet, SopFeature, ZFeature

    frame = spark.range(3000).select(
        "id", (F.col("id") % 3).alias("p"), (F.col("id") * 7919 % 1000).alias("x"), (F.col("id") % 97).alias("y")
    )
    features = FeatureSet(z=(ZFeature("x"), ZFeature("y")), sop=(SopFeature("y < 10"),) if sop else ())

    def placed(known: int | None) -> tuple[int, list[tuple[int, int, int]]]:
        layout = cluster_frame(
            frame,
            features,
            ["id", "x", "y"],
            ["p"],
            rows_per_file=300,
            files=10,
            fingerprint=False,
            file_column="f",
            row_groups=GroupIndex("g", 3),
            boundary_rows=1000,  # fewer than the rows: the boundaries' sample is drawn at 1000 / rows
            known_rows=known,
        )
        return layout.distinct_vectors, sorted(tuple(r) for r in layout.frame.select("id", "f", "g").collect())

    counted_vectors, counted = placed(None)
    known_vectors, known = placed(3000)
    assert known == counted and len({f for _, f, _ in known}) > 5
    assert (known_vectors, counted_vectors) == ((2, 2) if sop else (0, 0))
