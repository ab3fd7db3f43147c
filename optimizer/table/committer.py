"""Who commits a layout rewrite: one interface, two implementations, chosen by what the runtime has.

* ``delta-spark``: Delta's own optimistic transaction in the session's JVM (the embedded default with
  the cached jars, a cluster with Delta, the job on a Databricks cluster). The commit is an ``OPTIMIZE``
  in Delta's history, with its operation metrics, ``engineInfo`` naming Spark and Delta, Delta's
  conflict checker and isolation, and the store's Delta ``LogStore`` (`optimizer.table.deltaspark`).
* ``delta-sql``: a session with no JVM gateway (Spark Connect, serverless, shared compute) commits
  nothing itself: Delta's own ``OPTIMIZE`` on the cluster rewrites and commits (`optimizer.table.delta_sql`).
* ``delta-rs``: the commit protocol of `optimizer.table.deltars` from this process. Only where the
  table's writers commit with delta-rs too, or where the operator chose it (``spark.commit: delta-rs``):
  beside Delta writers on Spark it would bypass their conflict checker and, on S3, their log store.

Both take the same `RewriteRequest` and keep the same contract (docs/ARCHITECTURE.md, contract 4): the
files are replaced atomically with ``dataChange=false`` or nothing is committed and the staged files are
deleted; a concurrent commit that removed a file being replaced makes the rewrite give up
(`CommitConflictError`), concurrent appends do not. ``spark.commit`` (config) forces one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optimizer.errors import SparkRuntimeError, UnsupportedTableError
from optimizer.table.delta_engine import delta_classes
from optimizer.table.rewrite import COMMIT_CONF, CommitEngine, Committer, RewriteRequest, check_rewrite

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from pyspark.sql import SparkSession

    from optimizer.table.access import Snapshot, TableAccess

__all__ = ["COMMIT_CONF", "CommitEngine", "Committer", "DeltaRsCommitter", "RewriteRequest", "check_rewrite"]


class DeltaRsCommitter:
    """The delta-rs commit protocol of the table itself (`DeltaRsTable.rewrite`)."""

    engine: CommitEngine = "delta-rs"

    def __init__(self, table: TableAccess) -> None:
        self.table = table

    def commit_safety(self) -> str:
        return self.table.commit_safety()

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int:
        return self.table.rewrite(
            request.read_version, request.remove, request.add, request.metadata, before_commit=before_commit
        )

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None:
        self.table.set_properties(properties, metadata)


def commit_engine(spark: SparkSession | None) -> CommitEngine:
    """Who commits in `spark`: Delta's transaction when its classes are in the session's JVM, Delta's
    SQL commands when there is no JVM (Spark Connect), delta-rs where the configuration forces it or
    the session has a JVM without Delta."""
    if spark is None:
        return "delta-rs"
    wanted = _configured(spark)
    if wanted == "delta-rs":
        return "delta-rs"
    if getattr(spark, "_jvm", None) is None:
        return "delta-sql"
    if delta_classes(spark) is not None:
        return "delta-spark"
    if wanted == "delta-spark":
        raise SparkRuntimeError(
            "spark.commit is delta-spark but this session has no Delta engine in a JVM it can reach "
            "(Spark Connect, or a cluster without the io.delta jars)"
        )
    return "delta-rs"


def committer_for(table: TableAccess, spark: SparkSession | None) -> Committer:
    """The committer for `table` in `spark` (see `commit_engine`; delta-sql has none: Delta's command
    commits), its store checked first (`commit_safety`: an unsafe store is refused before anything is
    read). delta-rs is refused beside Delta writers on Spark unless the configuration chose it."""
    engine = commit_engine(spark)
    if engine == "delta-sql":
        raise SparkRuntimeError("this session has no JVM gateway: Delta's own commands commit (clustering.by_delta)")
    committer: Committer
    if engine == "delta-spark":
        from optimizer.table.deltaspark import DeltaSparkCommitter

        assert spark is not None  # commit_engine only picks delta-spark with a session
        committer = DeltaSparkCommitter(spark, table)
    else:
        committer = DeltaRsCommitter(table)
    committer.commit_safety()
    if engine == "delta-rs" and (spark is None or _configured(spark) != "delta-rs"):
        check_delta_rs_allowed(table)
    return committer


def check_delta_rs_allowed(table: TableAccess, snapshot: Snapshot | None = None) -> None:
    """Refuse a delta-rs commit to a table that Delta on Spark (or Databricks) writes: raises
    `UnsupportedTableError` naming the writer and the setting that allows it anyway."""
    snapshot = snapshot or table.snapshot()
    recent = table.history(max(0, snapshot.version - HISTORY_CHECKED))
    writers = sorted({c.engine for c in recent if c.engine and not c.is_deltaopt_optimize and _spark_engine(c.engine)})
    if writers:
        raise UnsupportedTableError(
            f"{table.uri} is written by {', '.join(writers)}; a delta-rs commit beside them would bypass their "
            "conflict checker and log store: run deltaopt where Delta's engine loads (spark.delta), or set "
            "spark.commit: delta-rs to allow it; nothing was changed"
        )


HISTORY_CHECKED = 100  # the newest commits whose writers decide


def _spark_engine(engine: str) -> bool:
    return engine.startswith(("Apache-Spark", "Databricks"))


def _configured(spark: SparkSession) -> str:
    try:
        return str(spark.conf.get(COMMIT_CONF, "auto") or "auto")
    except Exception:  # a stopped session or a Connect server refusing the key: the default
        return "auto"
