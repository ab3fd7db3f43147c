"""``deltaopt serve``: APScheduler runs each table's tick on its interval, until stopped.

One interval job per table (with jitter, at most one running instance, missed runs coalesced) on a
fixed pool of ``service.workers`` threads, the first ticks spread over each table's interval. Jobs the
ticks decide go through the fleet queue (`service.fleet`): started in rank order under the job slots
and the budget, none before every table has ticked once. On SIGTERM/SIGINT no new job starts; running
ticks get a grace period to finish, then their Spark jobs are cancelled: an interrupted OPTIMIZE commits
nothing (the commit is the last, atomic step), so the table is never left half rewritten. ``--once``
runs one tick per table, then starts the decided jobs in rank order, and returns.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from costmodel.cost import load as load_cost_model
from optimizer.catalog import resolve_tables
from optimizer.config import Config, TableSettings
from optimizer.runtime import build_session
from optimizer.service.context import ServiceContext
from optimizer.service.decisions import DecisionLog
from optimizer.service.discovery import Discovery
from optimizer.service.fleet import Budget, Dispatched, FleetQueue
from optimizer.service.metrics import Metrics
from optimizer.service.record import TickRecord
from optimizer.service.state import StateStore
from optimizer.service.tick import tick
from optimizer.verdict import Verdict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
GRACE_SECONDS = 60


def context(config: Config, spark: Callable[[], SparkSession] | None = None) -> ServiceContext:
    """What the ticks share. Tables named in the catalog are resolved to their locations here (building
    the session only then), and every table's location registered with its storage options."""
    sessions: list[SparkSession] = []
    lock = threading.Lock()
    tables = config.tables

    def session() -> SparkSession:
        with lock:
            if not sessions:
                sessions.append(build_session(config.spark, tables))
            return sessions[0]

    config = resolve_tables(config, spark or session)

    queue = FleetQueue(config.service.max_concurrent_jobs, budget(config), config.service.fleet_path)
    return ServiceContext(
        config=config,
        spark=spark or session,
        state=StateStore(config.service.state_dir),
        decisions=DecisionLog(config.decision_log_path, config.service.decisions_path, config.service.decisions_flush),
        cost_model=load_cost_model(config.service.cost_model_path),
        queue=queue,
        metrics=Metrics(queue),
        estimate_slots=threading.Semaphore(config.service.max_concurrent_estimates),
    )


def budget(config: Config) -> Budget:
    settings = config.service.budget
    return Budget(settings.cluster_seconds_per_hour, settings.cluster_seconds_per_day, settings.aging)


def watched(ctx: ServiceContext) -> Discovery:
    """The configured tables and those ``discover`` finds, listed now."""
    discovery = Discovery(ctx.config, ctx.spark)
    discovery.relist()
    return discovery


def run_once(
    ctx: ServiceContext, now: datetime | None = None, tables: Sequence[TableSettings] | None = None
) -> list[TickRecord]:
    """One tick per watched table (configured, then discovered; or `tables`), in order; the jobs they
    decide wait until every table has decided, then start in rank order within the budget
    (`FleetQueue.ranked_pass`). A table whose job started returns the job's record; one whose job waits
    says why."""
    now = now or datetime.now(UTC)
    tables = tables or watched(ctx).tables()
    records, dispatched = ctx.queue.ranked_pass(now, lambda: {t.name: tick(t, ctx, now) for t in tables})
    return finish_pass(ctx, records, dispatched)


def finish_pass(ctx: ServiceContext, records: dict[str, TickRecord], dispatched: Dispatched) -> list[TickRecord]:
    """A pass's records once its queue dispatched: the started jobs' records replace their ticks', those
    still waiting say why and are written, and the pass's decision rows are committed together."""
    records = {**records, **dispatched.records}
    for name, record in records.items():
        if record.action is Verdict.DEFERRED and not record.job and "; deferred: " not in record.reason:
            why = dispatched.waiting.get(name, "waiting in the fleet queue")
            records[name] = _write(replace(record, reason=f"{record.reason}; deferred: {why}"), ctx)
    ctx.decisions.flush()
    return list(records.values())


def _write(record: TickRecord, ctx: ServiceContext) -> TickRecord:
    """Record a tick the pass held back, now that it says why its job waits: the decision log (a
    repeated verdict commits nothing) and the state's summary."""
    ctx.state.save(ctx.state.load(record.table).with_(last_decision=record.summary()))
    ctx.log(record, table=not record.reused)
    return record


def serve(ctx: ServiceContext, install_signals: bool = True) -> None:
    """Tick every table on its interval until SIGTERM/SIGINT (or `ctx.stopping` is set), on a fixed pool
    of `service.workers` threads whatever the number of tables; the first ticks are spread over each
    table's interval so that they do not all fire together."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    discovery = watched(ctx)
    tables = discovery.tables()
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(ctx.config.service.workers)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone=UTC,
    )
    _schedule(scheduler, ctx, tables)
    # jobs of other tables than the dispatching tick's start on the pool; none before each table's first
    # tick, so that the first pass ranks every candidate (`service.fleet`)
    ctx.queue.launch = lambda job: scheduler.add_job(job, name="fleet job")
    ctx.queue.warm_up({t.name for t in tables if not t.paused})
    flush = max(ctx.config.service.decisions_flush, 1.0)
    scheduler.add_job(ctx.decisions.flush, "interval", seconds=flush, id="flush decisions")
    if ctx.config.discover:  # new tables join, vanished ones leave, without a restart
        relist = min(source.relist for source in ctx.config.discover)
        scheduler.add_job(_relisted, "interval", seconds=relist, args=[scheduler, ctx, discovery], id="relist")
    if ctx.metrics is not None and ctx.config.service.metrics_port is not None:
        ctx.metrics.serve(ctx.config.service.metrics_port, ctx.config.service.metrics_address)
        log.info("metrics on http://%s:%d/metrics", ctx.config.service.metrics_address, ctx.config.service.metrics_port)
    if install_signals:
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda signum, _frame: _request_stop(ctx, signum))
    scheduler.start()
    log.info("serving %d table(s): %s", len(tables), ", ".join(t.name for t in tables))
    try:
        while not ctx.stopping.wait(1.0):
            pass
    finally:
        _shutdown(scheduler, ctx)


def _schedule(scheduler: Any, ctx: ServiceContext, tables: Sequence[TableSettings]) -> None:
    """A tick job per table, the first ticks spread over each table's interval."""
    start = datetime.now(UTC) + timedelta(seconds=1)
    for position, table in enumerate(tables):
        scheduler.add_job(
            tick,
            "interval",
            seconds=table.interval,
            jitter=ctx.config.service.jitter or None,
            args=[table, ctx],
            id=table.name,
            name=f"tick {table.name}",
            next_run_time=start + timedelta(seconds=table.interval * position / len(tables)),
        )


def _relisted(scheduler: Any, ctx: ServiceContext, discovery: Discovery) -> None:
    """List the discovered sources again: tick the tables that appeared, stop those that went."""
    before = {job.id for job in scheduler.get_jobs() if job.name.startswith("tick ")}
    discovery.relist()
    now = {t.name: t for t in discovery.tables()}
    for name in sorted(before - set(now)):
        log.warning("%s is no longer found by discovery: no longer watched", name)
        scheduler.remove_job(name)
        ctx.queue.drop(name)
    added = [now[name] for name in sorted(set(now) - before)]
    if added:
        log.info("discovered %d new table(s): %s", len(added), ", ".join(t.name for t in added))
        _schedule(scheduler, ctx, added)


def _request_stop(ctx: ServiceContext, signum: int) -> None:
    log.info("signal %d: stopping after the running ticks (grace %ds)", signum, GRACE_SECONDS)
    ctx.stopping.set()


def _shutdown(scheduler: Any, ctx: ServiceContext) -> None:
    ctx.queue.stop()
    scheduler.pause()
    done = threading.Event()

    def wait_for_ticks() -> None:
        scheduler.shutdown(wait=True)
        done.set()

    threading.Thread(target=wait_for_ticks, daemon=True).start()
    if not done.wait(GRACE_SECONDS):
        log.warning(
            "ticks still running after %ds: cancelling their Spark jobs (nothing half-committed)", GRACE_SECONDS
        )
        try:
            ctx.spark().sparkContext.cancelAllJobs()
        except Exception as err:  # best effort on the way out; the commit is atomic anyway
            log.warning("could not cancel Spark jobs: %s", err)
        done.wait(GRACE_SECONDS)
    ctx.decisions.flush()
    log.info("stopped")
