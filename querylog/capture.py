"""Turning one observed query into query-log rows, or into a quarantine record with the reason.

Every way in (the recorder, the DataFrame helper, the importers) goes through here, so a query gets
the same rows whichever way it arrived. Bad input never raises: it becomes a `QuarantineRecord`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache

from sqlglot import exp

from querylog.errors import PredicateError
from querylog.predicates.attribute import JoinKey, QueryScans, Schema, TableScan, scan_filters, table_identity
from querylog.predicates.normalize import canonical_conjuncts
from querylog.predicates.parse import parse_condition
from querylog.predicates.templates import StatementTemplates
from querylog.predicates.truncate import bound_condition, bound_filters, check_statement_size
from querylog.records import DerivedFilter, QuarantineRecord, ScanRecord


@dataclass(frozen=True)
class Captured:
    """The outcome of capturing inputs: rows for the log and inputs for the quarantine."""

    scans: tuple[ScanRecord, ...] = ()
    quarantined: tuple[QuarantineRecord, ...] = ()
    statements: int = 0  # SQL statements read
    resolved: int = 0  # of which every table's schema was known (all columns attributed for sure)
    truncated: int = 0  # statements or scans whose conjuncts were cut to bounds (`predicates.truncate`)

    def __add__(self, other: Captured) -> Captured:
        return Captured(
            self.scans + other.scans,
            self.quarantined + other.quarantined,
            self.statements + other.statements,
            self.resolved + other.resolved,
            self.truncated + other.truncated,
        )


@dataclass(frozen=True)
class Metrics:
    bytes_scanned: int | None = None
    files_scanned: int | None = None
    duration_ms: int | None = None


Derive = Callable[[JoinKey], tuple[DerivedFilter, ...]]
"""The canonical conjuncts a join implies on the scan's key column; none when unknown (a table it
cannot read, too costly, nothing matched). Supplied by whoever can read the other table
(`optimizer.joins`); must be sound: every key of the other table's rows that satisfy its filters
satisfies the derived filter."""


@dataclass(frozen=True)
class SqlContext:
    """How statements are read: table schemas (to resolve unqualified columns), how a table reference
    maps to a log identity, and which identities are watched (None: all)."""

    schema: Schema | None = None
    identity: Callable[[exp.Table], str] = table_identity
    watched: Collection[str] | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)  # name in SQL -> log identity
    derive: Derive | None = None  # join-derived filters for the targets' scans (None: none derived)
    targets: Collection[str] | None = None  # identities whose scans get derived filters (None: the watched)

    def resolve(self, table: exp.Table) -> str:
        name = self.identity(table)
        return self.aliases.get(name, name)

    def watches(self, table_id: str) -> bool:
        """Whether scans of `table_id` are logged (every table when `watched` is None)."""
        return self.watched is None or table_id in self.watched

    def derive_for(self, table_id: str) -> Derive | None:
        """The deriver for a scan of `table_id`: derivation costs Spark passes over the joined tables,
        spent only for the tables whose layout uses the filters (the targets); other scans are logged
        without derived filters, their tables serving only as sources."""
        if self.targets is None:
            chosen = self.watches(table_id)
        else:
            chosen = table_id in self.targets
        return self.derive if chosen else None

    def templates(self) -> StatementTemplates:
        """A statement-template memo of this context's `scan_filters` (for `capture_sql`'s `scans`)."""
        return StatementTemplates(self.schema, self.resolve)


def capture_filters(
    table_id: str,
    filters: Sequence[str],
    columns: Sequence[str],
    ts: datetime,
    source: str,
    *,
    query_id: str | None = None,
    metrics: Metrics = Metrics(),
    location: str = "",
    joins: Sequence[JoinKey] = (),
    derive: Derive | None = None,
) -> Captured:
    """Rows for one scan given its filters as SQL text (each may itself be a conjunction), with the
    filters `derive` derives from its inner equi-`joins` with filtered tables (a plan's joins, as
    `capture_sql` derives a statement's). Columns qualified by the table's name are the table's; other
    qualified names are struct fields. Filters past the bounds of `predicates.truncate` are cut soundly
    (conjuncts dropped)."""
    qualifiers = frozenset({table_id, table_id.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[-1]})
    canonical: set[str] = set()
    cut = 0
    for text in filters:
        try:
            check_statement_size(text)
            found, dropped = _canonical_filter(text, qualifiers)
        except PredicateError as err:
            return Captured(quarantined=(QuarantineRecord(ts, source, location or table_id, str(err), text),))
        canonical.update(found)
        cut += dropped
    derived: tuple[DerivedFilter, ...] = ()
    if joins:
        scan = TableScan(table_id, table_id, tuple(filters), tuple(columns), tuple(joins))
        derived = derived_filters(scan, (), derive)
    every = canonical | {d.filter for d in derived}
    kept = bound_filters(every)
    return Captured(
        truncated=int(bool(cut) or len(kept) < len(every)),
        scans=(
            ScanRecord(
                query_id=query_id or uuid.uuid4().hex,
                ts=ts,
                table_id=table_id,
                filters=kept,
                columns=tuple(sorted({c.lower() for c in columns})) or ("*",),
                source=source,
                raw=" AND ".join(f"({f})" for f in filters) or None,
                bytes_scanned=metrics.bytes_scanned,
                files_scanned=metrics.files_scanned,
                duration_ms=metrics.duration_ms,
                derived=tuple(d for d in derived if d.filter in kept and d.filter not in canonical),
            ),
        ),
    )


@lru_cache(maxsize=65536)
def _canonical_filter(text: str, qualifiers: frozenset[str]) -> tuple[tuple[str, ...], int]:
    """The canonical conjuncts of one filter text (the same texts recur: dashboards, retries), after
    cutting its AND chain to bounds; how many conjuncts the cut dropped."""
    condition, dropped = bound_condition(parse_condition(text))
    return tuple(canonical_conjuncts(condition, qualifiers)), dropped


def capture_sql(
    sql: str,
    ts: datetime,
    source: str,
    context: SqlContext = SqlContext(),
    *,
    query_id: str | None = None,
    metrics: Metrics = Metrics(),
    location: str = "",
    scans: Callable[[str], QueryScans] | None = None,
) -> Captured:
    """Rows for every scan of a statement; quarantined when it does not parse, is not a query, or reads
    no watched table. A caller that reads many statements passes `scans`, a `StatementTemplates` for
    `context`, so statements that differ only in literals are not derived again."""

    def quarantine(reason: str) -> Captured:
        return Captured(quarantined=(QuarantineRecord(ts, source, location or "-", reason, sql),), statements=1)

    try:
        result = scans(sql) if scans is not None else scan_filters(sql, context.schema, context.resolve)
    except PredicateError as err:
        return quarantine(str(err))
    watched = [s for s in result.scans if context.watches(s.table)]
    if not watched:
        read = sorted({s.table for s in result.scans})
        return quarantine(f"reads no watched table (reads: {', '.join(read) or 'nothing'})")
    query_id = query_id or uuid.uuid4().hex
    single = len(watched) == 1
    records = []
    truncated = bool(result.dropped)
    for s in watched:
        derived = derived_filters(s, result.scans, context.derive_for(s.table))
        every = {*s.filters, *(d.filter for d in derived)}
        filters = bound_filters(every)
        truncated |= len(filters) < len(every)
        derived = tuple(d for d in derived if d.filter in filters)
        records.append(
            ScanRecord(
                query_id=query_id,
                ts=ts,
                table_id=s.table,
                filters=filters,
                columns=s.columns,
                source=source,
                raw=sql,
                # Metrics of a whole query only describe a scan when it is the query's only scan.
                bytes_scanned=metrics.bytes_scanned if single else None,
                files_scanned=metrics.files_scanned if single else None,
                duration_ms=metrics.duration_ms if single else None,
                derived=derived,
            )
        )
    return Captured(scans=tuple(records), statements=1, resolved=int(not result.unresolved), truncated=int(truncated))


CHAIN_ROUNDS = 2  # a chain's outer keys are evaluated in the first round, the middle ones in the second


def prefetch_derived(
    statements: Iterable[str],
    context: SqlContext,
    scans: Callable[[str], QueryScans] | None = None,
    plans: Iterable[tuple[str, Sequence[JoinKey]]] = (),
) -> None:
    """Ask the context's deriver, up front and together, for every join-derived filter `statements`
    (SQL) and `plans` ((table, joins) of plan scans) will need, so that one that batches (a ``batch()``
    context manager, as `optimizer.joins.JoinDeriver` has) evaluates all the filters waiting on one
    dimension in one pass; the captures that follow then find them cached. Only the scans the capture
    derives for are asked (watched targets, `SqlContext.derive_for`). Nothing happens with a deriver
    that does not batch. Statements that do not parse are left to the capture to quarantine."""
    batch = getattr(context.derive, "batch", None)
    if batch is None or context.derive is None:
        return
    parsed = []
    for sql in statements:
        try:
            parsed.append(scans(sql) if scans is not None else scan_filters(sql, context.schema, context.resolve))
        except PredicateError:
            continue
    targeted = [(t, joins) for t, joins in plans if joins and context.derive_for(t) is not None]
    joined = [TableScan(t, t, (), (), tuple(joins)) for t, joins in targeted]
    for _ in range(CHAIN_ROUNDS):
        with batch():
            for result in parsed:
                for s in result.scans:
                    if context.watches(s.table):
                        derived_filters(s, result.scans, context.derive_for(s.table))
            for scan in joined:
                derived_filters(scan, (), context.derive_for(scan.table))


def pinned(context: SqlContext) -> AbstractContextManager[None]:
    """The deriver's ``pinned()`` block when it has one (as `optimizer.joins.JoinDeriver` does), else
    an empty one. An import (or a recorder's spill) holds it around its prefetch and the captures that
    follow, so each source's snapshot is read once, and a commit to a source between the prefetch and
    a capture cannot turn a prefetched filter into a miss evaluated on its own."""
    pin = getattr(context.derive, "pinned", None)
    return pin() if pin is not None else nullcontext()


def derived_filters(scan: TableScan, scans: Sequence[TableScan], derive: Derive | None) -> tuple[DerivedFilter, ...]:
    """The join-derived filters of a scan that the query does not already state. A join with an
    unfiltered table that itself joins a filtered one (a snowflake chain: fact -> dimension -> outer
    dimension, one level) derives through it: the outer filter's keys first become a filter on the
    middle table, whose keys then become the scan's filter. A derivation never walks back through a
    table already on its chain, starting with the scan's own (a self-join derives nothing: the scan
    would pay a pass over its own table to describe itself)."""
    if derive is None:
        return ()
    # `TableScan.table` and `JoinKey.other` are both the context's resolved identity (`attribute._join_keys`
    # and the plan paths name both sides with one identity function), so they compare directly; the
    # deriver's locations also catch another spelling of one table (`_chained`).
    on_chain = _chain({scan.table}, derive)
    found: dict[str, DerivedFilter] = {}
    for key in scan.joins:
        if _chained(key.other, on_chain, derive):
            continue
        direct = bool(key.other_filters)
        for derived in derive(key) if direct else derive_through(key, scans, derive, on_chain=on_chain):
            if derived.filter not in scan.filters:
                found.setdefault(derived.filter, derived)
    return tuple(found[k] for k in sorted(found))


def derive_through(
    key: JoinKey, scans: Sequence[TableScan], derive: Derive, *, on_chain: frozenset[str]
) -> tuple[DerivedFilter, ...]:
    """`key`'s derived filters when its table (the middle of a chain) is unfiltered: its own joins'
    derived filters (not those back to a table `on_chain`, nor to the middle itself) stand for its
    filters. Nothing when the middle table is scanned more than once (which scan joins which is then
    unknown), when the deriver will not evaluate the middle (its optional ``accepts``: a fact-side
    source, or one it cannot locate or read; asked first, so a refused middle costs no pass on its
    outer tables) or derives nothing."""
    middles = [s for s in scans if s.table == key.other]
    if len(middles) != 1:
        return ()
    accepts = getattr(derive, "accepts", None)
    if accepts is not None and not accepts(key):
        return ()
    (middle,) = middles
    chain = on_chain | _chain({middle.table}, derive)
    stated: set[str] = set()
    for outer in middle.joins:
        if outer.other_filters and not _chained(outer.other, chain, derive):
            stated.update(d.filter for d in derive(outer))
    if not stated:
        return ()
    return derive(replace(key, other_filters=tuple(sorted(stated))))


def _chain(tables: Collection[str], derive: Derive) -> frozenset[str]:
    """`tables` (identities on a derivation's chain) with the locations the deriver reads for them (its
    optional ``source_of``, as `optimizer.joins.JoinDeriver` has), so `_chained` knows a table under
    any spelling the deriver takes for it."""
    source_of = getattr(derive, "source_of", None)
    located = {source_of(t) for t in tables} if source_of is not None else set()
    return frozenset(tables) | {place for place in located if place is not None}


def _chained(table: str, chain: frozenset[str], derive: Derive) -> bool:
    """Whether `table` is on `chain`: the same identity, or a name the deriver would read from a table
    on it (``default.lineorder`` or ``spark_catalog.default.lineorder`` for ``lineorder``, a path for a
    name: it strips qualifiers and compares paths), where deriving would be a pass over the target or a
    walk back along the chain."""
    if table in chain:
        return True
    source_of = getattr(derive, "source_of", None)
    place = source_of(table) if source_of is not None else None
    return place is not None and place in chain
