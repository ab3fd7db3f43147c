"""The delta-rs commit protocol of `optimizer.table.handle.DeltaTableHandle`: layout rewrites, appends, the
first commit and property changes, all through ``deltalake``'s transactions (never hand-written JSON).

Layout rewrites follow the conflict rule of docs/ARCHITECTURE.md (contract 4): commit with
``max_commit_retries=0`` against the exact version the rewrite was planned on; on conflict reload, check
that the table is unchanged (`optimizer.table.rewrite.RetryBasis`) and every file it removes still active
(same path and size), and only then try again at the new version. Otherwise it gives up with
`CommitConflictError`, deletes what it staged, and commits nothing, so racing rewrites can neither
duplicate nor lose rows. ``RemoveAction`` cannot carry a deletion vector: tables allowing them are refused.

A reported conflict is not proof that nothing landed: on S3 a conditional put can succeed, lose its
response, and be retried into a 412, so delta-rs raises ``CommitFailedError`` for a commit that is in
the log. Every failed attempt is therefore settled from the log by the run id (`outcome_after_failure`;
a rewrite without one is refused up front) before anything else: a commit that landed is the rewrite's
result; a log that cannot be read keeps every file (`CommitOutcomeUnknownError`). Only a definite refusal
(``CommitFailedError`` not caused by the store) that the log does not show lets a retry go on; any other
error may still land (a timed-out PUT), so it keeps every file (`CommitOutcomeUnknownError`). A retry
that gives up reads the log again first: a late landing of the run's commit is its result.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, create_table_with_add_actions

from optimizer import errors
from optimizer.table.access import CUSTOM_METADATA_KEY, DataFile, Snapshot, StagedFile, TableAccess
from optimizer.table.deltars_log import data_files, retry_basis_of, table_features_of
from optimizer.table.protocol import check_rewritable
from optimizer.table.rewrite import (
    CommitEngine,
    DeltaOptimize,
    PathCheck,
    RetryBasis,
    RewriteRequest,
    check_retry_basis,
    check_rewrite,
    check_staged,
    not_deltas_command,
    outcome_after_failure,
)

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from optimizer.table.delta_sql import DeltaCommitted
    from optimizer.table.protocol import TableFeatures

log = logging.getLogger(__name__)


class DeltaTableHandle(TableAccess, Protocol):
    """What the commit protocol needs of a table handle (`optimizer.table.handle.DeltaTableHandle`): typed
    structurally so that the handle may import this module without this module importing the handle."""

    storage_options: dict[str, str]

    def delta_table(self, version: int | None = None) -> DeltaTable: ...


REWRITE_ATTEMPTS = 5


class DeltaRsCommitter:
    """The delta-rs commit protocol of the table itself, from this process (`rewrite`); with a `path`
    (`optimizer.table.rewrite_path.open_path`) every attempt re-checks it on the version it commits to."""

    engine: CommitEngine = "delta-rs"

    def __init__(self, table: DeltaTableHandle, path: PathCheck | None = None) -> None:
        self.table: TableAccess = table
        self._handle = table
        self.path = path

    def commit_safety(self) -> str:
        return self.table.commit_safety()

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int:
        recheck = self.path.recheck if self.path is not None else None
        return rewrite(
            self._handle,
            request.read_version,
            request.remove,
            request.add,
            request.metadata,
            before_commit=before_commit,
            recheck=recheck,
        )

    def optimize(self, request: DeltaOptimize) -> DeltaCommitted:
        raise not_deltas_command(self.engine)

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None:
        self.table.set_properties(properties, metadata)


_View = tuple["DeltaTable", tuple[int, RetryBasis], dict[str, DataFile]]  # an attempt's table, basis, active files


def rewrite(
    table: DeltaTableHandle,
    read_version: int,
    remove: Sequence[DataFile],
    add: Sequence[StagedFile],
    metadata: Mapping[str, Any] | None = None,
    *,
    before_commit: Callable[[int], None] | None = None,
    recheck: Callable[[TableFeatures, int], None] | None = None,
) -> int:
    """Atomically replace `remove` with `add` (``dataChange=false``), planned at `read_version`: the
    contract of `DeltaTableHandle.rewrite`. Returns the committed version (the run's, read back from the log
    when an attempt reported failure after landing). `recheck` (the rewrite path's) judges the table each
    attempt commits to."""
    run = (_run_id(table, metadata), read_version)
    check_rewrite(table, remove, add)
    table.commit_safety()
    version: int | None = read_version
    planned: tuple[int, RetryBasis] | None = None
    for attempt in range(REWRITE_ATTEMPTS):
        log_table, now, active = _read_attempt(table, version, add)
        if planned is None:
            planned = _first_basis(table, log_table, now, add)
        elif (landed_at := check_retry_basis(table, planned, now, add, run=run)) is not None:
            return landed_at  # the run's commit landed late: the table changed by it
        if recheck is not None and (landed_at := _rechecked(table, recheck, log_table, add, run=run)) is not None:
            return landed_at
        if (landed_at := _still_active(table, remove, active, add, run=run, first=attempt == 0)) is not None:
            return landed_at
        stamp = int(time.time() * 1000)
        actions: list[AddAction | RemoveAction] = [_add_action(f, data_change=False) for f in add]
        actions += [_remove_action(f, stamp, active[f.path]) for f in remove]
        if before_commit is not None:
            before_commit(now[0])
        landed_at = _commit_once(table, log_table, actions, metadata)
        if landed_at is not None:
            return landed_at
        log.info("rewrite of %s planned at v%d lost a race at v%d; re-checking", table.uri, read_version, now[0])
        version = None  # a retry starts from the latest version
    table.discard(add)  # the last attempt's conflict was settled from the log: it did not land
    raise errors.CommitConflictError(
        f"{table.uri} kept changing: gave up after {REWRITE_ATTEMPTS} attempts; nothing was committed"
    )


def _run_id(table: DeltaTableHandle, metadata: Mapping[str, Any] | None) -> str:
    """The run id a rewrite's commit carries: the only way to tell from the log whether a failed attempt
    landed. Without one a failure would be taken for "not landed" and the files its commit references
    deleted, so such a rewrite is refused before anything is committed."""
    run_id = (metadata or {}).get("runId")
    if not run_id:
        raise errors.RewriteValidationError(
            f"a rewrite of {table.uri} needs a run id (metadata 'runId') to settle its commit from the log"
        )
    return str(run_id)


def _read_attempt(table: DeltaTableHandle, version: int | None, add: Sequence[StagedFile]) -> _View:
    """The table an attempt commits against (`version`; None: the latest, for a retry), its `RetryBasis`
    and active files. A failed read deletes the staged files and names the table: nothing of this run
    can be in the log (before the first attempt; or on a retry, whose lost attempt the log settled)."""
    try:
        log_table = table.delta_table(version)
        return log_table, (log_table.version(), retry_basis_of(log_table)), {f.path: f for f in data_files(log_table)}
    except (errors.TableAccessError, DeltaError, OSError, ValueError) as err:
        table.discard(add)
        raise errors.TableAccessError(
            f"cannot read {table.uri} (version {'latest' if version is None else version}) to commit the "
            f"rewrite: {err}; nothing was committed"
        ) from err


def _first_basis(
    table: DeltaTableHandle, log_table: DeltaTable, now: tuple[int, RetryBasis], add: Sequence[StagedFile]
) -> tuple[int, RetryBasis]:
    """The table's `RetryBasis` as planned on (a retry must see it unchanged: `check_retry_basis`). The
    table must be one delta-rs can rewrite (no deletion vectors, whose descriptors its removes cannot
    carry; no column mapping, row tracking or liquid clustering); a refusal deletes what was staged."""
    try:
        check_rewritable(table_features_of(log_table), table.uri, delta_engine=False)
    except errors.UnsupportedTableError:
        table.discard(add)
        raise
    return now


def _rechecked(
    table: DeltaTableHandle,
    recheck: Callable[[TableFeatures, int], None],
    log_table: DeltaTable,
    add: Sequence[StagedFile],
    *,
    run: tuple[str, int],
) -> int | None:
    """The rewrite path re-checked on the version this attempt commits to (a table made liquid since the
    plan gets no Z-order). A refusal reads the log first, as any give-up after an attempt: the run's own
    commit landing late is its result; only a log without it lets the staged files be deleted."""
    try:
        recheck(table_features_of(log_table), log_table.version())
    except errors.CommitConflictError as conflict:
        landed_at = outcome_after_failure(table, run[0], run[1], conflict)
        if landed_at is not None:
            return landed_at
        table.discard(add)
        raise
    return None


def _still_active(
    table: DeltaTableHandle,
    remove: Sequence[DataFile],
    active: Mapping[str, DataFile],
    add: Sequence[StagedFile],
    *,
    run: tuple[str, int],
    first: bool,
) -> int | None:
    """Every file to remove must still be `active` (same size); otherwise the rewrite is refused: invalid
    on the first attempt, a lost race on a retry. On a retry the commit that removed them may be the
    run's own, landed after its outcome was read: the log is read again (`outcome_after_failure`), and
    the version it landed at is returned; only a log without it lets the staged files be deleted. Path
    and size identify a file here because no file has a deletion vector (`_first_basis`, `RetryBasis`)."""
    gone = [f.path for f in remove if f.path not in active or active[f.path].size != f.size]
    if not gone:
        return None
    if first:
        table.discard(add)
        raise errors.RewriteValidationError(
            f"files to remove are not active in {table.uri} at version {run[1]}: {gone[:5]}"
        )
    conflict = errors.CommitConflictError(
        f"a concurrent commit removed {len(gone)} of the files this rewrite replaces "
        f"(e.g. {gone[0]}); nothing was committed"
    )
    landed_at = outcome_after_failure(table, run[0], run[1], conflict)
    if landed_at is not None:
        return landed_at
    table.discard(add)
    raise conflict


def _commit_once(
    table: DeltaTableHandle,
    log_table: DeltaTable,
    actions: list[AddAction | RemoveAction],
    metadata: Mapping[str, Any] | None,
) -> int | None:
    """One commit attempt with no automatic retries: the version it committed, or None when it was
    refused and the log does not show it (a concurrent commit won; the caller re-checks). Every failure
    is settled by the log (`outcome_after_failure`), a ``CommitFailedError`` too: the run's commit may be
    there although the store reported a conflict. A landed commit is returned; an unreadable log keeps
    every file. Any other failure the log does not show may still land (a timed-out PUT that completes
    later): `CommitOutcomeUnknownError`, every file kept, none deleted."""
    read_version = log_table.version()
    run_id = (metadata or {}).get("runId")
    try:
        log_table.create_write_transaction(
            actions,
            mode="append",
            schema=log_table.schema(),
            partition_by=list(log_table.metadata().partition_columns) or None,
            commit_properties=CommitProperties(custom_metadata=custom_metadata(metadata), max_commit_retries=0),
        )
    except (DeltaError, OSError, ValueError) as err:
        landed_at = outcome_after_failure(table, run_id, read_version, err)
        if landed_at is not None or _refused(err):
            return landed_at
        raise errors.CommitOutcomeUnknownError(
            f"a commit to {table.uri} failed ({err}) and the log does not show it, but it may still land: "
            f"the written files are kept (run {run_id}: look for it in the table's history; VACUUM removes "
            "them if it did not land)"
        ) from err
    return read_version + 1


def _refused(err: Exception) -> bool:
    """A definite refusal of the commit (a version that exists, a conflict): delta-rs's
    ``CommitFailedError``, except when the store failed (its object-store errors are wrapped in it too),
    after which the commit file may still appear."""
    return isinstance(err, CommitFailedError) and "object store" not in str(err).lower()


def append(
    table: DeltaTableHandle, staged: Sequence[StagedFile], snapshot: Snapshot, metadata: Mapping[str, Any] | None = None
) -> int:
    """Commit `staged` as new data (``dataChange=true``): the contract of `DeltaTableHandle.append`."""
    table.commit_safety()
    check_staged(table, staged)
    log_table = table.delta_table()
    if log_table.version() != snapshot.version:
        staged_for = (snapshot.version, retry_basis_of(table.delta_table(snapshot.version)))
        check_retry_basis(table, staged_for, (log_table.version(), retry_basis_of(log_table)), staged)
    try:
        log_table.create_write_transaction(
            [_add_action(f, data_change=True) for f in staged],
            mode="append",
            schema=log_table.schema(),
            partition_by=list(snapshot.partition_columns) or None,
            commit_properties=CommitProperties(custom_metadata=custom_metadata(metadata), max_commit_retries=10),
        )
    except (DeltaError, OSError, ValueError) as err:
        raise errors.TableAccessError(f"append to {table.uri} failed: {err}") from err
    return table.delta_table().version()


def create(
    table: DeltaTableHandle, draft: Snapshot, staged: Sequence[StagedFile], metadata: Mapping[str, Any] | None
) -> None:
    """The first commit of a table described by `draft` (schema, partitioning, properties) with `staged`
    as its data; a failure deletes the files and raises `TableAccessError`, unless the log shows version 0
    with these files (the commit landed, its response was lost: success)."""
    from deltalake import Schema

    try:
        create_table_with_add_actions(
            table.uri,
            Schema.from_json(draft.schema_json),
            [_add_action(f, data_change=True) for f in staged],
            mode="error",
            partition_by=list(draft.partition_columns) or None,
            configuration=dict(draft.configuration),
            storage_options=table.storage_options or None,
            commit_properties=CommitProperties(custom_metadata=custom_metadata(metadata)),
        )
    except (DeltaError, OSError, ValueError) as err:
        if _created_with(table, staged, err):
            log.warning("creating %s reported %s, but version 0 with its files is in the log", table.uri, err)
            return
        table.discard(staged)
        raise errors.TableAccessError(f"cannot create Delta table at {table.uri}: {err}") from err


def _created_with(table: DeltaTableHandle, staged: Sequence[StagedFile], error: Exception) -> bool:
    """Whether version 0 landed with exactly `staged` although its commit reported `error` (a lost
    response): its files are then the table's and must stay. No table: it did not land. A log that
    cannot be read keeps every file (`CommitOutcomeUnknownError`)."""
    try:
        first = data_files(table.delta_table(0))
    except errors.TableNotFoundError:
        return False
    except (errors.TableAccessError, DeltaError, OSError, ValueError) as err:
        raise errors.CommitOutcomeUnknownError(
            f"creating {table.uri} failed ({error}) and its log cannot be read ({err}); the written files are "
            "kept (VACUUM removes them if the table was not created)"
        ) from error
    return {unquote(f.path) for f in first} == {unquote(f.path) for f in staged}


def set_properties(
    table: DeltaTableHandle, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None
) -> None:
    """Set table properties in one commit (Delta's SET TBLPROPERTIES)."""
    try:
        table.delta_table().alter.set_table_properties(
            dict(properties), commit_properties=CommitProperties(custom_metadata=custom_metadata(metadata))
        )
    except (DeltaError, OSError, ValueError) as err:
        raise errors.TableAccessError(f"cannot set table properties of {table.uri}: {err}") from err


def _add_action(f: StagedFile, data_change: bool) -> AddAction:
    return AddAction(f.path, f.size, dict(f.partition_values), int(time.time() * 1000), data_change, f.stats_json)


def _remove_action(f: DataFile, now: int, active: DataFile) -> RemoveAction:
    """Decoded: delta-rs encodes what it writes, so a log path holding ``%`` (a partition value, a clone's
    source) given as it is would remove no active file, and the rewrite would duplicate its rows."""
    return RemoveAction(unquote(f.path), False, now, f.size, dict(active.partition_values))


def custom_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Our commit metadata travels under one key so it never collides with commitInfo fields."""
    if not metadata:
        return None
    return {CUSTOM_METADATA_KEY: json.loads(json.dumps(metadata, default=str))}
