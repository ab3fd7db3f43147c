"""The fleet at a glance, for ``deltaopt status --fleet``: read from the service's state files and its
fleet file only, so it costs the same for ten tables or ten thousand and opens none of them.

What it shows: how many tables last decided what, the top candidates in the queue (rank order), the
budget used this hour and today against its limits, the last jobs, the tables whose last tick failed, and
what the jobs realised (`service.realised`), summed over the tables, against their estimates.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from optimizer.service.fleet_file import read_snapshot
from optimizer.service.realised import realised_line, summed, totals_dict
from optimizer.service.state import StateStore

TOP = 10


def fleet_status(state_dir: str, fleet_path: str, top: int = TOP) -> dict[str, Any]:
    """The fleet's summary (see the module docstring)."""
    store = StateStore(state_dir)
    names = [path.name.removesuffix(".state.json") for path in sorted(Path(state_dir).glob("*.state.json"))]
    states = [store.load(name) for name in names]
    decisions = {name: state.last_decision for name, state in zip(names, states, strict=True)}
    queue = read_snapshot(fleet_path) or {}
    ledger = sorted(queue.get("ledger", []), key=lambda c: c["at"], reverse=True)
    failing = [
        {"table": name, "ts": d.get("ts"), "reason": d.get("reason")}
        for name, d in decisions.items()
        if d.get("action") == "error"
    ]
    return {
        "tables": len(decisions),
        "by_action": dict(Counter(str(d.get("action") or "never ticked") for d in decisions.values())),
        "queue_at": queue.get("at"),
        "budget": queue.get("budget", {}),
        "used": queue.get("used", {}),
        "slots": queue.get("slots"),
        "running": queue.get("running", []),
        "waiting": len(queue.get("waiting", [])),
        "top_candidates": queue.get("waiting", [])[:top],
        "last_jobs": ledger[:top],
        "failing": sorted(failing, key=lambda f: str(f["ts"]), reverse=True)[:top],
        "realised": totals_dict(summed(state.realised for state in states)),
    }


def describe(status: dict[str, Any]) -> list[str]:
    """The summary as lines for a terminal."""
    actions = ", ".join(f"{n} {a}" for a, n in sorted(status["by_action"].items(), key=lambda kv: -kv[1]))
    budget, used = status["budget"], status["used"]
    lines = [
        f"{status['tables']} table(s) watched: {actions or 'none ticked yet'}",
        f"budget (as of {status['queue_at'] or 'no job decided yet'}): "
        f"{used.get('hour', 0):,.0f} cluster-s this hour{_of(budget.get('per_hour'))}, "
        f"{used.get('day', 0):,.0f} today{_of(budget.get('per_day'))}; "
        f"{len(status['running'])} of {status['slots'] or '?'} job slot(s) busy",
        f"queue: {status['waiting']} job(s) waiting" + (", best first:" if status["top_candidates"] else ""),
    ]
    for rank, c in enumerate(status["top_candidates"], 1):
        since = datetime.fromisoformat(c["since"]).strftime("%Y-%m-%d %H:%M")
        lines.append(
            f"  {rank}. {c['table']} ({c['kind']}): net {c['net']:,.1f} cluster-s for {c['cost']:,.1f}, "
            f"{c['rate']:,.2f} per cluster-second, waiting since {since}"
        )
    if status["last_jobs"]:
        lines.append("last jobs:")
        lines += [
            f"  {j['at']} {j['table']}: {j['seconds']:,.1f} cluster-s (estimated {j['estimated']:,.1f})"
            for j in status["last_jobs"]
        ]
    lines.append(realised_line(status["realised"]))
    if status["failing"]:
        lines.append("failing:")
        lines += [f"  {f['table']} at {f['ts']}: {f['reason']}" for f in status["failing"]]
    return lines


def _of(limit: float | None) -> str:
    return f" of {limit:,.0f}" if limit else ""
