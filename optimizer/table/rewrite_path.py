"""How one table is rewritten: the one place that chooses, from what the session can do and what the
table is, who commits and who lays the files out.

Four paths (docs/ARCHITECTURE.md), each behind the same `Committer` interface (`optimizer.table.rewrite`):

* **delta-spark** + deltaopt's layout: Delta's own optimistic transaction in the session's JVM
  (`optimizer.table.deltaspark`): the embedded default with the cached jars, a cluster with Delta, the job
  on a Databricks cluster. The commit is an ``OPTIMIZE`` in Delta's history with Delta's conflict checker
  and the store's ``LogStore``;
* **delta-spark** + Delta's liquid ``OPTIMIZE``: a liquid-clustered table where Delta's engine is there
  to cluster it by its keys (a deltaopt Z-order would be undone by the next OPTIMIZE);
* **delta-sql**: a session with no JVM gateway (Spark Connect, serverless, shared compute) commits nothing
  itself: Delta's own ``OPTIMIZE`` (``ZORDER BY``, or by a liquid table's keys) rewrites and commits
  (`optimizer.table.delta_sql_commit`);
* **delta-rs**: the commit protocol of `optimizer.table.deltars_commit` from this process, only where the
  table's writers commit with delta-rs too, or where the operator chose it (``spark.commit: delta-rs``):
  beside Delta writers on Spark it would bypass their conflict checker and, on S3, their log store.

`choose_path` is pure (capabilities x features x liquid setting); `open_path` is the I/O edge (store
safety, the writers' history, Delta's call shapes probed before any file is written). The choice is made
on the planning snapshot and re-checked by every committer on the snapshot it commits (`RewritePath.recheck`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

from optimizer.config_types import LiquidMode
from optimizer.errors import CommitConflictError, SparkRuntimeError, UnsupportedTableError
from optimizer.table.delta_adapter import delta_version
from optimizer.table.delta_engine import PACKAGES, delta_classes
from optimizer.table.delta_sql_commit import DeltaSqlCommitter
from optimizer.table.deltars_commit import DeltaRsCommitter
from optimizer.table.deltaspark import DeltaSparkCommitter
from optimizer.table.protocol import TableFeatures, check_known, check_rewritable
from optimizer.table.rewrite import COMMIT_CONF, CommitEngine, Committer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import Snapshot, TableAccess
    from optimizer.table.deltars_commit import DeltaTableHandle

HISTORY_CHECKED = 100  # the newest commits whose writers decide whether delta-rs may commit


@dataclass(frozen=True)
class Capabilities:
    """What a session can do for a rewrite: whether there is one at all, whether it reaches a JVM, the
    Delta engine's package there (None: none), and the engine ``spark.commit`` forces."""

    session: bool
    jvm: bool
    delta: str | None
    forced: str = "auto"
    _jvm: Any = field(default=None, compare=False, repr=False)  # a probed session's py4j view (`release`)

    @classmethod
    def of_session(cls, spark: SparkSession | None) -> Capabilities:
        """Probed from `spark` (None: no session, delta-rs only)."""
        if spark is None:
            return cls(session=False, jvm=False, delta=None)
        gateway = getattr(spark, "_jvm", None)
        delta = delta_classes(spark) if gateway is not None else None
        return cls(session=True, jvm=gateway is not None, delta=delta, forced=configured_commit(spark), _jvm=gateway)

    @classmethod
    def connect(cls, forced: str = "auto") -> Capabilities:
        """A Spark Connect session: SQL only, no JVM gateway."""
        return cls(session=True, jvm=False, delta=None, forced=forced)

    @classmethod
    def databricks(cls, serverless: bool) -> Capabilities:
        """A Databricks job: classic compute runs deltaopt beside Databricks' Delta; serverless has no JVM."""
        if serverless:
            return cls.connect()
        return cls(session=True, jvm=True, delta=PACKAGES[-1])

    def engine(self) -> CommitEngine:
        """Who commits: Delta's transaction when its classes are in the session's JVM, Delta's SQL commands
        when there is no JVM (Spark Connect), delta-rs without a session, where the configuration forces it,
        or where the session has a JVM without Delta. Raises `SparkRuntimeError` when delta-spark is
        forced and there is no Delta engine in a JVM the session reaches."""
        return self.engine_and_why()[0]

    def engine_and_why(self) -> tuple[CommitEngine, str]:
        """`engine`, and why in the words of the setting or session that decides it (a refusal names it)."""
        if not self.session:
            return "delta-rs", "no Spark session"
        if self.forced == "delta-rs":
            return "delta-rs", "spark.commit is delta-rs"
        if not self.jvm:
            return "delta-sql", "Spark Connect: only SQL reaches the cluster"
        if self.delta is not None:
            return "delta-spark", f"Delta's engine ({self.delta}) is in the session's JVM"
        if self.forced == "delta-spark":
            raise SparkRuntimeError(
                "spark.commit is delta-spark but this session has no Delta engine in a JVM it can reach "
                "(Spark Connect, or a cluster without the io.delta jars)"
            )
        missing = "the session's JVM has no Delta engine (spark.delta: off, or no io.delta jars on its cluster)"
        return "delta-rs", missing

    @property
    def sql_only(self) -> bool:
        """Only SQL reaches the cluster: Delta's own OPTIMIZE is the job, and only plain-column Z features apply.
        The `engine` that is delta-sql, without its refusal of a forced delta-spark where Delta is missing
        (`sql_only` never raises: the job itself refuses, as it chooses its path)."""
        return self.session and not self.jvm and self.forced != "delta-rs"

    @property
    def delta_engine(self) -> bool:
        """Whether Delta's reader, writer and transaction are in reach of this process."""
        return self.delta is not None and self.jvm

    @property
    def delta_in_jvm(self) -> bool | None:
        """Whether Delta's classes load in the session's JVM; None without a JVM gateway (Spark Connect)."""
        return self.delta is not None if self.jvm else None

    def release(self) -> str | None:
        """Delta's release in the JVM as its jar states it (`delta_adapter.delta_version`); None: no Delta.
        Only a probed session's own capabilities have one (`of_session` keeps its py4j view)."""
        if self.delta is None or self._jvm is None:
            return None
        return delta_version(self._jvm, self.delta)


class LaidOutBy(StrEnum):
    """Who lays the files out: deltaopt's own layout (SOP + Z-order), or one of Delta's commands."""

    DELTAOPT = "deltaopt"
    DELTA_ZORDER = "delta-zorder"  # OPTIMIZE ... ZORDER BY the plain-column Z features
    DELTA_LIQUID = "delta-liquid"  # OPTIMIZE of a liquid table by its keys (`liquid` says whose)


@dataclass(frozen=True)
class RewritePath:
    """The choice for one rewrite, made on the snapshot it was planned on (`planned_at`)."""

    capabilities: Capabilities
    engine: CommitEngine
    laid_out_by: LaidOutBy
    delta_reader: bool  # rows read through Delta's reader (deletion vectors, column mapping, type widening)
    delta_writer: bool  # files written by Delta's writer (physical names, materialised row tracking)
    liquid: LiquidMode
    uri: str
    planned_at: int
    why: str

    @property
    def by_delta(self) -> bool:
        """Delta's own commands lay the table out and commit (no file is staged by deltaopt)."""
        return self.laid_out_by is not LaidOutBy.DELTAOPT

    @property
    def liquid_table(self) -> bool:
        return self.laid_out_by is LaidOutBy.DELTA_LIQUID

    def recheck(self, features: TableFeatures, version: int) -> None:
        """Raise `CommitConflictError` when the table at `version` (the one about to be committed to) would
        be rewritten another way than planned: it became liquid-clustered (or stopped being), gained a
        feature the path cannot honour. Only the path is compared; what else a retry depends on is
        `RetryBasis`'s. The planned version itself is the table the path was chosen on: nothing to re-check."""
        if version == self.planned_at:
            return
        try:
            now = choose_path(self.capabilities, features, liquid=self.liquid, uri=self.uri, version=version)
        except UnsupportedTableError as refused:
            raise self._moved(features, version, str(refused)) from refused
        if (now.engine, now.laid_out_by) != (self.engine, self.laid_out_by):
            raise self._moved(features, version, now.why)

    def _moved(self, features: TableFeatures, version: int, now: str) -> CommitConflictError:
        if features.clustered != self.liquid_table:
            became = "became liquid-clustered" if features.clustered else "is no longer liquid-clustered"
        else:
            became = "changed how it must be rewritten"
        return CommitConflictError(
            f"{self.uri}: the table {became} (version {version}) after this rewrite was decided at version "
            f"{self.planned_at} ({self.why}; now: {now}): the way it is rewritten changed since version "
            f"{self.planned_at}; nothing was committed"
        )


def choose_path(
    capabilities: Capabilities, features: TableFeatures, *, liquid: LiquidMode, uri: str = "table", version: int = 0
) -> RewritePath:
    """The path a rewrite of a table with `features` takes with `capabilities` (pure). Raises
    `SparkRuntimeError` (delta-spark forced without Delta) or `UnsupportedTableError` (a feature deltaopt
    does not know, a liquid table where Delta's engine is not there to cluster it, a feature only Delta
    honours without Delta), before any work."""
    engine, engine_why = capabilities.engine_and_why()
    laid_out_by, why = _laid_out_by(engine, features)
    if laid_out_by is LaidOutBy.DELTAOPT and features.clustered and not features.unknown():
        raise UnsupportedTableError(
            f"{uri} is liquid-clustered and only Delta's OPTIMIZE clusters it, but this session commits by "
            f"{engine} ({engine_why}); nothing was read or written"
        )
    if laid_out_by is LaidOutBy.DELTAOPT:
        check_rewritable(features, uri, delta_engine=engine == "delta-spark")
    return RewritePath(
        capabilities=capabilities,
        engine=engine,
        laid_out_by=laid_out_by,
        delta_reader=features.needs_delta_reader,
        delta_writer=features.needs_delta_writer,
        liquid=liquid,
        uri=uri,
        planned_at=version,
        why=why,
    )


def _laid_out_by(engine: CommitEngine, features: TableFeatures) -> tuple[LaidOutBy, str]:
    """Delta's own commands in a SQL-only session always; elsewhere for a liquid table (with no feature
    deltaopt does not know) where Delta's engine is there to cluster it; else deltaopt's layout."""
    if engine == "delta-sql" and features.clustered:
        return LaidOutBy.DELTA_LIQUID, "SQL only: Delta's OPTIMIZE clusters the liquid table by its keys"
    if engine == "delta-sql":
        return LaidOutBy.DELTA_ZORDER, "SQL only: Delta's OPTIMIZE ZORDER BY commits"
    if engine == "delta-spark" and features.clustered and not features.unknown():
        return LaidOutBy.DELTA_LIQUID, "liquid table: Delta's OPTIMIZE clusters it by its keys"
    return LaidOutBy.DELTAOPT, f"deltaopt's layout, committed by {engine}"


def reads_through_delta(features: TableFeatures, *, for_rewrite: bool) -> bool:
    """Whether rows are read by Delta's reader: features whose rows a plain Parquet reader gets wrong, and a
    rewrite of a table with row tracking enabled (each row then carries its row id and commit version)."""
    return features.needs_delta_reader or (for_rewrite and features.row_tracking)


def writes_through_delta(features: TableFeatures) -> bool:
    """Whether new files are written by Delta's writer (physical names, materialised row tracking)."""
    return features.needs_delta_writer


def check_service_rewritable(features: TableFeatures, uri: str) -> None:
    """What the service refuses before any estimate, wherever its job would run: a feature deltaopt does
    not know. A liquid table is not refused: the service prices and runs Delta's own clustering of it
    (`service.liquid`), never a layout of its own."""
    check_known(features, uri)


def keys_are_users(features: TableFeatures, liquid: LiquidMode) -> bool:
    """The liquid rule of a job decided before the table became liquid: its clustering keys are the
    user's unless ``liquid`` is ``set`` (the job may then make its plain-column Z features the keys)."""
    return features.clustered and liquid != "set"


def is_liquid(features: TableFeatures) -> bool:
    """Whether the table is liquid-clustered (its layout is Delta's OPTIMIZE by its keys)."""
    return features.clustered


@dataclass(frozen=True)
class OpenedPath:
    """A rewrite's path, its committer, and the snapshot the path was chosen on."""

    path: RewritePath
    committer: Committer
    snapshot: Snapshot


def open_path(
    spark: SparkSession | None, table: TableAccess, snapshot: Snapshot | None = None, *, liquid: LiquidMode = "keep"
) -> OpenedPath:
    """The path for `table` in `spark` and its committer. An unsafe store is refused before anything is
    read (`commit_safety`), delta-rs beside Delta writers on Spark unless the configuration chose it, and
    Delta's call shapes are probed (building the Delta committer) before any file is written; then the
    path is chosen on `snapshot` (default: the latest)."""
    capabilities = Capabilities.of_session(spark)
    engine = capabilities.engine()
    committer = _engine_committer(spark, table, engine) if engine != "delta-sql" else None
    if committer is not None:
        committer.commit_safety()
    latest = None  # the writers' check reads the latest snapshot; read once where the path is chosen on it
    if snapshot is None:
        snapshot = latest = table.snapshot()
    if engine == "delta-rs" and capabilities.forced != "delta-rs":
        check_delta_rs_allowed(table, latest)
    path = choose_path(capabilities, snapshot.features, liquid=liquid, uri=table.uri, version=snapshot.version)
    if path.by_delta or committer is None:
        assert spark is not None  # a session is what Delta's commands run in
        committer = DeltaSqlCommitter(spark, table, path, path.engine)
    else:
        committer.path = path
    return OpenedPath(path, committer, snapshot)


def _engine_committer(spark: SparkSession | None, table: TableAccess, engine: CommitEngine) -> Committer:
    """The committer of deltaopt's own layout for `engine` (Delta's shapes probed when it is Delta's)."""
    if engine == "delta-spark":
        assert spark is not None  # `Capabilities.engine` only picks delta-spark with a session
        return DeltaSparkCommitter(spark, table)
    return DeltaRsCommitter(cast("DeltaTableHandle", table))


def commit_engine(spark: SparkSession | None) -> CommitEngine:
    """Who commits in `spark` (`Capabilities.engine` of the session)."""
    return Capabilities.of_session(spark).engine()


def committer_for(table: TableAccess, spark: SparkSession | None) -> Committer:
    """The committer of deltaopt's own layout of `table` in `spark` (`open_path` on the latest snapshot, so
    with its path attached and re-checked at commit): refused where `open_path` refuses (a feature the
    layout cannot honour) and where Delta's commands lay the table out (`open_path` gives their committer).
    A seam for tests and the race benchmark; `optimize` calls `open_path` itself."""
    opened = open_path(spark, table)
    if opened.path.by_delta:
        raise SparkRuntimeError(f"{table.uri}: {opened.path.why} (clustering.by_delta), not deltaopt's layout")
    return opened.committer


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


def _spark_engine(engine: str) -> bool:
    return engine.startswith(("Apache-Spark", "Databricks"))


def check_commit_kept(spark: SparkSession, commit: str, where: str) -> None:
    """Refuse a session that does not keep ``spark.commit: delta-rs``: the path of every rewrite is chosen
    from the session's own conf (`Capabilities.of_session`), and a Spark Connect server that drops the key
    (Databricks' serverless and shared compute keep only the settings they list) would leave "auto"
    choosing Delta's SQL over the operator's delta-rs without a word. (``delta-spark`` on Connect is
    Delta's SQL either way, and a classic session keeps every key.)"""
    kept = configured_commit(spark)
    if commit == "delta-rs" and kept != commit:
        raise SparkRuntimeError(
            f"spark.commit is {commit} but the session at {where} does not keep it ({COMMIT_CONF} reads "
            f"{kept}): the commit engine would not be the one configured; set spark.commit: auto, or use a "
            "session that keeps spark.deltaopt.* settings"
        )


def configured_commit(spark: SparkSession) -> str:
    """The session's ``spark.commit`` as `optimizer.runtime` set it in its conf; "auto" where it holds none."""
    try:
        return str(spark.conf.get(COMMIT_CONF, "auto") or "auto")
    except Exception:  # a stopped session or a Connect server refusing the key: the default
        return "auto"
