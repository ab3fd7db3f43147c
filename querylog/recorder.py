"""Recording scans from applications, with the thesis's two levels of caching (ch. 3).

``record`` only puts the raw observation on an in-memory queue (microseconds: applications call it on
every query). When the queue is full, or on every flush, it is *spilled*: normalised and written to a
local file, atomically (write to a temporary name, then rename). ``flush`` appends every spilled file
to the query-log table and deletes it.

Exactly once: each spill file carries a sequence number, and its rows are appended in one Delta
commit that also records ``txn(appId=<recorder id>, version=<sequence>)``. A file whose sequence is
at or below the committed one was already appended (the process died before deleting it) and is
only deleted. The recorder id is stored in the spill directory, so a restarted recorder resumes.
Records still in memory when a process dies are lost by design; spilled ones never are.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from querylog.capture import Captured, Metrics, SqlContext, capture_filters, capture_sql, pinned, prefetch_derived
from querylog.durable import atomic_file
from querylog.predicates.attribute import JoinKey
from querylog.records import (
    LOG_SCHEMA,
    QUARANTINE_SCHEMA,
    quarantine_from_arrow,
    quarantine_to_arrow,
    scans_from_arrow,
    scans_to_arrow,
)
from querylog.store import QuarantineTable, QueryLogTable, quarantine_path

log = logging.getLogger(__name__)

SCANS_SUFFIX = ".scans.arrow"
QUARANTINE_SUFFIX = ".quarantine.arrow"
BACKLOG = 10  # queues' worth of records waiting before a caller spills itself (memory stays bounded)


@dataclass(frozen=True)
class _Filters:
    table_id: str
    filters: tuple[str, ...]
    columns: tuple[str, ...]
    ts: datetime
    query_id: str | None
    metrics: Metrics
    joins: tuple[JoinKey, ...] = ()  # inner equi-joins with filtered tables (a DataFrame's plan)


@dataclass(frozen=True)
class _Statement:
    sql: str
    ts: datetime
    query_id: str | None
    metrics: Metrics


class Recorder:
    """Collects scans in memory, spills them to `spill_dir`, appends spills to the log on `flush`.

    Use as a context manager, or call `start` to flush every `flush_interval` seconds from a
    background thread and `close` to flush and stop.
    """

    def __init__(
        self,
        log_table: QueryLogTable,
        spill_dir: str | Path,
        *,
        capacity: int = 1000,
        flush_interval: float = 60.0,
        context: SqlContext = SqlContext(),
        source: str = "recorder",
    ) -> None:
        self.log_table = log_table
        self.quarantine_table = QuarantineTable(quarantine_path(log_table.uri), log_table.storage_options)
        self.spill_dir = Path(spill_dir)
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        self.capacity = capacity
        self.flush_interval = flush_interval
        self.context = context
        self._templates = context.templates()  # used under the flush lock only
        self.source = source
        self.recorder_id = self._load_or_create_id()
        self._queue: list[_Filters | _Statement] = []
        self._lock = threading.Lock()  # guards the queue and the sequence
        self._flush_lock = threading.Lock()  # one spill/flush at a time
        self._sequence = self._next_sequence()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._spiller: threading.Thread | None = None  # spills a full queue while callers go on

    # ---- the hot path --------------------------------------------------------------------------

    def record(
        self,
        table_id: str,
        filters: Sequence[str] = (),
        columns: Sequence[str] = (),
        *,
        ts: datetime | None = None,
        query_id: str | None = None,
        metrics: Metrics = Metrics(),
        joins: Sequence[JoinKey] = (),
    ) -> None:
        """Record one scan of `table_id` with its pushed filters (SQL text) and its inner equi-joins with
        filtered tables (`joins`: join-derived filters come from them when the context derives)."""
        when = ts or datetime.now(UTC)
        self._enqueue(_Filters(table_id, tuple(filters), tuple(columns), when, query_id, metrics, tuple(joins)))

    def record_sql(
        self, sql: str, ts: datetime | None = None, query_id: str | None = None, metrics: Metrics = Metrics()
    ) -> None:
        """Record every table scan of a SQL statement."""
        self._enqueue(_Statement(sql, ts or datetime.now(UTC), query_id, metrics))

    def _enqueue(self, item: _Filters | _Statement) -> None:
        """Queue `item`; a full queue is spilled behind the caller's back (normalising, deriving join
        filters), unless the spilling falls `BACKLOG` queues behind: then the caller spills too."""
        with self._lock:
            self._queue.append(item)
            size = len(self._queue)
            behind = size >= self.capacity and (self._spiller is None or not self._spiller.is_alive())
            if behind:
                self._spiller = threading.Thread(target=self._spill_while_full, name="deltaopt-spill", daemon=True)
                self._spiller.start()
        if size >= BACKLOG * self.capacity:
            self.spill()

    def _spill_while_full(self) -> None:
        try:
            while len(self._queue) >= self.capacity:
                self.spill()
        except Exception:  # as a caller's own spill would: that batch is lost, recording goes on
            log.exception("query-log spill failed")

    def settle(self) -> None:
        """Wait for a spill running behind the callers (tests, and `close`)."""
        spiller = self._spiller
        if spiller is not None:
            spiller.join()

    # ---- spilling and flushing -----------------------------------------------------------------

    def spill(self) -> Path | None:
        """Normalise the queue and write it to a spill file; returns its path (None if empty)."""
        with self._flush_lock:
            with self._lock:
                items, self._queue = self._queue, []
                if not items:
                    return None
                sequence = self._sequence
                self._sequence += 1
            statements = dict.fromkeys(i.sql for i in items if isinstance(i, _Statement))
            plans = [(i.table_id, i.joins) for i in items if isinstance(i, _Filters) and i.joins]
            captured = Captured()
            with pinned(self.context):  # the sources' snapshots: one read for the spill's prefetch and captures
                prefetch_derived(statements, self.context, self._templates, plans)  # joins derived in batches
                for item in items:
                    captured += self._capture(item)
            path = self.spill_dir / f"{self.recorder_id}-{sequence:012d}"
            _write_atomic(Path(f"{path}{SCANS_SUFFIX}"), _scans_table(captured))
            _write_atomic(Path(f"{path}{QUARANTINE_SUFFIX}"), _quarantine_table(captured))
            return path

    def _capture(self, item: _Filters | _Statement) -> Captured:
        if isinstance(item, _Statement):
            return capture_sql(
                item.sql,
                item.ts,
                self.source,
                self.context,
                query_id=item.query_id,
                metrics=item.metrics,
                scans=self._templates,
            )
        return capture_filters(
            item.table_id,
            item.filters,
            item.columns,
            item.ts,
            self.source,
            query_id=item.query_id,
            metrics=item.metrics,
            joins=item.joins,
            derive=self.context.derive_for(item.table_id),
        )

    def flush(self) -> int:
        """Spill the queue, then append every spill file exactly once. Returns rows appended."""
        self.spill()
        appended = 0
        with self._flush_lock:
            appended += self._drain(SCANS_SUFFIX, self.log_table, self.recorder_id)
            self._drain(QUARANTINE_SUFFIX, self.quarantine_table, f"{self.recorder_id}:quarantine")
        return appended

    def _drain(self, suffix: str, table: QueryLogTable | QuarantineTable, app_id: str) -> int:
        pending = self._pending(suffix)
        if not pending:
            return 0
        committed = table.committed_batch(app_id)
        committed = -1 if committed is None else committed
        fresh = [(seq, path) for seq, path in pending if seq > committed]
        rows = 0
        if fresh:
            data = pa.concat_tables([_read(path) for _, path in fresh])
            if data.num_rows:
                if suffix == SCANS_SUFFIX:
                    rows = self.log_table.append(scans_from_arrow(data), app_id, fresh[-1][0])
                else:
                    rows = self.quarantine_table.append(quarantine_from_arrow(data), app_id, fresh[-1][0])
        for _, path in pending:
            path.unlink(missing_ok=True)
        return rows

    def _pending(self, suffix: str) -> list[tuple[int, Path]]:
        found = []
        for path in self.spill_dir.glob(f"{self.recorder_id}-*{suffix}"):
            sequence = path.name[len(self.recorder_id) + 1 : -len(suffix)]
            if sequence.isdigit():
                found.append((int(sequence), path))
        return sorted(found)

    def _next_sequence(self) -> int:
        spilled = [seq for suffix in (SCANS_SUFFIX, QUARANTINE_SUFFIX) for seq, _ in self._pending(suffix)]
        committed = self.log_table.committed_batch(self.recorder_id)
        return max([*spilled, committed if committed is not None else -1]) + 1

    def _load_or_create_id(self) -> str:
        path = self.spill_dir / "recorder-id"
        if path.exists():
            return path.read_text().strip()
        recorder_id = f"recorder-{uuid.uuid4().hex[:12]}"
        _write_text_atomic(path, recorder_id)
        return recorder_id

    # ---- background flushing ---------------------------------------------------------------------

    def start(self) -> Recorder:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="deltaopt-recorder", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval):
            try:
                self.flush()
            except Exception:  # keep recording; the spill files wait for the next flush
                log.exception("query-log flush failed; spilled records are kept for the next attempt")

    def close(self) -> None:
        self._stop.set()
        self.settle()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _scans_table(captured: Captured) -> pa.Table:
    return scans_to_arrow(captured.scans) if captured.scans else LOG_SCHEMA.empty_table()


def _quarantine_table(captured: Captured) -> pa.Table:
    return quarantine_to_arrow(captured.quarantined) if captured.quarantined else QUARANTINE_SCHEMA.empty_table()


def _write_atomic(path: Path, table: pa.Table) -> None:
    with atomic_file(path) as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _write_text_atomic(path: Path, text: str) -> None:
    with atomic_file(path, "w") as sink:
        sink.write(text)


def _read(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return ipc.open_file(source).read_all()
