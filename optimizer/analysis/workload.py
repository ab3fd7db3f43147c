"""What a window of the query log says about one table: frequencies and comparison points
(thesis 4.2.1, Algorithm 1 steps P1 and P5).

**Weighting.** A scan counts ``0.5 ** (age / half_life)``: recent queries predict the next ones better
than old ones (the thesis's premise that frequent features stay frequent, applied with a horizon).
Scan bytes and durations are *not* used as weights, for the thesis's reasons (4.2.1.3): a query's
volume reflects all its filters together, and weighting by volume would favour filters that already
skip badly over ones whose good skipping the new layout must keep. A feature counts once per scan
even when several conjuncts use it (``x >= a AND x < b`` is one use of ``x``).

**Key sets.** An IN list of more than `MAX_Z_IN_ITEMS` constants is a set of keys (typically a
join-induced one: the fact keys a dimension filter selects, `optimizer.joins`), not a family of
comparison points: Z-order cannot gather keys scattered over the domain, SOP clustering on the whole
predicate can. Such a conjunct is a whole predicate only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from querylog.errors import PredicateError, QueryLogError
from querylog.predicates.classify import ZShape, classify_text
from querylog.records import ScanRecord

MAX_Z_IN_ITEMS = 32  # a longer IN list is a key set (SOP), not comparison points (Z)


def z_shape_of(text: str) -> ZShape | None:
    """The Z shape the analysis gives a canonical conjunct: `classify_text`'s, except for key sets.
    Raises `PredicateError`."""
    z = classify_text(text).z
    return None if z is not None and z.op == "in" and len(z.values) > MAX_Z_IN_ITEMS else z


def readable_z_shape(text: str) -> ZShape | None:
    """`z_shape_of`, and None for a conjunct the analysis cannot read either: where a layout only looks for
    the workload's comparison points (the estimate's bit pattern and cut tree), such a conjunct has none."""
    try:
        return z_shape_of(text)
    except QueryLogError:
        return None


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
            conjuncts = {text: z_shape_of(text) for text in set(record.filters)}
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
        for text, shape in conjuncts.items():
            use = predicates.get(text)
            if use is None:
                use = predicates[text] = PredicateUse(text, z_expression=shape.expression if shape else None)
            use.frequency += weight
            use.scans += 1
            if shape is not None:
                candidate = z.get(shape.expression)
                if candidate is None:
                    candidate = z[shape.expression] = ZCandidate(shape.expression, shape.column)
                candidate.points.update(shape.points)
                candidate.ops.add(shape.op)
                candidate.predicates.add(text)
                used[shape.expression] = candidate
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
