"""SQL statement files and query-history exports (CSV, JSON array, JSON lines).

A statement file holds statements separated by semicolons (split with sqlglot's tokenizer, so
semicolons inside strings and comments do not split). A history export has one query per row with
its text and start time; column names are found among common spellings (Databricks, Snowflake,
generic) or given explicitly, nested JSON keys as ``metrics.read_bytes``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from querylog.capture import Captured, Metrics, SqlContext, capture_sql, pinned, prefetch_derived
from querylog.errors import ImportSourceError
from querylog.importers import ImportReport, commit_import, content_key
from querylog.predicates.parse import DIALECT
from querylog.predicates.templates import StatementTemplates
from querylog.records import QuarantineRecord
from querylog.store import QueryLogTable

TEXT_COLUMNS = ("query_text", "statement_text", "statement", "sql_text", "sql", "query")
TIME_COLUMNS = (
    "start_time",
    "query_start_time_ms",
    "query_start_time",
    "start_time_ms",
    "timestamp",
    "ts",
    "executed_at",
)
ID_COLUMNS = ("query_id", "statement_id", "id")
DURATION_COLUMNS = ("duration_ms", "total_time_ms", "execution_time_ms", "total_elapsed_time", "duration")
BYTES_COLUMNS = ("metrics.read_bytes", "read_bytes", "bytes_scanned", "bytes_read")
FILES_COLUMNS = ("metrics.read_files", "read_files", "files_scanned", "partitions_scanned")


@dataclass(frozen=True)
class Statement:
    text: str
    line: int


def split_statements(text: str) -> list[Statement]:
    """Statements of a SQL file with the line each starts on."""
    tokenizer = Dialect.get_or_raise(DIALECT).tokenizer_class()
    try:
        tokens = tokenizer.tokenize(text)
    except TokenError:
        return _split_on_lines(text)
    statements: list[Statement] = []
    start = 0
    start_line = 1
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            _add(statements, text[start : token.start], start_line)
            start = token.end + 1
            start_line = token.line
    _add(statements, text[start:], start_line)
    return statements


def _split_on_lines(text: str) -> list[Statement]:
    """Fallback for text the tokenizer rejects (e.g. an unterminated quote): split at ';' line ends, so
    one broken statement is quarantined and the rest still import."""
    statements: list[Statement] = []
    buffer: list[str] = []
    first = 1
    for number, line in enumerate(text.splitlines(), start=1):
        if not buffer:
            first = number
        buffer.append(line)
        if line.rstrip().endswith(";"):
            _add(statements, "\n".join(buffer).rstrip().rstrip(";"), first)
            buffer = []
    _add(statements, "\n".join(buffer), first)
    return statements


def _add(statements: list[Statement], text: str, line: int) -> None:
    """Keep `text` as a statement unless it is only blanks and comments; leading comment lines are
    dropped and counted into the statement's line number."""
    lines = text.split("\n")
    skipped = 0
    while skipped < len(lines) and (not lines[skipped].strip() or lines[skipped].strip().startswith("--")):
        skipped += 1
    body = "\n".join(lines[skipped:]).strip()
    if body:
        statements.append(Statement(body, line + skipped))


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise ImportSourceError(f"cannot read {path}: {err.strerror or err}") from err


def import_sql_file(
    log: QueryLogTable,
    path: str | Path,
    context: SqlContext = SqlContext(),
    at: datetime | None = None,
    templates: bool = True,
) -> ImportReport:
    """Import a file of SQL statements, all stamped `at` (default: now). ``templates=False`` derives
    every statement in full (what the statement-template memo is measured against)."""
    path = Path(path)
    data = _read_bytes(path)
    text = data.decode("utf-8", errors="replace")
    when = at or datetime.now(UTC)
    captured = Captured()
    statements = split_statements(text)
    cache: dict[str, Captured] = {}
    memo = context.templates() if templates else None
    with pinned(context):  # the sources' snapshots: one read, the same for the prefetch and every capture
        prefetch_derived(dict.fromkeys(s.text for s in statements), context, memo)  # joins derived in batches
        for statement in statements:
            location = f"{path.name}:{statement.line}"
            result = cache.get(statement.text)
            if result is None:
                result = capture_sql(statement.text, when, "sqlfile", context, location=location, scans=memo)
                cache[statement.text] = result
            captured += _restamp(result, when, location)
    return commit_import(log, captured, content_key(data), source=str(path), entries=len(statements))


def _restamp(
    captured: Captured,
    ts: datetime,
    location: str,
    query_id: str | None = None,
    metrics: Metrics | None = None,
) -> Captured:
    """A cached capture re-issued for another occurrence of the same text: new id, time, location."""
    qid = query_id or uuid.uuid4().hex
    measured: dict[str, Any] = {}
    if metrics is not None and len(captured.scans) == 1:
        measured = {
            "bytes_scanned": metrics.bytes_scanned,
            "files_scanned": metrics.files_scanned,
            "duration_ms": metrics.duration_ms,
        }
    scans = tuple(dataclasses.replace(s, query_id=qid, ts=ts, **measured) for s in captured.scans)
    quarantined = tuple(dataclasses.replace(q, ts=ts, location=location) for q in captured.quarantined)
    return dataclasses.replace(captured, scans=scans, quarantined=quarantined)  # counts carry over as they are


@dataclass(frozen=True)
class HistoryColumns:
    """Column names of a history export; None: detect among the common spellings."""

    text: str | None = None
    time: str | None = None
    query_id: str | None = None


def _rows(path: Path, data: bytes) -> Iterator[Mapping[str, Any]]:
    text = data.decode("utf-8", errors="replace")
    if path.suffix.lower() == ".csv":
        yield from csv.DictReader(io.StringIO(text))
        return
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as err:
            raise ImportSourceError(f"{path}: not valid JSON: {err}") from err
        for row in rows:
            yield row if isinstance(row, Mapping) else {"__invalid__": row}
        return
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = {"__invalid__": line}
        yield row if isinstance(row, Mapping) else {"__invalid__": line}


def _flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}".lower()
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _pick(row: Mapping[str, Any], explicit: str | None, candidates: Sequence[str]) -> Any:
    for name in [explicit.lower()] if explicit else candidates:
        if row.get(name) not in (None, ""):
            return row[name]
    return None


def parse_time(value: Any) -> datetime:
    """Epoch seconds or milliseconds, or an ISO-8601 string. Raises ValueError."""
    if isinstance(value, int | float) or (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
        number = float(value)
        return datetime.fromtimestamp(number / 1000 if number > 1e11 else number, tz=UTC)
    text = str(value).strip().replace("Z", "+00:00")
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _int(value: Any) -> int | None:
    try:
        return None if value in (None, "") else int(float(value))
    except (TypeError, ValueError):
        return None


def import_history(
    log: QueryLogTable,
    path: str | Path,
    context: SqlContext = SqlContext(),
    columns: HistoryColumns = HistoryColumns(),
) -> ImportReport:
    """Import a query-history export: one query per row with text and start time."""
    path = Path(path)
    data = _read_bytes(path)
    memo = context.templates()
    with pinned(context):  # the sources' snapshots: one read, the same for the prefetch and every capture
        if context.derive is not None:  # joins derived in batches: every row's text first
            texts = (_pick(_flatten(raw), columns.text, TEXT_COLUMNS) for raw in _rows(path, data))
            prefetch_derived(dict.fromkeys(t for t in texts if isinstance(t, str) and t.strip()), context, memo)
        captured, entries = _capture_history(path, data, context, columns=columns, memo=memo)
    return commit_import(log, captured, content_key(data), source=str(path), entries=entries)


def _capture_history(
    path: Path, data: bytes, context: SqlContext, *, columns: HistoryColumns, memo: StatementTemplates
) -> tuple[Captured, int]:
    """Every row of a history export captured (a text seen before reissued from its capture), and
    the number of rows."""
    captured = Captured()
    cache: dict[str, Captured] = {}
    entries = 0
    for number, raw in enumerate(_rows(path, data), start=1):
        entries += 1
        location = f"{path.name}:{number}"
        row = _flatten(raw)
        if "__invalid__" in row:
            captured += _quarantine(location, "not a JSON object", str(row["__invalid__"]))
            continue
        text = _pick(row, columns.text, TEXT_COLUMNS)
        if not isinstance(text, str) or not text.strip():
            captured += _quarantine(
                location,
                "no query text (looked for: " + ", ".join([columns.text] if columns.text else TEXT_COLUMNS) + ")",
                json.dumps(raw, default=str),
            )
            continue
        try:
            when = parse_time(_pick(row, columns.time, TIME_COLUMNS))
        except (TypeError, ValueError, OverflowError):
            captured += _quarantine(location, "missing or unreadable start time", text)
            continue
        metrics = Metrics(
            bytes_scanned=_int(_pick(row, None, BYTES_COLUMNS)),
            files_scanned=_int(_pick(row, None, FILES_COLUMNS)),
            duration_ms=_int(_pick(row, None, DURATION_COLUMNS)),
        )
        query_id = _pick(row, columns.query_id, ID_COLUMNS)
        result = cache.get(text)
        if result is None:
            result = capture_sql(text, when, "history", context, location=location, scans=memo)
            cache[text] = result
        captured += _restamp(result, when, location, str(query_id) if query_id else None, metrics)
    return captured, entries


def _quarantine(location: str, reason: str, raw: str) -> Captured:
    return Captured(quarantined=(QuarantineRecord(datetime.now(UTC), "history", location, reason, raw),))
