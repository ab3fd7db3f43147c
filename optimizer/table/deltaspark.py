"""Commit a layout rewrite through Delta's own optimistic transaction, in the session's JVM (py4j).

This does what Delta's ``OptimizeExecutor`` does after it has written its files (delta-io/delta,
``OptimizeTableCommand.scala``, ``runOptimizeBatch``), with deltaopt's files instead of its bins:

1. a transaction on the snapshot the rewrite was planned on (``startTransaction(None, Some(snapshot))``),
   so Delta's conflict checker compares every later commit with what this rewrite read;
2. ``trackFilesRead`` of the replaced files (the snapshot's own ``AddFile`` actions) and ``RemoveFile``
   actions made from them with ``dataChange=false``, as OPTIMIZE makes them;
3. one ``AddFile`` per written file (``dataChange=false``, deltaopt's statistics JSON: Delta's keys plus
   the extended statistics, which Delta's readers ignore);
4. ``commit(actions, DeltaOperations.Optimize(...), tags)`` with OPTIMIZE's operation metrics registered
   and deltaopt's commit metadata as the commitInfo tag ``deltaopt``.

Delta retries internally past commits that do not conflict (appends: a ``dataChange=false`` commit runs
at snapshot isolation) and throws a ``ConcurrentModificationException`` when one removed a file this
rewrite read; the staged files are then deleted and `CommitConflictError` raised. Databricks Runtime
ships the same classes under ``com.databricks.sql.transaction.tahoe``; both prefixes are looked up.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer import errors
from optimizer.table.access import CUSTOM_METADATA_KEY, DataFile, StagedFile
from optimizer.table.committer import CommitEngine, RewriteRequest, check_rewrite

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)

# where the Delta engine's classes live: open source Delta, then Databricks Runtime
PACKAGES = ("org.apache.spark.sql.delta", "com.databricks.sql.transaction.tahoe")


def delta_classes(spark: SparkSession) -> str | None:
    """The package holding ``DeltaLog`` in `spark`'s JVM, or None (no JVM gateway, or no Delta engine)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return None
    for package in PACKAGES:
        try:
            jvm.java.lang.Class.forName(
                f"{package}.DeltaLog", False, jvm.java.lang.Thread.currentThread().getContextClassLoader()
            )
        except Exception:  # ClassNotFoundException arrives as a Py4JJavaError
            continue
        return package
    return None


def _package(spark: SparkSession) -> str:
    found = delta_classes(spark)
    if found is None:
        raise errors.TableAccessError("the session has no Delta engine classes; cannot commit through Delta")
    return found


class DeltaSparkCommitter:
    """Commits rewrites of `table` through Delta's transaction in `spark`'s JVM."""

    engine: CommitEngine = "delta-spark"

    def __init__(self, spark: SparkSession, table: TableAccess) -> None:
        self.spark = spark
        self.table = table
        self._package = _package(spark)

    def commit_safety(self) -> str:
        """How Delta's ``LogStore`` makes this table's commits atomic; raises `UnsafeStoreError` where it
        is only safe for writers of one Spark driver (deploy/OPERATIONS.md, "Commit safety per store")."""
        return delta_commit_safety(self.table.uri, self._package, self.spark.conf.get)

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int:
        """Commit `request` as one Delta OPTIMIZE; returns the version Delta committed."""
        check_rewrite(self.table, request.remove, request.add)
        try:
            version = self._commit(request, before_commit)
        except errors.DeltaOptError:
            self.table.discard(request.add)
            raise
        except Exception as err:
            self.table.discard(request.add)
            if _is_conflict(self.spark, err):
                raise errors.CommitConflictError(
                    f"Delta refused the rewrite of {self.table.uri}: {_java_message(err)}; nothing was committed"
                ) from err
            message = _java_message(err)
            raise errors.TableAccessError(f"rewrite of {self.table.uri} through Delta failed: {message}") from err
        return version

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None:
        """Set table properties through Delta (``ALTER TABLE ... SET TBLPROPERTIES``, rendered by sqlglot
        from the path and values, never spliced). `metadata` is not recorded: Delta's ALTER TABLE takes
        no user tags (its history names the properties)."""
        table = exp.Table(this=exp.to_identifier(self.table.spark_uri("").rstrip("/"), quoted=True), db="delta")
        pairs = ", ".join(
            f"{exp.Literal.string(k).sql('spark')} = {exp.Literal.string(v).sql('spark')}"
            for k, v in properties.items()
        )
        try:
            self.spark.sql(f"ALTER TABLE {table.sql('spark')} SET TBLPROPERTIES ({pairs})")
        except Exception as err:
            raise errors.TableAccessError(
                f"cannot set table properties of {self.table.uri} through Delta: {_java_message(err)}"
            ) from err

    def _commit(self, request: RewriteRequest, before_commit: Callable[[int], None] | None) -> int:
        jvm = _gateway(self.spark)
        delta = _jvm_package(jvm, self._package)
        none = jvm.scala.Option.empty()
        delta_log = delta.DeltaLog.forTable(self.spark._jsparkSession, self.table.spark_uri("").rstrip("/"))
        snapshot = delta_log.getSnapshotAt(request.read_version, none, none)
        self._check_writable(snapshot)
        txn = delta_log.startTransaction(none, jvm.scala.Some(snapshot))
        read = self._read_files(snapshot, request.remove, request.read_version)
        txn.trackFilesRead(_seq(jvm, read))
        now = int(time.time() * 1000)
        actions = [self._add_file(delta, f) for f in request.add] + [a.removeWithTimestamp(now, False) for a in read]
        txn.registerSQLMetrics(self.spark._jsparkSession, self._metrics(request))
        operation = getattr(delta, "DeltaOperations$Optimize")(
            _seq(jvm, []), _seq(jvm, list(request.z_order_by)), False, none, False
        )
        tags = {CUSTOM_METADATA_KEY: json.dumps(dict(request.metadata), default=str)} if request.metadata else {}
        if before_commit is not None:
            before_commit(request.read_version)
        version = int(txn.commit(_seq(jvm, actions), operation, _map(jvm, tags)))
        log.info("committed rewrite of %s through Delta as version %d", self.table.uri, version)
        return version

    def _check_writable(self, snapshot: Any) -> None:
        """Refuse tables whose files carry identity deltaopt's AddFiles would not keep: with row tracking,
        Delta's OPTIMIZE carries each file's ``baseRowId`` over; a rewrite from Spark-written Parquet
        cannot, so row ids that readers (CDC, MERGE) rely on would change."""
        protocol = json.loads(str(snapshot.protocol().json()))
        features = set(protocol.get("protocol", protocol).get("writerFeatures") or [])
        if "rowTracking" in features:
            raise errors.UnsupportedTableError(
                f"{self.table.uri} uses row tracking; a deltaopt rewrite would assign new row ids, so it "
                "leaves this table alone"
            )

    def _read_files(self, snapshot: Any, remove: Sequence[DataFile], read_version: int) -> list[Any]:
        """The snapshot's own AddFile actions for `remove` (matched on the log's encoded path and size)."""
        from pyspark.sql import functions as F

        wanted = {_encoded(self.spark, f.path): f for f in remove} | {f.path: f for f in remove}
        rows = snapshot.allFiles().filter(F.col("path").isin(list(wanted))._jc).collectAsList()
        found = {str(a.path()): a for a in rows}
        read = []
        missing = []
        for f in remove:
            action = found.get(_encoded(self.spark, f.path)) or found.get(f.path)
            if action is None or int(action.size()) != f.size:
                missing.append(f.path)
            else:
                read.append(action)
        if missing:
            raise errors.RewriteValidationError(
                f"files to remove are not active in {self.table.uri} at version {read_version}: {missing[:5]}"
            )
        return read

    def _add_file(self, delta: Any, f: StagedFile) -> Any:
        jvm = _gateway(self.spark)
        none = jvm.scala.Option.empty()
        return delta.actions.AddFile(
            _encoded(self.spark, f.path),
            _map(jvm, dict(f.partition_values)),
            f.size,
            int(time.time() * 1000),
            False,  # dataChange
            f.stats_json,
            None,  # tags
            None,  # deletion vector
            none,  # baseRowId
            none,  # defaultRowCommitVersion
            none,  # clusteringProvider
        )

    def _metrics(self, request: RewriteRequest) -> Any:
        """OPTIMIZE's operation metrics (DeltaOperationMetrics.OPTIMIZE), as Delta's own OPTIMIZE sets them."""
        jvm = _gateway(self.spark)
        sizes = sorted(f.size for f in request.add) or [0]

        def at(share: float) -> int:
            return sizes[min(len(sizes) - 1, int(share * len(sizes)))]

        values = {
            "numAddedFiles": len(request.add),
            "numRemovedFiles": len(request.remove),
            "numAddedBytes": sum(f.size for f in request.add),
            "numRemovedBytes": sum(f.size for f in request.remove),
            "minFileSize": sizes[0],
            "p25FileSize": at(0.25),
            "p50FileSize": at(0.5),
            "p75FileSize": at(0.75),
            "maxFileSize": sizes[-1],
            "numDeletionVectorsRemoved": 0,
        }
        metrics = jvm.java.util.HashMap()
        context = self.spark._jsparkSession.sparkContext()
        for name, value in values.items():
            metric = jvm.org.apache.spark.sql.execution.metric.SQLMetrics.createMetric(context, name)
            metric.set(int(value))
            metrics.put(name, metric)
        return jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(metrics)


# Delta's LogStore per scheme (delta-io/delta storage/): which make "write the next commit unless it
# exists" atomic across drivers, and which only within one JVM
MULTI_DRIVER = {
    "hdfs": "HDFSLogStore: atomic rename on HDFS",
    "viewfs": "HDFSLogStore: atomic rename on HDFS",
    "abfs": "AzureLogStore on ADLS Gen2: atomic rename",
    "abfss": "AzureLogStore on ADLS Gen2: atomic rename",
    "gs": "GCSLogStore: GCS preconditions",
}
SINGLE_DRIVER = {
    "": "HDFSLogStore on the local file system: exists-then-rename, serialised within one JVM",
    "file": "HDFSLogStore on the local file system: exists-then-rename, serialised within one JVM",
    "wasb": "AzureLogStore on Blob storage: single driver",
    "wasbs": "AzureLogStore on Blob storage: single driver",
    "s3": "S3SingleDriverLogStore: single driver",
    "s3a": "S3SingleDriverLogStore: single driver",
    "s3n": "S3SingleDriverLogStore: single driver",
}
DYNAMO_STORE = "io.delta.storage.S3DynamoDBLogStore"


def delta_commit_safety(uri: str, package: str, conf: Callable[[str, str | None], str | None]) -> str:
    """How Delta commits to `uri` are made atomic, from the session's ``spark.delta.logStore.*`` settings.

    Local disk is allowed: Delta serialises its own commits within a JVM, and other processes' writers
    (delta-rs) use an atomic rename-if-absent. S3 and Blob storage are refused unless commits are
    coordinated across drivers (``S3DynamoDBLogStore``, or Databricks' own commit service)."""
    from urllib.parse import urlparse

    from optimizer.table.commit_safety import UnsafeStoreError

    scheme = urlparse(uri).scheme.lower() if "://" in uri else ""
    if package.startswith("com.databricks"):
        return "Databricks Runtime's Delta commit coordination"
    store = conf(f"spark.delta.logStore.{scheme}.impl", None) or conf("spark.delta.logStore.class", None)
    if store and store.endswith("S3DynamoDBLogStore"):
        table = conf("spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName", None) or "delta_log"
        return f"Delta's S3DynamoDBLogStore with lock table '{table}' (every writer must use it)"
    if scheme in MULTI_DRIVER:
        return f"Delta's {MULTI_DRIVER[scheme]}"
    if scheme in ("", "file"):
        return f"Delta's {SINGLE_DRIVER[scheme]}; other processes' writers rename atomically"
    if scheme in SINGLE_DRIVER:
        raise UnsafeStoreError(
            f"{uri}: Delta's {SINGLE_DRIVER[scheme]} is safe only when every writer commits through this "
            f"Spark driver; set spark.delta.logStore.{scheme}.impl={DYNAMO_STORE} with a lock table every writer "
            "uses, or run the job on the writers' own cluster; nothing was committed"
        )
    raise UnsafeStoreError(f"{uri}: deltaopt does not know Delta's log store for '{scheme}://'; nothing was committed")


def _gateway(spark: SparkSession) -> Any:
    """The py4j view of the driver JVM (a classic session's; Spark Connect has none)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        raise errors.TableAccessError("this Spark session has no JVM gateway (Spark Connect): no Delta commit")
    return jvm


def _jvm_package(jvm: Any, package: str) -> Any:
    node = jvm
    for part in package.split("."):
        node = getattr(node, part)
    return node


def _seq(jvm: Any, items: Sequence[Any]) -> Any:
    values = jvm.java.util.ArrayList()
    for item in items:
        values.add(item)
    return jvm.org.apache.spark.api.python.PythonUtils.toSeq(values)


def _map(jvm: Any, items: Mapping[str, str | None]) -> Any:
    values = jvm.java.util.HashMap()
    for key, value in items.items():
        values.put(key, value)
    return jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(values)


def _encoded(spark: SparkSession, path: str) -> str:
    """A relative path as Delta writes it into the log (Hadoop ``Path.toUri``: ``%`` escaped again)."""
    if "://" in path:
        return path
    return str(_gateway(spark).org.apache.hadoop.fs.Path(path).toUri().toString())


def _is_conflict(spark: SparkSession, err: Exception) -> bool:
    """Whether `err` is Delta's "a concurrent commit conflicts" (a java ConcurrentModificationException)."""
    java = getattr(err, "java_exception", None)
    if java is None:
        return False
    jvm = _gateway(spark)
    return bool(jvm.java.lang.Class.forName("java.util.ConcurrentModificationException").isInstance(java))


def _java_message(err: Exception) -> str:
    java = getattr(err, "java_exception", None)
    if java is None:
        return str(err)
    return f"{java.getClass().getSimpleName()}: {java.getMessage()}".splitlines()[0]
