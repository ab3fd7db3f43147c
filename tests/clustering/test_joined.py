"""Joined features: a dimension attribute, filtered through a join with changing literals, becomes a Z
dimension of the fact table (looked up by a join when rows are laid out); files keep key sets of the
join key, so a later dimension filter's keys skip files soundly, even after the dimension changed."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from optimizer.analysis.joined import choose_joined, dimension_filters, helper_filters, joined_candidates
from optimizer.clustering import optimize
from optimizer.clustering.groups import layout_key
from optimizer.estimate.candidates import candidate_layouts
from optimizer.features import FeatureSet, JoinedFeature, ZFeature
from optimizer.joins import key_filters
from optimizer.skipping.extended import load_index
from optimizer.skipping.scan import plan_scan
from optimizer.table import open_table
from querylog.records import DerivedFilter, ScanRecord

NOW = datetime(2026, 11, 25, tzinfo=UTC)
KEYS = 2000  # fact keys 0..1999 (and a few the dimension lacks); category of key k: k % 8


def brand(value: str, fact: str = "l_partkey >= 1") -> DerivedFilter:
    return DerivedFilter(fact, f"part.p_partkey WHERE p_brand = '{value}' AND p_size > 3")


def record(i: int, *derived: DerivedFilter) -> ScanRecord:
    return ScanRecord(f"q{i}", NOW, "lineitem", tuple(d.filter for d in derived), ("l_price",), "test", derived=derived)


def test_dimension_filters_are_read_from_the_derived_filters_via():
    (first, second) = dimension_filters(brand("B1"))
    assert (first.fact_column, first.dimension, first.key, first.attribute) == (
        "l_partkey",
        "part",
        "p_partkey",
        "p_brand",
    )
    assert second.attribute == "p_size" and second.conjunct == "p_size > 3"
    assert helper_filters(record(0, brand("B1"))) == (
        "__j_l_partkey_part_p_brand = 'B1'",
        "__j_l_partkey_part_p_size > 3",
    )
    assert dimension_filters(DerivedFilter("l_partkey >= 1", "not a via")) == []
    assert dimension_filters(DerivedFilter("l_partkey >= 1", "part.p_partkey WHERE p_a = p_b")) == []


def test_changing_literals_make_a_candidate_and_the_choice_says_why_not():
    records = [record(i, brand(f"B{i % 3}")) for i in range(30)]
    records += [
        record(30 + i, DerivedFilter("l_suppkey IN (1, 2)", "supplier.s_suppkey WHERE s_nation = 7")) for i in range(9)
    ]
    records += [record(40, DerivedFilter("l_suppkey >= 1", "supplier.s_suppkey WHERE s_comment LIKE '%x'"))]
    candidates = joined_candidates(records, NOW, 86400)
    names = [(c.dimension, c.attribute, c.scans, len(c.points)) for c in candidates]
    assert names == [("part", "p_brand", 30, 3), ("part", "p_size", 30, 1), ("supplier", "s_nation", 9, 1)]
    chosen, verdicts = choose_joined(candidates, 40, {"part": "/data/part"}, min_share=0.05, limit=2)
    assert chosen == [JoinedFeature("l_partkey", "part", "/data/part", "p_partkey", "p_brand")]
    assert [(ok, why.split(":")[0]) for _, ok, why in verdicts][1:] == [(False, "one literal only")] * 2
    assert verdicts[0][2] == (  # the record's explanation of a chosen feature stands on its own
        "dimension attribute with changing literals (3 comparison points, 75% of scans): "
        "a Z dimension via the join on l_partkey"
    )
    _, no_location = choose_joined(candidates[:1], 40, {}, min_share=0.05, limit=2)
    assert "no location for part" in no_location[0][2]


def test_joined_features_round_trip_and_are_absent_when_none():
    joined = JoinedFeature("l_partkey", "part", "s3://b/part", "p_partkey", "p_brand")
    features = FeatureSet(z=(ZFeature("d"),), joined=(joined,))
    assert "joined" not in FeatureSet(z=(ZFeature("d"),)).as_dict()
    assert FeatureSet.from_dict(features.as_dict()) == features
    assert not FeatureSet(joined=(joined,)).is_empty
    names = [name for name, _ in candidate_layouts(FeatureSet(z=(ZFeature("d"),)), (joined,))]
    assert names == ["as analysed", "with part.p_brand", "part.p_brand alone"]


def test_with_two_joined_features_the_attributes_alone_and_z_with_them_are_compared_too():
    """On n files d dimensions are cut about n^(1/d) times each: the attributes alone (two dimensions)
    or the Z features with them (SOP only as statistics) can gather each attribute more finely."""
    from optimizer.features import SopFeature

    brand = JoinedFeature("l_partkey", "part", "/w/part", "p_partkey", "p_brand")
    nation = JoinedFeature("l_suppkey", "supplier", "/w/supplier", "s_suppkey", "s_nationkey")
    features = FeatureSet(z=(ZFeature("d"),), sop=(SopFeature("x = 1"),))
    layouts = dict(candidate_layouts(features, (brand, nation)))
    alone = layouts["part.p_brand, supplier.s_nationkey alone"]
    assert alone.z == () and alone.sop == () and alone.joined == (brand, nation)
    assert [f.expression for f in alone.z_add] == ["d"] and [f.predicate for f in alone.sop_add] == ["x = 1"]
    with_z = layouts["Z-order with part.p_brand, supplier.s_nationkey"]
    assert with_z.z == features.z and with_z.sop == () and with_z.joined == (brand, nation)


@pytest.fixture(scope="module")
def star(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A fact table (40,000 rows; keys scattered, some NULL, some the dimension lacks) and its dimension
    (categories ``c0``..``c7``; key 5 listed twice)."""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("star")
    key = F.when(F.col("id") % 997 == 0, F.lit(None)).otherwise((F.col("id") * 7919) % (KEYS + 10))
    fact = spark.range(40_000).withColumn("k", key).withColumn("v", F.col("id") % 97)
    table = open_table(str(root / "fact"))
    table.create(spark, fact.repartition(4))
    dimension = spark.range(KEYS).select(F.col("id").alias("key"), F.concat(F.lit("c"), F.col("id") % 8).alias("cat"))
    dimension = dimension.unionByName(spark.createDataFrame([(5, "c9")], "key long, cat string"))
    dim = open_table(str(root / "dim"))
    dim.create(spark, dimension.repartition(2))
    return table, dim


def _rows(spark, uri):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    frame = spark.read.format("delta").load(uri)
    return frame.groupBy().agg(F.count("*"), F.sum(F.xxhash64("id", "k", "v")), F.count("k")).collect()


def _holding(spark, uri, keys):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    frame = spark.read.format("delta").load(uri).withColumn("f", F.input_file_name())
    found = frame.where(F.col("k").isin(sorted(keys))).select("f").distinct().collect()
    return {r["f"].rsplit("/", 1)[-1] for r in found}


@pytest.mark.spark
def test_rows_of_a_category_gather_and_any_later_filter_skips_soundly(spark, star):
    from pyspark.sql import functions as F

    table, dim = star
    before = _rows(spark, table.uri)
    feature = JoinedFeature("k", "dim", dim.uri, "key", "cat")
    result = optimize(spark, table, FeatureSet(joined=(feature,)), 20_000)
    assert _rows(spark, table.uri) == before, "the lookup join lost, duplicated or changed a row"
    assert result.dimensions == (feature.helper,)
    index = load_index(table, table.snapshot())
    assert len(index) >= 8 and all("k" in stats.key_sets for stats in index.values())

    def category(c: int) -> set[int]:
        return set(range(c, KEYS, 8))

    for c in range(8):
        keys = category(c)
        assert len(_holding(spark, table.uri, keys)) <= len(index) // 2, f"category c{c} spread over the files"
    # the dimension changes after the layout: category 3 gains keys of category 0 and 6
    moved = {0, 8, 6, 14, 1998}
    changed = spark.createDataFrame([(k, "c3") for k in moved], "key long, cat string")
    changed.write.format("delta").mode("append").save(dim.uri)
    later = sorted(category(3) | moved)
    where = " AND ".join(key_filters("k", later, later[0], later[-1], max_in=32, max_keys=1000))
    kept = {f.path.rsplit("/", 1)[-1] for f in plan_scan(table, where).files}
    assert _holding(spark, table.uri, later) <= kept, "a file holding a joining key was skipped"
    assert len(kept) < len(index), "the key sets skipped nothing"
    nulls = spark.read.format("delta").load(table.uri).where(F.col("k").isNull()).count()
    assert nulls == 41  # ids divisible by 997 below 40,000


def test_the_replay_states_dimension_filters_on_the_helper_and_only_its_statistics_skip():
    """A virtual file of a joined layout keeps its attribute's range: the replayed query skips it when
    the brand is outside; a file without that range (any other layout) is read."""
    from optimizer.estimate.replay import workload_queries
    from optimizer.skipping.filestats import FileStats, column_bounds
    from optimizer.skipping.pruning import might_match

    (query,) = workload_queries([record(0, brand("B7"))], NOW, 86400)
    helper = "__j_l_partkey_part_p_brand"
    assert "__j_l_partkey_part_p_size" in query.columns  # read columns add nothing: helpers have no bytes
    outside = FileStats("v0", 10, expressions={helper: column_bounds("string", "B1", "B3", 0, True)})
    inside = FileStats("v1", 10, expressions={helper: column_bounds("string", "B5", "B9", 0, True)})
    assert not might_match(query.predicate, outside)
    assert might_match(query.predicate, inside) and might_match(query.predicate, FileStats("v2", 10))
    assert layout_key(FeatureSet(joined=(JoinedFeature("a", "d", "/d", "k", "x"),))).endswith('joined=["__j_a_d_x"]')


@pytest.mark.spark
def test_files_already_laid_out_by_a_joined_feature_skip_in_the_replay_before(spark, tmp_path):
    """The estimate's "before" of files a joined layout wrote judges the replayed dimension filter with
    their joined ranges, while the dimension is at the version they were recorded at: a merge or drift
    re-clustering them is not credited with skipping they already have."""
    from pyspark.sql import functions as F

    from optimizer.config import Thresholds
    from optimizer.estimate.layouts import workload_replay
    from optimizer.skipping.pruning import might_match

    fact = spark.range(20_000).select((F.col("id") * 7919 % KEYS).alias("k"), (F.col("id") % 97).alias("v"))
    table = open_table(str(tmp_path / "fact"))
    table.create(spark, fact.repartition(2))
    dimension = spark.range(KEYS).select(F.col("id").alias("key"), F.concat(F.lit("c"), F.col("id") % 8).alias("cat"))
    dim = open_table(str(tmp_path / "dim"))
    dim.create(spark, dimension.repartition(1))
    optimize(spark, table, FeatureSet(joined=(JoinedFeature("k", "dim", dim.uri, "key", "cat"),)), 5_000)
    records = [
        ScanRecord(
            f"q{i}",
            NOW,
            "fact",
            ("k >= 0",),
            ("v",),
            "test",
            derived=(DerivedFilter("k >= 0", f"dim.key WHERE cat = 'c{i}'"),),
        )
        for i in range(8)
    ]
    thresholds = Thresholds(min_new_bytes=1)

    def kept(locations: dict[str, str]) -> dict[str, set[str]]:
        """{category: files the replay's "before" keeps for its query}"""
        snapshot = table.snapshot()
        replay = workload_replay(
            table, snapshot, snapshot.files, records=records, thresholds=thresholds, now=NOW, locations=locations
        )
        found = {}
        for query in replay.queries:
            (category,) = re.findall(r"'(c\d)'", query.predicate.sql)
            found[category] = {s.path.rsplit("/", 1)[-1] for s in replay.current if might_match(query.predicate, s)}
        return found

    files = {f.path.rsplit("/", 1)[-1] for f in table.snapshot().files}
    before = kept({"dim": dim.uri})
    assert len(before) == 8 and len(files) >= 6
    for category, names in before.items():
        assert _holding(spark, table.uri, set(range(int(category[1]), KEYS, 8))) <= names, f"{category}: unsound"
        assert len(names) <= len(files) // 2, f"{category}: the joined ranges skipped nothing before"
    assert all(names == files for names in kept({}).values()), "a dimension the catalog does not know skipped"
    spark.createDataFrame([(3, "c5")], "key long, cat string").write.format("delta").mode("append").save(dim.uri)
    moved = kept({"dim": dim.uri})
    assert all(names == files for names in moved.values()), "ranges recorded at an older dimension version skipped"
