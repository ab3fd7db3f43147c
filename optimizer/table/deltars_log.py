"""The Delta log as delta-rs returns it, as deltaopt's records: active files with their statistics
(`data_files`) and history entries (`commit_entry`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from optimizer.table.access import Commit, DataFile
from optimizer.table.protocol import TableFeatures, table_features


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


def data_files(table: DeltaTable, logical_names: Mapping[str, str] | None = None) -> list[DataFile]:
    """The active files with their statistics and partition values keyed by logical column names: under
    column mapping the log keys them by physical names, which `logical_names` maps (a physical name not
    in the schema, a dropped column's, is left out: its statistics describe no column a query can name)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    files = []
    for row in actions.to_pylist():
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        parts: dict[str, str | None] = {}
        for key, value in row.items():
            prefix, _, name = key.partition(".")
            if logical_names and prefix in ("min", "max", "null_count", "partition"):
                if name not in logical_names:
                    continue
                name = logical_names[name]
            if prefix == "min" and value is not None:
                mins[name] = value
            elif prefix == "max" and value is not None:
                maxs[name] = value
            elif prefix == "null_count" and value is not None:
                nulls[name] = int(value)
            elif prefix == "partition":
                parts[name] = None if value is None else str(value)
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
