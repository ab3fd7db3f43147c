"""Join-derived filters: what a dimension filter implies on a fact table's join key.

In a star schema the selective filters of a fact-table query sit on the dimension tables
(``ss_sold_date_sk = d_date_sk AND d_year = 2001``); the fact scan itself states none. Evaluating the
dimension's filters on the dimension table gives the keys that can join, and so a filter on the fact
key that every joining fact row satisfies: the key range (``ss_sold_date_sk >= a AND
ss_sold_date_sk <= b``), or the key list when it is short. The query log records it as derived, and
the analyser treats it as any other filter, so the fact table can be laid out by the join key, which
is what lets engines prune fact files at run time (dynamic file pruning).

When the keys are many and scattered over the key domain (a supplier region, a part category: surrogate
keys are assigned without regard to attributes), the range covers nearly every fact row. Up to
`max_keys` such keys are also listed, ``ss_item_sk IN (...)``: a join-induced key set, which the
analyser takes as a whole predicate (SOP), so the layout can gather the fact rows of one category into
few files. Its bits in deltaopt's statistics describe literal keys of the fact table, so they stay
true whatever later happens to the dimension: a query whose dimension filter now gives other keys
states another list, which skips only where it implies the recorded one.

Sound by construction: the derived filter holds for every key of the dimension rows that satisfy the
filters, and a fact row reaches an inner join's output only with such a key (a NULL key never
joins). It describes the dimension table's version it was computed on; it is a workload fact for the
analyser, never used to answer the query.

Cost is bounded: one aggregation per (dimension table, version, key column, filters), cached; tables
above `max_rows` rows (not dimensions) are not evaluated; only tables found by name in the
`Catalog`'s locations are.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer.errors import DeltaOptError
from optimizer.skipping.extended import location_key
from optimizer.spark_expr import expression_column
from optimizer.table import open_table
from querylog.errors import QueryLogError
from querylog.predicates.attribute import JoinKey
from querylog.predicates.bounds import MAX_IN_ITEMS
from querylog.predicates.normalize import canonical_conjuncts
from querylog.records import DerivedFilter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import Snapshot, TableAccess

log = logging.getLogger(__name__)

SCATTERED = 0.5  # keys filling less of their min..max span than this are listed as a key set


@dataclass
class JoinDeriver:
    """A `querylog.capture.Derive`: evaluates dimension filters on the dimension tables at `locations`
    ({lower-case table name: URI}) through `spark`."""

    spark: SparkSession
    locations: Mapping[str, str]
    max_in: int = 32  # keys listed as IN up to this many; a range beyond
    max_keys: int = MAX_IN_ITEMS  # scattered keys also listed (a join-induced key set) up to this many
    max_rows: int = 20_000_000  # larger tables are facts, not dimensions: not evaluated
    evaluated: int = 0  # aggregations run (cache misses)
    _cache: dict[tuple[Any, ...], tuple[DerivedFilter, ...]] = field(default_factory=dict)

    def __call__(self, key: JoinKey) -> tuple[DerivedFilter, ...]:
        located = self._locate(key.other)
        if located is None:
            return ()
        name, uri = located
        key = replace(key, other=name)  # ``via`` names the dimension as the catalog does
        try:
            table = open_table(uri)
            snapshot = table.snapshot()
        except DeltaOptError as err:
            log.warning("cannot derive from %s: %s", key.other, err)
            return ()
        if (snapshot.num_records or 0) > self.max_rows:
            return ()
        cache_key = (uri, snapshot.version, key.column, key.other_column, key.other_filters)
        if cache_key not in self._cache:
            self._cache[cache_key] = self._evaluate(table, snapshot, key)
        return self._cache[cache_key]

    def _locate(self, name: str) -> tuple[str, str] | None:
        """(catalog name, location) of a table named as a query names it: its name, a qualified name
        (``spark_catalog.default.part``) or its path (a plan's scan of an unnamed table)."""
        lowered = name.lower()
        for candidate in (lowered, lowered.rsplit(".", 1)[-1]):
            if candidate in self.locations:
                return candidate, self.locations[candidate]
        path = location_key(name)  # paths compare exactly: case matters on most stores
        return next(((t, uri) for t, uri in self.locations.items() if location_key(uri) == path), None)

    def _evaluate(self, table: TableAccess, snapshot: Snapshot, key: JoinKey) -> tuple[DerivedFilter, ...]:
        """The derived conjuncts, from the snapshot the cache key names."""
        from pyspark.sql import functions as F

        self.evaluated += 1
        try:
            frame = table.read_files(self.spark, snapshot.files, snapshot)
            for text in key.other_filters:
                frame = frame.filter(expression_column(text))
            column = F.col(f"`{key.other_column}`")
            keys = frame.select(column.alias("k")).where(F.col("k").isNotNull()).distinct()
            values = [r["k"] for r in keys.limit(max(self.max_in, self.max_keys) + 1).collect()]
            if not values:
                return ()  # nothing joins: the query reads no fact row, which says nothing about layout
            if len(values) > max(self.max_in, self.max_keys):  # truncated: the bounds come from all keys
                low, high = keys.agg(F.min("k"), F.max("k")).collect()[0]
            else:
                low, high = min(values), max(values)
            filters = key_filters(key.column, values, low, high, max_in=self.max_in, max_keys=self.max_keys)
        except (QueryLogError, DeltaOptError) as err:
            log.warning("cannot derive from %s: %s", key.other, err)
            return ()
        except Exception as err:  # Spark's AnalysisException: a filter the dimension cannot evaluate
            log.warning("cannot derive from %s: %s", key.other, str(err).splitlines()[0] if str(err) else err)
            return ()
        via = f"{key.other}.{key.other_column} WHERE {' AND '.join(key.other_filters)}"
        return tuple(DerivedFilter(f, via) for f in filters)


def key_filters(column: str, values: list[Any], low: Any, high: Any, *, max_in: int, max_keys: int) -> list[str]:
    """The canonical conjuncts on the fact's `column` that the dimension keys imply: `values` (distinct,
    non-NULL; more than ``max(max_in, max_keys)`` means a truncated list) whose bounds are `low` and
    `high`. Up to `max_in` keys: their list; more: their range, plus their list up to `max_keys` keys
    when they are scattered over it. Every conjunct holds for every one of the keys."""
    if len(values) > max_in:
        conjuncts = [_compare(exp.GTE, column, low), _compare(exp.LTE, column, high)]
        if len(values) <= max_keys and scattered(values, low, high):
            conjuncts.append(_in_list(column, values))
    else:
        conjuncts = [_in_list(column, values)]
    return [t for c in conjuncts for t in canonical_conjuncts(c)]


def scattered(values: list[Any], low: Any, high: Any) -> bool:
    """Whether `values` fill less than half of the domain between `low` and `high` (integers and dates;
    other types always count as scattered: a range of strings says nothing about density)."""
    if isinstance(low, int) and isinstance(high, int):
        span = high - low + 1
    elif isinstance(low, dt.date) and isinstance(high, dt.date) and not isinstance(low, dt.datetime):
        span = (high - low).days + 1
    else:
        return True
    return len(values) < SCATTERED * span


def _compare(kind: type[exp.Expr], column: str, value: Any) -> exp.Expr:
    return kind(this=exp.column(column), expression=exp.convert(value))


def _in_list(column: str, values: list[Any]) -> exp.Expr:
    if len(values) == 1:
        return _compare(exp.EQ, column, values[0])
    return exp.In(this=exp.column(column), expressions=[exp.convert(v) for v in sorted(values)])
