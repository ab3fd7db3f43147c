"""What a tick decides, as it decides it: the `Draft` of its record, and the job it hands to the fleet
queue (`PendingJob`, on the executor `Job` names).

Its own module so that the tick (`service.tick`), the job (`service.jobs`) and what they share
(`service.context`) all read these types without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from optimizer.errors import JobSubmissionError
from optimizer.features import FeatureSet
from optimizer.service.executors import Executor
from optimizer.service.record import JobRecord, TickRecord
from optimizer.verdict import Verdict

if TYPE_CHECKING:
    from optimizer.config import TableSettings
    from optimizer.config_types import LiquidMode
    from optimizer.estimate.record import Decision
    from optimizer.service.drift import ReclusterPlan
    from optimizer.service.liquid import LiquidPlan
    from optimizer.service.merge import MergePlan

Job = tuple[Executor, str] | JobSubmissionError  # the executor and why; or why there is none


@dataclass(frozen=True)
class PendingJob:
    """An OPTIMIZE a tick decided on (new data, a merge, or drift re-clustering), until it starts."""

    action: Verdict  # OPTIMIZE or RECLUSTER
    job: Job
    features: FeatureSet
    files: tuple[str, ...] | None  # None: the unclustered files when the job starts
    read_version: int
    net: float  # cluster-seconds the estimate expects it to save, net of its cost
    cost: float  # cluster-seconds the estimate expects it to take
    reclustered_bytes: int | None = None  # a merge or drift run: counted against the daily ledger
    drift_group: str | None = None  # drift: the older layout's group, due for a check again after it
    liquid: LiquidMode | None = None  # a liquid table's job: whose keys Delta's OPTIMIZE runs by (None: config's)
    full: bool = False  # a liquid table's key change: OPTIMIZE FULL (the files clustered by the old keys too)


@dataclass
class Draft:
    """The record's parts as the tick's steps fill them in; frozen into a `TickRecord` at the end."""

    action: Verdict = Verdict.SKIP
    reason: str = ""
    decision: Decision | None = None
    recluster: ReclusterPlan | None = None
    merge: MergePlan | None = None
    job: JobRecord | None = None
    new_queries: int | None = None
    previous_run: str | None = None
    reused: bool = False
    pending: PendingJob | None = None  # the job decided on, for the fleet queue
    queued: bool = False  # the queue already holds this table's job (a repeated verdict)
    liquid: LiquidPlan | None = None  # a liquid table's plan (`service.liquid`)
    # decided from what the live session can do (its Delta, its commit setting), which the verdict key
    # (`idle.verdict_key`, read without Spark) cannot see: never repeated
    from_session: bool = False
    measured: tuple[Mapping[str, Any], ...] = ()  # earlier jobs this tick's scans measured (`service.realised`)

    def record(self, table: TableSettings, now: datetime, *, dry_run: bool, seconds: float) -> TickRecord:
        """The record of a tick (`service.tick.TickRun`) or of the job it started (`service.jobs.JobRun`)."""
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
            liquid=self.liquid,
            measured=self.measured,
            tick_seconds=round(seconds, 3),
        )
