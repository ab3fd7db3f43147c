"""The workload analyser: thesis Algorithm 1, with every candidate's fate explained.

P1-P2  Z candidates: left sides of Z-shaped conjuncts; those with fewer than theta distinct comparison
       points are dropped (their whole predicates become SOP candidates).
P3-P4  Z correlation graph on the sample (sort-index, both directions) and traversal: the primaries are
       Z, the correlated and the unvisited are Z_add (statistics only).
P5-P6  SOP candidates: whole predicates that are not Z-shaped, or whose left side is not in Z or Z_add;
       those below the frequency share gamma are dropped.
P7-P8  SOP correlation graph (mean-square contingency) and traversal: S and S_add.

With ``selection: benefit`` (the default) the gates only pre-filter: a Z family needs changing literals
(two or more comparison points), a candidate needs ``min_candidate_share`` of the scans, and up to
``search_candidates`` primaries of each graph form the pool from which `optimizer.analysis.search` chooses by
estimated marginal benefit. With ``selection: frequency`` theta, gamma and the feature limits decide,
as in the thesis.

Beyond the thesis: features are checked against the evaluation allow-list and evaluated one by one,
so a bad one is "not evaluable" instead of fatal; a feature constant on the sample never takes part in a
correlation (the thesis's false positive) and is kept for statistics only; a SOP feature true on every
sampled row is dropped (it can never let a file be skipped).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import networkx as nx

from optimizer.analysis.correlation import sop_correlation_graph, z_correlation_graph
from optimizer.analysis.join_sources import join_sources
from optimizer.analysis.joined import choose_joined, joined_candidates
from optimizer.analysis.sample import Evaluation
from optimizer.analysis.traversal import Traversal, traverse
from optimizer.analysis.workload import PredicateUse, Workload, ZCandidate, sop_candidates, summarize
from optimizer.config import Thresholds
from optimizer.features import FeatureSet, JoinedFeature, SopFeature, ZFeature
from querylog.records import ScanRecord

MAX_EVALUATED = 128  # candidates of each kind evaluated on the sample: bounds the analysis's memory

Evaluator = Callable[[Sequence[str], Sequence[str]], Evaluation]


class Role(StrEnum):
    Z = "z"
    SOP = "sop"
    Z_ADD = "z_add"
    SOP_ADD = "sop_add"
    REJECTED = "rejected"


@dataclass(frozen=True)
class CandidateReport:
    kind: str  # "z" (an expression), "sop" (a whole predicate) or "joined" (a dimension attribute)
    feature: str
    role: Role
    reason: str
    frequency: float
    share: float
    scans: int
    comparison_points: int | None = None
    correlated_with: str | None = None
    index: float | None = None


@dataclass(frozen=True)
class Analysis:
    table: str
    scans: int
    unfiltered_scans: int
    window_start: datetime | None
    window_end: datetime | None
    sample_rows: int
    features: FeatureSet
    candidates: tuple[CandidateReport, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    malformed_rows: int = 0
    from_joins: dict[str, dict[str, object]] = field(default_factory=dict)  # feature -> dimension filters

    def as_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "scans": self.scans,
            "unfiltered_scans": self.unfiltered_scans,
            "malformed_rows": self.malformed_rows,
            "window": [self.window_start, self.window_end],
            "sample_rows": self.sample_rows,
            "features": self.features.as_dict(),
            "candidates": [{**asdict(c), "role": c.role.value} for c in self.candidates],
            "seconds": self.seconds,
            "from_joins": self.from_joins,
        }


def analyse(
    table: str,
    records: Iterable[ScanRecord],
    evaluator: Evaluator,
    thresholds: Thresholds,
    now: datetime,
    *,
    locations: Mapping[str, str] | None = None,
) -> Analysis:
    """Choose Z, S, Z_add and S_add for `table` from its scans, evaluating candidates with `evaluator`
    (``(z_expressions, sop_predicates) -> Evaluation`` on a data sample), and the joined features
    (dimension attributes with changing literals, `analysis.joined`) among the tables at `locations`."""
    clock = time.perf_counter()
    seconds: dict[str, float] = {}
    records = list(records)
    workload = summarize(records, now, thresholds.recency_half_life)
    seconds["workload"] = time.perf_counter() - clock
    gate = _gate(thresholds)
    min_frequency = gate.share * workload.weight
    z = _choose(_z_kind(workload, evaluator, gate), min_frequency)
    seconds.update(z.seconds)
    clock = time.perf_counter()
    sop = _choose(_sop_kind(workload, {*z.chosen, *z.additional}, evaluator, gate), min_frequency)
    seconds["sop"] = time.perf_counter() - clock
    joined, joined_reports = _joined(records, workload.weight, locations or {}, thresholds, now)
    reports = [*z.reports, *sop.reports, *joined_reports]
    features = FeatureSet(
        z=tuple(ZFeature(e) for e in z.chosen),
        sop=tuple(SopFeature(p) for p in sop.chosen),
        z_add=tuple(ZFeature(e) for e in z.additional),
        sop_add=tuple(SopFeature(p) for p in sop.additional),
        sop_weights={p: round(sop.frequency[p], 6) for p in sop.chosen},
        joined=tuple(joined),
    )
    order = {Role.Z: 0, Role.SOP: 1, Role.Z_ADD: 2, Role.SOP_ADD: 3, Role.REJECTED: 4}
    reports.sort(key=lambda r: (order[r.role], -r.frequency, r.feature))
    return Analysis(
        table=table,
        scans=workload.scans,
        unfiltered_scans=workload.unfiltered_scans,
        window_start=workload.first,
        window_end=workload.last,
        sample_rows=max(z.rows, sop.rows),
        features=features,
        candidates=tuple(reports),
        seconds={k: round(v, 4) for k, v in seconds.items()},
        malformed_rows=workload.malformed,
        from_joins=join_sources(records, [*z.chosen, *z.additional, *sop.chosen, *sop.additional]),
    )


@dataclass(frozen=True)
class _Kind:
    """What differs between choosing Z features and SOP features; `_choose` is the one algorithm."""

    name: str  # "z" (expressions) or "sop" (whole predicates)
    label: str  # "Z" or "SOP", in reasons
    measure: str  # the correlation measure, in reasons
    primary: Role
    additional: Role
    limit: int  # primaries kept by the traversal
    candidates: Mapping[str, ZCandidate] | Mapping[str, PredicateUse]  # frequency and scans of each
    workload: Workload
    prefilter: Callable[[str], str | None]  # why a candidate is rejected before evaluation, or None
    evaluate: Callable[[list[str]], tuple[Mapping[str, Any], Evaluation]]  # samples per candidate
    set_aside: Callable[[Mapping[str, Any]], list[tuple[str, Role, str]]]  # constant / always / never
    graph: Callable[[Mapping[str, Any]], nx.Graph]
    chosen_reason: Callable[[str], str]
    gate: Gate


@dataclass(frozen=True)
class _Choice:
    chosen: list[str]
    additional: list[str]  # statistics only
    reports: list[CandidateReport]
    frequency: Mapping[str, float]
    rows: int
    seconds: dict[str, float]


def _choose(kind: _Kind, min_frequency: float) -> _Choice:
    """Pre-filter, evaluate on the sample, set aside what cannot cluster, build the correlation graph
    and traverse it: primaries are chosen, correlated and unvisited candidates keep statistics."""
    reports = _Reports(kind)
    seconds: dict[str, float] = {}
    kept = []
    for feature in kind.candidates:
        problem = kind.prefilter(feature)
        if problem is None:
            kept.append(feature)
        else:
            reports.add(feature, Role.REJECTED, problem)
    if len(kept) > MAX_EVALUATED:  # a log of generated queries can hold 100,000s of distinct conjuncts
        kept.sort(key=lambda f: (-kind.candidates[f].frequency, f))
        for feature in kept[MAX_EVALUATED:]:
            reason = f"not among the {MAX_EVALUATED} most frequent {kind.label} candidates evaluated on the sample"
            reports.add(feature, Role.REJECTED, reason)
        kept = kept[:MAX_EVALUATED]
    clock = time.perf_counter()
    samples, evaluation = kind.evaluate(kept) if kept else ({}, Evaluation())
    seconds[f"{kind.name}_sample"] = time.perf_counter() - clock
    for feature, problem in evaluation.failures.items():
        reports.add(feature, Role.REJECTED, problem)
    aside = kind.set_aside(samples)
    clock = time.perf_counter()
    graph = kind.graph({f: v for f, v in samples.items() if f not in {a for a, _, _ in aside}})
    seconds[f"{kind.name}_graph"] = time.perf_counter() - clock
    frequency = {f: kind.candidates[f].frequency for f in graph.nodes}
    walk = traverse(graph, frequency, kind.limit, min_frequency)
    chosen = [str(v) for v in walk.primary]
    for name in chosen:
        reports.add(name, kind.primary, kind.chosen_reason(name))
    additional = _report_statistics_only(kind, walk, frequency, min_frequency, reports)
    for feature, role, reason in aside:
        if role is not Role.REJECTED:
            additional.append(feature)
        reports.add(feature, role, reason)
    every = {f: c.frequency for f, c in kind.candidates.items()}
    return _Choice(chosen, additional, reports.reports, every, evaluation.rows, seconds)


class _Reports:
    """Every candidate's report of one kind, with the numbers the workload gives it."""

    def __init__(self, kind: _Kind) -> None:
        self.kind = kind
        self.reports: list[CandidateReport] = []

    def add(self, feature: str, role: Role, reason: str, **extra: object) -> None:
        candidate = self.kind.candidates[feature]
        self.reports.append(
            CandidateReport(
                self.kind.name,
                feature,
                role,
                reason,
                round(candidate.frequency, 4),
                round(self.kind.workload.share(candidate.frequency), 4),
                candidate.scans,
                len(candidate.points) if isinstance(candidate, ZCandidate) else None,
                **extra,  # type: ignore[arg-type]
            )
        )


def _report_statistics_only(
    kind: _Kind, walk: Traversal, frequency: Mapping[str, float], min_frequency: float, reports: _Reports
) -> list[str]:
    """The graph's correlated and unvisited vertices: they keep statistics, and their reports say why."""
    additional: list[str] = []
    for vertex, (correlated_with, index) in walk.correlated.items():
        additional.append(str(vertex))
        reports.add(
            str(vertex),
            kind.additional,
            f"correlated with {correlated_with} ({kind.measure} {index}); statistics only",
            correlated_with=str(correlated_with),
            index=index,
        )
    for vertex in walk.unvisited:
        additional.append(str(vertex))
        if frequency[str(vertex)] < min_frequency:
            reason = f"infrequent (share < {kind.gate.share_name}={kind.gate.share}); statistics only"
        else:
            reason = f"over the limit of {kind.limit} {kind.label} features; statistics only"
        reports.add(str(vertex), kind.additional, reason)
    return additional


def _z_kind(workload: Workload, evaluator: Evaluator, gate: Gate) -> _Kind:
    """Z candidates: expressions compared with changing literals (Algorithm 1, P1-P4)."""
    candidates = workload.z

    def prefilter(expression: str) -> str | None:
        points = len(candidates[expression].points)
        if points >= gate.points:
            return None
        return (
            f"too few comparison points ({points} < {gate.points_name}={gate.points}); "
            "its predicates are SOP candidates"
        )

    def evaluate(kept: list[str]) -> tuple[Mapping[str, Any], Evaluation]:
        evaluation = evaluator(kept, [])
        return evaluation.z, evaluation

    def set_aside(samples: Mapping[str, Any]) -> list[tuple[str, Role, str]]:
        reason = "constant on the sample: clustering cannot narrow its ranges; statistics only"
        return [(e, Role.Z_ADD, reason) for e in sorted(e for e, s in samples.items() if s.distinct < 2)]

    return _Kind(
        name="z",
        label="Z",
        measure="sort-index",
        primary=Role.Z,
        additional=Role.Z_ADD,
        limit=gate.max_z,
        candidates=candidates,
        workload=workload,
        prefilter=prefilter,
        evaluate=evaluate,
        set_aside=set_aside,
        graph=lambda samples: z_correlation_graph(samples, gate.z_epsilon),
        gate=gate,
        chosen_reason=lambda e: (
            f"{gate.verdict}: {len(candidates[e].points)} comparison points, "
            f"{workload.share(candidates[e].frequency):.0%} of scans"
        ),
    )


def _sop_kind(workload: Workload, z_kept: set[str], evaluator: Evaluator, gate: Gate) -> _Kind:
    """SOP candidates: whole predicates not covered by a Z feature (Algorithm 1, P5-P8)."""
    candidates = sop_candidates(workload, z_kept)
    bits: dict[str, Any] = {}

    def prefilter(predicate: str) -> str | None:
        frequency = candidates[predicate].frequency
        if frequency >= gate.share * workload.weight:
            return None
        return f"infrequent ({workload.share(frequency):.1%} of scans < {gate.share_name}={gate.share:.0%})"

    def evaluate(kept: list[str]) -> tuple[Mapping[str, Any], Evaluation]:
        evaluation = evaluator([], kept)
        bits.update(evaluation.sop)
        return evaluation.sop, evaluation

    def set_aside(samples: Mapping[str, Any]) -> list[tuple[str, Role, str]]:
        always = "true on every sampled row: it can never let a file be skipped"
        never = "false on every sampled row: no clustering needed; statistics only"
        return [(p, Role.REJECTED, always) for p in sorted(samples) if samples[p].all()] + [
            (p, Role.SOP_ADD, never) for p in sorted(samples) if not samples[p].any()
        ]

    return _Kind(
        name="sop",
        label="SOP",
        measure="mean-square contingency",
        primary=Role.SOP,
        additional=Role.SOP_ADD,
        limit=gate.max_sop,
        candidates=candidates,
        workload=workload,
        prefilter=prefilter,
        evaluate=evaluate,
        set_aside=set_aside,
        graph=lambda samples: sop_correlation_graph(samples, gate.sop_phi),
        gate=gate,
        chosen_reason=lambda p: (
            f"{gate.verdict}: {workload.share(candidates[p].frequency):.0%} of scans, "
            f"true on {bits[p].mean():.1%} of sampled rows"
        ),
    )


@dataclass(frozen=True)
class Gate:
    """The analyser's thresholds as the selection mode applies them."""

    points: int  # comparison points a Z family needs
    points_name: str
    share: float  # share of the weighted scans a candidate needs
    share_name: str
    max_z: int  # primaries kept per graph
    max_sop: int
    z_epsilon: float
    sop_phi: float
    verdict: str = "chosen"  # what a primary is: a chosen feature, or a candidate for the search


def _joined(
    records: Sequence[ScanRecord], total: float, locations: Mapping[str, str], thresholds: Thresholds, now: datetime
) -> tuple[list[JoinedFeature], list[CandidateReport]]:
    """The joined features (`analysis.joined`) and a report of kind "joined" per candidate."""
    if thresholds.max_joined_features == 0:
        return [], []
    candidates = joined_candidates(records, now, thresholds.recency_half_life)
    share, limit = thresholds.min_candidate_share, thresholds.max_joined_features
    chosen, verdicts = choose_joined(candidates, total, locations, min_share=share, limit=limit)
    reports = [
        CandidateReport(
            "joined", c.name, Role.Z if ok else Role.REJECTED, why, c.frequency, c.share(total), c.scans, len(c.points)
        )
        for c, ok, why in verdicts
    ]
    return chosen, reports


def _gate(thresholds: Thresholds) -> Gate:
    if thresholds.selection == "benefit":
        pool = thresholds.search_candidates
        return Gate(
            2,
            "changing literals",
            thresholds.min_candidate_share,
            "min_candidate_share",
            pool,
            pool,
            thresholds.z_correlation_epsilon,
            thresholds.sop_correlation_phi,
            "candidate for the benefit search",
        )
    return Gate(
        thresholds.min_comparison_points,
        "theta",
        thresholds.min_sop_frequency,
        "gamma",
        thresholds.max_z_features,
        thresholds.max_sop_features,
        thresholds.z_correlation_epsilon,
        thresholds.sop_correlation_phi,
    )
