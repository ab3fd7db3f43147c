"""What a layout rewrite is, whoever commits it: the request, the committer interface, the checks made
before any commit, what a retry after a lost race depends on (`RetryBasis`), and how the outcome of a
commit that may have landed is read back from the log.

Shared by `optimizer.table.rewrite_path` (which picks the path), `optimizer.table.deltaspark` (Delta's
transaction), `optimizer.table.deltars_commit` (delta-rs) and `optimizer.table.delta_sql_commit` (Delta's
own commands), so no implementation imports another.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from optimizer.errors import CommitConflictError, RewriteValidationError
from optimizer.table.access import commit_of_run
from optimizer.table.protocol import COLUMN_MAPPING_MODE, ROW_ID_COLUMN, ROW_VERSION_COLUMN

if TYPE_CHECKING:
    from optimizer.table.access import DataFile, StagedFile, TableAccess
    from optimizer.table.delta_sql import DeltaCommitted
    from optimizer.table.protocol import TableFeatures

log = logging.getLogger(__name__)

CommitEngine = Literal["delta-spark", "delta-sql", "delta-rs"]
COMMIT_CONF = "spark.deltaopt.commit"  # the session's SparkSettings.commit (set by optimizer.runtime)


@dataclass(frozen=True)
class RewriteRequest:
    """A layout rewrite ready to commit: planned at `read_version`, replacing `remove` with `add`."""

    read_version: int
    remove: Sequence[DataFile]
    add: Sequence[StagedFile]
    metadata: Mapping[str, Any] = field(default_factory=dict)  # deltaopt's run id, features, index reference
    z_order_by: tuple[str, ...] = ()  # recorded in Delta's operation parameters: the user's columns / expressions
    cluster_by: tuple[str, ...] = ()  # a clustered table's keys, recorded as Delta's OPTIMIZE records them


@dataclass(frozen=True)
class DeltaOptimize:
    """Delta's own OPTIMIZE as the commit, planned at `read_version`: ``ZORDER BY`` `z_order_by`, or (empty)
    a liquid table clustered by its keys; `tag` is the commit's user metadata (the run id finds its commits)."""

    read_version: int
    tag: Mapping[str, Any]
    z_order_by: tuple[str, ...] = ()
    full: bool = False  # a liquid table's OPTIMIZE FULL: files clustered by other keys re-clustered too


class PathCheck(Protocol):
    """The rewrite path a committer re-checks on the snapshot it commits (`rewrite_path.RewritePath`)."""

    @property
    def planned_at(self) -> int: ...  # the version the path was chosen on: the table there needs no re-check

    def recheck(self, features: TableFeatures, version: int) -> None: ...


class Committer(Protocol):
    """Commits a rewrite; every path has one. deltaopt's layout is a `RewriteRequest` (`rewrite`;
    `before_commit(version)` runs right before the commit, tests race it), Delta's own commands a
    `DeltaOptimize` (`optimize`); each committer refuses the other kind. `path`, when set, is re-checked
    on the snapshot each attempt commits to."""

    engine: CommitEngine
    table: TableAccess
    path: PathCheck | None

    def commit_safety(self) -> str: ...

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int: ...

    def optimize(self, request: DeltaOptimize) -> DeltaCommitted: ...

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None: ...


def not_deltas_command(engine: CommitEngine) -> RewriteValidationError:
    """The refusal of a `DeltaOptimize` by a committer of deltaopt's own layout."""
    return RewriteValidationError(f"the {engine} committer commits deltaopt's layout, not Delta's own OPTIMIZE")


def check_rewrite(table: TableAccess, remove: Sequence[DataFile], add: Sequence[StagedFile]) -> None:
    """What every rewrite must be before either engine commits it: it removes at least one file, none
    twice, and every file it adds is there as staged (`check_staged`)."""
    if not remove:
        raise RewriteValidationError("a rewrite must remove at least one file")
    paths = [f.path for f in remove]
    if len(set(paths)) != len(paths):
        raise RewriteValidationError("a rewrite lists the same file to remove twice")
    check_staged(table, add)


def check_staged(table: TableAccess, staged: Sequence[StagedFile]) -> None:
    """Every file to add exists with its staged size: neither delta-rs nor Delta checks, and a commit
    naming a missing file would lose rows."""
    import pyarrow.fs as pafs

    fs, root = table.filesystem()
    infos = fs.get_file_info([f"{root}/{f.path}" for f in staged]) if staged else []
    for f, info in zip(staged, infos, strict=True):
        if info.type != pafs.FileType.File:
            raise RewriteValidationError(f"file to add does not exist: {table.file_uri(f.path)}")
        if info.size != f.size:
            raise RewriteValidationError(f"file to add changed size: {f.path} is {info.size} bytes, staged as {f.size}")


# Table properties that change how the table's files are read or must be written: files staged before one
# of them changed may not fit the table any more. Others (owners, comments, statistics columns) do not.
RETRY_PROPERTIES = frozenset(
    {
        COLUMN_MAPPING_MODE,
        "delta.enableRowTracking",
        ROW_ID_COLUMN,
        ROW_VERSION_COLUMN,
        "delta.enableIcebergCompatV1",
        "delta.enableIcebergCompatV2",
        "delta.universalFormat.enabledFormats",
    }
)
CLUSTERING_DOMAIN = "delta.clustering"  # the domain metadata holding a liquid table's clustering columns


@dataclass(frozen=True)
class RetryBasis:
    """What a rewrite planned on one version assumes of the table besides its files, as either Delta
    library reports it. Delta's conflict checker judges a commit against the version it read; a retry on a
    later version must first see all of this unchanged, or its files and layout were chosen for another
    table (deletion vectors its removes cannot carry, physical names, row ids, a liquid table that must
    get no Z-order). Delta's own OPTIMIZE re-checks only the partitioning before its retries."""

    protocol: tuple[int, int, frozenset[str], frozenset[str]]  # reader, writer versions; their features
    schema: str  # the schema JSON, canonical (key order does not count)
    partition_columns: tuple[str, ...]
    properties: tuple[tuple[str, str | None], ...]  # the `RETRY_PROPERTIES` set, sorted
    clustering: str | None  # the liquid clustering domain's configuration; None: none, or not readable


def retry_basis(
    protocol: tuple[int, int, Iterable[str] | None, Iterable[str] | None],
    *,
    schema_json: str,
    partition_columns: Iterable[str],
    configuration: Mapping[str, str | None],
    clustering: str | None = None,
) -> RetryBasis:
    """The `RetryBasis` of a table version from what any Delta library returns for it."""
    reader, writer, reader_features, writer_features = protocol
    return RetryBasis(
        protocol=(int(reader), int(writer), frozenset(reader_features or ()), frozenset(writer_features or ())),
        schema=json.dumps(json.loads(schema_json), sort_keys=True),
        partition_columns=tuple(partition_columns),
        properties=tuple(sorted((k, v) for k, v in configuration.items() if k in RETRY_PROPERTIES)),
        clustering=clustering,
    )


def basis_changes(planned: RetryBasis, now: RetryBasis) -> list[str]:
    """What differs between two `RetryBasis`, named for an operator (empty: a retry may go ahead)."""
    changes = []
    if planned.protocol != now.protocol:
        added = sorted((now.protocol[2] | now.protocol[3]) - (planned.protocol[2] | planned.protocol[3]))
        removed = sorted((planned.protocol[2] | planned.protocol[3]) - (now.protocol[2] | now.protocol[3]))
        named = [f"+{f}" for f in added] + [f"-{f}" for f in removed]
        changes.append(f"protocol ({', '.join(named) if named else 'versions'})")
    if planned.schema != now.schema:
        changes.append("schema")
    if planned.partition_columns != now.partition_columns:
        changes.append("partition columns")
    if planned.properties != now.properties:
        keys = sorted({k for k, _ in set(planned.properties) ^ set(now.properties)})
        changes.append(f"properties ({', '.join(keys)})")
    if planned.clustering != now.clustering:
        changes.append("liquid clustering columns")
    return changes


def check_retry_basis(
    table: TableAccess,
    planned: tuple[int, RetryBasis],
    now: tuple[int, RetryBasis],
    add: Sequence[StagedFile],
    *,
    run: tuple[str, int] | None = None,
) -> int | None:
    """Give up a commit at version ``now[0]`` of files staged for the table at ``planned[0]`` (a rewrite's
    retry, a blind append) when the table is no longer what they were written for (`basis_changes`): the
    staged files are deleted, `CommitConflictError` says what changed. With `run` (run id, read version:
    a retry after an attempt whose outcome was read) the log is read again first, since the change may be
    the run's own commit landing late: its version is then returned and no file is deleted."""
    changes = basis_changes(planned[1], now[1])
    if not changes:
        return None
    conflict = CommitConflictError(
        f"{table.uri}: the table's {'; '.join(changes)} changed since version {planned[0]}, which the files "
        f"were staged for (now version {now[0]}); they may not fit the table any more: nothing was committed"
    )
    if run is not None and (version := outcome_after_failure(table, run[0], run[1], conflict)) is not None:
        return version
    table.discard(add)
    raise conflict


def landed(table: TableAccess, run_id: str | None, read_version: int) -> int | None:
    """The version a rewrite with `run_id` committed after `read_version`, read from the log; None when
    it did not land. Raises whatever reading the log raises: the caller then knows nothing and must keep
    every file the log might reference. Without a run id the log cannot tell, so that raises too."""
    if not run_id:
        raise RewriteValidationError(f"{table.uri}: a commit without a run id cannot be found in the log")
    found = commit_of_run(table.history(read_version + 1), run_id)
    return found.version if found is not None else None


def outcome_after_failure(
    table: TableAccess, run_id: str | None, read_version: int, error: BaseException
) -> int | None:
    """After a commit attempt raised `error`: the version it committed (a post-commit step failed; the
    files are the table's now), or None when the log shows it did not land (the staged files may go).
    When the log cannot be read, the outcome is unknown: raise `CommitOutcomeUnknownError`, deleting nothing."""
    from optimizer.errors import CommitOutcomeUnknownError

    try:
        version = landed(table, run_id, read_version)
    except Exception as err:  # the log is unreadable right now: a commit may have landed
        raise CommitOutcomeUnknownError(
            f"a commit to {table.uri} failed ({error}) and its outcome cannot be read from the log ({err}); "
            f"the written files are kept (run {run_id}: look for it in the table's history; VACUUM removes "
            "them if it did not land)"
        ) from error
    if version is not None:
        log.warning("run %s committed %s as version %d, then failed: %s", run_id, table.uri, version, error)
    return version
