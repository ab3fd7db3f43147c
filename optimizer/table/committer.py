"""Who commits a layout rewrite: one interface, two implementations, chosen by what the runtime has.

* ``delta-spark``: Delta's own optimistic transaction in the session's JVM (the embedded default with
  the cached jars, a cluster with Delta, the job on a Databricks cluster). The commit is an ``OPTIMIZE``
  in Delta's history, with its operation metrics, ``engineInfo`` naming Spark and Delta, Delta's
  conflict checker and isolation, and the store's Delta ``LogStore`` (`optimizer.table.deltaspark`).
* ``delta-rs``: the commit protocol of `optimizer.table.deltars` from this process, where no Delta engine
  is there (a plain Spark cluster, Spark Connect, ``spark.delta: off``).

Both take the same `RewriteRequest` and keep the same contract (docs/ARCHITECTURE.md, contract 4): the
files are replaced atomically with ``dataChange=false`` or nothing is committed and the staged files are
deleted; a concurrent commit that removed a file being replaced makes the rewrite give up
(`CommitConflictError`), concurrent appends do not. ``spark.commit`` (config) forces one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optimizer.errors import SparkRuntimeError
from optimizer.table.delta_engine import delta_classes
from optimizer.table.rewrite import COMMIT_CONF, CommitEngine, Committer, RewriteRequest, check_rewrite

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from pyspark.sql import SparkSession

    from optimizer.table.access import TableAccess

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
    """The engine `committer_for` picks in `spark`: Delta's transaction when its classes are in the
    session's JVM and the configuration does not force delta-rs."""
    if spark is None:
        return "delta-rs"
    wanted = _configured(spark)
    if wanted == "delta-rs":
        return "delta-rs"
    if delta_classes(spark) is not None:
        return "delta-spark"
    if wanted == "delta-spark":
        raise SparkRuntimeError(
            "spark.commit is delta-spark but this session has no Delta engine in a JVM it can reach "
            "(Spark Connect, or a cluster without the io.delta jars)"
        )
    return "delta-rs"


def committer_for(table: TableAccess, spark: SparkSession | None) -> Committer:
    """The committer for `table` in `spark` (see `commit_engine`)."""
    if commit_engine(spark) == "delta-spark":
        from optimizer.table.deltaspark import DeltaSparkCommitter

        assert spark is not None  # commit_engine only picks delta-spark with a session
        return DeltaSparkCommitter(spark, table)
    return DeltaRsCommitter(table)


def _configured(spark: SparkSession) -> str:
    try:
        return str(spark.conf.get(COMMIT_CONF, "auto") or "auto")
    except Exception:  # a stopped session or a Connect server refusing the key: the default
        return "auto"
