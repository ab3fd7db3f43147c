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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from optimizer.errors import RewriteValidationError, SparkRuntimeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import DataFile, StagedFile, TableAccess

CommitEngine = Literal["delta-spark", "delta-rs"]
COMMIT_CONF = "spark.deltaopt.commit"  # the session's SparkSettings.commit (set by optimizer.runtime)


@dataclass(frozen=True)
class RewriteRequest:
    """A layout rewrite ready to commit: planned at `read_version`, replacing `remove` with `add`."""

    read_version: int
    remove: Sequence[DataFile]
    add: Sequence[StagedFile]
    metadata: Mapping[str, Any] = field(default_factory=dict)  # deltaopt's run id, features, index reference
    z_order_by: tuple[str, ...] = ()  # recorded in Delta's operation parameters


class Committer(Protocol):
    """Commits a `RewriteRequest`; `before_commit(version)` runs right before the commit (tests race it)."""

    engine: CommitEngine
    table: TableAccess

    def commit_safety(self) -> str: ...

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int: ...

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None: ...


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
    from optimizer.table.deltaspark import delta_classes

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
