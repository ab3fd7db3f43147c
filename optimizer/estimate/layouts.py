"""Candidate layouts of the new data, each priced on the same sample: the workload replay they are
measured against, the analysed layout's variants, their cost and benefit, and the feature search glue.

A layout's benefit replays the workload's filters on virtual files (`virtual_files`) built from the
sample clustered on that layout, against the files as they are now (`WorkloadReplay`, built once per
decision); the cost comes from the calibrated model.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from costmodel.benefit import BenefitEstimate, Calibration, calibrated, combine
from costmodel.cost import CostEstimate, CostModel
from costmodel.rate import QueryRate, project_rate
from optimizer.analysis.search import Score, SearchResult, best_single, greedy_search, layout_of
from optimizer.config import Thresholds
from optimizer.cut_tree import CutTree
from optimizer.estimate.candidates import candidate_layouts
from optimizer.estimate.record import LayoutSummary
from optimizer.estimate.replay import Query, estimate_benefit, joined_helpers, with_joined_ranges, workload_queries
from optimizer.estimate.stored_bytes import StoredBaseline, layout_compression, layout_measure, measure_baseline
from optimizer.estimate.virtual_files import VirtualFiles, bytes_per_row, virtual_files
from optimizer.estimate.workload_bits import workload_precision
from optimizer.estimate.workload_cuts import workload_cuts
from optimizer.features import FeatureSet, JoinedFeature
from optimizer.skipping.extended import ExtendedStats
from optimizer.skipping.filestats import FileStats, table_column_types
from optimizer.skipping.joined import dimension_versions
from optimizer.skipping.pruning import column_names_of
from optimizer.skipping.row_groups import RowGroup
from optimizer.skipping.scan import column_sizes, file_row_groups, table_file_stats
from optimizer.table.access import DataFile, Snapshot
from optimizer.table.footers import total_sizes
from optimizer.table.key_stats import indexing_properties, key_columns, with_properties
from optimizer.table.output import resolve_output
from querylog.records import ScanRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from optimizer.table.access import TableAccess


def search_features(
    replay: WorkloadReplay,
    snapshot: Snapshot,
    sample: DataFrame,
    pool: FeatureSet,
    *,
    thresholds: Thresholds,
    cost_model: CostModel,
    new_bytes: int,
    calibration: Calibration | None = None,
) -> SearchResult:
    """The greedy search (`optimizer.analysis.search`) over the analyser's pool, each layout scored
    by its skipping benefit on virtual files of `sample` (no scratch writes: compression is priced
    once, on the layouts that `evaluate_layouts` compares afterwards) against the cost model. When no
    feature pays on skipping alone, the one that came closest is returned for that full estimate.
    With the table's `calibration` each benefit is scaled as the compared layouts' are: a feature is
    chosen on the scale the verdict weighs it on, not on the raw one."""

    rows = functools.cache(lambda: sample.count())  # every layout is priced on this one sample: counted once

    def scored(layout: FeatureSet) -> Score:
        benefit = layout_benefit(
            replay, snapshot, layout, sample, thresholds=thresholds, every_reader=False, sample_rows=rows
        )
        return Score(calibrated(benefit, calibration).benefit, layout_cost(cost_model, new_bytes, layout).seconds)

    def score(layout: FeatureSet) -> Score:
        """The better of the layout's two orders where it has both kinds of feature: a SOP feature true
        on few rows pays only when its partition is gathered (`evaluate_layouts` then picks the order)."""
        if not (layout.z and layout.sop):
            return scored(layout)
        return max(scored(layout), scored(replace(layout, sop_leads=True)), key=lambda s: s.net)

    result = greedy_search(
        pool,
        score,
        max_z=thresholds.max_z_features,
        max_sop=thresholds.max_sop_features,
        estimates=thresholds.search_estimates,
        seconds=thresholds.search_seconds,
    )
    single = best_single(result)
    if single is not None:
        stopped = f"{result.stopped}; the closest, {single.kind} {single.feature}, is estimated with compression"
        return replace(result, features=layout_of(pool, [single]), chosen=(single,), stopped=stopped)
    return result


def evaluate_layouts(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    *,
    sample: DataFrame,
    replay: WorkloadReplay,
    features: FeatureSet,
    thresholds: Thresholds,
    cost_model: CostModel,
    joined: Sequence[JoinedFeature] = (),
    hilbert: bool = True,
) -> list[LayoutEstimate]:
    """Cost and benefit of the analysed layout and its variants (`candidate_layouts`, with and without
    the `joined` features; on a Hilbert curve and with the workload's bits too unless `hilbert` is false:
    the job that will run cannot follow either), each measured on the same sample against the same
    replay (and, when enabled, the same stored-bytes baseline)."""
    if thresholds.estimate_compression:
        baseline = measure_baseline(
            table, snapshot, files, sample=sample, target_files=replay.target_files, output=thresholds.output
        )
        replay = replace(replay, stored=baseline)
    if thresholds.compare_layouts:
        bits = workload_precision(sample, features, replay.queries, replay.target_files) if hilbert else ()
        trees = _workload_trees(sample, features, replay, snapshot, files) if hilbert else (None, None)
        candidates = candidate_layouts(features, joined, hilbert=hilbert, workload_bits=bits, cuts=trees)
    else:  # the thesis's order: the analysed features, each kind as the analyser chose it
        candidates = [("as analysed", replace(features, joined=tuple(joined)))]
    new_bytes = sum(f.size for f in files)
    rows = functools.cache(lambda: sample.count())  # every candidate is priced on this one sample: counted once
    return [
        LayoutEstimate(
            name,
            layout,
            layout_cost(cost_model, new_bytes, layout),
            layout_benefit(replay, snapshot, layout, sample, thresholds=thresholds, table=table, sample_rows=rows),
        )
        for name, layout in candidates
    ]


def _workload_trees(
    sample: DataFrame, features: FeatureSet, replay: WorkloadReplay, snapshot: Snapshot, files: Sequence[DataFile]
) -> tuple[CutTree | None, CutTree | None]:
    """The workload's cut tree (`workload_cuts`) of file cuts alone, and grown on with row-group cuts
    where the job's files hold more than one (readers skip row groups by their footers): built once, the
    first is the second's `file_level` (the growth makes the file cuts first)."""
    partitions = len({f.partition for f in files}) or 1
    tree = workload_cuts(
        sample,
        features,
        replay.queries,
        replay.target_files,
        partitions=partitions,
        partition_columns=snapshot.partition_columns,
        row_groups=replay.row_groups,
    )
    if tree is None or not tree.has_row_groups:
        return tree, None
    files_only = tree.file_level()
    return (None if files_only.is_leaf else files_only), tree


@dataclass(frozen=True)
class LayoutEstimate:
    name: str
    features: FeatureSet
    cost: CostEstimate
    benefit: BenefitEstimate

    @property
    def net(self) -> float:
        return self.benefit.benefit - self.cost.seconds

    def summary(self) -> LayoutSummary:
        """The layout's line in the decision record."""
        return LayoutSummary(
            self.name,
            tuple(f.expression for f in self.features.z),
            tuple(j.helper for j in self.features.joined),
            tuple(f.predicate for f in self.features.sop),
            round(self.cost.seconds, 3),
            self.benefit.benefit,
            round(self.net, 3),
            round(self.benefit.p_after, 4),
        )


def row_groups_per_file(thresholds: Thresholds, snapshot: Snapshot, file_bytes: float) -> int:
    """About how many row groups a file of `file_bytes` the job writes holds: Parquet's writer closes a
    row group once the pages it holds reach the row-group size."""
    row_group_bytes = resolve_output(thresholds.output, snapshot.configuration).row_group_bytes
    return max(1, round(file_bytes / max(row_group_bytes, 1)))


def layout_cost(model: CostModel, new_bytes: int, features: FeatureSet) -> CostEstimate:
    """The model's cost, each joined feature counted as one more Z dimension (plus its lookup join)."""
    z = len(features.z) + len(features.joined)
    return model.predict(new_bytes, z, len(features.sop), len(features.z_add) + len(features.sop_add))


@dataclass(frozen=True)
class WorkloadReplay:
    """The workload and the files to rewrite as they are now: what every candidate layout of those
    files is measured against. Built once per decision (extended-stats index, footers, parsed filters,
    query projection); only the virtual files differ between layouts."""

    current: tuple[FileStats, ...]  # statistics of the files to rewrite, as deltaopt's pruning sees them
    current_standard: tuple[FileStats, ...]  # the same files as a standard reader sees them
    current_bytes: Mapping[str, Mapping[str, int]]  # their column sizes, from the footers
    bytes_per_row: Mapping[str, float]  # per column, for the virtual files
    target_files: int  # as many virtual files as the job would write
    queries: tuple[Query, ...]
    rate: QueryRate  # measured over the period the log covered
    expected_queries: float  # over the benefit horizon
    logged_queries: int
    stored: StoredBaseline | None = None  # what layouts' compression is measured against
    # their row groups from the footers (readers skip by them: docs/READERS.md), with bounds of the
    # `filtered` columns (lower case; the only ones a replayed filter tests), and about as many row
    # groups per virtual file as the job's files will hold
    current_groups: Mapping[str, tuple[RowGroup, ...]] = field(default_factory=dict)
    filtered: frozenset[str] = frozenset()
    row_groups: int = 1


def output_files(files: Sequence[DataFile], thresholds: Thresholds) -> int:
    """How many files the rewrite writes for `files`, as its writer counts (`Thresholds.file_count`):
    deltaopt's job, bytes / ``target_file_size`` rounded to the nearest, at least one; Delta's OPTIMIZE,
    one bin per partition, each max(1, its bytes / maxFileSize) in whole numbers (OptimizeExecutor)."""
    target = thresholds.target_file_size
    if thresholds.file_count == "nearest":
        return max(1, round(sum(f.size for f in files) / target))
    partitions: dict[tuple[tuple[str, str | None], ...], int] = {}
    for data_file in files:
        partitions[data_file.partition] = partitions.get(data_file.partition, 0) + data_file.size
    return sum(max(1, math.floor(size / target)) for size in partitions.values()) or 1


def workload_replay(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    *,
    records: Sequence[ScanRecord],
    thresholds: Thresholds,
    now: datetime,
    index: Mapping[str, ExtendedStats] | None = None,
    recorded_before_window: bool = False,
    locations: Mapping[str, str] | None = None,
) -> WorkloadReplay:
    """The replay of `records` on `files` as they are now. Files already laid out with joined features
    keep their joined ranges for deltaopt's readers, at the current versions of the dimensions
    `locations` ({table name: URI}) name, as a scan now would."""
    names = snapshot.features.logical_names
    sizes = {f.path: column_sizes(table, f, names) or {} for f in files}
    queries = tuple(workload_queries(records, now, thresholds.recency_half_life))
    filtered = frozenset(c for query in queries for c in column_names_of(query.predicate))
    types = {n: t for n, t in table_column_types(snapshot.spark_schema().fields).items() if n.lower() in filtered}
    groups = {f.path: file_row_groups(table, f, types, names) for f in files}
    target_files = output_files(files, thresholds)
    helpers = joined_helpers(records, locations or {})
    versions = dimension_versions(location for _, location, _ in helpers)
    current = [with_joined_ranges(s, helpers) for s in table_file_stats(table, snapshot, files, index, versions)]
    rate = project_rate(
        [r.ts for r in records],
        now,
        half_life=thresholds.recency_half_life,
        window=thresholds.workload_window,
        recorded_before_window=recorded_before_window,
        gap=thresholds.log_gap,
    )
    return WorkloadReplay(
        current=tuple(current),
        current_standard=tuple(table_file_stats(table, snapshot, files, {})),
        current_bytes=sizes,
        bytes_per_row=bytes_per_row([sizes[f.path] for f in files], [f.num_records or 0 for f in files]),
        target_files=target_files,
        current_groups={path: found for path, found in groups.items() if found},
        filtered=filtered,
        row_groups=row_groups_per_file(thresholds, snapshot, sum(f.size for f in files) / target_files),
        queries=queries,
        rate=rate,
        expected_queries=rate.expected(thresholds.benefit_horizon),
        logged_queries=len(records),
    )


def layout_benefit(
    replay: WorkloadReplay,
    snapshot: Snapshot,
    features: FeatureSet,
    sample: DataFrame,
    *,
    thresholds: Thresholds,
    table: TableAccess | None = None,
    every_reader: bool = True,
    sample_rows: Callable[[], int] | None = None,
) -> BenefitEstimate:
    """The benefit of laying out the replay's files on `features`, estimated on `sample` (their rows;
    `sample_rows()` of them, when the caller counts them once for all its layouts).
    With the replay's stored-bytes baseline (and `table` for scratch space), compression counts.
    Both kinds of reader are estimated for the record; with ``every_reader=False`` only those the
    table's `readers` give a share (all the search needs)."""
    stored = replay.stored if table is not None else None
    measure = layout_measure(table, stored) if table is not None and stored is not None else None
    if thresholds.stats_for_clustering_keys:  # the job adds the keys' statistics first: price what readers get
        snapshot = with_properties(snapshot, indexing_properties(snapshot, key_columns(features)))
    virtual = virtual_files(
        sample,
        snapshot,
        features,
        replay.target_files,
        measure,
        row_groups=(replay.row_groups, replay.filtered),
        rows=sample_rows,
        sorted_within=thresholds.sorted_within_files,
    )
    compression = None
    if stored is not None and virtual.written is not None:
        compression = layout_compression(stored, total_sizes(virtual.written.values()))
    virtual_bytes, virtual_groups = _at_todays_bytes(virtual, replay.bytes_per_row)
    views = {  # both kinds read through a Parquet reader that skips row groups (docs/READERS.md)
        "deltaopt": (replay.current, virtual.files, replay.current_groups, virtual_groups),
        "standard": (replay.current_standard, virtual.standard, replay.current_groups, virtual_groups),
    }
    by_reader = {
        reader: estimate_benefit(
            replay.queries,
            current,
            replay.current_bytes,
            files,
            virtual_bytes,
            expected=replay.expected_queries,
            cost_per_mb=thresholds.cost_per_mb_read,
            sample_rows=sum(virtual.rows.values()),
            queries_in_window=replay.logged_queries,
            rate=replay.rate,
            compression=compression,
            virtual_written=virtual.written if compression is not None else None,
            current_groups=current_groups,
            virtual_groups=groups,
        )
        for reader, (current, files, current_groups, groups) in views.items()
        if every_reader or thresholds.readers.get(reader, 0.0) > 0
    }
    return combine(by_reader, thresholds.readers)


def _at_todays_bytes(
    virtual: VirtualFiles, per_row: Mapping[str, float]
) -> tuple[dict[str, dict[str, float]], dict[str, tuple[RowGroup, ...]]]:
    """The virtual files' and row groups' column bytes at today's bytes per row (by their row counts)."""
    files = {path: {c: rows * b for c, b in per_row.items()} for path, rows in virtual.rows.items()}
    groups = {
        path: tuple(RowGroup(g, {c: (g.rows or 0) * b for c, b in per_row.items()}) for g in found)
        for path, found in virtual.groups.items()
    }
    return files, groups


def benefit_of(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    *,
    features: FeatureSet,
    sample: DataFrame,
    records: Sequence[ScanRecord],
    thresholds: Thresholds,
    now: datetime,
) -> BenefitEstimate:
    """One layout's benefit from scratch (what a single estimate costs, as the estimator benchmark
    times it); comparing layouts builds the `WorkloadReplay` once instead."""
    replay = workload_replay(table, snapshot, files, records=records, thresholds=thresholds, now=now)
    if thresholds.estimate_compression:
        baseline = measure_baseline(
            table, snapshot, files, sample=sample, target_files=replay.target_files, output=thresholds.output
        )
        replay = replace(replay, stored=baseline)
    return layout_benefit(replay, snapshot, features, sample, thresholds=thresholds, table=table)
