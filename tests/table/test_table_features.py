"""The tables users have, made by Delta's own engine (delta-spark in the test session) with each table
feature alone and the Databricks defaults together: `optimize` rewrites them with the rows (count and an
order-insensitive hash as Delta reads them), row ids where tracked, and what Spark, delta-rs and DuckDB
read unchanged, or refuses before any rewrite in one line naming the feature."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer import errors
from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.table import open_table
from optimizer.table.fingerprint import fingerprint
from optimizer.table.rewrite import COMMIT_CONF

pytestmark = pytest.mark.spark

DATABRICKS_DEFAULTS = {
    "delta.enableDeletionVectors": "true",
    "delta.columnMapping.mode": "name",
    "delta.enableRowTracking": "true",
    "delta.enableInCommitTimestamps": "true",
}


def _properties(values: dict[str, str]) -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in values.items())


def _make(spark, path: str, properties: dict[str, str], *, rows: int = 2000, files: int = 6) -> None:
    """A table written by Delta in `files` files: ints, strings and a decimal."""
    props = f"TBLPROPERTIES ({_properties(properties)})" if properties else ""
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT, tag STRING, amount DECIMAL(12,2)) USING delta {props}")
    (
        spark.range(rows)
        .selectExpr("id", "cast(id % 97 as int) k", "concat('t', id % 13) tag", "cast(id / 7 as decimal(12,2)) amount")
        .repartition(files)
        .write.format("delta")
        .mode("append")
        .save(path)
    )


def _readers(spark, path: str) -> dict[str, object]:
    """Row counts per standard reader; a reader that cannot read the table says which error it raised."""
    from benchmarks.standard_reader import DuckDBReader

    counts: dict[str, object] = {"spark": spark.read.format("delta").load(path).count()}
    try:
        from deltalake import DeltaTable

        counts["delta-rs"] = DeltaTable(path).to_pyarrow_table().num_rows
    except Exception as err:  # a reader feature delta-rs does not read: it must stay the same after
        counts["delta-rs"] = type(err).__name__
    duck = DuckDBReader()
    try:
        counts["duckdb"] = duck.count(path, None)
    except Exception as err:
        counts["duckdb"] = type(err).__name__
    finally:
        duck.close()
    return counts


def _state(spark, path: str, tracked: bool):
    frame = spark.read.format("delta").load(path)
    ids = None
    if tracked:
        ids = sorted(map(tuple, frame.selectExpr("id", "_metadata.row_id", "_metadata.row_commit_version").collect()))
    return fingerprint(frame), ids


def _optimize_checked(
    spark, path: str, *, tracked: bool = False, z: tuple[str, ...] = ("k", "id"), sop: str = "tag IN ('t1', 't2')"
):
    """Run `optimize` over every file and check what every reader sees is what it saw."""
    before_rows, before_ids = _state(spark, path, tracked)
    before_readers = _readers(spark, path)
    table = open_table(path)
    snapshot = table.snapshot()
    result = optimize(
        spark, table, FeatureSet.from_dict({"z": list(z), "sop": [sop]}), 16_000,
        files=snapshot.files, snapshot=snapshot,
    )  # fmt: skip
    assert result.version is not None and result.committed_by == "delta-spark"
    after_rows, after_ids = _state(spark, path, tracked)
    assert after_rows == before_rows
    assert result.rows == before_rows.rows  # rows as Delta reads them: deleted rows are not counted
    if tracked:
        assert after_ids == before_ids  # row ids and row commit versions preserved exactly
    assert _readers(spark, path) == before_readers
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where(f"version = {result.version}").collect()[0]
    assert history["operation"] == "OPTIMIZE"
    assert "__z" not in history["operationParameters"]["zOrderBy"]  # the user's expressions, not helpers
    return table, result


def test_deletion_vectors_are_read_as_delta_reads_them_and_their_files_replaced(delta_spark, tmp_path: Path):
    spark, path = delta_spark, str(tmp_path / "dv")
    _make(spark, path, {"delta.enableDeletionVectors": "true"})
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 0")
    table, result = _optimize_checked(spark, path)
    assert result.rows == 1800
    metrics = table.history(result.version)[-1].metadata["operationMetrics"]
    assert int(metrics["numDeletionVectorsRemoved"]) > 0
    assert not table.snapshot().features.clustered


@pytest.mark.parametrize("mode", ["name", "id", "upgraded"])
def test_column_mapping_after_rename_and_drop_keeps_logical_names_everywhere(delta_spark, tmp_path: Path, mode):
    """After RENAME the old physical names belong to other logical columns (a table upgraded to column
    mapping keeps its old names as physical ones): statistics must follow the schema's mapping, or
    pruning would read one column's bounds for another."""
    spark, path = delta_spark, str(tmp_path / "cm")
    _make(spark, path, {} if mode == "upgraded" else {"delta.columnMapping.mode": mode})
    if mode == "upgraded":  # the legacy protocol: reader 2, writer 5, no feature lists
        spark.sql(
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.minReaderVersion' = '2', "
            "'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')"
        )
    spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN amount")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN k TO bucket")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN id TO k")  # the physical name "id" is now logical k
    table, _ = _optimize_checked(spark, path, z=("bucket", "k"))
    after = table.snapshot()
    assert {"k", "bucket", "tag"} <= set(after.files[0].min_values)
    for f in after.files:  # bounds are the logical columns' own
        assert 0 <= f.min_values["bucket"] <= f.max_values["bucket"] <= 96
        assert f.max_values["k"] <= 1999
    wrong = spark.read.format("delta").load(path).where("bucket > 96").count()
    assert wrong == 0


def test_row_tracking_keeps_row_ids_and_commit_versions(delta_spark, tmp_path: Path):
    spark, path = delta_spark, str(tmp_path / "rt")
    _make(spark, path, {"delta.enableRowTracking": "true"})
    spark.sql(f"UPDATE delta.`{path}` SET tag = 'u' WHERE id < 50")  # rows with a later commit version
    _optimize_checked(spark, path, tracked=True)


def test_type_widening_reads_widened_values(delta_spark, tmp_path: Path):
    spark, path = delta_spark, str(tmp_path / "tw")
    _make(spark, path, {"delta.enableTypeWidening": "true"})
    spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN k TYPE BIGINT")
    spark.range(3).selectExpr(
        "id + 5000 id", "id + 3000000000 k", "'w' tag", "cast(1 as decimal(12,2)) amount"
    ).write.format("delta").mode("append").save(path)
    _optimize_checked(spark, path)


def test_v2_checkpoints(delta_spark, tmp_path: Path):
    """A table checkpointed in the v2 format (a UUID-named checkpoint every 2 commits): the log reads,
    the rewrite commits; delta-rs's own data reader refuses such tables before and after alike."""
    spark, path = delta_spark, str(tmp_path / "v2")
    _make(spark, path, {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"})
    spark.range(5).selectExpr("id + 9000 id", "1 k", "'x' tag", "cast(0 as decimal(12,2)) amount").write.format(
        "delta"
    ).mode("append").save(path)
    assert any(".checkpoint." in p.name for p in (Path(path) / "_delta_log").iterdir())
    table, _ = _optimize_checked(spark, path)
    assert "v2Checkpoint" in table.snapshot().features.reader_features


def test_databricks_defaults_together_optimise(delta_spark, tmp_path: Path):
    """Deletion vectors + column mapping + row tracking + in-commit timestamps, as a new Databricks
    table has them, after a DELETE, an UPDATE and a RENAME."""
    spark, path = delta_spark, str(tmp_path / "dbx")
    _make(spark, path, DATABRICKS_DEFAULTS)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 9 = 0")
    spark.sql(f"UPDATE delta.`{path}` SET amount = 0 WHERE id % 11 = 0")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN tag TO label")
    table = open_table(path)
    assert table.snapshot().features.needs_delta_writer
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN label TO tag")  # the SOP feature names tag
    _optimize_checked(spark, path, tracked=True)


def test_a_liquid_table_gets_its_keys_from_the_features_and_delta_clusters_it(delta_spark, tmp_path: Path):
    """No Z-order is ever committed over a clustered table: the plain-column Z features become its
    clustering keys and Delta's own OPTIMIZE clusters; a Delta OPTIMIZE after it rewrites nothing."""
    spark, path = delta_spark, str(tmp_path / "liquid")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT) USING delta CLUSTER BY (k)")
    for start in (0, 1000, 2000):
        spark.range(start, start + 1000).selectExpr("id", "cast(id % 5 as int) k").repartition(3).write.format(
            "delta"
        ).mode("append").save(path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    before = table.snapshot()
    assert before.features.clustered

    with pytest.raises(errors.UnsupportedTableError, match="none of the features"):
        optimize(spark, table, FeatureSet.from_dict({"sop": ["k IN (1, 2)"]}), 16_000, snapshot=before, liquid="set")
    assert table.snapshot().version == before.version  # refused before any change
    features = FeatureSet.from_dict({"z": ["id", "k + 1"], "sop": ["k IN (1, 2)"]})
    result = optimize(spark, table, features, 16_000, snapshot=before, liquid="set")  # the user's keys: only asked

    assert result.dimensions == ("id",) and result.properties == {"clusterBy": "id"}
    assert "k + 1" in result.output["clustering"] and "SOP k IN (1, 2)" in result.output["clustering"]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    operations = [(h["operation"], h["operationParameters"].get("clusterBy")) for h in history[-2:]]
    assert operations == [("CLUSTER BY", None), ("OPTIMIZE", '["id"]')]
    assert "Delta-Lake" in history[-1]["engineInfo"] and result.version == history[-1]["version"]
    assert fingerprint(spark.read.format("delta").load(path)) == expected
    again = spark.sql(f"OPTIMIZE delta.`{path}`").collect()[0]["metrics"]
    assert again["numFilesAdded"] == 0 and again["numFilesRemoved"] == 0  # Delta leaves deltaopt's choice be
    spark.conf.set(COMMIT_CONF, "delta-rs")
    try:
        with pytest.raises(errors.UnsupportedTableError, match="liquid-clustered"):
            optimize(spark, table, features, 16_000)
    finally:
        spark.conf.set(COMMIT_CONF, "auto")


def test_features_needing_delta_are_refused_up_front_without_it(delta_spark, tmp_path: Path):
    """With delta-rs forced as the committer, a deletion-vector table is refused in one line, before
    anything is read or written."""
    spark, path = delta_spark, str(tmp_path / "dv-rs")
    _make(spark, path, {"delta.enableDeletionVectors": "true"}, rows=200, files=2)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
    table = open_table(path)
    before = table.snapshot()
    spark.conf.set(COMMIT_CONF, "delta-rs")
    try:
        with pytest.raises(errors.UnsupportedTableError, match=r"deletionVectors.*no Delta engine") as raised:
            optimize(spark, table, FeatureSet.from_dict({"z": ["id"]}), 16_000, files=before.files, snapshot=before)
    finally:
        spark.conf.set(COMMIT_CONF, "auto")
    assert "\n" not in str(raised.value)
    assert table.snapshot().version == before.version
    assert not [p for p in Path(path).iterdir() if p.name.startswith("optimize-")]


def test_a_feature_deltaopt_does_not_know_is_refused_by_name():
    from optimizer.table.protocol import check_rewritable, table_features

    features = table_features(
        3, 7, ["deletionVectors"], ["deletionVectors", "futureThing"], configuration={}, schema_json='{"fields": []}'
    )
    with pytest.raises(errors.UnsupportedTableError, match="futureThing"):
        check_rewritable(features, "/t", delta_engine=True)


def test_logical_names_follow_physical_ones_in_nested_structs():
    from optimizer.table.protocol import logical_names

    schema = (
        '{"type":"struct","fields":[{"name":"a","type":"integer","metadata":{"delta.columnMapping.physicalName":"b"}},'
        '{"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"long",'
        '"metadata":{"delta.columnMapping.physicalName":"col-2"}}]},"metadata":{"delta.columnMapping.physicalName":"col-1"}}]}'
    )
    assert logical_names(schema) == {"b": "a", "col-1.col-2": "s.x", "col-1": "s"}


def test_partition_values_of_every_shape(delta_spark, tmp_path: Path):
    """Timestamps, spaces, %, /, =, non-ASCII, NULL and empty strings as partition values: the log
    holds their paths URL-encoded and their directories Hive-escaped."""
    from optimizer.skipping.extended import load_index, unclustered_files

    spark, path = delta_spark, str(tmp_path / "parts")
    values = ["a b", "50%", "x/y", "k=v", "ünï", None, "", "plain"]
    rows = [(i, values[i % len(values)], f"2024-01-0{1 + i % 3} 10:{i % 2}0:00") for i in range(240)]
    (
        spark.createDataFrame(rows, "id BIGINT, s STRING, t STRING")
        .selectExpr("id", "s", "cast(t as timestamp) ts", "cast(id % 5 as int) k")
        .repartition(4)
        .write.format("delta")
        .partitionBy("ts", "s")
        .save(path)
    )
    before = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    snapshot = table.snapshot()
    features = FeatureSet.from_dict({"z": ["k", "id"]})
    result = optimize(spark, table, features, 16_000, files=snapshot.files, snapshot=snapshot)
    assert result.version is not None
    assert fingerprint(spark.read.format("delta").load(path)) == before
    after = table.snapshot()
    assert {f.partition_values.get("s") for f in after.files} == {f.partition_values.get("s") for f in snapshot.files}
    assert fingerprint(table.read_files(spark, after.files, after)) == before
    assert _readers(spark, path)["duckdb"] == 240
    # the sidecar names a file as written, the log URL-encodes the Hive-escaped directory: the index must
    # still find the run's files, or they would count as never clustered and be rewritten every tick
    assert any("%25" in f.path for f in after.files)  # "50%": encoded twice over in the log
    assert set(load_index(table, after)) == {f.path for f in after.files}
    assert unclustered_files(table, after) == []


def test_every_column_type_and_names_that_need_quoting(delta_spark, tmp_path: Path):
    """Maps, arrays, nested structs, decimals, binary, timestamp_ntz and variant; mixed case, spaces, dots
    (which Delta allows under column mapping) and names deltaopt uses for its own helper columns."""
    spark, path = delta_spark, str(tmp_path / "types")
    spark.sql(
        f"""CREATE TABLE delta.`{path}` (id BIGINT, `Mixed Case` INT, `dot.ted` STRING, __sop_id INT, __rows INT,
        m MAP<STRING, INT>, arr ARRAY<STRUCT<x: INT>>, st STRUCT<a: INT, b: STRUCT<c: STRING>>,
        d DECIMAL(38, 10), bin BINARY, ntz TIMESTAMP_NTZ, v VARIANT) USING delta
        TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"""
    )
    spark.sql(
        f"""INSERT INTO delta.`{path}` SELECT id, cast(id % 7 as int), concat('v', id % 3), cast(id % 2 as int),
        cast(id as int), map('k', cast(id as int)), array(named_struct('x', cast(id as int))),
        named_struct('a', cast(id as int), 'b', named_struct('c', cast(id as string))),
        cast(id / 3 as decimal(38, 10)), cast(concat('b', id) as binary),
        cast(timestamp_micros(id * 1000) as timestamp_ntz), parse_json(concat('{{"n":', id, '}}'))
        FROM range(300)"""
    )
    spark.sql(f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` WHERE id < 100")  # a second file
    _optimize_checked(spark, path, z=("`Mixed Case`", "id"), sop="`dot.ted` = 'v1'")


def test_extended_statistics_of_renamed_columns_skip_nothing(delta_spark, tmp_path: Path):
    """A run's extended statistics name columns as they were: after RENAME swaps two names they would
    describe the other column, so the index drops them (the files stay clustered by that run)."""
    from optimizer.skipping.extended import load_index

    spark, path = delta_spark, str(tmp_path / "swapped")
    _make(spark, path, {"delta.columnMapping.mode": "name"}, rows=600, files=3)
    table = open_table(path)
    snapshot = table.snapshot()
    features = FeatureSet.from_dict({"z": ["k + 1", "id"], "sop": ["tag IN ('t1', 't2')"]})
    optimize(spark, table, features, 16_000, files=snapshot.files, snapshot=snapshot)
    laid_out = table.snapshot()
    assert all(s.ranges or s.sop_bits for s in load_index(table, laid_out).values())
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN k TO k_old")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN tag TO k")
    renamed = table.snapshot()
    index = load_index(table, renamed)
    assert set(index) == {f.path for f in renamed.files}  # still clustered: not rewritten for the same run
    assert all(not s.ranges and not s.sop_bits for s in index.values())


def test_the_service_ticks_and_optimises_a_databricks_default_table(delta_spark, tmp_path: Path):
    """The service's tick (analysis on a sample, the estimate, the job) on a table with deletion vectors,
    column mapping, row tracking and in-commit timestamps, after a DELETE and a RENAME: it optimises
    with logical names throughout, rows and row ids unchanged."""
    from optimizer.config import load_config
    from optimizer.service.service import context
    from optimizer.service.tick import tick
    from optimizer.verdict import Verdict
    from tests.service.test_service import NOW, log_queries, write_config

    spark, path = delta_spark, str(tmp_path / "events")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, y BIGINT, category STRING, pad STRING) USING delta "
        f"TBLPROPERTIES ({_properties(DATABRICKS_DEFAULTS)})"
    )
    spark.range(20000).selectExpr(
        "id", "(id * 7919) % 1000 y", "concat('c', id % 7) category", "sha2(cast(id as string), 256) pad"
    ).repartition(6).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 17 = 0")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN y TO x")  # the workload filters on x
    write_config(tmp_path, [{"name": "events", "path": path, "interval": 5}])
    log_queries(path + "_querylog")
    before_rows, before_ids = _state(spark, path, True)

    ctx = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    typed = tick(ctx.config.tables[0], ctx, NOW)

    assert typed.action is Verdict.OPTIMIZE, typed.reason
    assert typed.features["z"] == ["x"]
    assert typed.job is not None and typed.job.outcome is not None
    assert _state(spark, path, True) == (before_rows, before_ids)
    assert open_table(path).history(0)[-1].operation == "OPTIMIZE"
