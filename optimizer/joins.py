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

Roles, not sizes, say which tables are sources. A join edge reads its source on the *fact side* when the
source's join column is not its key (many source rows per key: a dimension's keys through its fact).
That is decided per edge, first by the configuration (`roles`: a table's ``join_role``, ``fact`` or
``dimension``), then by a proof from the source's own Delta log, with no Spark job, that some key repeats
(`optimizer.joins_batch.not_unique`: a partition value over two rows, a file whose bounds meet over two
rows, more non-NULL values than the integers or days between the bounds); otherwise the source is a
dimension, as a table with unique or unprovable keys always was (a source above `LARGE_SOURCE_ROWS` rows
is named in one warning: its role belongs in the configuration). A fact-side source is never evaluated
(counted in `refused`; `accepts` says so before a chain derives its outer keys) unless `through_facts`
asks for it, and then it is read as any source is.

Cost is bounded: one evaluation per (source table, version, key column, filters), cached for the
deriver's life (a recorder's, an import's); only tables found by name in the `Catalog`'s locations are
evaluated, and only key columns whose keys a derived filter states soundly (integers, decimals, dates,
byte-compared strings: `optimizer.join_key_filters.key_type_problem`), decided from the
schema before any pass; the others derive nothing, with one warning per source and column. Within
`batch` (an import, a recorder's spill: `querylog.capture.prefetch_derived`), every key waiting on one
source version is evaluated in one Spark pass (per 256 filter sets), however large the source: the
rows of a source up to `batch_rows` rows go to the driver as Arrow, with one boolean per filter set; a
larger one's key sets are computed on the executors, the driver receiving at most
``max(max_in, max_keys) + 1`` keys per filter set (`optimizer.joins_batch`). The booleans are Spark's
own evaluation of the filters, so the derived filters are those the one-key path gives. Within
`pinned` (an import, a spill) each source's snapshot is read once and kept, so a commit to a source
during an import changes nothing and no capture re-reads a log; outside it every call reads the latest.
A `pinned` block holds the deriver: another thread sharing it (a second recorder's spill) waits for the
block's end rather than see its snapshots or have a key noted into its batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from optimizer.errors import DeltaOptError
from optimizer.join_key_filters import key_filters, scattered
from optimizer.joins_batch import (
    FILTER_SETS_PER_PASS,
    Finish,
    Limits,
    aggregated_pass,
    arrow_pass,
    arrow_readable,
    first_line,
    not_unique,
    one_key_pass,
    resolvable,
    spark_context,
)
from optimizer.skipping.extended import location_key
from optimizer.table import open_table
from querylog.errors import QueryLogError
from querylog.predicates.attribute import JoinKey
from querylog.predicates.bounds import MAX_IN_ITEMS
from querylog.records import DerivedFilter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import Snapshot, TableAccess

__all__ = ["JoinDeriver", "JoinRole", "key_filters", "scattered"]

log = logging.getLogger(__name__)

JoinRole = Literal["fact", "dimension"]
LARGE_SOURCE_ROWS = 20_000_000  # a source above this many rows, proven neither way, is named in a warning
Waiting = list[tuple[tuple[Any, ...], JoinKey]]  # (cache key, key) pairs waiting on one source version


@dataclass(frozen=True)
class _Source:
    """One source version a batch reads: its catalog name, version, rows, and which pass suits it."""

    name: str
    version: int
    frame: DataFrame
    arrow: bool  # small, of plain key types: `arrow_pass`; else `aggregated_pass`


@dataclass
class JoinDeriver:
    """A `querylog.capture.Derive`: evaluates dimension filters on the source tables at `locations`
    ({lower-case table name: URI}) through `spark`; `roles` ({lower-case table name: role}, a table's
    ``join_role``) overrides what the log proves about a source."""

    spark: SparkSession
    locations: Mapping[str, str]
    _: KW_ONLY
    roles: Mapping[str, JoinRole] = field(default_factory=dict)
    through_facts: bool = False  # fact-side sources are evaluated too (a dimension's keys through its fact)
    max_in: int = 32  # keys listed as IN up to this many; a range beyond
    max_keys: int = MAX_IN_ITEMS  # scattered keys also listed (a join-induced key set) up to this many
    batch_rows: int = 2_000_000  # sources up to this many rows are batched on the driver, larger on executors
    evaluated: int = 0  # Spark passes run (cache misses: one per key, or one per batched source version)
    passes: Counter[str] = field(default_factory=Counter)  # Spark passes run per source (catalog name)
    refused: Counter[str] = field(default_factory=Counter)  # distinct keys refused per source: its fact side
    spark_seconds: float = 0.0  # time spent in the passes
    _cache: dict[tuple[Any, ...], tuple[DerivedFilter, ...]] = field(default_factory=dict)
    _proofs: dict[tuple[str, int, str], bool] = field(default_factory=dict)  # (uri, version, column): not unique
    _refusals: set[JoinKey] = field(default_factory=set)  # the keys counted in `refused` (``other``: the source)
    _warned: set[tuple[str, str]] = field(default_factory=set)  # (source, key column) refused, or (source, "")
    _snapshots: dict[str, tuple[TableAccess, Snapshot]] = field(default_factory=dict)  # while pinned
    _pins: int = 0  # open `pinned` (and `batch`) blocks
    _wanted: dict[tuple[Any, ...], JoinKey] | None = None  # keys the innermost batch evaluates on leaving
    # One thread at a time in the deriver, a whole `pinned` block long (two recorders sharing it: one
    # thread's key must never be noted into the other's batch); re-entrant, so blocks nest in a thread.
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def __call__(self, key: JoinKey) -> tuple[DerivedFilter, ...]:
        with self._lock:
            return self._derive(key)

    def _derive(self, key: JoinKey) -> tuple[DerivedFilter, ...]:
        located = self._locate(key.other)
        if located is None:
            return ()
        name, uri = located
        key = replace(key, other=name)  # ``via`` names the source as the catalog does
        if not self.through_facts and self.roles.get(name) == "fact":
            return self._refuse(key)
        try:
            table, snapshot = self._snapshot(uri)
        except DeltaOptError as err:
            log.warning("cannot derive from %s: %s", key.other, err)
            return ()
        if not self.through_facts and self._fact_side(name, snapshot, key.other_column):
            return self._refuse(key)
        cache_key = (uri, snapshot.version, key.column, key.other_column, key.other_filters)
        if cache_key not in self._cache:
            if self._wanted is not None:  # batching: noted, evaluated with the others on leaving
                self._wanted[cache_key] = key
                return ()
            found = self._evaluate(table, snapshot, key)
            if found is None:  # the source could not be read now: read again next time
                return ()
            self._cache[cache_key] = found
        return self._cache[cache_key]

    def _refuse(self, key: JoinKey) -> tuple[DerivedFilter, ...]:
        """Nothing, for a key read on its source's fact side; `refused` counts each key once, however
        often an import asks for it (each prefetch round, then the capture)."""
        if key not in self._refusals:
            self._refusals.add(key)
            self.refused[key.other] += 1
        return ()

    def accepts(self, key: JoinKey) -> bool:
        """Whether `key`'s source may be evaluated for it: False when it is read on its fact side (its role
        alone: no pass), or when it cannot be located or read (it derives nothing), so a chain through it
        need not derive its outer keys (`derive_through`)."""
        located = self._locate(key.other)
        if located is None:
            return False
        name, uri = located
        if not self.through_facts and self.roles.get(name) is not None:
            return self.roles[name] != "fact"
        with self._lock:
            try:
                _, snapshot = self._snapshot(uri)
            except DeltaOptError:
                return False  # the call would derive nothing: no outer key is worth a pass
            return self.through_facts or not self._fact_side(name, snapshot, key.other_column)

    def source_of(self, name: str) -> str | None:
        """The location this deriver reads for a table a query names `name` (its name, a qualified name,
        a path), None when it knows no such table. `querylog.capture.derived_filters` compares these, so a
        chain never returns to a table under another spelling (``default.lineorder`` for ``lineorder``)."""
        located = self._locate(name)
        return location_key(located[1]) if located is not None else None

    def _fact_side(self, name: str, snapshot: Snapshot, column: str) -> bool:
        """Whether the source is read on its fact side through `column`: its configured role, else the
        log's proof that `column` repeats a key (cached per source version and column)."""
        if self.roles.get(name) is not None:
            return self.roles[name] == "fact"
        proof = (snapshot.uri, snapshot.version, column)
        if proof not in self._proofs:
            self._proofs[proof] = not_unique(snapshot, column)
            rows = snapshot.num_records
            if not self._proofs[proof] and rows is not None and rows > LARGE_SOURCE_ROWS:
                self._unproven(name)
        return self._proofs[proof]

    def _unproven(self, name: str) -> None:
        """Says once per source that a large source the log cannot prove repeating is read as a dimension:
        its keys may well repeat (a fact whose statistics prove nothing), at a pass's cost over it."""
        if (name, "") not in self._warned:
            self._warned.add((name, ""))
            log.warning(
                "%s has more than %d rows and its keys cannot be proven to repeat: treated as a dimension; "
                "set join_role: fact if it is one",
                name,
                LARGE_SOURCE_ROWS,
            )

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Within the block each source's snapshot is read once and kept (nested blocks and `batch` reuse
        it): an import's captures see the versions its prefetch evaluated, and read no log again. The
        block holds the deriver: another thread's calls wait for its end (they would otherwise see this
        block's snapshots, or have their keys noted into its batch and derive nothing)."""
        with self._lock:
            self._pins += 1
            try:
                yield
            finally:
                self._pins -= 1
                if not self._pins:
                    self._snapshots = {}

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Within the block a key not yet evaluated is noted and derives nothing; on leaving, the noted
        keys are evaluated, one Spark pass per source version, and cached (`prefetch_derived`). A batch
        inside a batch evaluates its own keys on leaving (a prefetch's chain rounds rely on it); the outer
        one goes on noting, and skips on leaving what is cached by then."""
        with self.pinned():
            outer, self._wanted = self._wanted, {}
            try:
                yield
                wanted = self._wanted
            finally:
                self._wanted = outer
            by_source: dict[tuple[str, int], Waiting] = defaultdict(list)
            for cache_key, key in wanted.items():
                if cache_key not in self._cache:
                    by_source[(cache_key[0], cache_key[1])].append((cache_key, key))
            for (uri, _), keys in by_source.items():
                table, snapshot = self._snapshots[uri]
                self._cache.update(self._evaluate_batch(table, snapshot, keys))

    def _snapshot(self, uri: str) -> tuple[TableAccess, Snapshot]:
        """The source's current snapshot, or the one read when the enclosing `pinned` block first asked."""
        if uri in self._snapshots:
            return self._snapshots[uri]
        table = open_table(uri)
        found = (table, table.snapshot())
        if self._pins:
            self._snapshots[uri] = found
        return found

    def _evaluate_batch(
        self, table: TableAccess, snapshot: Snapshot, keys: Waiting
    ) -> dict[tuple[Any, ...], tuple[DerivedFilter, ...]]:
        """Every key's derived filters from one pass over the source per `FILTER_SETS_PER_PASS` filter
        sets; keys whose column or filters the source does not resolve derive nothing, found by analysis
        before the pass (so they cost it nothing). Nothing is returned (so nothing cached) for a source
        that cannot be read now: a later call reads it again. A source whose log gives no row count may be of
        any size, so it is aggregated on the executors, never collected to the driver."""
        name = keys[0][1].other
        found: dict[tuple[Any, ...], tuple[DerivedFilter, ...]] = {cache_key: () for cache_key, _ in keys}
        try:
            frame = table.read_files(self.spark, snapshot.files, snapshot)
            ready = set(resolvable(frame, [key for _, key in keys], self._warned))
            waiting = [(cache_key, key) for cache_key, key in keys if key in ready]
            rows = snapshot.num_records
            small = rows is not None and rows <= self.batch_rows
            arrow = small and bool(waiting) and arrow_readable(frame, [key for _, key in waiting])
        except (QueryLogError, DeltaOptError) as err:
            log.warning("cannot derive from %s: %s", name, err)
            return {}
        except Exception as err:  # Spark could not read the source
            log.warning("cannot derive from %s: %s", name, first_line(err))
            return {}
        source = _Source(name, snapshot.version, frame, arrow)
        sets = sorted({key.other_filters for _, key in waiting})
        for start in range(0, len(sets), FILTER_SETS_PER_PASS):
            chunk = set(sets[start : start + FILTER_SETS_PER_PASS])
            found.update(self._run(source, [(c, k) for c, k in waiting if k.other_filters in chunk]))
        return found

    def _run(self, source: _Source, keys: Waiting) -> dict[tuple[Any, ...], tuple[DerivedFilter, ...]]:
        """`keys`' derived filters from one pass. A pass Spark fails at run time (a filter that errs on
        some row) is split in halves by filter set, so only that set's keys derive nothing; a key whose
        driver-side step fails after the action derives nothing alone (`_finished`), and runs no pass again."""
        limits = Limits(self.max_in, self.max_keys)
        try:
            with self._spark_pass(source.name, source.version):
                chosen = arrow_pass if source.arrow else aggregated_pass
                finishes = chosen(source.frame, [key for _, key in keys], limits)
        except Exception as err:  # a Spark job that failed: the chunk is bisected below
            failure = err
        else:
            return {cache_key: _finished(key, finish) for (cache_key, key), finish in zip(keys, finishes, strict=True)}
        if source.arrow:  # the driver's Arrow path is not available here: the executors aggregate
            return self._run(replace(source, arrow=False), keys)
        sets = sorted({key.other_filters for _, key in keys})
        if len(sets) == 1:
            log.warning("cannot derive from %s: %s", source.name, first_line(failure))
            return {cache_key: () for cache_key, _ in keys}
        first = set(sets[: len(sets) // 2])
        found = self._run(source, [(c, k) for c, k in keys if k.other_filters in first])
        found.update(self._run(source, [(c, k) for c, k in keys if k.other_filters not in first]))
        return found

    @contextmanager
    def _spark_pass(self, name: str, version: int) -> Iterator[None]:
        """One pass over a source: counted, timed, and described to Spark's UI where a SparkContext is."""
        self.evaluated += 1
        self.passes[name] += 1
        context = spark_context(self.spark)
        before = context.getLocalProperty("spark.job.description") if context is not None else None
        if context is not None:
            context.setJobDescription(f"deltaopt derive {name}@{version}")
        started = time.perf_counter()
        try:
            yield
        finally:
            self.spark_seconds += time.perf_counter() - started
            if context is not None:
                context.setJobDescription(before)  # type: ignore[arg-type]  # None removes it

    def _locate(self, name: str) -> tuple[str, str] | None:
        """(catalog name, location) of a table named as a query names it: its name, a qualified name
        (``spark_catalog.default.part``) or its path (a plan's scan of an unnamed table)."""
        lowered = name.lower()
        for candidate in (lowered, lowered.rsplit(".", 1)[-1]):
            if candidate in self.locations:
                return candidate, self.locations[candidate]
        path = location_key(name)  # paths compare exactly: case matters on most stores
        return next(((t, uri) for t, uri in self.locations.items() if location_key(uri) == path), None)

    def _evaluate(self, table: TableAccess, snapshot: Snapshot, key: JoinKey) -> tuple[DerivedFilter, ...] | None:
        """The derived conjuncts, from the snapshot the cache key names (one key, outside a batch); None
        when the source cannot be read now (not cached: a later call reads it again). A key column or
        filter the source does not resolve is found by analysis, and costs no pass."""
        try:
            frame = table.read_files(self.spark, snapshot.files, snapshot)
            ready = resolvable(frame, [key], self._warned)  # logs why a key is not
        except (QueryLogError, DeltaOptError) as err:
            log.warning("cannot derive from %s: %s", key.other, err)
            return None
        except Exception as err:  # Spark could not read the source
            log.warning("cannot derive from %s: %s", key.other, first_line(err))
            return None
        if not ready:
            return ()
        try:
            with self._spark_pass(key.other, snapshot.version):
                return one_key_pass(frame, key, Limits(self.max_in, self.max_keys))
        except (QueryLogError, DeltaOptError) as err:
            log.warning("cannot derive from %s: %s", key.other, err)
            return ()
        except Exception as err:  # a Spark job that failed: a filter that errs on some row
            log.warning("cannot derive from %s: %s", key.other, first_line(err))
            return ()


def _finished(key: JoinKey, finish: Finish) -> tuple[DerivedFilter, ...]:
    """`key`'s derived filters from its pass's driver-side step; nothing when that step fails for it (a
    value the key list cannot state), which costs that key alone: the pass succeeded for the others."""
    try:
        return finish()
    except Exception as err:  # any failure of the key list's rendering: this key derives nothing
        log.warning("cannot derive from %s: %s", key.other, first_line(err))
        return ()
