"""Idle checks that cost nothing: the last verdict is repeated while nothing it was made from moved,
without reading the table, the query log, a sidecar or Spark, and without a decisions-table commit;
new data, new queries, another configuration or cost model, or a day passing make a full tick."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from costmodel.cost import CostModel
from optimizer.service.idle import latest_version
from tests.service.test_service import NOW, log_queries, make_table, service  # noqa: F401 - the fixture


def test_the_newest_version_without_replaying_the_log(tmp_path):
    path = str(tmp_path / "t")
    assert latest_version(path) is None
    for _ in range(3):
        write_deltalake(path, pa.table({"x": [1]}), mode="append")
    assert latest_version(path) == DeltaTable(path).version() == 2
    DeltaTable(path).create_checkpoint()
    for _ in range(40):  # more commits after the checkpoint than one probe batch
        write_deltalake(path, pa.table({"x": [1]}), mode="append")
    assert latest_version(path) == DeltaTable(path).version() == 42


@pytest.fixture
def idle(service, monkeypatch):  # noqa: F811
    """The service's table with a threshold it never reaches: every full tick is a cheap "skip"."""
    ctx, table_path, tmp_path = service
    table = ctx.config.tables[0]
    high = table.thresholds.model_copy(update={"min_new_bytes": 1 << 40})
    ctx.config = ctx.config.model_copy(update={"tables": (table.model_copy(update={"thresholds": high}),)})
    return ctx, table_path, tmp_path


def nothing_read(monkeypatch, ctx) -> None:
    """Make any read of the table, the query log or Spark fail the test."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an unchanged table was read")

    monkeypatch.setattr("optimizer.service.tick.open_table", refuse)
    monkeypatch.setattr("optimizer.service.tick.QueryLogTable", refuse)
    monkeypatch.setattr(ctx, "spark", refuse)


def decision_rows(ctx) -> int:
    return DeltaTable(ctx.config.service.decisions_path).to_pyarrow_table().num_rows


def test_an_unchanged_table_repeats_its_verdict_at_no_cost(idle, monkeypatch):
    from optimizer.service.tick import tick

    ctx, _, _ = idle
    first = tick(ctx.config.tables[0], ctx, NOW)
    assert first.action.value == "skip" and not first.reused and "too little new data" in first.reason
    rows = decision_rows(ctx)
    with monkeypatch.context() as patched:
        nothing_read(patched, ctx)
        again = tick(ctx.config.tables[0], ctx, NOW + timedelta(minutes=5))
    assert again.reused and again.action.value == "skip" and "nothing moved since" in again.reason
    assert "too little new data" in again.reason
    assert decision_rows(ctx) == rows  # no commit
    lines = ctx.decisions.jsonl_path.read_text().splitlines()
    assert len(lines) == 2 and '"reused": true' in lines[-1]  # the decision is still logged


@pytest.mark.parametrize("change", ["new data", "new queries", "configuration", "cost model", "a day"])
def test_the_repeated_verdict_is_made_afresh_when_something_moved(idle, spark, change):
    from optimizer.service.tick import tick

    ctx, table_path, _ = idle
    table = ctx.config.tables[0]
    assert not tick(table, ctx, NOW).reused
    assert tick(table, ctx, NOW + timedelta(minutes=1)).reused
    later = NOW + timedelta(minutes=2)
    if change == "new data":
        make_table(spark, table_path, rows=100, start=10**7, files=1)
    elif change == "new queries":
        log_queries(table_path + "_querylog", count=1, now=later)
    elif change == "configuration":
        table = table.model_copy(update={"thresholds": table.thresholds.model_copy(update={"sample_rows": 999})})
    elif change == "cost model":
        ctx.cost_model = CostModel(overhead=2.0, base=10.0, per_z=1.0, per_sop=1.0, per_additional=0.1)
    else:
        later = NOW + timedelta(days=1, minutes=2)
    fresh = tick(table, ctx, later)
    assert not fresh.reused, fresh.reason
    assert tick(table, ctx, later + timedelta(minutes=1)).reused  # and that verdict is repeated in turn


def test_a_job_or_an_error_is_never_repeated(service):  # noqa: F811
    """A tick that optimised moved the table; the next one estimates again (and finds nothing new)."""
    from optimizer.service.tick import tick

    ctx, _, _ = service
    optimised = tick(ctx.config.tables[0], ctx, NOW)
    assert optimised.action.value == "optimize" and optimised.job is not None
    after = tick(ctx.config.tables[0], ctx, NOW + timedelta(minutes=1))
    assert not after.reused
    ctx.state.save(ctx.state.load("events").with_(verdict=None))
    broken = ctx.config.tables[0].model_copy(update={"path": ctx.config.tables[0].path + "_missing"})
    assert tick(broken, ctx, NOW).action.value == "error"
    assert ctx.state.load("events").verdict is None


def test_serve_ticks_many_tables_on_a_fixed_pool(tmp_path, monkeypatch):
    """40 tables, 2 workers: never more than 2 ticks at once, no thread per table, and every table ticked."""
    import threading
    import time

    from optimizer.config import parse_config
    from optimizer.service import service as service_module

    tables = [{"name": f"t{i}", "path": str(tmp_path / f"t{i}"), "interval": 1} for i in range(40)]
    config = parse_config(
        {"tables": tables, "service": {"state_dir": str(tmp_path / "state"), "workers": 2, "jitter": 0}}
    )
    ctx = service_module.context(config, spark=lambda: None)
    running, peak, seen, lock = [0], [0], set(), threading.Lock()

    def fake_tick(table, _ctx, now=None):  # type: ignore[no-untyped-def]
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            seen.add(table.name)
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    monkeypatch.setattr(service_module, "tick", fake_tick)
    threads_before = threading.active_count()
    server = threading.Thread(target=service_module.serve, args=(ctx, False))
    server.start()
    deadline, peak_threads = time.monotonic() + 20, threads_before
    while time.monotonic() < deadline and len(seen) < 40:
        time.sleep(0.1)
        peak_threads = max(peak_threads, threading.active_count())
    ctx.stopping.set()
    server.join(timeout=30)
    assert len(seen) == 40 and peak[0] <= 2
    assert peak_threads - threads_before <= 2 + 3  # the pool, the scheduler's thread, serve's own
