"""The query-log and quarantine Delta tables (read and written with delta-rs).

* Appends can be made idempotent with a Delta application transaction (``txn`` action): a writer
  names itself (``app_id``) and numbers its batches; `committed_batch` tells the last number that
  reached the table, so a batch is appended exactly once even across crashes. Importers use the
  same mechanism keyed by the source's content hash, so importing a file twice adds nothing.
* The log table has the change data feed enabled; `tail` reads the rows appended after a version and
  ignores compactions (``dataChange=false``), which is what the service needs to follow the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.transaction import CommitProperties, Transaction

from querylog.errors import LogTableError
from querylog.records import (
    LOG_SCHEMA,
    OPTIONAL_LOG_COLUMNS,
    QUARANTINE_SCHEMA,
    SCHEMA_VERSION,
    QuarantineRecord,
    ScanRecord,
    quarantine_from_arrow,
    quarantine_to_arrow,
    scans_from_arrow,
    scans_to_arrow,
    utc,
)

log = logging.getLogger(__name__)

LOG_DESCRIPTION = f"deltaopt query log, schema version {SCHEMA_VERSION}"
QUARANTINE_DESCRIPTION = "deltaopt query-log quarantine, schema version 1"


class _DeltaStore:
    """Shared plumbing of the two tables."""

    schema: pa.Schema
    description: str
    configuration: ClassVar[Mapping[str, str]] = {}

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.storage_options = storage_options or None

    def _open(self, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options)
        except TableNotFoundError as err:
            raise LogTableError(f"no table at {self.uri}") from err
        except (DeltaError, OSError, ValueError) as err:
            raise LogTableError(f"cannot read {self.uri}: {err}") from err

    def _open_existing(self) -> DeltaTable | None:
        """The table, or None when there is none yet (the log is created by its first append)."""
        try:
            return self._open()
        except LogTableError:
            return None

    def exists(self) -> bool:
        return self._open_existing() is not None

    def version(self) -> int | None:
        table = self._open_existing()
        return None if table is None else table.version()

    def committed_batch(self, app_id: str) -> int | None:
        """Highest batch number `app_id` committed (Delta txn), None if it never did."""
        table = self._open_existing()
        return None if table is None else table.transaction_version(app_id)

    def _append(self, data: pa.Table, app_id: str | None, batch: int | None) -> None:
        transactions = [Transaction(app_id, batch)] if app_id is not None and batch is not None else None
        try:
            write_deltalake(
                self.uri,
                data,
                mode="append",
                name="deltaopt_querylog",
                description=self.description,
                configuration=dict(self.configuration) or None,
                storage_options=self.storage_options,
                commit_properties=CommitProperties(app_transactions=transactions, max_commit_retries=20),
                schema_mode="merge",  # a log written before an optional column existed gains it
            )
        except (DeltaError, OSError, ValueError) as err:
            raise LogTableError(f"cannot append to {self.uri}: {err}") from err

    def _read(self, filters: pc.Expression | None = None) -> pa.Table:
        table = self._open_existing()
        if table is None:
            return self.schema.empty_table()
        self._check_schema(table)
        return _plain_strings(table.to_pyarrow_dataset().to_table(filter=filters))

    def _check_schema(self, table: DeltaTable) -> None:
        actual = pa.schema(table.schema().to_arrow())
        missing = [n for n in self.schema.names if n not in actual.names and n not in OPTIONAL_LOG_COLUMNS]
        if missing:
            raise LogTableError(f"{self.uri} is not a {self.description}: missing columns {missing}")


@dataclass(frozen=True)
class OlderRecords:
    """Rows of one table older than some instant (outside a workload window)."""

    count: int
    first: datetime | None
    last: datetime | None

    def period(self) -> tuple[str | None, str | None]:
        """The first and last instants in ISO 8601 (None where unknown), as the record and the CLI show them."""
        return (self.first.isoformat() if self.first else None, self.last.isoformat() if self.last else None)

    def as_dict(self) -> dict[str, object]:
        first, last = self.period()
        return {"count": self.count, "first": first, "last": last}


class QueryLogTable(_DeltaStore):
    schema = LOG_SCHEMA
    description = LOG_DESCRIPTION
    configuration: ClassVar[Mapping[str, str]] = {"delta.enableChangeDataFeed": "true"}

    def append(self, records: Sequence[ScanRecord], app_id: str | None = None, batch: int | None = None) -> int:
        """Append `records` (creating the table if needed); with `app_id`/`batch`, exactly once."""
        if not records and app_id is None:
            return 0
        self._append(scans_to_arrow(records), app_id, batch)
        return len(records)

    def read(
        self, table_id: str | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> list[ScanRecord]:
        """The rows of one table (or all) with ``since <= ts < until``."""
        expression = pc.field("schema_version") == SCHEMA_VERSION
        if table_id is not None:
            expression &= pc.field("table_id") == table_id
        if since is not None:
            expression &= pc.field("ts") >= pa.scalar(utc(since), pa.timestamp("us", tz="UTC"))
        if until is not None:
            expression &= pc.field("ts") < pa.scalar(utc(until), pa.timestamp("us", tz="UTC"))
        return scans_from_arrow(self._read(expression))

    def older(self, table_id: str, before: datetime) -> OlderRecords:
        """How many rows of `table_id` are older than `before`, and their time range (reads ``ts`` only).

        The estimator uses it to know whether the log was recording before the workload window; the
        decision record uses it to say what the window left out."""
        table = self._open_existing()
        if table is None:
            return OlderRecords(0, None, None)
        self._check_schema(table)
        expression = (
            (pc.field("schema_version") == SCHEMA_VERSION)
            & (pc.field("table_id") == table_id)
            & (pc.field("ts") < pa.scalar(utc(before), pa.timestamp("us", tz="UTC")))
        )
        ts = table.to_pyarrow_dataset().to_table(columns=["ts"], filter=expression).column("ts")
        if len(ts) == 0:
            return OlderRecords(0, None, None)
        bounds = pc.min_max(ts).as_py()
        return OlderRecords(len(ts), bounds["min"], bounds["max"])

    def tail(self, after_version: int | None, table_id: str | None = None) -> Tail:
        """Rows appended by commits after `after_version` (all rows when None), and the version read."""
        table = self._open_existing()
        if table is None:
            return Tail((), after_version)
        current = table.version()
        start = 0 if after_version is None else after_version + 1
        if start > current:
            return Tail((), current)
        try:
            changes = pa.table(table.load_cdf(starting_version=start, ending_version=current).read_all())
        except DeltaError as err:
            raise LogTableError(f"cannot read changes of {self.uri} from version {start}: {err}") from err
        changes = _plain_strings(changes)
        inserted = changes.filter(pc.field("_change_type") == "insert")
        inserted = inserted.filter(pc.field("schema_version") == SCHEMA_VERSION)
        if table_id is not None:
            inserted = inserted.filter(pc.field("table_id") == table_id)
        return Tail(tuple(scans_from_arrow(inserted)), current)


def _plain_strings(table: pa.Table) -> pa.Table:
    """delta-rs returns ``string_view`` columns from some reads; compute kernels want ``string``."""

    def plain(kind: pa.DataType) -> pa.DataType:
        if kind == pa.string_view():
            return pa.string()
        if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
            return pa.list_(plain(kind.value_type))
        return kind

    return table.cast(pa.schema([pa.field(f.name, plain(f.type), f.nullable) for f in table.schema]))


@dataclass(frozen=True)
class Tail:
    records: tuple[ScanRecord, ...]
    version: int | None  # the log version read up to; the next tail starts after it


class QuarantineTable(_DeltaStore):
    schema = QUARANTINE_SCHEMA
    description = QUARANTINE_DESCRIPTION

    def append(self, records: Sequence[QuarantineRecord], app_id: str | None = None, batch: int | None = None) -> int:
        if not records and app_id is None:
            return 0
        self._append(quarantine_to_arrow(records), app_id, batch)
        return len(records)

    def read(self, source: str | None = None) -> list[QuarantineRecord]:
        expression = None if source is None else pc.field("source") == source
        return quarantine_from_arrow(self._read(expression))


def quarantine_path(log_uri: str) -> str:
    """The quarantine table lives beside its query log."""
    return log_uri.rstrip("/") + "_quarantine"
