"""What a window of the query log says about one table: frequencies and comparison points
(thesis 4.2.1, Algorithm 1 steps P1 and P5).

**Weighting.** A scan counts ``0.5 ** (age / half_life)``: recent queries predict the next ones better
than old ones (the thesis's premise that frequent features stay frequent, applied with a horizon).
Scan bytes and durations are *not* used as weights, for the thesis's reasons (4.2.1.3): a query's
volume reflects all its filters together, and weighting by volume would favour filters that already
skip badly over ones whose good skipping the new layout must keep. A feature counts once per scan
even when several conjuncts use it (``x >= a AND x < b`` is one use of ``x``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from querylog.errors import PredicateError
from querylog.predicates.classify import classify_text
from querylog.records import ScanRecord


@dataclass
class ZCandidate:
    """The left side of Z-shaped conjuncts: one family of predicates whatever their literals
    (``x < 5``, ``x >= 7``, ``x IN (1, 2)`` are all family ``x``)."""

    expression: str
    column: str
    frequency: float = 0.0  # recency-weighted scans using it
    scans: int = 0
    points: set[str] = field(default_factory=set)  # distinct comparison literals (IN items count one by one)
    predicates: set[str] = field(default_factory=set)  # the whole conjuncts it came from
    ops: set[str] = field(default_factory=set)  # comparison operators seen

    @property
    def has_ranges(self) -> bool:
        return bool(self.ops & {"<", "<=", ">", ">=", "startswith"})


@dataclass
class PredicateUse:
    """A whole conjunct as it appears in scans."""

    predicate: str
    frequency: float = 0.0
    scans: int = 0
    z_expression: str | None = None  # its left side when Z-shaped


@dataclass(frozen=True)
class Workload:
    scans: int
    weight: float  # sum of all scans' weights (the denominator of frequency shares)
    unfiltered_scans: int
    z: dict[str, ZCandidate]
    predicates: dict[str, PredicateUse]
    first: datetime | None
    last: datetime | None
    malformed: int = 0  # rows whose filters do not parse: skipped and counted

    def share(self, frequency: float) -> float:
        return frequency / self.weight if self.weight else 0.0


def recency_weight(ts: datetime, now: datetime, half_life_seconds: float) -> float:
    age = max((now - ts).total_seconds(), 0.0)
    return 0.5 ** (age / half_life_seconds)


def summarize(records: Iterable[ScanRecord], now: datetime, half_life_seconds: float) -> Workload:
    """Frequencies of Z candidates and whole predicates over `records` (one table's scans)."""
    z: dict[str, ZCandidate] = {}
    predicates: dict[str, PredicateUse] = {}
    scans = unfiltered = 0
    total = 0.0
    first: datetime | None = None
    last: datetime | None = None
    malformed = 0
    for record in records:
        try:
            conjuncts = {text: classify_text(text) for text in set(record.filters)}
        except PredicateError:  # written by something else; one bad row never stops the analysis
            malformed += 1
            continue
        scans += 1
        weight = recency_weight(record.ts, now, half_life_seconds)
        total += weight
        first = record.ts if first is None or record.ts < first else first
        last = record.ts if last is None or record.ts > last else last
        if not record.filters:
            unfiltered += 1
        used: dict[str, ZCandidate] = {}
        for text, conjunct in conjuncts.items():
            use = predicates.get(text)
            if use is None:
                use = predicates[text] = PredicateUse(text, z_expression=conjunct.z.expression if conjunct.z else None)
            use.frequency += weight
            use.scans += 1
            if conjunct.z is not None:
                candidate = z.get(conjunct.z.expression)
                if candidate is None:
                    candidate = z[conjunct.z.expression] = ZCandidate(conjunct.z.expression, conjunct.z.column)
                candidate.points.update(conjunct.z.points)
                candidate.ops.add(conjunct.z.op)
                candidate.predicates.add(text)
                used[conjunct.z.expression] = candidate
        for candidate in used.values():
            candidate.frequency += weight
            candidate.scans += 1
    return Workload(scans, total, unfiltered, z, predicates, first, last, malformed)


def sop_candidates(workload: Workload, z_kept: set[str]) -> dict[str, PredicateUse]:
    """Algorithm 1, P5: whole predicates that are not Z-shaped, or whose left side is neither a chosen
    nor an additional Z feature."""
    return {
        text: use
        for text, use in workload.predicates.items()
        if use.z_expression is None or use.z_expression not in z_kept
    }
