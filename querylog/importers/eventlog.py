"""Spark event logs: one query-log row per file scan of every SQL execution.

From each ``SparkListenerSQLExecutionStart`` event:

* when ``description`` is SQL text (SQL warehouses and the Thrift server put it there), the statement
  goes through the SQL path like any other;
* otherwise the scan nodes of ``sparkPlanInfo`` give the table (``Location`` or the catalog name), the
  columns read (``ReadSchema``) and the filters (``PushedFilters``, plus unambiguous ``DataFilters``);
  its inner equi-joins (`plan_joins`) give the join-derived filters, as the SQL path derives them.
  ``IsNotNull`` filters are dropped: Spark infers them for join keys and compared columns, and a plan
  cannot tell those from written ones (the SQL path never sees inferred ones either).

The matching ``SparkListenerSQLExecutionEnd`` gives the duration. Garbage lines, events without
scans and unreadable filters are quarantined. Plain, gzip, zstd and lz4 logs are read, streaming and to
their last frame, as are Spark 4's rolling log directories (`querylog.importers.eventlog_files`). An
import that finds SQL executions but captures no scan, or a file that decodes to fewer bytes than it
stores, is reported with a warning: never a silent success.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from sqlglot import exp

from querylog.capture import Captured, Metrics, SqlContext, capture_filters, capture_sql, pinned, prefetch_derived
from querylog.errors import PredicateError
from querylog.importers import ImportReport, commit_import
from querylog.importers.eventlog_files import EventLogReading, event_lines
from querylog.importers.plan_joins import plan_join_keys, scan_nodes
from querylog.importers.pushed_filters import (
    parse_data_filter,
    parse_pushed_filter,
    parse_read_schema,
    split_filter_list,
)
from querylog.predicates.attribute import JoinKey
from querylog.predicates.normalize import canonical_conjuncts
from querylog.predicates.templates import StatementTemplates
from querylog.records import QuarantineRecord

START = "SparkListenerSQLExecutionStart"
END = "SparkListenerSQLExecutionEnd"
SQL_START = re.compile(r"^\s*(\(\s*)*(select|with|insert|create\s+table|from)\b", re.I)


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


def scan_identity(aliases: Mapping[str, str], node: Mapping[str, Any]) -> str:
    """The log identity of the table a scan node reads: an alias of its path or name, else the name,
    else the path."""
    path = _location(node["metadata"])
    name = _table_name(node)
    return aliases.get(path) or (aliases.get(name) if name else None) or name or path


def _dimension_filters(node: Mapping[str, Any]) -> tuple[str, ...]:
    """A joined scan's filters (none when unreadable: nothing is derived from it)."""
    try:
        return tuple(scan_filters_from_plan(node)[0])
    except PredicateError:
        return ()


def _target_joins(event: Mapping[str, Any], context: SqlContext) -> dict[int, list[JoinKey]]:
    """The inner equi-joins of an execution's plan scans that get join-derived filters (by scan node
    ``id``): only scans of the context's targets, and none read when the plan scans no target."""
    if context.derive is None:
        return {}
    plan = event.get("sparkPlanInfo") or {}
    identity = partial(scan_identity, context.aliases)
    targets = {id(node) for node in scan_nodes(plan) if context.derive_for(identity(node)) is not None}
    if not targets:
        return {}
    joins = plan_join_keys(plan, identity, _dimension_filters)
    return {node: keys for node, keys in joins.items() if node in targets}


def _capture_plan(
    event: Mapping[str, Any],
    ts: datetime,
    context: SqlContext,
    location: str,
    metrics: Metrics,
    *,
    joins: Mapping[int, Sequence[JoinKey]] | None = None,
) -> Captured:
    """The execution's scans from its plan; `joins` are its `_target_joins` when already read."""
    nodes = list(scan_nodes(event.get("sparkPlanInfo") or {}))
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
    joins = _target_joins(event, context) if joins is None else joins
    for node in nodes:
        table_id = scan_identity(context.aliases, node)
        if not context.watches(table_id):
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
            query_id=query_id,
            metrics=metrics if len(nodes) == 1 else Metrics(),
            location=location,
            joins=joins.get(id(node), ()),
            derive=context.derive_for(table_id),
        )
    if not captured.scans and not captured.quarantined:
        captured += Captured(
            quarantined=(
                QuarantineRecord(ts, "eventlog", location, "scans no watched table", str(event.get("description", ""))),
            )
        )
    return captured


def _executions(
    path: Path, reading: EventLogReading, now: datetime
) -> tuple[list[tuple[int, Mapping[str, Any]]], dict[Any, int], Captured]:
    """The SQL execution starts (with their line numbers), end times by execution id, and the lines
    that are not JSON events (quarantined)."""
    starts: list[tuple[int, Mapping[str, Any]]] = []
    ends: dict[Any, int] = {}
    captured = Captured()
    for number, raw in enumerate(event_lines(path, reading), start=1):
        line = raw.decode("utf-8", errors="replace")
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
    return starts, ends, captured


def import_event_log(log_table: Any, path: str | Path, context: SqlContext = SqlContext()) -> ImportReport:
    """Import a Spark event log file (or rolling-log directory) into `log_table`."""
    path = Path(path)
    reading = EventLogReading()
    now = datetime.now(UTC)
    starts, ends, captured = _executions(path, reading, now)
    with pinned(context):  # the sources' snapshots: one read, the same for the prefetch and every capture
        captured += _capture_executions(path, starts, ends, context, now=now)
    warnings = list(reading.warnings)
    if starts and not captured.scans:
        reasons = sorted({q.reason for q in captured.quarantined})
        warnings.append(
            f"{len(starts)} SQL executions found but no scan captured"
            + (f" (quarantined: {'; '.join(reasons[:3])})" if reasons else "")
        )
    if not starts and reading.decoded_bytes:
        warnings.append(f"no SQL execution events in {reading.decoded_bytes:,} bytes: is it a Spark event log?")
    return commit_import(
        log_table, captured, reading.content_key, source=str(path), entries=len(starts), warnings=tuple(warnings)
    )


def _capture_executions(
    path: Path,
    starts: list[tuple[int, Mapping[str, Any]]],
    ends: Mapping[Any, int],
    context: SqlContext,
    *,
    now: datetime,
) -> Captured:
    """Every execution start captured, its SQL text when that gives a watched scan, else its plan. The
    joins they need are derived first, in batches: the SQL texts' and the plan joins of the executions
    captured from their plans, so a DataFrame query's keys (or those of a statement read through a
    view) do not each cost a Spark pass of their own at capture."""
    memo = context.templates()
    texts = dict.fromkeys(str(event.get("description") or "") for _, event in starts)
    by_text = {t: _gives_scans(t, context, memo) for t in texts if SQL_START.match(t)}
    planned = {n: _target_joins(event, context) for n, event in starts if _from_plan(event, by_text)}
    plans = [scan for n, event in starts if planned.get(n) for scan in _joined_scans(event, planned[n], context)]
    prefetch_derived([t for t, gives in by_text.items() if gives], context, memo, plans)  # batched joins
    captured = Captured()
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
            result = capture_sql(description, ts, "eventlog", context, metrics=metrics, location=location, scans=memo)
            if result.scans:
                captured += result
                continue
        captured += _capture_plan(event, ts, context, location, metrics, joins=planned.get(number))
    return captured


def _gives_scans(sql: str, context: SqlContext, memo: StatementTemplates) -> bool:
    """Whether `capture_sql` captures scans from `sql`: it reads, and reads a watched table. A text that
    does not (a view's name, a table under a name not watched) leaves the execution to its plan."""
    try:
        scans = memo(sql).scans
    except PredicateError:
        return False
    return any(context.watches(s.table) for s in scans)


def _from_plan(event: Mapping[str, Any], by_text: Mapping[str, bool]) -> bool:
    """An execution that will be captured from its plan: complete, with no SQL text or a text that gives
    no scan (`by_text`: `_gives_scans` of each SQL text)."""
    complete = "time" in event and "executionId" in event
    return complete and not by_text.get(str(event.get("description") or ""), False)


def _joined_scans(
    event: Mapping[str, Any], joins: Mapping[int, Sequence[JoinKey]], context: SqlContext
) -> list[tuple[str, Sequence[JoinKey]]]:
    """(table, joins) of the plan scans `joins` names (`_target_joins`), as `prefetch_derived` takes them."""
    nodes = scan_nodes(event.get("sparkPlanInfo") or {})
    return [(scan_identity(context.aliases, node), joins[id(node)]) for node in nodes if id(node) in joins]
