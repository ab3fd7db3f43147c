"""Decision records: one per tick per table, as a JSON line in the decision log (written at once) and a
row of the decisions Delta table (committed in batches: at most one append per ``flush`` seconds for the
whole fleet, and on `flush` at the end of a pass or on shutdown). The line and the row hold the same
record, so operators can grep the file or query the table; a crash loses at most the last batch's rows
from the table, never from the file.

The table's columns follow Databricks' predictive-optimization history
(``system.storage.predictive_optimization_operations_history``: start and end time, table, operation
type, id, status, metrics, usage) so that the queries operators already have carry over, plus what no
peer publishes: the estimated cost and benefit of every decision, the reason, and on a job's row what
it realised over the scans after it (`service.realised`), set by one merge per flush as scans arrive
(the measuring tick's line carries the same figures; a crash loses at most the last batch's updates,
which the state's sums still hold).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError
from sqlglot import exp

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
        # what the job realised over the scans after it (`service.realised`), updated as scans arrive
        pa.field("realised_benefit", pa.float64()),  # cluster-seconds saved, the unit of `benefit`
        pa.field("realised_bytes_saved", pa.float64()),  # bytes saved, readers mixed by the table's shares
        pa.field("realised_scans", pa.int64()),  # scans measured so far
        pa.field("realised_at", pa.timestamp("us", tz="UTC")),  # when the figures were last updated
        pa.field("realised", pa.string()),  # the whole measurement as JSON (per reader, window, caveats)
    ]
)
REALISED_COLUMNS = ("realised_benefit", "realised_bytes_saved", "realised_scans", "realised_at", "realised")
REALISED_KEYS = ("start_time", "table_name", "operation_id")  # how a job's row is found again
REALISED_SCHEMA = pa.schema(
    [DECISIONS_SCHEMA.field(name) for name in ("start_time", "table_name", "operation_id", *REALISED_COLUMNS)]
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
        self._realised: dict[tuple[str, str], dict[str, Any]] = {}  # (table, run id) -> its row's new figures
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

    def realised(self, table: str, row_ts: datetime, figures: Mapping[str, Any]) -> None:
        """Queue a job's realised figures so far (`service.realised.figures`) for its row (the table's,
        with the job's run id and start time `row_ts`), set by the next flush; a job's latest figures
        replace any still queued. The tick's record carries them too (the JSON-lines file)."""
        run_id = str(figures["run_id"])
        update = {
            "start_time": row_ts,
            "table_name": table,
            "operation_id": run_id,
            "realised_benefit": float(figures["benefit"]),
            "realised_bytes_saved": float(figures["bytes_saved"]),
            "realised_scans": int(figures["scans"]),
            "realised_at": datetime.now(UTC),
            "realised": json.dumps(figures, default=str, sort_keys=True),
        }
        with self._lock:
            self._realised[(table, run_id)] = update

    def flush(self) -> int:
        """Commit the queued rows in one append, then set the queued realised figures on their job rows
        in one merge (best effort: on failure they stay queued and the failure is logged; the lines are
        on disk). Returns the rows committed."""
        with self._lock:
            rows, self._pending = self._pending, []
            self._flushed = time.monotonic()
            if rows and not self._append(rows):
                self._pending = rows + self._pending
                return 0
            updates, self._realised = self._realised, {}
            if updates and not self._update(list(updates.values())):
                self._realised = {**updates, **self._realised}
            return len(rows)

    def _append(self, rows: list[dict[str, Any]]) -> bool:
        """Append `rows` in one commit; False (logged) when the table cannot be written."""
        try:
            write_deltalake(
                self.table_path,
                pa.Table.from_pylist(rows, schema=DECISIONS_SCHEMA),
                mode="append",
                schema_mode="merge",  # tables written before the operator columns gain them
                name="deltaopt_decisions",
            )
        except (DeltaError, OSError, ValueError) as err:
            log.warning("could not append %d decision(s) to %s: %s", len(rows), self.table_path, err)
            return False
        self.commits += 1
        return True

    def _update(self, updates: list[dict[str, Any]]) -> bool:
        """Set the realised columns of the job rows `updates` name, in one merge. The rows are found by
        table, run id and start time; only files from the earliest start time on are read (a literal
        bound the merge prunes files by: the rows of jobs still measured are days old at most)."""
        earliest = min(u["start_time"] for u in updates).astimezone(UTC).isoformat()
        bound = exp.GTE(
            this=exp.column("start_time", table="t"), expression=exp.cast(exp.Literal.string(earliest), "TIMESTAMP")
        )
        matches = [exp.column(c, table="t").eq(exp.column(c, table="s")) for c in REALISED_KEYS]
        try:
            DeltaTable(self.table_path).merge(
                pa.Table.from_pylist(updates, schema=REALISED_SCHEMA),
                predicate=exp.and_(*matches, bound).sql(),
                source_alias="s",
                target_alias="t",
                merge_schema=True,  # a table written before the realised columns gains them
            ).when_matched_update(updates={c: exp.column(c, table="s").sql() for c in REALISED_COLUMNS}).execute()
        except (DeltaError, OSError, ValueError) as err:
            log.warning("could not set the realised figures of %d job(s) in %s: %s", len(updates), self.table_path, err)
            return False
        self.commits += 1
        return True

    def read(self, table: str | None = None, last: int = 20) -> list[dict[str, Any]]:
        """The latest `last` records (of one table), oldest first, from the Delta table (or the file)
        and the rows not yet committed."""
        try:
            records = _table_records(DeltaTable(self.table_path))
        except (TableNotFoundError, DeltaError, OSError):
            if not self.jsonl_path.exists():
                return []
            records = [json.loads(line) for line in self.jsonl_path.read_text().splitlines() if line.strip()]
        else:
            with self._lock:
                records += [json.loads(r["record"]) for r in self._pending]
                queued = {key: json.loads(u["realised"]) for key, u in self._realised.items()}
            for r in records:  # figures not merged yet are the newest
                found = queued.get((str(r.get("table")), str((r.get("job") or {}).get("run_id"))))
                if found is not None:
                    r["realised"] = found
        if table is not None:
            records = [r for r in records if r.get("table") == table]
        records.sort(key=lambda r: r.get("ts", ""))
        return records[-last:]


def _table_records(table: DeltaTable) -> list[dict[str, Any]]:
    """The records of the decisions table, a job's with its realised figures (the ``realised`` column,
    absent from tables no measurement has updated yet) under ``realised``."""
    names = table.schema().to_arrow().names
    data = table.to_pyarrow_table(columns=["record", "realised"] if "realised" in names else ["record"])
    records = [json.loads(r) for r in data.column("record").to_pylist()]
    if "realised" in names:
        for record, realised in zip(records, data.column("realised").to_pylist(), strict=True):
            if realised is not None:
                record["realised"] = json.loads(realised)
    return records


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
