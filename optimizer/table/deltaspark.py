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
still active with the same deletion vector and the table is still the one it was planned on (protocol,
schema, partitioning, properties that change how files are read or written, liquid clustering:
`optimizer.table.rewrite.RetryBasis`), a bounded number of times; otherwise it gives up with
`CommitConflictError`. Once a commit attempt may have landed, the outcome is read from the log (the run
id in the commit's tag) and no file it might reference is deleted (`optimizer.table.rewrite`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer import errors
from optimizer.table.access import CUSTOM_METADATA_KEY, StagedFile
from optimizer.table.delta_adapter import shapes_for
from optimizer.table.delta_engine import (
    DeltaEngine,
    delta_classes,
    encoded_path,
    gateway,
    is_conflict,
    java_message,
    python_list,
    scala_map,
    scala_seq,
)
from optimizer.table.log_store import delta_commit_safety, spark_commit_safety  # noqa: F401 - re-exported
from optimizer.table.protocol import TableFeatures, table_features
from optimizer.table.rewrite import (
    CLUSTERING_DOMAIN,
    CommitEngine,
    DeltaOptimize,
    PathCheck,
    RetryBasis,
    RewriteRequest,
    check_retry_basis,
    check_rewrite,
    not_deltas_command,
    outcome_after_failure,
    retry_basis,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import TableAccess
    from optimizer.table.delta_sql import DeltaCommitted

log = logging.getLogger(__name__)

COMMIT_ATTEMPTS = 5  # Delta's commitAndRetry has no bound; deltaopt gives up after this many lost races


class DeltaSparkCommitter:
    """Commits rewrites of `table` through Delta's transaction in `spark`'s JVM."""

    engine: CommitEngine = "delta-spark"

    def __init__(self, spark: SparkSession, table: TableAccess, path: PathCheck | None = None) -> None:
        self.spark = spark
        self.table = table
        self.path = path  # re-checked on the latest version before each commit (`_check_latest`)
        package = delta_classes(spark)
        if package is None:
            raise errors.TableAccessError("the session has no Delta engine classes; cannot commit through Delta")
        self._package = package
        shapes_for(spark, package)  # Delta's call shapes probed now, before any file is written

    def commit_safety(self) -> str:
        """How the ``LogStore`` Delta commits this table's log through makes commits atomic (the one Delta
        resolves for the table's Spark URI, `optimizer.table.log_store`); raises `UnsafeStoreError` where
        it is only safe for writers of one Spark driver (deploy/OPERATIONS.md, "Commit safety per store")."""
        from optimizer.table.locations import single_writer

        return spark_commit_safety(self.spark, self.table, self._package, single_writer(self.table.uri))

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
        planned = snapshot  # every retry is checked against the version the rewrite was planned on
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
                retry = self._retry_at_latest(engine, planned, request, read, err)
                if isinstance(retry, int):
                    return retry  # the run's commit turned up in the log while re-reading
                snapshot, read = retry
                log.info(
                    "rewrite of %s lost a race (%s); retrying at version %d",
                    self.table.uri,
                    java_message(err),
                    snapshot.version(),
                )
        raise AssertionError("unreachable")  # the loop returns or raises

    def optimize(self, request: DeltaOptimize) -> DeltaCommitted:
        raise not_deltas_command(self.engine)

    def _refused(self, err: Exception, attempts: int) -> errors.DeltaOptError:
        if isinstance(err, errors.DeltaOptError):
            return err
        if is_conflict(self.spark, err):
            return errors.CommitConflictError(
                f"Delta refused the rewrite of {self.table.uri} after {attempts} attempt(s): {java_message(err)}; "
                "nothing was committed"
            )
        return errors.TableAccessError(f"rewrite of {self.table.uri} through Delta failed: {java_message(err)}")

    def _retry_at_latest(
        self, engine: DeltaEngine, planned: Any, request: RewriteRequest, read: list[Any], err: Exception
    ) -> tuple[Any, list[Any]] | int:
        """The latest snapshot and the replaced files' actions in it, for the next attempt (`_still_there`).
        Reading them can fail (a py4j or storage error): the log then settles the staged files, as after a
        failed commit. Returns the version if the run's commit is there after all; deletes the files
        and raises `TableAccessError` naming the table when the log shows it did not land; keeps them
        (`CommitOutcomeUnknownError`) when the log cannot say."""
        try:
            snapshot = engine.latest()
            return snapshot, self._still_there(engine, planned, snapshot, request, read=read, err=err)
        except errors.DeltaOptError:
            raise  # a refusal of `_still_there`: it deleted the files after the log showed nothing landed
        except Exception as failure:
            version = outcome_after_failure(self.table, request.metadata.get("runId"), request.read_version, failure)
            if version is not None:
                return version
            self.table.discard(request.add)
            raise errors.TableAccessError(
                f"cannot re-read {self.table.uri} to retry the rewrite after a lost race ({java_message(err)}): "
                f"{java_message(failure)}; nothing was committed"
            ) from failure

    def _still_there(
        self,
        engine: DeltaEngine,
        planned: Any,
        snapshot: Any,
        request: RewriteRequest,
        *,
        read: list[Any],
        err: Exception,
    ) -> list[Any]:
        """The replaced files' actions at `snapshot` when each is still active with the deletion vector it
        was read with (Delta's own test before it retries an OPTIMIZE) and the table is what the rewrite
        was `planned` on (`check_retry_basis`: Delta's checker judged only the attempt it refused, and the
        next one starts on `snapshot`, where e.g. a concurrent CLUSTER BY is no conflict any more); else
        the rewrite gives up."""
        check_retry_basis(
            self.table,
            (int(planned.version()), _retry_basis(planned)),
            (int(snapshot.version()), _retry_basis(snapshot)),
            request.add,
        )
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
        operation = engine.optimize_operation(request.z_order_by, request.cluster_by)
        tags = {CUSTOM_METADATA_KEY: json.dumps(dict(request.metadata), default=str)} if request.metadata else {}
        # Delta's "rows keep their ids" commit tag where row tracking is on (package-private: via the object)
        jtags = getattr(getattr(delta, "RowTracking$"), "MODULE$").addPreservedRowTrackingTagIfNotSet(
            snapshot, scala_map(jvm, tags)
        )
        if before_commit is not None:
            before_commit(int(snapshot.version()))
        self._check_latest(engine, snapshot, request)
        version = int(txn.commit(scala_seq(jvm, actions), operation, jtags))
        log.info("committed rewrite of %s through Delta as version %d", self.table.uri, version)
        return version

    def _check_latest(self, engine: DeltaEngine, snapshot: Any, request: RewriteRequest) -> None:
        """Give up when the table's liquid clustering changed since `snapshot` (`check_retry_basis`), before
        Delta's checker judges the commit: Delta 4.4's lets an OPTIMIZE commit over a concurrent ALTER TABLE
        ... CLUSTER BY (4.0's refuses it), which would put a Z-order on a table that is liquid by then. Other
        concurrent changes stay Delta's to judge (row tracking enabled meanwhile is adopted, as by Delta's own
        OPTIMIZE); a CLUSTER BY landing between this read and Delta's commit is left to Delta's checker too.
        Then the rewrite path (`path`) is re-checked on the latest version, also when that is the version
        read (the path may have been chosen on an earlier one, before a property change of the run): a table
        that became liquid is not given deltaopt's layout."""
        latest = engine.latest()
        if int(latest.version()) != int(snapshot.version()):
            planned = _retry_basis(snapshot)
            now = _retry_basis(latest)
            if planned.clustering != now.clustering:  # only the clustering compared: the rest as it is now
                check_retry_basis(
                    self.table,
                    (int(snapshot.version()), replace(now, clustering=planned.clustering)),
                    (int(latest.version()), now),
                    request.add,
                )
        if self.path is not None and int(latest.version()) != self.path.planned_at:
            self.path.recheck(_features(latest), int(latest.version()))

    def _add_file(self, engine: DeltaEngine, f: StagedFile) -> Any:
        """The AddFile of a staged file (``dataChange=false``, deltaopt's statistics): Delta's own action
        when Delta's writer wrote it (its encoded path, physical partition values and tags)."""
        jvm, none = engine.jvm, engine.none
        if f.action is not None:
            a = f.action
            return engine.add_file(
                a.path(), a.partitionValues(), a.size(), a.modificationTime(), False, f.stats_json,
                a.tags(), None, none, none, a.clusteringProvider(),
            )  # fmt: skip
        return engine.add_file(
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


def _retry_basis(snapshot: Any) -> RetryBasis:
    """The `RetryBasis` of one of Delta's snapshots: its protocol and metadata as Delta serialises them,
    and its liquid clustering domain's configuration."""
    protocol = json.loads(snapshot.protocol().json())["protocol"]
    metadata = json.loads(snapshot.metadata().json())["metaData"]
    domains = [d for d in python_list(snapshot.domainMetadata()) if str(d.domain()) == CLUSTERING_DOMAIN]
    clustering = next((str(d.configuration()) for d in domains if not d.removed()), None)
    return retry_basis(
        (
            protocol["minReaderVersion"],
            protocol["minWriterVersion"],
            protocol.get("readerFeatures"),
            protocol.get("writerFeatures"),
        ),
        schema_json=metadata["schemaString"],
        partition_columns=metadata.get("partitionColumns") or (),
        configuration=metadata.get("configuration") or {},
        clustering=clustering,
    )


def _features(snapshot: Any) -> TableFeatures:
    """The `TableFeatures` of one of Delta's snapshots (its protocol and metadata as Delta serialises them)."""
    protocol = json.loads(snapshot.protocol().json())["protocol"]
    metadata = json.loads(snapshot.metadata().json())["metaData"]
    return table_features(
        protocol["minReaderVersion"],
        protocol["minWriterVersion"],
        protocol.get("readerFeatures"),
        protocol.get("writerFeatures"),
        configuration=metadata.get("configuration") or {},
        schema_json=metadata["schemaString"],
    )


def _dv_id(action: Any) -> str | None:
    """A file's deletion vector identity (None: no deletion vector)."""
    vector = action.deletionVector()
    return None if vector is None else str(vector.uniqueId())


def _row_tracking(delta: Any, snapshot: Any) -> bool:
    return bool(delta.RowTracking.isEnabled(snapshot.protocol(), snapshot.metadata()))
