"""Layouts Delta's own commands apply: deltaopt chooses the columns, Delta rewrites and commits.

Two cases (docs/CLUSTERS.md, docs/TABLE-FEATURES.md):

* **liquid-clustered tables**, wherever deltaopt runs: Delta's ``OPTIMIZE`` re-clusters them by their
  keys and refuses ``ZORDER BY``, so a deltaopt Z-order would be undone by the next OPTIMIZE. The
  plain-column Z features become the table's keys (``ALTER TABLE ... CLUSTER BY``, at most `MAX_KEYS`,
  only when they differ) and Delta's ``OPTIMIZE`` clusters incrementally;
* **SQL-only sessions** (Spark Connect, serverless, shared compute): no JVM gateway, so deltaopt cannot
  write and commit files itself; ``OPTIMIZE ... ZORDER BY`` with the plain-column Z features, in the
  order deltaopt chose, is the layout the cluster's Delta can apply.

What Delta's commands cannot express (SOP predicates, expressions, joined attributes) is named in the
result and not applied; the service prices only what is applied (`delta_expressible`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from optimizer.clustering.result import OptimizeResult
from optimizer.errors import UnsupportedTableError
from optimizer.features import FeatureSet
from optimizer.skipping.extended import ExtendedStats, unclustered_files, write_index
from optimizer.table.delta_sql import DeltaSql

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession

    from optimizer.clustering.layout import Progress
    from optimizer.table.access import DataFile, Snapshot, TableAccess
    from optimizer.table.rewrite import CommitEngine

log = logging.getLogger(__name__)

MAX_KEYS = 4  # Delta's limit on clustering columns


def clustering_keys(features: FeatureSet, limit: int | None = MAX_KEYS) -> tuple[list[str], list[str]]:
    """(the columns Delta can lay out by: plain-column Z features, in order, at most `limit`; what it
    cannot express: every other feature)."""
    plain = list(dict.fromkeys(f.column for f in features.z if f.is_plain_column))
    keys = plain[:limit] if limit is not None else plain
    left = [f.expression for f in features.z if f.column not in keys or not f.is_plain_column]
    left += [f"SOP {f.predicate}" for f in features.sop]
    left += [f"joined {j.dimension}.{j.attribute}" for j in features.joined]
    return keys, left


def delta_expressible(features: FeatureSet, clustered: bool = False) -> tuple[FeatureSet, list[str]]:
    """(the part of `features` Delta's commands apply: what a layout by them should be priced as; what
    they cannot express)."""
    keys, left = clustering_keys(features, MAX_KEYS if clustered else None)
    kept = tuple(f for f in features.z if f.is_plain_column and f.column in keys)
    return replace(features, z=kept, sop=(), joined=()), left


def apply_with_delta(
    spark: SparkSession, table: TableAccess, features: FeatureSet, tag: Mapping[str, Any], *, clustered: bool
) -> tuple[int | None, dict[str, Any]]:
    """Lay `table` out by `features` with Delta's own commands: clustering keys + OPTIMIZE on a liquid
    table (`clustered`), else OPTIMIZE ZORDER BY. Returns the version committed (None: nothing to
    rewrite) and what was done. Raises `UnsupportedTableError` before any change when no feature is a
    plain column of a liquid table."""
    keys, left = clustering_keys(features, MAX_KEYS if clustered else None)
    delta = DeltaSql(spark, table.spark_uri("").rstrip("/"))
    done: dict[str, Any] = {"keys": keys, "not_applied": left, "clustered": clustered}
    if clustered:
        if not keys:
            raise UnsupportedTableError(
                f"{table.uri} is liquid-clustered and none of the features ({', '.join(left) or 'none'}) is a "
                "column Delta can cluster by; nothing was changed"
            )
        before = [k.lower() for k in delta.clustering_columns() or ()]
        done.update(keys_before=before, keys_changed=before != [k.lower() for k in keys])
        if done["keys_changed"]:
            delta.cluster_by(keys)
    result = delta.optimize([] if clustered else keys, tag)
    done.update(
        files_in=result.files_in,
        files_out=result.files_out,
        bytes_in=result.bytes_in,
        bytes_out=result.bytes_out,
        engine=result.engine,
    )
    return result.version, done


def describe(done: Mapping[str, Any]) -> str:
    """One line for progress and the result: what was applied, what Delta could not express."""
    keys = ", ".join(done["keys"])
    left = f"; not expressible by Delta: {', '.join(done['not_applied'])}" if done["not_applied"] else ""
    files = f"{done['files_in']} -> {done['files_out']} files"
    if not done["clustered"]:
        return f"Delta's OPTIMIZE ZORDER BY ({keys or 'nothing: compaction only'}) rewrote {files}{left}"
    change = (
        f"clustering keys ({', '.join(done['keys_before'])}) -> ({keys})"
        if done["keys_changed"]
        else f"clustering keys ({keys}) kept"
    )
    return f"liquid table: {change}, Delta's OPTIMIZE clustered {files}{left}"


def laid_out_by_delta(engine: CommitEngine, snapshot: Snapshot) -> bool:
    """Whether Delta's own commands lay the table out: in a SQL-only session always, elsewhere a liquid
    table (one with no feature deltaopt does not know) where Delta's engine is there to cluster it."""
    features = snapshot.features
    return engine == "delta-sql" or (engine == "delta-spark" and features.clustered and not features.unknown())


def optimize_with_delta(
    spark: SparkSession,
    table: TableAccess,
    features: FeatureSet,
    snapshot: Snapshot,
    run_id: str,
    progress: Progress,
    *,
    metadata: Mapping[str, Any] | None,
    files: Sequence[DataFile] | None = None,
    engine: CommitEngine = "delta-sql",
) -> OptimizeResult:
    """Delta's own commands lay the table out; the files they wrote are recorded as this run's, so the
    service does not take them for new data on its next tick. Without `files` to lay out (default: the
    files no run clustered) no Z-order runs: Delta's ``OPTIMIZE ZORDER BY`` cannot be pointed at files
    and would rewrite the whole table again. `engine` is who commits in `spark` (`commit_engine`)."""
    started = time.perf_counter()
    clustered = snapshot.features.clustered
    if not clustered and not (files if files is not None else unclustered_files(table, snapshot)):
        return OptimizeResult.nothing(run_id, features, {})
    tag = {"operation": "OPTIMIZE", "runId": run_id, "features": features.as_dict(), **dict(metadata or {})}
    version, done = apply_with_delta(spark, table, features, tag, clustered=clustered)
    summary = describe(done)
    progress(summary)
    if version is not None:
        _record_delta_files(table, snapshot, version, run_id, delta_expressible(features, clustered)[0])
    return OptimizeResult(
        run_id=run_id,
        version=version,
        files_in=done["files_in"],
        files_out=done["files_out"],
        bytes_in=done["bytes_in"],
        bytes_out=done["bytes_out"],
        rows=0,  # Delta's OPTIMIZE reports files, not rows; its own transaction kept them
        distinct_vectors=0,
        sop_partitions=0,
        dimensions=tuple(done["keys"]),
        features=features.as_dict(),
        seconds={"total": round(time.perf_counter() - started, 3)},
        output={"writer": "delta", "clustering": summary, "not_applied": done["not_applied"], "engine": done["engine"]},
        committed_by=engine if version is not None else "",
        properties={"clusterBy": ",".join(done["keys"])} if done.get("keys_changed") else {},
    )


def _record_delta_files(table: TableAccess, before: Snapshot, version: int, run_id: str, applied: FeatureSet) -> None:
    """An index entry without statistics for each file Delta's OPTIMIZE wrote: they are clustered (by
    Delta, on the `applied` features), and nothing is known of them beyond Delta's own statistics, so
    no skipping rule uses the entry (nor trusts Delta's float maxima about NaN: Delta wrote them).
    Best effort: without it those files are only optimised again."""
    try:
        old = {f.path for f in before.files}
        written = [f for f in table.snapshot(version).files if f.path not in old]
        unknown = ExtendedStats(run_id, float_max_includes_nan=False)
        write_index(table, run_id, {f.path: (f.size, unknown) for f in written}, applied.as_dict())
    except Exception as err:  # the commit stands; the index is an optimisation of the next tick
        log.warning("could not record the files Delta's OPTIMIZE wrote to %s: %s", table.uri, err)
