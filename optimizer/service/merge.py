"""Merging young runs: new data clustered together with the latest runs laid out the same way, when
the estimate says that pays more than clustering the new data alone.

Each tick clusters only the data that arrived since the last run, so a table fed by appends becomes a
stack of runs, each laid out well on its own but overlapping the others on every clustering key: a
query reads a few files of *every* run. Delta's liquid clustering avoids that by re-clustering the whole
table on each OPTIMIZE, at a cost that grows with the table. Here runs merge size-tiered, as an LSM
tree compacts: the newest runs laid out under the features the estimate just chose join the new data
while each is at most `MERGE_RATIO` times the bytes gathered so far, within the re-clustering budget.
With steady appends every byte is rewritten about log2(runs) times and the table holds about
log2(runs) runs. The merge is priced like any rewrite: the ordinary estimate runs on the union (the
runs' files count with their current statistics as "before", joined ranges included, so the union is
not credited with skipping its runs already have), and the union is taken only when its net benefit
beats the new data's alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from optimizer.analysis.context import TableContext
from optimizer.clustering.groups import clustered_groups, layout_key
from optimizer.estimate.decision import estimate
from optimizer.estimate.record import Decision
from optimizer.inspect import human_bytes
from optimizer.service.drift import recluster_budget
from optimizer.service.state import TableState
from optimizer.skipping.extended import ExtendedStats, load_index_with_runs
from optimizer.table.access import DataFile

MERGE_RATIO = 1.5  # a run joins while it is at most this times the bytes gathered: runs of about equal size merge


@dataclass(frozen=True)
class Run:
    run_id: str
    files: tuple[DataFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def written(self) -> int:
        return max(f.modification_time for f in self.files)


@dataclass(frozen=True)
class MergePlan:
    """The runs considered for merging with the new data, the union's estimate and whether it won."""

    taken: bool
    reason: str
    runs: tuple[str, ...] = ()
    bytes: int = 0  # of the runs' files (the re-clustered bytes, against the budget)
    net_alone: float | None = None  # the new data's own estimate, which the union must beat
    decision: Decision | None = None  # the estimate of new data + runs
    files: tuple[str, ...] = ()  # every path the job rewrites when taken

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"taken": self.taken, "reason": self.reason, "runs": list(self.runs)}
        data.update(bytes=self.bytes, net_alone=self.net_alone)
        if self.decision is not None:
            data["estimate"] = self.decision.as_dict()
        return data


def young_runs(runs: Sequence[Run], new_bytes: int, budget: int) -> list[Run]:
    """The newest runs that merge with `new_bytes` of new data, size-tiered within `budget` bytes: taken
    newest first while each is at most `MERGE_RATIO` times what is gathered so far."""
    chosen: list[Run] = []
    gathered, merged = new_bytes, 0
    for run in sorted(runs, key=lambda r: (r.written, r.run_id), reverse=True):
        if run.bytes > MERGE_RATIO * gathered or merged + run.bytes > budget:
            break
        chosen.append(run)
        gathered += run.bytes
        merged += run.bytes
    return chosen


def runs_of(files: Sequence[DataFile], index: Mapping[str, ExtendedStats]) -> list[Run]:
    """`files` (all clustered) split by the run that wrote them."""
    by_run: dict[str, list[DataFile]] = {}
    for f in files:
        by_run.setdefault(index[f.path].run_id, []).append(f)
    return [Run(run_id, tuple(group)) for run_id, group in by_run.items()]


def plan_merge(context: TableContext, state: TableState, decision: Decision) -> MergePlan | None:
    """Whether to cluster the new data of `decision` (which says optimise) together with the young runs
    laid out under the features it chose; None when no run qualifies."""
    thresholds, table = context.thresholds, context.table
    used = state.reclustered_since(context.now - timedelta(days=1))
    budget = recluster_budget(thresholds, used)
    if budget <= 0 or decision.features is None:
        return None
    snapshot = table.snapshot()
    if snapshot.version != decision.version:
        return MergePlan(False, f"the table moved on since the estimate (version {snapshot.version})")
    index, run_features = load_index_with_runs(table, snapshot)
    key = layout_key(decision.features)
    group = next((g for g in clustered_groups(table, snapshot, index, run_features) if g.key == key), None)
    if group is None:
        return None
    new = [f for f in snapshot.files if f.path not in index]
    chosen = young_runs(runs_of(group.files, index), sum(f.size for f in new), budget)
    if not chosen:
        return None
    merged = [f for run in chosen for f in run.files]
    size = sum(f.size for f in merged)
    union = estimate(context, files=new + merged, snapshot=snapshot, index=index)
    ids = tuple(run.run_id for run in chosen)
    alone, together = decision.net or 0.0, union.net or 0.0
    what = f"{len(chosen)} earlier run(s) laid out the same way ({human_bytes(size)})"
    if union.optimize and together > alone:
        reason = taken_reason(what, decision, union)
        paths = tuple(f.path for f in new + merged)
        return MergePlan(True, reason, ids, size, alone, union, paths)
    why = union.reason if not union.optimize else f"net {together:+.1f} against {alone:+.1f} for the new data alone"
    return MergePlan(False, f"not merged with {what}: {why}", ids, size, alone, union)


def taken_reason(what: str, decision: Decision, union: Decision) -> str:
    """Why the union was taken; it names the union's layout when its estimate chose another than the
    new data's, whose reason the record also carries (the job runs the union's)."""
    reason = (
        f"merged with {what}: net {union.net or 0.0:+.1f} against {decision.net or 0.0:+.1f} for the new data alone"
    )
    if union.layout is not None and union.layout != decision.layout:
        reason += f"; the union laid out as {union.layout}"
    return reason
