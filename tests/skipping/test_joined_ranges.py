"""Joined ranges: files of a layout with joined features record the min/max of the joined dimension
attributes with the dimension's version; a scan's filter on the dimension skips files with them while
the dimension is at that version, and never after it moved."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optimizer.skipping.explain import explain
from optimizer.skipping.extended import ExtendedStats, JoinedRanges, ValueRange, from_json, location_key, to_json
from optimizer.skipping.filestats import FileStats, file_stats
from optimizer.skipping.joined import JoinFilter, JoinPruning, from_derived, versions_of
from optimizer.table.access import DataFile
from querylog.records import DerivedFilter
from tests.skipping.tiers import DEFAULT_TIER, SLOW_TIER

ATTRIBUTES = 6
PREDICATES = [  # (dimension filter, does an attribute value satisfy it: NULL never does)
    ("a = 2", lambda a: a == 2),
    ("a IN (1, 4)", lambda a: a in (1, 4)),
    ("a >= 4", lambda a: a is not None and a >= 4),
    ("a < 1 OR a = 3", lambda a: a is not None and (a < 1 or a == 3)),
    ("NOT (a = 0)", lambda a: a is not None and a != 0),
    ("a IS NULL", lambda a: a is None),
    ("a IS NOT NULL AND a <> 5", lambda a: a is not None and a != 5),
    ("a BETWEEN 2 AND 3 AND b = 1", lambda a: a in (2, 3)),  # b has no range: only a can skip
]


def _ranges(rows: list[int | None], dimension: list[tuple[int, int | None]], version: int) -> JoinedRanges | None:
    """What the job records for a file: min/max/NULLs of `a` over every dimension row its keys join."""
    values = [a for k in rows if k is not None for key, a in dimension if key == k]
    if not values:
        return None  # nothing joins: no ranges
    present = [v for v in values if v is not None]
    low, high = (min(present), max(present)) if present else (None, None)
    return JoinedRanges("k", "/dim", "key", version, {"a": ValueRange("int", low, high, len(values) - len(present))})


def _file(i: int, rows: list[int | None], ranges: JoinedRanges | None, read_version: int) -> FileStats:
    extended = ExtendedStats("run", joined=(ranges,) if ranges else ())
    return file_stats(DataFile(f"f{i}", 1, 0, len(rows)), {"k": "bigint"}, extended, {"/dim": read_version})


def _first_attribute(key: int | None, dimension: list[tuple[int, int | None]]) -> int:
    found = [a for k, a in dimension if k == key and key is not None]
    return -2 if not found else min(-1 if a is None else a for a in found)


@st.composite
def scenarios(draw):  # type: ignore[no-untyped-def]
    keys = draw(st.integers(1, 30))
    attribute = st.sampled_from([None, *range(ATTRIBUTES)])
    before = [(k, draw(attribute)) for k in range(keys)]
    before += [(draw(st.integers(0, keys - 1)), draw(attribute)) for _ in range(draw(st.integers(0, 3)))]  # repeats
    facts = draw(st.lists(st.one_of(st.none(), st.integers(0, keys + 5)), min_size=4, max_size=60))
    if draw(st.booleans()):  # laid out by the attribute as it was (a joined feature), else as drawn
        facts = sorted(facts, key=lambda k: _first_attribute(k, before))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(len(facts) - 1, 1)), max_size=8))))
    files = [facts[a:b] for a, b in zip([0, *cuts], [*cuts, len(facts)], strict=True) if facts[a:b]]
    changed = draw(st.booleans())
    after = list(before)
    if changed:  # attributes reassigned (mostly keys the facts hold), keys added, rows removed
        known = [k for k in facts if k is not None] or [0]
        for _ in range(draw(st.integers(1, 6))):
            key = draw(st.one_of(st.sampled_from(known), st.integers(0, keys + 5)))
            after = [row for row in after if row[0] != key or draw(st.booleans())]
            after.append((key, draw(attribute)))
        drop = draw(st.sets(st.integers(0, len(after) - 1), max_size=4))
        after = [row for i, row in enumerate(after) if i not in drop]
    predicate = draw(st.sampled_from(PREDICATES))
    return files, before, after, changed, predicate


def _check(files, before, after, changed, predicate):  # type: ignore[no-untyped-def]
    where, satisfies = predicate
    read_version = 1 if changed else 0  # the dimension's version when the query runs
    prepared = JoinPruning.of([JoinFilter("k", "/dim", "key", where, read_version)])
    for i, rows in enumerate(files):
        stats = _file(i, rows, _ranges(rows, before, 0), read_version)
        holds_match = any(k is not None and key == k and satisfies(a) for k in rows for key, a in after)
        if holds_match:
            assert prepared.may_join(stats), f"file {rows} skipped by {where} (dimension changed: {changed})"


@DEFAULT_TIER
@given(scenarios())
def test_no_file_joining_a_matching_dimension_row_is_skipped(scenario):
    _check(*scenario)


@pytest.mark.slow
@SLOW_TIER
@given(scenarios())
def test_the_same_on_5000_examples(scenario):
    _check(*scenario)


def test_ranges_skip_only_at_their_version():
    """The property has teeth: a file whose joined attribute range excludes the filter is skipped while
    the dimension is at the recorded version, and read once it moved or when nothing was recorded."""
    dimension = [(k, k % 3) for k in range(9)]
    rows = [0, 3, 6]  # attribute 0 only
    prepared = JoinPruning.of([JoinFilter("k", "/dim/", "key", "a = 2", 0)])
    assert not prepared.may_join(_file(0, rows, _ranges(rows, dimension, 0), 0))
    assert prepared.may_join(_file(0, rows, _ranges(rows, dimension, 0), 1))
    assert prepared.may_join(_file(0, rows, None, 0))
    other = JoinPruning.of([JoinFilter("k", "/elsewhere", "key", "a = 2", 0)])
    assert other.may_join(_file(0, rows, _ranges(rows, dimension, 0), 0))


def test_joined_ranges_live_in_the_sidecar_only_and_round_trip():
    ranges = JoinedRanges("k", "file:///wh/dim", "key", 7, {"cat": ValueRange("string", "c1", "c3", 0)})
    stats = ExtendedStats("run", joined=(ranges,))
    assert "joined" not in to_json(stats)  # the Delta log's copy
    back = from_json(to_json(stats, {}, sidecar=True))
    assert back.joined == (ranges,) and back.joined[0].join == ("k", "/wh/dim", "key")
    assert location_key("file:///wh/dim/") == "/wh/dim"
    broken = to_json(stats, {}, sidecar=True)
    broken["joined"][0]["version"] = "7"
    with pytest.raises(ValueError):
        from_json(broken)


def test_join_filters_come_from_the_derived_filters_of_known_dimensions():
    derived = [
        DerivedFilter("l_partkey IN (1, 2)", "part.p_partkey WHERE p_brand = 'B1'"),
        DerivedFilter("l_partkey >= 1", "part.p_partkey WHERE p_brand = 'B1'"),  # the same filter's range
        DerivedFilter("l_suppkey = 3", "supplier.s_suppkey WHERE s_nationkey = 4"),  # location unknown
        DerivedFilter("l_partkey = 1", "not a via"),
    ]
    (found,) = from_derived(derived, {"Part": "/wh/part"})
    assert found == JoinFilter("l_partkey", "/wh/part", "p_partkey", "p_brand = 'B1'")
    assert versions_of([JoinFilter("k", "/a", "x", "TRUE", 1), JoinFilter("k", "/a", "x", "TRUE", 2)]) == {"/a": None}


@pytest.fixture(scope="module")
def star(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A fact (30,000 rows, keys scattered, some NULL or unknown to the dimension) and a dimension of
    2,000 keys in categories c0..c7, key 5 listed twice (c5 and c9)."""
    from pyspark.sql import functions as F

    from optimizer.table import open_table

    root = tmp_path_factory.mktemp("joined_ranges")
    key = F.when(F.col("id") % 997 == 0, F.lit(None)).otherwise((F.col("id") * 7919) % 2010)
    fact = open_table(str(root / "fact"))
    fact.create(spark, spark.range(30_000).withColumn("k", key).withColumn("v", F.col("id") % 97).repartition(4))
    rows = spark.range(2000).select(F.col("id").alias("key"), F.concat(F.lit("c"), F.col("id") % 8).alias("cat"))
    dim = open_table(str(root / "dim"))
    dim.create(spark, rows.unionByName(spark.createDataFrame([(5, "c9")], "key long, cat string")).repartition(2))
    return fact, dim


def _holding(spark, fact, dim, where):  # type: ignore[no-untyped-def]
    """Names of the files holding a fact row that joins a dimension row satisfying `where`."""
    from pyspark.sql import functions as F

    facts = spark.read.format("delta").load(fact.uri).withColumn("f", F.input_file_name())
    keys = spark.read.format("delta").load(dim.uri).where(where).select("key")
    found = facts.join(keys, facts["k"] == keys["key"], "left_semi").select("f").distinct().collect()
    return {r["f"].rsplit("/", 1)[-1] for r in found}


@pytest.mark.spark
def test_a_joined_layout_records_ranges_that_skip_until_the_dimension_moves(spark, star, capsys):
    from optimizer.cli.main import main
    from optimizer.clustering import optimize
    from optimizer.features import FeatureSet, JoinedFeature
    from optimizer.skipping.extended import load_index
    from optimizer.skipping.scan import plan_scan, read

    fact, dim = star
    optimize(spark, fact, FeatureSet(joined=(JoinedFeature("k", "dim", dim.uri, "key", "cat"),)), 15_000)
    index = load_index(fact, fact.snapshot())
    assert len(index) >= 8 and all(s.joined and s.joined[0].version == dim.snapshot().version for s in index.values())
    for where in ("cat = 'c3'", "cat IN ('c1', 'c9')", "cat >= 'c6'", "NOT (cat = 'c0')"):
        join = JoinFilter("k", dim.uri, "key", where)
        kept = {f.path.rsplit("/", 1)[-1] for f in plan_scan(fact, None, joins=[join]).files}
        assert _holding(spark, fact, dim, where) <= kept, f"{where}: a file holding a joining row was skipped"
        if where == "cat = 'c3'":
            assert len(kept) <= len(index) // 2, "the joined ranges skipped too little"
            explained = explain(fact, "TRUE", joins=[join])
            assert explained.skipped_by["joined ranges"] == len(index) - len(kept)
            assert explained.standard.files == len(index)
            capsys.readouterr()
            assert main(["explain", "--table", fact.uri, "--where", "TRUE", "--join", "k", dim.uri, "key", where]) == 0
            assert f"joined ranges        {len(index) - len(kept)}" in capsys.readouterr().out
    facts = spark.read.format("delta").load(fact.uri).where("v < 50")
    keys = spark.read.format("delta").load(dim.uri).where("cat = 'c9'").select("key")
    expected = facts.join(keys, facts["k"] == keys["key"], "left_semi").collect()
    got = read(spark, fact, "v < 50", joins=[JoinFilter("k", dim.uri, "key", "cat = 'c9'")]).collect()
    assert sorted(got) == sorted(expected) and len(got) > 0
    # the dimension moves: category c3 gains keys of c0; the recorded ranges no longer apply
    spark.createDataFrame([(0, "c3"), (8, "c3")], "key long, cat string").write.format("delta").mode("append").save(
        dim.uri
    )
    join = JoinFilter("k", dim.uri, "key", "cat = 'c3'")
    assert len(plan_scan(fact, None, joins=[join]).files) == len(index)
    assert explain(fact, "TRUE", joins=[join]).skipped_by["joined ranges"] == 0
