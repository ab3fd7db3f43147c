"""Decision records: one per tick per table, as a JSON line in the decision log (written at once) and a
row of the decisions Delta table (committed in batches: at most one commit per ``flush`` seconds for the
whole fleet, and on `flush` at the end of a pass or on shutdown). The line and the row hold the same
record, so operators can grep the file or query the table; a crash loses at most the last batch's rows
from the table, never from the file.

The table's columns follow Databricks' predictive-optimization history
(``system.storage.predictive_optimization_operations_history``: start and end time, table, operation
type, id, status, metrics, usage) so that the queries operators already have carry over, plus what no
peer publishes: the estimated cost and benefit of every decision, and the reason.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

log = logging.getLogger(__name__)
MAX_PENDING = 100_000  # rows held for the table while it cannot be written (the file has them all)

DECISIONS_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("table", pa.string(), nullable=False),
        pa.field("version", pa.int64()),
        pa.field("action", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("new_bytes", pa.int64()),
        pa.field("cost", pa.float64()),  # estimated cluster-seconds of the job
        pa.field("benefit", pa.float64()),  # estimated cluster-seconds it saves readers
        pa.field("record", pa.string(), nullable=False),  # the whole JSON record
        # as in predictive optimization's operations history
        pa.field("start_time", pa.timestamp("us", tz="UTC")),
        pa.field("end_time", pa.timestamp("us", tz="UTC")),
        pa.field("table_name", pa.string()),
        pa.field("table_path", pa.string()),
        pa.field("operation_type", pa.string()),  # CLUSTERING when a job was decided
        pa.field("operation_id", pa.string()),  # the run id
        pa.field("operation_status", pa.string()),  # SUCCESSFUL, FAILED: ..., DEFERRED, DRY_RUN, LOST_RACE
        pa.field("operation_metrics", pa.map_(pa.string(), pa.string())),
        pa.field("usage_unit", pa.string()),
        pa.field("usage_quantity", pa.float64()),  # measured cluster-seconds of the job
        pa.field("estimated_net_benefit", pa.float64()),
    ]
)
STATUS = {
    "optimize": "SUCCESSFUL",
    "recluster": "SUCCESSFUL",
    "optimize (lost race)": "LOST_RACE",
    "recluster (lost race)": "LOST_RACE",
    "optimize (dry run)": "DRY_RUN",
    "recluster (dry run)": "DRY_RUN",
    "deferred": "DEFERRED",
}


class DecisionLog:
    def __init__(self, jsonl_path: str, table_path: str, flush_seconds: float = 60.0) -> None:
        self.jsonl_path = Path(jsonl_path)
        self.table_path = table_path
        self.flush_seconds = flush_seconds
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._flushed = float("-inf")  # monotonic time of the last commit: the first row commits at once
        self.commits = 0

    def write(self, record: Mapping[str, Any], table: bool = True) -> None:
        """Append to the JSON-lines file (and log it), then, with `table`, queue the row for the Delta
        table, committing the queue if the last commit is ``flush_seconds`` old."""
        line = json.dumps(record, default=str, sort_keys=True)
        with self._lock:
            self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.jsonl_path, "a") as out:
                out.write(line + "\n")
            if table:
                self._pending.append(row(record, line))
                del self._pending[:-MAX_PENDING]
            due = table and time.monotonic() - self._flushed >= self.flush_seconds
        logging.getLogger("deltaopt.decisions").info(line)
        if due:
            self.flush()

    def flush(self) -> int:
        """Commit the queued rows in one append (best effort: on failure they stay queued and the
        failure is logged; the lines are on disk). Returns the rows committed."""
        with self._lock:
            rows, self._pending = self._pending, []
            self._flushed = time.monotonic()
            if not rows:
                return 0
            try:
                write_deltalake(
                    self.table_path,
                    pa.Table.from_pylist(rows, schema=DECISIONS_SCHEMA),
                    mode="append",
                    schema_mode="merge",  # tables written before the operator columns gain them
                    name="deltaopt_decisions",
                )
            except (DeltaError, OSError, ValueError) as err:
                self._pending = rows + self._pending
                log.warning("could not append %d decision(s) to %s: %s", len(rows), self.table_path, err)
                return 0
            self.commits += 1
            return len(rows)

    def read(self, table: str | None = None, last: int = 20) -> list[dict[str, Any]]:
        """The latest `last` records (of one table), oldest first, from the Delta table (or the file)
        and the rows not yet committed."""
        try:
            data = DeltaTable(self.table_path).to_pyarrow_table(columns=["record"])
            records = [json.loads(r) for r in data.column("record").to_pylist()]
        except (TableNotFoundError, DeltaError, OSError):
            if not self.jsonl_path.exists():
                return []
            records = [json.loads(line) for line in self.jsonl_path.read_text().splitlines() if line.strip()]
        else:
            with self._lock:
                records += [json.loads(r["record"]) for r in self._pending]
        if table is not None:
            records = [r for r in records if r.get("table") == table]
        records.sort(key=lambda r: r.get("ts", ""))
        return records[-last:]


@dataclass(frozen=True)
class LoggedJob:
    """The job of a logged decision, as `deltaopt decisions` prints it (a figure an older line lacks
    reads as 0, as it always printed)."""

    executor: str | None
    where: str | None
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0
    error: str | None = None

    @classmethod
    def from_dict(cls, job: Mapping[str, Any]) -> LoggedJob:
        return cls(
            job.get("executor"),
            job.get("where"),
            files_in=job.get("files_in", 0),
            files_out=job.get("files_out", 0),
            bytes_in=job.get("bytes_in", 0),
            bytes_out=job.get("bytes_out", 0),
            seconds=job.get("seconds", 0),
            error=job.get("error"),
        )


@dataclass(frozen=True)
class LoggedDecision:
    """A decision-log line read back, of any version (earlier ones lack keys, and held the tick's time
    under ``seconds``): what `deltaopt decisions` prints of it."""

    ts: str
    table: str
    action: str
    reason: str
    version: int | str = "?"  # "?" on a line without one
    job: LoggedJob | None = None
    features: Mapping[str, Any] = field(default_factory=dict)  # the layout chosen ({}: none)

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> LoggedDecision:
        job = record.get("job")
        return cls(
            str(record["ts"]),
            str(record["table"]),
            str(record["action"]),
            str(record["reason"]),
            version=record.get("version", "?"),
            job=LoggedJob.from_dict(job) if job else None,
            features=record.get("features") or {},
        )


def row(record: Mapping[str, Any], line: str) -> dict[str, Any]:
    """The decisions table's row of `record` (its JSON `line`)."""
    ts = datetime.fromisoformat(str(record["ts"]))
    job = record.get("job") or {}
    action = str(record["action"])
    seconds = job.get("seconds")
    cost = (record.get("cost") or {}).get("seconds")
    status = STATUS.get(action)
    if action == "error" and job:
        status = f"FAILED: {str(record['reason'])[:200]}"
    metrics = {
        "number_of_compacted_files": job.get("files_in"),
        "amount_of_data_compacted_bytes": job.get("bytes_in"),
        "number_of_output_files": job.get("files_out"),
        "amount_of_output_data_bytes": job.get("bytes_out"),
        "number_of_rows": job.get("rows"),
        "committed_version": job.get("version"),
        "executor": job.get("executor"),
    }
    return {
        "ts": ts,
        "table": record["table"],
        "version": record.get("version"),
        "action": action,
        "reason": record["reason"],
        "new_bytes": record.get("new_bytes"),
        "cost": cost,
        "benefit": (record.get("benefit") or {}).get("benefit"),
        "record": line,
        "start_time": ts,
        "end_time": ts + timedelta(seconds=float(record.get("tick_seconds") or 0.0)),
        "table_name": record["table"],
        "table_path": record.get("path"),
        "operation_type": "CLUSTERING" if status is not None else None,
        "operation_id": job.get("run_id"),
        "operation_status": status,
        "operation_metrics": [(k, str(v)) for k, v in metrics.items() if v is not None] or None,
        "usage_unit": "CLUSTER_SECONDS" if seconds is not None else None,
        "usage_quantity": seconds,
        "estimated_net_benefit": record.get("net"),
    }
