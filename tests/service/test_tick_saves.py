"""A tick saves the table's state once: a tick without a job and a tick whose job waits in the fleet
queue write it once, with the record's summary; a tick whose job starts at once hands its state to the
job, which saves it with its crash marker and once more with its record. State files written before
the last verdict was typed still load."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import pytest

from optimizer.service.state import LastVerdict, StateStore, TableState
from optimizer.verdict import Verdict
from tests.service.test_service import NOW, service  # noqa: F401 - the fixture


@dataclass(frozen=True)
class Saved:
    """What one save wrote: enough to tell the crash marker from the tick's or the job's own save."""

    running: bool
    ticks: int
    action: object


def count_saves(monkeypatch: pytest.MonkeyPatch, store: StateStore) -> list[Saved]:
    saves: list[Saved] = []
    real = store.save

    def spy(state: TableState) -> None:
        saves.append(Saved(state.run is not None, state.ticks, state.last_decision.get("action")))
        real(state)

    monkeypatch.setattr(store, "save", spy)
    return saves


@pytest.mark.spark
def test_a_tick_without_a_job_saves_once(service, monkeypatch):  # noqa: F811
    from optimizer.service.tick import tick

    ctx, _, _ = service
    table = ctx.config.tables[0]
    high = table.thresholds.model_copy(update={"min_new_bytes": 1 << 40})  # a cheap "skip"
    table = table.model_copy(update={"thresholds": high})
    saves = count_saves(monkeypatch, ctx.state)
    record = tick(table, ctx, NOW)
    assert record.action is Verdict.SKIP and record.job is None
    assert saves == [Saved(running=False, ticks=1, action="skip")]
    again = tick(table, ctx, NOW + timedelta(minutes=1))  # a repeated verdict: saved once too
    assert again.reused and saves[1:] == [Saved(running=False, ticks=2, action="skip")]


@pytest.mark.spark
def test_a_queued_tick_saves_once_and_its_job_saves_marker_and_record(service, monkeypatch):  # noqa: F811
    """The job waits (ranking waits for another table's first tick): one save, with the deferred record.
    The next tick repeats that verdict and its job starts at once: the job begins from that tick's
    state (its tick counted) and saves the crash marker, then once with its record."""
    from optimizer.service.tick import tick

    ctx, _, _ = service
    table = ctx.config.tables[0]
    ctx.queue.warm_up({table.name, "other"})
    saves = count_saves(monkeypatch, ctx.state)
    queued = tick(table, ctx, NOW)
    assert queued.action is Verdict.DEFERRED and "ranking waits for the first tick" in queued.reason
    assert saves == [Saved(running=False, ticks=1, action="deferred")]
    stored = ctx.state.load(table.name).verdict
    assert stored is not None and stored.action is Verdict.DEFERRED

    ctx.queue.warm_up(set())
    with monkeypatch.context() as patched:  # nothing moved: the verdict stands, no estimate
        patched.setattr("optimizer.service.jobs.estimate", lambda *_a, **_k: pytest.fail("estimated again"))
        started = tick(table, ctx, NOW + timedelta(minutes=1))
    assert started.action is Verdict.OPTIMIZE and started.job is not None, started.reason
    assert "started by the fleet queue" in started.reason  # the record of the job queued at NOW
    assert saves[1:] == [
        Saved(running=True, ticks=2, action="deferred"),
        Saved(running=False, ticks=2, action="optimize"),
    ]
    state = ctx.state.load(table.name)
    assert state.ticks == 2 and state.run is None and state.verdict is None
    assert state.last_optimized_version == started.job.outcome.version  # type: ignore[union-attr]


@pytest.mark.spark
def test_a_tick_whose_job_starts_at_once_saves_marker_and_record(service, monkeypatch):  # noqa: F811
    from optimizer.service.tick import tick

    ctx, _, _ = service
    saves = count_saves(monkeypatch, ctx.state)
    record = tick(ctx.config.tables[0], ctx, NOW)
    assert record.action is Verdict.OPTIMIZE and record.job is not None, record.reason
    assert saves == [Saved(running=True, ticks=1, action=None), Saved(running=False, ticks=1, action="optimize")]


def test_state_files_of_earlier_versions_load(tmp_path):
    """Before `LastVerdict`, "no verdict" was stored as ``{}``; a verdict has the same four fields. One
    that cannot be read whole is not repeated (the next tick decides afresh)."""
    store = StateStore(tmp_path)
    verdict = {"key": "k1", "at": NOW.isoformat(), "action": "deferred", "reason": "net 12 cluster-s"}
    shapes = {"none": {}, "verdict": verdict, "partial": {"key": "k1"}, "unknown": {**verdict, "action": "later"}}
    for name, stored in shapes.items():
        old = {"table": name, "log_version": 3, "ticks": 7, "verdict": stored, "last_decision": {"action": "skip"}}
        (tmp_path / f"{name}.state.json").write_text(json.dumps(old))
    assert store.load("none").verdict is None and store.load("none").ticks == 7
    assert store.load("verdict").verdict == LastVerdict("k1", NOW.isoformat(), Verdict.DEFERRED, "net 12 cluster-s")
    assert store.load("partial").verdict is None and store.load("unknown").verdict is None
    store.save(store.load("verdict"))  # the shape written today is the one read
    assert json.loads(store.path("verdict").read_text())["verdict"] == verdict
    store.save(store.load("none"))
    assert json.loads(store.path("none").read_text())["verdict"] is None and store.load("none").log_version == 3
