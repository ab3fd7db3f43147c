"""The service: ticks, decisions, state across restarts, executors, and the real `deltaopt serve`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from costmodel.cost import CostModel
from optimizer.config import DatabricksSettings, ExecutionSettings, SparkSettings, parse_config
from optimizer.errors import ConfigError, JobSubmissionError
from optimizer.features import FeatureSet, ZFeature
from optimizer.service.executors import OptimizeRequest
from optimizer.service.remote import DatabricksExecutor, choose_executor
from optimizer.service.state import RunInProgress
from optimizer.table.access import Commit
from optimizer.verdict import Verdict
from querylog.records import ScanRecord
from querylog.store import QueryLogTable
from tests.clusters.servers import JsonHandler
from tests.golden import check_golden, json_shape, masked
from tests.templates import copy_of

NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
CHEAP = CostModel(overhead=1.0, base=10.0, per_z=1.0, per_sop=1.0, per_additional=0.1)


def write_config(tmp_path: Path, tables: list[dict], **service) -> dict:
    thresholds = {
        "min_new_bytes": 1,
        "target_file_size": 100_000,
        "sample_rows": 5000,
        "min_comparison_points": 3,
        "cost_per_mb_read": 10.0,
    }
    data = {
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "defaults": thresholds,
        "tables": tables,
        "service": {"state_dir": str(tmp_path / "state"), "jitter": 0, **service},
    }
    (tmp_path / "state").mkdir(exist_ok=True)
    CHEAP.save(tmp_path / "state" / "costmodel.json")
    (tmp_path / "deltaopt.yaml").write_text(yaml.safe_dump(data))
    return data


def make_table(spark, path: str, rows: int = 20000, start: int = 0, files: int = 6):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    from optimizer.table import open_table

    table = open_table(path)
    frame = (
        spark.range(start, start + rows)
        .withColumn("x", (F.col("id") * 7919) % 1000)
        .withColumn("category", F.concat(F.lit("c"), (F.col("id") % 7).cast("string")))
        .withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
        .repartition(files)
    )
    if table.exists():
        snapshot = table.snapshot()
        table.append(table.stage(spark, frame, snapshot, "data"), snapshot, {"source": "test writer"})
    else:
        table.create(spark, frame)
    return table


def log_queries(path: str, count: int = 60, now: datetime = NOW, filters: bool = True, table: str = "events") -> None:
    records = []
    for i in range(count):
        chosen = (f"x >= {i * 15 % 1000}", f"x < {i * 15 % 1000 + 20}") if filters else ()
        records.append(ScanRecord(f"q{i}-{now.timestamp()}", now - timedelta(minutes=i), table, chosen, ("x",), "test"))
    QueryLogTable(path).append(records)


def _events_and_queries(spark, root: Path) -> None:  # type: ignore[no-untyped-def]
    """The `service` fixture's tables, built once per run (`tests.templates`): `events` (20000 rows in 6
    files) and its query log (60 queries)."""
    make_table(spark, str(root / "events"))
    log_queries(str(root / "events_querylog"))


@pytest.fixture
def service(spark, tmp_path):
    """A context on the shared SparkSession for one table `events`."""
    from optimizer.config import load_config
    from optimizer.service.service import context

    table_path = str(tmp_path / "events")
    write_config(tmp_path, [{"name": "events", "path": table_path, "interval": 5}])
    copy_of("service-events", tmp_path, lambda root: _events_and_queries(spark, root))
    config = load_config(tmp_path / "deltaopt.yaml")
    return context(config, spark=lambda: spark), table_path, tmp_path


@pytest.mark.spark
def test_tick_decides_optimises_and_records(service):
    from optimizer.service.tick import tick
    from optimizer.table import open_table

    ctx, table_path, tmp_path = service
    typed = tick(ctx.config.tables[0], ctx, NOW)
    assert typed.action is Verdict.OPTIMIZE, typed.reason
    assert typed.job is not None and typed.job.outcome is not None and typed.job.outcome.files_in == 6
    assert typed.features["z"] == ["x"] and typed.decision is not None and typed.decision.optimize
    record = typed.as_dict()  # what the decision log holds
    check_golden("records/tick-optimize.txt", json_shape(json.loads(json.dumps(record, default=str))))
    assert record["action"] == "optimize" and record["features"]["z"] == ["x"]
    job = record["job"]
    assert job["executor"] == "local" and job["version"] == open_table(table_path).snapshot().version
    assert job["files_in"] == 6 and job["rows"] == 20000
    lines = (tmp_path / "state" / "decisions.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["action"] == "optimize"
    assert ctx.decisions.read("events")[-1]["job"]["run_id"] == job["run_id"]
    state = ctx.state.load("events")
    assert state.last_optimized_version == job["version"] and state.run is None and state.log_version is not None


@pytest.mark.spark
def test_restart_repeats_no_work_and_new_data_is_picked_up(service, spark):
    from optimizer.config import load_config
    from optimizer.service.service import context
    from optimizer.service.tick import tick

    ctx, table_path, tmp_path = service
    first = tick(ctx.config.tables[0], ctx, NOW).as_dict()
    assert first["action"] == "optimize"

    restarted = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    again = tick(restarted.config.tables[0], restarted, NOW).as_dict()
    assert again["action"] == "skip" and "too little new data: 0 bytes" in again["reason"]
    assert again["new_queries"] == 0  # the log position survived the restart

    make_table(spark, table_path, rows=8000, start=10**6, files=4)
    log_queries(table_path + "_querylog", count=10, now=NOW + timedelta(minutes=1))
    later = tick(restarted.config.tables[0], restarted, NOW + timedelta(minutes=2)).as_dict()
    assert later["new_queries"] == 10
    assert later["new_files"] == 4 and later["action"] == "optimize"
    merged = first["job"]["files_out"] if later["merge"]["taken"] else 0  # the first run, when merging paid
    assert later["merge"]["runs"] == [first["job"]["run_id"]]
    assert later["job"]["files_in"] == 4 + merged  # the new data (and the run merged with it), nothing else


@pytest.mark.spark
def test_decides_not_to_optimise_with_the_reason(spark, tmp_path):
    from optimizer.config import load_config
    from optimizer.service.service import context, run_once

    write_config(
        tmp_path,
        [
            {"name": "small", "path": str(tmp_path / "small"), "thresholds": {"min_new_bytes": "1TB"}},
            {"name": "unfiltered", "path": str(tmp_path / "unfiltered")},
            {"name": "quiet", "path": str(tmp_path / "quiet"), "paused": True},
            {"name": "missing", "path": str(tmp_path / "does-not-exist")},
        ],
    )
    for name in ("small", "unfiltered", "quiet"):
        make_table(spark, str(tmp_path / name), rows=2000, files=2)
    log_queries(str(tmp_path / "small_querylog"))
    QueryLogTable(str(tmp_path / "unfiltered_querylog")).append(
        [ScanRecord(f"u{i}", NOW, "unfiltered", (), ("x",), "test") for i in range(30)]
    )
    records = {
        r.table: r.as_dict()
        for r in run_once(context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark), NOW)
    }
    assert records["small"]["action"] == "skip" and "too little new data" in records["small"]["reason"]
    assert records["unfiltered"]["action"] == "skip" and "no clustering features" in records["unfiltered"]["reason"]
    assert records["quiet"]["action"] == "paused"
    assert records["missing"]["action"] == "error" and "no Delta table" in records["missing"]["reason"]


@pytest.mark.spark
def test_dry_run_logs_without_optimising(service):
    from optimizer.service.tick import tick
    from optimizer.table import open_table

    ctx, table_path, _ = service
    ctx.config = ctx.config.model_copy(update={"service": ctx.config.service.model_copy(update={"dry_run": True})})
    record = tick(ctx.config.tables[0], ctx, NOW).as_dict()
    assert record["action"] == "optimize (dry run)" and "job" not in record
    assert open_table(table_path).snapshot().version == 0


@pytest.mark.spark
def test_a_missing_executor_fails_only_the_job_not_the_decision(service, monkeypatch):
    """Databricks credentials missing: the tick still estimates (a dry run records its decision); only a
    job that would start fails, naming the variables."""
    from optimizer.service.tick import tick

    ctx, _, _ = service
    monkeypatch.delenv("DATABRICKS_HOST", raising=False)
    databricks = ExecutionSettings(mode="databricks", databricks=DatabricksSettings(python_wheel="/w.whl"))
    ctx.config = ctx.config.model_copy(update={"execution": databricks})
    dry = ctx.config.service.model_copy(update={"dry_run": True})
    ctx.config = ctx.config.model_copy(update={"service": dry})
    assert tick(ctx.config.tables[0], ctx, NOW).action.value == "optimize (dry run)"
    ctx.config = ctx.config.model_copy(update={"service": dry.model_copy(update={"dry_run": False})})
    record = tick(ctx.config.tables[0], ctx, NOW)
    assert record.action.value == "error" and "DATABRICKS_HOST" in record.reason


@pytest.mark.spark
def test_a_run_that_died_is_settled_and_retried(service):
    from optimizer.service.tick import tick

    ctx, _, _ = service
    ctx.state.save(ctx.state.load("events").with_(run=RunInProgress("deadbeef", 0, NOW.isoformat())))
    record = tick(ctx.config.tables[0], ctx, NOW).as_dict()
    assert record["previous_run"] == "run deadbeef died before committing; the table is unchanged"
    assert record["action"] == "optimize" and record["job"]["version"] == 1


def commit(version: int, engine: str | None, cluster: str | None = None, ours: bool = False) -> Commit:
    metadata = {"deltaopt": {"operation": "OPTIMIZE"}} if ours else {}
    return Commit(version, NOW, "WRITE", {}, engine, cluster, metadata)


def test_executor_follows_the_writer():
    local = lambda: None  # noqa: E731 - never called here
    spark = SparkSettings()
    delta_rs = [commit(1, "delta-rs:py-1.6.6")]
    assert choose_executor(ExecutionSettings(), delta_rs, local, spark)[0].name == "local"
    spark_writer = [commit(1, "Apache-Spark/3.5.1 Delta-Lake/3.2.0"), commit(2, "delta-rs:py-1.6.6", ours=True)]
    connect = ExecutionSettings(connect_url="sc://writers:15002")
    executor, why = choose_executor(connect, spark_writer, local, spark)
    assert executor.name == "connect" and "sc://writers:15002" in why
    databricks = [commit(1, "Databricks-Runtime/14.3.x-scala2.12", "0612-abc")]
    settings = ExecutionSettings(databricks=DatabricksSettings(python_wheel="/Volumes/x/deltaopt.whl"))
    os.environ.update(DATABRICKS_HOST="https://example.invalid", DATABRICKS_TOKEN="t")
    try:
        executor, why = choose_executor(settings, databricks, local, spark)
        assert executor.name == "databricks" and executor.cluster_id == "0612-abc"
    finally:
        del os.environ["DATABRICKS_HOST"], os.environ["DATABRICKS_TOKEN"]
    with pytest.raises(JobSubmissionError, match="DATABRICKS_HOST and DATABRICKS_TOKEN"):
        choose_executor(settings, databricks, local, spark)


class _JobsApi(JsonHandler):
    requests: ClassVar[list[tuple[str, str, dict, dict]]] = []

    def do_POST(self) -> None:
        self.requests.append(("POST", self.path, dict(self.headers), self.body()))
        self.reply({"run_id": 4242})

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path, dict(self.headers), {}))
        self.reply({"state": {"life_cycle_state": "TERMINATED", "result_state": "SUCCESS"}})


def test_databricks_request_against_a_local_jobs_api(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    table_path = str(tmp_path / "t")
    write_deltalake(table_path, pa.table({"x": [1, 2, 3]}))
    server = HTTPServer(("127.0.0.1", 0), _JobsApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = DatabricksSettings(python_wheel="dbfs:/wheels/deltaopt-0.1.0-py3-none-any.whl", poll_interval=0.01)
        environ = {"DATABRICKS_HOST": f"http://127.0.0.1:{server.server_port}", "DATABRICKS_TOKEN": "secret-token"}
        executor = DatabricksExecutor(settings, "0612-abc", environ)
        features = FeatureSet(z=(ZFeature("x"),))
        outcome = executor.run(OptimizeRequest(table_path, features, 128 << 20, "run123", 0))
    finally:
        server.shutdown()
    (method, path, headers, body), (get_method, get_path, _, _) = _JobsApi.requests[-2:]
    assert (method, path) == ("POST", "/api/2.1/jobs/runs/submit")
    assert headers["Authorization"] == "Bearer secret-token"
    (task,) = body["tasks"]
    assert task["existing_cluster_id"] == "0612-abc"
    assert task["libraries"] == [{"whl": "dbfs:/wheels/deltaopt-0.1.0-py3-none-any.whl"}]
    wheel = task["python_wheel_task"]
    assert wheel["package_name"] == "deltaopt" and wheel["entry_point"] == "deltaopt"
    params = wheel["parameters"]
    assert params[:3] == ["optimize", "--table", table_path]
    assert json.loads(params[params.index("--features-json") + 1])["z"] == ["x"]
    assert params[params.index("--run-id") + 1] == "run123"
    assert (get_method, get_path) == ("GET", "/api/2.1/jobs/runs/get?run_id=4242")
    assert outcome.details == {"databricks_run_id": 4242, "cluster_id": "0612-abc", "serverless": False}
    assert outcome.version is None  # the fake cluster committed nothing: reported, not invented


def test_databricks_compute_choices_in_the_submitted_run():
    """An existing cluster (configured wins over the writer's), a job cluster under a policy, serverless."""
    local = lambda: None  # noqa: E731 - never called here
    writer = [commit(1, "Databricks-Runtime/17.3.x-scala2.13", "writers-job-cluster")]
    environ = {"DATABRICKS_HOST": "https://example.invalid", "DATABRICKS_TOKEN": "t"}
    request = OptimizeRequest("/t", FeatureSet(z=(ZFeature("x"),)), 1 << 27, "r1", 0)
    wheel = "/Volumes/ops/deltaopt/deltaopt-0.1.0-py3-none-any.whl"

    def body(**settings) -> dict:
        config = ExecutionSettings(databricks=DatabricksSettings(python_wheel=wheel, **settings))
        os.environ.update(environ)
        try:
            executor, why = choose_executor(config, writer, local, SparkSettings())
        finally:
            for key in environ:
                del os.environ[key]
        return {"why": why, "sql_only": executor.capabilities.sql_only, **executor.request_body(request)}

    existing = body(existing_cluster_id="0101-ops")
    assert existing["tasks"][0]["existing_cluster_id"] == "0101-ops" and "cluster 0101-ops" in existing["why"]
    assert body()["tasks"][0]["existing_cluster_id"] == "writers-job-cluster"  # nothing configured: the writer's
    new = body(new_cluster={"spark_version": "17.3.x-scala2.13", "num_workers": 2}, policy_id="P1")
    assert new["tasks"][0]["new_cluster"] == {"spark_version": "17.3.x-scala2.13", "num_workers": 2, "policy_id": "P1"}
    assert "existing_cluster_id" not in new["tasks"][0] and not new["sql_only"]
    serverless = body(serverless=True)
    assert serverless["sql_only"] and serverless["tasks"][0]["environment_key"] == "deltaopt"
    assert serverless["environments"][0]["spec"]["dependencies"] == [wheel]
    with pytest.raises(ConfigError, match="choose one of"):
        parse_config({"execution": {"databricks": {"serverless": True, "existing_cluster_id": "x"}}})


POLL_SECONDS = 0.1  # how often the end-to-end test reads the service's decision log


def _start_serve(tmp_path: Path) -> subprocess.Popen:
    """`deltaopt serve` on tmp_path's config, a real process. Its output goes to files (serve.out,
    serve.err): a pipe nobody reads until it stops could fill up with a tick a second's log and stall it.
    Its JVM lives for seconds, all of them cold code: it compiles with C1 only (C2's compiler threads
    competed with Spark's tasks for the cores; measured: about a third off this test), the same code run."""
    command = [sys.executable, "-m", "optimizer.cli", "serve", "--config", str(tmp_path / "deltaopt.yaml")]
    java_options = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} -XX:TieredStopAtLevel=1".strip()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JAVA_TOOL_OPTIONS": java_options}
    with open(tmp_path / "serve.out", "w") as out, open(tmp_path / "serve.err", "w") as err:
        return subprocess.Popen(command, stdout=out, stderr=err, text=True, env=env)


def _decision(path: Path, deadline: float, wanted: Callable[[dict], bool]) -> tuple[dict | None, list[dict]]:
    """The decision log's first record that is `wanted`, polled for until `deadline` (None if none came),
    and the records read last. Only complete lines are read: the service may be writing the last one."""
    records: list[dict] = []
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        records = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]
        found = next((r for r in records if wanted(r)), None)
        if found is not None:
            return found, records
        time.sleep(POLL_SECONDS)
    return None, records


@pytest.mark.spark
def test_serve_end_to_end(spark, tmp_path):
    """The real service process: it decides to optimise data that arrives while it runs, commits a
    clustered layout, records the decision, and stops cleanly on SIGTERM."""
    from optimizer.skipping.extended import load_index
    from optimizer.table import open_table

    table_path = str(tmp_path / "events")
    # a tick a second: the data that arrives is seen within a second (a tick while nothing moved repeats its
    # verdict without Spark: `service.idle`)
    write_config(tmp_path, [{"name": "events", "path": table_path, "interval": 1}])
    make_table(spark, table_path, rows=4000, files=2)
    process = _start_serve(tmp_path)
    decisions = tmp_path / "state" / "decisions.jsonl"
    try:
        deadline = time.monotonic() + 180
        first, _ = _decision(decisions, deadline, lambda record: True)
        assert first is not None and first["action"] == "skip"  # data but no workload yet
        make_table(spark, table_path, rows=16000, start=10**6, files=4)  # new data arrives ...
        log_queries(table_path + "_querylog", now=datetime.now(UTC))  # ... and queries
        optimised, records = _decision(decisions, deadline, lambda r: r["action"] == "optimize" and bool(r.get("job")))
        assert optimised is not None, records[-1:]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    err = (tmp_path / "serve.err").read_text()
    assert process.returncode == 0, err[-2000:]
    assert "decision log:" in (tmp_path / "serve.out").read_text()
    table = open_table(table_path)
    snapshot = table.snapshot()
    assert snapshot.num_records == 20000
    assert optimised["job"]["version"] <= snapshot.version
    assert load_index(table, snapshot)  # the clustered files carry extended statistics
    optimizes = [c for c in table.history() if c.is_deltaopt_optimize]
    assert optimizes  # committed by Delta's own transaction in the service's embedded Spark
    assert all(c.operation == "OPTIMIZE" and "Delta-Lake" in (c.engine or "") for c in optimizes)


@pytest.mark.spark
def test_estimate_and_status_on_the_command_line(service, capsys):
    from optimizer.cli import main

    _, table_path, tmp_path = service
    config = str(tmp_path / "deltaopt.yaml")
    log_queries(table_path + "_querylog", now=datetime.now(UTC))  # the CLI decides on the real clock
    assert main(["estimate", "--config", config, "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["action"] == "optimize" and decision["new_files"] == 6
    assert decision["cost"]["seconds"] > 0 and decision["benefit"]["p_after"] < decision["benefit"]["p_before"]
    assert {layout["layout"] for layout in decision["layouts"]} == {"as analysed"}
    assert main(["estimate", "--config", config]) == 0
    text = capsys.readouterr().out
    check_golden("records/estimate-text.txt", masked(text, table_path, str(tmp_path)))
    assert "standard readers (100% of reads)" in text and "deltaopt readers (0% of reads)" in text
    assert "feature search:" in text and "z x: chosen in round 1" in text
    assert main(["status", "--config", config]) == 0
    assert "unclustered" in capsys.readouterr().out


def test_decisions_reads_records_written_before_the_record_was_typed(tmp_path, capsys):
    """A decision line as earlier versions wrote it (the tick's time under "seconds") still prints."""
    from optimizer.cli import main

    write_config(tmp_path, [{"name": "events", "path": str(tmp_path / "events")}])
    old = {
        "ts": "2024-05-01T12:00:00+00:00",
        "table": "events",
        "path": str(tmp_path / "events"),
        "dry_run": False,
        "new_queries": 60,
        "version": 3,
        "action": "optimize",
        "reason": "benefit 40.1 exceeds cost 7.2 (net +32.9 cluster-seconds)",
        "new_bytes": 9000000,
        "features": {"z": ["x"], "sop": [], "z_add": [], "sop_add": [], "sop_weights": {}},
        "job": {"executor": "local", "where": "delta-rs writer", "run_id": "ab12", "version": 4, "files_in": 6,
                "files_out": 2, "bytes_in": 9000000, "bytes_out": 6000000, "seconds": 11.5},
        "seconds": 23.4,
    }  # fmt: skip
    (tmp_path / "state" / "decisions.jsonl").write_text(json.dumps(old) + "\n")
    assert main(["decisions", "--config", str(tmp_path / "deltaopt.yaml")]) == 0
    out = capsys.readouterr().out
    assert "v3  OPTIMIZE: benefit 40.1 exceeds cost 7.2" in out
    assert "job on local (delta-rs writer): 6 -> 2 files, 9,000,000 -> 6,000,000 bytes, 11.5s" in out
    assert "features: z=['x'] sop=[]" in out and "1 decision(s)" in out
