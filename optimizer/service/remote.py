"""Remote executors and the choice of executor. A job runs in-process, on a Spark cluster through Spark
Connect, or on the Databricks cluster that wrote the data (Jobs API); the data work is the same Spark
code everywhere.

`choose_executor` reads the commitInfo of the commits that wrote the new data (engineInfo, and on
Databricks clusterId) and the ``execution`` section of the configuration:

* ``mode: auto``: a Databricks commit with a cluster id runs there; a commit by Apache Spark runs on
  ``execution.connect_url`` when one is configured; everything else (delta-rs writers, no URL) runs
  in-process on the service's own Spark;
* ``local``, ``connect``, ``databricks`` force the choice.

Databricks credentials come from the environment variables the configuration names (host and token),
never from YAML. The job runs ``deltaopt optimize`` from the configured wheel on the existing cluster.
A remote run's failure is read from the command's exit status (`remote_failure`): a refused commit and
keys the user changed since the decision are told apart from a failed run. A Databricks run reports only
that it failed: keys changed since a liquid decision are then read from the table's history
(`by_delta.keys_changed_since`).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from optimizer.clustering.by_delta import KeysChangedError, keys_changed_since
from optimizer.config import DatabricksSettings, ExecutionSettings, SparkSettings
from optimizer.errors import CommitConflictError, JobSubmissionError
from optimizer.service.executors import Executor, JobOutcome, OptimizeRequest, SparkExecutor, optimize_command
from optimizer.table.access import Commit, commit_of_run
from optimizer.table.rewrite_path import Capabilities

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def remote_failure(where: str, returncode: int, stderr: str) -> Exception:
    """The error a remote ``deltaopt optimize`` that exited `returncode` stands for: the table's keys changed
    since the decision (nothing was run: the service skips), a commit refused by a concurrent one (the
    job lost a race), or a failed run; named by its last line on stderr."""
    message = (stderr.strip().splitlines() or ["no output"])[-1]
    if returncode == KeysChangedError.exit_status:
        return KeysChangedError(message.removeprefix("deltaopt: error: "))
    if "CommitConflictError" in stderr or "concurrent commit" in stderr:
        return CommitConflictError(message)
    return JobSubmissionError(f"OPTIMIZE through {where} failed ({returncode}): {message}")


class ConnectExecutor:
    """Runs ``deltaopt optimize --connect URL`` as a child process (PySpark refuses a Connect session in
    a process that already runs a classic one, as the service's own Spark is). Only SQL reaches the
    server, so the job is the server's Delta ``OPTIMIZE ... ZORDER BY``, committed there
    (`optimizer.clustering.by_delta`); with ``spark.commit: delta-rs`` the operator chose instead that the
    data work runs on the server and the child commits with delta-rs."""

    name = "connect"

    def __init__(self, url: str, timeout: float = 6 * 3600, commit: str = "auto") -> None:
        self.url = url
        self.timeout = timeout
        self.commit = commit
        self.capabilities = Capabilities.connect(commit)

    def run(self, request: OptimizeRequest) -> JobOutcome:
        import subprocess
        import sys

        command = [sys.executable, "-m", "optimizer.cli", *optimize_command(request), "--connect", self.url]
        command += ["--commit", self.commit]
        started = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as err:
            raise JobSubmissionError(f"OPTIMIZE through {self.url} did not finish within {self.timeout:.0f}s") from err
        if done.returncode != 0:
            raise remote_failure(self.url, done.returncode, done.stderr)
        result = json.loads(done.stdout)
        return JobOutcome(
            self.name,
            result["version"],
            result["files_in"],
            result["files_out"],
            result["bytes_in"],
            result["bytes_out"],
            result["rows"],
            round(time.perf_counter() - started, 3),
            {
                "dimensions": result["dimensions"],
                "sop_partitions": result["sop_partitions"],
                "connect_url": self.url,
                "committed_by": result["committed_by"],
                "output": result["output"],
            },
        )


class DatabricksExecutor:
    """Submits a one-time run of ``deltaopt optimize`` (the wheel's entry point) to Databricks compute
    (Jobs API 2.1) and waits for it to finish: an existing cluster (configured, else the one that wrote
    the data), a new job cluster (optionally under a policy), or serverless. On classic compute the job
    is deltaopt's own, committed by the cluster's Delta; serverless has no JVM access, so there it is
    Delta's OPTIMIZE ZORDER BY (`capabilities.sql_only`)."""

    name = "databricks"

    def __init__(
        self, settings: DatabricksSettings, cluster_id: str | None, environ: dict[str, str] | None = None
    ) -> None:
        environ = dict(os.environ if environ is None else environ)
        host = environ.get(settings.host_env)
        token = environ.get(settings.token_env)
        if not host or not token:
            raise JobSubmissionError(
                f"Databricks credentials missing: set {settings.host_env} and {settings.token_env} in the environment"
            )
        if not settings.python_wheel:
            raise JobSubmissionError("execution.databricks.python_wheel is not set: the cluster needs deltaopt's wheel")
        if cluster_id is None and not (settings.new_cluster or settings.serverless):
            raise JobSubmissionError(
                "no Databricks compute for the job: set execution.databricks.existing_cluster_id, new_cluster or "
                "serverless (no commit names a cluster id)"
            )
        self.settings = settings
        self.cluster_id = cluster_id
        self.capabilities = Capabilities.databricks(settings.serverless)
        self.host = host.rstrip("/")
        self._token = token

    def request_body(self, request: OptimizeRequest) -> dict[str, Any]:
        settings, wheel = self.settings, self.settings.python_wheel
        task: dict[str, Any] = {
            "task_key": "deltaopt_optimize",
            "python_wheel_task": {
                "package_name": "deltaopt",
                "entry_point": "deltaopt",
                "parameters": optimize_command(request),
            },
        }
        body: dict[str, Any] = {
            "run_name": f"deltaopt optimize {request.table_path} ({request.run_id})",
            "timeout_seconds": int(settings.timeout),
            "tasks": [task],
        }
        if settings.serverless:  # serverless tasks take their libraries from an environment
            task["environment_key"] = "deltaopt"
            body["environments"] = [{"environment_key": "deltaopt", "spec": {"client": "2", "dependencies": [wheel]}}]
            return body
        task["libraries"] = [{"whl": wheel}]
        if settings.new_cluster:
            policy = {"policy_id": settings.policy_id} if settings.policy_id else {}
            task["new_cluster"] = {**settings.new_cluster, **policy}
        else:
            task["existing_cluster_id"] = self.cluster_id
        return body

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        http = urllib.request.Request(
            f"{self.host}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(http, timeout=60) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:500]
            raise JobSubmissionError(f"Databricks {method} {path} failed: HTTP {err.code}: {detail}") from err
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise JobSubmissionError(f"Databricks {method} {path} failed: {err}") from err

    def run(self, request: OptimizeRequest) -> JobOutcome:
        started = time.perf_counter()
        submitted = self._call("POST", "/api/2.1/jobs/runs/submit", self.request_body(request))
        run_id = submitted.get("run_id")
        if run_id is None:
            raise JobSubmissionError(f"Databricks did not return a run id: {submitted}")
        deadline = time.monotonic() + self.settings.timeout
        while True:
            status = self._call("GET", f"/api/2.1/jobs/runs/get?run_id={run_id}")
            state = status.get("state") or {}
            if state.get("life_cycle_state") in ("TERMINATED", "SKIPPED", "INTERNAL_ERROR"):
                break
            if time.monotonic() > deadline:
                raise JobSubmissionError(f"Databricks run {run_id} did not finish within {self.settings.timeout:.0f}s")
            time.sleep(self.settings.poll_interval)
        from optimizer.table import open_table

        if state.get("result_state") != "SUCCESS":
            failed = f"Databricks run {run_id} ended {state.get('result_state')}: {state.get('state_message', '')}"
            if request.keys is not None:  # a liquid decision: refused because the user changed the keys?
                history = open_table(request.table_path).history(request.read_version + 1)
                refused = keys_changed_since(
                    history, request.keys, request.run_id, uri=request.table_path, failure=failed
                )
                if refused is not None:
                    raise refused
            raise JobSubmissionError(failed)
        committed = commit_of_run(open_table(request.table_path).history(request.read_version + 1), request.run_id)
        return JobOutcome(
            self.name,
            committed.version if committed else None,
            seconds=round(time.perf_counter() - started, 3),
            details={
                "databricks_run_id": run_id,
                "cluster_id": self.cluster_id,
                "serverless": self.settings.serverless,
            },
        )


def writer_of(commits: Sequence[Commit]) -> Commit | None:
    """The latest commit that wrote data (not one of deltaopt's own rewrites)."""
    writers = [c for c in commits if not c.is_deltaopt_optimize]
    return writers[-1] if writers else None


def choose_executor(
    execution: ExecutionSettings,
    commits: Sequence[Commit],
    local: Callable[[], SparkSession],
    spark_settings: SparkSettings,
) -> tuple[Executor, str]:
    """The executor for a job, and why it was chosen."""
    writer = writer_of(commits)
    engine = (writer.engine or "") if writer else ""
    mode = execution.mode
    if mode == "databricks" or (
        mode == "auto" and writer is not None and writer.cluster_id and engine.startswith("Databricks")
    ):
        settings = execution.databricks
        writers = writer.cluster_id if writer is not None else None
        cluster = settings.existing_cluster_id or (None if settings.new_cluster or settings.serverless else writers)
        where = (
            f"cluster {cluster}" if cluster else ("serverless compute" if settings.serverless else "a new job cluster")
        )
        return DatabricksExecutor(settings, cluster), f"data written by {engine or 'Databricks'}; Databricks {where}"
    if mode == "connect" or (mode == "auto" and "Apache-Spark" in engine and execution.connect_url):
        if not execution.connect_url:
            raise JobSubmissionError("execution.mode is connect but execution.connect_url is not set")
        why = f"data written by {engine or 'Spark'}; Spark Connect at {execution.connect_url}"
        return ConnectExecutor(execution.connect_url, commit=spark_settings.commit), why
    reason = f"data written by {engine or 'an unknown engine'}" if mode == "auto" else "execution.mode is local"
    where = f"Spark Connect at {spark_settings.connect_url}" if spark_settings.connect_url else "in-process Spark"
    return SparkExecutor("local", local), f"{reason}: {where}"


def chosen_executor(
    execution: ExecutionSettings, commits: Sequence[Commit], spark: SparkSession, spark_settings: SparkSettings
) -> tuple[Executor, str] | JobSubmissionError:
    """`choose_executor` for a one-off command in `spark` (`deltaopt estimate`), its refusal returned as a
    tick keeps it (`service.jobs.job_for`): the estimate still runs, pricing deltaopt's own layout."""
    try:
        return choose_executor(execution, commits, lambda: spark, spark_settings)
    except JobSubmissionError as err:
        return err
