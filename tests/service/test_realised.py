"""Realised benefit (`service.realised`) on a workload whose saving is known by construction: 4 files
each spanning every value of x, rewritten by a job into 4 files of disjoint x ranges; a scan of one
range then reads one of the job's files instead of all 4 it replaced. The bytes are the files' own
sizes in the Delta log, so the expected saving is computed here from them, not hard-coded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake

from optimizer.config import Thresholds
from optimizer.service.executors import JobOutcome
from optimizer.service.realised import figures, measure, track_job
from optimizer.service.record import JobRecord, TickRecord
from optimizer.service.state import MeasuredJob, StateStore, TableState
from optimizer.table import open_table
from optimizer.table.access import StagedFile, TableAccess
from optimizer.verdict import Verdict
from querylog.records import ScanRecord

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
RANGE = 250  # x values per clustered file
THRESHOLDS = Thresholds()  # standard readers only, 0.01 cluster-s per MB, a 7-day horizon


def frame(xs: list[int]) -> pa.Table:
    return pa.table({"x": pa.array(xs, pa.int64()), "y": pa.array([x * 7919 % 1013 for x in xs], pa.int64())})


def unclustered(path: Path) -> TableAccess:
    """4 files, each holding every 4th x of 0..999: each spans (nearly) every value."""
    for i in range(4):
        write_deltalake(str(path), frame(list(range(i, 4 * RANGE, 4))), mode="append")
    return open_table(str(path))


def cluster(table: TableAccess, run_id: str, parts: int = 4) -> int:
    """A layout job: the active files replaced (``dataChange=false``) by `parts` files of disjoint x
    ranges, with Delta statistics of x. Returns the committed version."""
    snapshot = table.snapshot()
    step = 4 * RANGE // parts
    staged = []
    for i in range(parts):
        xs = list(range(i * step, (i + 1) * step))
        name = f"{run_id}-{i}.parquet"
        pq.write_table(frame(xs), f"{table.uri}/{name}")
        stats = {"numRecords": len(xs), "minValues": {"x": xs[0]}, "maxValues": {"x": xs[-1]}, "nullCount": {"x": 0}}
        staged.append(StagedFile(name, Path(f"{table.uri}/{name}").stat().st_size, json.dumps(stats)))
    return table.rewrite(snapshot.version, snapshot.files, staged, {"runId": run_id, "operation": "OPTIMIZE"})


def job_record(run_id: str, version: int, at: datetime) -> TickRecord:
    """The record a committed job writes (what `JobRun` hands `track_job`)."""
    job = JobRecord("local", "test", run_id, JobOutcome("local", version))
    return TickRecord(at, "events", "/lake/events", False, Verdict.OPTIMIZE, "r", job=job)


def scan(at: datetime, *filters: str) -> ScanRecord:
    return ScanRecord(f"q-{at.timestamp()}-{filters}", at, "events", filters, ("x",), "test")


def sizes(table: TableAccess, version: int) -> dict[str, int]:
    return {f.path: f.size for f in table.snapshot(version).files}


def test_a_range_scan_after_the_job_saves_the_replaced_files_it_no_longer_reads(tmp_path):
    table = unclustered(tmp_path / "events")
    version = cluster(table, "job1")
    state = track_job(TableState("events"), job_record("job1", version, T0))
    (tracked,) = state.measured
    assert tracked.version == version and tracked.committed == T0.isoformat() and tracked.scans == 0

    scans = [
        scan(T0 - timedelta(minutes=1), "x BETWEEN 250 AND 499"),
        scan(T0 + timedelta(minutes=1), "x BETWEEN 250 AND 499"),
    ]
    state, measured = measure(table, state, scans, latest=table.snapshot(), thresholds=THRESHOLDS, now=T0)

    replaced = sum(sizes(table, version - 1).values())
    (second,) = [size for path, size in sizes(table, version).items() if path == "job1-1.parquet"]
    (figured,) = measured
    assert figured["scans"] == 1 and figured["unevaluable"] == 0  # the scan before the job does not count
    assert figured["bytes_read_before"] == replaced and figured["bytes_read_after"] == second
    assert figured["bytes_saved"] == replaced - second
    assert figured["benefit"] == round((replaced - second) / 1e6 * THRESHOLDS.cost_per_mb_read, 4)
    assert figured["readers"]["deltaopt"] == figured["readers"]["standard"]  # no extended statistics here
    totals = state.realised
    assert (totals.jobs, totals.scans, totals.bytes_saved) == (1, 1, replaced - second)


def test_figures_grow_with_later_scans_and_only_jobs_with_new_scans_are_read(tmp_path, monkeypatch):
    table = unclustered(tmp_path / "events")
    version = cluster(table, "job1")
    state = track_job(TableState("events"), job_record("job1", version, T0))
    later = scan(T0 + timedelta(minutes=2), "x < 250")
    state, _ = measure(table, state, [later], latest=table.snapshot(), thresholds=THRESHOLDS, now=T0)
    state, (again,) = measure(table, state, [later], latest=table.snapshot(), thresholds=THRESHOLDS, now=T0)
    assert again["scans"] == 2 and state.realised.scans == 2
    assert again["bytes_saved"] == 2 * (
        sum(sizes(table, version - 1).values()) - sizes(table, version)["job1-0.parquet"]
    )

    def no_read(*_a: object, **_k: object) -> None:
        raise AssertionError("a job without new scans was read")

    monkeypatch.setattr("optimizer.service.realised.job_files", no_read)
    early = scan(T0 - timedelta(minutes=5), "x < 250")  # before the job: nothing to measure
    unchanged, measured = measure(table, state, [early], latest=table.snapshot(), thresholds=THRESHOLDS, now=T0)
    assert measured == [] and unchanged.measured == state.measured


def test_a_scan_whose_filters_cannot_be_evaluated_reads_everything_on_both_sides(tmp_path):
    table = unclustered(tmp_path / "events")
    version = cluster(table, "job1")
    state = track_job(TableState("events"), job_record("job1", version, T0))
    scans = [scan(T0 + timedelta(minutes=1), "x BETWEEN (")]
    state, (figured,) = measure(table, state, scans, latest=table.snapshot(), thresholds=THRESHOLDS, now=T0)
    assert figured["unevaluable"] == 1 and figured["scans"] == 1
    assert figured["bytes_read_before"] == sum(sizes(table, version - 1).values())
    assert figured["bytes_read_after"] == sum(sizes(table, version).values())


def test_a_job_later_superseded_counts_scans_only_up_to_the_later_commit(tmp_path):
    """Job 2 rewrites job 1's files an hour later: job 1 counts only the scan before job 2's commit
    (and says so); job 2 counts the scan after it. A rewrite by another writer ends job 1's window at
    that commit's time in the log."""
    table = unclustered(tmp_path / "events")
    first = cluster(table, "job1")
    second = cluster(table, "job2", parts=2)
    state = track_job(TableState("events"), job_record("job1", first, T0))
    state = track_job(state, job_record("job2", second, T0 + timedelta(hours=1)))
    scans = [scan(T0 + timedelta(minutes=30), "x < 250"), scan(T0 + timedelta(hours=2), "x < 250")]
    state, measured = measure(table, state, scans, latest=table.snapshot(), thresholds=THRESHOLDS, now=T0)
    one, two = measured
    assert one["run_id"] == "job1" and one["scans"] == 1 and str(second) in one["superseded"]
    assert one["window"]["until"] == (T0 + timedelta(hours=1)).isoformat()
    assert two["run_id"] == "job2" and two["scans"] == 1 and two["superseded"] is None

    now = datetime.now(UTC)
    other = unclustered(tmp_path / "other")
    version = cluster(other, "job1")
    state = track_job(TableState("other"), job_record("job1", version, now - timedelta(hours=1)))
    write_deltalake(other.uri, frame(list(range(10))), mode="overwrite")  # another writer replaces every file
    after = datetime.now(UTC) + timedelta(seconds=1)
    scans = [scan(now - timedelta(minutes=30), "x < 250"), scan(after, "x < 250")]
    state, (figured,) = measure(other, state, scans, latest=other.snapshot(), thresholds=THRESHOLDS, now=now)
    assert figured["scans"] == 1 and str(version + 1) in figured["superseded"]


def test_jobs_past_their_horizon_stop_and_state_round_trips(tmp_path):
    table = unclustered(tmp_path / "events")
    version = cluster(table, "job1")
    state = track_job(TableState("events"), job_record("job1", version, T0))
    state = state.with_(measured=(state.measured[0].with_(estimated_share=0.5),))
    state, _ = measure(
        table,
        state,
        [scan(T0 + timedelta(minutes=1), "x < 250")],
        latest=table.snapshot(),
        thresholds=THRESHOLDS,
        now=T0,
    )
    store = StateStore(tmp_path / "state")
    store.save(state)
    assert store.load("events") == state and state.realised.ratio is not None
    expected = 0.5 * sum(sizes(table, version - 1).values()) / 1e6 * THRESHOLDS.cost_per_mb_read
    assert state.realised.ratio == round(expected / state.realised.realised, 4)
    horizon = timedelta(seconds=THRESHOLDS.benefit_horizon)
    late = T0 + horizon + timedelta(minutes=1)
    ended, measured = measure(
        table, state, [scan(late, "x < 250")], latest=table.snapshot(), thresholds=THRESHOLDS, now=late
    )
    assert measured == [] and ended.measured == () and ended.realised == state.realised


def test_figures_of_a_job_without_scans_are_zero_and_say_how_they_were_priced():
    job = MeasuredJob("r", 3, T0.isoformat(), None, None, checked_version=3)
    shown = figures(job, THRESHOLDS)
    assert shown["benefit"] == 0 and shown["scans"] == 0 and shown["ratio"] is None
    assert "whole files" in shown["priced"]
