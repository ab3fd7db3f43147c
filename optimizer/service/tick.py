"""One tick for one table: `tick`, the plain function the scheduler, ``--once`` and tests all call, runs
one `TickRun`.

    a job of this table running? ─► record that, decide nothing
    paused? ─► record "paused"; a table feature deltaopt does not know? ─► "skip", why
    nothing moved since the last verdict? ─► repeat it (`service.idle`), no log replay, no Spark
    settle a run the state says was in progress (committed: note it; else it died: retry later)
    tail the query log from the stored position
    liquid-clustered? ─► Delta's OPTIMIZE by its keys or the workload's, priced by its rules (`service.liquid`)
    estimate: enough unclustered bytes? features (benefit search)? cost vs benefit? ─► decision
    optimise? merge: the young runs laid out the same way join the new data when the union nets more
    no new data to optimise? drift: re-cluster files laid out for an older workload, within the budget
    a job decided (not a dry run)? ─► the fleet queue (`service.fleet`): it starts now if it ranks
        high enough for a free slot and the budget, else the record says why it waits
    write the decision record, save the state

A `TickRun` holds the tick's inputs, the state it moves on and the draft of its record. The record is
built in one place (`_record`) and the state saved once (`_finish`); a job the tick starts at once
(`service.jobs.JobStart`) begins from the tick's state and saves it instead (its crash marker, then
once with the job's record).

Errors of one table (unreachable table, failed job, lost race) are recorded as that tick's outcome
and never stop the service or the other tables.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

from optimizer.analysis.context import TableContext
from optimizer.clustering.groups import layout_key
from optimizer.config import TableSettings
from optimizer.errors import KNOWN, JobSubmissionError, UnsupportedTableError
from optimizer.features import FeatureSet
from optimizer.service.context import ServiceContext
from optimizer.service.draft import Draft, Job, PendingJob
from optimizer.service.drift import plan_recluster
from optimizer.service.executors import SparkExecutor
from optimizer.service.fleet import Candidate, TickSlot
from optimizer.service.idle import made_from, repeated_reason, standing, verdict_after
from optimizer.service.jobs import (
    JobStart,
    delta_cannot_cluster,
    estimate_as_run,
    history_start,
    job_for,
    settle_run,
    sql_only,
)
from optimizer.service.liquid import Operation, Streak, plan_liquid
from optimizer.service.merge import plan_merge
from optimizer.service.realised import measure, track_settled
from optimizer.service.record import TickRecord
from optimizer.service.state import TableState
from optimizer.skipping.extended import load_index
from optimizer.table import open_table
from optimizer.table.rewrite_path import check_service_rewritable, is_liquid
from optimizer.verdict import Verdict
from querylog.store import QueryLogTable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from optimizer.config_types import LiquidMode
    from optimizer.estimate.record import Decision
    from optimizer.skipping.extended import ExtendedStats
    from optimizer.table.access import Snapshot, TableAccess
    from querylog.records import ScanRecord

log = logging.getLogger(__name__)
__all__ = ["ServiceContext", "TickRun", "tick"]


def _local(job: Job) -> bool:
    """Whether the job runs on the service's own session (whose Delta the estimate reads)."""
    return not isinstance(job, JobSubmissionError) and isinstance(job[0], SparkExecutor)


def tick(table: TableSettings, ctx: ServiceContext, now: datetime | None = None) -> TickRecord:
    """Run one tick for `table` and return its record (also written to the decision log): the job's
    record when the tick's job started at once."""
    now = now or datetime.now(UTC)
    with ctx.queue.ticking(table.name) as slot:
        return TickRun.of(table, ctx, now, slot).run()


@dataclass
class TickRun:
    """One tick of one table: what it was given, the state it moves on, the draft of its record."""

    table: TableSettings
    ctx: ServiceContext
    now: datetime
    slot: TickSlot  # what the fleet queue said as the tick began (`FleetQueue.ticking`)
    dry_run: bool
    state: TableState
    draft: Draft = field(default_factory=Draft)
    started: float = field(default_factory=time.perf_counter)

    @classmethod
    def of(cls, table: TableSettings, ctx: ServiceContext, now: datetime, slot: TickSlot) -> TickRun:
        """The tick of `table` at `now`; one that must not decide (`slot.busy`) reads nothing."""
        if slot.busy is not None:
            return cls(
                table, ctx, now, slot, dry_run=False, state=TableState(table.name), draft=Draft(reason=slot.busy)
            )
        dry_run = ctx.config.service.dry_run if table.dry_run is None else table.dry_run
        return cls(table, ctx, now, slot, dry_run=dry_run, state=ctx.state.load(table.name))

    def run(self) -> TickRecord:
        """Decide, hand a job to the fleet queue, record: the tick's record, or its job's."""
        if self.slot.busy is not None:  # its job started from the queue and runs: deciding again would race it
            record = self._record(seconds=0.0)
            self.ctx.log(record, table=False)
            return record
        self._decide()
        return self._queue()

    def _decide(self) -> None:
        """The verdict, whatever fails: one table's error is its tick's outcome, never the service's."""
        loaded, draft = self.state, self.draft
        try:
            if self.table.paused:
                draft.action, draft.reason = Verdict.PAUSED, "table is paused in the configuration"
            else:
                self._decide_unless_unchanged()
        except KNOWN as err:
            draft.action, draft.reason = Verdict.ERROR, f"{type(err).__name__}: {err}"
            log.warning("%s: %s", self.table.name, draft.reason)
        except Exception as err:  # one table's failure must not stop the others; it is recorded
            draft.action, draft.reason = Verdict.ERROR, f"unexpected {type(err).__name__}: {err}"
            log.exception("tick of %s failed", self.table.name)
        if draft.action is Verdict.ERROR:  # what failed moves nothing on: the state as loaded, no verdict
            self.state = loaded.with_(verdict=None)
            draft.pending, draft.queued = None, False
        self.state = self.state.with_(ticks=self.state.ticks + 1)

    def _decide_unless_unchanged(self) -> None:
        """The last verdict again when nothing it was made from moved (`service.idle`), else a full tick.
        A verdict that queued a job stands while the queue still holds that job."""
        key, versions = made_from(self.table, self.ctx.config, self.ctx.cost_model)
        last = standing(self.state, key, self.now, self.slot.waiting_key)
        if last is not None:
            self.draft.action, self.draft.reused = last.action, True
            self.draft.queued = last.action is Verdict.DEFERRED
            self.draft.reason = repeated_reason(last, versions)
            return
        state = self._full()
        self.state = state.with_(verdict=verdict_after(self.draft, self.table, key, self.now))

    def _queue(self) -> TickRecord:
        """Settle with the fleet queue (hand it the job, or void the one queued earlier), then record:
        the job's record when it started at once."""
        candidate, start = self._handover()
        try:
            dispatched = self.ctx.queue.settle(self.table.name, self.now, candidate, waiting=self.draft.queued)
        finally:
            if start is not None:  # a job started later loads the state this tick saves
                start.handed = None
        if self.table.name in dispatched.records:  # started at once: the job's record is the tick's
            return dispatched.records[self.table.name]
        if candidate is None and not self.draft.queued:
            return self._finish()
        self.draft.action = Verdict.DEFERRED
        if dispatched.held:  # the pass ranks first: `run_once` says why it waits and writes the record
            return self._finish(logged=False)
        waits = dispatched.deferred or "waiting in the fleet queue"
        self.draft.reason = f"{self.draft.reason}; deferred: {waits}"
        return self._finish()

    def _handover(self) -> tuple[Candidate | None, JobStart | None]:
        """The tick's new candidate for the queue, and the start of the job the queue may begin in this
        thread (that candidate's, or the queued one a repeated verdict stands on), handed this tick's
        state: the job saves it, the tick then does not."""
        pending = self.draft.pending
        if pending is not None:
            start = JobStart(self.table, self.ctx, replace(self.draft), handed=self.state)  # the tick goes on
            verdict = self.state.verdict
            candidate = Candidate(
                table=self.table.name,
                kind=pending.action.value,
                net=pending.net,
                cost=pending.cost,
                key=verdict.key if verdict is not None else "",
                since=self.now,
                start=start,
            )
            return candidate, start
        waiting = self.slot.waiting
        if self.draft.queued and waiting is not None and isinstance(waiting.start, JobStart):
            waiting.start.handed = self.state
            return None, waiting.start
        return None, None

    def _finish(self, *, logged: bool = True) -> TickRecord:
        """Record the tick: the state saved once, with the record's summary, and the decision log (a
        repeated verdict commits nothing); not logged while a pass ranks (`run_once` writes it)."""
        record = self._record(seconds=time.perf_counter() - self.started)
        self.ctx.state.save(self.state.with_(last_decision=record.summary()))
        if logged:
            self.ctx.log(record, table=not record.reused)
        return record

    def _record(self, *, seconds: float) -> TickRecord:
        return self.draft.record(self.table, self.now, dry_run=self.dry_run, seconds=seconds)

    def _measure(
        self, state: TableState, delta: TableAccess, snapshot: Snapshot, scans: Sequence[ScanRecord]
    ) -> TableState:
        """The realised benefit of the table's earlier jobs, on the scans this tick tailed (only jobs
        those scans fall after: `service.realised`): the state moves on, each job's row gets its
        figures so far, and the record lists them."""
        rows = {job.run_id: job.row_ts for job in state.measured}  # before those whose horizon ended go
        state, measured = measure(delta, state, scans, latest=snapshot, thresholds=self.table.thresholds, now=self.now)
        for figures in measured:
            row_ts = rows.get(figures["run_id"])
            if row_ts is not None:  # a job found committed after a crash has no row
                self.ctx.decisions.realised(self.table.name, datetime.fromisoformat(row_ts), figures)
        self.draft.measured = tuple(measured)  # in the job's record too, when the tick's job starts at once
        return state

    def _context(self, state: TableState, delta: TableAccess, log_table: QueryLogTable) -> TableContext:
        """What the estimates of this tick read, with the table's realised / estimated factor (after this
        tick's measurements) that scales every benefit they weigh: deltaopt's layouts, Delta's OPTIMIZE
        of a liquid table, drift and merges alike (`RealisedTotals.calibration`)."""
        table, ctx = self.table, self.ctx
        thresholds = table.thresholds
        return TableContext(
            ctx.spark(),
            delta,
            table.identity,
            log_table,
            thresholds,
            self.now,
            ctx.cost_model,
            ctx.locations(),
            calibration=state.realised.calibration(thresholds.realised_min_jobs, thresholds.realised_half_life),
        )

    def _full(self) -> TableState:
        """Settle a run left in progress, tail the query log, estimate; then the job or drift."""
        table, ctx, now, draft = self.table, self.ctx, self.now, self.draft
        delta = open_table(table.path)
        state = track_settled(delta, self.state, settle_run(delta, self.state, draft))
        snapshot = delta.snapshot()  # read once: the feature check and the estimate share it
        try:  # a table no rewrite may touch (liquid clustering, an unknown feature) costs no estimate
            check_service_rewritable(snapshot.features, table.path)
        except UnsupportedTableError as refused:
            draft.action, draft.reason = Verdict.SKIP, str(refused)
            return state
        log_table = QueryLogTable(table.query_log_path)
        tail = log_table.tail(state.log_version, table.identity)
        draft.new_queries = len(tail.records)
        state = self._measure(state.with_(log_version=tail.version), delta, snapshot, tail.records)
        context = self._context(state, delta, log_table)
        index = load_index(delta, snapshot)
        # the executor (from the latest writers' commitInfo) only when a job could follow: enough new data
        # to estimate (what it can apply is what the estimate prices), or clustered files that may drift
        job = cache(lambda: job_for(table, ctx, delta.history(history_start(state, snapshot))))
        if is_liquid(snapshot.features):  # Delta's own clustering, priced and run by its rules
            return self._liquid(state, context, snapshot, index, job=job)
        new_bytes = sum(f.size for f in snapshot.files if f.path not in index)
        sampled = new_bytes >= table.thresholds.min_new_bytes  # below it the estimate stops before Spark
        with ctx.estimate_slots if sampled else nullcontext():  # Spark samples: a few at once, whatever the count
            decision = estimate_as_run(context, snapshot, index, job)
        draft.decision = decision
        draft.action, draft.reason = Verdict(decision.action), decision.reason
        if decision.features is not None:  # what the estimate would lay data out on for today's workload
            state = state.with_layout(layout_key(decision.features), now)
        if not decision.optimize:
            if not index:  # nothing deltaopt clustered: nothing can drift
                return state
            return self._drift(state, job=job(), context=context)
        return self._optimize(state, decision, job=job, context=context)

    def _liquid(
        self,
        state: TableState,
        context: TableContext,
        snapshot: Snapshot,
        index: Mapping[str, ExtendedStats],
        *,
        job: Callable[[], Job],
    ) -> TableState:
        """A liquid table: Delta's OPTIMIZE by its keys or by the workload's, when it pays (`service.liquid`);
        the job runs Delta's OPTIMIZE, by the table's own keys or after the key change, whatever the
        setting says of later jobs."""
        draft = self.draft
        mode = self.ctx.config.liquid_for(self.table)
        refused = delta_cannot_cluster(job(), snapshot.features, uri=self.table.path, liquid=mode)
        if refused is not None:  # the path its job would take, read before any estimate
            draft.action, draft.reason, draft.from_session = Verdict.SKIP, refused, True
            return state.with_(liquid_wanted=(), liquid_streak=0)  # a key change needs ticks that priced it
        with self.ctx.estimate_slots:
            streak = Streak(state.liquid_wanted, state.liquid_streak)
            plan = plan_liquid(context, snapshot, index, mode=mode, streak=streak, full_allowed=_local(job()))
        draft.liquid, draft.reason = plan, plan.reason
        draft.decision = plan.decision or plan.current or plan.change
        state = state.with_(liquid_wanted=plan.streak.keys, liquid_streak=plan.streak.ticks)
        decided = plan.decision
        if decided is None:
            draft.action = Verdict.SKIP
            return state
        draft.action = Verdict.OPTIMIZE
        whose: LiquidMode = "set" if plan.operation is Operation.KEY_SELECTION else "keep"
        return self._optimize(state, decided, job=job, context=context, liquid=whose, full=plan.full)

    def _optimize(
        self,
        state: TableState,
        decision: Decision,
        *,
        job: Callable[[], Job],
        context: TableContext,
        liquid: LiquidMode | None = None,
        full: bool = False,
    ) -> TableState:
        """The estimate says optimise: with the young runs laid out the same way when the union nets more
        (`service.merge`; not where Delta's OPTIMIZE picks the files); the job for the fleet queue, unless
        a dry run."""
        now, draft = self.now, self.draft
        # no merge where Delta's OPTIMIZE runs the job: a liquid table's files are Delta's to pick, and its
        # ZORDER BY (SQL only) rewrites every file, young runs included, whatever deltaopt would merge
        merging = liquid is None and not self.ctx.stopping.is_set() and not sql_only(job())
        draft.merge = plan_merge(context, state, decision) if merging else None
        files: tuple[str, ...] | None = None
        merged = None
        if draft.merge is not None and draft.merge.taken and draft.merge.decision is not None:
            decision, files, merged = draft.merge.decision, draft.merge.files, draft.merge.bytes
            draft.reason = f"{draft.reason}; {draft.merge.reason}"
            state = state.with_layout(layout_key(decision.features), now)
        if self.dry_run:
            draft.action, draft.reason = Verdict.OPTIMIZE_DRY_RUN, draft.reason + "; dry run: not optimised"
            return state
        draft.pending = PendingJob(
            Verdict.OPTIMIZE,
            job(),
            decision.features or FeatureSet(),  # an optimise verdict always has features
            files,
            decision.version,
            net=decision.net or 0.0,
            cost=decision.cost.seconds if decision.cost is not None else 0.0,
            reclustered_bytes=merged,
            liquid=liquid,
            full=full,
        )
        return state

    def _drift(self, state: TableState, *, job: Job, context: TableContext) -> TableState:
        """No new data to optimise: re-cluster files laid out for an older workload, if that pays (not
        where Delta's own OPTIMIZE runs the job: it cannot be pointed at chosen files)."""
        now, draft = self.now, self.draft
        if self.ctx.stopping.is_set() or sql_only(job):
            return state
        plan = plan_recluster(context, state)
        draft.recluster = plan
        checked = {**state.recluster_checked, **{key: now.isoformat() for key in plan.checked}}
        state = state.with_(recluster_checked=checked)
        if not plan.recluster or plan.decision is None:
            return state
        state = state.with_layout(layout_key(plan.decision.features), now)
        draft.action, draft.reason = Verdict.RECLUSTER, plan.reason
        if self.dry_run:
            draft.action, draft.reason = Verdict.RECLUSTER_DRY_RUN, plan.reason + "; dry run: not re-clustered"
            return state
        draft.pending = PendingJob(
            Verdict.RECLUSTER,
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
