"""The passes `optimizer.joins.JoinDeriver` runs over a source table, and what they share.

Every path ends in `derived`: the key list, range or key set `key_filters` makes of the distinct joining
keys (`optimizer.join_key_filters`), with the ``via`` text naming the source (the analysis groups
features by it, so every path must give the same text). A batch first resolves every waiting filter set
and key column on the source by analysis alone, all in one analysis (`resolvable`: no job; the failing
ones found by halving), so one filter the source cannot evaluate, or one key column of a type no derived
filter states soundly (`key_type_problem`), derives nothing for its keys and the others still share one
pass; after the pass's action each key is finished on its own (a `Finish`). Then one Spark pass per
chunk of `FILTER_SETS_PER_PASS` filter sets (a pass carries one boolean per set; Spark's generated code
for hundreds of IN lists passes the JVM's method size limit): `arrow_pass` for small sources of plain
key types (the rows to the driver as Arrow, the key sets computed there), `aggregated_pass` for the
others (the key sets per filter set computed on the executors; the driver receives at most ``L + 1``
keys and their count and bounds per (key column, filter set), ``L = max(max_in, max_keys)``: past ``L``
keys only the count and the bounds matter). `not_unique` is the log-only half of a source's role: a
proof, from the Delta statistics, that a column holds a key more than once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
from sqlglot import exp

from optimizer.errors import DeltaOptError
from optimizer.join_key_filters import exact_key, key_filters, key_span, key_type_problem
from optimizer.spark_arrow import to_arrow
from optimizer.spark_expr import expression_column
from querylog.errors import QueryLogError
from querylog.predicates.allowlist import check_evaluable
from querylog.predicates.attribute import JoinKey
from querylog.predicates.normalize import parse_canonical
from querylog.predicates.parse import DIALECT
from querylog.records import DerivedFilter

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import Column, DataFrame, Row, SparkSession
    from pyspark.sql.types import DataType

    from optimizer.table.access import Snapshot

log = logging.getLogger(__name__)

FILTER_SETS_PER_PASS = 256  # filter sets evaluated in one pass over a source
Finish = Callable[[], tuple[DerivedFilter, ...]]  # a key's driver-side step after its pass's Spark action


@dataclass(frozen=True)
class Limits:
    """How many keys are listed: as IN up to `max_in` (a range beyond), as a key set up to `max_keys`."""

    max_in: int
    max_keys: int

    @property
    def listed(self) -> int:
        """Keys a pass brings back per filter set: one more than listed, which says "truncated"."""
        return max(self.max_in, self.max_keys)


def derived(key: JoinKey, values: list[Any], low: Any, high: Any, limits: Limits) -> tuple[DerivedFilter, ...]:
    """`key`'s derived filters from its distinct non-NULL joining `values` (more than ``limits.listed``:
    truncated) bounded by `low` and `high`: the finishing step every path shares, ``via`` included."""
    if not values:
        return ()  # nothing joins: the query reads no fact row, which says nothing about layout
    filters = key_filters(key.column, values, low, high, max_in=limits.max_in, max_keys=limits.max_keys)
    via = f"{key.other}.{key.other_column} WHERE {' AND '.join(key.other_filters)}"
    return tuple(DerivedFilter(f, via) for f in filters)


def not_unique(snapshot: Snapshot, column: str) -> bool:
    """Whether the Delta statistics prove that `column` holds some value twice; each rule is a proof,
    never a guess: a partition value over two rows (`_repeated_partition`), a file whose bounds meet over
    two non-NULL rows (`_repeated_in_a_file`), or more non-NULL values than the integers or days between
    the column's least and greatest (`_pigeonhole`). Not proven (False) for other columns and where
    deletion vectors may hide counted rows (the snapshot does not expose their cardinality)."""
    name = _stats_name(snapshot, column)
    if name is None or snapshot.features.deletion_vectors:
        return False
    if name in snapshot.partition_columns:
        return _repeated_partition(snapshot, name)
    return _repeated_in_a_file(snapshot, name) or _pigeonhole(snapshot, name)


def _repeated_partition(snapshot: Snapshot, name: str) -> bool:
    """Two rows under one non-NULL partition value of `name` (every row of a file holds its value; Delta
    writes a NULL partition value as NULL or, for strings, as the empty string). Files spelling one value
    two ways are counted apart: that can only miss a proof."""
    rows: dict[str, int] = defaultdict(int)
    for data_file in snapshot.files:
        value = data_file.partition_values.get(name)
        if value is not None and value != "" and data_file.num_records is not None:
            rows[value] += data_file.num_records
    return any(count >= 2 for count in rows.values())


def _repeated_in_a_file(snapshot: Snapshot, name: str) -> bool:
    """A file whose least and greatest `name` are one integer, decimal or date over two non-NULL rows
    (exact statistics; strings and timestamps may be truncated in them, floats compare NaN apart)."""
    for data_file in snapshot.files:
        if data_file.num_records is None or name not in data_file.null_counts:
            continue
        low = data_file.min_values.get(name)
        high = data_file.max_values.get(name)
        exact = exact_key(low) and type(low) is type(high)
        if exact and low == high and data_file.num_records - data_file.null_counts[name] >= 2:
            return True
    return False


def _pigeonhole(snapshot: Snapshot, name: str) -> bool:
    """More non-NULL values of `name` than integers or days between its least and greatest; not proven
    when a file lacks its statistics (a column past the indexed ones, a table written without them)."""
    present = 0
    lows: list[Any] = []
    highs: list[Any] = []
    for data_file in snapshot.files:
        if data_file.num_records is None or name not in data_file.null_counts:
            return False
        count = data_file.num_records - data_file.null_counts[name]
        if count > 0 and (name not in data_file.min_values or name not in data_file.max_values):
            return False
        present += max(count, 0)
        if count > 0:
            lows.append(data_file.min_values[name])
            highs.append(data_file.max_values[name])
    span = key_span(min(lows), max(highs)) if lows else None
    return span is not None and present > span


def _stats_name(snapshot: Snapshot, column: str) -> str | None:
    """The top-level column of `snapshot` a query's `column` names (Spark resolves names ignoring case)."""
    import json

    fields = [f["name"] for f in json.loads(snapshot.schema_json).get("fields", [])]
    exact = [f for f in fields if f == column]
    matching = exact or [f for f in fields if f.lower() == column.lower()]
    return matching[0] if len(matching) == 1 else None


def condition(texts: tuple[str, ...]) -> Column:
    """TRUE where a row satisfies every filter of `texts` (FALSE where one is FALSE or NULL). Each text
    passes the gate `optimizer.spark_expr.safe_sql` applies (parsed, every node on the allow-list), and
    the whole ``COALESCE((t1) AND (t2) ..., FALSE)`` is rendered by sqlglot and handed to Spark as one
    expression: one call to Spark per filter set, where building it from Column operators took several
    (a batch builds hundreds of them, twice)."""
    from pyspark.sql import functions as F

    parts: list[exp.Expr] = [exp.true()]
    for text in texts:
        expression = parse_canonical(text)
        check_evaluable(expression)
        parts.append(exp.Paren(this=expression))
    satisfied = exp.Coalesce(this=exp.and_(*parts), expressions=[exp.false()])
    return F.expr(satisfied.sql(dialect=DIALECT, identify=True))


def key_column(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def resolvable(frame: DataFrame, keys: Sequence[JoinKey], warned: set[tuple[str, str]] | None = None) -> list[JoinKey]:
    """The `keys` whose key column and filters the source resolves, by Spark's analysis alone (no job),
    and whose key column is of a type a derived filter is sound for (`key_type_problem`); each one that is
    not derives nothing, and why is logged once per (source, reason) in this call, and a refused key type
    once per (source, column) in `warned` (the deriver's life). Every key column and filter set is
    analysed in one select (one analysis, however many statements wait); only when that fails are the
    bad ones found, by halving (`_analysed`)."""
    columns = sorted({k.other_column for k in keys})
    sets = sorted({k.other_filters for k in keys})
    problems: dict[Any, str] = {}
    built: list[tuple[Any, Column]] = []
    makers: list[tuple[Any, Callable[[Any], Column]]] = [(c, key_column) for c in columns]
    makers += [(s, condition) for s in sets]
    for item, make in makers:
        made = _built(make, item)
        if isinstance(made, str):
            problems[item] = made
        else:
            built.append((item, made))
    for item, found in _analysed(frame, built).items():
        problem = found if isinstance(found, str) else key_type_problem(item, found) if item in columns else None
        if problem is not None:
            problems[item] = problem
    return _reported(keys, problems, warned)


def _reported(keys: Sequence[JoinKey], problems: dict[Any, str], warned: set[tuple[str, str]] | None) -> list[JoinKey]:
    """The `keys` with no problem; the others logged, once per (source, reason), and once per (source,
    column) in `warned` for a key column's own problem (its type), which every later call would repeat."""
    reported: set[tuple[str, str]] = set()
    ready = []
    for key in keys:
        column_problem = problems.get(key.other_column)
        problem = column_problem or problems.get(key.other_filters)
        if problem is None:
            ready.append(key)
            continue
        seen = warned if column_problem is not None and warned is not None else reported
        mark = (key.other, key.other_column if seen is warned else problem)
        if mark not in seen:
            seen.add(mark)
            log.warning("cannot derive from %s: %s", key.other, problem)
    return ready


def _built(make: Callable[[Any], Column], argument: Any) -> Column | str:
    """``make(argument)``, or why it cannot be built, in one line (a filter text not allowed or not
    parsed: found before any analysis)."""
    try:
        return make(argument)
    except (QueryLogError, DeltaOptError) as err:
        return str(err)
    except Exception as err:  # Spark's ParseException: a text Spark cannot parse
        return first_line(err)


def _analysed(frame: DataFrame, built: Sequence[tuple[Any, Column]]) -> dict[Any, str | DataType]:
    """Each of the `built` columns' type as `frame` resolves it, or why it fails, by item. One analysis
    when all resolve (the usual case); else halved until each failing column stands alone, so k failing
    columns among n cost O(k log n) analyses, and each one's reason is its own error, as analysed alone.
    The analyses of separate columns are independent, so a set fails exactly when one of its columns does."""
    if not built:
        return {}
    try:
        fields = frame.select(*[column for _, column in built]).schema.fields
        return {item: f.dataType for (item, _), f in zip(built, fields, strict=True)}
    except (QueryLogError, DeltaOptError) as err:
        failure = str(err)
    except Exception as err:  # Spark's AnalysisException: a name or function the source does not have
        failure = first_line(err)
    if len(built) == 1:
        return {built[0][0]: failure}
    half = len(built) // 2
    return _analysed(frame, built[:half]) | _analysed(frame, built[half:])


def first_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def arrow_readable(frame: DataFrame, keys: Sequence[JoinKey]) -> bool:
    """Whether every key column has a type whose Arrow values are the Python values Spark collects
    (integers, strings, dates), as `arrow_pass` needs."""
    from pyspark.sql.types import DateType, IntegralType, StringType

    types = frame.select(*[key_column(c) for c in sorted({k.other_column for k in keys})]).schema
    return all(isinstance(f.dataType, IntegralType | StringType | DateType) for f in types.fields)


def arrow_pass(frame: DataFrame, keys: Sequence[JoinKey], limits: Limits) -> list[Finish]:
    """Each key's finishing step (`Finish`) after one pass taking the source's key columns and one boolean
    per filter set to the driver as Arrow (a small source: the rows fit the driver)."""
    columns = sorted({k.other_column for k in keys})
    sets = sorted({k.other_filters for k in keys})
    selected = [key_column(c).alias(f"k{i}") for i, c in enumerate(columns)]
    selected += [condition(s).alias(f"f{j}") for j, s in enumerate(sets)]
    data = to_arrow(frame.select(*selected))
    found = []
    for key in keys:
        column = data.column(f"k{columns.index(key.other_column)}")
        mask = data.column(f"f{sets.index(key.other_filters)}")
        found.append(_later(_from_arrow, key, column, mask, limits))
    return found


def _from_arrow(key: JoinKey, column: Any, mask: Any, limits: Limits) -> tuple[DerivedFilter, ...]:
    """`key`'s derived filters from the Arrow key `column` where `mask` (its filter set) holds."""
    values = pc.unique(pc.drop_null(pc.filter(column, mask))).to_pylist()
    low = min(values, default=None)
    high = max(values, default=None)
    return derived(key, values[: limits.listed + 1], low, high, limits)


def _later(finish: Callable[..., tuple[DerivedFilter, ...]], *arguments: Any) -> Finish:
    """`finish` of `arguments`, when called: a pass's driver-side step, which the deriver runs per key (so
    one key's failure there costs that key alone, never the pass)."""
    return lambda: finish(*arguments)


def aggregated_pass(frame: DataFrame, keys: Sequence[JoinKey], limits: Limits) -> list[Finish]:
    """Each key's finishing step (`Finish`) after one Spark action whose key sets are computed on the
    executors: one tagged (tag, key) row per matching row and (key column, filter set), distinct, then per
    tag the count, the bounds and the first ``L + 1`` keys. The driver receives at most that many rows per
    tag."""
    columns = sorted({k.other_column for k in keys})
    sets = sorted({k.other_filters for k in keys})
    tags = sorted({(columns.index(k.other_column), sets.index(k.other_filters)) for k in keys})
    selected = [key_column(c).alias(f"k{i}") for i, c in enumerate(columns)]
    projected = frame.select(*selected, *[condition(s).alias(f"f{j}") for j, s in enumerate(sets)])
    by_tag = _summaries(_tagged(projected, tags, len(columns)), len(columns), limits.listed)
    found = []
    for key in keys:
        i = columns.index(key.other_column)
        rows = by_tag.get(tags.index((i, sets.index(key.other_filters))), [])
        found.append(_later(_from_summary, key, rows, i, limits))
    return found


def _tagged(projected: DataFrame, tags: Sequence[tuple[int, int]], width: int) -> DataFrame:
    """Distinct (t, v0..v{width-1}) rows: for every row satisfying filter set j with a non-NULL key in
    column i, the index t of (i, j) in `tags` and that key under ``v{i}`` (the other ``v`` NULL). Each
    row carries only the tags it matches (integers: cheap to build per row), one row per tag after the
    explode."""
    from pyspark.sql import functions as F

    matching = [F.when(F.col(f"f{j}") & F.col(f"k{i}").isNotNull(), F.lit(t)) for t, (i, j) in enumerate(tags)]
    keys = [F.col(f"k{c}") for c in range(width)]
    exploded = projected.select(*keys, F.explode(F.filter(F.array(*matching), lambda t: t.isNotNull())).alias("t"))
    column = F.element_at(F.array(*[F.lit(i) for i, _ in tags]), F.col("t") + 1)
    values = [F.when(column == c, F.col(f"k{c}")).alias(f"v{c}") for c in range(width)]
    return exploded.select("t", *values).distinct()


def _summaries(tagged: DataFrame, width: int, listed: int) -> dict[int, list[Row]]:
    """Per tag, its first ``listed + 1`` distinct keys in order, each row carrying the tag's key count
    (``n``) and bounds (``lo{i}``, ``hi{i}``): the one Spark action of an aggregated pass."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_tag = Window.partitionBy("t")
    ordered = by_tag.orderBy(*[F.col(f"v{c}") for c in range(width)])
    summary = tagged.select(
        "t",
        *[F.col(f"v{c}") for c in range(width)],
        F.count(F.lit(1)).over(by_tag).alias("n"),
        *[F.min(f"v{c}").over(by_tag).alias(f"lo{c}") for c in range(width)],
        *[F.max(f"v{c}").over(by_tag).alias(f"hi{c}") for c in range(width)],
        F.row_number().over(ordered).alias("rn"),
    )
    grouped: dict[int, list[Row]] = defaultdict(list)
    for row in summary.where(F.col("rn") <= listed + 1).collect():
        grouped[row["t"]].append(row)
    return grouped


def _from_summary(key: JoinKey, rows: list[Row], column: int, limits: Limits) -> tuple[DerivedFilter, ...]:
    """`key`'s derived filters from its tag's summary rows (key column `column`), as the one-key path
    gives them: the bounds of the listed keys, or past ``L`` keys those of all its keys."""
    ordered = sorted(rows, key=lambda r: r["rn"])
    values = [r[f"v{column}"] for r in ordered]
    if not values:
        return ()
    if ordered[0]["n"] > limits.listed:  # truncated: the bounds come from all keys
        return derived(key, values, ordered[0][f"lo{column}"], ordered[0][f"hi{column}"], limits)
    return derived(key, values, min(values), max(values), limits)


def one_key_pass(frame: DataFrame, key: JoinKey, limits: Limits) -> tuple[DerivedFilter, ...]:
    """`key`'s derived filters from its own Spark job over the source (a second one for the bounds when
    more than ``limits.listed`` keys join)."""
    from pyspark.sql import functions as F

    for text in key.other_filters:  # one filter per text: Spark pushes each down to the scan (COALESCE it would not)
        frame = frame.filter(expression_column(text))
    keys = frame.select(key_column(key.other_column).alias("k")).where(F.col("k").isNotNull()).distinct()
    values = [r["k"] for r in keys.limit(limits.listed + 1).collect()]
    if len(values) > limits.listed:  # truncated: the bounds come from all keys
        low, high = keys.agg(F.min("k"), F.max("k")).collect()[0]
        return derived(key, values, low, high, limits)
    return derived(key, values, min(values, default=None), max(values, default=None), limits)


def spark_context(spark: SparkSession) -> SparkContext | None:
    """The session's SparkContext, None for a Spark Connect session (which has none)."""
    try:
        return spark.sparkContext
    except Exception:  # PySpark's "not supported in Spark Connect"
        return None
