"""Liquid-clustered tables: deltaopt chooses the keys, Delta clusters.

Delta's ``OPTIMIZE`` re-clusters a liquid table by its clustering keys and refuses ``ZORDER BY`` on it,
so a deltaopt Z-order would be undone by the next OPTIMIZE (docs/TABLE-FEATURES.md). On such a table
the job instead applies the plain-column Z features as the table's keys (``ALTER TABLE ... CLUSTER BY``,
at most `MAX_KEYS`, as Delta allows) and runs Delta's own ``OPTIMIZE``, which clusters incrementally
and commits with ``clusterBy`` naming the keys; a later OPTIMIZE finds nothing to rewrite. What Delta's
clustering cannot express (SOP predicates, expressions, joined attributes) is named in the result and
not applied. SQL is rendered by sqlglot from identifiers, never spliced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer.errors import TableAccessError, UnsupportedTableError
from optimizer.features import FeatureSet
from optimizer.table.delta_engine import DeltaEngine, java_message

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import TableAccess

MAX_KEYS = 4  # Delta's limit on clustering columns


def clustering_keys(features: FeatureSet) -> tuple[list[str], list[str]]:
    """(the keys Delta can cluster by: plain-column Z features, in order, at most `MAX_KEYS`; what it
    cannot express: every other feature)."""
    plain = [f.column for f in features.z if f.is_plain_column]
    keys = list(dict.fromkeys(plain))[:MAX_KEYS]
    left = [f.expression for f in features.z if f.column not in keys or not f.is_plain_column]
    left += [f"SOP {f.predicate}" for f in features.sop]
    left += [f"joined {j.dimension}.{j.attribute}" for j in features.joined]
    return keys, left


def cluster_with_delta(
    spark: SparkSession, table: TableAccess, features: FeatureSet
) -> tuple[int | None, dict[str, Any]]:
    """Set the table's clustering keys from `features` (when they differ) and run Delta's OPTIMIZE.
    Returns the version OPTIMIZE committed (None: nothing to cluster) and what was done, for the
    result. Raises `UnsupportedTableError` before any change when no feature is a plain column."""
    keys, left = clustering_keys(features)
    if not keys:
        raise UnsupportedTableError(
            f"{table.uri} is liquid-clustered and none of the features ({', '.join(left) or 'none'}) is a column "
            "Delta can cluster by; nothing was changed"
        )
    engine = DeltaEngine(spark, table.spark_uri("").rstrip("/"))
    name = engine.sql_name
    before = [k.lower() for k in engine.clustering_columns() or ()]
    changed = before != [k.lower() for k in keys]
    try:
        if changed:
            columns = ", ".join(exp.to_identifier(k, quoted=True).sql("spark") for k in keys)
            spark.sql(f"ALTER TABLE {name} CLUSTER BY ({columns})")
        metrics = spark.sql(f"OPTIMIZE {name}").collect()[0]["metrics"].asDict(recursive=True)
    except Exception as err:  # Delta's own commands: their transactions commit or not, atomically
        raise TableAccessError(f"Delta's clustering of {table.uri} failed: {java_message(err)}") from err
    after = table.snapshot()
    optimized = after.version if int(metrics.get("numFilesAdded") or 0) > 0 else None
    return optimized, {
        "keys": keys,
        "keys_before": before,
        "keys_changed": changed,
        "not_applied": left,
        "files_in": int(metrics.get("numFilesRemoved") or 0),
        "files_out": int(metrics.get("numFilesAdded") or 0),
        "bytes_in": _total(metrics.get("filesRemoved")),
        "bytes_out": _total(metrics.get("filesAdded")),
    }


def _total(summary: Any) -> int:
    return int((summary or {}).get("totalSize") or 0) if isinstance(summary, dict) else 0


def describe(done: dict[str, Any]) -> str:
    """One line for progress and the result: what was applied, what Delta could not express."""
    keys = ", ".join(done["keys"])
    change = (
        f"clustering keys ({', '.join(done['keys_before'])}) -> ({keys})"
        if done["keys_changed"]
        else f"clustering keys ({keys}) kept"
    )
    left = f"; not expressible as clustering keys: {', '.join(done['not_applied'])}" if done["not_applied"] else ""
    return f"liquid table: {change}, Delta's OPTIMIZE clustered {done['files_in']} -> {done['files_out']} files{left}"
