"""A real Spark Connect server with Delta's jars: only SQL reaches it, so deltaopt drives the server's own
Delta OPTIMIZE with the layout it chose, and the commit is made there, never by the client."""

from __future__ import annotations

import json

import pytest

from optimizer.config import ExecutionSettings
from tests.clusters.test_standalone import delta_table, deltaopt, rows_of
from tests.service.test_service import NOW, service  # noqa: F401 - the service fixture

pytestmark = [pytest.mark.spark, pytest.mark.connect]


def test_optimize_through_connect_is_deltas_own_optimize(spark, connect_delta, tmp_path):
    from optimizer.skipping.extended import load_index
    from optimizer.table import open_table

    path = str(tmp_path / "events")
    delta_table(spark, path, 0, 6000)
    before = rows_of(spark, path)
    z = ("--z", "category,x", "--sop", "x < 100")
    done = deltaopt("optimize", "--table", path, *z, "--connect", connect_delta, "--json", cwd=tmp_path)
    assert done["committed_by"] == "delta-sql"
    assert done["output"]["not_applied"] == ["SOP x < 100"]  # said, not silently dropped
    last = open_table(path).history()[-1]
    assert last.operation == "OPTIMIZE" and "Delta-Lake" in (last.engine or "")
    assert json.loads(last.operation_parameters["zOrderBy"]) == ["category", "x"]  # deltaopt's order
    assert last.is_deltaopt_optimize and last.deltaopt["runId"] == done["run_id"]
    assert rows_of(spark, path) == before
    index = load_index(open_table(path), open_table(path).snapshot())  # Delta's files, recorded as the run's
    assert index and all(s.run_id == done["run_id"] and not s.ranges for s in index.values())
    assert not any(s.float_max_includes_nan for s in index.values())  # Delta wrote them: its maxima not trusted
    again = deltaopt("optimize", "--table", path, "--z", "x", "--connect", connect_delta, "--json", cwd=tmp_path)
    assert again["version"] is None  # the files Delta wrote are recorded as clustered: nothing new to do


def test_the_service_runs_the_job_as_deltas_optimize_on_the_connect_server(service, connect_delta):  # noqa: F811
    """execution.mode=connect: the estimate prices what Delta's OPTIMIZE can apply, the server commits."""
    from optimizer.service.tick import tick
    from optimizer.table import open_table

    ctx, table_path, _ = service
    ctx.config = ctx.config.model_copy(
        update={"execution": ExecutionSettings(mode="connect", connect_url=connect_delta)}
    )
    spark = ctx.spark()
    before = rows_of(spark, table_path)
    record = tick(ctx.config.tables[0], ctx, NOW).as_dict()
    assert record["action"] == "optimize", record["reason"]
    assert record["job"]["executor"] == "connect" and connect_delta in record["job"]["where"]
    assert record["job"]["details"]["committed_by"] == "delta-sql"
    last = open_table(table_path).history()[-1]
    assert last.version == record["job"]["version"] and last.operation == "OPTIMIZE"
    assert "Delta-Lake" in (last.engine or "") and last.deltaopt["runId"] == record["job"]["run_id"]
    assert rows_of(spark, table_path) == before
