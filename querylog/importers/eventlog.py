"""Spark event logs: one query-log row per file scan of every SQL execution.

From each ``SparkListenerSQLExecutionStart`` event:

* when ``description`` is SQL text (SQL warehouses and the Thrift server put it there), the statement
  goes through the SQL path like any other;
* otherwise the scan nodes of ``sparkPlanInfo`` give the table (``Location`` or the catalog name), the
  columns read (``ReadSchema``) and the filters (``PushedFilters``, plus unambiguous ``DataFilters``).
  ``IsNotNull`` filters are dropped: Spark infers them for join keys and compared columns, and a plan
  cannot tell those from written ones (the SQL path never sees inferred ones either).

The matching ``SparkListenerSQLExecutionEnd`` gives the duration. Garbage lines, events without
scans and unreadable filters are quarantined. Plain and ``.gz`` logs are read, as are Spark 4's rolling
log directories; zstd/lz4-compressed logs need ``zstandard``/``lz4`` installed, or decompressing first.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlglot import exp

from querylog.capture import Captured, Metrics, SqlContext, capture_filters, capture_sql
from querylog.errors import ImportSourceError, PredicateError
from querylog.importers import ImportReport, commit_import, content_key
from querylog.importers.pushed_filters import (
    parse_data_filter,
    parse_pushed_filter,
    parse_read_schema,
    split_filter_list,
)
from querylog.predicates.normalize import canonical_conjuncts
from querylog.records import QuarantineRecord

START = "SparkListenerSQLExecutionStart"
END = "SparkListenerSQLExecutionEnd"
SQL_START = re.compile(r"^\s*(\(\s*)*(select|with|insert|create\s+table|from)\b", re.I)


def _open_bytes(path: Path) -> bytes:
    try:
        if path.is_dir():  # Spark 4 rolling event log: eventlog_v2_*/events_<n>_*
            parts = sorted(
                path.glob("events_*"),
                key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0,
            )
            return b"\n".join(_open_bytes(p) for p in parts)
        data = path.read_bytes()
    except OSError as err:
        raise ImportSourceError(f"cannot read {path}: {err.strerror or err}") from err
    if path.suffix == ".gz":
        return gzip.decompress(data)
    if path.suffix in (".zstd", ".zst"):
        try:
            import zstandard
        except ImportError as err:
            raise ImportSourceError(
                f"{path} is zstd-compressed: pip install zstandard, or run `zstd -d` first"
            ) from err
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if path.suffix == ".lz4":
        try:
            import lz4.frame
        except ImportError as err:
            raise ImportSourceError(f"{path} is lz4-compressed: pip install lz4, or decompress it first") from err
        return lz4.frame.decompress(data)
    return data


def _scan_nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    metadata = plan.get("metadata") or {}
    if "ReadSchema" in metadata and "Location" in metadata:
        yield plan
    for child in plan.get("children") or []:
        yield from _scan_nodes(child)


def _location(metadata: Mapping[str, Any]) -> str:
    """``InMemoryFileIndex(1 paths)[file:/data/lineitem]`` -> ``/data/lineitem``."""
    match = re.search(r"\[([^\]]+)\]", str(metadata.get("Location", "")))
    location = match.group(1).split(",")[0].strip() if match else str(metadata.get("Location", ""))
    return re.sub(r"^file:(//)?", "", location).rstrip("/")


def _table_name(node: Mapping[str, Any]) -> str | None:
    """``Scan parquet spark_catalog.default.lineitem`` -> ``spark_catalog.default.lineitem``."""
    words = str(node.get("nodeName", "")).split()
    return words[2].lower() if len(words) >= 3 else None


def scan_filters_from_plan(node: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(filters as SQL, columns) of one scan node. Raises `PredicateError` when unreadable."""
    metadata = node["metadata"]
    schema = parse_read_schema(metadata["ReadSchema"])
    predicates: list[exp.Expr] = []
    for text in split_filter_list(metadata.get("PushedFilters", "[]")):
        predicates.append(parse_pushed_filter(text, schema))
    for text in split_filter_list(metadata.get("DataFilters", "[]")):
        extra = parse_data_filter(text, schema)
        if extra is not None:
            predicates.append(extra)
    kept = [p for p in predicates if not _is_not_null(p)]
    return sorted({c for p in kept for c in canonical_conjuncts(p)}), sorted(schema)


def _is_not_null(predicate: exp.Expr) -> bool:
    return (
        isinstance(predicate, exp.Not)
        and isinstance(predicate.this, exp.Is)
        and isinstance(predicate.this.this, exp.Column)
    )


def _capture_plan(
    event: Mapping[str, Any], ts: datetime, context: SqlContext, location: str, metrics: Metrics
) -> Captured:
    nodes = list(_scan_nodes(event.get("sparkPlanInfo") or {}))
    if not nodes:
        return Captured(
            quarantined=(
                QuarantineRecord(
                    ts,
                    "eventlog",
                    location,
                    "no SQL text and no file scan in the plan",
                    str(event.get("description", "")),
                ),
            )
        )
    captured = Captured()
    query_id = f"{location}"
    for node in nodes:
        path, name = _location(node["metadata"]), _table_name(node)
        table_id = context.aliases.get(path) or (context.aliases.get(name) if name else None) or name or path
        if context.watched is not None and table_id not in context.watched:
            continue
        try:
            filters, columns = scan_filters_from_plan(node)
        except PredicateError as err:
            captured += Captured(
                quarantined=(QuarantineRecord(ts, "eventlog", location, str(err), json.dumps(node.get("metadata"))),)
            )
            continue
        captured += capture_filters(
            table_id,
            filters,
            columns,
            ts,
            "eventlog",
            query_id,
            metrics if len(nodes) == 1 else Metrics(),
            location,
        )
    if not captured.scans and not captured.quarantined:
        captured += Captured(
            quarantined=(
                QuarantineRecord(ts, "eventlog", location, "scans no watched table", str(event.get("description", ""))),
            )
        )
    return captured


def import_event_log(log_table: Any, path: str | Path, context: SqlContext = SqlContext()) -> ImportReport:
    """Import a Spark event log file (or rolling-log directory) into `log_table`."""
    path = Path(path)
    data = _open_bytes(path)
    starts: list[tuple[int, Mapping[str, Any]]] = []
    ends: dict[Any, int] = {}
    captured = Captured()
    now = datetime.now(UTC)
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            captured += Captured(
                quarantined=(QuarantineRecord(now, "eventlog", f"{path.name}:{number}", "not a JSON event", line),)
            )
            continue
        kind = str(event.get("Event", "")) if isinstance(event, dict) else ""
        if kind.endswith(START):
            starts.append((number, event))
        elif kind.endswith(END) and "executionId" in event:
            ends[event["executionId"]] = int(event.get("time", 0))
    for number, event in starts:
        location = f"{path.name}:{number}"
        if "time" not in event or "executionId" not in event:
            captured += Captured(
                quarantined=(
                    QuarantineRecord(
                        now,
                        "eventlog",
                        location,
                        "execution start without time or id",
                        json.dumps(event)[:2000],
                    ),
                )
            )
            continue
        ts = datetime.fromtimestamp(int(event["time"]) / 1000, tz=UTC)
        end = ends.get(event["executionId"])
        metrics = Metrics(duration_ms=end - int(event["time"]) if end else None)
        description = str(event.get("description") or "")
        if SQL_START.match(description):
            result = capture_sql(description, ts, "eventlog", context, None, metrics, location)
            if result.scans:
                captured += result
                continue
        captured += _capture_plan(event, ts, context, location, metrics)
    return commit_import(log_table, captured, content_key(data), str(path), len(starts))
