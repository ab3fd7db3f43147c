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

Cost is bounded: one evaluation per (dimension table, version, key column, filters), cached for the
deriver's life (a recorder's, an import's); tables above `max_rows` rows (not dimensions) are not
evaluated; only tables found by name in the `Catalog`'s locations are. Within `batch` (an import, a
recorder's spill: `querylog.capture.prefetch_derived`), every key waiting on one dimension version is
evaluated in one Spark pass: one row per dimension row with its key columns and one boolean per
distinct filter set, taken to the driver as Arrow (dimensions up to `batch_rows` rows), the key sets
then computed per filter set there. The booleans are Spark's own evaluation of the filters, so the
derived filters are those the one-key path gives.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from optimizer.errors import DeltaOptError
from optimizer.skipping.extended import location_key
from optimizer.spark_arrow import to_arrow
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


@dataclass(frozen=True)
class _BatchRows:
    """One pass over a dimension: its key columns, and per filter set which rows satisfy it."""

    keys: dict[str, pa.ChunkedArray]
    matches: dict[tuple[str, ...], pa.ChunkedArray]


@dataclass
class JoinDeriver:
    """A `querylog.capture.Derive`: evaluates dimension filters on the dimension tables at `locations`
    ({lower-case table name: URI}) through `spark`."""

    spark: SparkSession
    locations: Mapping[str, str]
    max_in: int = 32  # keys listed as IN up to this many; a range beyond
    max_keys: int = MAX_IN_ITEMS  # scattered keys also listed (a join-induced key set) up to this many
    max_rows: int = 20_000_000  # larger tables are facts, not dimensions: not evaluated
    batch_rows: int = 2_000_000  # dimensions up to this many rows are evaluated in batches on the driver
    evaluated: int = 0  # Spark passes run (cache misses: one per key, or one per batched dimension)
    _cache: dict[tuple[Any, ...], tuple[DerivedFilter, ...]] = field(default_factory=dict)
    _snapshots: dict[str, tuple[TableAccess, Snapshot]] = field(default_factory=dict)  # within a batch
    _wanted: dict[tuple[Any, ...], JoinKey] | None = None  # keys a batch will evaluate on leaving

    def __call__(self, key: JoinKey) -> tuple[DerivedFilter, ...]:
        located = self._locate(key.other)
        if located is None:
            return ()
        name, uri = located
        key = replace(key, other=name)  # ``via`` names the dimension as the catalog does
        try:
            table, snapshot = self._snapshot(uri)
        except DeltaOptError as err:
            log.warning("cannot derive from %s: %s", key.other, err)
            return ()
        if (snapshot.num_records or 0) > self.max_rows:
            return ()
        cache_key = (uri, snapshot.version, key.column, key.other_column, key.other_filters)
        if cache_key not in self._cache:
            if self._wanted is not None:  # batching: noted, evaluated with the others on leaving
                self._wanted[cache_key] = key
                return ()
            self._cache[cache_key] = self._evaluate(table, snapshot, key)
        return self._cache[cache_key]

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Within the block a key not yet evaluated is noted and derives nothing; on leaving, the noted
        keys are evaluated, one Spark pass per dimension version, and cached (`prefetch_derived`)."""
        self._wanted, self._snapshots = {}, {}
        try:
            yield
            wanted = self._wanted
        finally:
            self._wanted = None
        by_dimension: dict[tuple[str, int], list[tuple[tuple[Any, ...], JoinKey]]] = defaultdict(list)
        for cache_key, key in wanted.items():
            by_dimension[(cache_key[0], cache_key[1])].append((cache_key, key))
        for (uri, _), keys in by_dimension.items():
            table, snapshot = self._snapshots[uri]
            self._cache.update(self._evaluate_batch(table, snapshot, keys))
        self._snapshots = {}

    def _snapshot(self, uri: str) -> tuple[TableAccess, Snapshot]:
        """The dimension's current snapshot (read once per batch: its keys share one version)."""
        if uri in self._snapshots:
            return self._snapshots[uri]
        table = open_table(uri)
        found = (table, table.snapshot())
        if self._wanted is not None:
            self._snapshots[uri] = found
        return found

    def _evaluate_batch(
        self, table: TableAccess, snapshot: Snapshot, keys: list[tuple[tuple[Any, ...], JoinKey]]
    ) -> dict[tuple[Any, ...], tuple[DerivedFilter, ...]]:
        """Every key's derived filters from one pass over the dimension; a dimension too large for the
        driver, or a batch Spark cannot evaluate (one filter it rejects), goes key by key."""
        if len(keys) == 1 or (snapshot.num_records or 0) > self.batch_rows:
            return {cache_key: self._evaluate(table, snapshot, key) for cache_key, key in keys}
        try:
            rows = self._batch_rows(table, snapshot, [key for _, key in keys])
        except (QueryLogError, DeltaOptError) as err:
            log.info("batched derivation on %s fell back to one key at a time: %s", keys[0][1].other, err)
            return {cache_key: self._evaluate(table, snapshot, key) for cache_key, key in keys}
        except Exception as err:  # Spark's AnalysisException: one filter the dimension cannot evaluate
            log.info("batched derivation on %s fell back to one key at a time: %s", keys[0][1].other, _first(err))
            return {cache_key: self._evaluate(table, snapshot, key) for cache_key, key in keys}
        return {cache_key: self._from_rows(rows, key) for cache_key, key in keys}

    def _batch_rows(self, table: TableAccess, snapshot: Snapshot, keys: list[JoinKey]) -> _BatchRows:
        """The dimension's key columns and, per distinct filter set, whether each row satisfies it."""
        from pyspark.sql import functions as F

        self.evaluated += 1
        frame = table.read_files(self.spark, snapshot.files, snapshot)
        columns = sorted({key.other_column for key in keys})
        filter_sets = sorted({key.other_filters for key in keys})
        selected = [F.col(f"`{c}`").alias(f"k{i}") for i, c in enumerate(columns)]
        for j, texts in enumerate(filter_sets):
            condition = F.lit(True)
            for text in texts:
                condition = condition & expression_column(text)
            selected.append(F.coalesce(condition, F.lit(False)).alias(f"f{j}"))
        data = to_arrow(frame.select(*selected))
        for i, column in enumerate(columns):
            kind = data.column(f"k{i}").type
            if not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_date(kind)):
                raise DeltaOptError(f"key column {column} is {kind}: derived key by key")
        return _BatchRows(
            {c: data.column(f"k{i}") for i, c in enumerate(columns)},
            {texts: data.column(f"f{j}") for j, texts in enumerate(filter_sets)},
        )

    def _from_rows(self, rows: _BatchRows, key: JoinKey) -> tuple[DerivedFilter, ...]:
        """One key's derived filters from the batch's rows: the same as `_evaluate` gives."""
        keys = pc.filter(rows.keys[key.other_column], rows.matches[key.other_filters])
        values = pc.unique(pc.drop_null(keys)).to_pylist()
        if not values:
            return ()
        low = min(values)
        high = max(values)
        listed = max(self.max_in, self.max_keys)
        listed_values = values[: listed + 1]  # as `_evaluate`: past `listed`, only the count matters
        filters = key_filters(key.column, listed_values, low, high, max_in=self.max_in, max_keys=self.max_keys)
        via = f"{key.other}.{key.other_column} WHERE {' AND '.join(key.other_filters)}"
        return tuple(DerivedFilter(f, via) for f in filters)

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
                low = min(values)
                high = max(values)
            filters = key_filters(key.column, values, low, high, max_in=self.max_in, max_keys=self.max_keys)
        except (QueryLogError, DeltaOptError) as err:
            log.warning("cannot derive from %s: %s", key.other, err)
            return ()
        except Exception as err:  # Spark's AnalysisException: a filter the dimension cannot evaluate
            log.warning("cannot derive from %s: %s", key.other, str(err).splitlines()[0] if str(err) else err)
            return ()
        via = f"{key.other}.{key.other_column} WHERE {' AND '.join(key.other_filters)}"
        return tuple(DerivedFilter(f, via) for f in filters)


def _first(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


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
