"""Liquid tables between a tick's decision and its job (issue 47's leftovers): real Delta commands land in
between, through the seams the service has (the fleet queue holding the job; `DeltaSql.optimize`'s
`before`, right before Delta's OPTIMIZE statement), never through sleeps or racing threads.

* the user's ``ALTER TABLE ... CLUSTER BY``: the job changes nothing (no ALTER back, no OPTIMIZE by keys
  nobody priced), and the record says the keys changed since the decision;
* a DELETE or a MERGE (updates, deletes, inserts) on a table with deletion vectors and row tracking: the
  job commits or gives up cleanly, the rows are the rows the operation left, surviving rows keep their
  row ids, and a TIMESTAMP column reads back the same in two session time zones."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import HTTPServer
from pathlib import Path
from typing import Any

import pytest

from optimizer.service.executors import JobOutcome, OptimizeRequest, optimize_command
from optimizer.table.delta_sql import DeltaSql
from optimizer.table.rewrite_path import Capabilities
from optimizer.verdict import Verdict
from tests.clusters.servers import JsonHandler
from tests.service.test_liquid_tick import keys, liquid_table, operations, service_ctx
from tests.service.test_service import NOW
from tests.session_conf import session_conf

pytestmark = [pytest.mark.spark, pytest.mark.every_change]  # crashes and races: tests/tiers.py keeps them
ZONES = ("UTC", "America/Los_Angeles")


def decided_and_held(spark, tmp_path: Path, path: str, liquid: str, **thresholds):  # type: ignore[no-untyped-def]
    """A tick's decision on the table at `path`, its job queued and not started; (context, record)."""
    from optimizer.service.tick import tick

    ctx = service_ctx(spark, tmp_path, path, liquid, **thresholds)
    with ctx.queue.held():  # decided and queued, not started
        decided = tick(ctx.config.tables[0], ctx, NOW)
    assert decided.action is Verdict.DEFERRED, decided.reason
    return ctx, decided


@pytest.mark.parametrize(
    ("table_keys", "user_keys", "operation"),
    [(["x"], ["id"], "CLUSTERING"), (["id"], ["pad"], "AUTO_CLUSTERING_COLUMN_SELECTION")],
    ids=["clustering", "key-change"],
)
def test_keys_the_user_changed_after_the_decision_are_kept_and_nothing_runs(
    spark, tmp_path: Path, table_keys: list[str], user_keys: list[str], operation: str
):
    """`liquid: set`: a CLUSTERING job (the workload wants the table's keys) and a key change (it wants x
    over id) are decided and queued; the user clusters the table by other keys before the job starts."""
    path = str(tmp_path / "events")
    liquid_table(spark, path, table_keys[0])
    ctx, decided = decided_and_held(spark, tmp_path, path, "set", liquid_key_ticks=1, liquid_key_margin=0.0)
    section = decided.as_dict()["liquid"]
    assert section["operation"] == operation and section["keys"] == table_keys, decided.reason
    spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY ({user_keys[0]})")  # the user's choice meanwhile
    committed = operations(spark, path)

    started = ctx.queue.dispatch(NOW).records["events"]

    assert keys(spark, path) == user_keys
    assert operations(spark, path) == committed, "the job committed after the user changed the keys"
    assert started.action is Verdict.SKIP and started.job is None, started.reason
    said = f"the clustering keys of {path} changed from ({table_keys[0]}) to ({user_keys[0]}) since the decision"
    assert f"{said}; nothing was run" in started.reason
    assert ctx.decisions.read("events")[-1]["reason"] == started.reason


class RemoteStandIn:
    """What a remote executor runs on a cluster, the CLI's optimize with the request's arguments (here
    in-process on the test session), and how it reads a failing run: by its exit status and last line
    (`remote.remote_failure`). Its session is a Databricks classic cluster's: deltaopt beside the
    cluster's Delta, not SQL only (the test session has Delta too)."""

    name = "remote"
    capabilities = Capabilities.databricks(serverless=False)

    def __init__(self, capsys) -> None:  # type: ignore[no-untyped-def]
        self.capsys = capsys

    def run(self, request: OptimizeRequest) -> JobOutcome:
        from optimizer.cli.main import main
        from optimizer.service.remote import remote_failure

        status = main(optimize_command(request))
        if status != 0:
            raise remote_failure("the stand-in", status, self.capsys.readouterr().err)
        return JobOutcome(self.name, None)


def test_a_remote_key_change_keeps_the_keys_the_user_changed_after_the_decision(spark, tmp_path: Path, capsys):
    """The same key change run by a remote cluster (``deltaopt optimize`` with the request's arguments):
    the decision's keys go with the command, and the run changes nothing."""
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    liquid_table(spark, path, "id")
    ctx = service_ctx(spark, tmp_path, path, "set", liquid_key_ticks=1, liquid_key_margin=0.0)
    ctx.choose = lambda table, commits: (RemoteStandIn(capsys), "test")
    with ctx.queue.held():
        decided = tick(ctx.config.tables[0], ctx, NOW)
    assert decided.as_dict()["liquid"]["operation"] == "AUTO_CLUSTERING_COLUMN_SELECTION", decided.reason
    spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (pad)")
    committed = operations(spark, path)

    started = ctx.queue.dispatch(NOW).records["events"]

    assert keys(spark, path) == ["pad"] and operations(spark, path) == committed
    assert started.action is Verdict.SKIP and started.job is None, started.reason  # as in-process: nothing run
    said = f"the clustering keys of {path} changed from (id) to (pad) since the decision; nothing was run"
    assert started.reason.endswith(f"; {said}"), started.reason


class FailedRunsApi(JsonHandler):
    """A Jobs API that takes every run and reports it FAILED, as Databricks reports a task that exited
    with any non-zero status: the refusal of a run whose keys changed reads no different."""

    def do_POST(self) -> None:
        self.body()
        self.reply({"run_id": 7})

    def do_GET(self) -> None:
        failed = {"life_cycle_state": "TERMINATED", "result_state": "FAILED", "state_message": "Workload failed"}
        self.reply({"state": failed})


@pytest.fixture
def failing_databricks() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), FailedRunsApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("user_changes_keys", [True, False], ids=["keys-changed", "run-failed"])
def test_a_failed_databricks_run_reads_as_the_user_s_key_change_only_where_the_history_has_one(
    spark, tmp_path: Path, failing_databricks: str, user_changes_keys: bool
):
    """A key change decided and queued, run on Databricks, whose run ends FAILED: where the user clustered
    the table by other keys meanwhile (a CLUSTER BY in the history that is not the run's), the record is
    SKIP as in-process and through Connect; otherwise the run's failure is an ERROR."""
    from optimizer.config import DatabricksSettings
    from optimizer.service.remote import DatabricksExecutor
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    liquid_table(spark, path, "id")
    ctx = service_ctx(spark, tmp_path, path, "set", liquid_key_ticks=1, liquid_key_margin=0.0)
    settings = DatabricksSettings(python_wheel="dbfs:/deltaopt.whl", existing_cluster_id="c1", poll_interval=0.01)
    environ = {"DATABRICKS_HOST": failing_databricks, "DATABRICKS_TOKEN": "t"}
    ctx.choose = lambda table, commits: (DatabricksExecutor(settings, "c1", environ), "test")
    with ctx.queue.held():
        decided = tick(ctx.config.tables[0], ctx, NOW)
    assert decided.as_dict()["liquid"]["operation"] == "AUTO_CLUSTERING_COLUMN_SELECTION", decided.reason
    if user_changes_keys:
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (pad)")

    started = ctx.queue.dispatch(NOW).records["events"]

    failed = "Databricks run 7 ended FAILED: Workload failed"
    if user_changes_keys:
        assert started.action is Verdict.SKIP and started.job is None, started.reason
        said = f"the clustering keys of {path} changed from (id) to (pad) since the decision; nothing was run"
        assert started.reason.endswith(f"; {said} ({failed})"), started.reason
    else:
        assert started.action is Verdict.ERROR and failed in started.reason, started.reason
    assert ctx.decisions.read("events")[-1]["action"] == started.action.value


def test_only_a_cluster_by_that_is_not_the_run_s_and_sets_other_keys_is_the_user_s_change(spark, tmp_path: Path):
    """Read from the history: the run's own CLUSTER BY (tagged with its run, as `DeltaSql` tags it) and one
    setting the decided keys again are no refusal; a run that committed anything is not "nothing run"."""
    from optimizer.clustering.by_delta import keys_changed_since
    from optimizer.table import open_table
    from optimizer.table.access import CUSTOM_METADATA_KEY
    from optimizer.table.delta_sql import USER_METADATA_CONF

    path = str(tmp_path / "events")
    liquid_table(spark, path, "id")
    start = open_table(path).snapshot().version

    def refusal(decided: tuple[str, ...], run: str = "r1") -> str | None:
        found = keys_changed_since(open_table(path).history(start + 1), decided, run, uri=path, failure="failed")
        return str(found) if found is not None else None

    assert refusal(("id",)) is None  # no CLUSTER BY since the decision
    with session_conf(spark, USER_METADATA_CONF, json.dumps({CUSTOM_METADATA_KEY: {"runId": "r1"}})):
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (pad)")  # the run's own key change
    assert refusal(("id",)) is None
    assert refusal(("id",), run="r2") == (
        f"the clustering keys of {path} changed from (id) to (pad) since the decision; nothing was run (failed)"
    )
    spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (ID)")  # the user's, back to the decided keys
    assert refusal(("id",), run="r2") is None


def dv_liquid_table(spark, path: str) -> None:  # type: ignore[no-untyped-def]
    """A table clustered by x with deletion vectors, row tracking and a TIMESTAMP column: two appends of
    10,000 rows in 3 files each."""
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, x BIGINT, ts TIMESTAMP, pad STRING) USING delta CLUSTER BY (x) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true')"
    )
    for batch in range(2):
        rows = spark.range(batch * 10_000, (batch + 1) * 10_000).selectExpr(
            "id",
            "(id * 7919) % 1000 x",
            "timestamp_seconds(1700000000 + id * 3607) ts",
            "sha2(cast(id as string), 256) pad",
        )
        rows.repartition(3).write.format("delta").mode("append").save(path)


OPERATIONS = {
    "DELETE": "DELETE FROM delta.`{path}` WHERE id % 5 = 0",
    "MERGE": (
        "MERGE INTO delta.`{path}` t USING (SELECT id, (id * 7919) % 1000 x, timestamp_seconds(1600000000 + id * 61) "
        "ts, 'merged' pad FROM range(19000, 21000)) s ON t.id = s.id WHEN MATCHED AND s.id % 3 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.ts = s.ts, t.pad = s.pad WHEN NOT MATCHED THEN INSERT *"
    ),
}


def table_facts(spark, path: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """What must not change: count and order-insensitive hash of the rows, every row's id -> row id, and
    per session time zone a hash of the TIMESTAMP column as that zone renders it."""
    from pyspark.sql import functions as F

    frame = spark.read.format("delta").load(path)
    row = frame.agg(F.count("*"), F.sum(F.xxhash64("*"))).collect()[0]
    facts: dict[str, Any] = {"rows": (int(row[0]), int(row[1]))}
    facts["row_ids"] = {r[0]: r[1] for r in frame.select("id", "_metadata.row_id").collect()}
    for zone in ZONES:
        with session_conf(spark, "spark.sql.session.timeZone", zone):
            rendered = spark.read.format("delta").load(path).selectExpr("xxhash64(id, cast(ts as string)) h")
            facts[zone] = int(rendered.agg(F.sum("h")).collect()[0][0])
    return facts


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_dml_landing_right_before_delta_s_optimize_keeps_rows_row_ids_and_timestamps(
    spark, tmp_path: Path, monkeypatch, operation: str
):
    path = str(tmp_path / "events")
    dv_liquid_table(spark, path)
    ctx, decided = decided_and_held(spark, tmp_path, path, "keep")
    assert decided.as_dict()["liquid"]["operation"] == "CLUSTERING", decided.reason
    other = spark.newSession()  # the other writer: its own session, none of the job's settings
    expected: list[dict[str, Any]] = []
    original = DeltaSql.optimize

    def dml_first(self, zorder_by, tag, before=lambda: None, **kwargs):  # type: ignore[no-untyped-def]
        def land() -> None:  # right before the statement, under the job's commit lock
            other.sql(OPERATIONS[operation].format(path=path))
            expected.append(table_facts(other, path))
            before()

        return original(self, zorder_by, tag, land, **kwargs)

    monkeypatch.setattr(DeltaSql, "optimize", dml_first)

    started = ctx.queue.dispatch(NOW).records["events"]

    assert expected, "the operation did not land before Delta's OPTIMIZE"
    history = operations(spark, path)
    assert operation in history, history
    if started.action is Verdict.OPTIMIZE:  # committed after the operation, on the version it left
        assert history[-1] == "OPTIMIZE" and history[-2] == operation, history
        assert started.job is not None and started.job.outcome is not None and started.job.outcome.version
    else:  # gave up: nothing committed after the operation, and the record says why
        assert history[-1] == operation and started.reason, started.reason
    after = table_facts(spark, path)
    assert after["rows"] == expected[0]["rows"]
    assert after["row_ids"] == expected[0]["row_ids"], "a surviving row's row id changed"
    assert after[ZONES[0]] == expected[0][ZONES[0]] and after[ZONES[1]] == expected[0][ZONES[1]]
    assert after[ZONES[0]] != after[ZONES[1]], "both zones rendered the timestamps alike: no zone was applied"
    assert ctx.decisions.read("events")[-1]["reason"] == started.reason
    assert ctx.state.load("events").run is None, "the job left a run in progress behind"


class Committer:
    """A stand-in for `DeltaSqlCommitter` as `_liquid_keys` uses it: the table's keys, and what was set."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        from types import SimpleNamespace

        self.keys, self.set = keys, []
        self.table = SimpleNamespace(uri="mem://events")

    def clustering_columns(self) -> tuple[str, ...]:
        return self.keys

    def set_clustering(self, keys) -> None:  # type: ignore[no-untyped-def]
        self.set.append(list(keys))


@pytest.mark.parametrize("decided", [("X",), None], ids=["decided-other-case", "no-decision"])
def test_the_decided_keys_compare_case_insensitively_and_a_manual_run_compares_none(decided):
    """Keys named in another case are the same keys (as `_liquid_keys` compares them); without a decision
    (``deltaopt optimize`` by hand) nothing is compared: `set` changes the keys as before."""
    from optimizer.clustering.by_delta import _liquid_keys
    from optimizer.clustering.result import DeltaCommandResult

    committer = Committer(("x",))
    done = _liquid_keys(committer, DeltaCommandResult(keys=["id"], not_applied=[], clustered=True), "set", decided)

    assert committer.set == [["id"]] and done.keys_before == ["x"] and done.keys_changed


def test_keys_changed_since_the_decision_raise_before_any_command():
    from optimizer.clustering.by_delta import KeysChangedError, _liquid_keys
    from optimizer.clustering.result import DeltaCommandResult

    committer = Committer(("id",))
    with pytest.raises(KeysChangedError, match=r"changed from \(x\) to \(id\) since the decision; nothing was run"):
        _liquid_keys(committer, DeltaCommandResult(keys=["x"], not_applied=[], clustered=True), "set", ("x",))
    assert committer.set == []


@pytest.mark.parametrize(
    ("status", "stderr", "kind"),
    [
        (
            4,
            "deltaopt: error: the clustering keys of t changed from (a) to (b) since the decision; nothing was run",
            "keys",
        ),
        (2, "deltaopt: error: CommitConflictError: a concurrent commit touched the files", "conflict"),
        (2, "deltaopt: error: table t does not exist", "failed"),
        (3, "deltaopt: Spark failed: java.lang.OutOfMemoryError", "failed"),
    ],
)
def test_a_remote_run_s_exit_status_says_whether_keys_changed_a_commit_lost_or_the_run_failed(status, stderr, kind):
    from optimizer.clustering.by_delta import KeysChangedError
    from optimizer.errors import CommitConflictError, JobSubmissionError
    from optimizer.service.remote import remote_failure

    error = remote_failure("sc://cluster", status, f"some log line\n{stderr}\n")

    expected = {"keys": KeysChangedError, "conflict": CommitConflictError, "failed": JobSubmissionError}[kind]
    assert type(error) is expected
    if kind == "keys":  # the record reads as the in-process refusal, without the CLI's prefix
        assert str(error) == "the clustering keys of t changed from (a) to (b) since the decision; nothing was run"
    else:
        assert stderr in str(error)
