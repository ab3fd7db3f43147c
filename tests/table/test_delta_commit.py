"""The delta-spark commit path: a layout rewrite committed by Delta's own transaction in the session's
JVM, raced by Delta's and delta-rs's writers, killed between write and commit, and read back by
Spark's Delta scan, delta-rs and DuckDB."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from optimizer import errors
from optimizer.table import open_table
from optimizer.table.deltars_commit import DeltaRsCommitter
from optimizer.table.fingerprint import fingerprint
from optimizer.table.rewrite import RewriteRequest
from optimizer.table.rewrite_path import commit_engine, committer_for
from tests.table.test_table_access import sample_frame

pytestmark = [pytest.mark.spark, pytest.mark.every_change]  # crashes and races: tests/tiers.py keeps them


def _staged_rewrite(spark, table, snapshot, files=None, run_id="t1"):
    """A rewrite of `files` staged as one file; every run has its own id, as every real run has (the log
    tells a run that committed from one that did not by it)."""
    files = list(files if files is not None else snapshot.files)
    df = table.read_files(spark, files, snapshot).coalesce(1)
    staged = table.stage(spark, df, snapshot, "optimize")
    return RewriteRequest(snapshot.version, files, staged, {"operation": "OPTIMIZE", "runId": run_id}, ("id",)), staged


def _log_actions(table_path: str, version: int) -> list[dict]:
    with open(os.path.join(table_path, "_delta_log", f"{version:020d}.json")) as commit:
        return [json.loads(line) for line in commit]


def _spark_rows(spark, path: str) -> str:
    return fingerprint(spark.read.format("delta").load(path))


def _duckdb_count(path: str, where: str | None = None) -> int:
    from benchmarks.standard_reader import DuckDBReader

    duck = DuckDBReader()
    try:
        return duck.count(path, where)
    finally:
        duck.close()


def test_rewrite_is_a_delta_optimize_with_no_data_change(delta_spark, table_path):
    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark).repartition(4))
    expected = fingerprint(table.read_files(spark, before.files, before))
    request, staged = _staged_rewrite(spark, table, before)

    committer = committer_for(table, spark)
    assert committer.engine == "delta-spark"
    version = committer.rewrite(request)

    assert version == 1
    commit = table.history(1)[-1]
    assert commit.operation == "OPTIMIZE"
    assert commit.engine and "Apache-Spark" in commit.engine and "Delta-Lake" in commit.engine
    assert commit.deltaopt == {"operation": "OPTIMIZE", "runId": "t1"}
    assert commit.is_deltaopt_optimize
    assert commit.metadata["operationMetrics"]["numRemovedFiles"] == "4"
    assert commit.metadata["operationMetrics"]["numAddedFiles"] == str(len(staged))
    actions = _log_actions(table_path, 1)
    changes = [a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a]
    assert len(changes) == 4 + len(staged) and not any(changes)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path}`").where("version = 1").collect()[0]
    assert history["operation"] == "OPTIMIZE" and history["operationParameters"]["zOrderBy"] == '["id"]'
    # every reader sees the same rows: delta-rs's snapshot, Spark's Delta scan, DuckDB
    after = table.snapshot()
    assert [f.path for f in after.files] == [s.path for s in staged]
    assert fingerprint(table.read_files(spark, after.files, after)) == expected
    assert _spark_rows(spark, table_path) == expected
    assert _duckdb_count(table_path) == 600
    assert _duckdb_count(table_path, "id < 100") == 100


def test_stats_are_the_ones_delta_skips_files_with(delta_spark, table_path):
    """Spark's Delta scan skips the rewritten files with the statistics deltaopt wrote."""
    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark).repartition(3))
    df = table.read_files(spark, before.files, before).repartitionByRange(6, "id")
    staged = table.stage(spark, df, before, "optimize")
    committer_for(table, spark).rewrite(RewriteRequest(before.version, before.files, staged))

    from benchmarks.spark_reader import SparkDeltaReader

    scanned = SparkDeltaReader(spark).scan(table_path, "id < 50", ("name",))
    assert scanned.total == 6 and scanned.files == 1


def test_an_append_by_delta_while_the_rewrite_is_open_lands_too(delta_spark, table_path):
    """Delta's conflict checker lets a concurrent blind append through: both commits land."""
    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 300).repartition(3))
    request, _ = _staged_rewrite(spark, table, before)
    appended = []

    def append(_version):
        sample_frame(spark, 40, start=10_000).coalesce(1).write.format("delta").mode("append").save(table_path)
        appended.append(table.snapshot().version)

    version = committer_for(table, spark).rewrite(request, before_commit=append)

    assert appended == [1] and version == 2
    assert table.snapshot().num_records == 340
    assert spark.read.format("delta").load(table_path).count() == 340
    assert _duckdb_count(table_path) == 340
    assert table.history(2)[-1].metadata["readVersion"] == 0  # planned before the append, committed after


def test_an_append_by_delta_rs_while_the_rewrite_is_open_lands_too(delta_spark, table_path):
    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 300).repartition(3))
    extra = table.stage(spark, sample_frame(spark, 40, start=10_000).coalesce(1), before, "data")
    request, _ = _staged_rewrite(spark, table, before)

    version = committer_for(table, spark).rewrite(
        request, before_commit=lambda _v: table.append(extra, before, {"source": "other-writer"})
    )

    assert version == 2
    assert table.snapshot().num_records == 340
    assert {f.path for f in extra} <= {f.path for f in table.snapshot().files}


@pytest.mark.parametrize("writer", ["delta DELETE", "delta-rs optimize"])
def test_a_concurrent_change_to_a_file_read_aborts_cleanly(delta_spark, table_path, writer):
    """A commit that removed a file the rewrite replaces wins; the rewrite commits nothing and deletes
    what it staged; no row is lost or duplicated."""
    from deltalake import DeltaTable

    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 300).repartition(3))
    request, staged = _staged_rewrite(spark, table, before)

    def change(_version):
        if writer == "delta DELETE":
            spark.sql(f"DELETE FROM delta.`{table_path}` WHERE id < 10")
        else:
            DeltaTable(table_path).optimize.compact()

    with pytest.raises(errors.CommitConflictError, match="nothing was committed"):
        committer_for(table, spark).rewrite(request, before_commit=change)

    assert table.snapshot().version == 1  # only the other writer's commit
    expected = 290 if writer == "delta DELETE" else 300
    assert table.snapshot().num_records == expected
    assert spark.read.format("delta").load(table_path).count() == expected
    assert not any(os.path.exists(os.path.join(table_path, f.path)) for f in staged)


def test_racing_rewrites_through_delta_never_duplicate_rows(delta_spark, table_path):
    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark).repartition(3))
    expected = fingerprint(table.read_files(spark, before.files, before))
    first, _ = _staged_rewrite(spark, table, before, run_id="first")
    second, second_staged = _staged_rewrite(spark, table, before, run_id="second")

    committer = committer_for(table, spark)
    committer.rewrite(first)
    with pytest.raises(errors.CommitConflictError):
        committer.rewrite(second)

    assert table.snapshot().version == 1
    assert _spark_rows(spark, table_path) == expected
    assert not any(os.path.exists(os.path.join(table_path, f.path)) for f in second_staged)


def test_invalid_rewrites_are_refused_before_delta_sees_them(delta_spark, table_path):
    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 100).repartition(2))
    request, staged = _staged_rewrite(spark, table, before)
    committer = committer_for(table, spark)
    ghost = before.files[0].__class__(path="nope.parquet", size=1, num_records=1)

    with pytest.raises(errors.RewriteValidationError, match="not active"):
        committer.rewrite(RewriteRequest(before.version, [ghost], staged))
    assert not any(os.path.exists(os.path.join(table_path, f.path)) for f in staged)  # refused: cleaned up
    request, staged = _staged_rewrite(spark, table, before)
    os.remove(os.path.join(table_path, staged[0].path))
    with pytest.raises(errors.RewriteValidationError, match="does not exist"):
        committer.rewrite(request)
    assert table.snapshot().version == 0


def test_who_commits_where(spark, table_path):
    """Delta's transaction where the session has Delta; Delta's own OPTIMIZE where there is no JVM
    (Spark Connect); delta-rs where asked, or on a JVM without Delta for tables only delta-rs writes."""
    from tests.table.py4j_standins import class_not_found, jvm_failing_lookups

    jvm = jvm_failing_lookups(class_not_found())  # as py4j hands over the JVM's ClassNotFoundException

    class NoJvm:
        conf = spark.conf

    class JvmWithoutDelta(NoJvm):
        _jvm = jvm

    assert commit_engine(None) == "delta-rs"
    assert commit_engine(spark) == "delta-spark"
    assert commit_engine(NoJvm()) == "delta-sql"  # Spark Connect: Delta's own OPTIMIZE on the server
    assert commit_engine(JvmWithoutDelta()) == "delta-rs"
    table = open_table(table_path)
    spark.range(10).write.format("delta").save(table_path)  # written by Spark with Delta
    with pytest.raises(errors.UnsupportedTableError, match=r"Apache-Spark.*spark.commit: delta-rs"):
        committer_for(table, JvmWithoutDelta())  # not beside Delta writers unless the operator says so
    spark.conf.set("spark.deltaopt.commit", "delta-rs")
    try:
        assert commit_engine(NoJvm()) == "delta-rs"
        assert isinstance(committer_for(table, spark), DeltaRsCommitter)  # asked for: allowed
    finally:
        spark.conf.set("spark.deltaopt.commit", "auto")
    spark.conf.set("spark.deltaopt.commit", "delta-spark")
    try:
        with pytest.raises(errors.SparkRuntimeError, match="no Delta engine"):
            commit_engine(JvmWithoutDelta())
    finally:
        spark.conf.set("spark.deltaopt.commit", "auto")


KILLED_JOB = textwrap.dedent(
    """
    import os, signal, sys
    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session
    from optimizer.table import open_table
    from optimizer.table.rewrite import RewriteRequest
    from optimizer.table.rewrite_path import committer_for

    spark = build_session(SparkSettings(master="local[1]", shuffle_partitions=2))
    table = open_table(sys.argv[1])
    snapshot = table.snapshot()
    staged = table.stage(spark, table.read_files(spark, snapshot.files, snapshot).coalesce(1), snapshot, "optimize")
    print("STAGED", len(staged), flush=True)
    committer = committer_for(table, spark)
    request = RewriteRequest(snapshot.version, snapshot.files, staged, {"operation": "OPTIMIZE"})
    committer.rewrite(request, before_commit=lambda _v: os.kill(os.getpid(), signal.SIGKILL))
    """
)


def test_kill_9_between_write_and_commit_leaves_the_table_as_it_was(delta_spark, table_path, tmp_path):
    """The process dies with its files written and its Delta transaction open: the table is unchanged,
    every reader reads it, and the next OPTIMIZE commits."""
    from optimizer.clustering import optimize
    from optimizer.features import FeatureSet, ZFeature

    spark = delta_spark
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark).repartition(4))
    expected = fingerprint(table.read_files(spark, before.files, before))
    script = tmp_path / "killed.py"
    script.write_text(KILLED_JOB)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(script), table_path], cwd=root, capture_output=True, text=True, timeout=300
    )

    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert "STAGED" in done.stdout
    assert [d for d in os.listdir(table_path) if d.startswith("optimize-")]  # written, never committed
    assert table.snapshot().version == 0
    assert _spark_rows(spark, table_path) == expected
    result = optimize(spark, table, FeatureSet(z=(ZFeature("id"),)), 1 << 20)
    assert result.committed_by == "delta-spark" and result.version == 1
    assert _spark_rows(spark, table_path) == expected
    assert _duckdb_count(table_path) == 600
    assert fingerprint(table.read_files(spark, table.snapshot().files, table.snapshot())) == expected


@pytest.mark.parametrize(
    ("uri", "conf", "package", "named"),
    [
        ("/data/t", {}, "org.apache.spark.sql.delta", "local file system"),
        ("hdfs://nn/t", {}, "org.apache.spark.sql.delta", "atomic rename on HDFS"),
        ("abfss://c@a.dfs.core.windows.net/t", {}, "org.apache.spark.sql.delta", "ADLS Gen2"),
        ("gs://b/t", {}, "org.apache.spark.sql.delta", "GCS preconditions"),
        (
            "s3://b/t",
            {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"},  # Delta commits to s3a://
            "org.apache.spark.sql.delta",
            "lock table 'delta_log'",
        ),
        ("s3://b/t", {}, "com.databricks.sql.transaction.tahoe", "Databricks"),
    ],
)
def test_delta_log_stores_that_coordinate_writers(uri, conf, package, named):
    from optimizer.table.deltaspark import delta_commit_safety

    assert named in delta_commit_safety(uri, package, lambda key, default: conf.get(key, default))


@pytest.mark.parametrize("uri", ["s3a://b/t", "s3://b/t", "wasbs://c@a.blob.core.windows.net/t", "foo://x/t"])
def test_delta_log_stores_safe_for_one_driver_only_are_refused(uri):
    from optimizer.table.commit_safety import UnsafeStoreError
    from optimizer.table.deltaspark import delta_commit_safety

    with pytest.raises(UnsafeStoreError, match="nothing was committed"):
        delta_commit_safety(uri, "org.apache.spark.sql.delta", lambda _key, default: default)


def test_a_row_tracking_rewrite_whose_rows_lack_their_ids_is_refused(delta_spark, tmp_path):
    """Row ids are part of a row's identity for Delta's readers: rows read without them (not read for a
    rewrite) are refused before anything is written (the job reads them `for_rewrite`:
    tests/table/test_table_features.py)."""
    spark = delta_spark
    path = str(tmp_path / "tracked")
    sample_frame(spark, 50).createOrReplaceTempView("tracked_rows")
    spark.sql(
        f"CREATE TABLE delta.`{path}` USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true') "
        "AS SELECT * FROM tracked_rows"
    )
    table = open_table(path)
    before = table.snapshot()
    files_before = sorted(p.name for p in Path(path).rglob("*.parquet"))

    with pytest.raises(errors.RewriteValidationError, match="row ids would change"):
        _staged_rewrite(spark, table, before)
    assert table.snapshot().version == before.version
    assert sorted(p.name for p in Path(path).rglob("*.parquet")) == files_before


def test_a_single_driver_log_store_is_allowed_only_where_the_operator_says_no_one_else_writes():
    from optimizer.table.commit_safety import UnsafeStoreError
    from optimizer.table.deltaspark import delta_commit_safety

    default = lambda _key, value: value  # noqa: E731 - no log store configured
    assert "no other writer" in delta_commit_safety("s3a://b/t", "org.apache.spark.sql.delta", default, True)
    with pytest.raises(UnsafeStoreError, match="single_writer: true"):
        delta_commit_safety("s3a://b/t", "org.apache.spark.sql.delta", default, False)
    with pytest.raises(UnsafeStoreError, match="does not know"):  # an unknown store stays refused
        delta_commit_safety("foo://x/t", "org.apache.spark.sql.delta", default, True)
