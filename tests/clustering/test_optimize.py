"""The OPTIMIZE job on real Delta tables: rows preserved in every layout, only the given files
rewritten, and `read(where=P)` equal to a filtered full scan for random predicates."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import os
import random
import shutil
from collections import Counter
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, example, given, settings

from optimizer import errors
from optimizer.clustering import optimize
from optimizer.features import FeatureSet, SopFeature, ZFeature
from optimizer.skipping.extended import load_index, unclustered_files
from optimizer.skipping.scan import plan_scan, read
from optimizer.table import open_table
from optimizer.table.fingerprint import Fingerprint, fingerprint, hashable_columns
from tests.skipping.oracle import INEXACT, SINGLES, predicate_strategy

pytestmark = pytest.mark.spark

SCHEMA = "i bigint, f double, s string, d date, t timestamp, b boolean, p decimal(10,2), g float"
UTC = dt.UTC
LAYOUTS = {
    "plain": FeatureSet(),
    "sop": FeatureSet(
        sop=(SopFeature("s LIKE '%x%'"), SopFeature("i IN (1, 2, 3)"), SopFeature("b = TRUE")),
        sop_add=(SopFeature("STARTSWITH(s, 'ab')"),),
        sop_weights={"s LIKE '%x%'": 3.0, "i IN (1, 2, 3)": 2.0, "b = TRUE": 1.0},
    ),
    "z": FeatureSet(z=(ZFeature("i"), ZFeature("d")), z_add=(ZFeature("MONTH(d)"),)),
    "combined": FeatureSet(
        z=(ZFeature("t"), ZFeature("MONTH(d)")),
        sop=(SopFeature("s LIKE '%x%'"), SopFeature("f > 2")),
        sop_add=(SopFeature("i > 5"),),
        sop_weights={"s LIKE '%x%'": 2.0, "f > 2": 1.0},
    ),
}


def random_rows(count: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)

    def maybe(value):  # type: ignore[no-untyped-def]
        return None if rng.random() < 0.1 else value

    dates = [dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(2024, 3, 1), dt.date(9999, 12, 31)]
    strings = ["", "a", "ab", "abc", "abx", "ba", "x" * 33, "x" * 40 + "b", "xa", "zz"]
    rows = []
    for _ in range(count):
        rows.append(
            (
                maybe(rng.randint(-5, 10)),
                maybe(rng.choice([-2.0, 0.0, 1.5, 2.25, 3.0, 7.0, math.nan, -0.0, *INEXACT])),
                maybe(rng.choice(strings)),
                maybe(rng.choice(dates)),
                maybe(
                    dt.datetime(2024, 1, 1, tzinfo=UTC)
                    + dt.timedelta(microseconds=rng.choice([0, 999, 1000, 1500, 999999]))
                ),
                maybe(rng.random() < 0.5),
                maybe(rng.choice([Decimal("-1.25"), Decimal("0.00"), Decimal("3.50"), Decimal("99.99")])),
                maybe(rng.choice(SINGLES)),
            )
        )
    return rows


@pytest.fixture(scope="module")
def layouts(spark, tmp_path_factory):
    """One table per layout, all from the same rows written as 8 files, then optimised. The 8 files are
    written once and the table's directory copied for each layout (a copy is a table of its own at its own
    path, `tests.templates`), which saves three writes and their commits."""
    root = tmp_path_factory.mktemp("layouts")
    frame = spark.createDataFrame(random_rows(600, seed=3), SCHEMA).repartition(8)
    expected = fingerprint(frame)
    open_table(str(root / "plain")).create(spark, frame)
    tables = {}
    for name, features in LAYOUTS.items():
        if name != "plain":
            shutil.copytree(root / "plain", root / name)
        table = open_table(str(root / name))
        if not features.is_empty:
            optimize(spark, table, features, target_file_size=3000)
        tables[name] = table
    return tables, expected


def test_rewrites_preserve_the_rows_of_every_layout(spark, layouts):
    tables, expected = layouts
    for name, table in tables.items():
        snapshot = table.snapshot()
        assert fingerprint(table.read_files(spark, snapshot.files, snapshot)) == expected, name
        if name != "plain":
            assert snapshot.version == 1
            (commit,) = [c for c in table.history(1)]
            assert commit.deltaopt["operation"] == "OPTIMIZE"
            assert len(load_index(table, snapshot)) == len(snapshot.files)  # every new file has extended stats
            assert unclustered_files(table, snapshot) == []


def test_optimize_commit_has_no_data_change(layouts):
    tables, _ = layouts
    log = os.path.join(tables["combined"].uri, "_delta_log", f"{1:020d}.json")
    with open(log) as commit:
        actions = [json.loads(line) for line in commit]
    changes = [a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a]
    assert changes and not any(changes)


@pytest.fixture(scope="module")
def full_reads(spark, layouts):
    """Each layout's snapshot, and every row of the four tables, read once and cached, with its table, its file
    and the two row hashes `fingerprint` sums (its columns, in its order): the tables never change, so every
    example below filters these rows instead of scanning every file again (4 more scans to compile each).
    The cache's own batch pruning is off while it serves: Spark skips cached batches by statistics that
    leave NaN out, so ``NOT (f < 8)`` found none of the NaN rows it matches (the reference would be wrong)."""
    from pyspark.sql import functions as F

    previous = spark.conf.get(CACHE_PRUNING, None)
    spark.conf.set(CACHE_PRUNING, "false")
    tables, _ = layouts
    snapshots = {name: table.snapshot() for name, table in tables.items()}
    frames = {name: tables[name].read_files(spark, s.files, s) for name, s in snapshots.items()}
    schema = frames["plain"].schema  # every layout's: the same rows, rewritten
    data = schema.names
    columns = hashable_columns([schema[c] for c in sorted(data)])
    hashes = (F.xxhash64(*columns).alias("xx"), F.hash(*columns).alias("mm"))
    rows = [
        frame.select(F.lit(name).alias("name"), F.col("_metadata.file_path").alias("path"), *hashes, *data)
        for name, frame in frames.items()
    ]
    everything = functools.reduce(lambda a, b: a.unionByName(b), rows).cache()
    yield snapshots, everything, hashes
    everything.unpersist()
    spark.conf.unset(CACHE_PRUNING) if previous is None else spark.conf.set(CACHE_PRUNING, previous)


CACHE_PRUNING = "spark.sql.inMemoryColumnarStorage.partitionPruning"


def _summed(hashes: Counter[tuple[int, int]]) -> Fingerprint:
    """`fingerprint` of the rows whose hashes are `hashes` (count and both hash sums)."""
    return Fingerprint(
        sum(hashes.values()), sum(xx * n for (xx, _), n in hashes.items()), sum(mm * n for (_, mm), n in hashes.items())
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(predicate=predicate_strategy())
@example(predicate=("NOT (f < 8)", None))  # NaN matches it: the cached reference once lost those rows
def test_read_returns_exactly_the_filtered_rows(spark, layouts, full_reads, predicate):
    """`read(where=P)` against Spark's filter over every file's rows, in every layout, and the files holding a
    match all kept by `plan_scan`. One Spark job of one task per example: the 4 pruned reads and the filtered
    rows of every file (`full_reads`), each row with its two hashes and file, collected at once (a fingerprint
    and a distinct per read were 6 jobs per table, a task per file each). The hashes are compared as
    multisets, which implies equal fingerprints (also compared)."""
    from pyspark.sql import functions as F

    text, _ = predicate
    tables, _ = layouts
    snapshots, everything, hashes = full_reads
    frames = [
        everything.filter(F.expr(text)).select(F.concat("name", F.lit(" full")).alias("read"), "path", "xx", "mm")
    ]
    for name, table in tables.items():
        pruned = read(spark, table, where=text)
        frames.append(
            pruned.select(F.lit(f"{name} pruned").alias("read"), F.lit(None).cast("string").alias("path"), *hashes)
        )
    rows = functools.reduce(lambda a, b: a.unionByName(b), frames).coalesce(1).collect()
    for name, table in tables.items():
        pruned_rows = Counter((r["xx"], r["mm"]) for r in rows if r["read"] == f"{name} pruned")
        full_rows = Counter((r["xx"], r["mm"]) for r in rows if r["read"] == f"{name} full")
        assert _summed(pruned_rows) == _summed(full_rows), (name, text)
        assert pruned_rows == full_rows, (name, text)
        holding = {r["path"] for r in rows if r["read"] == f"{name} full"}
        kept = {f.path for f in plan_scan(table, text, snapshot=snapshots[name]).files}
        assert {h.rsplit(table.uri.rstrip("/") + "/", 1)[-1] for h in holding} <= kept, (name, text)


def test_layouts_skip_files(layouts):
    tables, _ = layouts
    sop = plan_scan(tables["sop"], "s LIKE '%x%'")
    plain = plan_scan(tables["plain"], "s LIKE '%x%'")
    assert plain.skipped_files == 0 and sop.skipped_files > 0
    z = plan_scan(tables["z"], "i = 10 AND d = DATE '9999-12-31'")
    assert z.skipped_files > 0


def test_only_the_given_files_are_rewritten(spark, tmp_path):
    table = open_table(str(tmp_path / "t"))
    table.create(spark, spark.createDataFrame(random_rows(300, seed=5), SCHEMA).repartition(6))
    before = table.snapshot()
    chosen, untouched = before.files[:3], before.files[3:]
    result = optimize(spark, table, LAYOUTS["z"], target_file_size=1 << 30, files=chosen)
    after = table.snapshot()
    assert result.files_in == 3 and result.files_out == 1
    assert {f.path for f in untouched} <= {f.path for f in after.files}
    assert not {f.path for f in chosen} & {f.path for f in after.files}
    assert after.num_records == before.num_records


def test_a_feature_that_cannot_be_evaluated_stops_before_writing(spark, tmp_path):
    table = open_table(str(tmp_path / "t"))
    table.create(spark, spark.createDataFrame(random_rows(50, seed=7), SCHEMA).coalesce(1))
    for bad in (FeatureSet(sop=(SopFeature("my_udf(i) = 1"),)), FeatureSet(z=(ZFeature("no_such_column"),))):
        with pytest.raises(errors.ClusteringError, match="cannot be evaluated"):
            optimize(spark, table, bad, target_file_size=1 << 20)
    assert table.snapshot().version == 0
    assert not [d for d in os.listdir(table.uri) if d.startswith("optimize-")]


DAMAGES = ("drop a row", "duplicate a row", "change a value")
# one end-to-end case per fingerprint source in the default run (pass 1's: combined; the one observed in the
# write: z); every damage is checked on `_verify` itself below, and all six end to end by `make test-slow`
END_TO_END = {("drop a row", "combined"), ("change a value", "z")}


@pytest.mark.parametrize(
    ("damage", "layout"),
    [
        pytest.param(d, lay, id=f"{d}-{lay}", marks=() if (d, lay) in END_TO_END else pytest.mark.slow)
        for d in DAMAGES
        for lay in ("combined", "z")
    ],
)
def test_a_write_that_changed_rows_is_caught_and_nothing_is_committed(spark, tmp_path, monkeypatch, damage, layout):
    """The verification is what stands between a faulty layout step and the table: damage the laid-out
    frame after clustering and the rewrite must be refused, its files removed."""
    import dataclasses

    from pyspark.sql import functions as F

    from optimizer.clustering import job

    table = open_table(str(tmp_path / "t"))
    table.create(spark, spark.createDataFrame(random_rows(200, seed=11), SCHEMA).repartition(4))
    real = job.cluster_frame

    def damaged(frame, *args, **kwargs):  # type: ignore[no-untyped-def]
        layout = real(frame, *args, **kwargs)
        laid_out = layout.frame
        if damage == "drop a row":
            laid_out = laid_out.limit(199)
        elif damage == "duplicate a row":
            laid_out = laid_out.unionByName(laid_out.limit(1))
        else:
            laid_out = laid_out.withColumn("i", F.when(F.col("i") == 3, F.lit(4)).otherwise(F.col("i")))
        return dataclasses.replace(layout, frame=laid_out)

    monkeypatch.setattr(job, "cluster_frame", damaged)
    with pytest.raises(errors.ClusteringError, match="written rows differ"):
        optimize(spark, table, LAYOUTS[layout], target_file_size=1 << 20)
    assert table.snapshot().version == 0
    assert not [d for d in os.listdir(table.uri) if d.startswith("optimize-")]


def _damaged(rows: list[tuple], damage: str) -> list[tuple]:
    """`rows` with `damage` done to them, as the end-to-end test does it to the laid-out frame."""
    if damage == "drop a row":
        return rows[:-1]
    if damage == "duplicate a row":
        return [*rows, rows[0]]
    return [(4, *row[1:]) if row[0] == 3 else row for row in rows]


def _row_hashes(row: tuple) -> tuple[int, int]:
    """Two independent 64-bit hashes of a row: stand-ins for Spark's xxhash64 and murmur3 `hash`."""
    digest = hashlib.blake2b(repr(row).encode(), digest_size=16).digest()
    return int.from_bytes(digest[:8], "big", signed=True), int.from_bytes(digest[8:], "big", signed=True)


def _group(row: tuple, partition: int | None) -> tuple:
    """The row's partition group as the log writes it (text; NULL is None). `partition`: a column index."""
    if partition is None:
        return ()
    return (None if row[partition] is None else str(row[partition]),)


def _fingerprints(rows: list[tuple], partition: int | None) -> dict[tuple, tuple[int, int, int]]:
    """Row count and hash sums per partition group, as pass 1 or the write's observation gives them."""
    sums: dict[tuple, tuple[int, int, int]] = {}
    for row in rows:
        count, xx, mm = sums.get(_group(row, partition), (0, 0, 0))
        row_xx, row_mm = _row_hashes(row)
        sums[_group(row, partition)] = (count + 1, xx + row_xx, mm + row_mm)
    return sums


def _written(rows: list[tuple], partition: int | None, column: str | None):  # type: ignore[no-untyped-def]
    """`rows` as a rewrite's staged files (two per partition group) and their per-file aggregates."""
    from optimizer.table.access import StagedFile

    groups: dict[tuple, list[tuple]] = {}
    for row in rows:
        groups.setdefault(_group(row, partition), []).append(row)
    staged, by_path = [], {}
    for key, group in groups.items():
        for half in (group[::2], group[1::2]):
            path = f"part-{len(staged)}.parquet"
            count, xx, mm = _fingerprints(half, None).get((), (0, 0, 0))
            staged.append(StagedFile(path, 1, "{}", {column: key[0]} if column else {}))
            by_path[path] = {"__rows": count, "__xx": xx, "__mm": mm}
    return staged, by_path


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("damage", DAMAGES)
def test_the_row_proof_refuses_written_rows_that_differ_from_the_input(damage, partitioned):
    """`_verify` on crafted rows (no Spark): the input's rows, written in other files, pass; each damage
    the end-to-end test does to the laid-out frame is refused, per partition group too."""
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from optimizer.clustering.job import _verify

    kinds = (
        *(LongType(), DoubleType(), StringType(), DateType(), TimestampType(), BooleanType(), DecimalType(10, 2)),
        FloatType(),
    )
    schema = StructType([StructField(n, k) for n, k in zip("ifsdtbpg", kinds, strict=True)])
    partition, column = (2, "s") if partitioned else (None, None)
    rows = random_rows(200, seed=11)
    expected = _fingerprints(rows, partition)
    assert len(expected) == (10 + 1 if partitioned else 1)  # every string and NULL: a group each
    _verify(*_written(rows, partition, column), expected, [column] if column else [], schema)
    damaged = _damaged(rows, damage)
    assert damaged != rows
    with pytest.raises(errors.ClusteringError, match="written rows differ"):
        _verify(*_written(damaged, partition, column), expected, [column] if column else [], schema)


def test_a_z_only_rewrite_observes_its_input_instead_of_a_first_pass(spark, tmp_path, monkeypatch):
    """Without SOP features, on an unpartitioned table whose log counts the rows, the input fingerprint
    is observed during the write: no pass 1, and the rows are still proven identical."""
    from optimizer.clustering import layout

    table = open_table(str(tmp_path / "t"))
    table.create(spark, spark.createDataFrame(random_rows(300, seed=13), SCHEMA).repartition(4))
    snapshot = table.snapshot()
    before = fingerprint(table.read_files(spark, snapshot.files, snapshot))

    def no_first_pass(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("pass 1 ran")

    monkeypatch.setattr(layout, "_count_vectors", no_first_pass)
    result = optimize(spark, table, LAYOUTS["z"], target_file_size=1 << 20)
    assert result.version == 1 and result.rows == 300
    after = table.snapshot()
    assert fingerprint(table.read_files(spark, after.files, after)) == before  # count and both hashes
    with pytest.raises(AssertionError, match="pass 1 ran"):  # a SOP layout still needs its vectors
        optimize(spark, table, LAYOUTS["combined"], target_file_size=1 << 20, files=after.files, snapshot=after)


def test_losing_a_race_commits_nothing(spark, tmp_path):
    table = open_table(str(tmp_path / "t"))
    table.create(spark, spark.createDataFrame(random_rows(200, seed=9), SCHEMA).repartition(4))
    stale = table.snapshot()
    optimize(spark, table, LAYOUTS["z"], target_file_size=1 << 20)
    winner = table.snapshot()
    with pytest.raises(errors.CommitConflictError):
        optimize(spark, table, LAYOUTS["sop"], target_file_size=1 << 20, files=stale.files, snapshot=stale)
    assert table.snapshot().version == winner.version
    assert table.snapshot().num_records == 200


def test_partitioned_tables_keep_rows_and_partition_values(spark, tmp_path):
    """Rows stay in their partitions, counted and hashed per partition; pruning uses partition values."""
    from pyspark.sql import functions as F

    table = open_table(str(tmp_path / "parted"))
    frame = (
        spark.range(3000)
        .withColumn(
            "region", F.element_at(F.array(F.lit("EU"), F.lit("US"), F.lit("APAC")), (F.col("id") % 3 + 1).cast("int"))
        )
        .withColumn("x", (F.col("id") * 37) % 500)
        .repartition(6)
    )
    before = table.create(spark, frame, partition_by=["region"])
    assert before.partition_columns == ("region",)
    expected = fingerprint(table.read_files(spark, before.files, before))
    optimize(spark, table, FeatureSet(z=(ZFeature("x"),)), target_file_size=8000)
    after = table.snapshot()
    assert fingerprint(table.read_files(spark, after.files, after)) == expected
    assert {f.partition_values["region"] for f in after.files} == {"EU", "US", "APAC"}
    per_partition = table.read_files(spark, after.files, after).groupBy("region").count().collect()
    assert {r["region"]: r["count"] for r in per_partition} == {"EU": 1000, "US": 1000, "APAC": 1000}
    us_only = plan_scan(table, "region = 'US'")
    assert us_only.files and all(f.partition_values["region"] == "US" for f in us_only.files)
    assert read(spark, table, where="region = 'US' AND x < 100").count() == (
        table.read_files(spark, after.files, after).filter("region = 'US' AND x < 100").count()
    )


@pytest.mark.spark
def test_spark_sql_reads_a_view_over_the_pruned_files(spark, tmp_path):
    """`create_view` gives Spark SQL the pruned files: the view's rows equal the filtered full read,
    and a query's own filters on top stay exact."""
    from pyspark.sql import functions as F

    from optimizer.skipping.scan import create_view

    path = str(tmp_path / "t")
    table = open_table(path)
    frame = spark.range(6000).withColumn("x", (F.col("id") * 37) % 500).withColumn("g", F.col("id") % 7)
    table.create(spark, frame.repartition(6))
    optimize(spark, table, FeatureSet(z=(ZFeature("x"),)), target_file_size=8000)
    snapshot = table.snapshot()
    full = table.read_files(spark, snapshot.files, snapshot)
    view = create_view(spark, "pruned_t", path, where="x >= 100 AND x < 120", columns=["id", "x", "g"])
    assert len(plan_scan(table, "x >= 100 AND x < 120").files) < len(snapshot.files)  # fewer files read
    expected = full.filter("x >= 100 AND x < 120").select("id", "x", "g")
    assert fingerprint(spark.sql("SELECT * FROM pruned_t")) == fingerprint(expected) == fingerprint(view)
    narrowed = spark.sql("SELECT g, count(*) AS n FROM pruned_t WHERE g = 3 GROUP BY g").collect()
    assert narrowed[0]["n"] == expected.filter("g = 3").count() > 0
