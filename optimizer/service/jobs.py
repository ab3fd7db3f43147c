"""How a job a tick decided on (`service.draft.PendingJob`) runs once the fleet queue starts it.

The queue calls the candidate's `JobStart`; the job is one `JobRun`. It runs on the executor chosen
before the estimate (the estimate priced what it can apply). The table's state is read once (handed
over by its own tick, or loaded when the job starts later), saved with a `RunInProgress` before the
executor runs so that a crash is settled by the next tick (`settle_run`: committed runs are found in
the history, others died before committing and left the table unchanged), and saved once at the end
with the job's record.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from optimizer.clustering.by_delta import KeysChangedError
from optimizer.errors import (
    KNOWN,
    CommitConflictError,
    DeltaOptError,
    JobSubmissionError,
    SparkRuntimeError,
    UnsupportedTableError,
)
from optimizer.estimate.decision import estimate
from optimizer.estimate.liquid import by_delta_zorder
from optimizer.service.draft import Draft, Job, PendingJob
from optimizer.service.executors import OptimizeRequest, SparkExecutor, liquid_refusal
from optimizer.service.realised import track_job
from optimizer.service.record import JobRecord, TickRecord
from optimizer.service.state import RunInProgress, TableState
from optimizer.table.access import commit_of_run
from optimizer.table.rewrite_path import HISTORY_CHECKED, choose_path
from optimizer.verdict import Verdict

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from optimizer.analysis.context import TableContext
    from optimizer.config import TableSettings
    from optimizer.config_types import LiquidMode
    from optimizer.estimate.record import Decision
    from optimizer.service.context import ServiceContext
    from optimizer.skipping.extended import ExtendedStats
    from optimizer.table.access import Commit, Snapshot
    from optimizer.table.protocol import TableFeatures

log = logging.getLogger(__name__)


def job_for(table: TableSettings, ctx: ServiceContext, commits: list[Commit]) -> Job:
    """The executor a job of this tick would run on, chosen before the estimate (which prices what it
    can apply); when there is none the tick still decides, and fails only if it would run a job."""
    try:
        return ctx.executor_for(table, commits)
    except JobSubmissionError as err:
        return err


def sql_only(job: Job) -> bool:
    """Whether the job runs as Delta's own OPTIMIZE driven by SQL (only plain-column Z features apply)."""
    return not isinstance(job, JobSubmissionError) and job[0].capabilities.sql_only


def delta_cannot_cluster(job: Job, features: TableFeatures, *, uri: str, liquid: LiquidMode) -> str | None:
    """Why the job could not run Delta's OPTIMIZE of the liquid table with `features`: the path
    `rewrite_path.choose_path` gives the executor's session (``spark.commit: delta-rs``, no Delta engine in
    its JVM) is not Delta's clustering, so the job would be refused as it starts. None: Delta clusters it,
    or there is no executor (that failure is the job's, reported when the tick would run one)."""
    if isinstance(job, JobSubmissionError):
        return None
    executor = job[0]
    capabilities = executor.capabilities  # a session that cannot be reached is the tick's error, not a skip
    try:  # a liquid table's path is Delta's OPTIMIZE or a refusal: `choose_path` takes no other for it
        choose_path(capabilities, features, liquid=liquid, uri=uri)
    except (UnsupportedTableError, SparkRuntimeError) as err:  # its refusals: no Delta engine to cluster it
        return f"the {executor.name} executor cannot run Delta's OPTIMIZE: {err}"
    return None


def history_start(state: TableState, snapshot: Snapshot) -> int:
    """The first version whose commit's writer decides the job's executor: after the last optimisation,
    among the newest `HISTORY_CHECKED` commits."""
    return max((state.last_optimized_version or -1) + 1, snapshot.version - HISTORY_CHECKED + 1, 0)


def estimate_as_run(
    context: TableContext, snapshot: Snapshot, index: Mapping[str, ExtendedStats], job: Callable[[], Job]
) -> Decision:
    """The estimate of the job that would run: Delta's OPTIMIZE ZORDER BY over every file where only SQL
    reaches the job's cluster (`sql_only`: `estimate.liquid.by_delta_zorder`), deltaopt's layout of the
    new files otherwise. `job` is asked only when there is enough new data to sample (below it the
    estimate stops before Spark, whoever would run the job)."""
    new_bytes = sum(f.size for f in snapshot.files if f.path not in index)
    if new_bytes >= context.thresholds.min_new_bytes and sql_only(job()):
        return by_delta_zorder(context, snapshot, index)
    return estimate(context, snapshot=snapshot, index=index)


@dataclass
class JobStart:
    """The fleet queue's handle on a job a tick decided (`Candidate.start`): calling it runs the job.

    While the deciding tick settles with the queue, `handed` holds that tick's state, not saved yet: a
    job its own tick starts (in the tick's thread) begins from it, and its saves are the tick's. A job
    started later (by the pool or the next pass, after its tick ended) finds None and loads the state
    its tick saved."""

    table: TableSettings
    ctx: ServiceContext
    decided: Draft  # the tick's draft with its pending job, as it was when handed to the queue
    handed: TableState | None = None

    def __call__(self, when: datetime, note: str) -> TickRecord:
        """Run the job now (the fleet queue started it; `note` says how) and record the outcome: the
        tick's decision with the job, in the decision log and the table's state."""
        started = time.perf_counter()
        pending = self.decided.pending
        assert pending is not None, "only a draft with a pending job starts"
        draft = replace(self.decided, action=pending.action, reason=f"{self.decided.reason}; {note}", queued=False)
        state, self.handed = self.handed, None
        if state is None:  # started after its tick ended
            state = self.ctx.state.load(self.table.name)
        return JobRun(self.table, self.ctx, draft, when, state=state, started=started).start()


@dataclass
class JobRun:
    """One started job: the table, its tick's draft (completed with the outcome), when the queue started
    it, and the table's state it moves on (saved with the crash marker, then once with the record)."""

    table: TableSettings
    ctx: ServiceContext
    draft: Draft
    when: datetime
    state: TableState
    started: float  # perf_counter when the queue started it: the record's seconds

    @property
    def pending(self) -> PendingJob:
        assert self.draft.pending is not None, "only a draft with a pending job starts"
        return self.draft.pending

    def start(self) -> TickRecord:
        """Run the job, then record it: the decision log and the state, saved once."""
        draft = self.draft
        try:
            self.state = self._run()
        except KNOWN as err:
            draft.action, draft.reason = Verdict.ERROR, f"{draft.reason}; job failed: {type(err).__name__}: {err}"
            self.state = self.state.with_(run=None)
        except Exception as err:  # recorded like a tick's failure; the queue goes on with the next job
            draft.action, draft.reason = (
                Verdict.ERROR,
                f"{draft.reason}; job failed: unexpected {type(err).__name__}: {err}",
            )
            self.state = self.state.with_(run=None)
        record = draft.record(self.table, self.when, dry_run=False, seconds=time.perf_counter() - self.started)
        measured = track_job(self.state, record, self.table)  # later scans measure what it realised
        if draft.action is self.pending.action:  # committed: the sidecars of runs it replaced may go
            _prune_sidecars(self.table)
        self.ctx.state.save(measured.with_(verdict=None, last_decision=record.summary()))
        self.ctx.log(record)
        return record

    def _run(self) -> TableState:
        """Run the job and move the state on: the run's version, and for re-clustering runs the daily
        ledger and which older layouts are due for a check."""
        pending, now = self.pending, self.when
        state = self._execute()
        if self.draft.action is not pending.action:  # lost the race or not started: nothing committed
            return state
        if pending.reclustered_bytes is not None:
            state = state.with_reclustered(now, pending.reclustered_bytes)
        if pending.action is Verdict.RECLUSTER:
            # the new layout was just estimated; the rest of the old group is due again on the next tick
            from optimizer.clustering.groups import layout_key

            checked = {**state.recluster_checked, layout_key(pending.features): now.isoformat()}
            checked.pop(pending.drift_group or "", None)
            state = state.with_(recluster_checked=checked)
        return state

    def _decided_keys(self) -> tuple[str, ...] | None:
        """The clustering keys a liquid table's tick decided on (its plan's), which the job must find
        unchanged to run anything (`by_delta.KeysChangedError`); None: not a liquid decision."""
        plan = self.draft.liquid
        return plan.keys if plan is not None and self.pending.liquid is not None else None

    def _execute(self) -> TableState:
        """Run the OPTIMIZE job on `pending.job`: the executor the writers' commits point to, and why."""
        table, ctx, now, state, draft, pending = self.table, self.ctx, self.when, self.state, self.draft, self.pending
        if ctx.stopping.is_set():
            draft.action, draft.reason = Verdict.SKIP, draft.reason + "; service shutting down: not started"
            return state
        if isinstance(pending.job, JobSubmissionError):  # no executor (e.g. credentials missing)
            raise pending.job
        became_liquid = _keys_to_keep(table, ctx, pending)
        if became_liquid is not None:
            draft.action, draft.reason = Verdict.SKIP, f"{draft.reason}; {became_liquid}"
            return state
        executor, why = pending.job
        run = RunInProgress(uuid.uuid4().hex[:16], pending.read_version, now.isoformat())
        ctx.state.save(state.with_(run=run))  # a crash from here on is settled by the next tick
        request = OptimizeRequest(
            table.path,
            pending.features,
            table.thresholds.target_file_size,
            run.run_id,
            pending.read_version,
            files=pending.files,
            output=table.thresholds.output,
            stats_for_keys=table.thresholds.stats_for_clustering_keys,
            liquid=pending.liquid or ctx.config.liquid_for(table),
            full=pending.full,
            keys=self._decided_keys(),
        )
        try:
            outcome = executor.run(request)
        except KeysChangedError as err:  # the user's ALTER since the decision: nothing was run
            draft.action, draft.reason = Verdict.SKIP, f"{draft.reason}; {err}"
            return state.with_(run=None)
        except CommitConflictError as err:
            draft.job = JobRecord(executor.name, why, run.run_id, error=str(err))
            draft.action = draft.action.lost_race
            return state.with_(run=None)
        if outcome.not_started is not None:  # liquid by the time the executor read it: the same rule said no
            draft.action, draft.reason = Verdict.SKIP, f"{draft.reason}; {outcome.not_started}"
            return state.with_(run=None)
        draft.job = JobRecord(executor.name, why, run.run_id, outcome)
        return state.with_(run=None, last_optimized_version=outcome.version or state.last_optimized_version)


def _prune_sidecars(table: TableSettings) -> None:
    """Best effort: a failure leaves sidecars that `load_index` skips as stale anyway."""
    from optimizer.skipping.extended import prune_index
    from optimizer.table import open_table

    try:
        delta = open_table(table.path, dict(table.storage_options))
        pruned = prune_index(delta, delta.snapshot(), datetime.now(UTC))
    except (DeltaOptError, OSError) as err:
        log.warning("%s: extended-stats sidecars not pruned: %s", table.name, err)
        return
    if pruned:
        log.info("%s: pruned %d extended-stats sidecar(s) that describe no active file", table.name, len(pruned))


def _keys_to_keep(table: TableSettings, ctx: ServiceContext, pending: PendingJob) -> str | None:
    """Why the job must not start (`liquid_refusal`, the rule the in-process executor applies again on
    the snapshot it runs on). Checked as the job starts: a job waits in the queue, and a remote one reads
    the table as it is when it runs. The delta-rs snapshot decides; the keys are named only for a job
    of the in-process executor, whose Spark session is the service's anyway (a remote job's check
    starts no local JVM)."""
    from optimizer.table import open_table
    from optimizer.table.delta_sql import DeltaSql

    delta = open_table(table.path, dict(table.storage_options))

    def keys() -> tuple[str, ...] | None:
        return DeltaSql(ctx.spark(), delta.spark_uri("").rstrip("/")).clustering_columns()

    local = not isinstance(pending.job, JobSubmissionError) and isinstance(pending.job[0], SparkExecutor)
    liquid = ctx.config.liquid_for(table)
    return liquid_refusal(
        delta.snapshot(),
        pending.features,
        liquid,
        pending.read_version,
        keys=keys if local else None,
        net=pending.net,
        decided_liquid=pending.liquid is not None,
    )


def settle_run(delta: Any, state: TableState, draft: Draft) -> TableState:
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
