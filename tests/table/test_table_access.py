"""Table access: create, append, statistics, history, rewrite, racing rewrites, refused rewrites."""

from __future__ import annotations

import datetime as dt
import os
import threading
from decimal import Decimal

import pytest

from optimizer import errors
from optimizer.table import open_table
from optimizer.table.fingerprint import fingerprint

pytestmark = pytest.mark.spark


def sample_frame(spark, rows: int = 600, start: int = 0):
    from pyspark.sql import functions as F

    return (
        spark.range(start, start + rows)
        .withColumn("day", F.expr("date_add(date'2024-01-01', cast(id % 97 as int))"))
        .withColumn("name", F.expr("concat('n', lpad(cast(id as string), 5, '0'))"))
        .withColumn("price", F.expr("cast(id / 7 as decimal(15,2))"))
        .withColumn("ratio", F.expr("case when id % 50 = 7 then double('NaN') else id / 3.0 end"))
        .withColumn("at", F.expr("timestamp_micros(id * 1000001)"))
        .withColumn("maybe", F.expr("case when id % 3 = 0 then null else id end"))
    )


def test_create_records_exact_statistics(spark, table_path):
    df = sample_frame(spark).repartition(3)
    snapshot = open_table(table_path).create(spark, df)

    assert snapshot.version == 0
    assert len(snapshot.files) == 3
    assert snapshot.num_records == 600
    rows = {r["file"]: r for r in _per_file_truth(spark, table_path, snapshot)}
    for f in snapshot.files:
        truth = rows[f.path]
        assert f.num_records == truth["n"]
        assert f.min_values["id"] == truth["min_id"] and f.max_values["id"] == truth["max_id"]
        assert f.min_values["day"] == truth["min_day"] and f.max_values["day"] == truth["max_day"]
        assert f.min_values["price"] == truth["min_price"]  # exact decimal, no float rounding
        assert f.null_counts["maybe"] == truth["nulls"]
        if truth["has_nan"]:
            assert "ratio" not in f.max_values  # NaN sorts above every number: no sound maximum
        # timestamps are stored with millisecond precision: max rounds up, min rounds down
        assert f.min_values["at"] <= truth["min_at"] and f.max_values["at"] >= truth["max_at"]


def _per_file_truth(spark, table_path, snapshot):
    from pyspark.sql import functions as F

    uris = [f"{table_path}/{f.path}" for f in snapshot.files]
    df = spark.read.parquet(*uris).withColumn("file", F.col("_metadata.file_path"))
    rows = (
        df.groupBy("file")
        .agg(
            F.count("*").alias("n"),
            F.min("id").alias("min_id"),
            F.max("id").alias("max_id"),
            F.min("day").alias("min_day"),
            F.max("day").alias("max_day"),
            F.min("price").alias("min_price"),
            F.sum(F.when(F.col("maybe").isNull(), 1).otherwise(0)).alias("nulls"),
            F.max(F.isnan("ratio").cast("int")).alias("has_nan"),
            F.min("at").alias("min_at"),
            F.max("at").alias("max_at"),
        )
        .collect()
    )
    out = []
    for r in rows:
        d = r.asDict()
        d["file"] = d["file"].split(table_path.rstrip("/") + "/", 1)[1]
        # Python datetimes from Spark are naive local times; compare in UTC
        for key in ("min_at", "max_at"):
            d[key] = d[key].astimezone(dt.UTC)
        assert isinstance(d["min_price"], Decimal)
        out.append(d)
    return out


def test_append_history_and_files_added_since(spark, table_path):
    table = open_table(table_path)
    first = table.create(spark, sample_frame(spark, 100).coalesce(1))
    staged = table.stage(spark, sample_frame(spark, 50, start=100).coalesce(1), first, "data")
    version = table.append(staged, first, {"source": "unit-test"})

    assert version == 1
    added = table.files_added_since(0)
    assert [f.path for f in added] == [s.path for s in staged]
    history = table.history()
    assert [c.version for c in history] == [0, 1]
    assert history[1].operation == "WRITE"
    assert history[1].metadata["deltaopt"] == {"source": "unit-test"}
    assert history[1].engine and history[1].engine.startswith("delta-rs")
    assert table.snapshot().num_records == 150


def _rewrite_all(spark, table, snapshot, **kwargs):
    """Compact every file of `snapshot` into one: a layout rewrite."""
    df = table.read_files(spark, snapshot.files, snapshot).coalesce(1)
    staged = table.stage(spark, df, snapshot, "optimize")
    metadata = {"operation": "OPTIMIZE", "runId": f"rewrite-{os.urandom(6).hex()}"}  # one per rewrite: races
    return staged, lambda: table.rewrite(snapshot.version, snapshot.files, staged, metadata, **kwargs)


def test_rewrite_preserves_rows_and_commits_without_data_change(spark, table_path):
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark).repartition(4))
    expected = fingerprint(table.read_files(spark, before.files, before))

    staged, commit = _rewrite_all(spark, table, before)
    version = commit()

    after = table.snapshot()
    assert version == after.version == 1
    assert [f.path for f in after.files] == [s.path for s in staged]
    assert fingerprint(table.read_files(spark, after.files, after)) == expected
    log = sorted(os.listdir(os.path.join(table_path, "_delta_log")))[-1]
    with open(os.path.join(table_path, "_delta_log", log)) as commit:
        text = commit.read()
    assert '"dataChange":true' not in text.replace(" ", "")


@pytest.mark.every_change
def test_racing_rewrites_never_duplicate_rows(spark, table_path):
    """Two rewrites planned on the same snapshot: one commits, the other gives up; rows unchanged."""
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark).repartition(3))
    expected = fingerprint(table.read_files(spark, before.files, before))
    _, first = _rewrite_all(spark, table, before)
    second_staged, second = _rewrite_all(spark, table, before)

    first()
    with pytest.raises(errors.CommitConflictError):
        second()

    after = table.snapshot()
    assert after.version == 1
    assert fingerprint(table.read_files(spark, after.files, after)) == expected
    for f in second_staged:  # the loser cleaned up what it staged
        assert not os.path.exists(os.path.join(table_path, f.path))


@pytest.mark.every_change
def test_racing_rewrites_in_threads(spark, table_path):
    """The same race with real concurrency: both commit attempts start from one version."""
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark).repartition(3))
    expected = fingerprint(table.read_files(spark, before.files, before))
    commits = [_rewrite_all(spark, table, before)[1] for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def run(commit):
        try:
            outcomes.append(commit())
        except errors.CommitConflictError as err:
            outcomes.append(err)

    def racing(commit):
        def go():
            barrier.wait()
            return commit()

        return go

    threads = [threading.Thread(target=run, args=(racing(c),)) for c in commits]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(type(o).__name__ for o in outcomes) == ["CommitConflictError", "int"]
    after = table.snapshot()
    assert fingerprint(table.read_files(spark, after.files, after)) == expected


@pytest.mark.every_change
def test_rewrite_survives_a_concurrent_append(spark, table_path):
    """An append lands between planning and committing: the rewrite re-checks and commits after it."""
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 300).repartition(3))
    extra = table.stage(spark, sample_frame(spark, 40, start=10_000).coalesce(1), before, "data")
    appended = []

    def append_once(version):
        if not appended:
            appended.append(table.append(extra, before, {"source": "other-writer"}))

    _, commit = _rewrite_all(spark, table, before, before_commit=append_once)
    version = commit()

    assert appended == [1] and version == 2
    after = table.snapshot()
    assert after.num_records == 340
    assert {f.path for f in extra} <= {f.path for f in after.files}


def test_rewrite_refuses_missing_staged_file(spark, table_path):
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 100).repartition(2))
    staged, commit = _rewrite_all(spark, table, before)
    os.remove(os.path.join(table_path, staged[0].path))

    with pytest.raises(errors.RewriteValidationError, match="does not exist"):
        commit()
    assert table.snapshot().version == 0


def test_rewrite_refuses_inactive_file(spark, table_path):
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 100).repartition(2))
    staged, _ = _rewrite_all(spark, table, before)
    ghost = before.files[0].__class__(path="nope.parquet", size=1, num_records=1)

    with pytest.raises(errors.RewriteValidationError, match="not active"):
        table.rewrite(before.version, [ghost], staged, {"runId": "ghost"})
    assert table.snapshot().version == 0


def test_stage_refuses_wrong_schema(spark, table_path):
    table = open_table(table_path)
    before = table.create(spark, sample_frame(spark, 50).coalesce(1))
    with pytest.raises(errors.RewriteValidationError, match="schema"):
        table.stage(spark, sample_frame(spark, 5).drop("name"), before, "optimize")


def test_missing_table_is_a_clear_error(tmp_path):
    table = open_table(str(tmp_path / "nothing-here"))
    assert not table.exists()
    with pytest.raises(errors.TableNotFoundError, match="no Delta table"):
        table.snapshot()


def test_deletion_vector_tables_are_read_only_through_delta(tmp_path):
    """The log of a table with deletion vectors reads (statistics, features) without any engine; its
    rows only through Delta's reader: without one, reading them is refused in one line."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from optimizer.table.protocol import check_readable

    path = str(tmp_path / "dv")
    write_deltalake(
        path,
        pa.table({"x": [1, 2]}),
        configuration={"delta.enableDeletionVectors": "true"},
    )
    snapshot = open_table(path).snapshot()
    assert snapshot.features.deletion_vectors and snapshot.features.needs_delta_reader
    assert snapshot.files[0].min_values == {"x": 1}
    with pytest.raises(errors.UnsupportedTableError, match=r"deletionVectors.*no Delta engine") as refused:
        check_readable(snapshot.features, path, delta_engine=False)
    assert "\n" not in str(refused.value)
    check_readable(snapshot.features, path, delta_engine=True)


@pytest.mark.parametrize(
    ("uri", "options", "mechanism"),
    [
        ("/data/t", {}, "local file system"),
        ("file:///data/t", {}, "local file system"),
        ("abfss://c@acct.dfs.core.windows.net/t", {}, "Azure conditional put"),
        ("gs://bucket/t", {}, "GCS preconditions"),
        ("s3://bucket/t", {"conditional_put": "etag"}, "S3 conditional put (etag"),
        ("s3a://bucket/t", {"AWS_CONDITIONAL_PUT": "etag"}, "S3 conditional put (etag"),
    ],
)
def test_stores_whose_commits_are_atomic_for_every_writer(uri, options, mechanism):
    from optimizer.table.commit_safety import check_commit_safety

    assert mechanism in check_commit_safety(uri, options, environ={})


@pytest.mark.parametrize(
    ("uri", "options", "environ", "named"),
    [
        ("s3://bucket/t", {}, {}, "AWS_CONDITIONAL_PUT=etag"),
        ("s3://bucket/t", {"AWS_S3_LOCKING_PROVIDER": "dynamodb"}, {}, "has no effect in delta-rs"),
        ("s3://bucket/t", {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}, {}, "AWS_S3_ALLOW_UNSAFE_RENAME=true"),
        ("s3://bucket/t", {}, {"AWS_S3_ALLOW_UNSAFE_RENAME": "TRUE"}, "AWS_S3_ALLOW_UNSAFE_RENAME=true"),
        ("s3://bucket/t", {"AWS_S3_ALLOW_UNSAFE_RENAME": "true", "AWS_S3_LOCKING_PROVIDER": "dynamodb"}, {}, "UNSAFE"),
        ("ftp://host/t", {}, {}, "'ftp://'"),
    ],
)
def test_unsafely_configured_stores_are_refused_naming_the_setting(uri, options, environ, named):
    from optimizer.table.commit_safety import UnsafeStoreError, check_commit_safety

    with pytest.raises(UnsafeStoreError, match=named):
        check_commit_safety(uri, options, environ=environ)


def test_optimize_refuses_an_unsafe_store_before_any_work(monkeypatch):
    """No snapshot is read and nothing is written: the refusal comes first."""
    from optimizer.clustering import optimize
    from optimizer.features import FeatureSet, ZFeature
    from optimizer.table import open_table
    from optimizer.table.commit_safety import UnsafeStoreError

    monkeypatch.delenv("AWS_S3_LOCKING_PROVIDER", raising=False)
    table = open_table("s3://no-such-bucket/t", {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"})
    with pytest.raises(UnsafeStoreError, match="AWS_S3_ALLOW_UNSAFE_RENAME"):
        optimize(None, table, FeatureSet(z=(ZFeature("x"),)), 1 << 20)  # type: ignore[arg-type]
