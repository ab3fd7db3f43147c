"""Skipping fact files by a filter on a joined dimension, with the files' joined ranges.

A query such as ``SELECT ... FROM lineitem JOIN part ON l_partkey = p_partkey WHERE p_brand = 'B'``
wants only the fact rows whose dimension row satisfies the dimension filter. A file written by a
layout with joined features records, per dimension, the min/max of the joined attributes over the
dimension rows its fact rows join, at the dimension's version then (`extended.JoinedRanges`). While
the dimension is still at that version, the dimension filter evaluated on those ranges (the same sound
pruning as any filter: an attribute without a range, or any leaf pruning does not understand, means
"may match") tells whether some fact row of the file can join a matching dimension row. Once the
dimension moves, the ranges are ignored: an attribute may have been reassigned to another key.

Unlike key sets (`extended.MAX_KEY_SET` values per file) and join-derived key lists (a bounded number
of keys), the ranges do not grow with the number of keys a dimension filter selects, so a filter on a
large dimension still skips files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from optimizer.errors import DeltaOptError
from optimizer.skipping.extended import location_key
from optimizer.skipping.filestats import Bounds, FileStats
from optimizer.skipping.pruning import Predicate, might_match, prepare
from querylog.records import DerivedFilter


@dataclass(frozen=True)
class JoinFilter:
    """The scan's fact rows join the dimension at `location` on ``fact_column = key`` (an inner
    equi-join) and only those whose dimension row satisfies `where` are wanted. `version` pins the
    dimension version the query reads (None: its current version, looked up when the scan is planned)."""

    fact_column: str
    location: str
    key: str
    where: str
    version: int | None = None

    @property
    def join(self) -> tuple[str, str, str]:
        return self.fact_column.lower(), location_key(self.location), self.key.lower()


def pinned(filters: Iterable[JoinFilter]) -> tuple[JoinFilter, ...]:
    """`filters` with each unpinned dimension's current version (None when it cannot be read: its
    ranges are then never used)."""
    filters = tuple(filters)
    versions = dimension_versions(f.location for f in filters if f.version is None)
    return tuple(
        f if f.version is not None else replace(f, version=versions[location_key(f.location)]) for f in filters
    )


def dimension_versions(locations: Iterable[str]) -> dict[str, int | None]:
    """{location as `location_key` normalises it: its current version} of each dimension at
    `locations`, as `filestats.file_stats` takes them; None when it cannot be read (the ranges recorded
    for it are then never used)."""
    from optimizer.table import open_table

    versions: dict[str, int | None] = {}
    for location in locations:
        if location_key(location) in versions:
            continue
        try:
            versions[location_key(location)] = open_table(location).snapshot().version
        except DeltaOptError:
            versions[location_key(location)] = None
    return versions


def versions_of(filters: Iterable[JoinFilter]) -> dict[str, int | None]:
    """{location: the version read} of pinned `filters`, as `filestats.file_stats` takes it. A
    dimension named twice at two versions is ignored (no range can serve both)."""
    found: dict[str, int | None] = {}
    for f in filters:
        location = location_key(f.location)
        found[location] = f.version if found.get(location, f.version) == f.version else None
    return found


@dataclass(frozen=True)
class _Prepared:
    join: tuple[str, str, str]
    predicate: Predicate


@dataclass(frozen=True)
class JoinPruning:
    """A scan's join filters pinned to the dimension versions it reads and parsed once: the versions
    file statistics are loaded for (`versions`), and which files may join (`may_join`)."""

    filters: tuple[JoinFilter, ...]  # pinned
    prepared: tuple[_Prepared, ...]

    @classmethod
    def of(cls, filters: Iterable[JoinFilter]) -> JoinPruning:
        """Pins unpinned filters (opening their dimensions) and parses every dimension filter
        (unqualified attribute names). Raises `PredicateError` on a filter pruning cannot parse."""
        fixed = pinned(filters)
        return cls(fixed, tuple(_Prepared(f.join, prepare(f.where)) for f in fixed))

    @property
    def versions(self) -> dict[str, int | None]:
        return versions_of(self.filters)

    def may_join(self, stats: FileStats) -> bool:
        """False only when, for some join filter, no fact row of the file joins a dimension row that
        satisfies it (by the file's joined ranges at the dimension version read)."""
        for join in self.prepared:
            ranges = stats.joined.get(join.join)
            if ranges is not None and not might_match(join.predicate, _as_file(stats.path, ranges)):
                return False
        return True


def _as_file(path: str, ranges: Mapping[str, Bounds]) -> FileStats:
    """The joined dimension rows of one file as pruning sees a file: attribute bounds, row count
    unknown."""
    return FileStats(path, None, ranges)


def from_derived(derived: Iterable[DerivedFilter], locations: Mapping[str, str]) -> list[JoinFilter]:
    """The join filters a scan's derived filters stand for (``via``: ``dim.key WHERE ...``), for the
    dimensions whose location `locations` ({table name: location}) knows; each once."""
    found: dict[tuple[str, str, str, str], JoinFilter] = {}
    lowered = {name.lower(): location for name, location in locations.items()}
    for d in derived:
        source = d.source()
        column = _fact_column(d.filter)
        if source is None or column is None or source[0] not in lowered:
            continue
        dimension, key, where = source
        f = JoinFilter(column, lowered[dimension], key, where)
        found.setdefault((*f.join, f.where), f)
    return list(found.values())


def _fact_column(filter_sql: str) -> str | None:
    from querylog.errors import QueryLogError
    from querylog.predicates.classify import column_names
    from querylog.predicates.normalize import parse_canonical

    try:
        names = column_names(parse_canonical(filter_sql))
    except QueryLogError:
        return None
    return names[0].lower() if len(names) == 1 else None
