"""One tick for one table: a plain function the scheduler, ``--once`` and tests all call.

    a job of this table running? ─► record that, decide nothing
    paused? ─► record "paused"; a table feature no rewrite may touch (liquid clustering)? ─► "skip", why
    nothing moved since the last verdict? ─► repeat it (`service.idle`), no log replay, no Spark
    settle a run the state says was in progress (committed: note it; else it died: retry later)
    tail the query log from the stored position
    estimate: enough unclustered bytes? features (benefit search)? cost vs benefit? ─► decision
    optimise? merge: the young runs laid out the same way join the new data when the union nets more
    no new data to optimise? drift: re-cluster files laid out for an older workload, within the budget
    a job decided (not a dry run)? ─► the fleet queue (`service.fleet`): it starts now if it ranks
        high enough for a free slot and the budget, else the record says why it waits
    write the decision record, save the state

Errors of one table (unreachable table, failed job, lost race) are recorded as that tick's outcome
and never stop the service or the other tables.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from functools import cache

from optimizer.analysis.context import TableContext
from optimizer.clustering.by_delta import delta_expressible
from optimizer.clustering.groups import layout_key
from optimizer.config import TableSettings
from optimizer.errors import KNOWN, UnsupportedTableError
from optimizer.estimate.decision import estimate
from optimizer.features import FeatureSet
from optimizer.service.context import Draft, ServiceContext
from optimizer.service.drift import plan_recluster
from optimizer.service.fleet import Candidate
from optimizer.service.idle import latest_version, reusable, verdict_key
from optimizer.service.jobs import Job, PendingJob, job_for, settle_run, sql_only, start
from optimizer.service.merge import plan_merge
from optimizer.service.record import Action, TickRecord
from optimizer.service.state import TableState
from optimizer.skipping.extended import load_index
from optimizer.table import open_table
from optimizer.table.committer import HISTORY_CHECKED
from optimizer.table.protocol import check_rewritable
from querylog.store import QueryLogTable

log = logging.getLogger(__name__)
__all__ = ["ServiceContext", "tick", "write"]


def tick(table: TableSettings, ctx: ServiceContext, now: datetime | None = None) -> TickRecord:
    """Run one tick for `table` and return its record (also written to the decision log): the job's
    record when the tick's job started at once."""
    now = now or datetime.now(UTC)
    with ctx.queue.ticking(table.name) as busy:
        if busy is not None:  # its job started from the queue and runs: deciding again would race it
            draft = Draft(reason=busy)
            record = draft.record(table, now, dry_run=False, seconds=0.0)
            ctx.log(record, table=False)
            return record
        return _decide_and_queue(table, ctx, now)


def _decide_and_queue(table: TableSettings, ctx: ServiceContext, now: datetime) -> TickRecord:
    started = time.perf_counter()
    dry_run = ctx.config.service.dry_run if table.dry_run is None else table.dry_run
    draft = Draft()
    state = ctx.state.load(table.name)
    try:
        if table.paused:
            draft.action, draft.reason = Action.PAUSED, "table is paused in the configuration"
        else:
            state = _tick_unless_unchanged(table, ctx, now, state, draft, dry_run)
    except KNOWN as err:
        draft.action, draft.reason = Action.ERROR, f"{type(err).__name__}: {err}"
        log.warning("%s: %s", table.name, draft.reason)
    except Exception as err:  # one table's failure must not stop the others; it is recorded
        draft.action, draft.reason = Action.ERROR, f"unexpected {type(err).__name__}: {err}"
        log.exception("tick of %s failed", table.name)
    if draft.action is Action.ERROR:
        state, draft.pending, draft.queued = state.with_(verdict={}), None, False
    state = state.with_(ticks=state.ticks + 1)
    if draft.pending is None and not draft.queued:  # no job: the state is saved once, with the record
        ctx.queue.drop(table.name)  # decided again without a job: a job queued earlier is void
        record = draft.record(table, now, dry_run=dry_run, seconds=time.perf_counter() - started)
        ctx.state.save(state.with_(last_decision=record.summary()))
        ctx.log(record, table=not record.reused)  # a repeated verdict commits nothing
        return record
    if draft.pending is not None:
        ctx.queue.submit(_candidate(table, ctx, now, state, draft))
    ctx.state.save(state)  # before the job may start: it reads the state
    dispatched = ctx.queue.dispatch(now, own=table.name)
    if table.name in dispatched.records:  # started at once: the job's record is the tick's
        return dispatched.records[table.name]
    draft.action = Action.DEFERRED
    if dispatched.held:  # the pass ranks first: `run_once` says why it waits and writes the record
        return draft.record(table, now, dry_run=dry_run, seconds=time.perf_counter() - started)
    draft.reason = f"{draft.reason}; deferred: {dispatched.deferred or 'waiting in the fleet queue'}"
    return write(draft.record(table, now, dry_run=dry_run, seconds=time.perf_counter() - started), ctx)


def write(record: TickRecord, ctx: ServiceContext) -> TickRecord:
    """Record the tick: the decision log (a repeated verdict commits nothing) and the state's summary."""
    ctx.state.save(ctx.state.load(record.table).with_(last_decision=record.summary()))
    ctx.log(record, table=not record.reused)
    return record


def _candidate(table: TableSettings, ctx: ServiceContext, now: datetime, state: TableState, draft: Draft) -> Candidate:
    """The fleet queue's view of the draft's job; starting it runs the job and records its outcome."""
    pending = draft.pending
    assert pending is not None
    decided = replace(draft)  # the tick goes on with its own draft (e.g. to say why it waits)
    return Candidate(
        table=table.name,
        kind=pending.action.value,
        net=pending.net,
        cost=pending.cost,
        key=state.verdict.get("key", ""),
        since=now,
        start=lambda when, note: start(table, ctx, decided, when, note),
    )


def _tick_unless_unchanged(
    table: TableSettings, ctx: ServiceContext, now: datetime, state: TableState, draft: Draft, dry_run: bool
) -> TableState:
    """The last verdict again when nothing it was made from moved (`service.idle`), else a full tick. A
    verdict that queued a job stands while the queue still holds that job."""
    versions = (
        latest_version(table.path, table.storage_options),
        latest_version(table.query_log_path, table.storage_options),
    )
    key = verdict_key(table, ctx.config, ctx.cost_model, versions)
    last = state.verdict
    waiting = last.get("action") != Action.DEFERRED.value or ctx.queue.holds(table.name, key)
    if state.run is None and last and waiting and reusable(last.get("key"), last.get("at", ""), key, now):
        draft.action, draft.reused = Action(last["action"]), True
        draft.queued = draft.action is Action.DEFERRED
        draft.reason = f"nothing moved since {last['at']} (table version {versions[0]}, query log version "
        draft.reason += f"{versions[1]}): {last['reason']}"
        return state
    state = _tick(table, ctx, now, state, draft, dry_run)
    if not _repeatable(draft, table):
        return state.with_(verdict={})
    action = Action.DEFERRED if draft.pending is not None else draft.action
    return state.with_(verdict={"key": key, "at": now.isoformat(), "action": action.value, "reason": draft.reason})


def _repeatable(draft: Draft, table: TableSettings) -> bool:
    """Whether a tick with the same inputs would decide the same: no job ran (it moved the table), and no
    drift check was held back by a byte budget (the daily one frees itself over time). A job decided and
    handed to the queue is repeatable: until it starts, the same inputs decide the same job."""
    if draft.pending is not None:
        return True
    if draft.action not in (Action.SKIP, Action.OPTIMIZE_DRY_RUN, Action.RECLUSTER_DRY_RUN) or draft.job is not None:
        return False
    held_back = draft.recluster is not None and draft.recluster.budget <= 0
    return not (held_back and table.thresholds.recluster_bytes_per_tick > 0)


def _tick(
    table: TableSettings, ctx: ServiceContext, now: datetime, state: TableState, draft: Draft, dry_run: bool
) -> TableState:
    delta = open_table(table.path)
    state = settle_run(delta, state, draft)
    snapshot = delta.snapshot()  # read once: the feature check and the estimate share it
    try:  # a table no rewrite may touch (liquid clustering, an unknown feature) costs no estimate
        check_rewritable(snapshot.features, table.path, delta_engine=True)
    except UnsupportedTableError as refused:
        draft.action, draft.reason = Action.SKIP, str(refused)
        return state
    log_table = QueryLogTable(table.query_log_path)
    tail = log_table.tail(state.log_version, table.identity)
    draft.new_queries = len(tail.records)
    state = state.with_(log_version=tail.version)
    context = TableContext(
        ctx.spark(), delta, table.identity, log_table, table.thresholds, now, ctx.cost_model, ctx.locations()
    )
    index = load_index(delta, snapshot)
    # the executor (from the latest writers' commitInfo) only when a job could follow: enough new data
    # to estimate (what it can apply is what the estimate prices), or clustered files that may drift
    since = max((state.last_optimized_version or -1) + 1, snapshot.version - HISTORY_CHECKED + 1, 0)
    job = cache(lambda: job_for(table, ctx, delta.history(since)))
    new_bytes = sum(f.size for f in snapshot.files if f.path not in index)
    sampled = new_bytes >= table.thresholds.min_new_bytes  # below it the estimate stops before Spark
    applies = delta_expressible if sampled and sql_only(job()) else None
    with ctx.estimate_slots if sampled else nullcontext():  # Spark samples: a few at once, whatever the count
        decision = estimate(context, snapshot=snapshot, index=index, applies=applies)
    draft.decision = decision
    draft.action, draft.reason = Action(decision.action), decision.reason
    if decision.features is not None:  # what the estimate would lay data out on for today's workload
        state = state.with_layout(layout_key(decision.features), now)
    if not decision.optimize:
        if not index:  # nothing deltaopt clustered: nothing can drift
            return state
        return _drift(table, ctx, now, state, draft, dry_run=dry_run, job=job(), context=context)
    draft.merge = None if ctx.stopping.is_set() else plan_merge(context, state, decision)
    files: tuple[str, ...] | None = None
    merged = None
    if draft.merge is not None and draft.merge.taken and draft.merge.decision is not None:
        decision, files, merged = draft.merge.decision, draft.merge.files, draft.merge.bytes
        draft.reason = f"{draft.reason}; {draft.merge.reason}"
        state = state.with_layout(layout_key(decision.features), now)
    if dry_run:
        draft.action, draft.reason = Action.OPTIMIZE_DRY_RUN, draft.reason + "; dry run: not optimised"
        return state
    draft.pending = PendingJob(
        Action.OPTIMIZE,
        job(),
        decision.features or FeatureSet(),  # an optimise verdict always has features
        files,
        decision.version,
        net=decision.net or 0.0,
        cost=decision.cost.seconds if decision.cost is not None else 0.0,
        reclustered_bytes=merged,
    )
    return state


def _drift(
    table: TableSettings,
    ctx: ServiceContext,
    now: datetime,
    state: TableState,
    draft: Draft,
    *,
    dry_run: bool,
    job: Job,
    context: TableContext,
) -> TableState:
    """No new data to optimise: re-cluster files laid out for an older workload, if that pays (not
    where Delta's own OPTIMIZE runs the job: it cannot be pointed at chosen files)."""
    if ctx.stopping.is_set() or sql_only(job):
        return state
    plan = plan_recluster(context, state)
    draft.recluster = plan
    checked = {**state.recluster_checked, **{key: now.isoformat() for key in plan.checked}}
    state = state.with_(recluster_checked=checked)
    if not plan.recluster or plan.decision is None:
        return state
    state = state.with_layout(layout_key(plan.decision.features), now)
    draft.action, draft.reason = Action.RECLUSTER, plan.reason
    if dry_run:
        draft.action, draft.reason = Action.RECLUSTER_DRY_RUN, plan.reason + "; dry run: not re-clustered"
        return state
    draft.pending = PendingJob(
        Action.RECLUSTER,
        job,
        plan.decision.features or FeatureSet(),
        plan.files,
        plan.decision.version,
        net=plan.decision.net or 0.0,
        cost=plan.decision.cost.seconds if plan.decision.cost is not None else 0.0,
        reclustered_bytes=plan.bytes,
        drift_group=plan.group,
    )
    return state
