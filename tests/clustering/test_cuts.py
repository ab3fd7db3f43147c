"""The greedy cut tree (qd-tree style layout, `clustering.cut_growth`, `clustering.cuts`): the builder over
the sample, the tree on the feature set, the leaf id in numpy and Spark, files that never mix leaves, and
the estimate's candidate."""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.clustering.by_delta import delta_expressible
from optimizer.clustering.cut_growth import Comparison, Scan, build_tree
from optimizer.clustering.cuts import leaf_ids
from optimizer.clustering.file_cuts import aligned_cuts
from optimizer.clustering.groups import layout_key
from optimizer.cut_tree import Cut, CutTree, parse_tree
from optimizer.errors import FeatureError
from optimizer.estimate.candidates import candidate_layouts
from optimizer.features import FeatureSet, SopFeature, ZFeature

CUT_TREE = "cut tree"
XY = FeatureSet(z=(ZFeature("x"), ZFeature("y")))


def _range(column: str, low: int, high: int, weight: float = 1.0) -> Scan:
    """``column >= low AND column < high``."""
    return Scan(weight, (Comparison(column, ">=", "integer", (low,)), Comparison(column, "<", "integer", (high,))))


def _literals(tree: CutTree) -> set[tuple[str, object]]:
    return {(c.column, c.value) for c in tree.cuts()}


def test_the_tree_cuts_at_the_workloads_literals_into_leaves_of_the_size_asked_deterministically():
    rng = np.random.default_rng(3)
    columns = {"x": rng.integers(0, 1000, 4000).tolist(), "y": rng.integers(0, 1000, 4000).tolist()}
    scans = [_range("x", a, a + 70) for a in (130, 380, 610, 870)] + [_range("y", 455, 545, 0.5)]
    tree = build_tree(columns, scans, max_leaves=8, min_leaf_rows=200)
    points = {(s.comparisons[i].column, s.comparisons[i].values[0]) for s in scans for i in (0, 1)}
    assert 2 <= tree.leaves <= 8 and _literals(tree) <= points, tree
    ids = leaf_ids(tree, columns, 4000)
    assert sorted(set(ids.tolist())) == list(range(tree.leaves))
    assert np.bincount(ids).min() >= 200
    shuffled = random.Random(1).sample(scans, len(scans))
    assert build_tree(columns, shuffled, max_leaves=8, min_leaf_rows=200) == tree  # scan order does not matter
    assert parse_tree(json.loads(json.dumps(tree.as_json()))) == tree
    # every leaf a narrow x filter reads lies within its range: the reads are the filter's own rows
    for low, high in ((130, 200), (380, 450)):
        read = {int(i) for i, x in zip(ids, columns["x"], strict=True) if low <= x < high}
        rows = sum(1 for i in ids if int(i) in read)
        assert rows < 0.45 * 4000, (low, high, rows)


def test_ties_go_to_the_column_name_then_the_literal_and_it_stops_when_no_cut_skips():
    values = list(range(100))
    columns = {"b": values, "a": values}
    scans = [_range("b", 0, 50), _range("a", 0, 50)]  # the same split of the same rows on both columns
    tree = build_tree(columns, scans, max_leaves=2, min_leaf_rows=1)
    assert tree.cut == Cut("a", "<", "integer", 50), tree
    assert build_tree(columns, [_range("a", -10, 500)], max_leaves=8, min_leaf_rows=1).is_leaf  # reads all
    assert build_tree(columns, [Scan(1.0, ())], max_leaves=8, min_leaf_rows=1).is_leaf
    assert build_tree(columns, scans, max_leaves=8, min_leaf_rows=60).is_leaf  # a child would be too small
    alien = [Scan(1.0, (Comparison("a", "<", "string", ("m",)),))]  # a string against numbers: no candidate
    assert build_tree(columns, alien, max_leaves=8, min_leaf_rows=1).is_leaf


def test_nulls_and_nan_go_above_and_a_leaf_of_nulls_is_skipped():
    values: list[object] = [*range(100), *([None] * 60), float("nan")]
    scans = [Scan(1.0, (Comparison("x", "<", "double", (100.0,)),))]
    tree = build_tree({"x": values}, scans, max_leaves=4, min_leaf_rows=1)
    assert tree.cut == Cut("x", "<", "double", 100.0), tree  # reads the numbers, skips NULLs and NaN
    ids = leaf_ids(tree, {"x": values}, len(values))
    assert ids[:100].tolist() == [0] * 100 and ids[100:].tolist() == [1] * 61


def test_the_feature_set_records_the_tree_only_when_set_and_refuses_a_malformed_one():
    tree = CutTree(
        Cut("x", "<", "integer", 5), CutTree(), CutTree(Cut("y", "<=", "decimal", Decimal("2.5")), CutTree(), CutTree())
    )
    cut = FeatureSet(z=XY.z, cuts=tree, curve="hilbert")  # within a leaf, any curve orders
    assert FeatureSet.from_dict(json.loads(json.dumps(cut.as_dict()))) == cut
    assert "cuts" not in XY.as_dict() and FeatureSet.from_dict(XY.as_dict()).cuts is None
    plain = FeatureSet(z=XY.z, curve="hilbert")  # drift and merging tell the tree's files from the curve's alone
    assert layout_key(cut) != layout_key(plain)
    assert layout_key(cut) == layout_key(cut.as_dict()) and " cuts=3 leaves #" in layout_key(cut)
    typed = {
        "date": dt.date(2024, 1, 31),
        "timestamp": dt.datetime(2024, 1, 31, 12, tzinfo=dt.UTC),
        "string": "m",
        "double": 0.1,
    }
    for kind, value in typed.items():
        one = CutTree(Cut("x", "<", kind, value), CutTree(), CutTree())
        assert parse_tree(json.loads(json.dumps(one.as_json()))) == one, kind
    record = cut.as_dict()
    node = record["cuts"]
    refused = {
        "a node must be an object": {**record, "cuts": "x < 5"},
        "malformed cut tree node": {**record, "cuts": {**node, "extra": 1}},
        "one of \\('<', '<='\\)": {**record, "cuts": {**node, "op": ">"}},
        "malformed integer literal": {**record, "cuts": {**node, "value": "5"}},
        "single leaf": {**record, "cuts": {}},
        "plain columns only": {**record, "cuts": {**node, "column": "upper(y)"}},
        "cannot combine": {**record, "sop": ["c = 1"], "sop_leads": True},
    }
    for message, bad in refused.items():
        with pytest.raises(FeatureError, match=message):
            FeatureSet.from_dict(bad)
    assert FeatureSet(z=XY.z, sop=(SopFeature("c = 1"),), cuts=tree, precision=(0, 2)).cuts == tree


def test_files_never_mix_leaves_and_each_leaf_gets_its_share_of_files():
    rng = random.Random(7)
    leaves = [rng.choice([0, 1, 1, 2, 2, 2, 2]) for _ in range(700)]
    keys = [rng.randrange(1000) for _ in leaves]
    cuts = aligned_cuts([leaves, keys], 7, 1)

    def file_of(row: tuple[int, int]) -> int:
        def ranked(t: tuple) -> tuple:
            return tuple((0, 0) if v is None else (1, v) for v in t)

        return sum(ranked(row) >= ranked(c) for c in cuts)

    files: dict[int, set[int]] = {}
    for row in zip(leaves, keys, strict=True):
        files.setdefault(file_of(row), set()).add(row[0])
    assert all(len(found) == 1 for found in files.values()), files
    per_leaf = {leaf: sum(1 for f in files.values() if leaf in f) for leaf in (0, 1, 2)}
    assert per_leaf[2] >= 3 and per_leaf[0] == 1, per_leaf
    assert aligned_cuts([leaves, keys], 7, 0) == aligned_cuts([leaves, keys], 7, 0)


def test_the_estimate_offers_the_tree_only_where_deltaopts_job_runs_and_delta_names_it_not_applied():
    tree = CutTree(Cut("x", "<", "integer", 5), CutTree(), CutTree())
    names = dict(candidate_layouts(XY, cuts=(tree, None)))
    assert names[CUT_TREE] == FeatureSet(z=XY.z, cuts=tree)
    assert CUT_TREE not in dict(candidate_layouts(XY))
    assert CUT_TREE not in dict(candidate_layouts(XY, hilbert=False, cuts=(tree, tree)))
    analysed = FeatureSet(z=XY.z, sop=(SopFeature("c = 1"),), cuts=tree)  # variants drop its tree
    layouts = dict(candidate_layouts(analysed, cuts=(tree, None)))
    assert layouts["as analysed"] == analysed and CUT_TREE not in layouts  # no second "as analysed"
    assert all(f.cuts is None for name, f in layouts.items() if name != "as analysed")
    leading = dict(candidate_layouts(FeatureSet(z=XY.z, sop=analysed.sop, sop_leads=True), cuts=(tree, None)))
    assert leading[CUT_TREE].cuts == tree and not leading[CUT_TREE].sop_leads
    fine = CutTree(tree.cut, CutTree(Cut("y", "<", "integer", 3), CutTree(), CutTree(), row_group=True), CutTree())
    both = dict(candidate_layouts(XY, cuts=(tree, fine)))  # row-group cuts under the file cut: one more candidate
    assert both[CUT_TREE] == FeatureSet(z=XY.z, cuts=tree)
    assert both[CUT_TREE + ", row groups"] == FeatureSet(z=XY.z, cuts=fine)
    grained = FeatureSet(z=XY.z, cuts=fine)
    assert FeatureSet.from_dict(json.loads(json.dumps(grained.as_dict()))) == grained
    assert fine.has_row_groups and not tree.has_row_groups and fine.file_level() == tree and fine.leaves == 3
    assert "row_group" not in json.dumps(tree.as_json())  # file cuts are recorded as before
    assert layout_key(grained) != layout_key(FeatureSet(z=XY.z, cuts=fine.file_level()))
    node = fine.as_json()
    refused = {
        "a file cut under a row-group cut": {**node, "row_group": True, "below": {**node["below"], "row_group": None}},
        "malformed cut tree node": {**node, "row_group": False},
    }
    refused["a file cut under a row-group cut"]["below"].pop("row_group")
    for message, bad in refused.items():
        with pytest.raises(FeatureError, match=message):
            FeatureSet.from_dict({**grained.as_dict(), "cuts": bad})
    from optimizer.estimate.workload_cuts import workload_cuts

    one = FeatureSet(z=(ZFeature("x"),))  # sorted by x: files are ranges of it already
    assert workload_cuts(None, one, [], 8) is None  # type: ignore[arg-type]  # (never reads the sample)
    applied, left = delta_expressible(FeatureSet(z=XY.z, cuts=tree))
    assert applied.cuts is None and left == [CUT_TREE]
    applied, left = delta_expressible(FeatureSet(z=XY.z, cuts=tree), clustered=True)
    assert applied.cuts is None and left == [CUT_TREE]


def test_the_workloads_literals_are_typed_as_the_columns_values_or_left_out():
    from optimizer.estimate.replay import Query
    from optimizer.estimate.workload_cuts import comparisons
    from optimizer.skipping.pruning import prepare

    kinds = {"n": "number", "d": "double", "s": "string", "day": "date", "ts": "timestamp"}
    where = (
        "n >= 3 AND n < 2.5 AND d > 1 AND s IN ('a', 'b') AND day <= DATE '2024-02-01'"
        " AND ts < TIMESTAMP '2024-01-01 00:00:00+00:00' AND ts > TIMESTAMP '2024-01-01 00:00:00'"
        " AND n < 'x' AND other = 1 AND s LIKE 'a%'"
    )
    found = {(c.column, c.op): (c.kind, c.values) for c in comparisons(Query(prepare(where), None, 1.0), kinds)}
    assert found == {
        ("n", ">="): ("integer", (3,)),
        ("n", "<"): ("decimal", (Decimal("2.5"),)),
        ("d", ">"): ("double", (1.0,)),
        ("s", "in"): ("string", ("a", "b")),
        ("day", "<="): ("date", (dt.date(2024, 2, 1),)),
        ("ts", "<"): ("timestamp", (dt.datetime(2024, 1, 1, tzinfo=dt.UTC),)),
    }, found  # an offset-less timestamp (its instant is the reader's zone's), a string against a number: left out


@st.composite
def _tree(draw: st.DrawFn, columns: dict[str, list], depth: int = 0) -> CutTree:
    """A random tree cutting `columns` at values they hold or near them."""
    if depth >= 4 or draw(st.integers(0, 2)) == 0:
        return CutTree()
    name = draw(st.sampled_from(sorted(columns)))
    present = [v for v in columns[name] if v is not None and v == v]
    value = draw(st.sampled_from(present))
    kind = {int: "integer", float: "double", str: "string", dt.date: "date", dt.datetime: "timestamp"}[type(value)]
    op = draw(st.sampled_from(["<", "<="]))
    return CutTree(Cut(name, op, kind, value), draw(_tree(columns, depth + 1)), draw(_tree(columns, depth + 1)))


_ROWS = 80


def _columns(seed: int) -> dict[str, list]:
    rng = random.Random(seed)
    maybe = lambda v: None if rng.random() < 0.1 else v  # noqa: E731
    return {
        "i": [maybe(rng.randrange(-20, 20)) for _ in range(_ROWS)],
        "f": [maybe(rng.choice([float("nan"), -0.0, 0.0, rng.uniform(-5, 5), 1e300])) for _ in range(_ROWS)],
        "s": [maybe(rng.choice(["", "a", "ab", "b", "é", "Z", "zz"])) for _ in range(_ROWS)],
        "d": [maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(60))) for _ in range(_ROWS)],
        "t": [
            maybe(dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=rng.randrange(10**6)))
            for _ in range(_ROWS)
        ],
    }


@pytest.mark.spark
@settings(max_examples=3, deadline=None)
@given(st.integers(0, 2**16), st.data())
def test_spark_gives_every_row_the_leaf_numpy_gives_it(spark, seed, data):
    """The estimate's sample and the job must put each row in the same leaf: for random trees over ints,
    doubles (NaN, -0.0), strings, dates, timestamps, NULLs, Spark's CASE WHEN and numpy's leaf ids agree."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, DoubleType, LongType, StringType, StructField, StructType, TimestampType

    from optimizer.clustering.cuts import leaf_column

    columns = _columns(seed)
    trees = [data.draw(_tree(columns)) for _ in range(10)]
    schema = StructType(
        [
            StructField("row", LongType()),
            StructField("i", LongType()),
            StructField("f", DoubleType()),
            StructField("s", StringType()),
            StructField("d", DateType()),
            StructField("t", TimestampType()),
        ]
    )
    rows = [(n, *(columns[c][n] for c in ("i", "f", "s", "d", "t"))) for n in range(_ROWS)]
    frame = spark.createDataFrame(rows, schema)
    leaves = [leaf_column(t, lambda c: F.col(c)).alias(f"t{k}") for k, t in enumerate(trees)]
    found = sorted(frame.select("row", *leaves).collect())
    for k, tree in enumerate(trees):
        assert [r[f"t{k}"] for r in found] == leaf_ids(tree, columns, _ROWS).tolist(), tree


def _misaligned_workload() -> list:
    """Narrow x ranges whose ends sit between Z-order's quantile cuts of x (quarters, eighths), and two
    broad y ranges."""
    from querylog.records import ScanRecord
    from tests.estimate.workloads import NOW

    narrow = [(f"x >= {a}", f"x < {a + 120}") for a in (60, 310, 560, 810)] * 4
    broad = [(f"y >= {b}", f"y < {b + 500}") for b in (0, 400)]
    return [ScanRecord(f"q{i}", NOW, "t", f, ("pad",), "test") for i, f in enumerate(narrow + broad)]


def _priced(spark, path, monkeypatch):
    """A table of 4000 rows (x in 0..999, y in 0..996) estimated for `_misaligned_workload` into 8 files:
    the decision's candidates as offered, and the analysed Z-order and the cut tree priced on its sample
    (the others are left out of the pricing: the test's time goes to the two compared)."""
    from pyspark.sql import functions as F

    from optimizer.table import open_table
    from tests.estimate.workloads import price_only, priced_layouts, replayed

    frame = spark.range(4000).select(
        "id", (F.col("id") * 7919 % 1000).alias("x"), (F.col("id") * 104_729 % 997).alias("y")
    )
    table = open_table(str(path))
    snapshot = table.create(spark, frame.withColumn("pad", F.sha2(F.col("id").cast("string"), 256)).repartition(2))
    sample = table.read_files(spark, snapshot.files, snapshot).cache()
    records = _misaligned_workload()
    thresholds, replay = replayed(table, snapshot, records, 8)
    price_only(monkeypatch, "as analysed", CUT_TREE)
    return table, sample, records, thresholds, priced_layouts(table, snapshot, sample, replay, XY, thresholds)


def _optimized(spark, table, features, thresholds, before) -> dict:
    """`optimize` of every file on `features`: the rows unchanged (count + both hashes), the run's recorded
    features."""
    from optimizer.clustering import optimize
    from optimizer.table.fingerprint import fingerprint

    result = optimize(spark, table, features, thresholds.target_file_size, files=table.snapshot().files)
    after = table.snapshot()
    assert fingerprint(table.read_files(spark, after.files, after)) == before
    return next(c for c in table.history(0) if c.deltaopt.get("runId") == result.run_id).deltaopt["features"]


@pytest.mark.spark
def test_a_cut_tree_reads_fewer_bytes_than_z_order_in_the_estimate_and_for_real(spark, tmp_path, monkeypatch):
    """Where the workload's literals sit between Z-order's quantile cuts, the tree's leaves are the
    filters' own ranges: its virtual files read fewer bytes than the analysed Z-order's; laid out for
    real on the Z-order, then re-laid out on the tree (another layout key), the tree's files read fewer
    bytes for the workload, span no two leaves, and hold the same rows (count + both hashes)."""
    from optimizer.table.fingerprint import fingerprint
    from tests.clustering.test_precision import _mean_bytes_read

    table, sample, records, thresholds, priced = _priced(spark, tmp_path / "t", monkeypatch)
    virtual = {name: e.benefit.bytes_per_query_after for name, e in priced.items()}
    tree = priced[CUT_TREE].features.cuts
    print(f"tree {tree and tree.as_json()}; virtual bytes per query: {virtual}")
    assert tree is not None and tree.leaves >= 4 and {c.column for c in tree.cuts()} == {"x"}
    assert virtual[CUT_TREE] < 0.8 * virtual["as analysed"], virtual
    before = fingerprint(sample)
    real = {}
    for name in ("as analysed", CUT_TREE):
        recorded = _optimized(spark, table, priced[name].features, thresholds, before)
        assert recorded.get("cuts") == (tree.as_json() if name == CUT_TREE else None)
        real[name] = _mean_bytes_read(table, records, thresholds)
    print(f"real bytes per query: {real}")
    assert real[CUT_TREE] < 0.8 * real["as analysed"], real
    edges = sorted(c.value for c in tree.cuts())
    for f in table.snapshot().files:  # each file's x range within one leaf: between two consecutive cuts
        low, high = f.min_values["x"], f.max_values["x"]
        assert not any(low < edge <= high for edge in edges), (low, high, edges)


@given(st.lists(st.integers(1, 500), min_size=1, max_size=20), st.integers(1, 64))
@settings(max_examples=200, deadline=None)
def test_groups_share_exactly_the_files_asked_where_there_are_enough(sizes, files):
    """Every group gets a file; the shares add up to the files asked whenever there are no more groups than
    files (rounding each share alone gave 13 files of 12), and no share is above its rows' exact share rounded
    up, nor below it rounded down by more than the files the one-file minimum gave the groups under one."""
    import math

    from optimizer.clustering.file_cuts import shares

    given = shares(sizes, files)
    assert all(g >= 1 for g in given)
    assert sum(given) == max(files, len(sizes)) if len(sizes) <= files else all(g == 1 for g in given)
    exact = [files * s / sum(sizes) for s in sizes]
    crowded = math.ceil(sum(max(0.0, 1 - e) for e in exact) - 1e-9)  # files the minimum took from the rest
    for g, e in zip(given, exact, strict=True):
        assert g <= max(1, math.ceil(e - 1e-9)) and (len(sizes) > files or g >= int(e) - crowded), (g, e)


def _selects(value: object, op: str, literal: object) -> bool:
    """One row's comparison as Spark decides it: NULL never holds, NaN is above every number."""
    if value is None:
        return False
    nan = isinstance(value, float) and value != value
    if nan:
        return op in (">", ">=")
    return {"<": value < literal, "<=": value <= literal, ">": value > literal, ">=": value >= literal}.get(
        op, value == literal
    )


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_a_scans_share_is_the_rows_its_own_comparisons_select(rng):
    """`relative` weighs a scan by the share of sampled rows it selects (`_Workload.shares`, a table over
    each column's ranks): the same share as testing every row, with NULL, NaN, strings, dates and IN
    lists; a scan left with no comparison keeps its weight; the order scans come in changes no tree."""
    from optimizer.clustering.cut_growth import _Ranked, _workload, relative

    rows = rng.choice([1, 2, 40, 200])
    columns = {
        "i": [None if rng.random() < 0.1 else rng.randrange(20) for _ in range(rows)],
        "f": [
            None if rng.random() < 0.1 else float("nan") if rng.random() < 0.1 else rng.randrange(20) / 2
            for _ in range(rows)
        ],
        "s": [None if rng.random() < 0.1 else rng.choice("abcdef") for _ in range(rows)],
        "d": [None if rng.random() < 0.1 else dt.date(2024, 1, 1 + rng.randrange(20)) for _ in range(rows)],
    }
    literal = {
        "i": lambda: rng.randrange(-2, 22),
        "f": lambda: rng.randrange(-2, 22) / 2,
        "s": lambda: rng.choice("abcdefg"),
        "d": lambda: dt.date(2024, 1, 1 + rng.randrange(25)),
    }
    scans = []
    for _ in range(rng.randrange(1, 12)):
        comparisons = []
        for _ in range(rng.randrange(1, 4)):
            column, op = rng.choice("ifsd"), rng.choice(["<", "<=", ">", ">=", "=", "in"])
            values = tuple(literal[column]() for _ in range(rng.randrange(1, 6) if op == "in" else 1))
            comparisons.append(Comparison(column, op, "x", values))
        scans.append(Scan(rng.choice([1.0, 0.37, 2.5]), tuple(comparisons)))
    scans.append(Scan(1.0, (Comparison("i", "<", "string", ("alien",)),)))  # no comparison left: weight kept
    ranked = {name: _Ranked.of(values) for name, values in columns.items()}
    workload = _workload(scans, ranked)
    expected = [
        sum(
            all(
                any(_selects(columns[c.column][row], "=" if c.op == "in" else c.op, v) for v in c.values)
                for c in s.comparisons
            )
            for row in range(rows)
        )
        / rows
        for s in (scans[i] for i in workload.sources.tolist())
    ]
    assert np.allclose(workload.shares(ranked), expected)
    weighted = relative(scans, ranked)
    left_out = set(range(len(scans))) - set(workload.sources.tolist())  # the alien one, unless `i` is all NULL
    assert len(weighted) == len(scans) and all(weighted[i] == scans[i] for i in left_out)
    tree = build_tree(columns, scans, max_leaves=6, min_leaf_rows=1)
    assert build_tree(columns, rng.sample(scans, len(scans)), max_leaves=6, min_leaf_rows=1) == tree
