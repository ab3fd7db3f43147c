"""One tick for one table: a plain function the scheduler, ``--once`` and tests all call.

    paused? ─► record "paused"; a table feature no rewrite may touch (liquid clustering)? ─► "skip", why
    settle a run the state says was in progress (committed: note it; else it died: retry later)
    tail the query log from the stored position
    estimate: enough unclustered bytes? features (benefit search)? cost vs benefit? ─► decision
    optimise? merge: the young runs laid out the same way join the new data when the union nets more
    optimize (unless dry run or shutting down): executor chosen from the writers' commitInfo,
        at most `max_concurrent_jobs` at once across tables
    no new data optimised? drift: re-cluster files laid out for an older workload, within the budget
    write the decision record, save the state

Errors of one table (unreachable table, failed job, lost race) are recorded as that tick's outcome
and never stop the service or the other tables.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from costmodel.cost import CostModel
from optimizer.analysis.context import TableContext
from optimizer.catalog import table_locations
from optimizer.clustering.by_delta import delta_expressible
from optimizer.clustering.groups import layout_key
from optimizer.config import Config, TableSettings
from optimizer.errors import KNOWN, CommitConflictError, JobSubmissionError, UnsupportedTableError
from optimizer.estimate.decision import estimate
from optimizer.estimate.record import Decision
from optimizer.features import FeatureSet
from optimizer.service.decisions import DecisionLog
from optimizer.service.drift import ReclusterPlan, plan_recluster
from optimizer.service.executors import Executor, OptimizeRequest, choose_executor
from optimizer.service.idle import latest_version, reusable, verdict_key
from optimizer.service.merge import MergePlan, plan_merge
from optimizer.service.record import Action, JobRecord, TickRecord
from optimizer.service.state import RunInProgress, StateStore, TableState
from optimizer.skipping.extended import load_index
from optimizer.table import open_table
from optimizer.table.access import commit_of_run
from optimizer.table.protocol import check_rewritable
from querylog.store import QueryLogTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import Commit

log = logging.getLogger(__name__)
ExecutorChooser = Callable[[TableSettings, "list[Commit]"], tuple[Executor, str]]


@dataclass
class ServiceContext:
    """What ticks share: configuration, the service's Spark, state, decisions, cost model, job slots."""

    config: Config
    spark: Callable[[], SparkSession]
    state: StateStore
    decisions: DecisionLog
    cost_model: CostModel
    job_slots: threading.Semaphore
    estimate_slots: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(2))
    stopping: threading.Event = field(default_factory=threading.Event)
    choose: ExecutorChooser | None = None  # tests inject executors; default: choose_executor
    _locations: dict[str, str] | None = None

    def locations(self) -> dict[str, str]:
        """Where the configured tables and those under ``schemas.locations`` are (listed once per
        service: the dimensions joined features read)."""
        if self._locations is None:
            self._locations = table_locations(self.config)
        return self._locations

    def executor_for(self, table: TableSettings, commits: list[Commit]) -> tuple[Executor, str]:
        if self.choose is not None:
            return self.choose(table, commits)
        return choose_executor(self.config.execution, commits, self.spark, self.config.spark)


@dataclass
class _Draft:
    """The record's parts as the tick's steps fill them in; frozen into a `TickRecord` at the end."""

    action: Action = Action.SKIP
    reason: str = ""
    decision: Decision | None = None
    recluster: ReclusterPlan | None = None
    merge: MergePlan | None = None
    job: JobRecord | None = None
    new_queries: int | None = None
    previous_run: str | None = None
    reused: bool = False

    def record(self, table: TableSettings, now: datetime, *, dry_run: bool, seconds: float) -> TickRecord:
        return TickRecord(
            ts=now,
            table=table.name,
            path=table.path,
            dry_run=dry_run,
            action=self.action,
            reason=self.reason,
            decision=self.decision,
            recluster=self.recluster,
            merge=self.merge,
            job=self.job,
            new_queries=self.new_queries,
            previous_run=self.previous_run,
            reused=self.reused,
            tick_seconds=round(seconds, 3),
        )


def tick(table: TableSettings, ctx: ServiceContext, now: datetime | None = None) -> TickRecord:
    """Run one tick for `table` and return its record (also written to the decision log)."""
    now = now or datetime.now(UTC)
    started = time.perf_counter()
    dry_run = ctx.config.service.dry_run if table.dry_run is None else table.dry_run
    draft = _Draft()
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
    record = draft.record(table, now, dry_run=dry_run, seconds=time.perf_counter() - started)
    if draft.action is Action.ERROR:
        state = state.with_(verdict={})
    ctx.state.save(state.with_(ticks=state.ticks + 1, last_decision=record.summary()))
    ctx.decisions.write(record.as_dict(), table=not draft.reused)  # a repeated verdict commits nothing
    return record


def _tick_unless_unchanged(
    table: TableSettings, ctx: ServiceContext, now: datetime, state: TableState, draft: _Draft, dry_run: bool
) -> TableState:
    """The last verdict again when nothing it was made from moved (`service.idle`), else a full tick."""
    versions = (
        latest_version(table.path, table.storage_options),
        latest_version(table.query_log_path, table.storage_options),
    )
    key = verdict_key(table, ctx.config, ctx.cost_model, versions)
    last = state.verdict
    if state.run is None and last and reusable(last.get("key"), last.get("at", ""), key, now):
        draft.action, draft.reused = Action(last["action"]), True
        draft.reason = f"nothing moved since {last['at']} (table version {versions[0]}, query log version "
        draft.reason += f"{versions[1]}): {last['reason']}"
        return state
    state = _tick(table, ctx, now, state, draft, dry_run)
    if not _repeatable(draft, table):
        return state.with_(verdict={})
    return state.with_(
        verdict={"key": key, "at": now.isoformat(), "action": draft.action.value, "reason": draft.reason}
    )


def _repeatable(draft: _Draft, table: TableSettings) -> bool:
    """Whether a tick with the same inputs would decide the same: no job ran (it moved the table), and no
    drift check was held back by a byte budget (the daily one frees itself over time)."""
    if draft.action not in (Action.SKIP, Action.OPTIMIZE_DRY_RUN, Action.RECLUSTER_DRY_RUN) or draft.job is not None:
        return False
    held_back = draft.recluster is not None and draft.recluster.budget <= 0
    return not (held_back and table.thresholds.recluster_bytes_per_tick > 0)


def _tick(
    table: TableSettings, ctx: ServiceContext, now: datetime, state: TableState, draft: _Draft, dry_run: bool
) -> TableState:
    delta = open_table(table.path)
    state = _settle_run(delta, state, draft)
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
    commits = delta.history((state.last_optimized_version or -1) + 1)
    job = _job(table, ctx, commits)  # what it can apply is what the estimate prices
    applies = delta_expressible if _sql_only(job) else None
    with ctx.estimate_slots:  # Spark samples: a few at once, whatever the number of tables
        decision = estimate(context, snapshot=snapshot, index=load_index(delta, snapshot), applies=applies)
    draft.decision = decision
    draft.action, draft.reason = Action(decision.action), decision.reason
    if decision.features is not None:  # what the estimate would lay data out on for today's workload
        state = state.with_layout(layout_key(decision.features), now)
    if not decision.optimize:
        return _drift(table, ctx, now, state, draft, dry_run=dry_run, job=job, delta=delta, log_table=log_table)
    draft.merge = None if ctx.stopping.is_set() else plan_merge(context, state, decision)
    files: tuple[str, ...] | None = None
    if draft.merge is not None and draft.merge.taken and draft.merge.decision is not None:
        decision, files = draft.merge.decision, draft.merge.files
        draft.reason = f"{draft.reason}; {draft.merge.reason}"
        state = state.with_layout(layout_key(decision.features), now)
    if dry_run:
        draft.action, draft.reason = Action.OPTIMIZE_DRY_RUN, draft.reason + "; dry run: not optimised"
        return state
    features = decision.features or FeatureSet()  # an optimise verdict always has features
    state = _run_job(
        table, ctx, now, state, draft, job=job, features=features, files=files, read_version=decision.version
    )
    if files is not None and draft.merge is not None and draft.action is Action.OPTIMIZE:  # committed
        state = state.with_reclustered(now, draft.merge.bytes)
    return state


def _drift(
    table: TableSettings,
    ctx: ServiceContext,
    now: datetime,
    state: TableState,
    draft: _Draft,
    *,
    dry_run: bool,
    job: Job,
    delta: Any,
    log_table: QueryLogTable,
) -> TableState:
    """No new data to optimise: re-cluster files laid out for an older workload, if that pays (not
    where Delta's own OPTIMIZE runs the job: it cannot be pointed at chosen files)."""
    if ctx.stopping.is_set() or _sql_only(job):
        return state
    context = TableContext(
        ctx.spark(), delta, table.identity, log_table, table.thresholds, now, ctx.cost_model, ctx.locations()
    )
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
    features = plan.decision.features or FeatureSet()
    state = _run_job(
        table, ctx, now, state, draft, job=job, features=features, files=plan.files, read_version=plan.decision.version
    )
    if draft.action is Action.RECLUSTER:  # committed (a lost race is RECLUSTER_LOST_RACE)
        # the new layout was just estimated; the rest of the old group is due again on the next tick
        checked = {**state.recluster_checked, layout_key(features): now.isoformat()}
        checked.pop(plan.group or "", None)
        state = state.with_reclustered(now, plan.bytes).with_(recluster_checked=checked)
    return state


Job = tuple[Executor, str] | JobSubmissionError  # the executor and why; or why there is none


def _job(table: TableSettings, ctx: ServiceContext, commits: list[Commit]) -> Job:
    """The executor a job of this tick would run on, chosen before the estimate (which prices what it
    can apply); when there is none the tick still decides, and fails only if it would run a job."""
    try:
        return ctx.executor_for(table, commits)
    except JobSubmissionError as err:
        return err


def _sql_only(job: Job) -> bool:
    return not isinstance(job, JobSubmissionError) and job[0].sql_only


def _run_job(
    table: TableSettings,
    ctx: ServiceContext,
    now: datetime,
    state: TableState,
    draft: _Draft,
    *,
    job: Job,
    features: FeatureSet,
    files: tuple[str, ...] | None,
    read_version: int,
) -> TableState:
    """Run the OPTIMIZE job of a decision on `job`: the executor the writers' commits point to, and why."""
    if ctx.stopping.is_set():
        draft.action, draft.reason = Action.SKIP, draft.reason + "; service shutting down: not started"
        return state
    if isinstance(job, JobSubmissionError):  # no executor (e.g. credentials missing): the job cannot start
        raise job
    executor, why = job
    run = RunInProgress(uuid.uuid4().hex[:16], read_version, now.isoformat())
    ctx.state.save(state.with_(run=run))  # a crash from here on is settled by the next tick
    request = OptimizeRequest(
        table.path,
        features,
        table.thresholds.target_file_size,
        run.run_id,
        read_version,
        files=files,
        output=table.thresholds.output,
        stats_for_keys=table.thresholds.stats_for_clustering_keys,
    )
    with ctx.job_slots:
        try:
            outcome = executor.run(request)
        except CommitConflictError as err:
            draft.job = JobRecord(executor.name, why, run.run_id, error=str(err))
            draft.action = draft.action.lost_race
            return state.with_(run=None)
    draft.job = JobRecord(executor.name, why, run.run_id, outcome)
    return state.with_(run=None, last_optimized_version=outcome.version or state.last_optimized_version)


def _settle_run(delta: Any, state: TableState, draft: _Draft) -> TableState:
    """A run the state says was in progress either committed (find it in the history) or died before
    committing, which left the table unchanged; either way the state moves on."""
    if state.run is None:
        return state
    landed = commit_of_run(delta.history(state.run.read_version + 1), state.run.run_id)
    if landed is not None:
        draft.previous_run = f"run {state.run.run_id} committed version {landed.version}"
        return state.with_(run=None, last_optimized_version=landed.version)
    draft.previous_run = f"run {state.run.run_id} died before committing; the table is unchanged"
    return state.with_(run=None)
