"""The tick record: what one tick of one table decided and did, typed; `as_dict` is its only
serialisation (the decision log's JSON line and the decisions table's ``record`` column).

The JSON layout is the one operators and `deltaopt decisions` already read: the estimate's fields at
the top level (``version``, ``new_bytes``, ``cost``, ``benefit``, ``features``, ``search`` ...), plus
``action``, ``reason``, ``job``, ``recluster``, ``merge``, ``new_queries``, ``previous_run`` and ``tick_seconds``,
and ``measured`` when the tick's scans measured earlier jobs (each job's realised figures so far; a
job's own record read back from the decisions table carries its latest under ``realised``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from optimizer.verdict import Verdict

if TYPE_CHECKING:
    from optimizer.estimate.record import Decision
    from optimizer.service.drift import ReclusterPlan
    from optimizer.service.executors import JobOutcome
    from optimizer.service.liquid import LiquidPlan
    from optimizer.service.merge import MergePlan


@dataclass(frozen=True)
class JobRecord:
    """The OPTIMIZE job a tick started: where it ran, and its outcome or the race it lost."""

    executor: str
    where: str  # why this executor: the writers' commitInfo, or the configuration
    run_id: str
    outcome: JobOutcome | None = None
    error: str | None = None  # a lost commit race: nothing was committed

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"executor": self.executor, "where": self.where, "run_id": self.run_id}
        if self.outcome is not None:
            data.update(self.outcome.__dict__)
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class TickRecord:
    ts: datetime
    table: str  # the configured name
    path: str
    dry_run: bool
    action: Verdict
    reason: str
    decision: Decision | None = None  # the new-data estimate
    recluster: ReclusterPlan | None = None  # the drift step, when it ran
    merge: MergePlan | None = None  # young runs considered for merging with the new data
    job: JobRecord | None = None
    new_queries: int | None = None
    previous_run: str | None = None  # how a run found in progress was settled
    tick_seconds: float = 0.0
    reused: bool = False  # nothing moved: the last verdict repeated without an estimate (`service.idle`)
    liquid: LiquidPlan | None = None  # a liquid table: Delta's clustering priced, the operation decided
    measured: tuple[Mapping[str, Any], ...] = ()  # earlier jobs this tick's scans measured (`service.realised`)

    @property
    def reclustered(self) -> bool:
        """Whether this tick chose to re-cluster (whether or not the job then committed)."""
        return self.action in (Verdict.RECLUSTER, Verdict.RECLUSTER_DRY_RUN, Verdict.RECLUSTER_LOST_RACE)

    @property
    def chosen(self) -> Decision | None:
        """The estimate behind the layout this tick chose: re-clustering's when it re-clustered, the
        merge's when the young runs joined the new data, else the new-data estimate."""
        if self.reclustered:
            return self.recluster.decision if self.recluster is not None else None
        if self.merge is not None and self.merge.taken and self.merge.decision is not None:
            return self.merge.decision
        return self.decision

    @property
    def features(self) -> dict[str, object]:
        """The features of the layout this tick chose (re-clustering's, when it re-clustered)."""
        return _features(self.chosen)

    def summary(self) -> dict[str, Any]:
        """What `deltaopt status` shows of the latest tick."""
        data = self.as_dict()
        return {k: data.get(k) for k in ("ts", "action", "reason", "version", "new_bytes", "net")}

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ts": self.ts.isoformat(), "path": self.path, "dry_run": self.dry_run}
        if self.previous_run is not None:
            data["previous_run"] = self.previous_run
        if self.new_queries is not None:
            data["new_queries"] = self.new_queries
        if self.decision is not None:
            data.update(self.decision.as_dict())
        data.update(table=self.table, action=self.action.value, reason=self.reason)
        if self.recluster is not None:
            data["recluster"] = self.recluster.as_dict()
            if self.recluster.decision is not None and self.reclustered:
                data.update(features=_features(self.recluster.decision), net=self.recluster.decision.net)
        if self.merge is not None:
            data["merge"] = self.merge.as_dict()
            if self.merge.taken and self.merge.decision is not None:
                data.update(features=_features(self.merge.decision), net=self.merge.decision.net)
        if self.liquid is not None:
            data["liquid"] = self.liquid.as_dict()
        if self.job is not None:
            data["job"] = self.job.as_dict()
        data["tick_seconds"] = self.tick_seconds
        if self.reused:
            data["reused"] = True
        if self.measured:
            data["measured"] = [dict(job) for job in self.measured]
        return data


def _features(decision: Decision | None) -> dict[str, object]:
    """A decision's chosen features as the record writes them ({} when there are none)."""
    return decision.features.as_dict() if decision is not None and decision.features is not None else {}
