"""Per-table service state that survives restarts.

One JSON file per table under ``service.state_dir``, replaced atomically (written and fsynced under a
temporary name, then renamed), so a crash leaves either the old or the new state, never a torn one.

* ``log_version``: the query-log version tailed so far (the next tail starts after it);
* ``last_optimized_version``: the table version our last OPTIMIZE committed;
* ``run``: an OPTIMIZE in progress (run id, table version it read); a restart that finds one checks
  the table's history: committed runs are recorded as done, others died before committing, left the
  table as it was, and are retried by a later tick;
* ``last_decision``: a summary of the latest decision, for ``deltaopt status``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from querylog.durable import atomic_file


@dataclass(frozen=True)
class RunInProgress:
    run_id: str
    read_version: int
    started: str


@dataclass(frozen=True)
class TableState:
    table: str
    log_version: int | None = None
    last_optimized_version: int | None = None
    run: RunInProgress | None = None
    last_decision: dict[str, Any] = field(default_factory=dict)
    ticks: int = 0

    def with_(self, **changes: Any) -> TableState:
        return replace(self, **changes)


class StateStore:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, table: str) -> Path:
        return self.directory / f"{table}.state.json"

    def load(self, table: str) -> TableState:
        path = self.path(table)
        if not path.exists():
            return TableState(table)
        data = json.loads(path.read_text())
        run = data.get("run")
        return TableState(
            table=data["table"],
            log_version=data.get("log_version"),
            last_optimized_version=data.get("last_optimized_version"),
            run=RunInProgress(**run) if run else None,
            last_decision=data.get("last_decision") or {},
            ticks=int(data.get("ticks", 0)),
        )

    def save(self, state: TableState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with atomic_file(self.path(state.table), "w") as out:
            json.dump(asdict(state), out, indent=1, default=str)
