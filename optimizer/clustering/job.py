"""The OPTIMIZE job: compaction plus the combined SOP + Z-order layout (thesis 4.1, C1-C3).

    read the given files ─► pass 1: SOP vector counts + input fingerprint (per partition group)
      ─► C1 cluster the vectors ─► C2 order the partitions, number them ─► SOP id per row (broadcast join)
      ─► C3 Z-order on Z features + SOP id, range-partitioned into target-size files, sorted within files
      ─► write under the table root ─► pass 2 over the written files: Delta statistics, extended
         statistics, output fingerprint ─► verify rows ─► extended-stats index ─► atomic rewrite commit

Guarantees: only the given files are rewritten; nothing is committed unless the written rows equal the
input rows (count and two order-insensitive hashes per partition group); the commit removes exactly
the input files and adds the written ones with ``dataChange=false``, and loses cleanly against
concurrent commits (`optimizer.table.committer`: Delta's own transaction, or delta-rs). Only small,
distinct things reach the driver: vector counts, quantile samples, per-file aggregates.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from optimizer.clustering.by_delta import laid_out_by_delta, optimize_with_delta
from optimizer.clustering.joined import joined_ranges
from optimizer.clustering.layout import Layout, Progress, cluster_frame, fingerprint_columns, wrap64
from optimizer.clustering.result import OptimizeResult
from optimizer.config_types import LiquidMode
from optimizer.errors import ClusteringError, CommitOutcomeUnknownError
from optimizer.features import FeatureSet
from optimizer.skipping.collect import stats_spec
from optimizer.skipping.extended import ExtendedStats, delete_index, to_json, unclustered_files, write_index
from optimizer.skipping.health import layout_health
from optimizer.table.access import DataFile, Snapshot, StagedFile
from optimizer.table.committer import Committer, RewriteRequest, commit_engine, committer_for
from optimizer.table.key_stats import describe_change, indexing_properties, key_columns
from optimizer.table.output import OutputSettings, resolve_output
from optimizer.table.protocol import check_rewritable
from optimizer.table.staging import session_zone
from optimizer.table.stats import data_columns, stats_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Staged:
    """Files written and verified but not committed, with what the commit and the result report."""

    files: list[StagedFile]
    layout: Layout
    output: Mapping[str, object]
    cluster_seconds: float
    write_seconds: float
    rows: int  # verified: the rows read and written


def optimize(
    spark: SparkSession,
    table: TableAccess,
    features: FeatureSet,
    target_file_size: int,
    *,
    files: Sequence[DataFile] | None = None,
    snapshot: Snapshot | None = None,
    metadata: Mapping[str, Any] | None = None,
    progress: Progress = lambda _: None,
    order_ids: bool = True,
    run_id: str | None = None,
    output: OutputSettings = OutputSettings(),
    stats_for_keys: bool = True,
    liquid: LiquidMode = "keep",
) -> OptimizeResult:
    """Rewrite `files` (default: the files no deltaopt run clustered) with the combined layout, written
    with `output`'s codec and row-group size (the table's own codec property wins). With
    `stats_for_keys`, clustering keys without min/max statistics get them first (`table.key_stats`). A
    liquid table (its keys are the user's: changed only when `liquid` is ``set``), or any table in a SQL-only
    session, is laid out by Delta's commands (`clustering.by_delta`). Raises `ClusteringError` (bad feature,
    rows differ), `CommitConflictError` (lost a race: nothing committed), `TableAccessError`."""
    started, engine, run_id = time.perf_counter(), commit_engine(spark), run_id or uuid.uuid4().hex[:16]
    committer = None if engine == "delta-sql" else committer_for(table, spark)  # an unsafe store: refused first
    snapshot = snapshot or table.snapshot()  # a feature the rewrite cannot honour: refused before any work
    if committer is None or laid_out_by_delta(engine, snapshot):  # Delta's own commands lay it out
        delta = partial(optimize_with_delta, metadata=metadata, files=files, engine=engine, liquid=liquid)
        return delta(spark, table, features, snapshot, run_id, progress)
    check_rewritable(snapshot.features, table.uri, delta_engine=committer.engine == "delta-spark")
    properties = indexing_properties(snapshot, key_columns(features)) if stats_for_keys else {}
    if properties:
        snapshot = _index_keys(committer, snapshot, properties, run_id, progress)
    chosen = _active(snapshot, list(files) if files is not None else unclustered_files(table, snapshot))
    if not chosen:
        return OptimizeResult.nothing(run_id, features, properties)
    plan = _Plan(run_id, target_file_size, order_ids, output, progress)
    staged = _write_verified(spark, table, snapshot, chosen, features, plan)
    clock = time.perf_counter()
    version = _commit(committer, snapshot, chosen, staged, features, run_id=run_id, rows=staged.rows, metadata=metadata)
    seconds = {"cluster": staged.cluster_seconds, "write": staged.write_seconds, "commit": time.perf_counter() - clock}
    health, seconds["total"] = _health(table, snapshot, version, features), time.perf_counter() - started
    progress(f"committed version {version} in {seconds['total']:.1f}s")
    return OptimizeResult(
        run_id=run_id,
        version=version,
        files_in=len(chosen),
        files_out=len(staged.files),
        bytes_in=sum(f.size for f in chosen),
        bytes_out=sum(f.size for f in staged.files),
        rows=staged.rows,  # as read: rows a deletion vector removed are not counted
        distinct_vectors=staged.layout.distinct_vectors,
        sop_partitions=len(staged.layout.partitions),
        dimensions=tuple(d.column for d in staged.layout.dimensions),
        features=features.as_dict(),
        seconds={k: round(v, 3) for k, v in seconds.items()},
        output=staged.output,
        committed_by=committer.engine,
        properties=properties,
        health=health,
    )


@dataclass(frozen=True)
class _Plan:
    """How one run writes: its id, file size, SOP id ordering, Parquet settings and progress reports."""

    run_id: str
    target_file_size: int
    order_ids: bool
    output: OutputSettings
    progress: Progress


def _index_keys(
    committer: Committer, snapshot: Snapshot, properties: Mapping[str, str], run_id: str, progress: Progress
) -> Snapshot:
    """Commit the property change that gives the clustering keys statistics; the table after it (so
    the files this run writes carry them)."""
    progress(f"run {run_id}: clustering keys get statistics: {describe_change(snapshot, properties)}")
    committer.set_properties(properties, {"run_id": run_id, "reason": "statistics for clustering keys"})
    return committer.table.snapshot()


def _health(table: TableAccess, before: Snapshot, version: int, features: FeatureSet) -> dict[str, Any]:
    """The clustering keys' layout health over the whole table before the run and at `version`."""
    keys = key_columns(features)
    if not keys:
        return {}
    after = table.snapshot(version).files
    return {
        "before": [h.as_dict() for h in layout_health(before.files, keys)],
        "after": [h.as_dict() for h in layout_health(after, keys)],
    }


def _active(snapshot: Snapshot, chosen: list[DataFile]) -> list[DataFile]:
    """`chosen`, refused unless every file is active in `snapshot` (a stale list must not be rewritten)."""
    active = snapshot.by_path()
    missing = [f.path for f in chosen if f.path not in active]
    if missing:
        raise ClusteringError(f"files are not active at version {snapshot.version}: {missing[:3]}")
    return chosen


def _cluster(
    frame: DataFrame,
    chosen: Sequence[DataFile],
    features: FeatureSet,
    columns: Sequence[str],
    partition_columns: Sequence[str],
    plan: _Plan,
) -> Layout:
    """The clustered frame of `chosen`'s rows, range-partitioned into about target-size files."""
    bytes_in = sum(f.size for f in chosen)
    file_count = max(1, round(bytes_in / plan.target_file_size))
    known = None if any(f.num_records is None for f in chosen) else sum(f.num_records or 0 for f in chosen)
    rows_per_file = max((known or 0) / file_count, 1.0)
    plan.progress(f"run {plan.run_id}: {len(chosen)} files, {bytes_in:,} bytes -> about {file_count} file(s)")
    return cluster_frame(
        frame,
        features,
        columns,
        partition_columns,
        rows_per_file=rows_per_file,
        files=file_count,
        progress=plan.progress,
        order_ids=plan.order_ids,
        known_rows=known,
    )


def _write_verified(
    spark: SparkSession,
    table: TableAccess,
    snapshot: Snapshot,
    chosen: Sequence[DataFile],
    features: FeatureSet,
    plan: _Plan,
) -> _Staged:
    """Cluster and write `chosen`'s rows, then prove the written rows equal the input and write the
    extended-stats index; on any failure the written files are removed and nothing is committed."""
    clock = time.perf_counter()
    run_id = plan.run_id
    stored = data_columns(snapshot.spark_schema(), snapshot.partition_columns)
    frame = table.read_files(spark, chosen, snapshot, for_rewrite=True)
    delta_columns = {c.name.lower() for c in stats_columns(stored, snapshot.configuration) if c.minmax}
    spec = stats_spec(frame, features, delta_columns)
    layout = _cluster(frame, chosen, features, stored.names, snapshot.partition_columns, plan)
    cluster_seconds = time.perf_counter() - clock

    clock = time.perf_counter()
    xx, mm = fingerprint_columns(stored, stored.names)
    extra = {**spec.aggregates(), "__xx": _sum(xx), "__mm": _sum(mm)}
    rows_by_path: dict[str, Mapping[str, Any]] = {}
    extended_by_path: dict[str, ExtendedStats] = {}

    def extended(path: str, row: Mapping[str, Any]) -> Mapping[str, Any]:
        rows_by_path[path] = row
        extended_by_path[path] = spec.extended(row, run_id)
        return to_json(extended_by_path[path])

    written_with = resolve_output(plan.output, snapshot.configuration)
    staged = table.stage(
        spark,
        layout.frame,
        snapshot,
        "optimize",
        extra_aggregates=extra,
        extended_stats=extended,
        options=written_with.writer_options(),
        replacing=chosen,
    )
    write_seconds = time.perf_counter() - clock
    rows = _prove_and_index(
        spark,
        table,
        snapshot,
        features,
        staged,
        rows_by_path=rows_by_path,
        extended_by_path=extended_by_path,
        expected=layout.input_fingerprints(),
        key_types=spec.key_types,
        plan=plan,
    )
    output = written_with.as_dict()
    if snapshot.features.needs_delta_writer:  # Delta's writer takes the codec only: its own row groups, level
        output |= {"level": None, "row_group_bytes": None, "writer": "delta"}
    return _Staged(staged, layout, output, cluster_seconds, write_seconds, rows)


def _prove_and_index(
    spark: SparkSession,
    table: TableAccess,
    snapshot: Snapshot,
    features: FeatureSet,
    staged: list[StagedFile],
    *,
    rows_by_path: Mapping[str, Mapping[str, Any]],
    extended_by_path: Mapping[str, ExtendedStats],
    expected: Mapping[tuple[Any, ...], tuple[int, int, int]],
    key_types: Mapping[str, str] | None,
    plan: _Plan,
) -> int:
    """Prove the written rows equal the input (`_verify`), record joined ranges, and write the run's
    extended-stats index; the number of rows proven. On any failure the written files are removed, so
    nothing uncommitted stays."""
    progress = plan.progress
    progress(f"wrote {len(staged)} file(s), {sum(f.size for f in staged):,} bytes; verifying rows")
    try:
        _verify(
            staged, rows_by_path, expected, snapshot.partition_columns, snapshot.spark_schema(), session_zone(spark)
        )
        if features.joined and not snapshot.features.needs_delta_writer:  # ranges read files by logical names
            joined = joined_ranges(spark, {f.path: table.spark_uri(f.path) for f in staged}, features.joined)
            progress(f"joined ranges recorded for {len(joined)} of {len(staged)} file(s)")
            extended_by_path = {p: replace(x, joined=joined.get(p, ())) for p, x in extended_by_path.items()}
        by_path = {f.path: (f.size, extended_by_path[f.path]) for f in staged}
        columns = snapshot.features.physical_names
        write_index(table, plan.run_id, by_path, features.as_dict(), key_types=key_types, columns=columns)
    except Exception:
        table.discard(staged)
        raise
    return sum(count for count, _, _ in expected.values())


def _commit(
    committer: Committer,
    snapshot: Snapshot,
    chosen: Sequence[DataFile],
    staged: _Staged,
    features: FeatureSet,
    *,
    run_id: str,
    rows: int,
    metadata: Mapping[str, Any] | None,
) -> int:
    """The atomic rewrite (remove `chosen`, add the staged files, ``dataChange=false``); on a lost race
    or any failure the run's index file goes too, so nothing points at files that never landed."""
    commit_metadata = {
        "operation": "OPTIMIZE",
        "runId": run_id,
        "features": features.as_dict(),
        "filesIn": len(chosen),
        "filesOut": len(staged.files),
        "rows": rows,
        "sopPartitions": len(staged.layout.partitions),
        "dimensions": len(staged.layout.dimensions),
        "output": staged.output,
        **(metadata or {}),
    }
    request = RewriteRequest(
        snapshot.version,
        chosen,
        staged.files,
        commit_metadata,
        z_order_by=history_names(staged.layout),
    )
    try:
        return committer.rewrite(request)
    except CommitOutcomeUnknownError:
        raise  # the commit may have landed: its index must stay with its files
    except Exception:
        delete_index(committer.table, run_id)
        raise


def history_names(layout: Layout) -> tuple[str, ...]:
    """What Delta's history records as ``zOrderBy``: the user's expressions and joined attributes, and the
    SOP partition id as the predicates it stands for, never deltaopt's helper columns."""
    return tuple(layout.labels.get(d.column, d.column) for d in layout.dimensions)


def _sum(column: Column) -> Column:
    from pyspark.sql import functions as F

    return F.sum(column)


def _verify(
    staged: Sequence[StagedFile],
    rows: Mapping[str, Mapping[str, Any]],
    expected: Mapping[tuple[Any, ...], tuple[int, int, int]],
    partition_columns: Sequence[str],
    schema: StructType,
    zone: str | None = None,
) -> None:
    """The written rows equal the input rows in every partition group, or nothing is committed. Groups
    match by their partition values' meaning (`partition_key`: a timestamp's instant, a zone-less one
    read in the session's `zone` as the input was; without it, text), since the log and the input
    render a value differently (UTC ISO against the session zone's local time)."""
    from optimizer.table.staging import partition_key

    types = {f.name.lower(): f.dataType for f in schema.fields}
    kinds = [types.get(c.lower()) for c in partition_columns]

    def group(values: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(partition_key(v, t, zone) for v, t in zip(values, kinds, strict=True))

    written: dict[tuple[Any, ...], list[int]] = {}
    for f in staged:
        row = rows[f.path]
        total = written.setdefault(group([f.partition_values.get(c) for c in partition_columns]), [0, 0, 0])
        total[0] += int(row["__rows"])
        total[1] += int(row["__xx"] or 0)
        total[2] += int(row["__mm"] or 0)
    expected_norm: dict[tuple[Any, ...], list[int]] = {}
    for key, (count, xx, mm) in expected.items():
        total = expected_norm.setdefault(group(key), [0, 0, 0])
        total[0], total[1], total[2] = total[0] + count, total[1] + xx, total[2] + mm
    written = {k: [v[0], wrap64(v[1]), wrap64(v[2])] for k, v in written.items()}
    expected_norm = {k: [v[0], wrap64(v[1]), wrap64(v[2])] for k, v in expected_norm.items()}
    if written != expected_norm:
        raise ClusteringError(
            f"written rows differ from the input (expected {_summary(expected_norm)}, wrote {_summary(written)}); "
            "nothing was committed"
        )


def _summary(groups: Mapping[tuple[Any, ...], list[int]]) -> str:
    return f"{sum(v[0] for v in groups.values())} rows in {len(groups)} group(s)"
