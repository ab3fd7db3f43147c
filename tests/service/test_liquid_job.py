"""A job decided for a plain table that waits in the fleet queue while the table becomes liquid (issue 45,
6c): when it starts, the table's clustering keys stay the user's (``liquid: keep``, the default).

Two executors: the service's own Spark (which reads the version the job was decided on) and what a
remote cluster runs, ``deltaopt optimize`` with the request's arguments, which reads the table as it
is when the job starts (here in-process on the test session, as the Databricks stand-in runs the
wheel's entry point)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.service.executors import JobOutcome, OptimizeRequest, SparkExecutor, optimize_command
from optimizer.table.rewrite_path import Capabilities
from optimizer.verdict import Verdict
from tests.service.test_service import NOW, log_queries, write_config

pytestmark = pytest.mark.spark


class RemoteStandIn:
    """What `DatabricksExecutor` starts on a classic cluster: the CLI's optimize, beside the cluster's Delta
    (not SQL only: the estimate prices deltaopt's layout; a liquid table is Delta's to cluster)."""

    name = "remote"
    capabilities = Capabilities.databricks(serverless=False)

    def run(self, request: OptimizeRequest) -> JobOutcome:
        from optimizer.cli.main import main

        assert main(optimize_command(request)) == 0
        return JobOutcome(self.name, None)


def keys(spark, path: str) -> list[str]:
    return list(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["clusteringColumns"])


@pytest.mark.parametrize("where", ["local", "remote"])
def test_a_queued_job_leaves_the_keys_of_a_table_that_became_liquid(spark, tmp_path: Path, where, capsys):
    from optimizer.config import load_config
    from optimizer.service.service import context
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    rows = spark.range(20000).selectExpr("id", "(id * 7919) % 1000 x", "sha2(cast(id as string), 256) pad")
    rows.repartition(6).write.format("delta").save(path)
    write_config(tmp_path, [{"name": "events", "path": path, "interval": 5}])
    log_queries(path + "_querylog")
    ctx = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    executor = SparkExecutor("local", lambda: spark) if where == "local" else RemoteStandIn()
    ctx.choose = lambda table, commits: (executor, "test")
    table = ctx.config.tables[0]

    with ctx.queue.held():  # decided and queued, not started
        decided = tick(table, ctx, NOW)
    assert decided.action is Verdict.DEFERRED and decided.features["z"] == ["x"], decided.reason
    spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (id)")  # the user makes it liquid meanwhile
    history = len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect())

    started = ctx.queue.dispatch(NOW).records["events"]

    assert keys(spark, path) == ["id"]
    assert len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()) == history  # nothing committed
    assert started.action is Verdict.SKIP and started.job is None
    assert "became liquid-clustered" in started.reason and "liquid: keep" in started.reason
    assert ctx.decisions.read("events")[-1]["reason"] == started.reason


class BecomesLiquidAsItStarts:
    """The service's own executor, where the user makes the table liquid after the job's check and
    before the executor reads the table (the race the check as the job starts cannot close)."""

    name = "local"

    def __init__(self, spark, path: str) -> None:
        self.spark, self.path = spark, path
        self.inner = SparkExecutor("local", lambda: spark)

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities  # the test session's, probed as the service's own executor's are

    def run(self, request: OptimizeRequest) -> JobOutcome:
        self.spark.sql(f"ALTER TABLE delta.`{self.path}` CLUSTER BY (id)")
        return self.inner.run(request)


def test_a_table_that_becomes_liquid_as_the_local_job_starts_is_not_optimized(spark, tmp_path: Path):
    from optimizer.config import load_config
    from optimizer.service.service import context
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    rows = spark.range(20000).selectExpr("id", "(id * 7919) % 1000 x", "sha2(cast(id as string), 256) pad")
    rows.repartition(6).write.format("delta").save(path)
    write_config(tmp_path, [{"name": "events", "path": path, "interval": 5}])
    log_queries(path + "_querylog")
    ctx = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    executor = BecomesLiquidAsItStarts(spark, path)
    ctx.choose = lambda table, commits: (executor, "test")
    table = ctx.config.tables[0]

    with ctx.queue.held():
        decided = tick(table, ctx, NOW)
    assert decided.action is Verdict.DEFERRED, decided.reason
    started = ctx.queue.dispatch(NOW).records["events"]

    operations = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()]
    assert operations[-1] == "CLUSTER BY", f"the job committed after the table became liquid: {operations}"
    assert keys(spark, path) == ["id"]
    assert started.action is Verdict.SKIP, started.reason
    assert "became liquid-clustered" in started.reason and "liquid: keep" in started.reason
