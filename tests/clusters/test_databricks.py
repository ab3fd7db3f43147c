"""The Databricks path against a Jobs API stand-in that really runs what it is sent: the wheel task's
entry point, looked up in the installed package's metadata as Databricks does, in a driver that
spark-submit starts on a real standalone cluster with Delta (a cluster job: no ``--config``, the master
and Delta come from the cluster)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from optimizer.config import DatabricksSettings
from optimizer.features import FeatureSet, ZFeature
from optimizer.service.executors import OptimizeRequest
from optimizer.service.remote import DatabricksExecutor
from tests.clusters.servers import JsonHandler, delta_submit_conf, process_env, spark_class
from tests.clusters.test_standalone import delta_table, rows_of

pytestmark = pytest.mark.spark

# what Databricks does for a python_wheel_task: call the package's console-script entry point
LAUNCHER = """
import sys
from importlib.metadata import distribution
package, entry = sys.argv[1], sys.argv[2]
found = [e for e in distribution(package).entry_points if e.group == "console_scripts" and e.name == entry]
sys.argv = [entry, *sys.argv[3:]]
sys.exit(found[0].load()())
"""


class JobsApi(JsonHandler):
    """runs/submit starts the task on the cluster; runs/get reports its state from the process."""

    master: ClassVar[str] = ""
    workdir: ClassVar[Path] = Path(".")
    runs: ClassVar[dict[int, tuple[subprocess.Popen, dict[str, Any]]]] = {}

    def do_POST(self) -> None:
        body = self.body()
        (task,) = body["tasks"]
        wheel = task["python_wheel_task"]
        launcher = self.workdir / "launcher.py"
        launcher.write_text(LAUNCHER)
        command = [
            *spark_class("org.apache.spark.deploy.SparkSubmit"),
            *("--master", self.master, "--conf", "spark.executor.memory=1g", *delta_submit_conf()),
            str(launcher),
            wheel["package_name"],
            wheel["entry_point"],
            *wheel["parameters"],
        ]
        env = process_env(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        log = open(self.workdir / f"run-{len(self.runs)}.log", "w")  # noqa: SIM115 - the run writes to it
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir)
        run_id = 1000 + len(self.runs)
        self.runs[run_id] = (process, body)
        self.reply({"run_id": run_id})

    def do_GET(self) -> None:
        run_id = int(self.path.rsplit("=", 1)[1])
        process, _ = self.runs[run_id]
        code = process.poll()
        if code is None:
            self.reply({"state": {"life_cycle_state": "RUNNING"}})
        else:
            result = "SUCCESS" if code == 0 else "FAILED"
            self.reply({"state": {"life_cycle_state": "TERMINATED", "result_state": result}})


@pytest.fixture
def jobs_api(standalone, tmp_path) -> Iterator[str]:
    JobsApi.master, JobsApi.workdir = standalone[0], tmp_path
    server = HTTPServer(("127.0.0.1", 0), JobsApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    for process, _ in JobsApi.runs.values():
        if process.poll() is None:
            process.kill()


def test_the_submitted_job_runs_on_the_cluster_and_commits_there(spark, standalone, jobs_api, tmp_path):
    from optimizer.table import open_table

    path = str(tmp_path / "events")
    delta_table(spark, path, 0, 6000)
    before = rows_of(spark, path)
    settings = DatabricksSettings(
        python_wheel="/Volumes/ops/deltaopt/deltaopt-0.1.0-py3-none-any.whl", existing_cluster_id="0612-abc"
    )
    settings = settings.model_copy(update={"poll_interval": 0.5, "timeout": 600})
    executor = DatabricksExecutor(settings, "0612-abc", {"DATABRICKS_HOST": jobs_api, "DATABRICKS_TOKEN": "t"})
    started = time.monotonic()
    outcome = executor.run(OptimizeRequest(path, FeatureSet(z=(ZFeature("x"),)), 100_000, "dbx-run-1", 0))
    logs = "\n".join(p.read_text()[-2000:] for p in tmp_path.glob("run-*.log"))
    assert outcome.version == 1, logs
    last = open_table(path).history()[-1]
    assert (
        last.operation == "OPTIMIZE" and "Delta-Lake" in (last.engine or "") and last.deltaopt["runId"] == "dbx-run-1"
    )
    assert rows_of(spark, path) == before
    since = time.time() - (time.monotonic() - started)
    assert [a for a in standalone[1].glob("app-*") if a.stat().st_mtime >= since]  # executors ran on the worker
