"""A row's place among sorted cuts, computed by Spark: a Z dimension's range id among its boundaries
(`with_range_id`), a row's file or row group among an order key's cuts (`with_cut_index`).

Both are a binary search over the cuts, run as one projection per step: the cuts sit in one array
literal per key component, and step s moves the position found so far up by 2^s where the row is at
or above the cut there. A search of n cuts is ceil(log2(n + 1)) small expressions, where a nested CASE
(what this replaced) grows with n: at 1023 boundaries (11-bit range ids) a key of three dimensions no
longer compiled (Janino's 64 KB per method), so Spark fell back to interpreting it, shipped an 8.5 MiB
task binary and took 3.4x the time of the steps (measured: 2M rows, 3 dimensions, 40.6 s against
11.8 s; 2.7x at 255 boundaries, 1.3x at 63).

Each step reads the position column several times, so Spark's optimizer keeps the steps as separate
projections (CollapseProject does not inline an expression that its consumer uses more than once)
instead of nesting them into one expression that doubles with every step. The array is padded to
2^steps - 1 entries with copies of its last cut, so no step indexes past it (ANSI mode would fail the
query); a row above the last cut counts the copies too, and the count is capped at the number of cuts.

Never filter on a result, or on anything computed from it, unless the frame is cached or checkpointed
first: Spark's filter pushdown moves such a filter below shuffles, sorts and aggregations grouped by the
result, down to the steps, and inlines every step into its condition, which then grows 3-9x per step
(review 60 ran out of memory at 15 cuts). The callers group, repartition and sort by the results only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def with_range_id(frame: DataFrame, column: str, boundaries: Sequence[Any], name: str) -> DataFrame:
    """`frame` with `column`'s range id in `name`: 0 for NULL, else 1 + the number of `boundaries`
    (sorted, distinct) <= the value. A NaN is above every boundary, as Spark orders it."""
    from pyspark.sql import functions as F

    value = F.col(f"`{column}`")
    cuts = _padded_array(boundaries)
    frame, scratch = _with_position(frame, name, len(boundaries), lambda at: F.element_at(cuts, at) <= value)
    counted = F.least(F.col(f"`{scratch}`"), F.lit(len(boundaries)))
    range_id = F.when(value.isNull(), F.lit(0)).otherwise(counted + F.lit(1)).cast("long")
    return frame.withColumn(name, range_id).drop(scratch)


def with_cut_index(
    frame: DataFrame, columns: Sequence[Column], cuts: Sequence[tuple[Any, ...]], name: str
) -> DataFrame:
    """`frame` with the number of `cuts` <= the row's key in `name` (an int): its file's index where
    file i holds the keys in [cut i-1, cut i). Keys compare lexicographically, NULL before any value,
    as rows are sorted within files."""
    from pyspark.sql import functions as F

    components = [_padded_array([cut[j] for cut in cuts]) for j in range(len(columns))]

    def at_least(at: Column) -> Column:
        return _lexicographic_at_least(columns, [F.element_at(c, at) for c in components])

    frame, scratch = _with_position(frame, name, len(cuts), at_least)
    return frame.withColumn(name, F.least(F.col(f"`{scratch}`"), F.lit(len(cuts)))).drop(scratch)


def _with_position(
    frame: DataFrame, name: str, cuts: int, at_least: Callable[[Column], Column]
) -> tuple[DataFrame, str]:
    """`frame` with the search's position, the number of padded cuts the row is at or above (cap it at
    `cuts`), in a column of its own (its name returned; drop it once read), so that no step overwrites
    a column the search reads (`name` may be a key column). `at_least(i)` says whether the row is at or
    above cut i (1-based, as Spark's `element_at`) for a position column i; false or NULL: below."""
    from pyspark.sql import functions as F

    taken = {c.lower() for c in frame.columns}
    scratch = f"{name}_search"
    while scratch.lower() in taken:
        scratch = f"_{scratch}"
    position = F.col(f"`{scratch}`")
    frame = frame.withColumn(scratch, F.lit(0))
    for power in reversed(range(_steps(cuts))):
        step = position + F.lit(1 << power)
        frame = frame.withColumn(scratch, F.when(at_least(step), step).otherwise(position))
    return frame, scratch


def _steps(cuts: int) -> int:
    """The steps a search of `cuts` cuts takes: the array they are padded to holds 2^steps - 1."""
    return cuts.bit_length()


def _padded_array(values: Sequence[Any]) -> Column:
    """`values` as one array literal of 2^steps - 1 entries, padded with copies of the last; dates and
    timestamps as their ISO text with one cast of the whole array (`sample_literal`)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    padded = [*values, *[values[-1]] * ((1 << _steps(len(values))) - 1 - len(values))] if values else []
    kind = _temporal_type(padded)
    if kind is None:
        return F.array(*[F.lit(v) for v in padded])
    return F.array(*[F.lit(_iso(v)) for v in padded]).cast(T.ArrayType(kind))


def sample_literal(value: Any) -> Column:
    """A cut's value (from the sample, as Arrow gives it to Python, or a cut tree's) as the Spark literal of
    its column's type. Dates and timestamps are cast from their ISO text to the type itself: PySpark's
    classic conversion reads a naive datetime (a TIMESTAMP_NTZ value) in the Python process's time zone,
    not as the wall clock it is, builds a date through java.sql.Date, which fails below year 1000, and a
    timestamp through java.sql.Timestamp, which shifts days before 1582 (Spark's calendar is proleptic
    Gregorian, as Python's). The cast names a type object, never "timestamp": Spark reads that name as
    `spark.sql.timestampType`, which an operator may set to TIMESTAMP_NTZ."""
    from pyspark.sql import functions as F

    kind = _temporal_type([value])
    return F.lit(value) if kind is None else F.lit(_iso(value)).cast(kind)


def _temporal_type(values: Sequence[Any]) -> Any:
    """DateType, TimestampType (offset-aware datetimes) or TimestampNTZType (naive ones) when every value
    present is of that kind; None otherwise (numbers, strings, NULLs only)."""
    from pyspark.sql import types as T

    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, dt.datetime) for v in present):
        aware = {v.utcoffset() is not None for v in present}
        return None if len(aware) > 1 else T.TimestampType() if aware.pop() else T.TimestampNTZType()
    if all(isinstance(v, dt.date) and not isinstance(v, dt.datetime) for v in present):
        return T.DateType()
    return None


def _iso(value: dt.date | None) -> str | None:
    """A date's or datetime's ISO text (a four-digit year, the offset when it has one), Spark's cast input."""
    if value is None:
        return None
    return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()


def _lexicographic_at_least(columns: Sequence[Column], cut: Sequence[Column]) -> Column:
    """(columns) >= cut, lexicographically, NULL before any value; `cut` are Spark values (a NULL one
    is below or equal to anything: only a NULL equals it and defers to the rest)."""
    from pyspark.sql import functions as F

    first, value, rest = columns[0], cut[0], columns[1:]
    if not rest:
        return value.isNull() | F.coalesce(first >= value, F.lit(False))
    deferred = _lexicographic_at_least(rest, cut[1:])
    above = F.coalesce(first > value, F.lit(False))
    return F.when(value.isNull(), F.when(first.isNull(), deferred).otherwise(F.lit(True))).otherwise(
        F.when(first == value, deferred).otherwise(above)
    )
