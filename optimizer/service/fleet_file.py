"""The fleet file, ``<state_dir>/fleet.json``: what the fleet queue (`service.fleet`) writes after every
change, for ``deltaopt status`` to show and for the next process to charge the last day's jobs to the
budget (the budget survives a restart)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from querylog.durable import atomic_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Charge:
    """Cluster-seconds one job used (`running`: its estimate, while it runs), charged to the budget."""

    at: datetime
    seconds: float
    table: str
    estimated: float
    running: bool = False


class FleetFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def write(self, snapshot: dict[str, Any]) -> None:
        """Replace the file with `snapshot` atomically: a reader never sees half of it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(self.path, "w") as out:
            json.dump(snapshot, out, indent=1)

    def charges(self) -> list[Charge]:
        """The charges a previous process recorded (none when there is no file, or one line naming why it is
        unreadable)."""
        if not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text())
            return [
                Charge(datetime.fromisoformat(c["at"]), float(c["seconds"]), str(c["table"]), float(c["estimated"]))
                for c in data.get("ledger", [])
            ]
        except (ValueError, KeyError, TypeError) as err:
            log.warning("%s is unreadable (%s): the budget starts empty", self.path, err)
            return []


def read_snapshot(path: str | Path) -> dict[str, Any] | None:
    """The fleet file a running service wrote (None: none yet)."""
    path = Path(path)
    if not path.exists():
        return None
    return dict(json.loads(path.read_text()))


def as_json(charge: Charge) -> dict[str, Any]:
    return {
        "at": charge.at.isoformat(),
        "seconds": round(charge.seconds, 3),
        "table": charge.table,
        "estimated": round(charge.estimated, 1),
        "running": charge.running,
    }
