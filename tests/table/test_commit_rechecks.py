"""A rewrite that lost a race re-checks, before it tries again, everything a retry on the latest version
depends on besides its files: the protocol and table features, the schema, the partition columns, the
properties that change how files are read or written, liquid clustering. Either committer gives up when
one changed (`CommitConflictError`, nothing committed, what it staged deleted): rows are never duplicated,
resurrected, or laid out against the table's promise (no Z-order on a liquid table)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from optimizer import errors
from optimizer.table import open_table
from optimizer.table.deltars_commit import DeltaRsCommitter
from optimizer.table.fingerprint import fingerprint
from optimizer.table.rewrite import RewriteRequest
from optimizer.table.rewrite_path import committer_for

pytestmark = [pytest.mark.spark, pytest.mark.every_change]  # crashes and races: tests/tiers.py keeps them


def _table(spark, path: str) -> None:
    """600 rows in 4 files, written by Delta on Spark (a plain table: protocol 1/2, no features)."""
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT) USING delta")
    frame = spark.range(600).selectExpr("id", "cast(id % 13 as int) k").repartition(4)
    frame.write.format("delta").mode("append").save(path)


def _staged(spark, table, run_id: str) -> tuple[RewriteRequest, list]:
    """Every file compacted into one, Z-ordered by id as far as the history says."""
    snapshot = table.snapshot()
    staged = table.stage(spark, table.read_files(spark, snapshot.files, snapshot).coalesce(1), snapshot, "optimize")
    metadata = {"operation": "OPTIMIZE", "runId": run_id}
    return RewriteRequest(snapshot.version, snapshot.files, staged, metadata, ("id",)), staged


def _once(action: Callable[[], None]) -> Callable[[int], None]:
    """A `before_commit` hook that lands `action` before the first commit attempt only."""
    done: list[int] = []

    def hook(version: int) -> None:
        if not done:
            done.append(version)
            action()

    return hook


def _sql(spark, *statements: str) -> Callable[[], None]:
    """Another writer's statements, run in order through Delta on Spark."""

    def run() -> None:
        for statement in statements:
            spark.sql(statement)

    return run


def _no_deltaopt_commit(table) -> bool:
    return all(not c.deltaopt for c in table.history(0))


def _staged_gone(path: str, staged) -> bool:
    return not any(os.path.exists(os.path.join(path, f.path)) for f in staged)


def test_delta_rs_gives_up_when_deletion_vectors_and_a_delete_land_during_the_rewrite(delta_spark, tmp_path: Path):
    """Item 1 of issue 45: the retry used to see the file with its new deletion vector as unchanged (same
    path and size) and commit a remove without the vector: the old file stayed active beside the rewritten
    one (799 rows) and row 7 came back."""
    spark, path = delta_spark, str(tmp_path / "dv")
    _table(spark, path)
    table = open_table(path)
    request, staged = _staged(spark, table, "rs-dv-delete")
    race = _once(
        _sql(
            spark,
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
            f"DELETE FROM delta.`{path}` WHERE id = 7",
        )
    )

    with pytest.raises(errors.CommitConflictError, match="nothing was committed"):
        DeltaRsCommitter(table).rewrite(request, before_commit=race)

    rows = spark.read.format("delta").load(path)
    assert rows.count() == 599
    assert rows.where("id = 7").count() == 0
    assert _staged_gone(path, staged)
    assert _no_deltaopt_commit(table)


@pytest.mark.parametrize(
    "properties",
    [
        "'delta.enableDeletionVectors' = 'true'",
        "'delta.enableRowTracking' = 'true'",
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name'",
    ],
    ids=["deletion-vectors", "row-tracking", "column-mapping"],
)
def test_delta_rs_gives_up_when_the_protocol_changes_during_the_rewrite(delta_spark, tmp_path: Path, properties):
    """A feature enabled concurrently changes how the table's files must be read or written, which the
    rewrite planned without it cannot honour through delta-rs: it gives up, rows unchanged."""
    spark, path = delta_spark, str(tmp_path / "protocol")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    request, staged = _staged(spark, table, "rs-protocol")
    race = _once(_sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({properties})"))

    with pytest.raises(errors.CommitConflictError, match="changed since version"):
        DeltaRsCommitter(table).rewrite(request, before_commit=race)

    assert fingerprint(spark.read.format("delta").load(path)) == expected
    assert _staged_gone(path, staged)
    assert _no_deltaopt_commit(table)


@pytest.mark.parametrize("when", ["first attempt", "a retry"])
def test_delta_never_commits_a_z_order_on_a_table_clustered_during_the_rewrite(delta_spark, tmp_path: Path, when):
    """Item 6a of issue 45: ALTER TABLE ... CLUSTER BY lands while the rewrite is open (before its first
    commit, or before a retry forced by an unrelated property change). Delta's conflict checker refuses the
    attempt it raced; the retry must not then commit OPTIMIZE zOrderBy on the now-liquid table."""
    spark, path = delta_spark, str(tmp_path / "liquid")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    request, staged = _staged(spark, table, "delta-liquid")
    cluster = f"ALTER TABLE delta.`{path}` CLUSTER BY (k)"
    attempts: list[int] = []

    def race(version: int) -> None:
        attempts.append(version)
        if when == "first attempt" and len(attempts) == 1:
            spark.sql(cluster)
        elif when == "a retry" and len(attempts) == 1:
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('team' = 'sales')")  # forces a retry
        elif when == "a retry" and len(attempts) == 2:
            spark.sql(cluster)

    committer = committer_for(table, spark)
    assert committer.engine == "delta-spark"
    with pytest.raises(errors.CommitConflictError, match="changed since version"):
        committer.rewrite(request, before_commit=race)

    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    clustered_at = next(h["version"] for h in history if h["operation"] == "CLUSTER BY")
    assert not [h for h in history if h["version"] > clustered_at and h["operation"] == "OPTIMIZE"]
    assert _no_deltaopt_commit(table)
    assert fingerprint(spark.read.format("delta").load(path)) == expected
    assert _staged_gone(path, staged)


def test_a_delta_rs_append_refuses_files_staged_for_a_table_that_changed_shape(delta_spark, tmp_path: Path):
    """`DeltaTableHandle.append` commits files staged for `snapshot` at the latest version, where delta-rs's own
    conflict checker starts. A column dropped and added again under column mapping in between gets a new
    physical name: committed anyway, the appended rows' values of it would read as NULL."""
    spark, path = delta_spark, str(tmp_path / "append")
    _table(spark, path)
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
        "('delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')"
    )
    table = open_table(path)
    snapshot = table.snapshot()
    extra = spark.range(1000, 1040).selectExpr("id", "cast(id % 13 as int) k").coalesce(1)
    staged = table.stage(spark, extra, snapshot, "data")
    spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN k")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (k INT)")
    before = table.snapshot().version

    with pytest.raises(errors.CommitConflictError, match="schema"):
        table.append(staged, snapshot, {"source": "other-writer"})

    assert table.snapshot().version == before
    assert spark.read.format("delta").load(path).count() == 600
    assert _staged_gone(path, staged)
