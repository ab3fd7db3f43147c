"""`TableAccess` on delta-rs (the Delta log) and Spark (Parquet data): reading, staging, storage.

The log is only ever read and written through `deltalake`; Spark reads and writes the Parquet files.
What is committed, and how racing commits are settled, is `optimizer.table.deltars_commit` (the
delta-rs commit protocol: rewrites, appends, the first commit, property changes).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from optimizer import errors
from optimizer.table import deltars_commit
from optimizer.table.access import Commit, DataFile, Snapshot, StagedFile, StatsCallback
from optimizer.table.commit_safety import check_commit_safety
from optimizer.table.delta_writer import stage_with_delta
from optimizer.table.deltars_commit import REWRITE_ATTEMPTS
from optimizer.table.deltars_log import commit_entry, data_files, rewrite_spellings, table_features_of
from optimizer.table.footer_stats import FOOTER_ROWS, footer_indices, footer_stats
from optimizer.table.paths import hadoop_uri, is_absolute
from optimizer.table.reading import read_rows
from optimizer.table.rewrite_path import writes_through_delta
from optimizer.table.staging import (
    DIRECTORY_TIME_ZONE,
    absolute_local,
    check_schema,
    partition_values,
    row_for,
    session_zone,
)
from optimizer.table.stats import StatsColumn, collect_file_stats, data_columns, delta_stats_json, stats_columns
from optimizer.table.storage import arrow_filesystem

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

__all__ = ["REWRITE_ATTEMPTS", "DeltaTableHandle"]


def _is_uri(path: str) -> bool:
    """Not under the table: ``s3://b/k``, or ``file:/x`` (one slash) as a shallow clone names its source's files."""
    return is_absolute(path)


class DeltaTableHandle:
    """A Delta table at `uri` (a local path or a URI delta-rs and Spark can both reach)."""

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = uri.rstrip("/") if _is_uri(uri) else absolute_local(uri)
        self.storage_options = dict(storage_options or {})

    def __repr__(self) -> str:
        return f"DeltaTableHandle({self.uri!r})"

    # ---- reading -------------------------------------------------------------------------------

    def _open(self, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options or None)
        except TableNotFoundError as err:
            raise errors.TableNotFoundError(f"no Delta table at {self.uri}") from err
        except (DeltaError, OSError, ValueError) as err:
            raise errors.TableAccessError(f"cannot read Delta table at {self.uri} (version {version}): {err}") from err

    def delta_table(self, version: int | None = None) -> DeltaTable:
        """The log at `version` (None: the latest) through delta-rs; deltaopt's errors when it cannot be read."""
        return self._open(version)

    def exists(self) -> bool:
        try:
            self._open()
        except errors.TableNotFoundError:
            return False
        return True

    def snapshot(self, version: int | None = None) -> Snapshot:
        """Active files with Delta statistics (keyed by logical column names) and the table's features.
        Reading the log needs no Delta engine; reading rows may (`read_files`)."""
        table = self._open(version)
        metadata = table.metadata()
        features = table_features_of(table)
        return Snapshot(
            uri=self.uri,
            version=table.version(),
            schema_json=table.schema().to_json(),
            partition_columns=tuple(metadata.partition_columns),
            files=tuple(data_files(table, features.logical_names)),
            configuration=dict(metadata.configuration),
            features=features,
        )

    def history(self, since_version: int = 0) -> list[Commit]:
        """commitInfo of versions >= `since_version`, oldest first (as far as log retention keeps them)."""
        table = self._open()
        limit = max(table.version() - since_version + 1, 1)
        commits = [commit_entry(entry) for entry in table.history(limit)]
        return sorted((c for c in commits if c.version >= since_version), key=lambda c: c.version)

    def files_added_since(self, version: int) -> list[DataFile]:
        """Active files that were not active at `version`."""
        before = {f.path for f in self.snapshot(version).files}
        return [f for f in self.snapshot().files if f.path not in before]

    def file_uri(self, path: str) -> str:
        return path if _is_uri(path) else f"{self.uri}/{path}"

    def spark_uri(self, path: str) -> str:
        """The URI Spark's Hadoop file systems use for a log path (``s3://`` is ``s3a://`` to Hadoop)."""
        return hadoop_uri(self.file_uri(path))

    def read_files(
        self, spark: SparkSession, files: Sequence[DataFile], snapshot: Snapshot, *, for_rewrite: bool = False
    ) -> DataFrame:
        """The rows of `files` with the table's schema (`optimizer.table.reading.read_rows`: Delta's reader
        where the table's features need it)."""
        return read_rows(self, spark, files, snapshot, for_rewrite=for_rewrite)

    # ---- writing -------------------------------------------------------------------------------

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
        replacing: Sequence[DataFile] = (),
    ) -> list[StagedFile]:
        """Write `df` as Parquet under ``<table>/<purpose>-<uuid>/`` and compute each file's statistics.

        Nothing is committed. `extra_aggregates` are evaluated per file in the statistics pass and handed
        to `extended_stats(path, row)`, whose mapping is stored under the stats key ``"deltaopt"``.
        `options` go to Spark's Parquet writer (codec, row-group size: `optimizer.table.output`).
        A rewrite names the files it replaces (`replacing`): zone-less timestamp partition values they hold
        are kept (`rewrite_spellings`). Raises `RewriteValidationError` when `df` does not have the table's
        schema, or (before writing) when no spelling keeps the replaced files' partition values.
        """
        schema = snapshot.spark_schema()
        kept = rewrite_spellings(lambda: self._open(snapshot.version), replacing, snapshot, session_zone(spark))
        if writes_through_delta(snapshot.features):  # physical names, materialised row tracking: Delta writes
            return stage_with_delta(
                spark,
                self,
                df,
                snapshot,
                extra_aggregates=extra_aggregates,
                extended_stats=extended_stats,
                options=options,
                kept=kept,
            )
        check_schema(df.schema, schema, self.uri)
        directory = f"{purpose}-{uuid.uuid4().hex[:16]}"
        stored = data_columns(schema, snapshot.partition_columns)
        columns = stats_columns(stored, snapshot.configuration)
        try:
            self._write_parquet(df, snapshot, directory, options)
            listed = self._list_parquet(directory)
            rows = self._file_stats(spark, listed, stored, columns, extra_aggregates)
        except Exception:
            self._remove_directory(directory)  # nothing references what this attempt wrote
            raise
        return [
            StagedFile(
                path=path,
                size=size,
                stats_json=delta_stats_json(rows[path], columns, _extended(extended_stats, path, rows[path])),
                partition_values=partition_values(path, directory, snapshot.partition_columns, schema, kept),
            )
            for path, size in listed.items()
        ]

    def _write_parquet(
        self, df: DataFrame, snapshot: Snapshot, directory: str, options: Mapping[str, str] | None
    ) -> None:
        """Spark's Parquet writer into `directory`, columns in the table's order, partitioned as the table,
        timestamp partition directories named in `DIRECTORY_TIME_ZONE` (one instant each)."""
        names = snapshot.spark_schema().names
        writer = df.select(*[f"`{n}`" for n in names]).write.mode("error")  # Connect knows this spelling
        writer = writer.option("timeZone", DIRECTORY_TIME_ZONE)
        if options:
            writer = writer.options(**options)
        if snapshot.partition_columns:
            writer = writer.partitionBy(*snapshot.partition_columns)
        writer.parquet(self.spark_uri(directory))

    def _file_stats(
        self,
        spark: SparkSession,
        listed: Mapping[str, int],
        stored: StructType,
        columns: Sequence[StatsColumn],
        extra_aggregates: Mapping[str, Column] | None,
    ) -> dict[str, dict[str, Any]]:
        """Per written file (relative path): the aggregation's row, completed from the footers for the
        columns they bound; a footer whose row count disagrees with the rows read fails the write."""
        from_footers = footer_indices(columns)
        uris = [self.spark_uri(p) for p in listed]
        aggregated = collect_file_stats(spark, uris, stored, columns, extra=extra_aggregates, skip=from_footers)
        fs, root = self.filesystem()
        footers = footer_stats(fs, root, listed, columns, from_footers)
        rows = {}
        for path in listed:
            row = {**row_for(path, aggregated), **footers[path]}
            if int(row[FOOTER_ROWS]) != int(row["__rows"]):
                raise errors.RewriteValidationError(
                    f"written file {path}: footer says {row[FOOTER_ROWS]} rows, reading it gave {row['__rows']}"
                )
            rows[path] = row
        return rows

    def create(
        self,
        spark: SparkSession,
        df: DataFrame,
        partition_by: Sequence[str] = (),
        configuration: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Snapshot:
        """Create the table from `df` (first commit). Raises `TableAccessError` if a table exists."""
        from deltalake import Schema

        from optimizer.spark_arrow import schema_to_arrow

        if self.exists():
            raise errors.TableAccessError(f"a Delta table already exists at {self.uri}")
        self.commit_safety()
        schema_json = Schema.from_arrow(schema_to_arrow(df.schema)).to_json()
        draft = Snapshot(self.uri, -1, schema_json, tuple(partition_by), (), dict(configuration or {}))
        deltars_commit.create(self, draft, self.stage(spark, df, draft, "data"), metadata)
        return self.snapshot()

    def append(
        self, staged: Sequence[StagedFile], snapshot: Snapshot, metadata: Mapping[str, Any] | None = None
    ) -> int:
        """Commit `staged` as new data (``dataChange=true``); blind appends retry on conflicts. delta-rs
        checks only commits after the version it opens, so the table must first be the shape the files
        were staged for at `snapshot` (`check_retry_basis`; else `CommitConflictError`, files deleted)."""
        return deltars_commit.append(self, staged, snapshot, metadata)

    def rewrite(
        self,
        read_version: int,
        remove: Sequence[DataFile],
        add: Sequence[StagedFile],
        metadata: Mapping[str, Any] | None = None,
        *,
        before_commit: Callable[[int], None] | None = None,
    ) -> int:
        """Atomically replace `remove` with `add` (``dataChange=false``), planned at `read_version`.

        Returns the committed version: the run's own (found in the log by the run id in `metadata`) when
        an attempt reported a failure or a conflict after it landed. Raises `RewriteValidationError`
        before committing anything if an added file is missing or a removed file is not active at
        `read_version`, `UnsupportedTableError` if the table at `read_version` is one delta-rs cannot
        rewrite, `CommitConflictError` when a concurrent commit removed one of `remove` or changed the
        table (`RetryBasis`), and `TableAccessError` when the table cannot be read; what was staged is
        then deleted. When the log cannot say whether an attempt landed, `CommitOutcomeUnknownError`
        keeps every file. `before_commit(version)` runs right before each commit attempt (tests race it).
        The protocol is `optimizer.table.deltars_commit`'s.
        """
        return deltars_commit.rewrite(self, read_version, remove, add, metadata, before_commit=before_commit)

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None:
        """Set table properties in one commit (Delta's SET TBLPROPERTIES)."""
        deltars_commit.set_properties(self, properties, metadata)

    # ---- storage -------------------------------------------------------------------------------

    def commit_safety(self) -> str:
        """How concurrent commits to this table are made atomic; raises `UnsafeStoreError` when the
        store's configuration cannot guarantee it (`optimizer.table.commit_safety`)."""
        return check_commit_safety(self.uri, self.storage_options)

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        if _is_uri(self.uri):
            return arrow_filesystem(self.uri, self.storage_options)
        return pafs.LocalFileSystem(), self.uri

    def _list_parquet(self, directory: str) -> dict[str, int]:
        fs, root = self.filesystem()
        selector = pafs.FileSelector(f"{root}/{directory}", recursive=True, allow_not_found=True)
        found = {}
        for info in fs.get_file_info(selector):
            name = info.path.rsplit("/", 1)[-1]
            if info.type == pafs.FileType.File and name.endswith(".parquet") and not name.startswith((".", "_")):
                found[info.path[len(root) + 1 :]] = int(info.size or 0)
        return dict(sorted(found.items()))

    def _remove_directory(self, directory: str) -> None:
        fs, root = self.filesystem()
        try:
            fs.delete_dir(f"{root}/{directory}")
        except (FileNotFoundError, OSError) as err:
            log.warning("could not remove uncommitted directory %s: %s", directory, err)

    def discard(self, staged: Sequence[StagedFile]) -> None:
        """Best-effort removal of files no commit references (they were staged by this process)."""
        fs, root = self.filesystem()
        for f in staged:
            try:
                fs.delete_file(f"{root}/{f.path}")
            except OSError as err:
                log.warning("could not delete uncommitted file %s: %s", f.path, err)
        for directory in sorted({f.path.split("/", 1)[0] for f in staged if "/" in f.path}):
            if not self._list_parquet(directory):  # the attempt's own directory, now holding no data file
                self._remove_directory(directory)


def _extended(extended_stats: StatsCallback | None, path: str, row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The extended statistics of one written file, under the stats key ``"deltaopt"`` (None: none asked)."""
    return {"deltaopt": dict(extended_stats(path, row))} if extended_stats else None
