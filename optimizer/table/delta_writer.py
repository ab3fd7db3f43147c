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
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from optimizer import errors
from optimizer.table.access import StagedFile, StatsCallback
from optimizer.table.delta_engine import DeltaEngine, python_list, scala_map
from optimizer.table.staging import KeptSpellings, directory_values, local_time, session_zone, spelled

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from optimizer.table.access import Snapshot, TableAccess

# Delta's form of a timestamp partition value (`staging.delta_timestamp`): the instant in UTC, ISO 8601
_UTC_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def stage_with_delta(
    spark: SparkSession,
    table: TableAccess,
    df: DataFrame,
    snapshot: Snapshot,
    *,
    extra_aggregates: Mapping[str, Column] | None,
    extended_stats: StatsCallback | None,
    options: Mapping[str, str] | None,
    kept: KeptSpellings | None = None,
) -> list[StagedFile]:
    """Write `df` with Delta's writer at `snapshot`'s version; per file Delta's statistics plus
    deltaopt's extended ones; timestamp partition values the replaced files spell without a zone keep
    that spelling (`kept`, logical names). On any failure the written files are deleted."""
    features = snapshot.features
    if features.row_tracking:
        _check_row_tracking_columns(df, snapshot.configuration, table.uri)
    engine = DeltaEngine(spark, table.spark_uri("").rstrip("/"))
    at = engine.snapshot(snapshot.version)
    zone = session_zone(spark)  # Delta's writer names timestamp directories in it
    actions = engine.write(df, at, options)
    staged = [_staged(a, features.logical_names) for a in actions]
    try:
        actions = _exact_timestamps(engine, actions, snapshot, str(zone), kept or {})
        staged = [_staged(a, features.logical_names) for a in actions]
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
    """With row tracking enabled, row ids survive only if every row carries them into Delta's writer
    (read `for_rewrite`). Supported but disabled, Delta keeps none (its OPTIMIZE neither), so nothing is
    asked of the rows then (`TableFeatures.row_tracking`)."""
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


def _exact_timestamps(
    engine: DeltaEngine, actions: list[Any], snapshot: Snapshot, zone_name: str, kept: KeptSpellings
) -> list[Any]:
    """Delta's AddFile actions, each timestamp partition value the exact instant in Delta's UTC ISO form,
    or the zone-less spelling the replaced files hold for it (`kept`, logical names).

    Delta's writer names a partition directory by the value's local time in the session's zone and
    derives the log's value from that name, parsing it in the JVM's default zone (Delta 4.0.1's
    ``DelayedCommitProtocol.parsePartitions``; Delta 4.1 parses it in the session's, delta-io/delta#5599):
    in a session whose zone is not the JVM's, every value would be off by the difference. The
    directory read in the session's zone names the instant, whichever Delta wrote it (with
    ``write.utcTimestampPartitionValues`` off it logs the directory's local time: the same instant)."""
    from pyspark.sql.types import TimestampType

    schema, physical = snapshot.spark_schema(), snapshot.features.physical_names
    timestamps = {
        physical.get(c, c) for c in snapshot.partition_columns if isinstance(schema[c].dataType, TimestampType)
    }
    if not timestamps:
        return actions
    kept = {physical.get(c, c): spellings for c, spellings in kept.items()}  # actions name physical columns
    zone = engine.jvm.org.apache.spark.sql.catalyst.util.DateTimeUtils.getZoneId(zone_name)  # Spark's own lookup
    jvm_zone = engine.jvm.java.time.ZoneId.systemDefault()
    same_zone = bool(zone.getRules().equals(jvm_zone.getRules()))
    exact = []
    for action in actions:
        logged = {str(k): (None if v is None else str(v)) for k, v in _items(action.partitionValues())}
        directories = directory_values(unquote(str(action.path())))
        values = dict(logged)
        for k, v in logged.items():
            if k not in timestamps or v is None:
                continue
            directory = directories.get(k)
            if directory is None:  # a random prefix: Delta's value, only in the replaced files' form
                name = snapshot.features.logical_names.get(k, k)
                if not same_zone:
                    raise _untrusted_undirected(name, v, zone_name, str(jvm_zone.getId()))
                _check_undirected(k, v, kept, snapshot.features.logical_names)
            else:
                values[k] = spelled(k, _instant(engine, zone, zone_name, directory), kept)
        exact.append(action if values == logged else _with_partition_values(engine, action, values))
    return exact


def _untrusted_undirected(name: str, value: str, zone_name: str, jvm_zone: str) -> errors.RewriteValidationError:
    """A timestamp partition value no directory names, written in a session whose zone is not the JVM's:
    Delta derives it from the local-time name it would give the directory, parsed in the JVM's zone up to
    4.0 (Delta 3.3 logs 00:30Z written in Asia/Kolkata as 06:00Z; delta-io/delta#5599 moved the parse to the
    session's zone in 4.1), so the instant it logged cannot be trusted: refused, nothing is committed."""
    return errors.RewriteValidationError(
        f"timestamp partition column {name}: Delta's writer logged {value!r} with no partition directory (random "
        f"file prefixes, as column mapping gives on Delta 3.x) in a session whose time zone ({zone_name}) is not "
        f"the JVM's ({jvm_zone}), where some Delta releases log the wrong instant; optimise in a session with "
        f"spark.sql.session.timeZone={jvm_zone}; nothing was committed"
    )


def _check_undirected(column: str, value: str, kept: KeptSpellings, logical_names: Mapping[str, str]) -> None:
    """A timestamp partition value no directory names (random file prefixes), as Delta's writer logged
    it: kept only in the form the replaced files hold, Delta's UTC ISO one, whose instant the job's row
    check then judges. Zone-less spellings to keep (`kept`, physical names), or a zone-less value Delta
    logged (``write.utcTimestampPartitionValues`` off), would be a respelling that moves the rows for
    readers in other zones while the check, reading in the session's zone, passes: refused, nothing is
    committed (the caller discards the files)."""
    if kept.get(column) or not _UTC_ISO.match(value):
        name = logical_names.get(column, column)
        raise errors.RewriteValidationError(
            f"timestamp partition column {name}: no directory names the value Delta's writer logged "
            f"({value!r}; random file prefixes), so its spelling in the replaced files cannot be kept; "
            "nothing was committed"
        )


def _instant(engine: DeltaEngine, zone: Any, zone_name: str, directory: str) -> datetime:
    """The instant a timestamp partition directory names in the session's `zone` (Java's; `zone_name`
    its name). A local time the zone repeats (or skips) names no single instant: refused, nothing is
    committed."""
    local = local_time(directory)
    wall = engine.jvm.java.time.LocalDateTime.of(
        local.year, local.month, local.day, local.hour, local.minute, local.second, local.microsecond * 1000
    )
    offsets = [int(o.getTotalSeconds()) for o in python_list(zone.getRules().getValidOffsets(wall))]
    if len(offsets) != 1:
        raise errors.RewriteValidationError(
            f"timestamp partition value {directory!r} is not one instant in the session time zone {zone_name} "
            "(a repeated or skipped hour), where Delta's writer names partition directories; optimise in a "
            "session with spark.sql.session.timeZone=UTC; nothing was committed"
        )
    return (local - timedelta(seconds=offsets[0])).replace(tzinfo=UTC)


def _with_partition_values(engine: DeltaEngine, action: Any, values: Mapping[str, str | None]) -> Any:
    """`action` (Delta's AddFile) with other partition values, everything else as Delta wrote it."""
    a = action
    return engine.add_file(
        a.path(), scala_map(engine.jvm, values), a.size(), a.modificationTime(), a.dataChange(), a.stats(),
        a.tags(), a.deletionVector(), a.baseRowId(), a.defaultRowCommitVersion(), a.clusteringProvider(),
    )  # fmt: skip


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

    from optimizer.table.stats import file_path

    frame = engine.read(snapshot, actions)
    aggregates = [F.count(F.lit(1)).alias("__rows")] + [a.alias(n) for n, a in (extra or {}).items()]
    grouped = frame.groupBy(file_path(frame).alias("__file")).agg(*aggregates)  # a `_metadata` column: no matter
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
