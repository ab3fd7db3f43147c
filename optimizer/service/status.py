"""Status for an operator, ``deltaopt status``: each watched table (`table_status`: the service's state and
the table's files as its log has them now), or the fleet at a glance (`fleet_status`, ``--fleet``): read
from the service's state files and its fleet file only, so it costs the same for ten tables or ten
thousand and opens none of them.

What the fleet view shows: how many tables last decided what, the top candidates in the queue (rank order),
the budget used this hour and today against its limits, the last jobs, the tables whose last tick failed,
and what the jobs realised (`service.realised`), summed over the tables, against their estimates. The
queue's entries are the fleet file's, as the running service wrote them (`service.fleet_file`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optimizer.errors import DeltaOptError
from optimizer.service.fleet_file import read_snapshot
from optimizer.service.realised import figures, realised_line, summed, totals_dict
from optimizer.service.state import RealisedTotals, StateStore

if TYPE_CHECKING:
    from optimizer.clustering.groups import FileGroup
    from optimizer.config import TableSettings
    from optimizer.inspect import TableInfo
    from optimizer.service.state import TableState

TOP = 10


@dataclass(frozen=True)
class TableFiles:
    """A table's files as its log has them now, and the layouts deltaopt clustered them in."""

    info: TableInfo
    layouts: tuple[FileGroup, ...]
    current_layout: str | None  # the layout key of the features the service clusters by now

    def as_dict(self) -> dict[str, Any]:
        info = self.info
        return {
            "version": info.version,
            "files": info.files,
            "bytes": info.bytes,
            "clustered_bytes": info.clustered_bytes,
            "unclustered_bytes": info.unclustered_bytes,
            "layouts": [{**g.as_dict(), "current": g.key == self.current_layout} for g in self.layouts],
        }


@dataclass(frozen=True)
class TableStatus:
    """One table's status: what the service's state says of it, and its files (None with the one line
    saying why the table cannot be read)."""

    table: TableSettings
    state: TableState
    files: TableFiles | None = None
    error: str | None = None

    @property
    def factor(self) -> float | None:
        """What the table's next benefit estimates are scaled by (None: not enough jobs measured yet)."""
        thresholds = self.table.thresholds
        calibration = self.state.realised.calibration(thresholds.realised_min_jobs, thresholds.realised_half_life)
        return calibration.factor if calibration is not None else None

    def as_dict(self) -> dict[str, Any]:
        """The status as ``deltaopt status --json`` prints it."""
        state = self.state
        entry: dict[str, Any] = {
            "table": self.table.name,
            "paused": self.table.paused,
            "last_decision": state.last_decision,
            "ticks": state.ticks,
            "last_optimized_version": state.last_optimized_version,
            "realised": {
                **totals_dict(state.realised),
                "factor": self.factor,
                "measuring": [figures(job, self.table.thresholds) for job in state.measured],
            },
        }
        if self.files is not None:
            entry.update(self.files.as_dict())
        if self.error is not None:
            entry["error"] = self.error
        return entry

    def describe(self) -> list[str]:
        """The status as lines for a terminal: files, clustered and unclustered bytes, layouts, the last
        decision, what its jobs realised."""
        from optimizer.inspect import human_bytes

        lines = [f"{self.table.name}{' [paused]' if self.table.paused else ''}"]
        if self.error is not None:
            lines.append(f"  error: {self.error}")
        if self.files is not None:
            info = self.files.info
            lines.append(
                f"  version {info.version}, {info.files} files, {human_bytes(info.bytes)}; clustered "
                f"{human_bytes(info.clustered_bytes)}, unclustered {human_bytes(info.unclustered_bytes)}"
            )
            for group in self.files.layouts:
                which = "current features" if group.key == self.files.current_layout else "older features"
                clustered = f"{len(group.files)} files, {human_bytes(group.bytes)} clustered on {group.key}"
                lines.append(f"    {which}: {clustered}")
        last = self.state.last_decision  # `TickRecord.summary`, as the state file holds it ({}: never ticked)
        lines.append(
            f"  last decision: {last.get('ts', 'never')} {str(last.get('action', '')).upper()} {last.get('reason', '')}"
        )
        lines.append(f"  {realised_line(self.state.realised, self.factor)}")
        return lines


def table_status(table: TableSettings, state: TableState) -> TableStatus:
    """`table`'s status, opening it (a table that cannot be read: the one line saying why)."""
    from optimizer.clustering.groups import clustered_groups
    from optimizer.inspect import table_info
    from optimizer.table import open_table

    try:
        delta = open_table(table.path)
        info = table_info(delta)
        layouts = tuple(clustered_groups(delta, delta.snapshot()))
    except DeltaOptError as err:
        return TableStatus(table, state, error=str(err))
    return TableStatus(table, state, TableFiles(info, layouts, state.current_layout))


@dataclass(frozen=True)
class FleetStatus:
    """The fleet's summary (see the module docstring); the queue's entries as the fleet file holds them."""

    tables: int
    by_action: Mapping[str, int]
    queue: Mapping[str, Any]  # the fleet file ({}: no service wrote one yet)
    failing: Sequence[Mapping[str, Any]]
    realised: RealisedTotals
    top: int = TOP

    @property
    def last_jobs(self) -> list[Mapping[str, Any]]:
        return sorted(self.queue.get("ledger", []), key=lambda c: c["at"], reverse=True)[: self.top]

    @property
    def waiting(self) -> list[Mapping[str, Any]]:
        return list(self.queue.get("waiting", []))

    def as_dict(self) -> dict[str, Any]:
        """The summary as ``deltaopt status --fleet --json`` prints it."""
        queue = self.queue
        return {
            "tables": self.tables,
            "by_action": dict(self.by_action),
            "queue_at": queue.get("at"),
            "budget": queue.get("budget", {}),
            "used": queue.get("used", {}),
            "slots": queue.get("slots"),
            "running": queue.get("running", []),
            "waiting": len(self.waiting),
            "top_candidates": self.waiting[: self.top],
            "last_jobs": self.last_jobs,
            "failing": list(self.failing),
            "realised": totals_dict(self.realised),
        }

    def describe(self) -> list[str]:
        """The summary as lines for a terminal."""
        actions = ", ".join(f"{n} {a}" for a, n in sorted(self.by_action.items(), key=lambda kv: -kv[1]))
        queue = self.queue
        budget = queue.get("budget", {})
        used = queue.get("used", {})
        best = self.waiting[: self.top]
        lines = [
            f"{self.tables} table(s) watched: {actions or 'none ticked yet'}",
            f"budget (as of {queue.get('at') or 'no job decided yet'}): "
            f"{used.get('hour', 0):,.0f} cluster-s this hour{_of(budget.get('per_hour'))}, "
            f"{used.get('day', 0):,.0f} today{_of(budget.get('per_day'))}; "
            f"{len(queue.get('running', []))} of {queue.get('slots') or '?'} job slot(s) busy",
            f"queue: {len(self.waiting)} job(s) waiting" + (", best first:" if best else ""),
        ]
        for rank, c in enumerate(best, 1):
            since = datetime.fromisoformat(c["since"]).strftime("%Y-%m-%d %H:%M")
            lines.append(
                f"  {rank}. {c['table']} ({c['kind']}): net {c['net']:,.1f} cluster-s for {c['cost']:,.1f}, "
                f"{c['rate']:,.2f} per cluster-second, waiting since {since}"
            )
        if self.last_jobs:
            lines.append("last jobs:")
            lines += [
                f"  {j['at']} {j['table']}: {j['seconds']:,.1f} cluster-s (estimated {j['estimated']:,.1f})"
                for j in self.last_jobs
            ]
        lines.append(realised_line(self.realised))
        if self.failing:
            lines.append("failing:")
            lines += [f"  {f['table']} at {f['ts']}: {f['reason']}" for f in self.failing]
        return lines


def fleet_status(state_dir: str, fleet_path: str, top: int = TOP) -> FleetStatus:
    """The fleet's summary, from the state files and the fleet file only."""
    store = StateStore(state_dir)
    names = [path.name.removesuffix(".state.json") for path in sorted(Path(state_dir).glob("*.state.json"))]
    states = [store.load(name) for name in names]
    decisions = {name: state.last_decision for name, state in zip(names, states, strict=True)}
    failing = [
        {"table": name, "ts": d.get("ts"), "reason": d.get("reason")}
        for name, d in decisions.items()
        if d.get("action") == "error"
    ]
    return FleetStatus(
        tables=len(decisions),
        by_action=dict(Counter(str(d.get("action") or "never ticked") for d in decisions.values())),
        queue=read_snapshot(fleet_path) or {},
        failing=sorted(failing, key=lambda f: str(f["ts"]), reverse=True)[:top],
        realised=summed(state.realised for state in states),
        top=top,
    )


def _of(limit: float | None) -> str:
    return f" of {limit:,.0f}" if limit else ""
