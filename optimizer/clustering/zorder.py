"""Step C3: Z-order over the Z features plus the SOP partition id.

Each dimension is mapped to a *range id* from quantile boundaries of a sample of its values, as
Delta's OPTIMIZE ZORDER does: robust to skew and defined for any orderable type (numbers, dates,
timestamps, strings). The range id is a nested CASE (a binary search over the boundaries) evaluated by
Spark, NULL is range 0. The ids' bits are interleaved into one 64-bit key, and the data is range-
partitioned by the key into files of the target size and sorted within files.

Resolution: n files over d dimensions cut each dimension about n^(1/d) times; the boundaries give 16x
that resolution (between 16 and 1024 ranges). One dimension needs no ranges at all: it is sorted by
its value.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MIN_RANGES = 16
MAX_RANGES = 1024


@dataclass(frozen=True)
class Dimension:
    """One Z-order dimension: an output column of the frame being ordered, and its boundaries."""

    column: str
    boundaries: tuple[Any, ...]

    @property
    def bits(self) -> int:
        return max((len(self.boundaries) + 1).bit_length(), 1)  # range ids 0 (NULL) .. len + 1


def ranges_for(files: int, dimensions: int) -> int:
    if dimensions <= 1:
        return 0
    per_dimension = max(files, 1) ** (1 / dimensions)
    return int(min(MAX_RANGES, max(MIN_RANGES, 2 ** math.ceil(math.log2(per_dimension * 16)))))


def quantile_boundaries(values: Sequence[Any], ranges: int) -> tuple[Any, ...]:
    """Up to ``ranges - 1`` distinct cut points splitting sorted non-NULL `values` into equal shares."""
    present = sorted(v for v in values if v is not None and v == v)  # NaN sorts last in Spark: own range
    if not present or ranges < 2:
        return ()
    cuts = {present[min(len(present) - 1, len(present) * k // ranges)] for k in range(1, ranges)}
    cuts.discard(present[0])  # the lowest value needs no cut below it
    return tuple(sorted(cuts))


def range_id_of(value: Any, boundaries: Sequence[Any]) -> int:
    """The range id `range_id` computes in Spark, in Python (for tests and virtual layouts)."""
    return 0 if value is None else 1 + bisect_right(list(boundaries), value)


def range_id(column: Column, boundaries: Sequence[Any]) -> Column:
    """1 + the number of boundaries <= value (a binary search as nested CASE); 0 for NULL."""
    from pyspark.sql import functions as F

    def search(low: int, high: int) -> Column:
        if low == high:
            return F.lit(low)
        middle = (low + high + 1) // 2
        return F.when(column >= F.lit(boundaries[middle - 1]), search(middle, high)).otherwise(search(low, middle - 1))

    return F.when(column.isNull(), F.lit(0)).otherwise(search(0, len(boundaries)) + F.lit(1)).cast("long")


def interleave(ids: Sequence[Column], bits: Sequence[int]) -> Column:
    """The Z-value: bit t of dimension i goes to position t * d + i (dimensions with fewer bits drop out
    of the higher rounds), so every dimension gets equal weight at every level of the curve."""
    from pyspark.sql import functions as F

    key = F.lit(0).cast("long")
    position = 0
    for t in range(max(bits)):
        for i, column in enumerate(ids):
            if t < bits[i]:
                bit = F.shiftright(column, t).bitwiseAND(F.lit(1))
                key = key.bitwiseOR(F.shiftleft(bit, position))
                position += 1
    if position > 63:
        raise ValueError(f"Z-value needs {position} bits; at most 63 fit in a long")
    return key


def dimensions_from_sample(
    frame: DataFrame, columns: Sequence[str], files: int, sample_rows: int = 100_000, seed: int = 5
) -> list[Dimension]:
    """Boundaries of each column from a sample of `frame` collected to the driver."""
    ranges = ranges_for(files, len(columns))
    if ranges == 0:
        return [Dimension(c, ()) for c in columns]
    total = frame.count()
    sample = frame.select(*columns)
    if total > sample_rows:
        sample = sample.sample(withReplacement=False, fraction=min(1.0, sample_rows / total), seed=seed)
    values = sample.toArrow()  # columnar: converting Row objects took most of this function's time
    return [Dimension(c, quantile_boundaries(values.column(i).to_pylist(), ranges)) for i, c in enumerate(columns)]


def zorder(
    frame: DataFrame, dimensions: Sequence[Dimension], files: int, leading: Sequence[str] = (), key: str = "__zkey"
) -> DataFrame:
    """`frame` range-partitioned into `files` partitions by (`leading` columns, Z-value of `dimensions`)
    and sorted within each (one dimension: by its value). Table partition columns lead, so each range
    mostly falls in one table partition. The key column is dropped before returning."""
    from pyspark.sql import functions as F

    order = [F.col(f"`{c}`") for c in leading]
    if len(dimensions) == 1:
        # a deterministic tie-breaker lets range partitioning split a value shared by many rows (a SOP id,
        # a low-cardinality column) into target-size files; a random one could move rows on task retries
        order += [F.col(dimensions[0].column), F.xxhash64(*[F.col(f"`{c}`") for c in frame.columns])]
    elif dimensions:
        ids = [range_id(F.col(d.column), d.boundaries) for d in dimensions]
        frame = frame.withColumn(key, interleave(ids, [d.bits for d in dimensions]))
        order.append(F.col(key))
    if not order:
        return frame.repartition(max(files, 1))
    ordered = frame.repartitionByRange(max(files, 1), *order).sortWithinPartitions(*order)
    return ordered.drop(key) if len(dimensions) > 1 else ordered
