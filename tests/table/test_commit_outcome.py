"""A rewrite's outcome is read from the log, never guessed: a commit that landed before something failed
keeps its files; one that lost to a concurrent change is retried while its files are still there (as
Delta's OPTIMIZE retries) and otherwise gives up having committed nothing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote

import pytest

from optimizer import errors
from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.table import open_table
from optimizer.table.access import commit_of_run
from optimizer.table.fingerprint import fingerprint
from optimizer.table.rewrite import RewriteRequest, outcome_after_failure
from optimizer.table.rewrite_path import committer_for

pytestmark = [pytest.mark.spark, pytest.mark.every_change]  # crashes and races: tests/tiers.py keeps them


def _table(spark, path: str, properties: str = "") -> None:
    props = f"TBLPROPERTIES ({properties})" if properties else ""
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, k INT) USING delta {props}")
    spark.range(600).selectExpr("id", "cast(id % 13 as int) k").repartition(4).write.format("delta").mode(
        "append"
    ).save(path)


def _staged(spark, table, run_id: str):
    snapshot = table.snapshot()
    df = table.read_files(spark, snapshot.files, snapshot).coalesce(1)
    staged = table.stage(spark, df, snapshot, "optimize")
    return RewriteRequest(snapshot.version, snapshot.files, staged, {"operation": "OPTIMIZE", "runId": run_id}), staged


def test_a_post_commit_hook_failure_keeps_the_committed_files(delta_spark, tmp_path: Path):
    """Delta's symlink-manifest hook runs after the commit; a file where its directory should be makes it
    fail (DELTA_POST_COMMIT_HOOK_FAILED). The rewrite is committed: its files stay, the run reports it."""
    spark, path = delta_spark, str(tmp_path / "hooked")
    _table(spark, path, "'delta.compatibility.symlinkFormatManifest.enabled' = 'true'")
    expected = fingerprint(spark.read.format("delta").load(path))
    blocker = Path(path) / "_symlink_format_manifest"
    if blocker.is_dir():
        for child in sorted(blocker.rglob("*"), reverse=True):
            child.unlink() if child.is_file() else child.rmdir()
        blocker.rmdir()
    blocker.write_text("not a directory")  # the hook cannot write its manifest here

    table = open_table(path)
    before = table.snapshot()
    result = optimize(
        delta_spark, table, FeatureSet.from_dict({"z": ["k", "id"]}), 8_000, snapshot=before, files=before.files
    )

    assert result.version == before.version + 1
    after = table.snapshot()
    assert table.history(result.version)[-1].deltaopt["runId"] == result.run_id
    assert all((Path(path) / f.path).exists() for f in after.files)  # nothing the log references was deleted
    assert fingerprint(spark.read.format("delta").load(path)) == expected


def test_a_lost_race_with_a_metadata_change_is_retried_while_the_files_are_there(delta_spark, tmp_path: Path):
    spark, path = delta_spark, str(tmp_path / "retried")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    request, staged = _staged(spark, table, "retry-1")
    raced = []

    def alter_once(_version: int) -> None:
        if not raced:
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('team' = 'sales')")
            raced.append(True)

    version = committer_for(table, spark).rewrite(request, before_commit=alter_once)

    assert version == 3  # v2 is the ALTER; the rewrite committed after it
    assert table.history(3)[-1].deltaopt["runId"] == "retry-1"
    assert [f.path for f in table.snapshot().files] == [f.path for f in staged]
    assert fingerprint(spark.read.format("delta").load(path)) == expected


def test_a_delete_racing_the_rewrite_makes_it_give_up_with_nothing_lost(delta_spark, tmp_path: Path):
    """A DELETE that adds a deletion vector to a file being replaced: rewriting the file's old rows would
    bring deleted rows back, so the rewrite gives up and deletes only what it staged."""
    spark, path = delta_spark, str(tmp_path / "deleted")
    _table(spark, path, "'delta.enableDeletionVectors' = 'true'")
    table = open_table(path)
    request, staged = _staged(spark, table, "raced-by-delete")

    def delete(_version: int) -> None:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 7")

    with pytest.raises(errors.CommitConflictError):
        committer_for(table, spark).rewrite(request, before_commit=delete)

    assert spark.read.format("delta").load(path).count() == 599
    assert spark.read.format("delta").load(path).where("id = 7").count() == 0
    assert not any(os.path.exists(os.path.join(path, f.path)) for f in staged)
    assert all(not c.deltaopt for c in table.history(0))


class _UnreadableLog:
    uri = "/nowhere/table"

    def history(self, since_version: int = 0):
        raise errors.TableAccessError("the log store timed out")


def test_an_outcome_the_log_cannot_tell_keeps_every_file():
    with pytest.raises(errors.CommitOutcomeUnknownError, match="kept"):
        outcome_after_failure(_UnreadableLog(), "run-1", 3, TimeoutError("commit timed out"))  # type: ignore[arg-type]


KILLED_AFTER_COMMIT = textwrap.dedent(
    """
    import os, signal, sys
    from optimizer.clustering.job import optimize
    from optimizer.config import SparkSettings
    from optimizer.features import FeatureSet
    from optimizer.runtime import build_session
    from optimizer.table import deltaspark, open_table

    commit = deltaspark.DeltaSparkCommitter._commit

    def commit_then_die(self, *args, **kwargs):
        version = commit(self, *args, **kwargs)
        print("COMMITTED", version, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # before anything after the commit runs

    deltaspark.DeltaSparkCommitter._commit = commit_then_die
    spark = build_session(SparkSettings(master="local[1]", shuffle_partitions=2))
    table = open_table(sys.argv[1])
    optimize(spark, table, FeatureSet.from_dict({"z": ["k", "id"]}), 8_000, run_id="killed-run")
    """
)


def test_kill_9_right_after_the_commit_leaves_the_run_committed_and_whole(delta_spark, tmp_path: Path):
    """The process dies the moment Delta's commit returns, on a table with deletion vectors, column
    mapping and row tracking: the log has the run (found by its id), every file it references is there,
    rows and row ids are what they were."""
    spark, path = delta_spark, str(tmp_path / "killed")
    _table(
        spark,
        path,
        "'delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'name', "
        "'delta.enableRowTracking' = 'true'",
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")
    frame = spark.read.format("delta").load(path)
    expected = fingerprint(frame)
    ids = sorted(map(tuple, frame.selectExpr("id", "_metadata.row_id").collect()))
    script = tmp_path / "killed.py"
    script.write_text(KILLED_AFTER_COMMIT)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(script), path], cwd=root, capture_output=True, text=True, timeout=400)

    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert "COMMITTED" in done.stdout
    table = open_table(path)
    run = commit_of_run(table.history(0), "killed-run")
    assert run is not None and run.operation == "OPTIMIZE" and run.version == table.snapshot().version
    assert all((Path(path) / unquote(f.path)).exists() for f in table.snapshot().files)
    after = spark.read.format("delta").load(path)
    assert fingerprint(after) == expected
    assert sorted(map(tuple, after.selectExpr("id", "_metadata.row_id").collect())) == ids


def test_an_append_open_across_the_statistics_property_change_fails_and_retries_cleanly(delta_spark, tmp_path: Path):
    """A clustering key past the first 32 columns gets statistics through a property change: a Delta
    append whose transaction was open across it is refused by Delta (a metadata change), as after any
    ALTER TABLE (deploy/OPERATIONS.md); retried, it lands. Nothing is lost and deltaopt's run is whole."""
    from optimizer.table.delta_engine import DeltaEngine

    spark, path = delta_spark, str(tmp_path / "wide")
    columns = [f"id + {i} c{i}" for i in range(40)]
    spark.range(400).selectExpr("id", *columns).repartition(3).write.format("delta").save(path)
    table = open_table(path)
    extra = spark.range(1000, 1050).selectExpr("id", *columns)

    engine = DeltaEngine(spark, path)
    appender = engine.log().startTransaction()  # a writer that read the table before the change
    actions = appender.writeFiles(extra._jdf)
    result = optimize(spark, table, FeatureSet.from_dict({"z": ["c36"]}), 8_000, stats_for_keys=True)
    assert set(result.properties) == {"delta.dataSkippingNumIndexedCols"}  # the change the writer raced
    write = getattr(engine.delta, "DeltaOperations$Write")
    operation = write(engine.jvm.org.apache.spark.sql.SaveMode.Append, engine.none, engine.none, engine.none)
    with pytest.raises(Exception, match=r"MetadataChanged|metadata"):
        appender.commit(actions, operation)
    assert spark.read.format("delta").load(path).count() == 400
    extra.write.format("delta").mode("append").save(path)  # the writer's retry
    assert spark.read.format("delta").load(path).count() == 450
    assert commit_of_run(table.history(0), result.run_id) is not None
    assert all((Path(path) / unquote(f.path)).exists() for f in table.snapshot().files)


def _rows_and_files(spark, path: str):
    """What a reader sees (rows) and whether every file the log references is there."""
    table = open_table(path)
    present = all((Path(path) / unquote(f.path)).exists() for f in table.snapshot().files)
    return fingerprint(spark.read.format("delta").load(path)), present


def test_a_delta_rs_commit_that_landed_but_reported_a_conflict_is_the_runs_commit(
    delta_spark, tmp_path: Path, monkeypatch
):
    """S3's conditional put succeeds, its response is lost, the client's retry gets 412: delta-rs reports
    `CommitFailedError` for a commit that is in the log. The rewrite must find it by its run id and report
    it, not retry, see its own removes as a concurrent change and delete the files its commit added."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    from optimizer.table.deltars_commit import DeltaRsCommitter

    spark, path = delta_spark, str(tmp_path / "lost-response")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    request, staged = _staged(spark, table, "lost-response")
    commit = DeltaTable.create_write_transaction
    calls: list[int] = []

    def commit_then_report_a_conflict(self, *args, **kwargs):
        result = commit(self, *args, **kwargs)
        calls.append(self.version())
        if len(calls) == 1:
            raise CommitFailedError("Transaction failed: version already exists (HTTP 412 on the retried put)")
        return result

    monkeypatch.setattr(DeltaTable, "create_write_transaction", commit_then_report_a_conflict)

    version = DeltaRsCommitter(table).rewrite(request)

    assert version == request.read_version + 1
    assert len(calls) == 1  # no second commit attempt
    assert commit_of_run(table.history(0), "lost-response").version == version
    assert all((Path(path) / f.path).exists() for f in staged)  # nothing the log references was deleted
    assert _rows_and_files(spark, path) == (expected, True)


def test_a_delta_rs_retry_whose_table_read_fails_deletes_only_unlanded_files(delta_spark, tmp_path: Path, monkeypatch):
    """A concurrent append makes the first attempt lose; re-reading the table's files for the retry then
    fails (a raw storage error). The log says the run did not land: the staged files go and the error
    names the table, instead of escaping raw and leaving the files behind."""
    from deltalake import DeltaTable

    from optimizer.table.deltars_commit import DeltaRsCommitter

    spark, path = delta_spark, str(tmp_path / "rs-retry-read")
    _table(spark, path)
    table = open_table(path)
    request, staged = _staged(spark, table, "rs-retry-read")
    read_adds = DeltaTable.get_add_actions
    armed: list[bool] = []

    def failing_after_the_race(self, *args, **kwargs):
        if armed:
            raise OSError("connection reset while listing the log")
        return read_adds(self, *args, **kwargs)

    def append_then_arm(_version: int) -> None:
        if not armed:
            appended = spark.range(900, 910).selectExpr("id", "cast(id % 13 as int) k")
            appended.write.format("delta").mode("append").save(path)
            armed.append(True)

    monkeypatch.setattr(DeltaTable, "get_add_actions", failing_after_the_race)
    with pytest.raises(errors.TableAccessError, match=re.escape(path)):
        DeltaRsCommitter(table).rewrite(request, before_commit=append_then_arm)
    monkeypatch.undo()

    assert not any((Path(path) / f.path).exists() for f in staged)
    assert spark.read.format("delta").load(path).count() == 610
    assert commit_of_run(table.history(0), "rs-retry-read") is None


@pytest.mark.parametrize("failing", ["latest", "_retry_basis"])
def test_a_delta_retry_whose_table_read_fails_deletes_only_unlanded_files(
    delta_spark, tmp_path: Path, monkeypatch, failing
):
    """Delta refuses the first attempt (a concurrent metadata change); reading the latest snapshot, or its
    protocol and metadata, for the retry then fails with a raw error. The log says the run did not land:
    the staged files go and a deltaopt error names the table."""
    from optimizer.table import deltaspark
    from optimizer.table.delta_engine import DeltaEngine

    spark, path = delta_spark, str(tmp_path / f"delta-retry-{failing.strip('_')}")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    request, staged = _staged(spark, table, f"delta-retry-{failing}")
    raced: list[bool] = []

    def alter_once(_version: int) -> None:
        if not raced:
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('team' = 'sales')")
            raced.append(True)

    def unreadable(*_args, **_kwargs):
        raise RuntimeError("py4j: the log store timed out")

    committer = committer_for(table, spark)
    if failing == "latest":
        monkeypatch.setattr(DeltaEngine, "latest", unreadable)
    else:
        original = deltaspark._retry_basis
        monkeypatch.setattr(deltaspark, "_retry_basis", lambda s: unreadable() if raced else original(s))
    with pytest.raises(errors.TableAccessError, match=re.escape(path)):
        committer.rewrite(request, before_commit=alter_once)
    monkeypatch.undo()

    assert not any((Path(path) / f.path).exists() for f in staged)
    assert commit_of_run(table.history(0), f"delta-retry-{failing}") is None
    assert _rows_and_files(spark, path) == (expected, True)


def test_a_delta_rs_commit_error_the_log_does_not_show_keeps_every_file(delta_spark, tmp_path: Path, monkeypatch):
    """A timed-out PUT of the commit: delta-rs raises a storage error and the log read right after shows
    no commit of the run, but the PUT may still land. The outcome is unknown: every staged file stays
    (VACUUM removes them if it never lands), nothing is retried or deleted."""
    from deltalake import DeltaTable

    from optimizer.table.deltars_commit import DeltaRsCommitter

    spark, path = delta_spark, str(tmp_path / "timed-out")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    request, staged = _staged(spark, table, "timed-out")

    def time_out(self, *args, **kwargs):
        raise OSError("PUT _delta_log/00000000000000000002.json: operation timed out")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", time_out)
    with pytest.raises(errors.CommitOutcomeUnknownError, match="kept"):
        DeltaRsCommitter(table).rewrite(request)
    monkeypatch.undo()

    assert all((Path(path) / f.path).exists() for f in staged)  # the late PUT may reference them
    assert commit_of_run(table.history(0), "timed-out") is None
    assert _rows_and_files(spark, path) == (expected, True)


def test_a_delta_rs_commit_landing_after_the_outcome_read_is_the_runs_commit(delta_spark, tmp_path: Path, monkeypatch):
    """The commit reports a conflict (a lost response, then 412) and is not yet in the log when its
    outcome is read; it lands right after. The retry then finds its own removes gone: that is the run's
    commit (found by run id), not a concurrent one, and none of the files it references may go."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    from optimizer.table.deltars_commit import DeltaRsCommitter

    spark, path = delta_spark, str(tmp_path / "late-landing")
    _table(spark, path)
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    request, staged = _staged(spark, table, "late-landing")
    commit, read_history = DeltaTable.create_write_transaction, table.history
    pending: list = []
    commits: list[int] = []

    def report_a_conflict_then_land_later(self, *args, **kwargs):
        commits.append(self.version())
        if len(commits) == 1:
            pending.append(lambda: commit(self, *args, **kwargs))
            raise CommitFailedError("Transaction failed: version already exists (HTTP 412 on the retried put)")
        return commit(self, *args, **kwargs)

    def read_then_land(since_version: int = 0):
        seen = read_history(since_version)
        while pending:
            pending.pop()()  # the lost PUT lands after the outcome read
        return seen

    monkeypatch.setattr(DeltaTable, "create_write_transaction", report_a_conflict_then_land_later)
    monkeypatch.setattr(table, "history", read_then_land)
    version = DeltaRsCommitter(table).rewrite(request)
    monkeypatch.undo()

    assert version == request.read_version + 1
    assert len(commits) == 1  # no second commit attempt
    assert commit_of_run(table.history(0), "late-landing").version == version
    assert all((Path(path) / f.path).exists() for f in staged)  # nothing the log references was deleted
    assert _rows_and_files(spark, path) == (expected, True)


def test_a_delta_rs_rewrite_without_a_run_id_is_refused_before_committing(delta_spark, tmp_path: Path):
    """Without a run id the log cannot tell whether a failed commit landed: refused up front."""
    spark, path = delta_spark, str(tmp_path / "no-run-id")
    _table(spark, path)
    table = open_table(path)
    request, _staged_files = _staged(spark, table, "unused")

    with pytest.raises(errors.RewriteValidationError, match="run id"):
        table.rewrite(request.read_version, request.remove, request.add, {"operation": "OPTIMIZE"})
    assert table.snapshot().version == request.read_version
