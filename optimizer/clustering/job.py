"""The OPTIMIZE job: compaction plus the combined SOP + Z-order layout (thesis 4.1, C1-C3).

    read the given files ─► pass 1: SOP vector counts + input fingerprint (per partition group)
      ─► C1 cluster the vectors ─► C2 order the partitions, number them ─► SOP id per row (broadcast join)
      ─► C3 Z-order on Z features + SOP id, range-partitioned into target-size files, sorted within files
      ─► write under the table root ─► pass 2 over the written files: Delta statistics, extended
         statistics, output fingerprint ─► verify rows ─► extended-stats index ─► atomic rewrite commit

Guarantees: only the given files are rewritten; nothing is committed unless the written rows equal the
input rows (count and two order-insensitive hashes per partition group); the commit removes exactly
the input files and adds the written ones with ``dataChange=false``, and loses cleanly against
concurrent commits (the committer `optimizer.table.rewrite_path.open_path` chose: Delta's own transaction,
or delta-rs). Only small,
distinct things reach the driver: vector counts, quantile samples, per-file aggregates.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from optimizer.clustering.by_delta import CommandRun, optimize_with_delta
from optimizer.clustering.joined import joined_ranges
from optimizer.clustering.layout import Layout, Progress, cluster_frame, fingerprint_columns, wrap64
from optimizer.clustering.layout_commit import Staged, commit_staged, index_keys, keys_health
from optimizer.clustering.result import OptimizeResult
from optimizer.config_types import LiquidMode
from optimizer.errors import ClusteringError, UnsupportedTableError
from optimizer.features import FeatureSet
from optimizer.skipping.collect import stats_spec
from optimizer.skipping.extended import ExtendedStats, to_json, unclustered_files, write_index
from optimizer.table.access import DataFile, Snapshot, StagedFile
from optimizer.table.key_stats import indexing_properties, key_columns
from optimizer.table.output import OutputSettings, resolve_output
from optimizer.table.rewrite_path import OpenedPath, choose_path, open_path
from optimizer.table.staging import session_zone
from optimizer.table.stats import data_columns, stats_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)


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
    full: bool = False,
    decided_keys: Sequence[str] | None = None,
) -> OptimizeResult:
    """Rewrite `files` (default: the files no deltaopt run clustered) with the combined layout, written
    with `output`'s codec and row-group size (the table's own codec property wins). With
    `stats_for_keys`, clustering keys without min/max statistics get them first (`table.key_stats`). A
    liquid table (its keys are the user's: changed only when `liquid` is ``set``), or any table in a SQL-only
    session, is laid out by Delta's commands (`clustering.by_delta`; `full`: a liquid table's OPTIMIZE FULL,
    refused elsewhere; `decided_keys`: a service job's liquid keys as decided, `by_delta.KeysChangedError`
    when the table's differ). Raises `ClusteringError` (bad feature,
    rows differ), `CommitConflictError` (lost a race: nothing committed), `TableAccessError`."""
    started = time.perf_counter()
    run_id = run_id or uuid.uuid4().hex[:16]
    opened = open_path(spark, table, snapshot, liquid=liquid)  # an unsafe store, a feature: refused before any work
    if opened.path.by_delta:  # Delta's own commands lay it out
        run = CommandRun(run_id, progress, metadata, files, full=full, keys=decided_keys)
        return optimize_with_delta(opened, table, features, run)
    if full:
        raise UnsupportedTableError(
            f"{table.uri} is not liquid-clustered: OPTIMIZE FULL re-clusters a liquid table's files only; "
            "nothing was read or written"
        )
    plan = _Plan(run_id, target_file_size, order_ids, output, progress)
    return _layout_run(spark, table, opened, features, _LayoutRun(plan, files, metadata, stats_for_keys, started))


@dataclass(frozen=True)
class _LayoutRun:
    """What deltaopt's own layout run needs besides the table: how it writes, the files to rewrite (None:
    the unclustered ones), commit metadata, whether keys get statistics first, when it started."""

    plan: _Plan
    files: Sequence[DataFile] | None
    metadata: Mapping[str, Any] | None
    stats_for_keys: bool
    started: float


def _layout_run(
    spark: SparkSession, table: TableAccess, opened: OpenedPath, features: FeatureSet, run: _LayoutRun
) -> OptimizeResult:
    """deltaopt's combined layout: key statistics first (when wanted), then write, verify and commit."""
    committer, snapshot, run_id = opened.committer, opened.snapshot, run.plan.run_id
    properties = indexing_properties(snapshot, key_columns(features)) if run.stats_for_keys else {}
    if properties:
        snapshot = index_keys(committer, snapshot, properties, run_id, run.plan.progress)
        opened = _chosen_again(opened, snapshot)
    chosen = _active(snapshot, list(run.files) if run.files is not None else unclustered_files(table, snapshot))
    if not chosen:
        return OptimizeResult.nothing(run_id, features, properties)
    staged = _write_verified(spark, table, opened, chosen, features, plan=run.plan)
    clock = time.perf_counter()
    version = commit_staged(committer, snapshot, chosen, staged, features, run_id=run_id, metadata=run.metadata)
    seconds = {"cluster": staged.cluster_seconds, "write": staged.write_seconds, "commit": time.perf_counter() - clock}
    health = keys_health(table, snapshot, version, features)
    seconds["total"] = time.perf_counter() - run.started
    run.plan.progress(f"committed version {version} in {seconds['total']:.1f}s")
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
        path=opened.path,
    )


def _chosen_again(opened: OpenedPath, snapshot: Snapshot) -> OpenedPath:
    """The path on `snapshot`, the table after the key-statistics commit, which the files are written for:
    refused if the way the table is rewritten changed since it was chosen; else that snapshot's reader and
    writer needs (a feature enabled meanwhile, e.g. row tracking, puts Delta's writer in charge)."""
    planned = opened.path
    planned.recheck(snapshot.features, snapshot.version)
    path = choose_path(
        planned.capabilities, snapshot.features, liquid=planned.liquid, uri=planned.uri, version=snapshot.version
    )
    opened.committer.path = path
    return replace(opened, path=path, snapshot=snapshot)


@dataclass(frozen=True)
class _Plan:
    """How one run writes: its id, file size, SOP id ordering, Parquet settings and progress reports."""

    run_id: str
    target_file_size: int
    order_ids: bool
    output: OutputSettings
    progress: Progress


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
    *,
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
    opened: OpenedPath,
    chosen: Sequence[DataFile],
    features: FeatureSet,
    *,
    plan: _Plan,
) -> Staged:
    """Cluster and write `chosen`'s rows (at `opened.snapshot`), then prove the written rows equal the input
    and write the extended-stats index; on any failure the written files are removed and nothing is committed."""
    clock = time.perf_counter()
    run_id, snapshot = plan.run_id, opened.snapshot
    stored = data_columns(snapshot.spark_schema(), snapshot.partition_columns)
    frame = table.read_files(spark, chosen, snapshot, for_rewrite=True)
    delta_columns = {c.name.lower() for c in stats_columns(stored, snapshot.configuration) if c.minmax}
    spec = stats_spec(frame, features, delta_columns)
    layout = _cluster(
        frame, chosen, features, columns=stored.names, partition_columns=snapshot.partition_columns, plan=plan
    )
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
        opened,
        features,
        staged,
        rows_by_path=rows_by_path,
        extended_by_path=extended_by_path,
        expected=layout.input_fingerprints(),
        key_types=spec.key_types,
        plan=plan,
    )
    output = _written_with(written_with, delta_writer=opened.path.delta_writer)
    return Staged(staged, layout, output, cluster_seconds, write_seconds, rows)


def _written_with(settings: OutputSettings, *, delta_writer: bool) -> dict[str, object]:
    """The result's ``output``: the Parquet settings the files were written with, and which writer (Delta's
    takes the codec as an option, the row-group size and level from the session: `delta_engine.session_conf`)."""
    return dict(settings.as_dict()) | ({"writer": "delta"} if delta_writer else {})


def _prove_and_index(
    spark: SparkSession,
    table: TableAccess,
    opened: OpenedPath,
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
    progress, snapshot = plan.progress, opened.snapshot
    progress(f"wrote {len(staged)} file(s), {sum(f.size for f in staged):,} bytes; verifying rows")
    try:
        schema = snapshot.spark_schema()
        _verify(staged, rows_by_path, expected, snapshot.partition_columns, schema, zone=session_zone(spark))
        if features.joined and not opened.path.delta_writer:  # ranges read files by logical names
            joined = joined_ranges(spark, {f.path: table.spark_uri(f.path) for f in staged}, features.joined)
            progress(f"joined ranges recorded for {len(joined)} of {len(staged)} file(s)")
            extended_by_path = {p: replace(x, joined=joined.get(p, ())) for p, x in extended_by_path.items()}
        by_path = {f.path: (f.size, extended_by_path[f.path]) for f in staged}
        columns = snapshot.features.physical_names
        write_index(table, plan.run_id, by_path, features=features.as_dict(), key_types=key_types, columns=columns)
    except Exception:
        table.discard(staged)
        raise
    return sum(count for count, _, _ in expected.values())


def _sum(column: Column) -> Column:
    from pyspark.sql import functions as F

    return F.sum(column)


def _verify(
    staged: Sequence[StagedFile],
    rows: Mapping[str, Mapping[str, Any]],
    expected: Mapping[tuple[Any, ...], tuple[int, int, int]],
    partition_columns: Sequence[str],
    schema: StructType,
    *,
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
