"""A tick of a liquid-clustered table: Delta's OPTIMIZE by its keys when it pays, and keys chosen by the
workload, changed only when that pays and the workload has wanted them for a while (what ``CLUSTER BY
AUTO`` and predictive optimization do on Databricks; open-source Delta has neither).

    too little new data (files no OPTIMIZE clustered)? ─► skip
    price Delta's OPTIMIZE by the table's keys over what its ZCube rules rewrite   (`current`)
    price the workload's keys (at most four plain columns) over the new data        (`change`)
      (and the small cubes those keys clustered before, which Delta re-clusters after the change too)
    keys wanted != the table's, the liquid setting is ``set``, the change nets more by `liquid_key_margin`
      and the workload has wanted the same keys `liquid_key_ticks` ticks running? ─► ALTER TABLE ... CLUSTER BY,
      then OPTIMIZE                                              (AUTO_CLUSTERING_COLUMN_SELECTION)
    else the OPTIMIZE by the table's keys pays (not ``suggest``)? ─► OPTIMIZE        (CLUSTERING)

``keep`` never changes the keys and records the keys the workload wants; ``suggest`` runs nothing and
records the wanted keys and what they would save. The streak of ticks wanting the same keys lives in the
table's state, so a stable workload never flaps and one noisy window does not change a table's keys.

Every estimate here is made through the tick's context, so with the table's realised / estimated factor
(`TableContext.calibration`) each benefit is scaled before it is weighed: the table's keys, the wanted
keys and FULL alike, and the margin and FULL comparisons below weigh scaled nets on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from optimizer.estimate.liquid import by_keys, by_workload, keys_of
from optimizer.table.delta_sql import DeltaSql
from optimizer.table.zcubes import clustered_files, liquid_rewrite, min_cube_size, supports_full

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from optimizer.analysis.context import TableContext
    from optimizer.config_types import LiquidMode
    from optimizer.estimate.record import Decision
    from optimizer.skipping.extended import ExtendedStats
    from optimizer.table.access import DataFile, Snapshot
    from optimizer.table.zcubes import ClusteredFile


class Operation(StrEnum):
    """The operation a liquid tick decided, named as Databricks' table history names them."""

    CLUSTERING = "CLUSTERING"  # Delta's OPTIMIZE by the table's keys
    KEY_SELECTION = "AUTO_CLUSTERING_COLUMN_SELECTION"  # the keys changed, then OPTIMIZE by them


@dataclass(frozen=True)
class Streak:
    """The keys the workload wanted on the last full ticks, and on how many of them running."""

    keys: tuple[str, ...] = ()
    ticks: int = 0

    def after(self, wanted: Sequence[str]) -> Streak:
        """This streak after a tick that wanted `wanted`."""
        if tuple(wanted) == self.keys:
            return Streak(self.keys, self.ticks + 1)
        return Streak(tuple(wanted), 1)


@dataclass(frozen=True)
class LiquidPlan:
    """What one tick decided for a liquid table, and every figure it decided on."""

    mode: LiquidMode
    keys: tuple[str, ...]  # the table's clustering keys
    reason: str
    streak: Streak = Streak()
    operation: Operation | None = None
    current: Decision | None = None  # Delta's OPTIMIZE by the table's keys
    change: Decision | None = None  # Delta's OPTIMIZE by the workload's keys, after the key change
    full_change: Decision | None = None  # the same with FULL: every file re-clustered by the new keys
    full: bool = False  # the key change runs OPTIMIZE FULL (it nets more than the new data alone)
    rewritten: tuple[int, int] = (0, 0)  # files, bytes Delta's OPTIMIZE by the table's keys would rewrite
    cubes_known: bool = True  # False: no Delta engine to read ZCube tags; every file priced as rewritten

    @property
    def wanted(self) -> tuple[str, ...]:
        return keys_of(self.change)

    @property
    def decision(self) -> Decision | None:
        """The estimate of the job to run (None: none)."""
        if self.operation is Operation.KEY_SELECTION:
            return self.full_change if self.full else self.change
        return self.current if self.operation is Operation.CLUSTERING else None

    def as_dict(self) -> dict[str, Any]:
        """The record's ``liquid`` section: the operation, old and wanted keys, why, and both estimates."""
        data: dict[str, Any] = {
            "mode": self.mode,
            "operation": self.operation.value if self.operation is not None else None,
            "keys": list(self.keys),
            "wanted": list(self.wanted),
            "wanted_ticks": self.streak.ticks,
            "reason": self.reason,
            "rewritten_files": self.rewritten[0],
            "rewritten_bytes": self.rewritten[1],
            "cubes_known": self.cubes_known,
            "full": self.full,
        }
        estimates = (("current", self.current), ("change", self.change), ("full_change", self.full_change))
        for name, decision in estimates:
            if decision is not None:
                data[name] = decision.as_dict()
        return data


@dataclass(frozen=True)
class LiquidFiles:
    """The table's files as Delta's clustering sees them: the new ones (no ZCube) and those its OPTIMIZE
    by the table's keys rewrites (None tags: unknown, every file counted as rewritten)."""

    new: list[DataFile]
    rewritten: list[DataFile]
    cubes_known: bool
    files: Sequence[DataFile] = ()  # every active file (the snapshot's)
    tagged: Sequence[ClusteredFile] = ()  # their tags (cubes_known), for the rewrite by other keys
    min_cube: int = 0

    @classmethod
    def of(
        cls, context: TableContext, snapshot: Snapshot, keys: Sequence[str], index: Mapping[str, Any], *, uri: str
    ) -> LiquidFiles:
        """Read the ZCube tags through Delta's engine in the service's session; without one, the new files
        are those no deltaopt run recorded, and every file is priced as rewritten (cost never too low)."""
        tagged = clustered_files(context.spark, uri, snapshot.version)
        if tagged is None:
            new = [f for f in snapshot.files if f.path not in index]
            return cls(new, list(snapshot.files), False, files=list(snapshot.files))
        return cls.from_tags(snapshot, tagged, keys, min_cube_size(context.spark))

    @classmethod
    def from_tags(
        cls, snapshot: Snapshot, tagged: Sequence[ClusteredFile], keys: Sequence[str], min_cube: int
    ) -> LiquidFiles:
        """The files by their tags (matched to the snapshot's by path; a file the tags do not list is new)."""
        cube = {f.path: f.cube for f in tagged}
        new = [f for f in snapshot.files if cube.get(f.path) is None]
        known = cls(new, [], True, files=list(snapshot.files), tagged=list(tagged), min_cube=min_cube)
        return replace(known, rewritten=known.rewritten_by(keys))

    def rewritten_by(self, keys: Sequence[str], *, full: bool = False) -> list[DataFile]:
        """What Delta's OPTIMIZE (``FULL`` with `full`) rewrites once the table is clustered by `keys`: after
        a key change, the new files and the cubes below minCubeSize those keys already clustered (keys the
        table had before), with FULL also every file clustered by other keys. Tags unknown: every file
        with FULL, else the new files alone (what a key change rewrites of a table never clustered by them)."""
        if not self.cubes_known:
            return list(self.files) if full else list(self.new)
        listed = {f.path for f in self.tagged}
        picked = {f.path for f in liquid_rewrite(self.tagged, keys, min_cube_size=self.min_cube, full=full)}
        return [f for f in self.files if f.path in picked or f.path not in listed]


def plan_liquid(
    context: TableContext,
    snapshot: Snapshot,
    index: Mapping[str, ExtendedStats],
    *,
    mode: LiquidMode,
    streak: Streak,
    full_allowed: bool = False,
) -> LiquidPlan:
    """Price Delta's OPTIMIZE by the table's keys and by the workload's, and decide (module docstring).
    A key change is priced with FULL too only where `full_allowed` (the job runs on the service's own
    session, whose Delta is known) and that Delta has it: a remote cluster's Delta is not known here."""
    uri = context.table.spark_uri("").rstrip("/")  # as Spark's file systems name it (s3:// is s3a://)
    keys = tuple(DeltaSql(context.spark, uri).clustering_columns() or ())
    files = LiquidFiles.of(context, snapshot, keys, index, uri=uri)
    rewritten = (len(files.rewritten), sum(f.size for f in files.rewritten))
    plan = LiquidPlan(mode, keys, "", streak, rewritten=rewritten, cubes_known=files.cubes_known)
    new_bytes = sum(f.size for f in files.new)
    threshold = context.thresholds.min_new_bytes
    if new_bytes < threshold or not files.new:
        reason = f"too little new data: {new_bytes:,} bytes no OPTIMIZE clustered < threshold {threshold:,}"
        return replace(plan, reason=reason)
    current = by_keys(context, keys, files.rewritten, snapshot=snapshot, index=index) if keys else None
    change = _change(context, files, keys, snapshot=snapshot, index=index)
    plan = replace(plan, current=current, change=change, streak=streak.after(keys_of(change)))
    if _may_change(plan) and full_allowed and supports_full(context.spark):  # the change's other price
        every = files.rewritten_by(plan.wanted, full=True)
        plan = with_full(plan, by_keys(context, plan.wanted, every, snapshot=snapshot, index=index))
    return decide(plan, context.thresholds.liquid_key_ticks, context.thresholds.liquid_key_margin)


def _may_change(plan: LiquidPlan) -> bool:
    """Whether the keys could change on this tick: ``set``, and the workload wants other keys."""
    wanted = [k.lower() for k in plan.wanted]
    return plan.mode == "set" and bool(wanted) and wanted != [k.lower() for k in plan.keys]


def _change(
    context: TableContext,
    files: LiquidFiles,
    keys: Sequence[str],
    *,
    snapshot: Snapshot,
    index: Mapping[str, ExtendedStats],
) -> Decision:
    """Delta's OPTIMIZE by the keys the workload wants: searched over the new files; where the table was
    clustered by those keys before, its OPTIMIZE after the change also re-clusters their cubes below
    minCubeSize, so the wanted keys are priced again over what it rewrites."""
    change = by_workload(context, files.new, snapshot=snapshot, index=index)
    wanted = keys_of(change)
    if not wanted or [k.lower() for k in wanted] == [k.lower() for k in keys]:
        return change
    moved = files.rewritten_by(wanted)
    if {f.path for f in moved} == {f.path for f in files.new}:  # the usual case: keys new to the table
        return change
    return by_keys(context, wanted, moved, snapshot=snapshot, index=index)


def with_full(plan: LiquidPlan, full: Decision) -> LiquidPlan:
    """The key change priced with ``OPTIMIZE ... FULL`` too: FULL is the change's price when re-clustering
    every file by the new keys nets more than the new data alone (both over the estimate's horizon), and
    `decide` weighs the change at that price; the record keeps both estimates."""
    new_only = _net(plan.change)
    return replace(plan, full_change=full, full=full.optimize and _net(full) > new_only)


def _net(decision: Decision | None) -> float:
    return decision.net if decision is not None and decision.net is not None else 0.0


def _full_note(plan: LiquidPlan) -> str:
    """What the reason says of FULL, where it was priced."""
    if plan.full_change is None:
        return ""
    new_only = _net(plan.change)
    with_old = _net(plan.full_change)
    if plan.full:
        return (
            f" (with FULL: every file by the new keys nets {with_old:,.1f} > {new_only:,.1f} cluster-s new data only)"
        )
    return f" (without FULL: new data only nets {new_only:,.1f} >= {with_old:,.1f} cluster-s with it)"


def decide(plan: LiquidPlan, ticks: int, margin: float) -> LiquidPlan:
    """The operation, from both estimates, the liquid setting and the streak (module docstring)."""
    wanted, keys = plan.wanted, plan.keys
    current_net = _net(plan.current)
    change_net = _net(plan.full_change if plan.full else plan.change)  # the change at its better price
    runs = plan.current is not None and plan.current.optimize and plan.mode != "suggest"
    if not wanted or [k.lower() for k in wanted] == [k.lower() for k in keys]:
        said = f"the workload wants the table's keys ({', '.join(keys) or 'none'})" if wanted else _none(plan)
        return replace(plan, operation=Operation.CLUSTERING if runs else None, reason=_run_or_not(plan, runs, said))
    gain = change_net - max(current_net, 0.0)
    wants = f"the workload wants keys ({', '.join(wanted)}) over ({', '.join(keys) or 'none'})"
    if plan.mode != "set":
        said = f"{wants}: they would net {gain:,.1f} cluster-s more; liquid: {plan.mode}, the keys are the user's"
        return replace(plan, operation=Operation.CLUSTERING if runs else None, reason=_run_or_not(plan, runs, said))
    full = _full_note(plan)
    if change_net <= 0 or gain <= margin * max(abs(current_net), 1.0):
        said = f"{wants}, but the change would net {gain:,.1f} cluster-s more{full}, not {margin:.0%} more: keys kept"
    elif plan.streak.ticks < ticks:
        said = f"{wants} on {plan.streak.ticks} of the {ticks} ticks running a change needs{full}: keys kept for now"
    else:
        said = f"{wants} on {plan.streak.ticks} ticks running, netting {gain:,.1f} cluster-s more{full}: keys changed"
        return replace(plan, operation=Operation.KEY_SELECTION, reason=said)
    kept = replace(plan, full=False)  # no key change: no FULL either
    return replace(kept, operation=Operation.CLUSTERING if runs else None, reason=_run_or_not(kept, runs, said))


def _none(plan: LiquidPlan) -> str:
    return "no column the workload filters on pays as a clustering key" + (
        f" ({plan.change.reason})" if plan.change is not None else ""
    )


def _run_or_not(plan: LiquidPlan, runs: bool, said: str) -> str:
    """`said`, and what the estimate of Delta's OPTIMIZE by the table's keys says."""
    if plan.mode == "suggest":
        return f"{said}; liquid: suggest, nothing run"
    if plan.current is None:
        return f"{said}; the table has no clustering keys: nothing to OPTIMIZE by"
    verdict = "OPTIMIZE by them" if runs else "no OPTIMIZE"
    return f"{said}; the table's keys: {verdict} ({plan.current.reason})"
