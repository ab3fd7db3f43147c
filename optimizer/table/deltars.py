"""`TableAccess` on delta-rs (the Delta log) and Spark (Parquet data).

The log is only ever read and written through `deltalake`; Spark reads and writes the Parquet files.
Layout rewrites follow the conflict rule of docs/ARCHITECTURE.md (contract 4): commit with
``max_commit_retries=0`` against the exact version the rewrite was planned on; on conflict reload,
check that every file it removes is still active (same path and size) and only then try again at the
new version. A rewrite whose files a
concurrent commit removed gives up with `CommitConflictError`, deletes what it staged, and commits
nothing, so racing rewrites can neither duplicate nor lose rows.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, create_table_with_add_actions

from optimizer import errors
from optimizer.table.access import CUSTOM_METADATA_KEY, Commit, DataFile, Snapshot, StagedFile, StatsCallback
from optimizer.table.commit_safety import check_commit_safety
from optimizer.table.delta_writer import stage_with_delta
from optimizer.table.deltars_log import commit_entry, data_files, table_features_of
from optimizer.table.footer_stats import FOOTER_ROWS, footer_indices, footer_stats
from optimizer.table.reading import read_rows
from optimizer.table.rewrite import check_rewrite, check_staged, outcome_after_failure
from optimizer.table.staging import absolute_local, check_schema, partition_values, row_for
from optimizer.table.stats import StatsColumn, collect_file_stats, data_columns, delta_stats_json, stats_columns
from optimizer.table.storage import arrow_filesystem

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

REWRITE_ATTEMPTS = 5


def _is_uri(path: str) -> bool:
    return "://" in path


class DeltaRsTable:
    """A Delta table at `uri` (a local path or a URI delta-rs and Spark can both reach)."""

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = uri.rstrip("/") if _is_uri(uri) else absolute_local(uri)
        self.storage_options = dict(storage_options or {})

    def __repr__(self) -> str:
        return f"DeltaRsTable({self.uri!r})"

    # ---- reading -------------------------------------------------------------------------------

    def _open(self, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options or None)
        except TableNotFoundError as err:
            raise errors.TableNotFoundError(f"no Delta table at {self.uri}") from err
        except (DeltaError, OSError, ValueError) as err:
            raise errors.TableAccessError(f"cannot read Delta table at {self.uri} (version {version}): {err}") from err

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
        uri = self.file_uri(path)
        return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri

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
    ) -> list[StagedFile]:
        """Write `df` as Parquet under ``<table>/<purpose>-<uuid>/`` and compute each file's statistics.

        Nothing is committed. `extra_aggregates` are evaluated per file in the statistics pass and handed
        to `extended_stats(path, row)`, whose mapping is stored under the stats key ``"deltaopt"``.
        `options` go to Spark's Parquet writer (codec, row-group size: `optimizer.table.output`).
        Raises `RewriteValidationError` when `df` does not have the table's schema.
        """
        schema = snapshot.spark_schema()
        if snapshot.features.needs_delta_writer:  # physical names, materialised row tracking: Delta writes
            return stage_with_delta(
                spark,
                self,
                df,
                snapshot,
                extra_aggregates=extra_aggregates,
                extended_stats=extended_stats,
                options=options,
            )
        check_schema(df.schema, schema, self.uri)
        directory = f"{purpose}-{uuid.uuid4().hex[:16]}"
        writer = df.select(*[f"`{n}`" for n in schema.names]).write.mode("error")  # Connect knows this spelling
        if options:
            writer = writer.options(**options)
        if snapshot.partition_columns:
            writer = writer.partitionBy(*snapshot.partition_columns)
        try:
            writer.parquet(self.spark_uri(directory))
            listed = self._list_parquet(directory)
            stored = data_columns(schema, snapshot.partition_columns)
            columns = stats_columns(stored, snapshot.configuration)
            rows = self._file_stats(spark, listed, stored, columns, extra_aggregates)
        except Exception:
            self._remove_directory(directory)  # nothing references what this attempt wrote
            raise
        staged = []
        for path, size in listed.items():
            row = rows[path]
            extra = {"deltaopt": dict(extended_stats(path, row))} if extended_stats else None
            staged.append(
                StagedFile(
                    path=path,
                    size=size,
                    stats_json=delta_stats_json(row, columns, extra),
                    partition_values=partition_values(path, directory, snapshot.partition_columns),
                )
            )
        return staged

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
        aggregated = collect_file_stats(spark, uris, stored, columns, extra_aggregates, skip=from_footers)
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
        from pyspark.sql.pandas.types import to_arrow_schema

        if self.exists():
            raise errors.TableAccessError(f"a Delta table already exists at {self.uri}")
        self.commit_safety()
        arrow = to_arrow_schema(df.schema)
        schema_json = Schema.from_arrow(arrow).to_json()
        draft = Snapshot(self.uri, -1, schema_json, tuple(partition_by), (), dict(configuration or {}))
        staged = self.stage(spark, df, draft, "data")
        try:
            create_table_with_add_actions(
                self.uri,
                Schema.from_json(schema_json),
                [_add_action(f, data_change=True) for f in staged],
                mode="error",
                partition_by=list(partition_by) or None,
                configuration=dict(configuration or {}),
                storage_options=self.storage_options or None,
                commit_properties=CommitProperties(custom_metadata=_custom(metadata)),
            )
        except (DeltaError, OSError, ValueError) as err:
            self.discard(staged)
            raise errors.TableAccessError(f"cannot create Delta table at {self.uri}: {err}") from err
        return self.snapshot()

    def append(
        self, staged: Sequence[StagedFile], snapshot: Snapshot, metadata: Mapping[str, Any] | None = None
    ) -> int:
        """Commit `staged` as new data (``dataChange=true``); blind appends retry on conflicts."""
        self.commit_safety()
        check_staged(self, staged)
        table = self._open()
        try:
            table.create_write_transaction(
                [_add_action(f, data_change=True) for f in staged],
                mode="append",
                schema=table.schema(),
                partition_by=list(snapshot.partition_columns) or None,
                commit_properties=CommitProperties(custom_metadata=_custom(metadata), max_commit_retries=10),
            )
        except (DeltaError, OSError, ValueError) as err:
            raise errors.TableAccessError(f"append to {self.uri} failed: {err}") from err
        return self._open().version()

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

        Returns the committed version. Raises `RewriteValidationError` before committing anything if an
        added file is missing or a removed file is not active at `read_version`, and `CommitConflictError`
        when a concurrent commit removed one of `remove` (what was staged is then deleted).
        `before_commit(version)` runs right before each commit attempt (tests use it to race).
        """
        check_rewrite(self, remove, add)
        self.commit_safety()
        version = read_version
        for _attempt in range(REWRITE_ATTEMPTS):
            table = self._open(version)
            active = self._still_active(table, remove, add, version == read_version, read_version)
            actions: list[AddAction | RemoveAction] = [_add_action(f, data_change=False) for f in add]
            now = int(time.time() * 1000)
            actions += [RemoveAction(f.path, False, now, f.size, dict(active[f.path].partition_values)) for f in remove]
            if before_commit is not None:
                before_commit(version)
            committed, latest = self._commit_once(table, actions, metadata, add)
            if committed:
                return latest
            log.info("rewrite of %s planned at v%d lost a race (now v%d); re-checking", self.uri, version, latest)
            version = latest
        self.discard(add)
        raise errors.CommitConflictError(
            f"{self.uri} kept changing: gave up after {REWRITE_ATTEMPTS} attempts; nothing was committed"
        )

    def _still_active(
        self, table: DeltaTable, remove: Sequence[DataFile], add: Sequence[StagedFile], first: bool, read_version: int
    ) -> dict[str, DataFile]:
        """The active files of `table`, when every file to remove is still one of them (same size);
        otherwise the staged files are deleted and the rewrite refused: invalid on the first attempt,
        a lost race after a concurrent commit removed them."""
        active = {f.path: f for f in data_files(table)}
        gone = [f.path for f in remove if f.path not in active or active[f.path].size != f.size]
        if not gone:
            return active
        self.discard(add)
        if first:
            raise errors.RewriteValidationError(
                f"files to remove are not active in {self.uri} at version {read_version}: {gone[:5]}"
            )
        raise errors.CommitConflictError(
            f"a concurrent commit removed {len(gone)} of the files this rewrite replaces "
            f"(e.g. {gone[0]}); nothing was committed"
        )

    def _commit_once(
        self,
        table: DeltaTable,
        actions: list[AddAction | RemoveAction],
        metadata: Mapping[str, Any] | None,
        add: Sequence[StagedFile],
    ) -> tuple[bool, int]:
        """One commit attempt with no automatic retries: (True, the version it committed), or (False, the
        table's latest version) when a concurrent commit won and the caller re-checks. Any other failure
        is settled by the log (`outcome_after_failure`): a commit that landed before the failure is
        returned, one that did not deletes what was staged."""
        read_version = table.version()
        try:
            table.create_write_transaction(
                actions,
                mode="append",
                schema=table.schema(),
                partition_by=list(table.metadata().partition_columns) or None,
                commit_properties=CommitProperties(custom_metadata=_custom(metadata), max_commit_retries=0),
            )
        except CommitFailedError:
            return False, self._open().version()
        except (DeltaError, OSError, ValueError) as err:
            landed_at = outcome_after_failure(self, (metadata or {}).get("runId"), read_version, err)
            if landed_at is not None:
                return True, landed_at
            self.discard(add)
            raise errors.TableAccessError(f"rewrite of {self.uri} failed: {err}") from err
        return True, read_version + 1

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None:
        """Set table properties in one commit (Delta's SET TBLPROPERTIES)."""
        try:
            self._open().alter.set_table_properties(
                dict(properties), commit_properties=CommitProperties(custom_metadata=_custom(metadata))
            )
        except (DeltaError, OSError, ValueError) as err:
            raise errors.TableAccessError(f"cannot set table properties of {self.uri}: {err}") from err

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


def _add_action(f: StagedFile, data_change: bool) -> AddAction:
    return AddAction(f.path, f.size, dict(f.partition_values), int(time.time() * 1000), data_change, f.stats_json)


def _custom(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Our commit metadata travels under one key so it never collides with commitInfo fields."""
    if not metadata:
        return None
    return {CUSTOM_METADATA_KEY: json.loads(json.dumps(metadata, default=str))}
