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

Files Delta's own writer wrote (column mapping, row tracking: `optimizer.table.delta_writer`) are
committed as the AddFile actions it returned, with deltaopt's statistics; with row tracking the commit
carries Delta's "row tracking preserved" tag, as OPTIMIZE's does. The removed files keep their deletion
vector descriptors (``removeWithTimestamp``).

Delta retries internally past commits that do not conflict (appends: a ``dataChange=false`` commit runs
at snapshot isolation) and throws a ``ConcurrentModificationException`` when one does. As Delta's
``commitAndRetry``, the rewrite then tries again on the latest version while every file it replaces is
still active with the same deletion vector (a bounded number of times); otherwise it gives up with
`CommitConflictError`. Once a commit attempt may have landed, the outcome is read from the log (the run
id in the commit's tag) and no file it might reference is deleted (`optimizer.table.rewrite`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer import errors
from optimizer.table.access import CUSTOM_METADATA_KEY, StagedFile
from optimizer.table.delta_engine import (
    DeltaEngine,
    delta_classes,
    encoded_path,
    gateway,
    is_conflict,
    java_message,
    scala_map,
    scala_seq,
)
from optimizer.table.rewrite import CommitEngine, RewriteRequest, check_rewrite, outcome_after_failure

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)

COMMIT_ATTEMPTS = 5  # Delta's commitAndRetry has no bound; deltaopt gives up after this many lost races


class DeltaSparkCommitter:
    """Commits rewrites of `table` through Delta's transaction in `spark`'s JVM."""

    engine: CommitEngine = "delta-spark"

    def __init__(self, spark: SparkSession, table: TableAccess) -> None:
        self.spark = spark
        self.table = table
        package = delta_classes(spark)
        if package is None:
            raise errors.TableAccessError("the session has no Delta engine classes; cannot commit through Delta")
        self._package = package

    def commit_safety(self) -> str:
        """How Delta's ``LogStore`` makes this table's commits atomic; raises `UnsafeStoreError` where it
        is only safe for writers of one Spark driver (deploy/OPERATIONS.md, "Commit safety per store")."""
        from optimizer.table.locations import single_writer

        return delta_commit_safety(self.table.uri, self._package, self.spark.conf.get, single_writer(self.table.uri))

    def rewrite(self, request: RewriteRequest, *, before_commit: Callable[[int], None] | None = None) -> int:
        """Commit `request` as one Delta OPTIMIZE; returns the version Delta committed.

        Before an attempt could commit, a failure deletes the staged files. After, the log decides: the
        version when the run's commit is there (a post-commit hook failed), else the files go; if the log
        cannot be read, they stay (`CommitOutcomeUnknownError`)."""
        check_rewrite(self.table, request.remove, request.add)
        try:  # nothing can have committed yet: what was staged goes on any failure
            engine = DeltaEngine(self.spark, self.table.spark_uri("").rstrip("/"))
            snapshot = engine.snapshot(request.read_version)
            read = engine.add_files(snapshot, request.remove)
        except Exception as err:
            self.table.discard(request.add)
            if isinstance(err, errors.DeltaOptError):
                raise
            raise errors.TableAccessError(
                f"cannot read {self.table.uri} at version {request.read_version}: {java_message(err)}"
            ) from err
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                return self._commit(engine, snapshot, read, request, before_commit)
            except Exception as err:
                version = outcome_after_failure(self.table, request.metadata.get("runId"), request.read_version, err)
                if version is not None:
                    return version
                if not is_conflict(self.spark, err) or attempt == COMMIT_ATTEMPTS:
                    self.table.discard(request.add)
                    raise self._refused(err, attempt) from err
                snapshot = engine.latest()
                read = self._still_there(engine, snapshot, request, read, err)
                log.info(
                    "rewrite of %s lost a race (%s); retrying at version %d",
                    self.table.uri,
                    java_message(err),
                    snapshot.version(),
                )
        raise AssertionError("unreachable")  # the loop returns or raises

    def _refused(self, err: Exception, attempts: int) -> errors.DeltaOptError:
        if isinstance(err, errors.DeltaOptError):
            return err
        if is_conflict(self.spark, err):
            return errors.CommitConflictError(
                f"Delta refused the rewrite of {self.table.uri} after {attempts} attempt(s): {java_message(err)}; "
                "nothing was committed"
            )
        return errors.TableAccessError(f"rewrite of {self.table.uri} through Delta failed: {java_message(err)}")

    def _still_there(
        self, engine: DeltaEngine, snapshot: Any, request: RewriteRequest, read: list[Any], err: Exception
    ) -> list[Any]:
        """The replaced files' actions at `snapshot` when each is still active with the deletion vector it
        was read with (Delta's own test before it retries an OPTIMIZE); else the rewrite gives up."""
        try:
            now = engine.add_files(snapshot, request.remove)
        except errors.RewriteValidationError as gone:
            self.table.discard(request.add)
            raise errors.CommitConflictError(
                f"a concurrent commit to {self.table.uri} removed files this rewrite replaces ({java_message(err)}; "
                f"{gone}); nothing was committed"
            ) from err
        if [_dv_id(a) for a in now] != [_dv_id(a) for a in read]:
            self.table.discard(request.add)
            raise errors.CommitConflictError(
                f"a concurrent commit to {self.table.uri} deleted rows from files this rewrite replaces "
                f"({java_message(err)}); nothing was committed"
            ) from err
        return now

    def set_properties(self, properties: Mapping[str, str], metadata: Mapping[str, Any] | None = None) -> None:
        """Set table properties through Delta (``ALTER TABLE ... SET TBLPROPERTIES``, rendered by sqlglot
        from the path and values, never spliced). `metadata` is not recorded: Delta's ALTER TABLE takes
        no user tags (its history names the properties)."""
        table = DeltaEngine(self.spark, self.table.spark_uri("").rstrip("/")).sql_name
        pairs = ", ".join(
            f"{exp.Literal.string(k).sql('spark')} = {exp.Literal.string(v).sql('spark')}"
            for k, v in properties.items()
        )
        try:
            self.spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({pairs})")
        except Exception as err:
            raise errors.TableAccessError(
                f"cannot set table properties of {self.table.uri} through Delta: {java_message(err)}"
            ) from err

    def _commit(
        self,
        engine: DeltaEngine,
        snapshot: Any,
        read: list[Any],
        request: RewriteRequest,
        before_commit: Callable[[int], None] | None,
    ) -> int:
        jvm, delta, none = engine.jvm, engine.delta, engine.none
        if _row_tracking(delta, snapshot) and any(f.action is None for f in request.add):
            raise errors.RewriteValidationError(
                f"{self.table.uri} tracks row ids and some files to add were not written by Delta's writer: "
                "their rows would get new ids; nothing was committed"
            )
        txn = engine.log().startTransaction(none, jvm.scala.Some(snapshot))
        txn.trackFilesRead(scala_seq(jvm, read))
        now = int(time.time() * 1000)
        actions = [self._add_file(engine, f) for f in request.add] + [a.removeWithTimestamp(now, False) for a in read]
        txn.registerSQLMetrics(self.spark._jsparkSession, self._metrics(request, read))
        cluster_by = jvm.scala.Some(scala_seq(jvm, list(request.cluster_by))) if request.cluster_by else none
        operation = getattr(delta, "DeltaOperations$Optimize")(
            scala_seq(jvm, []), scala_seq(jvm, list(request.z_order_by)), False, cluster_by, False
        )
        tags = {CUSTOM_METADATA_KEY: json.dumps(dict(request.metadata), default=str)} if request.metadata else {}
        # Delta's "rows keep their ids" commit tag where row tracking is on (package-private: via the object)
        jtags = getattr(getattr(delta, "RowTracking$"), "MODULE$").addPreservedRowTrackingTagIfNotSet(
            snapshot, scala_map(jvm, tags)
        )
        if before_commit is not None:
            before_commit(int(snapshot.version()))
        version = int(txn.commit(scala_seq(jvm, actions), operation, jtags))
        log.info("committed rewrite of %s through Delta as version %d", self.table.uri, version)
        return version

    def _add_file(self, engine: DeltaEngine, f: StagedFile) -> Any:
        """The AddFile of a staged file (``dataChange=false``, deltaopt's statistics): Delta's own action
        when Delta's writer wrote it (its encoded path, physical partition values and tags)."""
        jvm, none = engine.jvm, engine.none
        if f.action is not None:
            a = f.action
            return engine.delta.actions.AddFile(
                a.path(), a.partitionValues(), a.size(), a.modificationTime(), False, f.stats_json,
                a.tags(), None, none, none, a.clusteringProvider(),
            )  # fmt: skip
        return engine.delta.actions.AddFile(
            encoded_path(self.spark, f.path),
            scala_map(jvm, dict(f.partition_values)),
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

    def _metrics(self, request: RewriteRequest, read: list[Any]) -> Any:
        """OPTIMIZE's operation metrics (DeltaOperationMetrics.OPTIMIZE), as Delta's own OPTIMIZE sets them."""
        jvm = gateway(self.spark)
        sizes = sorted(f.size for f in request.add) or [0]

        def at(share: float) -> int:
            return sizes[min(len(sizes) - 1, int(share * len(sizes)))]

        vectors = [a.deletionVector() for a in read if a.deletionVector() is not None]
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
            "numDeletionVectorsRemoved": len(vectors),
            "numDeletionVectorRowsRemoved": sum(int(v.cardinality()) for v in vectors),
        }
        metrics = jvm.java.util.HashMap()
        context = self.spark._jsparkSession.sparkContext()
        for name, value in values.items():
            metric = jvm.org.apache.spark.sql.execution.metric.SQLMetrics.createMetric(context, name)
            metric.set(int(value))
            metrics.put(name, metric)
        return jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(metrics)


def _dv_id(action: Any) -> str | None:
    """A file's deletion vector identity (None: no deletion vector)."""
    vector = action.deletionVector()
    return None if vector is None else str(vector.uniqueId())


def _row_tracking(delta: Any, snapshot: Any) -> bool:
    return bool(delta.RowTracking.isEnabled(snapshot.protocol(), snapshot.metadata()))


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


def delta_commit_safety(
    uri: str, package: str, conf: Callable[[str, str | None], str | None], single_writer: bool = False
) -> str:
    """How Delta commits to `uri` are made atomic, from the session's ``spark.delta.logStore.*`` settings.

    Local disk is allowed: Delta serialises its own commits within a JVM, and other processes' writers
    (delta-rs) use an atomic rename-if-absent. S3 and Blob storage are refused unless commits are
    coordinated across drivers (``S3DynamoDBLogStore``, or Databricks' own commit service), or the
    configuration says deltaopt is the table's only writer while it runs (`single_writer`)."""
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
    if scheme in SINGLE_DRIVER and single_writer:
        return f"Delta's {SINGLE_DRIVER[scheme]}; configured: no other writer commits while deltaopt runs"
    if scheme in SINGLE_DRIVER:
        raise UnsafeStoreError(
            f"{uri}: Delta's {SINGLE_DRIVER[scheme]} is safe only when every writer commits through this "
            f"Spark driver; set spark.delta.logStore.{scheme}.impl={DYNAMO_STORE} with a lock table every writer "
            "uses, run the job on the writers' own cluster, or set single_writer: true on the table if no other "
            "writer commits while deltaopt runs; nothing was committed"
        )
    raise UnsafeStoreError(f"{uri}: deltaopt does not know Delta's log store for '{scheme}://'; nothing was committed")
