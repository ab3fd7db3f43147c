"""The Delta log as delta-rs returns it, as deltaopt's records: active files with their statistics
(`data_files`), the table's features (`table_features_of`), what a retried rewrite depends on
(`retry_basis_of`) and history entries (`commit_entry`).

delta-rs 1.6 hands each file's partition values over typed (``get_add_actions``), and the log's
strings only per distinct partition (``DeltaTable.partitions``). Python's text of a typed value is not
Delta's (``True``, ``1e+20``, ``2024-01-01 10:00:00+00:00``), and a zone-less timestamp value
(``2024-01-01 10:00:00``, read by each reader in its own zone) and a UTC ISO one are one typed value
to delta-rs (which reads zone-less as UTC). So each file gets the log's spelling of its typed value
(`PartitionSpellings`); where the log holds several spellings of it, one of them if every reader reads
them alike, else Delta's canonical form (UTC ISO with microseconds and ``Z``), marked unresolved.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from optimizer.table.access import Commit, DataFile, Snapshot
from optimizer.table.protocol import TableFeatures, table_features
from optimizer.table.rewrite import RetryBasis, retry_basis
from optimizer.table.staging import EPOCH, delta_timestamp, has_zone, kept_spellings, micros


def table_features_of(table: DeltaTable) -> TableFeatures:
    """The table's protocol and the configuration that gives its features meaning."""
    protocol = table.protocol()
    return table_features(
        protocol.min_reader_version,
        protocol.min_writer_version,
        protocol.reader_features,
        protocol.writer_features,
        configuration=table.metadata().configuration,
        schema_json=table.schema().to_json(),
    )


def retry_basis_of(table: DeltaTable) -> RetryBasis:
    """The table's `RetryBasis` at its loaded version. delta-rs does not expose domain metadata, so liquid
    clustering shows only as the protocol's ``clustering`` feature (a table deltaopt's committers never
    rewrite: `optimizer.table.protocol.check_rewritable`)."""
    protocol = table.protocol()
    metadata = table.metadata()
    return retry_basis(
        (protocol.min_reader_version, protocol.min_writer_version, protocol.reader_features, protocol.writer_features),
        schema_json=table.schema().to_json(),
        partition_columns=metadata.partition_columns,
        configuration=metadata.configuration,
    )


def data_files(table: DeltaTable, logical_names: Mapping[str, str] | None = None) -> list[DataFile]:
    """The active files with their statistics and partition values keyed by logical column names: under
    column mapping the log keys them by physical names, which `logical_names` maps (a physical name not
    in the schema, a dropped column's, is left out: its statistics describe no column a query can name).
    Partition values are the log's strings (`PartitionSpellings`).
    Paths stay as the log holds them (URL-encoded; a shallow clone's absolute URIs among them): removes
    must name them so, and readers resolve them with `optimizer.table.paths`."""
    actions = pa.table(table.get_add_actions(flatten=True))
    spellings = PartitionSpellings.of(table, actions.schema)
    logical = set((logical_names or {}).values())
    files = []
    for row in actions.to_pylist():
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        parts: dict[str, str | None] = {}
        for key, value in row.items():
            prefix, _, name = key.partition(".")
            if logical_names and prefix in ("min", "max", "null_count", "partition"):
                if name in logical_names:
                    name = logical_names[name]
                elif not (prefix == "partition" and name in logical):  # delta-rs 1.6: partitions by logical name
                    continue
            if prefix == "min" and value is not None:
                mins[name] = value
            elif prefix == "max" and value is not None:
                maxs[name] = value
            elif prefix == "null_count" and value is not None:
                nulls[name] = int(value)
            elif prefix == "partition":
                parts[name] = spellings.spell(name, value)
        files.append(
            DataFile(
                path=row["path"],
                size=int(row["size_bytes"]),
                num_records=None if row.get("num_records") is None else int(row["num_records"]),
                modification_time=int(row.get("modification_time") or 0),
                partition_values=parts,
                min_values=mins,
                max_values=maxs,
                null_counts=nulls,
            )
        )
    return files


def rewrite_spellings(
    table_at: Callable[[], DeltaTable], replacing: Sequence[DataFile], snapshot: Snapshot, zone: str
) -> dict[str, dict[int, str]]:
    """The zone-less timestamp partition spellings the files replacing `replacing` keep (`kept_spellings`,
    which refuses what no spelling can keep), read in the session time zone `zone`; `table_at` opens the
    table at `snapshot`'s version, only when a timestamp partition column makes it matter."""
    from pyspark.sql.types import TimestampType

    schema = snapshot.spark_schema()
    if not replacing or not any(isinstance(schema[c].dataType, TimestampType) for c in snapshot.partition_columns):
        return {}
    table = table_at()
    unresolved = PartitionSpellings.of(table, pa.table(table.get_add_actions(flatten=True)).schema).unresolved()
    values = [f.partition_values for f in replacing]
    return kept_spellings(values, unresolved, snapshot.partition_columns, schema, zone)


@dataclass(frozen=True)
class PartitionSpellings:
    """The log's partition value strings, per partition column (logical name): delta-rs's reading of a
    string (`_reading`) -> every string the log holds that it reads so."""

    by_reading: Mapping[str, Mapping[Hashable, frozenset[str]]]
    timestamps: frozenset[str]  # the columns of type timestamp (with a zone: an instant)

    @classmethod
    def of(cls, table: DeltaTable, actions: pa.Schema) -> PartitionSpellings:
        """The spellings of `table`'s log; `actions` is the schema of its flattened add actions, whose
        ``partition.<column>`` fields give the types delta-rs reads the strings as."""
        prefix = "partition."
        types = {f.name[len(prefix) :]: f.type for f in actions if f.name.startswith(prefix)}
        if not types:
            return cls({}, frozenset())
        logged: dict[str, set[str]] = {c: set() for c in types}
        for partition in table.partitions():
            for column, spelling in partition.items():
                if spelling is not None and column in types:
                    logged[column].add(spelling)
        found: dict[str, dict[Hashable, set[str]]] = {c: {} for c in types}
        for column, spellings in logged.items():
            ordered = sorted(spellings)
            for spelling, reading in zip(ordered, _readings(ordered, types[column]), strict=True):
                if reading is not None:
                    found[column].setdefault(reading, set()).add(spelling)
        timestamps = frozenset(c for c, t in types.items() if pa.types.is_timestamp(t) and t.tz is not None)
        return cls({c: {k: frozenset(v) for k, v in by.items()} for c, by in found.items()}, timestamps)

    def spell(self, column: str, value: Any) -> str | None:
        """The log's string for `value` (as delta-rs types it) in partition `column`: the one the log holds
        for it; one of several every reader reads alike; else Delta's canonical form."""
        if value is None:
            return None
        spellings = self.by_reading.get(column, {}).get(_key(value), frozenset())
        if len(spellings) == 1 or (spellings and not self._doubtful(column, spellings)):
            return min(spellings)
        return canonical(value)

    def unresolved(self) -> dict[str, dict[str, frozenset[str]]]:
        """Per column, the values `spell` gave files whose spelling delta-rs cannot tell (a zone-less and a
        zoned spelling of one UTC instant) -> the log's spellings they stand for."""
        found: dict[str, dict[str, frozenset[str]]] = {}
        for column, by in self.by_reading.items():
            for reading, spellings in by.items():
                if isinstance(reading, int) and self._doubtful(column, spellings):
                    found.setdefault(column, {})[delta_timestamp(EPOCH + timedelta(microseconds=reading))] = spellings
        return found

    def _doubtful(self, column: str, spellings: frozenset[str]) -> bool:
        """Spellings of one timestamp some with a zone and some without: readers outside UTC read them
        apart, and which file holds which is unknown."""
        return column in self.timestamps and len({has_zone(s) for s in spellings}) > 1


def canonical(value: Any) -> str:
    """Delta's string for a typed partition value: a timestamp in UTC ISO with microseconds and ``Z``, a
    timestamp_ntz as Spark renders it (no zone, the fraction without trailing zeros), booleans in lower
    case, anything else as Python writes it."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            return delta_timestamp(value)
        fraction = f".{value.microsecond:06d}".rstrip("0") if value.microsecond else ""
        return value.strftime("%Y-%m-%d %H:%M:%S") + fraction
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _readings(spellings: list[str], arrow_type: pa.DataType) -> list[Hashable | None]:
    """What delta-rs reads each partition string as (`_key` of its typed value; None: unreadable).
    delta-rs reads a zone-less timestamp as UTC."""
    if pa.types.is_timestamp(arrow_type):
        return [_timestamp_reading(s, arrow_type.tz is not None) for s in spellings]
    try:
        return [_key(v) for v in pa.array(spellings, pa.string()).cast(arrow_type).to_pylist()]
    except (pa.ArrowException, ValueError):  # one bad string: read one by one
        return [_reading(s, arrow_type) for s in spellings]


def _timestamp_reading(spelling: str, zoned_type: bool) -> Hashable | None:
    try:
        parsed = datetime.fromisoformat(spelling)
    except ValueError:
        return None
    if not zoned_type:
        return parsed if parsed.tzinfo is None else None
    return micros(parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC))


def _reading(spelling: str, arrow_type: pa.DataType) -> Hashable | None:
    try:
        return _key(pa.array([spelling], pa.string()).cast(arrow_type).to_pylist()[0])
    except (pa.ArrowException, ValueError):
        return None


def _key(value: Any) -> Hashable:
    """A typed partition value as a dictionary key: an aware timestamp as its instant, NaN as one key."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return micros(value)
    if isinstance(value, float) and value != value:
        return ("NaN",)
    return value


COMMIT_KEYS = {"version", "timestamp", "operation", "operationParameters", "engineInfo", "clusterId"}


def commit_entry(entry: Mapping[str, Any]) -> Commit:
    stamp = entry.get("timestamp")
    parameters = entry.get("operationParameters") or {}
    return Commit(
        version=int(entry["version"]),
        timestamp=datetime.fromtimestamp(stamp / 1000, tz=UTC) if stamp is not None else None,
        operation=entry.get("operation"),
        operation_parameters=dict(parameters) if isinstance(parameters, Mapping) else {},
        engine=entry.get("engineInfo"),
        cluster_id=entry.get("clusterId"),
        metadata={k: v for k, v in entry.items() if k not in COMMIT_KEYS},
    )
