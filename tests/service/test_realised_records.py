"""Where realised benefit goes: the job's row of the decisions table (set, updated, read back, also in
a table written before the columns existed), the tick that measured it, the table's state, and
`deltaopt status` (per table and summed over the fleet)."""

from __future__ import annotations

import json
from datetime import timedelta

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from optimizer.service.decisions import DecisionLog
from optimizer.service.logged import LoggedDecision, LoggedRealised
from optimizer.service.realised import figures
from optimizer.service.state import MeasuredJob, ReaderBytes, RealisedTotals, StateStore, TableState
from querylog.store import QueryLogTable
from tests.service.test_decisions import NOW, record
from tests.service.test_realised import T0, THRESHOLDS, cluster, job_record, scan, sizes, unclustered
from tests.service.test_service import NOW as SERVICE_NOW
from tests.service.test_service import log_queries, service, write_config  # noqa: F401 - the fixture


def measured_job(scans: int, saved: float) -> MeasuredJob:
    readers = {"standard": ReaderBytes(before=scans * 4e6, after=scans * 4e6 - saved, total=scans * 4e6)}
    return MeasuredJob("job1", 5, NOW.isoformat(), 0.5, 12.0, checked_version=5, scans=scans, readers=readers)


def test_a_jobs_row_gets_its_realised_figures_updated_and_read_back(tmp_path):
    decisions = DecisionLog(str(tmp_path / "d.jsonl"), str(tmp_path / "decisions"), flush_seconds=3600)
    decisions.write(record("events", NOW, "optimize", job={"run_id": "job1", "version": 5}))
    decisions.write(record("events", NOW + timedelta(minutes=1), "skip"))
    first = figures(measured_job(2, 3e6), THRESHOLDS)
    decisions.realised("events", NOW, first)
    assert decisions.read("events")[0]["realised"] == first  # queued figures are read before they commit
    decisions.flush()
    later = figures(measured_job(5, 7e6), THRESHOLDS)  # more scans arrived: the row's figures grow
    decisions.realised("events", NOW, later)
    decisions.flush()
    rows = DeltaTable(str(tmp_path / "decisions")).to_pyarrow_table().to_pylist()
    (job,) = [r for r in rows if r["operation_id"] == "job1"]
    assert job["realised_benefit"] == later["benefit"] == round(7e6 / 1e6 * THRESHOLDS.cost_per_mb_read, 4)
    assert job["realised_bytes_saved"] == 7e6 and job["realised_scans"] == 5 and json.loads(job["realised"]) == later
    assert [r["realised_benefit"] for r in rows if r["operation_id"] is None] == [None]
    assert len(rows) == 2  # updated in place, no row added
    read = decisions.read("events")
    assert read[0]["realised"] == later and "realised" not in read[1]
    assert LoggedDecision.from_dict(read[0]).realised == LoggedRealised.from_dict(later)


def test_a_decisions_table_written_before_the_realised_columns_gains_them(tmp_path):
    old = pa.table(
        {
            "start_time": pa.array([NOW], pa.timestamp("us", tz="UTC")),
            "table_name": ["events"],
            "operation_id": ["job1"],
            "record": [json.dumps(record("events", NOW, "optimize", job={"run_id": "job1"}))],
        }
    )
    write_deltalake(str(tmp_path / "decisions"), old)
    decisions = DecisionLog(str(tmp_path / "d.jsonl"), str(tmp_path / "decisions"))
    shown = figures(measured_job(1, 1e6), THRESHOLDS)
    decisions.realised("events", NOW, shown)
    assert decisions.flush() == 0
    (row,) = DeltaTable(str(tmp_path / "decisions")).to_pyarrow_table().to_pylist()
    assert row["realised_scans"] == 1 and decisions.read("events")[0]["realised"] == shown


def test_a_tick_measures_earlier_jobs_on_the_scans_it_tails(tmp_path, capsys):
    """No Spark: the tick's estimate stops at the new-data threshold; the measurement needs only the logs."""
    from optimizer.cli import main
    from optimizer.config import load_config
    from optimizer.service.realised import track_job
    from optimizer.service.service import context
    from optimizer.service.tick import tick

    table = unclustered(tmp_path / "events")
    version = cluster(table, "job1")
    write_config(tmp_path, [{"name": "events", "path": table.uri}])
    ctx = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: None)  # handed over, never used
    settings = ctx.config.tables[0]
    settings = settings.model_copy(
        update={"thresholds": settings.thresholds.model_copy(update={"min_new_bytes": 1 << 40})}
    )
    ran = job_record("job1", version, T0)
    ctx.decisions.write(ran.as_dict())
    ctx.state.save(track_job(TableState("events"), ran))
    QueryLogTable(settings.query_log_path).append(
        [scan(T0 - timedelta(minutes=1), "x < 250"), scan(T0 + timedelta(minutes=1), "x < 250")]
    )

    ticked = tick(settings, ctx, T0 + timedelta(minutes=5))
    (shown,) = ticked.measured
    saved = sum(sizes(table, version - 1).values()) - sizes(table, version)["job1-0.parquet"]
    assert shown["scans"] == 1 and shown["bytes_saved"] == saved
    assert ticked.as_dict()["measured"] == [shown]  # the decision log's line says what was measured
    state = ctx.state.load("events")
    assert state.measured[0].scans == 1 and state.realised.bytes_saved == saved
    ctx.decisions.flush()
    assert ctx.decisions.read("events")[0]["realised"]["bytes_saved"] == saved
    assert main(["decisions", "--config", str(tmp_path / "deltaopt.yaml")]) == 0
    assert (
        f"realised: {shown['benefit']:,.1f} cluster-s, {saved:,.0f} bytes saved over 1 scan(s)"
        in capsys.readouterr().out
    )

    again = tick(settings, ctx, T0 + timedelta(minutes=6))  # no new scan: nothing measured again
    assert again.measured == () and ctx.state.load("events").realised == state.realised


def test_status_shows_and_sums_what_jobs_realised(tmp_path, capsys):
    from optimizer.cli import main

    write_config(tmp_path, [{"name": "a", "path": str(tmp_path / "a")}, {"name": "b", "path": str(tmp_path / "b")}])
    store = StateStore(tmp_path / "state")
    store.save(TableState("a", realised=RealisedTotals(1, 10, 5e6, 0.05, 0.1, 0.05)))
    b_totals = RealisedTotals(2, 30, 15e6, 0.15, 0.1, 0.15, estimated_jobs=3)  # enough jobs for a factor
    store.save(TableState("b", realised=b_totals, measured=(measured_job(3, 2e6),)))
    config = str(tmp_path / "deltaopt.yaml")
    assert main(["status", "--fleet", "--config", config, "--json"]) == 0
    fleet = json.loads(capsys.readouterr().out)["realised"]
    assert fleet == {"jobs": 3, "scans": 40, "bytes_saved": 20e6, "benefit": 0.2, "estimated": 0.2, "ratio": 1.0}
    assert main(["status", "--fleet", "--config", config]) == 0
    assert "realised: 0.2 cluster-s saved (20.0 MB) over 40 scan(s) after 3 job(s)" in capsys.readouterr().out
    assert main(["status", "--config", config, "--json"]) == 0
    a, b = json.loads(capsys.readouterr().out)
    assert a["realised"]["benefit"] == 0.05 and a["realised"]["measuring"] == []
    assert b["realised"]["ratio"] == round(0.1 / 0.15, 4) and b["realised"]["measuring"][0]["scans"] == 3
    assert (a["realised"]["factor"], b["realised"]["factor"]) == (None, 1.5)  # what b's next benefits are scaled by
    assert main(["status", "--config", config]) == 0
    assert "after 2 job(s); estimated / realised x0.67; next benefits x1.50" in capsys.readouterr().out


@pytest.mark.spark
def test_a_service_job_is_measured_on_the_scans_after_it(service):  # noqa: F811
    """The job a tick ran is kept for measuring with its estimate; the next tick's scans measure it and
    its decisions row gets the figures."""
    from optimizer.service.tick import tick

    ctx, table_path, _ = service
    settings = ctx.config.tables[0]
    ran = tick(settings, ctx, SERVICE_NOW)
    assert ran.action.value == "optimize" and ran.job is not None and ran.job.outcome is not None
    (tracked,) = ctx.state.load(settings.name).measured
    assert tracked.run_id == ran.job.run_id and tracked.version == ran.job.outcome.version
    assert tracked.row_ts == SERVICE_NOW.isoformat() and tracked.estimated_share is not None
    log_queries(table_path + "_querylog", count=10, now=SERVICE_NOW + timedelta(minutes=30))
    later = tick(settings, ctx, SERVICE_NOW + timedelta(minutes=31))
    (shown,) = later.measured
    assert shown["run_id"] == ran.job.run_id and shown["scans"] == 10 and shown["bytes_saved"] > 0
    assert shown["estimated_for_scans"] is not None and shown["ratio"] is not None
    ctx.decisions.flush()
    (job_row,) = [r for r in ctx.decisions.read(settings.name) if r.get("job", {}).get("run_id") == ran.job.run_id]
    assert job_row["realised"]["scans"] == 10


def test_a_job_started_by_the_tick_that_measured_earlier_jobs_keeps_those_figures():
    """The record of a job the tick starts at once is built from the tick's draft (`service.jobs`): the
    jobs its scans measured stay in it (they were dropped when the list lived on the tick alone)."""
    from dataclasses import replace

    from optimizer.config import TableSettings
    from optimizer.service.draft import Draft

    draft = Draft(measured=({"run_id": "r1", "benefit": 2.5},))
    handed = replace(draft)  # what `JobStart` is given
    data = handed.record(TableSettings(name="events", path="/t"), NOW, dry_run=False, seconds=0.1).as_dict()
    assert data["measured"] == [{"run_id": "r1", "benefit": 2.5}]
