"""Decision records: one per tick per table, as a JSON line in the decision log and a row of the
decisions Delta table (the same record, so operators can grep the file or query the table)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

log = logging.getLogger(__name__)

DECISIONS_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("table", pa.string(), nullable=False),
        pa.field("version", pa.int64()),
        pa.field("action", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("new_bytes", pa.int64()),
        pa.field("cost", pa.float64()),
        pa.field("benefit", pa.float64()),
        pa.field("record", pa.string(), nullable=False),  # the whole JSON record
    ]
)


class DecisionLog:
    def __init__(self, jsonl_path: str, table_path: str) -> None:
        self.jsonl_path = Path(jsonl_path)
        self.table_path = table_path
        self._lock = threading.Lock()

    def write(self, record: Mapping[str, Any], table: bool = True) -> None:
        """Append to the JSON-lines file (and log it), then, with `table`, to the Delta table (best
        effort: a failure there is logged, the line is already on disk)."""
        line = json.dumps(record, default=str, sort_keys=True)
        with self._lock:
            self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.jsonl_path, "a") as out:
                out.write(line + "\n")
        logging.getLogger("deltaopt.decisions").info(line)
        if not table:
            return
        row = {
            "ts": datetime.fromisoformat(str(record["ts"])),
            "table": record["table"],
            "version": record.get("version"),
            "action": record["action"],
            "reason": record["reason"],
            "new_bytes": record.get("new_bytes"),
            "cost": (record.get("cost") or {}).get("seconds"),
            "benefit": (record.get("benefit") or {}).get("benefit"),
            "record": line,
        }
        try:
            write_deltalake(
                self.table_path,
                pa.Table.from_pylist([row], schema=DECISIONS_SCHEMA),
                mode="append",
                name="deltaopt_decisions",
            )
        except (DeltaError, OSError, ValueError) as err:
            log.warning("could not append the decision to %s: %s", self.table_path, err)

    def read(self, table: str | None = None, last: int = 20) -> list[dict[str, Any]]:
        """The latest `last` records (of one table), oldest first, from the Delta table (or the file)."""
        try:
            data = DeltaTable(self.table_path).to_pyarrow_table()
            records = [json.loads(r) for r in data.column("record").to_pylist()]
        except (TableNotFoundError, DeltaError, OSError):
            if not self.jsonl_path.exists():
                return []
            records = [json.loads(line) for line in self.jsonl_path.read_text().splitlines() if line.strip()]
        if table is not None:
            records = [r for r in records if r.get("table") == table]
        records.sort(key=lambda r: r.get("ts", ""))
        return records[-last:]
