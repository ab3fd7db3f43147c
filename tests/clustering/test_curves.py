"""The layout curves (`optimizer.clustering.curves`): the Hilbert curve beside Z-order, the same key in
Spark and on the driver, carried by the feature set to the job, and priced by the estimate."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.clustering.by_delta import delta_expressible
from optimizer.clustering.curves import (
    HILBERT_MAX_DIMENSIONS,
    check_curve,
    hilbert_ids,
    hilbert_value,
    interleave_ids,
    with_hilbert,
)
from optimizer.clustering.groups import layout_key
from optimizer.errors import ClusteringError, FeatureError
from optimizer.estimate.candidates import candidate_layouts
from optimizer.features import FeatureSet, SopFeature, ZFeature


def _walk(key: np.ndarray, points: np.ndarray) -> tuple[bool, bool]:
    """(the keys number the points 0..n-1 exactly once; consecutive keys are grid neighbours)."""
    bijective = sorted(key.tolist()) == list(range(len(points)))
    steps = np.abs(np.diff(points[np.argsort(key)], axis=0)).sum(axis=1)
    return bijective, bool((steps == 1).all())


@pytest.mark.parametrize(("dimensions", "bits"), [(2, 1), (2, 3), (2, 4), (3, 1), (3, 2), (3, 3), (4, 1), (4, 2)])
def test_the_hilbert_key_walks_the_grid_one_neighbour_at_a_time_where_z_jumps(dimensions, bits):
    points = np.array(list(itertools.product(range(1 << bits), repeat=dimensions)), dtype=np.int64)
    columns = [points[:, i] for i in range(dimensions)]
    assert _walk(hilbert_ids(columns, [bits] * dimensions), points) == (True, True)
    z_bijective, z_neighbours = _walk(interleave_ids(columns, [bits] * dimensions), points)
    assert z_bijective and not z_neighbours  # the property is the curve's, not the harness's


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=HILBERT_MAX_DIMENSIONS).filter(lambda b: sum(b) <= 12))
def test_dimensions_of_unequal_bits_give_every_point_its_own_key_within_the_bits_of_the_curve(bits):
    """Ids of a dimension with fewer bits shifted to the high end: still one key per point of the grid,
    no key past d * max(bits) bits, and the driver's one-point form agrees with its arrays."""
    points = np.array(list(itertools.product(*[range(1 << b) for b in bits])), dtype=np.int64)
    key = hilbert_ids([points[:, i] for i in range(len(bits))], bits)
    assert len(set(key.tolist())) == len(points)
    assert key.min() >= 0 and int(key.max()).bit_length() <= max(bits) * len(bits)
    assert hilbert_value(points[-1].tolist(), bits) == key[-1]


def test_a_curve_that_cannot_order_the_dimensions_is_refused_before_any_work():
    from optimizer.clustering.zorder import zorder

    check_curve("hilbert", HILBERT_MAX_DIMENSIONS)
    check_curve("z", HILBERT_MAX_DIMENSIONS + 3)
    with pytest.raises(ClusteringError, match="at most 5 dimensions"):
        zorder(None, [f"c{i}" for i in range(6)], 4, rows=10, curve="hilbert")  # type: ignore[arg-type]
    with pytest.raises(ClusteringError, match="fit in a long"):
        hilbert_ids([np.zeros(1, dtype=np.int64)] * 5, [13] * 5)


def test_the_curve_round_trips_and_old_records_read_as_z_order():
    hilbert = FeatureSet(z=(ZFeature("a"), ZFeature("b")), curve="hilbert")
    assert hilbert.as_dict()["curve"] == "hilbert"
    assert FeatureSet.from_dict(hilbert.as_dict()) == hilbert
    old = {"z": ["a", "b"], "sop": [], "z_add": [], "sop_add": [], "sop_weights": {}}
    assert FeatureSet.from_dict(old).curve == "z"
    assert FeatureSet.from_dict(old).as_dict() == old  # Z-order adds no key: old records read the same
    with pytest.raises(FeatureError, match="unknown curve 'peano'"):
        FeatureSet.from_dict({**old, "curve": "peano"})
    assert layout_key(hilbert) != layout_key(FeatureSet.from_dict(old))
    assert layout_key(FeatureSet.from_dict(old)) == 'z=["a", "b"] sop=[]'


def test_the_estimate_lists_a_hilbert_candidate_where_a_curve_orders_two_or_more_dimensions():
    def hilbert_of(features: FeatureSet, **kwargs: bool) -> list[FeatureSet]:
        return [layout for name, layout in candidate_layouts(features, **kwargs) if layout.curve == "hilbert"]

    two = FeatureSet(z=(ZFeature("a"), ZFeature("b")))
    assert hilbert_of(two) == [FeatureSet(z=two.z, curve="hilbert")]
    assert ("Hilbert curve", FeatureSet(z=two.z, curve="hilbert")) in candidate_layouts(two)
    assert hilbert_of(two, hilbert=False) == []
    assert hilbert_of(FeatureSet(z=(ZFeature("a"),))) == []  # one dimension: sorted by its value
    with_sop = FeatureSet(z=(ZFeature("a"),), sop=(SopFeature("b = 1"),))  # the SOP id is the second dimension
    assert [f.curve_dimensions for f in hilbert_of(with_sop)] == [2]
    assert hilbert_of(FeatureSet(z=(ZFeature("a"),), sop=(SopFeature("b = 1"),), sop_leads=True)) == []
    six = FeatureSet(z=tuple(ZFeature(c) for c in "abcdef"))
    assert hilbert_of(six) == []


def test_delta_zorder_by_names_the_curve_it_cannot_follow():
    applied, left = delta_expressible(FeatureSet(z=(ZFeature("a"), ZFeature("b")), curve="hilbert"))
    assert applied.curve == "z" and left == ["Hilbert curve"]
    assert delta_expressible(FeatureSet(z=(ZFeature("a"), ZFeature("b"))))[1] == []


@pytest.mark.spark
def test_spark_computes_the_keys_the_driver_computes(spark):
    """The sample's keys give the file cuts: they must be the ones Spark gives the same rows. Random
    ids of unequal bits for every dimension count (one job over all rows each), and the widest key."""
    from pyspark.sql import functions as F

    rng = random.Random(7)
    cases = [[rng.randint(1, 63 // d) for _ in range(d)] for d in range(2, HILBERT_MAX_DIMENSIONS + 1)]
    cases.append([31, 31])  # 62 bits
    names = [f"v{i}" for i in range(HILBERT_MAX_DIMENSIONS)]
    hashed = [F.xxhash64("id", F.lit(i)).bitwiseAND(F.lit(2**63 - 1)).alias(n) for i, n in enumerate(names)]
    frame = spark.range(400).select(*hashed)  # random ids computed in the JVM: no Python worker per job
    rows = frame.collect()
    for bits in cases:
        ids = [F.col(f"v{i}").bitwiseAND(F.lit((1 << b) - 1)) for i, b in enumerate(bits)]
        keyed = with_hilbert(frame, "k", ids, bits, scratch="s_")
        assert keyed.columns == [*names, "k"]  # the scratch columns dropped
        expected = [np.array([r[i] & ((1 << b) - 1) for r in rows], dtype=np.int64) for i, b in enumerate(bits)]
        assert [r["k"] for r in keyed.collect()] == hilbert_ids(expected, bits).tolist(), bits


@pytest.mark.spark
def test_the_job_lays_files_out_along_the_hilbert_curve_and_records_it(spark, tmp_path):
    """Real job, `curve="hilbert"`: the same rows, the curve in the commit and the index, and each file's
    rows in Hilbert order of their range ids (here each value is its own range: id = value + 1)."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from optimizer.clustering import optimize
    from optimizer.clustering.zorder import quantile_boundaries, range_id_of
    from optimizer.skipping.extended import load_index_with_runs
    from optimizer.table import open_table

    frame = spark.range(20_000).select(
        "id", (F.col("id") % 16).alias("x"), (F.col("id") / 16 % 16).cast("long").alias("y")
    )
    frame = frame.withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
    table = open_table(str(tmp_path / "t"))
    table.create(spark, frame.repartition(3))
    before = sorted(tuple(r) for r in spark.read.format("delta").load(table.uri).collect())
    features = FeatureSet(z=(ZFeature("x"), ZFeature("y")), curve="hilbert")
    result = optimize(spark, table, features, 250_000)
    assert sorted(tuple(r) for r in spark.read.format("delta").load(table.uri).collect()) == before
    snapshot = table.snapshot()
    commit = next(c for c in table.history(0) if c.deltaopt.get("runId") == result.run_id)
    assert commit.deltaopt["features"]["curve"] == "hilbert"
    assert load_index_with_runs(table, snapshot)[1][result.run_id]["curve"] == "hilbert"
    assert quantile_boundaries(list(range(16)) * 10, 64) == tuple(range(1, 16))
    in_order = {"hilbert": 0, "z": 0}
    files = [f for f in snapshot.files]
    assert len(files) >= 3
    for f in files:
        rows = pq.read_table(f"{table.uri}/{f.path}", columns=["x", "y"]).to_pylist()
        ids = [np.array([range_id_of(r[c], tuple(range(1, 16))) for r in rows], dtype=np.int64) for c in "xy"]
        for curve, keys in (("hilbert", hilbert_ids(ids, [5, 5])), ("z", interleave_ids(ids, [5, 5]))):
            in_order[curve] += bool((np.diff(keys) >= 0).all())
    assert in_order == {"hilbert": len(files), "z": 0}, in_order


@pytest.mark.spark
def test_the_estimate_prices_the_hilbert_candidate_beside_z_order(spark, tmp_path):
    """A 2-column range workload over uniform data: the estimate lists and prices the Hilbert layout on
    the same sample and replay as Z-order; it keeps no more of the data than Z-order, up to noise."""
    from pyspark.sql import functions as F

    from optimizer.config import Thresholds
    from optimizer.estimate.layouts import workload_replay
    from optimizer.table import open_table
    from querylog.records import ScanRecord
    from tests.estimate.workloads import NOW, priced_layouts

    frame = spark.range(20_000).select(
        "id", (F.col("id") * 7919 % 1000).alias("x"), (F.col("id") * 104_729 % 997).alias("y")
    )
    table = open_table(str(tmp_path / "t"))
    snapshot = table.create(spark, frame.withColumn("pad", F.sha2(F.col("id").cast("string"), 256)).repartition(4))
    sample = table.read_files(spark, snapshot.files, snapshot).cache()
    rng = random.Random(3)
    boxes = [(rng.randrange(800), rng.randrange(800), rng.randint(50, 200), rng.randint(50, 200)) for _ in range(24)]
    records = [
        ScanRecord(f"q{i}", NOW, "t", (f"x >= {x}", f"x < {x + w}", f"y >= {y}", f"y < {y + h}"), ("pad",), "test")
        for i, (x, y, w, h) in enumerate(boxes)
    ]
    size = sum(f.size for f in snapshot.files)
    thresholds = Thresholds(min_new_bytes=1, target_file_size=size // 32, estimate_compression=False)
    replay = workload_replay(table, snapshot, snapshot.files, records=records, thresholds=thresholds, now=NOW)
    features = FeatureSet(z=(ZFeature("x"), ZFeature("y")))
    priced = priced_layouts(table, snapshot, sample, replay, features, thresholds)
    p_after = {name: e.benefit.p_after for name, e in priced.items()}
    print(f"p_after by layout: {p_after}")
    assert p_after["Hilbert curve"] <= p_after["as analysed"] * 1.05 + 0.005, p_after
    assert p_after["Hilbert curve"] != p_after["as analysed"]  # priced on its own layout, not on Z-order's
    assert p_after["as analysed"] < 0.5 * priced["as analysed"].benefit.p_before  # selective: curves matter
