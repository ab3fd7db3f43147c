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
``search_candidates`` primaries of each graph form the pool from which `costmodel.search` chooses by
estimated marginal benefit. With ``selection: frequency`` theta, gamma and the feature limits decide,
as in the thesis.

Beyond the thesis: features are checked against the evaluation allow-list and evaluated one by one,
so a bad one is "not evaluable" instead of fatal; a feature constant on the sample never takes part in a
correlation (the thesis's false positive) and is kept for statistics only; a SOP feature true on every
sampled row is dropped (it can never let a file be skipped).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum

from optimizer.analysis.correlation import sop_correlation_graph, z_correlation_graph
from optimizer.analysis.sample import Evaluation
from optimizer.analysis.traversal import Traversal, traverse
from optimizer.analysis.workload import Workload, sop_candidates, summarize
from optimizer.config import Thresholds
from optimizer.features import FeatureSet, SopFeature, ZFeature
from querylog.records import ScanRecord

Evaluator = Callable[[Sequence[str], Sequence[str]], Evaluation]


class Role(StrEnum):
    Z = "z"
    SOP = "sop"
    Z_ADD = "z_add"
    SOP_ADD = "sop_add"
    REJECTED = "rejected"


@dataclass(frozen=True)
class CandidateReport:
    kind: str  # "z" (an expression) or "sop" (a whole predicate)
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
        }


def analyse(
    table: str,
    records: Iterable[ScanRecord],
    evaluator: Evaluator,
    thresholds: Thresholds,
    now: datetime,
) -> Analysis:
    """Choose Z, S, Z_add and S_add for `table` from its scans, evaluating candidates with `evaluator`
    (``(z_expressions, sop_predicates) -> Evaluation`` on a data sample)."""
    clock = time.perf_counter()
    seconds: dict[str, float] = {}
    workload = summarize(records, now, thresholds.recency_half_life)
    seconds["workload"] = time.perf_counter() - clock
    reports: list[CandidateReport] = []
    min_frequency = _gate(thresholds).share * workload.weight

    z_features, z_add, z_reports, z_rows = _choose_z(workload, evaluator, thresholds, min_frequency, seconds)
    reports += z_reports
    clock = time.perf_counter()
    sop, sop_add, weights, sop_reports, sop_rows = _choose_sop(
        workload, {*z_features, *z_add}, evaluator, thresholds, min_frequency
    )
    seconds["sop"] = time.perf_counter() - clock
    reports += sop_reports
    features = FeatureSet(
        z=tuple(ZFeature(e) for e in z_features),
        sop=tuple(SopFeature(p) for p in sop),
        z_add=tuple(ZFeature(e) for e in z_add),
        sop_add=tuple(SopFeature(p) for p in sop_add),
        sop_weights=weights,
    )
    order = {Role.Z: 0, Role.SOP: 1, Role.Z_ADD: 2, Role.SOP_ADD: 3, Role.REJECTED: 4}
    reports.sort(key=lambda r: (order[r.role], -r.frequency, r.feature))
    return Analysis(
        table=table,
        scans=workload.scans,
        unfiltered_scans=workload.unfiltered_scans,
        window_start=workload.first,
        window_end=workload.last,
        sample_rows=max(z_rows, sop_rows),
        features=features,
        candidates=tuple(reports),
        seconds={k: round(v, 4) for k, v in seconds.items()},
        malformed_rows=workload.malformed,
    )


def _choose_z(
    workload: Workload, evaluator: Evaluator, thresholds: Thresholds, min_frequency: float, seconds: dict[str, float]
) -> tuple[list[str], list[str], list[CandidateReport], int]:
    reports: list[CandidateReport] = []
    gate = _gate(thresholds)
    theta = gate.points

    def report(expression: str, role: Role, reason: str, **extra: object) -> None:
        candidate = workload.z[expression]
        reports.append(
            CandidateReport(
                "z",
                expression,
                role,
                reason,
                round(candidate.frequency, 4),
                round(workload.share(candidate.frequency), 4),
                candidate.scans,
                len(candidate.points),
                **extra,  # type: ignore[arg-type]
            )
        )

    kept = []
    for expression, candidate in workload.z.items():
        if len(candidate.points) < theta:
            report(
                expression,
                Role.REJECTED,
                f"too few comparison points ({len(candidate.points)} < {gate.points_name}={theta}); "
                "its predicates are SOP candidates",
            )
        else:
            kept.append(expression)
    clock = time.perf_counter()
    evaluation = evaluator(kept, []) if kept else Evaluation()
    seconds["z_sample"] = time.perf_counter() - clock
    for expression, problem in evaluation.failures.items():
        report(expression, Role.REJECTED, problem)
    samples = evaluation.z
    constant = {e for e, s in samples.items() if s.distinct < 2}
    clock = time.perf_counter()
    graph = z_correlation_graph(
        {e: s for e, s in samples.items() if e not in constant}, thresholds.z_correlation_epsilon
    )
    seconds["z_graph"] = time.perf_counter() - clock
    frequency = {e: workload.z[e].frequency for e in graph.nodes}
    walk = traverse(graph, frequency, gate.max_z, min_frequency)
    chosen, additional = _split(
        walk,
        frequency,
        min_frequency,
        gate,
        gate.max_z,
        "Z",
        "sort-index",
        Role.Z,
        Role.Z_ADD,
        report,
        lambda e: (
            f"{gate.verdict}: {len(workload.z[e].points)} comparison points, "
            f"{workload.share(workload.z[e].frequency):.0%} of scans"
        ),
    )
    for expression in sorted(constant):
        additional.append(expression)
        report(expression, Role.Z_ADD, "constant on the sample: clustering cannot narrow its ranges; statistics only")
    return chosen, additional, reports, evaluation.rows


def _choose_sop(
    workload: Workload, z_kept: set[str], evaluator: Evaluator, thresholds: Thresholds, min_frequency: float
) -> tuple[list[str], list[str], dict[str, float], list[CandidateReport], int]:
    reports: list[CandidateReport] = []
    gate = _gate(thresholds)
    candidates = sop_candidates(workload, z_kept)

    def report(predicate: str, role: Role, reason: str, **extra: object) -> None:
        use = candidates[predicate]
        reports.append(
            CandidateReport(
                "sop",
                predicate,
                role,
                reason,
                round(use.frequency, 4),
                round(workload.share(use.frequency), 4),
                use.scans,
                **extra,  # type: ignore[arg-type]
            )
        )

    frequent = []
    for predicate, use in candidates.items():
        if use.frequency < min_frequency:
            report(
                predicate,
                Role.REJECTED,
                f"infrequent ({workload.share(use.frequency):.1%} of scans < {gate.share_name}={gate.share:.0%})",
            )
        else:
            frequent.append(predicate)
    evaluation = evaluator([], frequent) if frequent else Evaluation()
    for predicate, problem in evaluation.failures.items():
        report(predicate, Role.REJECTED, problem)
    bits = evaluation.sop
    always = {p for p, b in bits.items() if b.all()}
    never = {p for p, b in bits.items() if not b.any()}
    for predicate in sorted(always):
        report(predicate, Role.REJECTED, "true on every sampled row: it can never let a file be skipped")
    graph = sop_correlation_graph(
        {p: b for p, b in bits.items() if p not in always | never}, thresholds.sop_correlation_phi
    )
    frequency = {p: candidates[p].frequency for p in graph.nodes}
    walk = traverse(graph, frequency, gate.max_sop, min_frequency)
    chosen, additional = _split(
        walk,
        frequency,
        min_frequency,
        gate,
        gate.max_sop,
        "SOP",
        "mean-square contingency",
        Role.SOP,
        Role.SOP_ADD,
        report,
        lambda p: (
            f"{gate.verdict}: {workload.share(candidates[p].frequency):.0%} of scans, "
            f"true on {bits[p].mean():.1%} of sampled rows"
        ),
    )
    for predicate in sorted(never):
        additional.append(predicate)
        report(predicate, Role.SOP_ADD, "false on every sampled row: no clustering needed; statistics only")
    weights = {p: round(candidates[p].frequency, 6) for p in chosen}
    return chosen, additional, weights, reports, evaluation.rows


def _split(
    walk: Traversal,
    frequency: dict[str, float],
    min_frequency: float,
    gate: Gate,
    limit: int,
    kind: str,
    measure: str,
    primary: Role,
    additional_role: Role,
    report: Callable[..., None],
    chosen_reason: Callable[[str], str],
) -> tuple[list[str], list[str]]:
    """Reports for a traversal: primaries are chosen; correlated and unvisited vertices keep statistics."""
    chosen = [str(v) for v in walk.primary]
    additional: list[str] = []
    for name in chosen:
        report(name, primary, chosen_reason(name))
    for vertex, (correlated_with, index) in walk.correlated.items():
        additional.append(str(vertex))
        report(
            str(vertex),
            additional_role,
            f"correlated with {correlated_with} ({measure} {index}); statistics only",
            correlated_with=str(correlated_with),
            index=index,
        )
    for vertex in walk.unvisited:
        additional.append(str(vertex))
        if frequency[str(vertex)] < min_frequency:
            reason = f"infrequent (share < {gate.share_name}={gate.share}); statistics only"
        else:
            reason = f"over the limit of {limit} {kind} features; statistics only"
        report(str(vertex), additional_role, reason)
    return chosen, additional


@dataclass(frozen=True)
class Gate:
    """The analyser's thresholds as the selection mode applies them."""

    points: int  # comparison points a Z family needs
    points_name: str
    share: float  # share of the weighted scans a candidate needs
    share_name: str
    max_z: int  # primaries kept per graph
    max_sop: int
    verdict: str = "chosen"  # what a primary is: a chosen feature, or a candidate for the search


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
            "candidate for the benefit search",
        )
    return Gate(
        thresholds.min_comparison_points,
        "theta",
        thresholds.min_sop_frequency,
        "gamma",
        thresholds.max_z_features,
        thresholds.max_sop_features,
    )
