"""Per-dimension precision (learned Z-order bits): the bit pattern on the feature set, the Z key that follows
it in Spark and on the driver, the pattern chosen from the workload, and the estimate's candidate."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.clustering.by_delta import delta_expressible
from optimizer.clustering.curves import KEY_BITS, interleave_ids, interleave_value, key_bit_order
from optimizer.clustering.groups import layout_key
from optimizer.clustering.precision import allocate_bits, dimension_weights, kept_pattern, workload_pattern
from optimizer.clustering.zorder import MAX_RANGES, Dimension
from optimizer.errors import ClusteringError, FeatureError
from optimizer.estimate.candidates import candidate_layouts
from optimizer.features import DIMENSION_BITS, FeatureSet, SopFeature, ZFeature

WORKLOAD_BITS = "Z-order, workload bits"


def _round_robin_reference(ids: list[np.ndarray], bits: list[int]) -> np.ndarray:
    """`interleave_ids` as it was before bit patterns (kept verbatim: the default must not move a key)."""
    key = np.zeros(len(ids[0]), dtype=np.int64)
    position = 0
    for t in range(max(bits)):
        for i, column in enumerate(ids):
            if t < bits[i]:
                key |= ((column >> t) & 1) << position
                position += 1
    return key


@st.composite
def _case(draw: st.DrawFn) -> tuple[list[int], tuple[int, ...]]:
    """Bits per dimension (a key of at most 63 bits) and a pattern over them, possibly naming more bits
    of a dimension than it has (the job passes those over)."""
    d = draw(st.integers(2, 5))
    bits = draw(st.lists(st.integers(1, 11), min_size=d, max_size=d).filter(lambda b: sum(b) <= KEY_BITS))
    pattern = draw(st.lists(st.integers(0, d - 1), max_size=min(sum(bits) + 4, KEY_BITS)))
    return bits, tuple(pattern)


def _ids(bits: list[int], rows: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 1 << b, size=rows, dtype=np.int64) for b in bits]


@settings(max_examples=200, deadline=None)
@given(_case(), st.integers(0, 2**32))
def test_the_default_pattern_gives_exactly_todays_keys(case, seed):
    bits, _ = case
    ids = _ids(bits, 50, seed)
    assert interleave_ids(ids, bits).tolist() == _round_robin_reference(ids, bits).tolist()
    assert interleave_ids(ids, bits, ()).tolist() == _round_robin_reference(ids, bits).tolist()


@settings(max_examples=200, deadline=None)
@given(_case())
def test_a_pattern_places_every_bit_of_every_dimension_once_its_bits_leading(case):
    bits, pattern = case
    order = key_bit_order(bits, pattern)
    assert sorted(order) == sorted((i, t) for i in range(len(bits)) for t in range(bits[i]))
    given_ = {i: 0 for i in range(len(bits))}
    followed = []
    for i in pattern:  # the pattern's bits, most significant first, passing over a dimension's exhausted bits
        if given_[i] < bits[i]:
            given_[i] += 1
            followed.append((i, bits[i] - given_[i]))
    assert order[::-1][: len(followed)] == followed


def test_a_pattern_on_a_small_grid_still_numbers_every_point_once_and_leads_with_its_dimension():
    bits = [3, 3]
    points = np.array(list(itertools.product(range(8), repeat=2)), dtype=np.int64)
    columns = [points[:, 0], points[:, 1]]
    keys = interleave_ids(columns, bits, (0, 0, 0))  # dimension 0's three bits lead: sorted by it first
    assert sorted(keys.tolist()) == list(range(64))
    ordered = points[np.argsort(keys)]
    assert (np.diff(ordered[:, 0]) >= 0).all() and not (np.diff(ordered[:, 1]) >= 0).all()
    assert interleave_value([5, 2], bits, (0, 0, 0)) == 5 << 3 | 2
    with pytest.raises(ClusteringError, match="fit in a long"):
        key_bit_order([11] * 6)


def test_the_feature_set_records_the_pattern_only_when_set_and_refuses_a_malformed_one():
    two = FeatureSet(z=(ZFeature("a"), ZFeature("b")), precision=(0, 0, 1))
    assert two.as_dict()["precision"] == [0, 0, 1]
    assert FeatureSet.from_dict(two.as_dict()) == two
    old = {"z": ["a", "b"], "sop": [], "z_add": [], "sop_add": [], "sop_weights": {}}
    assert FeatureSet.from_dict(old).precision == ()
    assert FeatureSet.from_dict(old).as_dict() == old  # round-robin adds no key: old records read the same
    assert layout_key(two) != layout_key(FeatureSet.from_dict(old)) == 'z=["a", "b"] sop=[]'
    refused = {
        "names dimension": {**old, "precision": [0, 2]},
        "more than the 11 bits": {**old, "precision": [0] * 12},
        "at most 63 fit": {**old, "z": list("abcdefg"), "precision": list(range(7)) * 10},
        "malformed bit pattern": {**old, "precision": "0,1"},
        "Z-order only": {**old, "precision": [0, 1], "curve": "hilbert"},
        "two or more curve dimensions": {**old, "z": ["a"], "precision": [0]},
    }
    for message, record in refused.items():
        with pytest.raises(FeatureError, match=message):
            FeatureSet.from_dict(record)
    with_sop = FeatureSet(z=(ZFeature("a"),), sop=(SopFeature("b = 1"),), precision=(1, 0))  # the SOP id: dimension 1
    assert FeatureSet.from_dict(with_sop.as_dict()) == with_sop
    assert (MAX_RANGES + 1).bit_length() == DIMENSION_BITS == Dimension("c", tuple(range(MAX_RANGES - 1))).bits


def test_delta_zorder_by_names_the_bit_pattern_it_cannot_follow():
    applied, left = delta_expressible(FeatureSet(z=(ZFeature("a"), ZFeature("b")), precision=(0, 0)))
    assert applied.precision == () and left == ["workload bits"]
    applied, left = delta_expressible(FeatureSet(z=(ZFeature("a"), ZFeature("b")), precision=(0, 0)), clustered=True)
    assert applied.precision == () and left == ["workload bits"]


def test_weights_count_scans_by_the_bits_of_selectivity_of_their_filters():
    scans = [(2.0, {0: 1 / 8}), (1.0, {0: 1 / 2, 1: 1 / 4}), (5.0, {1: 1.0})]  # a filter keeping all: nothing
    assert dimension_weights(scans, 3) == pytest.approx([2 * 3 + 1 * 1, 1 * 2, 0.0])


def test_the_greedy_gives_each_bit_to_the_highest_remaining_weight_never_past_a_dimensions_bits():
    # weights 8 and 1: dimension 0 scores 8, 4, 2, 1 before dimension 1's first bit (1, a tie: the higher index)
    pattern = allocate_bits([8.0, 1.0], [5, 5])
    assert pattern[:5] == (0, 0, 0, 1, 0)
    assert pattern.count(0) == 5 and pattern.count(1) == 5
    assert allocate_bits([8.0, 1.0], [2, 5]) == (0, 0, 1, 1, 1, 1, 1)  # dimension 0 has only two bits
    assert allocate_bits([0.0, 3.0, 0.0], [4, 2, 4]) == (1, 1)  # the rest: round-robin below it
    assert workload_pattern([1.0, 1.0, 1.0], [5, 5, 5]) == ()  # equal weights: round-robin, nothing to price
    assert workload_pattern([0.0, 0.0], [5, 5]) == ()
    # given out over every bit a dimension can have (the same pattern whatever the file count), it writes
    # the greedy's own order over the bits the job has
    assert key_bit_order([5, 5], workload_pattern([8.0, 1.0], [5, 5])) == key_bit_order([5, 5], pattern)
    stable = allocate_bits([8.0, 1.0], [DIMENSION_BITS] * 2)
    assert workload_pattern([8.0, 1.0], [5, 5]) == workload_pattern([8.0, 1.0], [9, 9]) == stable


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=2, max_size=5), st.integers(1, 11))
def test_the_greedy_is_deterministic_and_bounded(weights, width):
    bits = [width] * len(weights)
    pattern = allocate_bits(weights, bits)
    assert pattern == allocate_bits(list(weights), list(bits))
    assert all(pattern.count(i) <= bits[i] for i in range(len(bits)))
    assert all(weights[i] > 0 for i in pattern)
    for k, chosen in enumerate(pattern):  # each bit went to a highest score among dimensions with bits left
        scores = {i: weights[i] / 2 ** pattern[:k].count(i) for i in range(len(bits)) if pattern[:k].count(i) < width}
        assert scores[chosen] == max(scores.values())
    left = [i for i in range(len(bits)) if weights[i] > 0 and pattern.count(i) < width]
    assert not left  # it stops only when no weighted dimension has bits left


def test_a_pattern_follows_the_dimensions_the_job_has():
    assert kept_pattern((0, 1, 2, 1, 0), (True, False, True)) == (0, 1, 0)
    assert kept_pattern((0, 1), (True, True)) == (0, 1)


def test_the_estimate_offers_workload_bits_only_for_z_order_and_a_job_that_can_write_them():
    two = FeatureSet(z=(ZFeature("a"), ZFeature("b")))
    names = dict(candidate_layouts(two, workload_bits=(0, 0, 1)))
    assert names[WORKLOAD_BITS] == FeatureSet(z=two.z, precision=(0, 0, 1))
    assert WORKLOAD_BITS not in dict(candidate_layouts(two))  # round-robin anyway: nothing offered
    assert WORKLOAD_BITS not in dict(candidate_layouts(two, hilbert=False, workload_bits=(0, 0, 1)))
    liquid = FeatureSet(z=two.z, curve="hilbert")
    assert WORKLOAD_BITS not in dict(candidate_layouts(liquid, workload_bits=(0, 0, 1)))
    analysed = FeatureSet(z=two.z, sop=(SopFeature("c = 1"),), precision=(2, 2))  # variants drop its pattern
    layouts = dict(candidate_layouts(analysed, workload_bits=(0, 0)))
    assert layouts["as analysed"] == analysed
    assert layouts["SOP id leading"].precision == () and layouts["Hilbert curve"].precision == ()
    assert layouts[WORKLOAD_BITS].precision == (0, 0)


@pytest.mark.spark
@settings(max_examples=4, deadline=None)
@given(st.lists(_case(), min_size=6, max_size=6))
def test_spark_computes_the_keys_the_driver_computes_for_any_pattern(spark, cases):
    """The sample's keys give the file cuts: Spark's `interleave` must give the same rows the same keys
    as `interleave_ids`, for random ids, bits and patterns (one job per example, all its cases at once)."""
    from pyspark.sql import functions as F

    from optimizer.clustering.curves import interleave

    names = [f"v{i}" for i in range(5)]
    hashed = [F.xxhash64("id", F.lit(i)).bitwiseAND(F.lit(2**63 - 1)).alias(n) for i, n in enumerate(names)]
    frame = spark.range(300).select(*hashed)  # random ids computed in the JVM: no Python worker per job
    keys = []
    for bits, pattern in cases:
        ids = [F.col(names[i]).bitwiseAND(F.lit((1 << b) - 1)) for i, b in enumerate(bits)]
        keys.append(interleave(ids, bits, pattern))
    rows = frame.select(*names, *[k.alias(f"k{n}") for n, k in enumerate(keys)]).collect()
    for n, (bits, pattern) in enumerate(cases):
        ids = [np.array([r[names[i]] & ((1 << b) - 1) for r in rows], dtype=np.int64) for i, b in enumerate(bits)]
        assert [r[f"k{n}"] for r in rows] == interleave_ids(ids, bits, pattern).tolist(), (bits, pattern)


def _skewed_workload() -> list:
    """Often and narrowly on x (1% of its range, 24 scans), rarely and broadly on y (half of it, 2 scans)."""
    from querylog.records import ScanRecord
    from tests.estimate.workloads import NOW

    narrow = [(f"x >= {a}", f"x < {a + 10}") for a in range(15, 975, 40)]
    broad = [(f"y >= {b}", f"y < {b + 500}") for b in (0, 400)]
    return [ScanRecord(f"q{i}", NOW, "t", f, ("pad",), "test") for i, f in enumerate(narrow + broad)]


def _mean_bytes_read(table, records, thresholds) -> float:
    """The workload's mean bytes read over the table's files as they are (file and row-group pruning)."""
    from optimizer.estimate.layouts import workload_replay
    from optimizer.estimate.replay import query_bytes
    from tests.estimate.workloads import NOW

    snapshot = table.snapshot()
    replay = workload_replay(table, snapshot, snapshot.files, records=records, thresholds=thresholds, now=NOW)
    read = [
        (q.weight, query_bytes(q, replay.current, replay.current_bytes, replay.current_groups)[0])
        for q in replay.queries
    ]
    return sum(w * b for w, b in read) / sum(w for w, _ in read)


@pytest.mark.spark
def test_workload_bits_read_fewer_bytes_than_round_robin_in_the_estimate_and_for_real(spark, tmp_path, monkeypatch):
    """A workload filtering x often and narrowly and y rarely and broadly: the pattern gives x the leading
    bits; its virtual files read fewer bytes than round-robin's, the decision's candidates include it, and a
    real `optimize` with it keeps every row and reads fewer bytes for that workload than round-robin's.
    Only the two compared are priced (the others' pricing is other tests' business: this one's time goes to
    the two)."""
    from pyspark.sql import functions as F

    from optimizer.clustering import optimize
    from optimizer.estimate.workload_bits import workload_precision
    from optimizer.table import open_table
    from optimizer.table.fingerprint import fingerprint
    from tests.estimate.workloads import price_only, priced_layouts, replayed

    frame = spark.range(20_000).select(
        "id", (F.col("id") * 7919 % 1000).alias("x"), (F.col("id") * 104_729 % 997).alias("y")
    )
    frame = frame.withColumn("pad", F.sha2(F.col("id").cast("string"), 256)).repartition(4)
    tables = {name: open_table(str(tmp_path / name)) for name in ("round_robin", "workload_bits")}
    snapshots = {name: table.create(spark, frame) for name, table in tables.items()}
    table, snapshot = tables["round_robin"], snapshots["round_robin"]
    sample = table.read_files(spark, snapshot.files, snapshot).cache()
    records = _skewed_workload()
    thresholds, replay = replayed(table, snapshot, records, 32)
    features = FeatureSet(z=(ZFeature("x"), ZFeature("y")))
    bits = workload_precision(sample, features, replay.queries, replay.target_files)
    assert bits[:3] == (0, 0, 0), bits  # x's narrow, frequent filters lead the key
    offered = price_only(monkeypatch, "as analysed", WORKLOAD_BITS)
    priced = priced_layouts(table, snapshot, sample, replay, features, thresholds)
    virtual = {name: e.benefit.bytes_per_query_after for name, e in priced.items()}
    print(f"pattern {bits}; offered {offered}; virtual bytes per query: {virtual}")
    assert WORKLOAD_BITS in offered and "Hilbert curve" in offered  # as the decision offers them
    assert priced[WORKLOAD_BITS].features.precision == bits
    assert virtual[WORKLOAD_BITS] < 0.8 * virtual["as analysed"], virtual
    before = fingerprint(sample)
    layouts = {"round_robin": features, "workload_bits": priced[WORKLOAD_BITS].features}
    real = {}
    for name, table in tables.items():
        result = optimize(spark, table, layouts[name], thresholds.target_file_size)
        after = table.snapshot()
        assert fingerprint(table.read_files(spark, after.files, after)) == before, name  # count + both hashes
        commit = next(c for c in table.history(0) if c.deltaopt.get("runId") == result.run_id)
        assert commit.deltaopt["features"].get("precision") == (list(bits) if name == "workload_bits" else None)
        real[name] = _mean_bytes_read(table, records, thresholds)
    print(f"real bytes per query: {real}")
    assert real["workload_bits"] < 0.8 * real["round_robin"], real


def test_a_querys_conjuncts_are_credited_to_the_curve_dimension_they_filter():
    from optimizer.estimate.replay import Query
    from optimizer.estimate.workload_bits import _dimension_filters
    from optimizer.features import JoinedFeature
    from optimizer.skipping.pruning import prepare

    brand = JoinedFeature("k", "part", "/t/part", "p_partkey", "p_brand")
    features = FeatureSet(z=(ZFeature("a"), ZFeature("b")), joined=(brand,), sop=(SopFeature("c = 1"),))
    queries = [
        Query(prepare("a >= 1 AND a < 5 AND c = 1 AND d = 2"), None, 1.0),
        Query(prepare(f"{brand.helper} = 'x' AND b > 3"), None, 2.0),
    ]
    found = _dimension_filters(features, queries)
    assert set(found) == {(0, 0), (0, 3), (1, 2), (1, 1)}  # d is no dimension's; the SOP id is the last
    assert len(found[(0, 0)]) == 2  # both of a's bounds: one filter, its selectivity measured together
    leading = _dimension_filters(FeatureSet(z=features.z, sop=features.sop, sop_leads=True), queries)
    assert set(leading) == {(0, 0), (1, 1)}  # the SOP id leads: it gets no key bits
