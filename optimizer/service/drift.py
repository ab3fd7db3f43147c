"""Drift: re-cluster files laid out for an older workload when the current workload gains from it.

Files clustered once are never revisited by the new-data decision, so a workload that moves on (new
filters, new columns) leaves old data laid out for queries nobody runs any more. On a tick that does
not optimise new data, this step looks at the groups of clustered files by the feature set they were
clustered under (`optimizer.clustering.groups`). Groups laid out differently from the latest features
the estimate chose are suspects and come first after each change of those features; the group laid
out like that, and every group after its first check, is re-checked every
``recluster_check_interval`` (the workload may have moved since, with no new data to show it). For at
most `GROUPS_PER_TICK` due groups (a suspect is due once after each change of the chosen layout and
then every interval too), least recently checked first, it runs the ordinary estimate on the
group's oldest files within the byte budget: the
same analysis, feature search, workload replay against those files' *current* statistics (their old
layout's skipping counts as "before") and cost model. A group is worth re-clustering when that
estimate says optimise and chooses a different layout than the group has; the one with the highest
net benefit is rewritten by the ordinary verified, atomic OPTIMIZE job.

The budget is ``recluster_bytes_per_tick``, less whatever the last 24 h already re-clustered beyond
``recluster_bytes_per_day``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from optimizer.analysis.context import TableContext
from optimizer.clustering.groups import FileGroup, clustered_groups, layout_key, oldest_first
from optimizer.config import Thresholds
from optimizer.estimate.decision import estimate
from optimizer.estimate.record import Decision
from optimizer.inspect import human_bytes
from optimizer.service.state import TableState
from optimizer.skipping.extended import load_index_with_runs
from optimizer.table.access import DataFile
from optimizer.verdict import Verdict

if TYPE_CHECKING:
    pass

GROUPS_PER_TICK = 2  # estimates per tick are the step's cost; groups rotate across ticks


@dataclass(frozen=True)
class ReclusterPlan:
    action: Verdict
    reason: str
    budget: int  # bytes this tick may re-cluster
    groups: list[dict[str, Any]] = field(default_factory=list)  # every layout group, with its estimate if made
    decision: Decision | None = None  # the estimate of the group chosen
    files: tuple[str, ...] = ()  # the paths to re-cluster
    bytes: int = 0  # their size
    seconds: float = 0.0
    checked: tuple[str, ...] = ()  # group keys estimated on this tick
    group: str | None = None  # the key of the group chosen

    @property
    def recluster(self) -> bool:
        return self.action is Verdict.RECLUSTER

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "budget_bytes": self.budget,
            "groups": self.groups,
            "files": len(self.files),
            "bytes": self.bytes,
            "estimate": self.decision.as_dict() if self.decision is not None else None,
            "seconds": round(self.seconds, 3),
        }


def recluster_budget(thresholds: Thresholds, used: int) -> int:
    """Bytes this tick may re-cluster when the last 24 h re-clustered `used` bytes."""
    return max(min(thresholds.recluster_bytes_per_tick, thresholds.recluster_bytes_per_day - used), 0)


def plan_recluster(context: TableContext, state: TableState) -> ReclusterPlan:
    """Whether (and which) files clustered under an older feature set to re-cluster on this tick."""
    started = time.perf_counter()
    table, thresholds, now = context.table, context.thresholds, context.now
    if thresholds.recluster_bytes_per_tick == 0:
        return ReclusterPlan(Verdict.SKIP, "re-clustering is off (recluster_bytes_per_tick: 0)", 0)
    used = state.reclustered_since(now - timedelta(days=1))
    budget = recluster_budget(thresholds, used)
    if budget <= 0:
        return ReclusterPlan(
            Verdict.SKIP,
            f"re-clustering budget used: {human_bytes(used)} in the last 24 h "
            f"(recluster_bytes_per_day {human_bytes(thresholds.recluster_bytes_per_day)})",
            0,
        )
    snapshot = table.snapshot()
    index, runs = load_index_with_runs(table, snapshot)
    groups = clustered_groups(table, snapshot, index, runs)
    entries = {g.key: {**g.as_dict(), "current": g.key == state.current_layout} for g in groups}
    due = _due_groups(groups, state, thresholds, now)
    if not due:
        why = (
            "no clustered files"
            if not groups
            else "every group of clustered files was estimated since the chosen layout last changed and "
            f"within recluster_check_interval ({thresholds.recluster_check_interval / 3600:g} h)"
        )
        return ReclusterPlan(Verdict.SKIP, why, budget, list(entries.values()), seconds=time.perf_counter() - started)
    settings = context.with_thresholds(thresholds.model_copy(update={"min_new_bytes": 0}))  # budget bounds bytes

    def estimate_files(files: list[DataFile]) -> Decision:
        return estimate(settings, files=files, snapshot=snapshot, index=index)

    checked = tuple(g.key for g in due[:GROUPS_PER_TICK])  # they rotate, whatever the verdict
    best = _best_group(due[:GROUPS_PER_TICK], entries, budget, estimate_files)
    seconds = time.perf_counter() - started
    if best is None:
        why = "no older layout's files gain enough from re-clustering"
        return ReclusterPlan(Verdict.SKIP, why, budget, list(entries.values()), seconds=seconds, checked=checked)
    group, decision, files = best
    entries[group.key]["verdict"] = f"{entries[group.key]['verdict']}; chosen"
    size = sum(f.size for f in files)
    reason = f"re-cluster {len(files)} files ({human_bytes(size)}) laid out under {group.key}: {decision.reason}"
    paths = tuple(f.path for f in files)
    return ReclusterPlan(
        Verdict.RECLUSTER,
        reason,
        budget,
        list(entries.values()),
        decision=decision,
        files=paths,
        bytes=size,
        seconds=seconds,
        checked=checked,
        group=group.key,
    )


def _due_groups(groups: list[FileGroup], state: TableState, thresholds: Thresholds, now: datetime) -> list[FileGroup]:
    """Groups due for an estimate: suspects (other layouts) once after each change of the chosen layout,
    every group once per ``recluster_check_interval``. Suspects not checked since that change come
    first, then the least recently checked, whatever its layout: ordering every suspect first would
    starve the current layout's group while two others stay due."""
    recheck = (now - timedelta(seconds=thresholds.recluster_check_interval)).isoformat()

    def is_due(group: FileGroup) -> bool:
        checked = state.recluster_checked.get(group.key, "")
        return checked <= recheck or (group.key != state.current_layout and checked < state.current_layout_since)

    due = [g for g in groups if is_due(g)]

    def order(group: FileGroup) -> tuple[bool, str, int]:
        checked = state.recluster_checked.get(group.key, "")
        unseen = group.key != state.current_layout and checked < state.current_layout_since
        return not unseen, checked, -group.bytes

    due.sort(key=order)
    return due


def _best_group(
    groups: list[FileGroup],
    entries: dict[str, dict[str, Any]],
    budget: int,
    estimate_files: Callable[[list[DataFile]], Decision],
) -> tuple[FileGroup, Decision, list[DataFile]] | None:
    """Estimate each group's oldest files within `budget` (verdicts go into `entries`); the group whose
    estimate says optimise under a different layout, with the highest net, or None."""
    best: tuple[FileGroup, Decision, list[DataFile]] | None = None
    for group in groups:
        entry = entries[group.key]
        files = oldest_first(group.files, budget)
        if not files:
            entry["verdict"] = f"its oldest file is larger than this tick's budget ({human_bytes(budget)})"
            continue
        decision = estimate_files(files)
        chosen = layout_key(decision.features) if decision.features is not None else None
        entry.update(
            estimated_files=len(files),
            estimated_bytes=sum(f.size for f in files),
            net=decision.net,
            chosen_layout=chosen,
            estimate_reason=decision.reason,
        )
        if not decision.optimize:
            entry["verdict"] = "not worth re-clustering now: " + decision.reason
        elif chosen == group.key:
            entry["verdict"] = "the current workload would choose the same layout"
        else:
            entry["verdict"] = f"re-clustering pays (net {decision.net:+.1f})"
            if best is None or (decision.net or 0.0) > (best[1].net or 0.0):
                best = (group, decision, files)
    return best
