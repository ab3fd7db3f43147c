"""The decision: optimise when enough new, unclustered data has arrived and benefit - cost > 0.

`estimate` composes the pieces on a live table: the new files' bytes against the threshold, the
analyser's features, the cost model on those bytes and feature counts, and the benefit from virtual
files. With ``compare_layouts`` the analysed layout competes with Z-only, SOP-only and one-Z-fewer
variants on the same sample, and the best net benefit wins: combining SOP and Z-order adds a dimension
that can dilute the Z features (the thesis's own caveat), and measured benefits decide better than a
fixed rule. Every number that went into the decision is in the returned record.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from costmodel.benefit import MB, BenefitEstimate, combine
from costmodel.cost import CostEstimate, CostModel
from costmodel.rate import QueryRate, project_rate
from optimizer.analysis.analyser import Analysis, analyse
from optimizer.analysis.sample import evaluate, sample_frame
from optimizer.analysis.search import Score, SearchResult, best_single, greedy_search, layout_of
from optimizer.config import Thresholds
from optimizer.estimate.replay import Query, estimate_benefit, workload_queries
from optimizer.estimate.stored_bytes import StoredBaseline, layout_compression, layout_measure, measure_baseline
from optimizer.estimate.virtual_files import bytes_per_row, virtual_files
from optimizer.features import FeatureSet
from optimizer.skipping.extended import ExtendedStats, load_index
from optimizer.skipping.filestats import FileStats
from optimizer.skipping.scan import column_sizes, table_file_stats
from optimizer.table.access import DataFile, Snapshot
from optimizer.table.footers import total_sizes
from optimizer.table.key_stats import indexing_properties, key_columns, key_statistics, with_properties
from optimizer.table.output import resolve_output
from querylog.records import ScanRecord

LISTED_CANDIDATES = 200  # candidate reports a decision record lists (the analysis sorts features first)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import TableAccess
    from querylog.store import OlderRecords, QueryLogTable


@dataclass(frozen=True)
class Decision:
    table: str
    version: int
    action: str  # "optimize" or "skip"
    reason: str
    new_files: int
    new_bytes: int
    min_new_bytes: int
    net: float | None = None  # benefit - cost, cost units
    cost: CostEstimate | None = None
    benefit: BenefitEstimate | None = None
    features: dict[str, object] = field(default_factory=dict)
    analysis: dict[str, object] = field(default_factory=dict)
    layouts: list[dict[str, object]] = field(default_factory=list)  # every layout compared, with its numbers
    seconds: dict[str, float] = field(default_factory=dict)
    outside_window: dict[str, object] | None = None  # logged scans older than the workload window
    output: dict[str, object] | None = None  # codec and row groups OPTIMIZE would write with
    search: dict[str, Any] | None = None  # the benefit-driven feature search, candidate by candidate
    key_statistics: dict[str, Any] | None = None  # clustering keys without min/max, and the property change

    @property
    def optimize(self) -> bool:
        return self.action == "optimize"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["benefit"] = self.benefit.as_dict() if self.benefit else None
        return data


def decide(benefit: float, cost: float) -> tuple[str, str]:
    net = benefit - cost
    if net > 0:
        return "optimize", f"benefit {benefit:.1f} exceeds cost {cost:.1f} (net {net:+.1f} cluster-seconds)"
    return "skip", f"benefit {benefit:.1f} does not exceed cost {cost:.1f} (net {net:+.1f} cluster-seconds)"


def estimate(
    spark: SparkSession,
    table: TableAccess,
    table_id: str,
    log: QueryLogTable,
    thresholds: Thresholds,
    cost_model: CostModel,
    now: datetime,
    *,
    files: Sequence[DataFile] | None = None,
    seed: int = 17,
    snapshot: Snapshot | None = None,
    index: Mapping[str, ExtendedStats] | None = None,
) -> Decision:
    """Decide whether to optimise `files` (default: the files no deltaopt run clustered). A caller
    that already read the table passes its `snapshot` and the extended-stats `index` read with it."""
    clock = time.perf_counter()
    if snapshot is None or index is None:
        snapshot = table.snapshot()
        index = load_index(table, snapshot)
    new = list(files) if files is not None else [f for f in snapshot.files if f.path not in index]  # unclustered
    new_bytes = sum(f.size for f in new)
    base: dict[str, Any] = {
        "table": table_id,
        "version": snapshot.version,
        "new_files": len(new),
        "new_bytes": new_bytes,
        "min_new_bytes": thresholds.min_new_bytes,
        "output": resolve_output(thresholds.output, snapshot.configuration).as_dict(),
    }
    if new_bytes < thresholds.min_new_bytes or not new:
        return Decision(
            **base,
            action="skip",
            reason=f"too little new data: {new_bytes:,} bytes < threshold {thresholds.min_new_bytes:,}",
        )
    window_start = now - timedelta(seconds=thresholds.workload_window)
    records = log.read(table_id, since=window_start, until=now)
    older = log.older(table_id, window_start)
    base["outside_window"] = older.as_dict()
    sample = sample_frame(
        spark, table, snapshot, new, thresholds.sample_rows, seed, thresholds.sample_scan_bytes
    ).cache()
    inputs = _Inputs(table, snapshot, index, new, sample, records, older, thresholds, cost_model, now)
    try:
        return _decide_on_sample(inputs, base, started=clock)
    finally:
        sample.unpersist()


@dataclass(frozen=True)
class _Inputs:
    """What one estimate reads once and every step shares: the table as of one snapshot, its new files
    and their cached sample, and the workload in the window."""

    table: TableAccess
    snapshot: Snapshot
    index: Mapping[str, ExtendedStats]
    new: list[DataFile]
    sample: DataFrame
    records: list[ScanRecord]
    older: OlderRecords
    thresholds: Thresholds
    cost_model: CostModel
    now: datetime


def _decide_on_sample(inputs: _Inputs, base: dict[str, Any], *, started: float) -> Decision:
    """Analyse, search (in benefit mode) and compare layouts on the cached sample; the best net wins."""
    i, thresholds = inputs, inputs.thresholds
    analysis: Analysis = analyse(base["table"], i.records, lambda z, s: evaluate(i.sample, z, s), thresholds, i.now)
    seconds = {"analyse": time.perf_counter() - started}
    features = analysis.features
    if features.is_empty:
        reason = "no clustering features: the workload's filters give none" + _window_note(i.older, i.records)
        return Decision(**base, action="skip", reason=reason, analysis=_summary(analysis), seconds=_rounded(seconds))
    replay = workload_replay(i.table, i.snapshot, i.new, i.records, thresholds, i.now, i.index, i.older.count > 0)
    search = None
    if thresholds.selection == "benefit":
        new_bytes = base["new_bytes"]
        search = search_features(replay, i.snapshot, i.sample, features, thresholds, i.cost_model, new_bytes)
        seconds["search"] = search.seconds
        features = search.features
        if features.is_empty:
            return Decision(
                **base,
                action="skip",
                reason="no clustering feature pays for itself: " + search.stopped,
                analysis=_summary(analysis),
                seconds=_rounded(seconds),
                search=search.as_dict(),
            )
    clock = time.perf_counter()
    evaluated = evaluate_layouts(i.table, i.snapshot, i.new, i.sample, replay, features, thresholds, i.cost_model)
    seconds["benefit"] = time.perf_counter() - clock
    best = max(evaluated, key=lambda e: e.net)
    action, reason = decide(best.benefit.benefit, best.cost.seconds)
    reason += "; " + _basis(best.benefit)
    if len(evaluated) > 1:
        reason += f"; layout: {best.name} (of {', '.join(e.name for e in evaluated)})"
    note, keys = key_statistics(i.snapshot, best.features, thresholds.stats_for_clustering_keys)
    return Decision(
        **base,
        action=action,
        reason=reason + note,
        key_statistics=keys,
        net=round(best.net, 4),
        cost=best.cost,
        benefit=best.benefit,
        features=best.features.as_dict(),
        analysis=_summary(analysis),
        layouts=[e.summary() for e in evaluated],
        seconds=_rounded(seconds),
        search=search.as_dict() if search is not None else None,
    )


def _rounded(seconds: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in seconds.items()}


def search_features(
    replay: WorkloadReplay,
    snapshot: Snapshot,
    sample: DataFrame,
    pool: FeatureSet,
    thresholds: Thresholds,
    cost_model: CostModel,
    new_bytes: int,
) -> SearchResult:
    """The greedy search (`optimizer.analysis.search`) over the analyser's pool, each layout scored
    by its skipping benefit on virtual files of `sample` (no scratch writes: compression is priced
    once, on the layouts that `evaluate_layouts` compares afterwards) against the cost model. When no
    feature pays on skipping alone, the one that came closest is returned for that full estimate."""

    def score(layout: FeatureSet) -> Score:
        benefit = layout_benefit(replay, snapshot, layout, sample, thresholds, every_reader=False)
        return Score(benefit.benefit, layout_cost(cost_model, new_bytes, layout).seconds)

    result = greedy_search(
        pool,
        score,
        max_z=thresholds.max_z_features,
        max_sop=thresholds.max_sop_features,
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
    sample: DataFrame,
    replay: WorkloadReplay,
    features: FeatureSet,
    thresholds: Thresholds,
    cost_model: CostModel,
) -> list[LayoutEstimate]:
    """Cost and benefit of the analysed layout and its variants (`candidate_layouts`), each measured
    on the same sample against the same replay (and, when enabled, the same stored-bytes baseline)."""
    if thresholds.estimate_compression:
        baseline = measure_baseline(table, snapshot, files, sample, replay.target_files, thresholds.output)
        replay = replace(replay, stored=baseline)
    candidates = candidate_layouts(features) if thresholds.compare_layouts else [("as analysed", features)]
    new_bytes = sum(f.size for f in files)
    return [
        LayoutEstimate(
            name,
            layout,
            layout_cost(cost_model, new_bytes, layout),
            layout_benefit(replay, snapshot, layout, sample, thresholds, table),
        )
        for name, layout in candidates
    ]


@dataclass(frozen=True)
class LayoutEstimate:
    name: str
    features: FeatureSet
    cost: CostEstimate
    benefit: BenefitEstimate

    @property
    def net(self) -> float:
        return self.benefit.benefit - self.cost.seconds

    def summary(self) -> dict[str, object]:
        return {
            "layout": self.name,
            "z": [f.expression for f in self.features.z],
            "sop": [f.predicate for f in self.features.sop],
            "cost": round(self.cost.seconds, 3),
            "benefit": self.benefit.benefit,
            "net": round(self.net, 3),
            "p_after": round(self.benefit.p_after, 4),
        }


def candidate_layouts(features: FeatureSet) -> list[tuple[str, FeatureSet]]:
    """The analysed layout and variants the estimator compares (the thesis's own future work: let the
    benefit estimate pick the features). A feature left out of clustering keeps its statistics."""
    candidates = [("as analysed", features)]
    if features.z and features.sop:
        candidates.append(
            ("Z-order only", FeatureSet(z=features.z, z_add=features.z_add, sop_add=(*features.sop, *features.sop_add)))
        )
        candidates.append(
            (
                "SOP only",
                FeatureSet(
                    sop=features.sop,
                    sop_add=features.sop_add,
                    z_add=(*features.z, *features.z_add),
                    sop_weights=features.sop_weights,
                ),
            )
        )
    if len(features.z) >= 2:
        candidates.append(
            (
                f"without Z feature {features.z[-1].expression}",
                FeatureSet(
                    z=features.z[:-1],
                    sop=features.sop,
                    z_add=(features.z[-1], *features.z_add),
                    sop_add=features.sop_add,
                    sop_weights=features.sop_weights,
                ),
            )
        )
    return candidates


def layout_cost(model: CostModel, new_bytes: int, features: FeatureSet) -> CostEstimate:
    return model.predict(new_bytes, len(features.z), len(features.sop), len(features.z_add) + len(features.sop_add))


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


def workload_replay(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    records: Sequence[ScanRecord],
    thresholds: Thresholds,
    now: datetime,
    index: Mapping[str, ExtendedStats] | None = None,
    recorded_before_window: bool = False,
) -> WorkloadReplay:
    sizes = {f.path: column_sizes(table, f) or {} for f in files}
    rate = project_rate(
        [r.ts for r in records],
        now,
        half_life=thresholds.recency_half_life,
        window=thresholds.workload_window,
        recorded_before_window=recorded_before_window,
        gap=thresholds.log_gap,
    )
    return WorkloadReplay(
        current=tuple(table_file_stats(table, snapshot, files, index)),
        current_standard=tuple(table_file_stats(table, snapshot, files, {})),
        current_bytes=sizes,
        bytes_per_row=bytes_per_row([sizes[f.path] for f in files], [f.num_records or 0 for f in files]),
        target_files=max(1, round(sum(f.size for f in files) / thresholds.target_file_size)),
        queries=tuple(workload_queries(records, now, thresholds.recency_half_life)),
        rate=rate,
        expected_queries=rate.expected(thresholds.benefit_horizon),
        logged_queries=len(records),
    )


def layout_benefit(
    replay: WorkloadReplay,
    snapshot: Snapshot,
    features: FeatureSet,
    sample: DataFrame,
    thresholds: Thresholds,
    table: TableAccess | None = None,
    every_reader: bool = True,
) -> BenefitEstimate:
    """The benefit of laying out the replay's files on `features`, estimated on `sample` (their rows).
    With the replay's stored-bytes baseline (and `table` for scratch space), compression counts.
    Both kinds of reader are estimated for the record; with ``every_reader=False`` only those the
    table's `readers` give a share (all the search needs)."""
    stored = replay.stored if table is not None else None
    measure = layout_measure(table, stored) if table is not None and stored is not None else None
    if thresholds.stats_for_clustering_keys:  # the job adds the keys' statistics first: price what readers get
        snapshot = with_properties(snapshot, indexing_properties(snapshot, key_columns(features)))
    virtual = virtual_files(sample, snapshot, features, replay.target_files, measure)
    compression = None
    if stored is not None and virtual.written is not None:
        compression = layout_compression(stored, total_sizes(virtual.written.values()))
    per_row = replay.bytes_per_row
    virtual_bytes = {path: {c: rows * b for c, b in per_row.items()} for path, rows in virtual.rows.items()}
    views = {"deltaopt": (replay.current, virtual.files), "standard": (replay.current_standard, virtual.standard)}
    by_reader = {
        reader: estimate_benefit(
            replay.queries,
            current,
            replay.current_bytes,
            files,
            virtual_bytes,
            replay.expected_queries,
            thresholds.cost_per_mb_read,
            sum(virtual.rows.values()),
            replay.logged_queries,
            rate=replay.rate,
            compression=compression,
            virtual_written=virtual.written if compression is not None else None,
        )
        for reader, (current, files) in views.items()
        if every_reader or thresholds.readers.get(reader, 0.0) > 0
    }
    return combine(by_reader, thresholds.readers)


def benefit_of(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    features: FeatureSet,
    sample: DataFrame,
    records: Sequence[ScanRecord],
    thresholds: Thresholds,
    now: datetime,
) -> BenefitEstimate:
    """One layout's benefit from scratch (what a single estimate costs, as the estimator benchmark
    times it); comparing layouts builds the `WorkloadReplay` once instead."""
    replay = workload_replay(table, snapshot, files, records, thresholds, now)
    if thresholds.estimate_compression:
        baseline = measure_baseline(table, snapshot, files, sample, replay.target_files, thresholds.output)
        replay = replace(replay, stored=baseline)
    return layout_benefit(replay, snapshot, features, sample, thresholds, table)


def _basis(benefit: BenefitEstimate) -> str:
    """The figures behind a benefit, in words an operator can check."""
    rate = benefit.rate
    measured = (
        f"{rate.per_day:,.0f} queries/day measured over {rate.covered_seconds / 3600:,.1f} h of log"
        if rate is not None
        else "query rate unknown"
    )
    c = benefit.compression
    compression = (
        f"; stored bytes x{c.ratio:.2f} ({c.codec_before} -> {c.codec_after}, compaction and clustering)"
        if c is not None
        else ""
    )
    readers = "; ".join(
        f"{name} readers ({figures['share']:.0%}) {figures['bytes_per_query_before'] / MB:,.2f} -> "
        f"{figures['bytes_per_query_after'] / MB:,.2f}"
        for name, figures in benefit.readers.items()
    )
    return (
        f"{benefit.expected_queries:,.0f} queries expected ({measured}); "
        f"{benefit.bytes_per_query_before / MB:,.2f} -> {benefit.bytes_per_query_after / MB:,.2f} MB per query"
        + (f" ({readers})" if readers else "")
        + compression
    )


def _window_note(older: OlderRecords, records: Sequence[ScanRecord]) -> str:
    """What the window left out, when that may be why there is nothing to decide on."""
    if not older.count:
        return ""
    first = older.first.isoformat() if older.first else "?"
    last = older.last.isoformat() if older.last else "?"
    return f" ({len(records)} scans in the window; {older.count} older scans, {first} .. {last}, are outside it)"


def _summary(analysis: Analysis) -> dict[str, object]:
    """The analysis in the decision record; its candidate list is bounded (features first), so one
    line stays readable whatever the log holds."""
    listed = analysis.candidates[:LISTED_CANDIDATES]
    summary: dict[str, object] = {
        "scans": analysis.scans,
        "malformed_rows": analysis.malformed_rows,
        "sample_rows": analysis.sample_rows,
        "candidates": [{"feature": c.feature, "role": c.role.value, "reason": c.reason} for c in listed],
        "from_joins": analysis.from_joins,  # features that stand for dimension filters, and which
    }
    if len(analysis.candidates) > len(listed):
        summary["candidates_not_listed"] = len(analysis.candidates) - len(listed)
    return summary
