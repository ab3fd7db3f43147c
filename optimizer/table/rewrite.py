"""What a layout rewrite is, whoever commits it: the request, the committer interface, the checks made
before any commit, and how the outcome of a commit that may have landed is read back from the log.

Shared by `optimizer.table.committer` (which picks the engine), `optimizer.table.deltaspark` (Delta's
transaction) and `optimizer.table.deltars` (delta-rs), so neither implementation imports the other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from optimizer.errors import RewriteValidationError
from optimizer.table.access import commit_of_run

if TYPE_CHECKING:
    from optimizer.table.access import DataFile, StagedFile, TableAccess

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


class Committer(Protocol):
    """Commits a `RewriteRequest`; `before_commit(version)` runs right before the commit (tests race it)."""

    engine: CommitEngine
    table: TableAccess

    def commit_safety(self) -> str: ...

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int: ...

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None: ...


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


def landed(table: TableAccess, run_id: str | None, read_version: int) -> int | None:
    """The version a rewrite with `run_id` committed after `read_version`, read from the log; None when
    it did not land. Raises whatever reading the log raises: the caller then knows nothing and must keep
    every file the log might reference."""
    if not run_id:
        return None
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
