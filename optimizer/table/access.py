"""The small interface every other part uses to read and change a Delta table, and its records.

Everything crossing this boundary is an immutable record: a `Snapshot` of the active files with their
Delta statistics, `Commit` entries of the history, and `StagedFile` for files Spark has written but
nobody has committed yet. The implementation is `optimizer.table.handle.DeltaTableHandle` (delta-rs reads
the log, Spark reads and writes Parquet); who commits a rewrite is `optimizer.table.rewrite_path`'s
choice (Delta's own transaction where the session has it, Delta's SQL commands where only SQL reaches
the cluster, else delta-rs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from optimizer.table.protocol import TableFeatures

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class DataFile:
    """One active data file and its Delta statistics (keys are dotted column paths)."""

    path: str  # as in the Delta log: relative to the table root, or an absolute URI
    size: int
    num_records: int | None
    modification_time: int = 0
    partition_values: Mapping[str, str | None] = field(default_factory=dict, compare=False)
    min_values: Mapping[str, Any] = field(default_factory=dict, compare=False)
    max_values: Mapping[str, Any] = field(default_factory=dict, compare=False)
    null_counts: Mapping[str, int] = field(default_factory=dict, compare=False)

    @property
    def partition(self) -> tuple[tuple[str, str | None], ...]:
        """The partition the file belongs to, as a key: its partition values in column order by name."""
        return tuple(sorted(self.partition_values.items()))


@dataclass(frozen=True)
class Snapshot:
    """The table at one version."""

    uri: str
    version: int
    schema_json: str  # Delta schema JSON, which is Spark's StructType JSON
    partition_columns: tuple[str, ...]
    files: tuple[DataFile, ...]
    configuration: Mapping[str, str | None] = field(default_factory=dict, compare=False)
    features: TableFeatures = field(default_factory=TableFeatures, compare=False)  # protocol (table.protocol)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def num_records(self) -> int | None:
        counts = [f.num_records for f in self.files]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

    def by_path(self) -> dict[str, DataFile]:
        return {f.path: f for f in self.files}

    def spark_schema(self) -> StructType:
        import json

        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.schema_json))

    def arrow_schema(self) -> pa.Schema:
        from deltalake import Schema

        return Schema.from_json(self.schema_json).to_arrow()


CUSTOM_METADATA_KEY = "deltaopt"  # deltaopt's own commit metadata travels under this commitInfo key


@dataclass(frozen=True)
class Commit:
    """One entry of the table history (commitInfo)."""

    version: int
    timestamp: datetime | None
    operation: str | None
    operation_parameters: Mapping[str, Any]
    engine: str | None  # engineInfo, e.g. "Apache-Spark/3.5.0 Delta-Lake/3.1.0" or "delta-rs:py-1.6.6"
    cluster_id: str | None  # Databricks writes clusterId
    metadata: Mapping[str, Any]  # every other commitInfo key, including our own custom metadata

    @property
    def deltaopt(self) -> Mapping[str, Any]:
        """The metadata deltaopt committed with this commit; empty for every other writer's commits."""
        ours = self.metadata.get(CUSTOM_METADATA_KEY)
        if ours is None:  # committed through Delta's transaction: a commitInfo tag holding JSON
            tags = self.metadata.get("tags")
            ours = _json_object(tags.get(CUSTOM_METADATA_KEY)) if isinstance(tags, Mapping) else None
        if ours is None and self._by_delta_optimize:  # the user metadata deltaopt set for Delta's OPTIMIZE
            ours = (_json_object(self.metadata.get("userMetadata")) or {}).get(CUSTOM_METADATA_KEY)
        return ours if isinstance(ours, Mapping) else {}

    @property
    def _by_delta_optimize(self) -> bool:
        """Whether this is a commit of Delta's own OPTIMIZE command (not its auto compaction), the only
        commit whose user metadata deltaopt sets. The setting is the session's
        (`optimizer.table.delta_sql`), so any commit the session makes meanwhile carries it too, another
        table's ``SET TBLPROPERTIES`` among them: such a commit is not the run's OPTIMIZE."""
        auto = str(self.operation_parameters.get("auto", "false")).lower() == "true"
        return self.operation == "OPTIMIZE" and not auto

    @property
    def tagged_run(self) -> str | None:
        """The run whose tag (Delta's ``userMetadata``, `optimizer.table.delta_sql`) this commit carries,
        whatever its operation: a run's ``ALTER TABLE ... CLUSTER BY`` is tagged as its OPTIMIZE is."""
        tag = (_json_object(self.metadata.get("userMetadata")) or {}).get(CUSTOM_METADATA_KEY)
        run = tag.get("runId") if isinstance(tag, Mapping) else self.deltaopt.get("runId")
        return str(run) if run is not None else None

    @property
    def is_deltaopt_optimize(self) -> bool:
        return self.deltaopt.get("operation") == "OPTIMIZE"


def _json_object(text: Any) -> Mapping[str, Any] | None:
    import json

    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def commit_of_run(commits: Sequence[Commit], run_id: str) -> Commit | None:
    """The commit an OPTIMIZE run with `run_id` made, if it is among `commits`: how a run that was
    handed to another process (or died) is found to have committed."""
    return next((c for c in commits if c.deltaopt.get("runId") == run_id), None)


@dataclass(frozen=True)
class StagedFile:
    """A Parquet file Spark has written under the table root that no commit references yet."""

    path: str  # relative to the table root, decoded (as on storage)
    size: int
    stats_json: str  # Delta add-action stats
    partition_values: Mapping[str, str | None] = field(default_factory=dict, compare=False)  # logical names
    action: Any = field(default=None, compare=False, repr=False)  # Delta's own AddFile when Delta's writer wrote it


# called per written file with its path and aggregate row; returns the extended statistics to record
StatsCallback = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]


class TableAccess(Protocol):
    """What the optimizer needs from a Delta table: everything outside `optimizer.table` names this
    protocol, and `open_table` picks the implementation (today `DeltaTableHandle`)."""

    uri: str
    storage_options: dict[str, str]

    # reading
    def exists(self) -> bool: ...

    def snapshot(self, version: int | None = None) -> Snapshot: ...

    def history(self, since_version: int = 0) -> list[Commit]: ...

    def files_added_since(self, version: int) -> list[DataFile]: ...

    def file_uri(self, path: str) -> str: ...

    def spark_uri(self, path: str) -> str: ...

    def read_files(
        self, spark: SparkSession, files: Sequence[DataFile], snapshot: Snapshot, *, for_rewrite: bool = False
    ) -> DataFrame: ...

    def filesystem(self) -> tuple[pafs.FileSystem, str]: ...

    # writing: stage files, then commit them atomically (or discard them)
    def commit_safety(self) -> str: ...

    def stage(
        self,
        spark: SparkSession,
        df: DataFrame,
        snapshot: Snapshot,
        purpose: str,
        *,
        extra_aggregates: Mapping[str, Column] | None = None,
        extended_stats: StatsCallback | None = None,
        options: Mapping[str, str] | None = None,
        replacing: Sequence[DataFile] = (),  # a rewrite's files: their zone-less timestamp partition values stay
    ) -> list[StagedFile]: ...

    def create(
        self,
        spark: SparkSession,
        df: DataFrame,
        partition_by: Sequence[str] = (),
        configuration: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Snapshot: ...

    def append(
        self, staged: Sequence[StagedFile], snapshot: Snapshot, metadata: Mapping[str, Any] | None = None
    ) -> int: ...

    def rewrite(
        self,
        read_version: int,
        remove: Sequence[DataFile],
        add: Sequence[StagedFile],
        metadata: Mapping[str, Any] | None = None,
        *,
        before_commit: Callable[[int], None] | None = None,
    ) -> int: ...

    def discard(self, staged: Sequence[StagedFile]) -> None: ...

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None: ...
