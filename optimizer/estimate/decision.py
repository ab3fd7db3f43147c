"""The decision: optimise when enough new, unclustered data has arrived and benefit - cost > 0.

`estimate` composes the pieces on a live table: the new files' bytes against the threshold, the
analyser's features, the cost model on those bytes and feature counts, and the benefit from virtual
files. With ``compare_layouts`` the analysed layout competes with Z-only, SOP-only and one-Z-fewer
variants on the same sample, and the best net benefit wins: combining SOP and Z-order adds a dimension
that can dilute the Z features (the thesis's own caveat), and measured benefits decide better than a
fixed rule. Every number that went into the decision is in the returned record.

A context with a `calibration` (the table's realised / estimated factor, `costmodel.benefit`) has every
benefit scaled by it before it is weighed against its cost: the feature search chooses, the layouts
compete, and the verdict is made, on the corrected figures; the record keeps the raw benefit beside
its factor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from costmodel.benefit import Calibration, calibrated
from costmodel.cost import CostModel
from optimizer.analysis.analyser import Analysis, analyse
from optimizer.analysis.context import TableContext, cached_sample
from optimizer.analysis.sample import evaluate
from optimizer.config import Thresholds
from optimizer.estimate.layouts import WorkloadReplay, evaluate_layouts, search_features, workload_replay
from optimizer.estimate.record import AnalysisSummary, Decision, KeyStatistics, NewData, basis, decide, window_note
from optimizer.features import FeatureSet, JoinedFeature
from optimizer.skipping.extended import ExtendedStats, load_index
from optimizer.table.access import DataFile, Snapshot
from optimizer.table.key_stats import key_statistics
from optimizer.table.output import resolve_output
from optimizer.verdict import Verdict
from querylog.records import ScanRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from optimizer.analysis.search import SearchResult
    from optimizer.table.access import TableAccess
    from querylog.store import OlderRecords

# the part of a feature set a job can lay out, and what it cannot (named in the decision's reason)
Applies = Callable[[FeatureSet], tuple[FeatureSet, list[str]]]


def estimate(
    context: TableContext,
    *,
    files: Sequence[DataFile] | None = None,
    seed: int = 17,
    snapshot: Snapshot | None = None,
    index: Mapping[str, ExtendedStats] | None = None,
    applies: Applies | None = None,
) -> Decision:
    """Decide whether to optimise `files` (default: the files no deltaopt run clustered). A caller
    that already read the table passes its `snapshot` and the extended-stats `index` read with it.
    `applies` is the part of a feature set the job that will run can lay out (Delta's own OPTIMIZE
    cannot apply SOP features, for one): only that part is searched and priced."""
    clock = time.perf_counter()
    table, table_id, log, now = context.table, context.table_id, context.log, context.now
    thresholds = context.thresholds
    if snapshot is None or index is None:
        snapshot = table.snapshot()
        index = load_index(table, snapshot)
    new = list(files) if files is not None else [f for f in snapshot.files if f.path not in index]  # unclustered
    new_bytes = sum(f.size for f in new)
    output = resolve_output(thresholds.output, snapshot.configuration)
    stated = NewData(table_id, snapshot.version, len(new), new_bytes, thresholds.min_new_bytes, output)
    if new_bytes < thresholds.min_new_bytes or not new:
        reason = f"too little new data: {new_bytes:,} bytes < threshold {thresholds.min_new_bytes:,}"
        return Decision(stated, Verdict.SKIP, reason)
    window_start = now - timedelta(seconds=thresholds.workload_window)
    records = log.read(table_id, since=window_start, until=now)
    older = log.older(table_id, window_start)
    stated = replace(stated, outside_window=older)
    with cached_sample(context, snapshot, new, seed=seed) as sample:
        inputs = _Inputs(
            table, snapshot, index, new, sample, records, older, thresholds, context.cost_model, now, context.locations
        )
        inputs = replace(inputs, applies=applies, calibration=context.calibration)
        return _decide_on_sample(inputs, stated, started=clock)


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
    locations: Mapping[str, str]  # other tables by name: the dimensions joined features read
    applies: Applies | None = None  # what the job can lay out of a feature set (None: all of it)
    calibration: Calibration | None = None  # the table's realised / estimated factor (None: raw benefits)

    def analyse(self, table: str) -> Analysis:
        """The analysis of the window's records on the sample (joined features among `locations`)."""
        evaluator = lambda z, s: evaluate(self.sample, z, s)  # noqa: E731
        return analyse(table, self.records, evaluator, self.thresholds, self.now, locations=self.locations)

    def replay(self) -> WorkloadReplay:
        """The window's queries replayed on the new files' current statistics: the "before" of every layout."""
        return workload_replay(
            self.table,
            self.snapshot,
            self.new,
            records=self.records,
            thresholds=self.thresholds,
            now=self.now,
            index=self.index,
            recorded_before_window=self.older.count > 0,
            locations=self.locations,
        )


@dataclass(frozen=True)
class _Found:
    """What an estimate knows before it compares layouts: the new data, the analysis, each step's time,
    the feature search (benefit mode) and what the reason says of features the job cannot apply."""

    stated: NewData
    analysis: AnalysisSummary
    seconds: Mapping[str, float]
    note: str = ""
    search: SearchResult | None = None

    def skip(self, reason: str) -> Decision:
        """Nothing to lay out: the record keeps the analysis (and the search) that found so."""
        seconds = _rounded(self.seconds)
        return Decision(self.stated, Verdict.SKIP, reason, analysis=self.analysis, seconds=seconds, search=self.search)


def _decide_on_sample(inputs: _Inputs, stated: NewData, *, started: float) -> Decision:
    """Analyse, search (in benefit mode) and compare layouts on the cached sample; the best net wins."""
    i = inputs
    analysis = i.analyse(stated.table)
    analysed, note = _applicable(i.applies, analysis.features)
    found = _Found(stated, AnalysisSummary.of(analysis), {"analyse": time.perf_counter() - started}, note)
    joined = analysed.joined  # not searched: the layouts compared below are with and without them
    features = replace(analysed, joined=())
    if features.is_empty and not joined:
        return found.skip("no clustering features: the workload's filters give none" + window_note(i.older, i.records))
    replay = i.replay()
    if i.thresholds.selection == "benefit":
        search = search_features(
            replay,
            i.snapshot,
            i.sample,
            features,
            thresholds=i.thresholds,
            cost_model=i.cost_model,
            new_bytes=stated.new_bytes,
            calibration=i.calibration,
        )
        found = replace(found, seconds={**found.seconds, "search": search.seconds}, search=search)
        features = search.features
        if features.is_empty and not joined:
            return found.skip("no clustering feature pays for itself: " + search.stopped)
    return _compare_layouts(i, found, replay, features, joined)


def _compare_layouts(
    inputs: _Inputs, found: _Found, replay: WorkloadReplay, features: FeatureSet, joined: Sequence[JoinedFeature]
) -> Decision:
    """Price `features`' layouts (with and without the `joined` features) on the sample against the same
    replay: the best net decides, and the record keeps every layout's figures."""
    i, clock = inputs, time.perf_counter()
    evaluated = evaluate_layouts(
        i.table,
        i.snapshot,
        i.new,
        sample=i.sample,
        replay=replay,
        features=features,
        thresholds=i.thresholds,
        cost_model=i.cost_model,
        joined=joined,
        hilbert=i.applies is None,  # Delta's commands lay out no deltaopt curve: price only what they apply
    )
    seconds = {**found.seconds, "benefit": time.perf_counter() - clock}
    evaluated = [replace(e, benefit=calibrated(e.benefit, i.calibration)) for e in evaluated]
    best = max(evaluated, key=lambda e: e.net)
    action, reason = decide(best.benefit.benefit, best.cost.seconds, calibration=best.benefit.calibration)
    reason += "; " + basis(best.benefit)
    if len(evaluated) > 1:
        reason += f"; layout: {best.name} (of {', '.join(e.name for e in evaluated)})"
    stats_note, keys = key_statistics(i.snapshot, best.features, i.thresholds.stats_for_clustering_keys)
    return Decision(
        found.stated,
        action,
        reason + found.note + stats_note,
        net=round(best.net, 4),
        cost=best.cost,
        benefit=best.benefit,
        features=best.features,
        layout=best.name if len(evaluated) > 1 else None,
        analysis=found.analysis,
        layouts=tuple(e.summary() for e in evaluated),
        seconds=_rounded(seconds),
        search=found.search,
        key_statistics=KeyStatistics.from_dict(keys) if keys is not None else None,
    )


def _applicable(applies: Applies | None, features: FeatureSet) -> tuple[FeatureSet, str]:
    """The part of `features` the job can apply, and what the reason says of the rest."""
    if applies is None:
        return features, ""
    kept, left = applies(features)
    return kept, (f"; priced as the job can apply it, without {', '.join(left)}" if left else "")


def _rounded(seconds: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in seconds.items()}
