"""Joined features: the dimension attributes a fact table's queries filter on through a join.

A join-derived filter in the log (`querylog.records.DerivedFilter`) names the dimension filter it
stands for in ``via`` (``part.p_partkey WHERE p_brand = 'Brand#23'``). When one dimension attribute is
filtered with changing literals (a brand, a nation, a container: the thesis's Z-candidate rule), the
fact rows can be Z-ordered by that attribute, looked up through the join key (MTO's join-induced
layouts), so the rows of one brand gather into few files. The files' key sets on the join key then let
deltaopt's pruning skip the others soundly; the estimate states each dimension filter on the
attribute's helper column instead (`helper_filters`), whose range per virtual file stands in for the
key sets it cannot measure on a sample.

Only attributes that are plain columns of a dimension whose location the catalog knows become
features; a conjunct over several columns, or none, stays what it is today (its derived key filter).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlglot import exp

from optimizer.analysis.workload import recency_weight
from optimizer.features import JoinedFeature, joined_helper
from querylog.errors import QueryLogError
from querylog.predicates.classify import column_names, z_shape
from querylog.predicates.normalize import canonical_conjuncts, parse_canonical, sql
from querylog.records import DerivedFilter, ScanRecord


@dataclass(frozen=True)
class DimensionFilter:
    """One conjunct of a dimension filter that reached the fact table through `fact_column`."""

    fact_column: str
    dimension: str
    key: str
    attribute: str
    conjunct: str  # canonical, over `attribute`

    @property
    def helper(self) -> str:
        return joined_helper(self.fact_column, self.dimension, self.attribute)

    def on_helper(self) -> str:
        """The conjunct with the attribute renamed to the helper column."""
        node = parse_canonical(self.conjunct)
        renamed = node.transform(
            lambda n: exp.column(self.helper) if isinstance(n, exp.Column) and n.name.lower() == self.attribute else n
        )
        return sql(renamed)


def dimension_filters(derived: DerivedFilter) -> list[DimensionFilter]:
    """The single-column conjuncts of `derived`'s dimension filter; [] when `via` cannot be read."""
    source = derived.source()
    if source is None:
        return []
    dimension, key, where = source
    try:
        fact = column_names(parse_canonical(derived.filter))
        conjuncts = canonical_conjuncts(parse_canonical(where))
    except QueryLogError:
        return []
    if len(fact) != 1:
        return []
    found = []
    for text in conjuncts:
        try:
            names = column_names(parse_canonical(text))
        except QueryLogError:
            continue
        if len(names) == 1 and "." not in names[0]:
            found.append(DimensionFilter(fact[0].lower(), dimension, key, names[0].lower(), text))
    return found


def record_filters(record: ScanRecord) -> list[DimensionFilter]:
    """A scan's dimension filters, once each (a scan derives a range and a key list from one filter)."""
    seen: dict[tuple[str, str, str, str], DimensionFilter] = {}
    for derived in record.derived:
        for found in dimension_filters(derived):
            seen.setdefault((found.fact_column, found.dimension, found.attribute, found.conjunct), found)
    return list(seen.values())


def helper_filters(record: ScanRecord) -> tuple[str, ...]:
    """`record`'s dimension filters stated on the helper columns (what the estimate's replay adds)."""
    return tuple(f.on_helper() for f in record_filters(record))


@dataclass
class JoinedCandidate:
    """A dimension attribute filtered through one fact key, over the window."""

    fact_column: str
    dimension: str
    key: str
    attribute: str
    frequency: float = 0.0  # recency-weighted scans
    scans: int = 0
    points: set[str] = field(default_factory=set)  # distinct conjuncts (changing literals)

    def share(self, total: float) -> float:
        return self.frequency / total if total else 0.0

    @property
    def name(self) -> str:
        return f"{self.dimension}.{self.attribute} via {self.fact_column}"


def joined_candidates(records: Iterable[ScanRecord], now: datetime, half_life: float) -> list[JoinedCandidate]:
    """Every attribute that dimension filters compare with literals (Z-shaped conjuncts: ``=``, ``IN``,
    ranges, prefixes; a ``LIKE '%x'`` says nothing a range per file can use) through a join key, most
    frequent first."""
    found: dict[tuple[str, str, str], JoinedCandidate] = {}
    for record in records:
        weight = recency_weight(record.ts, now, half_life)
        used: dict[tuple[str, str, str], JoinedCandidate] = {}  # an attribute counts once per scan
        for f in record_filters(record):
            if is_comparison(f.conjunct):
                attribute = (f.fact_column, f.dimension, f.attribute)
                candidate = used[attribute] = found.setdefault(
                    attribute, JoinedCandidate(f.fact_column, f.dimension, f.key, f.attribute)
                )
                candidate.points.add(f.conjunct)
        for candidate in used.values():
            candidate.frequency += weight
            candidate.scans += 1
    return sorted(found.values(), key=lambda c: (-c.frequency, c.fact_column, c.dimension, c.attribute))


def choose_joined(
    candidates: Sequence[JoinedCandidate],
    total: float,
    locations: Mapping[str, str],
    *,
    min_share: float,
    limit: int,
) -> tuple[list[JoinedFeature], list[tuple[JoinedCandidate, bool, str]]]:
    """Up to `limit` features from `candidates` (a share of `total` of at least `min_share`, two or
    more distinct filters, a dimension with a known location), and each candidate's verdict
    (chosen or not, and why)."""
    chosen: list[JoinedFeature] = []
    verdicts: list[tuple[JoinedCandidate, bool, str]] = []
    for candidate in candidates:
        location = dimension_location(locations, candidate.dimension)
        if candidate.share(total) < min_share:
            why = f"share {candidate.share(total):.3f} below {min_share}"
        elif len(candidate.points) < 2:
            why = "one literal only: a whole predicate (its key set), not a Z dimension"
        elif not location:
            why = f"no location for {candidate.dimension} in the catalog"
        elif len(chosen) >= limit:
            why = f"joined feature limit {limit} reached"
        else:
            chosen.append(
                JoinedFeature(candidate.fact_column, candidate.dimension, location, candidate.key, candidate.attribute)
            )
            why = (
                f"dimension attribute with changing literals ({len(candidate.points)} comparison points, "
                f"{candidate.share(total):.0%} of scans): a Z dimension via the join on {candidate.fact_column}"
            )
            verdicts.append((candidate, True, why))
            continue
        verdicts.append((candidate, False, why))
    return chosen, verdicts


def dimension_location(locations: Mapping[str, str], dimension: str) -> str | None:
    """Where `locations` ({lower-case table name: URI}) has `dimension` (a qualified name also by its
    last part); None when the catalog does not know it."""
    return locations.get(dimension) or locations.get(dimension.rsplit(".", 1)[-1])


def is_comparison(conjunct: str) -> bool:
    """Whether `conjunct` has a Z shape (a comparison with literals a range per file can judge)."""
    try:
        return z_shape(parse_canonical(conjunct)) is not None
    except QueryLogError:
        return False
