"""Delta's own commands on one table, through SQL only.

Where only SQL reaches the cluster (Spark Connect, Databricks serverless and shared compute: no JVM
gateway), deltaopt cannot stage files and commit them itself; the cluster's Delta does both with its
own ``OPTIMIZE``, so its conflict checker, log store and catalog are the ones the table's writers use.
deltaopt still chooses the layout (the columns and their order) and tags the commit with its run through
Delta's ``userMetadata`` (``spark.databricks.delta.commitInfo.userMetadata``, set on the session for the
one command), which is how the run's commits are found afterwards (`run_commits`), as the service finds its
own commits' tags: never "the newest commit", which another writer's may be by then. One OPTIMIZE may
make several commits (with ``spark.databricks.delta.optimize.batchSize`` set, Delta's
``OptimizeTableCommand`` commits each batch of bins in its own transaction, each with the session's user
metadata), so every commit carrying the run's tag is the run's (`run_commits`).

That setting is the session's, not the statement's (Delta's OPTIMIZE takes user metadata from nowhere
else, and a Spark Connect session cannot be forked), and every commit the session makes while it is set
carries it. So the commands that commit (OPTIMIZE, CLUSTER BY) hold one lock from setting the tag to
restoring it (`_COMMITTING`): two jobs of the service's worker pool on one session run them one after
the other, each commit with its own run's tag, instead of the second tag replacing the first mid-command;
a job that waits logs whose command it waits for and gives up, nothing committed, after
`COMMIT_WAIT_SECONDS`.
Commits of other kinds the session makes meanwhile (another table's ``ALTER TABLE ... SET TBLPROPERTIES``)
carry the tag too; only an ``OPTIMIZE`` commit's user metadata is read as deltaopt's (`Commit.deltaopt`).

Statements are rendered by sqlglot from identifiers (`optimizer.table.locations.sql_name`), never spliced.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer.errors import TableAccessError
from optimizer.table.access import CUSTOM_METADATA_KEY
from optimizer.table.delta_engine import java_message
from optimizer.table.locations import sql_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import Commit, TableAccess

log = logging.getLogger(__name__)

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# held by a command that commits from tagging the session to restoring it: the tag is session-wide
_COMMITTING = threading.Lock()
_holder: list[str] = [""]  # who holds `_COMMITTING` ("run X's OPTIMIZE of T"), for the jobs waiting on it
# how long a job waits for another's command to finish with the session: an hours-long OPTIMIZE (or a
# stalled Connect stream) must not park every other job's worker silently and forever
COMMIT_WAIT_SECONDS = 3600.0


@contextmanager
def _committing(what: str, uri: str) -> Iterator[None]:
    """Hold `_COMMITTING` as `what` (logged to the jobs waiting). A busy lock is logged (INFO) with its
    holder; after `COMMIT_WAIT_SECONDS` the job fails with `TableAccessError` naming the holder, before
    anything of its own is committed."""
    if not _COMMITTING.acquire(blocking=False):
        holder = _holder[0] or "another job's command"
        log.info("%s is waiting for %s (one command commits at a time on the session)", what, holder)
        if not _COMMITTING.acquire(timeout=COMMIT_WAIT_SECONDS):
            raise TableAccessError(
                f"{uri}: gave up after {COMMIT_WAIT_SECONDS:.0f}s waiting for {_holder[0] or holder} to finish "
                "with the session's commit tag; nothing was committed"
            )
    _holder[0] = what
    try:
        yield
    finally:
        _holder[0] = ""
        _COMMITTING.release()


@dataclass(frozen=True)
class CommandResult:
    """What one Delta OPTIMIZE did, from its own metrics (which versions it committed: `run_commits`)."""

    files_in: int
    files_out: int
    bytes_in: int
    bytes_out: int

    @property
    def committed(self) -> bool:
        """Whether Delta committed: its OPTIMIZE commits only when it removes or adds files."""
        return bool(self.files_in or self.files_out)


@dataclass(frozen=True)
class DeltaCommitted:
    """What Delta's OPTIMIZE of one run did (its metrics) and the commits carrying the run's tag."""

    result: CommandResult
    commits: list[Commit]


class DeltaSql:
    """Delta's SQL commands on the table at `uri` (its catalog name when configured by name)."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        self.spark = spark
        self.uri = uri
        self.name = sql_name(uri)

    def detail(self) -> dict[str, Any]:
        """``DESCRIBE DETAIL``: format, location, clustering columns, properties."""
        try:
            return dict(self.spark.sql(f"DESCRIBE DETAIL {self.name}").collect()[0].asDict())
        except Exception as err:
            raise TableAccessError(f"Delta cannot describe {self.uri}: {java_message(err)}") from err

    def clustering_columns(self) -> tuple[str, ...] | None:
        """The table's liquid clustering keys as DESCRIBE DETAIL names them (a nested key as its dotted
        path, ``s.x``); None: not clustered. Raises `TableAccessError` when Delta cannot describe the
        table: unknown keys are not "no keys" (``set`` would commit a needless CLUSTER BY)."""
        columns = self.detail().get("clusteringColumns")
        return tuple(columns) if columns else None

    def cluster_by(self, keys: Sequence[str], *, before: Callable[[], None] = lambda: None) -> None:
        """``ALTER TABLE ... CLUSTER BY``: a commit, so not while another job's tag is the session's;
        `before` runs right before the statement, under the lock (the rewrite path's re-check)."""
        columns = ", ".join(exp.to_identifier(k, quoted=True).sql("spark") for k in keys)
        with _committing(f"the CLUSTER BY of {self.uri}", self.uri):
            before()
            self._run(f"ALTER TABLE {self.name} CLUSTER BY ({columns})")

    def optimize(
        self,
        zorder_by: Sequence[str],
        tag: Mapping[str, Any],
        before: Callable[[], None] = lambda: None,
        *,
        full: bool = False,
    ) -> CommandResult:
        """``OPTIMIZE <table> [ZORDER BY (...)]`` (a liquid table's ``OPTIMIZE <table> FULL`` with `full`:
        Delta 3.3+ re-clusters the files clustered by other keys too) with `tag` as the commit's user metadata. Delta's
        transaction commits atomically (``dataChange=false``) or not at all. Other commands that commit
        through this module wait meanwhile (`_COMMITTING`), so no other run's tag is the session's while
        Delta commits, and the session's own user metadata is restored afterwards. `before` runs right
        before the statement, under the lock (the rewrite path's re-check: raising commits nothing)."""
        statement = f"OPTIMIZE {self.name}"
        if zorder_by:
            statement += " ZORDER BY (" + ", ".join(exp.to_identifier(c, quoted=True).sql("spark") for c in zorder_by)
            statement += ")"
        if full:
            statement += " FULL"
        with _committing(f"run {tag.get('runId')}'s OPTIMIZE of {self.uri}", self.uri):
            before()
            previous = self.spark.conf.get(USER_METADATA_CONF, None)
            self.spark.conf.set(USER_METADATA_CONF, json.dumps({CUSTOM_METADATA_KEY: dict(tag)}, separators=(",", ":")))
            try:
                metrics = self._metrics(statement)
            finally:
                self._restore(previous)
        return CommandResult(
            int(metrics.get("numFilesRemoved") or 0),
            int(metrics.get("numFilesAdded") or 0),
            _total(metrics.get("filesRemoved")),
            _total(metrics.get("filesAdded")),
        )

    def _restore(self, previous: str | None) -> None:
        """Put the session's user metadata back, best effort: on a dropped connection this fails too, and
        raising here would hide the command's own error, from which the caller settles whether Delta
        committed (`delta_sql_commit.DeltaSqlCommitter.optimize` reads the log)."""
        try:
            if previous is None:
                self.spark.conf.unset(USER_METADATA_CONF)
            else:
                self.spark.conf.set(USER_METADATA_CONF, previous)
        except Exception as err:
            log.warning(
                "could not restore the session's %s after OPTIMIZE of %s: %s", USER_METADATA_CONF, self.uri, err
            )

    def _metrics(self, statement: str) -> dict[str, Any]:
        """Run OPTIMIZE and read its metrics row; a failure reading them (a Connect stream dropped after
        the server committed) is the command's failure, which the caller settles from the log."""
        rows = self._run(statement)
        try:
            return dict(rows.collect()[0]["metrics"].asDict(recursive=True))
        except Exception as err:
            raise TableAccessError(f"Delta's `OPTIMIZE` on {self.uri} failed: {java_message(err)}") from err

    def _run(self, statement: str) -> Any:
        try:
            return self.spark.sql(statement)
        except Exception as err:  # Delta's commands: their transactions commit or not, atomically
            raise TableAccessError(
                f"Delta's `{statement.split(' ', 1)[0]}` on {self.uri} failed: {java_message(err)}"
            ) from err


def _total(summary: Any) -> int:
    return int((summary or {}).get("totalSize") or 0) if isinstance(summary, dict) else 0


def tagged_commits(table: TableAccess, run_id: str, read_version: int) -> list[Commit]:
    """Every commit after `read_version` carrying `run_id`'s tag, oldest first (empty: none landed)."""
    return [c for c in table.history(read_version + 1) if c.deltaopt.get("runId") == run_id]


def run_commits(table: TableAccess, run_id: str, read_version: int) -> list[Commit]:
    """The commits Delta's OPTIMIZE made for `run_id` after `read_version`, found by the run's tag in the
    log (as `rewrite.landed` finds a rewrite's): the newest commit may be another writer's that landed
    since, and an OPTIMIZE run in batches commits once per batch. Raises `TableAccessError` when no
    commit carries the tag: Delta committed, but which version is the run's cannot be said, so nothing
    may be recorded as its."""
    commits = tagged_commits(table, run_id, read_version)
    if not commits:
        raise TableAccessError(
            f"Delta's OPTIMIZE of {table.uri} committed, but no commit after version {read_version} carries "
            f"run {run_id}'s tag (userMetadata); its files are not recorded as the run's"
        )
    return commits


def result_of(commits: Sequence[Commit]) -> CommandResult:
    """What the run's commits did, from the operation metrics Delta wrote into each: the command's own
    metrics row is gone when the statement failed after committing."""

    def total(key: str) -> int:
        return sum(int((c.metadata.get("operationMetrics") or {}).get(key) or 0) for c in commits)

    return CommandResult(
        total("numRemovedFiles"), total("numAddedFiles"), total("numRemovedBytes"), total("numAddedBytes")
    )
