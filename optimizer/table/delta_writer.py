"""Stage a rewrite's files with Delta's own writer, for tables whose files only Delta writes right.

Column mapping stores columns under physical names (and field ids); row tracking keeps each row's id
and commit version in materialised columns. Delta's ``writeFiles`` does both and computes Delta's
statistics keyed as Delta keys them (`optimizer.table.delta_engine`). deltaopt then reads the written
files back through Delta's reader, one aggregation grouped by file, for what only it computes: the
row count and fingerprints that verify the rewrite and the extended statistics, which join Delta's
statistics under the key ``"deltaopt"``. Nothing is committed here; the AddFile actions travel with the
`StagedFile` records to Delta's transaction (`optimizer.table.deltaspark`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from optimizer import errors
from optimizer.table.access import StagedFile, StatsCallback
from optimizer.table.delta_engine import DeltaEngine

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from optimizer.table.access import Snapshot, TableAccess


def stage_with_delta(
    spark: SparkSession,
    table: TableAccess,
    df: DataFrame,
    snapshot: Snapshot,
    *,
    extra_aggregates: Mapping[str, Column] | None,
    extended_stats: StatsCallback | None,
    options: Mapping[str, str] | None,
) -> list[StagedFile]:
    """Write `df` with Delta's writer at `snapshot`'s version; per file Delta's statistics plus
    deltaopt's extended ones. On any failure the written files are deleted."""
    features = snapshot.features
    if features.row_tracking:
        _check_row_tracking_columns(df, snapshot.configuration, table.uri)
    engine = DeltaEngine(spark, table.spark_uri("").rstrip("/"))
    at = engine.snapshot(snapshot.version)
    actions = engine.write(df, at, options)
    staged = [_staged(a, features.logical_names) for a in actions]
    try:
        rows = _aggregate(engine, at, actions, extra_aggregates)
        result = []
        for f in staged:
            row = rows.get(_name(f.path))
            if row is None:
                raise errors.RewriteValidationError(f"no statistics were computed for written file {f.path}")
            counted = int(json.loads(f.stats_json)["numRecords"])  # Delta's statistics of the file
            if counted != int(row["__rows"]):
                raise errors.RewriteValidationError(
                    f"written file {f.path}: Delta counted {counted} rows, reading it gave {row['__rows']}"
                )
            extra = dict(extended_stats(f.path, row)) if extended_stats else None
            result.append(replace(f, stats_json=_with_extended(f.stats_json, extra)))
    except Exception:
        table.discard(staged)
        raise
    return result


def _check_row_tracking_columns(df: DataFrame, configuration: Mapping[str, str | None], uri: str) -> None:
    """Row ids survive only if every row carries them into Delta's writer (read `for_rewrite`)."""
    from optimizer.table.protocol import ROW_ID_COLUMN, ROW_VERSION_COLUMN

    wanted = [configuration.get(ROW_ID_COLUMN), configuration.get(ROW_VERSION_COLUMN)]
    missing = [str(c) for c in wanted if not c or c not in df.columns]
    if missing:
        raise errors.RewriteValidationError(
            f"{uri} tracks row ids but the rows to write lack the materialised columns {missing}: "
            "their row ids would change; nothing was written"
        )


def _staged(action: Any, logical_names: Mapping[str, str]) -> StagedFile:
    """The record of one AddFile: its decoded path and partition values under logical names."""
    values = {str(k): (None if v is None else str(v)) for k, v in _items(action.partitionValues())}
    return StagedFile(
        path=unquote(str(action.path())),
        size=int(action.size()),
        stats_json=str(action.stats()),
        partition_values={logical_names.get(k, k): v for k, v in values.items()},
        action=action,
    )


def _items(scala_map: Any) -> list[tuple[Any, Any]]:
    items = []
    it = scala_map.iterator()
    while it.hasNext():
        pair = it.next()
        items.append((pair._1(), pair._2()))
    return items


def _name(path: str) -> str:
    """A written file's name: unique per write (Spark puts the job's UUID in it), so the key between the
    AddFile and the file path Spark's reader reports, whatever each one encodes."""
    return unquote(path.rsplit("/", 1)[-1])


def _aggregate(
    engine: DeltaEngine, snapshot: Any, actions: list[Any], extra: Mapping[str, Column] | None
) -> dict[str, dict[str, Any]]:
    """Per written file (by name): ``__rows`` and every `extra` aggregate, over the rows Delta reads."""
    from pyspark.sql import functions as F

    frame = engine.read(snapshot, actions)
    aggregates = [F.count(F.lit(1)).alias("__rows")] + [a.alias(n) for n, a in (extra or {}).items()]
    grouped = frame.groupBy(F.col("_metadata.file_path").alias("__file")).agg(*aggregates)
    return {_name(row["__file"]): row.asDict() for row in grouped.collect()}


def _with_extended(delta_stats: str, extra: Mapping[str, Any] | None) -> str:
    """Delta's statistics JSON, byte for byte, with deltaopt's extended statistics as one more key."""
    if not extra:
        return delta_stats
    text = delta_stats.rstrip()
    if not text.endswith("}"):
        raise errors.RewriteValidationError(f"Delta wrote statistics that are not a JSON object: {text[:80]}")
    body = json.dumps({"deltaopt": extra}, separators=(",", ":"), allow_nan=False)[1:-1]
    return text[:-1] + ("," if text != "{}" else "") + body + "}"
