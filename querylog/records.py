"""What a query-log row is, and what a quarantined input is. Schema version 1.

The query log has **one row per table scan**: a query that joins three tables is three rows; a
self-join is one row per reference. Columns:

=================  ===========================  ==============================================================
column             type                         meaning
=================  ===========================  ==============================================================
schema_version     int16                        1 (readers refuse rows of a version they do not know)
query_id           string                       id from the source, or a generated UUID
ts                 timestamp[us, UTC]           when the query started
table_id           string                       scanned table: config ``table_id``, a name or a path
filters            list<string>                 the conjuncts pushed to this scan, canonical Spark SQL
columns            list<string>                 columns the scan reads (``*`` when unknown)
bytes_scanned      int64, nullable              scan metrics when the source knows them
files_scanned      int64, nullable
duration_ms        int64, nullable
source             string                       recorder, dataframe, sqlfile, history, eventlog
raw                string, nullable             the source text (SQL or plan fragment), for audit
derived            list<struct>, nullable       filters in ``filters`` a join implies rather than the query
                                                states: ``filter`` and ``via`` (the other table's key and
                                                filter it stands for); absent from logs older than it
=================  ===========================  ==============================================================

The quarantine table keeps every input that could not be turned into rows, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from querylog.predicates.truncate import MAX_SCAN_FILTERS, bound_filters

SCHEMA_VERSION = 1
RAW_LIMIT = 16_384  # characters of source text kept for audit

LOG_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int16(), nullable=False),
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("table_id", pa.string(), nullable=False),
        pa.field("filters", pa.list_(pa.string()), nullable=False),
        pa.field("columns", pa.list_(pa.string()), nullable=False),
        pa.field("bytes_scanned", pa.int64()),
        pa.field("files_scanned", pa.int64()),
        pa.field("duration_ms", pa.int64()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("raw", pa.string()),
        pa.field("derived", pa.list_(pa.struct([("filter", pa.string()), ("via", pa.string())]))),
    ]
)
OPTIONAL_LOG_COLUMNS = frozenset({"derived"})  # added after version 1's first release: may be absent

QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("location", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw", pa.string()),
    ]
)


def utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def clip(text: str | None) -> str | None:
    return None if text is None else text[:RAW_LIMIT]


@dataclass(frozen=True)
class DerivedFilter:
    """A filter a join implies on a scan's key: ``filter`` (canonical, also among the scan's filters)
    holds on every row of the scan that joins a row of the other table satisfying ``via``."""

    filter: str
    via: str  # e.g. "date_dim.d_date_sk WHERE d_year = 2001"

    def source(self) -> tuple[str, str, str] | None:
        """(dimension, key, dimension filter) that `via` names, lower-cased names; None when `via` is
        not of that shape."""
        head, separator, where = self.via.partition(" WHERE ")
        dimension, dot, key = head.rpartition(".")
        if not (separator and dot and dimension and key and where.strip()):
            return None
        return dimension.lower(), key.lower(), where.strip()


@dataclass(frozen=True)
class ScanRecord:
    """One row of the query log."""

    query_id: str
    ts: datetime
    table_id: str
    filters: tuple[str, ...]
    columns: tuple[str, ...]
    source: str
    raw: str | None = None
    bytes_scanned: int | None = None
    files_scanned: int | None = None
    duration_ms: int | None = None
    derived: tuple[DerivedFilter, ...] = ()


@dataclass(frozen=True)
class QuarantineRecord:
    """An input that produced no rows, and why."""

    ts: datetime
    source: str
    location: str  # file:line, event number, ...
    reason: str
    raw: str | None


def scans_to_arrow(records: Sequence[ScanRecord]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "schema_version": SCHEMA_VERSION,
                "query_id": r.query_id,
                "ts": utc(r.ts),
                "table_id": r.table_id,
                "filters": list(r.filters),
                "columns": list(r.columns),
                "bytes_scanned": r.bytes_scanned,
                "files_scanned": r.files_scanned,
                "duration_ms": r.duration_ms,
                "source": r.source,
                "raw": clip(r.raw),
                "derived": [{"filter": d.filter, "via": d.via} for d in r.derived] or None,
            }
            for r in records
        ],
        schema=LOG_SCHEMA,
    )


def scans_from_arrow(table: pa.Table) -> list[ScanRecord]:
    """Rows of a known schema version as records; rows of other versions are refused by the caller.
    A row written before the capture's bounds keeps only `MAX_SCAN_FILTERS` filters here (soundly)."""
    return [_scan(row) for row in table.select([n for n in LOG_SCHEMA.names if n in table.column_names]).to_pylist()]


def _scan(row: dict[str, Any]) -> ScanRecord:
    stored = tuple(row["filters"] or ())
    filters = stored if len(stored) <= MAX_SCAN_FILTERS else bound_filters(stored)
    derived = (DerivedFilter(d["filter"], d["via"]) for d in row.get("derived") or ())
    return ScanRecord(
        query_id=row["query_id"],
        ts=utc(row["ts"]),
        table_id=row["table_id"],
        filters=filters,
        columns=tuple(row["columns"] or ()),
        source=row["source"],
        raw=row.get("raw"),
        bytes_scanned=row.get("bytes_scanned"),
        files_scanned=row.get("files_scanned"),
        duration_ms=row.get("duration_ms"),
        derived=tuple(d for d in derived if d.filter in filters),
    )


def quarantine_to_arrow(records: Iterable[QuarantineRecord]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "ts": utc(r.ts),
                "source": r.source,
                "location": r.location,
                "reason": r.reason,
                "raw": clip(r.raw),
            }
            for r in records
        ],
        schema=QUARANTINE_SCHEMA,
    )


def quarantine_from_arrow(table: pa.Table) -> list[QuarantineRecord]:
    return [
        QuarantineRecord(utc(r["ts"]), r["source"], r["location"], r["reason"], r.get("raw"))
        for r in table.select(QUARANTINE_SCHEMA.names).to_pylist()
    ]
