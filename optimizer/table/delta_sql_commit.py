"""The committer of Delta's own commands: ``OPTIMIZE`` (``ZORDER BY``, or a liquid table by its keys) and
a liquid table's ``ALTER TABLE ... CLUSTER BY``, through SQL (`optimizer.table.delta_sql`).

Two paths share it (`optimizer.table.rewrite_path`): a liquid table in a session with Delta's engine in its
JVM (``committed_by`` ``delta-spark``, as Delta's transaction commits there) and any table where only SQL
reaches the cluster (``delta-sql``). Delta writes and commits in one statement, so the rewrite path is
re-checked right before it, under the session's commit lock, on the table's latest version: a table that
became liquid is not sent ``ZORDER BY``. When the statement fails its commits may still have landed (a
post-commit hook failed; a Connect stream dropped after the server committed): the log says, by the run's
tag, as for deltaopt's own commits (`rewrite.outcome_after_failure`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from optimizer.errors import CommitConflictError, CommitOutcomeUnknownError, SparkRuntimeError, TableAccessError
from optimizer.table.delta_sql import DeltaCommitted, DeltaSql, result_of, run_commits, tagged_commits
from optimizer.table.rewrite import CommitEngine, DeltaOptimize, PathCheck, RewriteRequest

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import SparkSession

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)


class DeltaSqlCommitter:
    """Commits Delta's own commands on `table` in `spark`; `engine` is who commits there (``committed_by``)."""

    def __init__(self, spark: SparkSession, table: TableAccess, path: PathCheck, engine: CommitEngine) -> None:
        self.spark = spark
        self.table = table
        self.path: PathCheck | None = path
        self.engine = engine
        self.delta = DeltaSql(spark, table.spark_uri("").rstrip("/"))

    def commit_safety(self) -> str:
        return "Delta's own commands commit, through the session's Delta and its log store"

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int:
        raise SparkRuntimeError("this session has no JVM gateway: Delta's own commands commit (clustering.by_delta)")

    def clustering_columns(self) -> tuple[str, ...] | None:
        """The liquid table's keys as Delta describes them (None: not clustered)."""
        return self.delta.clustering_columns()

    def set_clustering(self, keys: Sequence[str]) -> None:
        """``ALTER TABLE ... CLUSTER BY`` `keys`, the path re-checked right before it."""
        self.delta.cluster_by(keys, before=self._recheck)

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None:
        raise SparkRuntimeError("Delta's own commands set no table properties for deltaopt (clustering.by_delta)")

    def optimize(self, request: DeltaOptimize) -> DeltaCommitted:
        """Delta's OPTIMIZE and the run's commits, found by its tag after `request.read_version`. When the
        statement fails its commits may still have landed: the log says, and a run that committed is
        reported with what its commits' metrics say; an unreadable log is `CommitOutcomeUnknownError`."""
        run_id = str(request.tag["runId"])
        try:
            result = self.delta.optimize(list(request.z_order_by), request.tag, self._recheck, full=request.full)
        except TableAccessError as error:
            commits = self._landed(error, run_id, request.read_version)
            if not commits:
                raise
            log.warning("run %s: Delta's OPTIMIZE committed %s, then failed: %s", run_id, self.table.uri, error)
            return DeltaCommitted(result_of(commits), commits)
        commits = run_commits(self.table, run_id, request.read_version) if result.committed else []
        return DeltaCommitted(result, commits)

    def _landed(self, error: TableAccessError, run_id: str, read_version: int) -> list[Any]:
        """The run's commits after a failed statement (empty: none landed). A refusal of the re-check ran
        before the statement: nothing can have landed."""
        if isinstance(error, (_Moved, _NotRun)):
            return []
        try:
            return tagged_commits(self.table, run_id, read_version)
        except Exception as err:  # the log is unreadable right now: Delta may have committed
            raise CommitOutcomeUnknownError(
                f"{error}; whether Delta committed cannot be read from the log ({err}): look for run {run_id} "
                f"in {self.table.uri}'s history"
            ) from error

    def _recheck(self) -> None:
        """The path re-checked on the table's latest version, right before Delta's statement commits."""
        if self.path is None:
            return
        try:
            latest = self.table.snapshot()
        except TableAccessError as unread:
            raise _NotRun(f"{unread}; Delta's command was not run: nothing was committed") from unread
        try:
            self.path.recheck(latest.features, latest.version)
        except TableAccessError as moved:
            raise _Moved(str(moved)) from moved


class _Moved(CommitConflictError):
    """The re-check's refusal inside Delta's command lock: nothing was run."""


class _NotRun(TableAccessError):
    """The latest version could not be read for the re-check, before Delta's statement: nothing was run."""
