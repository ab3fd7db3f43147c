"""Table shapes that once crashed a rewrite (issue 45, items 8-10), made by Delta's own engine:

* a shallow clone, whose log names its source's files by absolute, URL-encoded URI: the rewrite reads
  them there, writes into the clone's directory and only removes entries from the clone's log (as
  Delta's own OPTIMIZE of a clone does), never touching the source's files or log;
* a VARIANT column on the plain (Spark-written) path: statistics only on types with an order;
* columns named like the aliases deltaopt's own aggregations use (``n``, ``xx``, ``mm``, ``__rows``,
  ``__file``, ...): every alias beside user columns is derived from a prefix no column starts with.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.table import open_table
from optimizer.table.fingerprint import fingerprint
from optimizer.table.rewrite import COMMIT_CONF

pytestmark = pytest.mark.spark


def _files_on_disk(root: str) -> dict[str, int]:
    """Every file under `root` (its log included) with its size."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = os.path.getsize(path)
    return found


def _source_and_clone(spark, base: Path) -> tuple[str, str]:
    """A partitioned source under a directory whose name the log URL-encodes, and its shallow clone."""
    source, clone = str(base / "source dir%"), str(base / "clone")
    (
        spark.range(600)
        .selectExpr("id", "cast(id % 3 as int) k", "concat('t', id % 13) tag")
        .repartition(4)
        .write.format("delta")
        .partitionBy("k")
        .save(source)
    )
    spark.sql(f"CREATE TABLE delta.`{clone}` SHALLOW CLONE delta.`{source}`")
    return source, clone


# ---- item 8: shallow clones ---------------------------------------------------------------------


@pytest.mark.parametrize("commit", ["auto", "delta-rs"])
def test_a_shallow_clone_is_rewritten_into_its_own_directory_and_its_source_untouched(
    delta_spark, tmp_path: Path, commit: str
):
    spark = delta_spark
    source, clone = _source_and_clone(spark, tmp_path)
    source_rows = fingerprint(spark.read.format("delta").load(source))
    source_files = _files_on_disk(source)
    table = open_table(clone)
    snapshot = table.snapshot()
    assert all(f.path.startswith("file:/") and "%25" in f.path for f in snapshot.files)  # the source's, encoded
    assert fingerprint(table.read_files(spark, snapshot.files, snapshot)) == source_rows

    spark.conf.set(COMMIT_CONF, commit)
    try:
        features = FeatureSet.from_dict({"z": ["id"], "sop": ["tag IN ('t1', 't2')"]})
        result = optimize(spark, table, features, 16_000, files=snapshot.files, snapshot=snapshot)
    finally:
        spark.conf.set(COMMIT_CONF, "auto")
    assert result.version is not None and result.rows == 600
    assert fingerprint(spark.read.format("delta").load(clone)) == source_rows
    after = table.snapshot()
    assert all(not f.path.startswith("file:") for f in after.files)  # written into the clone's directory
    assert all(os.path.exists(os.path.join(clone, f.path)) for f in after.files)
    # the source: same rows, same files (data and log) byte for byte in size
    assert fingerprint(spark.read.format("delta").load(source)) == source_rows
    assert _files_on_disk(source) == source_files


def test_delta_rs_removes_files_whose_log_paths_are_url_encoded(delta_spark, tmp_path: Path):
    """delta-rs encodes the paths it writes: a remove must name the file decoded, or a partition value
    with ``%`` or a space would leave the old file active beside its rewritten rows."""
    spark, path = delta_spark, str(tmp_path / "encoded")
    rows = spark.range(300).selectExpr("id", "element_at(array('a b', '50%', 'plain'), cast(id % 3 as int) + 1) s")
    rows.repartition(3).write.format("delta").partitionBy("s").save(path)
    before = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    snapshot = table.snapshot()
    spark.conf.set(COMMIT_CONF, "delta-rs")
    try:
        features = FeatureSet.from_dict({"z": ["id"]})
        result = optimize(spark, table, features, 16_000, files=snapshot.files, snapshot=snapshot)
    finally:
        spark.conf.set(COMMIT_CONF, "auto")
    assert result.committed_by == "delta-rs"
    assert fingerprint(spark.read.format("delta").load(path)) == before
    assert not {f.path for f in snapshot.files} & {f.path for f in table.snapshot().files}


def test_footers_of_a_clone_are_read_where_the_log_points(delta_spark, tmp_path: Path):
    """The estimate reads codecs and column sizes from footers: of the source's files, for a clone."""
    from optimizer.skipping.scan import column_sizes
    from optimizer.table.footers import file_codec

    _, clone = _source_and_clone(delta_spark, tmp_path)
    table = open_table(clone)
    data_file = table.snapshot().files[0]
    assert file_codec(table, data_file) == "SNAPPY"
    sizes = column_sizes(table, data_file)
    assert sizes is not None and {"id", "tag"} <= set(sizes)


@pytest.mark.parametrize(
    ("path", "uri", "spark_uri"),
    [
        ("part-0.parquet", "/t/part-0.parquet", "/t/part-0.parquet"),
        ("file:/src/part-0.parquet", "file:/src/part-0.parquet", "file:/src/part-0.parquet"),
        ("file:///src/part-0.parquet", "file:///src/part-0.parquet", "file:///src/part-0.parquet"),
        ("s3://bucket/src/part-0.parquet", "s3://bucket/src/part-0.parquet", "s3a://bucket/src/part-0.parquet"),
        ("abfss://c@a.dfs.core.windows.net/x.parquet", "abfss://c@a.dfs.core.windows.net/x.parquet", None),
    ],
)
def test_absolute_log_paths_are_not_joined_onto_the_table(path: str, uri: str, spark_uri: str | None):
    from optimizer.table.handle import DeltaTableHandle

    table = DeltaTableHandle("/t")
    assert table.file_uri(path) == uri
    assert table.spark_uri(path) == (spark_uri or uri)


def test_log_paths_resolve_to_their_storage_location(tmp_path: Path):
    """Relative paths under the table, absolute ones where they point; both URL-decoded."""
    import pyarrow.fs as pafs

    from optimizer.table.handle import DeltaTableHandle
    from optimizer.table.paths import open_location

    table = DeltaTableHandle(str(tmp_path / "t"))
    fs, path = open_location(table, "k=a%20b/part-0.parquet")
    assert isinstance(fs, pafs.LocalFileSystem) and path == f"{tmp_path}/t/k=a b/part-0.parquet"
    for absolute in ("file:/src/a%2525/x.parquet", "file:///src/a%2525/x.parquet"):
        fs, path = open_location(table, absolute)
        assert isinstance(fs, pafs.LocalFileSystem) and path == "/src/a%25/x.parquet"


# ---- item 9: VARIANT on the plain path -----------------------------------------------------------


def test_a_variant_column_on_the_plain_path_gets_null_counts_only(delta_spark, tmp_path: Path):
    spark, path = delta_spark, str(tmp_path / "variant")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT, tag STRING, v VARIANT) USING delta")
    for low, high in ((0, 300), (300, 500)):
        spark.sql(
            f"""INSERT INTO delta.`{path}` SELECT id, cast(id % 7 as int), concat('t', id % 5),
            CASE WHEN id % 10 = 0 THEN NULL ELSE parse_json(concat('{{"n":', id, '}}')) END
            FROM range({low}, {high})"""
        )
    before = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    snapshot = table.snapshot()
    assert not snapshot.features.needs_delta_writer  # the plain path: Spark writes, deltaopt's statistics
    features = FeatureSet.from_dict({"z": ["k", "id"], "sop": ["tag IN ('t1', 't2')"]})
    result = optimize(spark, table, features, 16_000, files=snapshot.files, snapshot=snapshot)
    assert result.version is not None and result.committed_by == "delta-spark"
    assert fingerprint(spark.read.format("delta").load(path)) == before
    after = table.snapshot()
    stats = [json.loads(a.stats_json) for a in _added(spark, path, result.version)]
    assert sum(s["nullCount"]["v"] for s in stats) == 50  # counted, as Delta counts them
    assert all("v" not in s["minValues"] and "v" not in s["maxValues"] for s in stats)
    assert sum(f.num_records or 0 for f in after.files) == 500


def test_a_z_feature_without_an_order_is_refused_in_one_line(delta_spark, tmp_path: Path):
    from optimizer import errors

    spark, path = delta_spark, str(tmp_path / "variant_z")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, v VARIANT) USING delta")
    spark.sql(f"""INSERT INTO delta.`{path}` SELECT id, parse_json(concat('{{"n":', id, '}}')) FROM range(50)""")
    table = open_table(path)
    snapshot = table.snapshot()
    with pytest.raises(errors.ClusteringError, match=r"'v'.*variant.*no order") as raised:
        optimize(spark, table, FeatureSet.from_dict({"z": ["v"]}), 16_000, files=snapshot.files, snapshot=snapshot)
    assert "\n" not in str(raised.value)
    assert table.snapshot().version == snapshot.version


class _Added:
    def __init__(self, stats_json: str) -> None:
        self.stats_json = stats_json


def _added(spark, path: str, version: int) -> list[_Added]:
    """The add actions a commit wrote, from its log file."""
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as log:
        actions = [json.loads(line) for line in log if line.strip()]
    return [_Added(a["add"]["stats"]) for a in actions if "add" in a]


# ---- item 10: columns named like deltaopt's aliases ----------------------------------------------

# (name, type, value): named like the aliases of pass 1, the statistics pass and the estimate
ALIASED = (
    ("n", "INT", "cast(id % 3 as int)"),
    ("xx", "BIGINT", "id % 2"),
    ("mm", "STRING", "concat('m', id % 11)"),
    ("__rows", "INT", "cast(id % 5 as int)"),
    ("__file", "STRING", "concat('f', id)"),
    ("__xx", "BIGINT", "id + 1"),
    ("__order", "INT", "cast(id % 4 as int)"),
    ("nulls_0", "INT", "cast(id % 2 as int)"),
    ("min_0", "STRING", "concat('x', id % 9)"),
    ("_metadata", "STRING", "concat('meta', id % 6)"),  # hides Spark's file metadata column by that name
)


def _aliased_table(spark, path: str, partition: str = "n", mapping: bool = False) -> None:
    """Every name of `ALIASED`, partitioned by `partition`, written by Delta in several files; with
    `mapping`, under column mapping (Delta's writer stages the rewrite)."""
    columns = ", ".join(f"`{name}` {kind}" for name, kind, _ in ALIASED)
    properties = "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')" if mapping else ""
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, {columns}) USING delta PARTITIONED BY (`{partition}`) {properties}"
    )
    values = ", ".join(value for _, _, value in ALIASED)
    spark.sql(f"INSERT INTO delta.`{path}` SELECT id, {values} FROM range(400)")
    spark.sql(f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` WHERE id < 150")


@pytest.mark.parametrize(("partition", "mapping"), [("n", False), ("xx", False), ("mm", True)])
def test_columns_named_like_deltaopts_aliases_are_rewritten_verified(
    delta_spark, tmp_path: Path, partition: str, mapping: bool
):
    spark, path = delta_spark, str(tmp_path / "aliases")
    _aliased_table(spark, path, partition, mapping)
    before = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    snapshot = table.snapshot()
    features = FeatureSet.from_dict({"z": ["__xx", "id"], "sop": ["min_0 IN ('x1', 'x2')"]})
    result = optimize(spark, table, features, 16_000, files=snapshot.files, snapshot=snapshot)
    assert result.version is not None and result.rows == 550
    assert fingerprint(spark.read.format("delta").load(path)) == before


def test_partition_columns_named_like_the_fingerprints_aliases_are_verified_and_a_change_caught(delta_spark):
    """Pass 1 groups by the partition columns beside its own aggregates: named ``n``, ``xx`` and ``mm``
    they must still give the true fingerprint, which catches one changed value."""
    from pyspark.sql import functions as F

    from optimizer.clustering.job import _verify
    from optimizer.clustering.layout import _count_vectors, fingerprint_columns
    from optimizer.errors import ClusteringError
    from optimizer.table.access import StagedFile

    spark = delta_spark
    frame = spark.range(90).selectExpr(
        "id", "cast(id % 3 as int) n", "cast(id % 2 as bigint) xx", "cast(id % 5 as string) mm", "id * 2 `__rows`"
    )
    names, partitions = ["id", "__rows"], ["n", "xx", "mm"]
    expected, _ = _count_vectors(frame, names, partitions, vectors=None)
    assert sum(rows for rows, _, _ in expected.values()) == 90

    def staged(written) -> tuple[list[StagedFile], dict[str, dict[str, int]]]:
        xx, mm = fingerprint_columns(written.schema, names)
        groups = written.groupBy(*[F.col(c).cast("string").alias(f"p_{c}") for c in partitions]).agg(
            F.count(F.lit(1)).alias("r"), F.sum(xx).alias("x"), F.sum(mm).alias("m")
        )
        files, rows = [], {}
        for i, g in enumerate(groups.collect()):
            values = {c: g[f"p_{c}"] for c in partitions}
            files.append(StagedFile(f"f{i}.parquet", 1, "{}", values))
            rows[f"f{i}.parquet"] = {"__rows": g["r"], "__xx": g["x"], "__mm": g["m"]}
        return files, rows

    _verify(*staged(frame), expected, partitions, frame.schema)  # the same rows: verified
    changed = frame.withColumn("__rows", F.when(F.col("id") == 17, F.lit(-1)).otherwise(F.col("__rows")))
    with pytest.raises(ClusteringError, match="written rows differ"):
        _verify(*staged(changed), expected, partitions, frame.schema)


def test_virtual_files_of_columns_named_like_their_helpers_describe_the_columns(delta_spark, tmp_path: Path):
    """The estimate's virtual files and stored-order baseline add a file index and a read order beside
    the sample's columns: a column called ``__file`` or ``__order`` keeps its own values."""
    from optimizer.estimate.virtual_files import in_stored_order, virtual_files

    spark, path = delta_spark, str(tmp_path / "virtual")
    _aliased_table(spark, path)
    table = open_table(path)
    snapshot = table.snapshot()
    sample = table.read_files(spark, snapshot.files, snapshot)
    features = FeatureSet.from_dict({"z": ["__xx", "id"]})
    made = virtual_files(sample, snapshot, features, 3)
    assert sum(made.rows.values()) == 550
    lows = [s.columns["__file"].low for s in made.standard if "__file" in s.columns]
    assert lows and all(isinstance(low, str) and low.startswith("f") for low in lows)
    ordered = in_stored_order(sample, snapshot, 2)
    assert sorted(r["__order"] for r in ordered.collect()) == sorted(r["__order"] for r in sample.collect())


def test_joined_ranges_of_a_fact_column_named_like_their_aliases(delta_spark, tmp_path: Path):
    from optimizer.clustering.joined import joined_ranges
    from optimizer.features import JoinedFeature

    spark = delta_spark
    dimension = str(tmp_path / "dim")
    spark.range(10).selectExpr("id", "cast(id * 10 as int) attr").write.format("delta").save(dimension)
    facts = str(tmp_path / "facts")
    columns = ("id % 10 `__key`", "id `__file`", "id `__a0`", "'m' `_metadata`")
    spark.range(40).selectExpr(*columns).coalesce(1).write.parquet(facts)
    (name,) = [n for n in os.listdir(facts) if n.endswith(".parquet")]
    feature = JoinedFeature("__key", "dim", dimension, "id", "attr")
    found = joined_ranges(spark, {name: f"{facts}/{name}"}, [feature])
    (ranges,) = found[name]
    value = ranges.ranges["attr"]
    assert (value.min, value.max, value.null_count) == (0, 90, 0)
