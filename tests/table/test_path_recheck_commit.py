"""A table made liquid (``ALTER TABLE ... CLUSTER BY``) after its rewrite path was chosen is refused at
commit by each committer, on the snapshot it commits: nothing committed, rows unchanged, what was staged
deleted (issue 50, the liquid race). Delta 4.0 cannot drop a table's clustering, so "no longer liquid" is
the pure re-check of tests/table/test_rewrite_path.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from optimizer import errors
from optimizer.table import open_table
from optimizer.table.delta_sql_commit import DeltaSqlCommitter
from optimizer.table.deltars_commit import DeltaRsCommitter
from optimizer.table.fingerprint import fingerprint
from optimizer.table.rewrite import DeltaOptimize, RewriteRequest
from optimizer.table.rewrite_path import Capabilities, LaidOutBy, choose_path, open_path

pytestmark = [pytest.mark.spark, pytest.mark.every_change]  # crashes and races: tests/tiers.py keeps them

MOVED = "became liquid-clustered.*nothing was committed"


def _table(spark, path: str) -> None:
    """600 rows in 4 files, written by Delta on Spark (a plain table)."""
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT) USING delta")
    frame = spark.range(600).selectExpr("id", "cast(id % 13 as int) k").repartition(4)
    frame.write.format("delta").mode("append").save(path)


def _cluster(spark, path: str) -> None:
    spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (k)")


def _staged(spark, table, run_id: str) -> tuple[RewriteRequest, list]:
    """Every file of the latest version compacted into one, Z-ordered by id as far as the history says."""
    snapshot = table.snapshot()
    staged = table.stage(spark, table.read_files(spark, snapshot.files, snapshot).coalesce(1), snapshot, "optimize")
    metadata = {"operation": "OPTIMIZE", "runId": run_id}
    return RewriteRequest(snapshot.version, snapshot.files, staged, metadata, ("id",)), staged


def _unchanged_since_clustering(spark, path: str, expected) -> None:
    """No OPTIMIZE after the CLUSTER BY, no deltaopt commit, the same rows (count and two hashes)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    clustered_at = next(h["version"] for h in history if h["operation"] == "CLUSTER BY")
    assert [h["operation"] for h in history if h["version"] > clustered_at] == []
    assert all(not c.deltaopt for c in open_table(path).history(0))
    assert fingerprint(spark.read.format("delta").load(path)) == expected


def _staged_gone(path: str, staged) -> bool:
    return not any(os.path.exists(os.path.join(path, f.path)) for f in staged)


def test_delta_spark_refuses_a_layout_of_a_table_made_liquid_after_the_path_was_chosen(delta_spark, tmp_path: Path):
    """The path is chosen on one version, the run commits files staged on a later one (as after the run's
    own key-statistics property change): the CLUSTER BY in between is no conflict for Delta's checker, as
    the transaction reads the clustered version; the re-check refuses deltaopt's layout there."""
    spark, path = delta_spark, str(tmp_path / "spark")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    opened = open_path(spark, table)
    assert (opened.path.engine, opened.path.laid_out_by) == ("delta-spark", LaidOutBy.DELTAOPT)
    _cluster(spark, path)
    request, staged = _staged(spark, table, "spark-made-liquid")

    with pytest.raises(errors.CommitConflictError, match=MOVED):
        opened.committer.rewrite(request)

    _unchanged_since_clustering(spark, path, expected)
    assert _staged_gone(path, staged)


def test_delta_sql_refuses_a_zorder_of_a_table_made_liquid_after_the_path_was_chosen(delta_spark, tmp_path: Path):
    """A SQL-only path (Delta's OPTIMIZE ZORDER BY) chosen on a plain table, committed in a JVM session
    after the table became liquid: refused right before Delta's statement, which is never run."""
    spark, path = delta_spark, str(tmp_path / "sql")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    planned = table.snapshot()
    chosen = choose_path(Capabilities.connect(), planned.features, liquid="keep", uri=path, version=planned.version)
    assert chosen.laid_out_by is LaidOutBy.DELTA_ZORDER
    committer = DeltaSqlCommitter(spark, table, chosen, chosen.engine)
    _cluster(spark, path)

    with pytest.raises(errors.CommitConflictError, match=MOVED):
        committer.optimize(DeltaOptimize(planned.version, {"runId": "sql-made-liquid"}, ("id",)))

    _unchanged_since_clustering(spark, path, expected)


def test_delta_rs_refuses_a_layout_of_a_table_made_liquid_during_the_commit(delta_spark, tmp_path: Path):
    """delta-rs (the path of a process without a session) with the CLUSTER BY landing right before its
    commit: the retry sees the table liquid and gives up. The retry basis and delta-rs's own check of
    the table it commits to refuse this too; the re-check keeps the path's own reason."""
    spark, path = delta_spark, str(tmp_path / "rs")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    planned = table.snapshot()
    chosen = choose_path(
        Capabilities.of_session(None), planned.features, liquid="keep", uri=path, version=planned.version
    )
    assert (chosen.engine, chosen.laid_out_by) == ("delta-rs", LaidOutBy.DELTAOPT)
    request, staged = _staged(spark, table, "rs-made-liquid")
    landed: list[int] = []

    def race(version: int) -> None:
        if not landed:
            landed.append(version)
            _cluster(spark, path)

    with pytest.raises(errors.DeltaOptError, match=r"nothing was (committed|changed)"):
        DeltaRsCommitter(table, chosen).rewrite(request, before_commit=race)

    _unchanged_since_clustering(spark, path, expected)
    assert _staged_gone(path, staged)
