"""Delta's own engine in the session's JVM (py4j): its reader and its file writer for one table.

Where a table's features make a plain Parquet reader or writer wrong (`optimizer.table.protocol`),
deltaopt lets Delta do what Delta's own OPTIMIZE does (delta-io/delta ``OptimizeTableCommand.scala``,
``runOptimizeBinJob``) while it keeps deciding row order and file boundaries:

* **read** a set of files with ``DeltaLog.createDataFrame(snapshot, files)``: deletion vectors applied,
  logical column names, widened types; for a rewrite ``RowTracking.preserveRowTrackingColumns`` adds
  each row's row id and row commit version as the table's materialised columns (only while row
  tracking is enabled: supported but disabled, it adds nothing, and Delta's OPTIMIZE keeps no ids);
* **write** a frame with ``OptimisticTransaction.writeFiles(frame, options, isOptimize=true)``: physical
  names and field ids, materialised row-tracking columns, Delta's statistics keyed as Delta keys them.

Databricks Runtime ships the same classes under ``com.databricks.sql.transaction.tahoe``; both
prefixes are looked up. Members whose shape differs between Delta releases are called as the JVM's own
classes say (`optimizer.table.delta_adapter`, probed once per JVM when the engine is first built).
Spark Connect sessions have no JVM gateway and so no Delta engine here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from py4j.protocol import Py4JError, Py4JJavaError

from optimizer import errors
from optimizer.table.delta_adapter import DeltaShapes, shapes_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import DataFile

# where the Delta engine's classes live: open source Delta, then Databricks Runtime
PACKAGES = ("org.apache.spark.sql.delta", "com.databricks.sql.transaction.tahoe")


def delta_classes(spark: SparkSession | None) -> str | None:
    """The package holding ``DeltaLog`` in `spark`'s JVM, or None (no JVM gateway, or no Delta engine).
    Raises `SparkRuntimeError` when the JVM does not answer (a dead gateway must not read as "no Delta")."""
    jvm = getattr(spark, "_jvm", None) if spark is not None else None
    if jvm is None:
        return None
    for package in PACKAGES:
        try:
            jvm.java.lang.Class.forName(
                f"{package}.DeltaLog", False, jvm.java.lang.Thread.currentThread().getContextClassLoader()
            )
        except Py4JJavaError:  # the JVM answered: ClassNotFoundException (or a class that cannot link)
            continue
        except Py4JError as err:  # no answer: a dead JVM is not a JVM without Delta
            raise errors.SparkRuntimeError(f"cannot ask the session's JVM whether Delta is there: {err}") from err
        return package
    return None


def gateway(spark: SparkSession) -> Any:
    """The py4j view of the driver JVM (a classic session's; Spark Connect has none)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        raise errors.TableAccessError("this Spark session has no JVM gateway (Spark Connect): no Delta engine")
    return jvm


def jvm_package(jvm: Any, package: str) -> Any:
    node = jvm
    for part in package.split("."):
        node = getattr(node, part)
    return node


@contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """`settings` set in the session's SQL conf while the block runs, the previous values back after.
    Delta's writer passes only the codec and maxRecordsPerFile of its write options on to Parquet
    (`TransactionalWrite.writeFiles`), but builds the Parquet writer's Hadoop configuration from the
    session's SQL conf (`newHadoopConfWithOptions`): the row-group size and the codec level reach parquet-mr
    only this way. Another write in the same session meanwhile gets them too: row groups and a level,
    never rows."""
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, was in previous.items():
            spark.conf.set(key, was) if was is not None else spark.conf.unset(key)


def scala_seq(jvm: Any, items: Sequence[Any]) -> Any:
    values = jvm.java.util.ArrayList()
    for item in items:
        values.add(item)
    return jvm.org.apache.spark.api.python.PythonUtils.toSeq(values)


def scala_map(jvm: Any, items: Mapping[str, str | None]) -> Any:
    values = jvm.java.util.HashMap()
    for key, value in items.items():
        values.put(key, value)
    return jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(values)


def python_list(seq: Any) -> list[Any]:
    """A Scala collection's elements."""
    items = []
    it = seq.iterator()
    while it.hasNext():
        items.append(it.next())
    return items


def encoded_path(spark: SparkSession, path: str) -> str:
    """A decoded relative path as Delta writes it into the log (Hadoop ``Path.toUri``: ``%`` escaped)."""
    if "://" in path:
        return path
    return str(gateway(spark).org.apache.hadoop.fs.Path(path).toUri().toString())


def java_message(err: BaseException) -> str:
    java = getattr(err, "java_exception", None)
    if java is None:
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    return f"{java.getClass().getSimpleName()}: {java.getMessage()}".splitlines()[0]


def is_conflict(spark: SparkSession, err: BaseException) -> bool:
    """Whether `err` is Delta's "a concurrent commit conflicts" (a java ConcurrentModificationException)."""
    java = getattr(err, "java_exception", None)
    if java is None:
        return False
    jvm = gateway(spark)
    return bool(jvm.java.lang.Class.forName("java.util.ConcurrentModificationException").isInstance(java))


class DeltaEngine:
    """Delta's reader, writer and transactions for the table at `uri` (the URI Spark's file systems use)."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        package = delta_classes(spark)
        if package is None:
            raise errors.TableAccessError(f"the session has no Delta engine classes; cannot use Delta for {uri}")
        self.spark = spark
        self.uri = uri
        self.jvm = gateway(spark)
        self.package = package
        self.delta = jvm_package(self.jvm, package)
        self.none = self.jvm.scala.Option.empty()
        self.shapes: DeltaShapes = shapes_for(spark, package)  # an unknown Delta: refused here, before any work

    def log(self) -> Any:
        return self.delta.DeltaLog.forTable(self.spark._jsparkSession, self.uri)

    def snapshot(self, version: int) -> Any:
        return self.shapes.snapshot_at(self.log(), version, self.none)

    def latest(self) -> Any:
        return self.shapes.update(self.log(), self.none)

    def add_file(self, *fields: Any) -> Any:
        """Delta's ``AddFile`` from the 11 fields every supported release has (path, partitionValues, size,
        modificationTime, dataChange, stats, tags, deletionVector, baseRowId, defaultRowCommitVersion,
        clusteringProvider); fields a later release added are None."""
        return self.shapes.add_file(self.delta, self.none, fields)

    def optimize_operation(self, z_order_by: Sequence[str], cluster_by: Sequence[str] | None) -> Any:
        """Delta's ``DeltaOperations.Optimize`` for a manual OPTIMIZE without predicate (history's entry)."""
        clustered = self.jvm.scala.Some(scala_seq(self.jvm, list(cluster_by))) if cluster_by else self.none
        zorder = scala_seq(self.jvm, list(z_order_by))
        return self.shapes.optimize(self.delta, self.none, scala_seq(self.jvm, []), zorder, clustered)

    def add_files(self, snapshot: Any, files: Sequence[DataFile]) -> list[Any]:
        """The snapshot's own AddFile actions for `files` (matched on the log's path and the size), in
        order; raises `RewriteValidationError` naming those that are not active."""
        from pyspark.sql import functions as F

        wanted = {encoded_path(self.spark, unquote(f.path)) for f in files} | {f.path for f in files}
        rows = snapshot.allFiles().filter(F.col("path").isin(sorted(wanted))._jc).collectAsList()
        found = {str(a.path()): a for a in rows}
        actions, missing = [], []
        for f in files:
            action = found.get(f.path) or found.get(encoded_path(self.spark, unquote(f.path)))
            if action is None or int(action.size()) != f.size:
                missing.append(f.path)
            else:
                actions.append(action)
        if missing:
            raise errors.RewriteValidationError(
                f"files to remove are not active in {self.uri} at version {snapshot.version()}: {missing[:5]}"
            )
        return actions

    def read(self, snapshot: Any, actions: Sequence[Any], *, preserve_row_tracking: bool = False) -> DataFrame:
        """The rows of `actions` as Delta reads them (deletion vectors applied, logical names); with
        `preserve_row_tracking`, plus the table's materialised row id and row commit version columns."""
        from pyspark.sql import DataFrame

        jdf = self.log().createDataFrame(
            snapshot, scala_seq(self.jvm, list(actions)), False, self.jvm.scala.Some("Optimize")
        )
        if preserve_row_tracking:
            jdf = self.delta.RowTracking.preserveRowTrackingColumns(jdf, snapshot)
        return DataFrame(jdf, self.spark)

    def write(self, frame: DataFrame, snapshot: Any, options: Mapping[str, str] | None = None) -> list[Any]:
        """Write `frame` as the table's data files with Delta's writer (physical names, materialised row
        tracking, partition directories, Delta's statistics); the AddFile actions, nothing committed."""
        txn = self.log().startTransaction(self.none, self.jvm.scala.Some(snapshot))
        kept = {k: v for k, v in (options or {}).items() if k.lower() == "compression"}
        write_options = (
            self.jvm.scala.Some(
                self.delta.DeltaOptions(scala_map(self.jvm, kept), self.spark._jsparkSession.sessionState().conf())
            )
            if kept
            else self.none
        )
        carried = {k: v for k, v in (options or {}).items() if k.lower() != "compression"}
        with session_conf(self.spark, carried):
            written = txn.writeFiles(frame._jdf, write_options, True, scala_seq(self.jvm, []))
        actions = python_list(written)
        strange = [a for a in actions if a.getClass().getSimpleName() != "AddFile"]
        if strange:
            raise errors.RewriteValidationError(
                f"Delta's writer returned {strange[0].getClass().getSimpleName()} actions"
            )
        return actions

    @property
    def sql_name(self) -> str:
        """The table in Spark SQL: its catalog name, else ``delta.`<uri>``` (`optimizer.table.locations`)."""
        from optimizer.table.locations import sql_name

        return sql_name(self.uri)
