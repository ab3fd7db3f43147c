"""Step C3: Z-order over the Z features plus the SOP partition id.

Each dimension is mapped to a *range id* from quantile boundaries of a sample of its values, as
Delta's OPTIMIZE ZORDER does: robust to skew and defined for any orderable type (numbers, dates,
timestamps, strings). The range id is a binary search over the boundaries that Spark runs a step per
projection (`cut_search`), NULL is range 0. The ids become one 64-bit key along a curve (`curves`:
Z-order, the ids' bits interleaved, round-robin or by a bit pattern, `FeatureSet.precision`, or a
Hilbert curve, `FeatureSet.curve`); the same sample gives the file boundaries of the key, so rows go
to files of the target size in one shuffle, sorted within files.

Resolution: n files over d dimensions cut each dimension about n^(1/d) times; the boundaries give 16x
that resolution (between 16 and 1024 ranges). One dimension needs no ranges at all: it is sorted by
its value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from optimizer.clustering.curves import check_curve, curve_ids, with_curve_key
from optimizer.clustering.cut_search import with_cut_index, with_range_id
from optimizer.clustering.file_cuts import aligned_cuts, present_values
from optimizer.features import Curve
from optimizer.spark_arrow import to_arrow
from optimizer.table.fingerprint import hashable_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

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
    """The range id `cut_search.with_range_id` computes in Spark, for one value in Python (`range_ids` for many)."""
    return int(range_ids([value], boundaries)[0])


@dataclass(frozen=True)
class GroupIndex:
    """Where a layout never written (the estimator's virtual files) puts each row's row group: the
    column, and how many row groups a file is cut into. The groups are consecutive runs of the order
    rows are sorted in within a file, cut at the sample's quantiles like the files themselves, so
    grouping by (file, group) needs no sort."""

    column: str
    groups: int


@dataclass(frozen=True)
class Helpers:
    """The names of the columns the layout adds to the rows for a while (SOP vector and id, Z values,
    tie-breaker, Z key): under a prefix no column of the table starts with, so a table may have columns
    called anything, ``__sop_id`` included."""

    prefix: str = "__"

    @classmethod
    def avoiding(cls, columns: Sequence[str]) -> Helpers:
        taken = [c.lower() for c in columns]
        prefix, n = "__", 0
        while any(c.startswith(prefix) for c in taken):
            n += 1
            prefix = f"__d{n}_"
        return cls(prefix)

    @property
    def sop_vec(self) -> str:
        return f"{self.prefix}sop_vec"

    @property
    def sop_id(self) -> str:
        return f"{self.prefix}sop_id"

    def z(self, i: int) -> str:
        return f"{self.prefix}z{i}"

    def range_id(self, i: int) -> str:
        """Dimension i's range id, on the way to the key (`cut_search.with_range_id`)."""
        return f"{self.prefix}rid{i}"

    @property
    def cut_index(self) -> str:
        """A row's file (or row group) among the key's cuts, on the way to its column or partition."""
        return f"{self.prefix}cut"

    @property
    def tie(self) -> str:
        return f"{self.prefix}tie"

    @property
    def zkey(self) -> str:
        return f"{self.prefix}zkey"

    @property
    def curve(self) -> str:
        """The prefix of the columns a curve's key is computed through (`curves.with_curve_key`)."""
        return f"{self.prefix}curve_"


def zorder(
    frame: DataFrame,
    columns: Sequence[str],
    files: int,
    *,
    rows: int,
    leading: Sequence[str] = (),
    sample_rows: int = 100_000,
    seed: int = 5,
    file_column: str | None = None,
    observe: Callable[[DataFrame], DataFrame] | None = None,
    helpers: Helpers | None = None,
    row_groups: GroupIndex | None = None,
    curve: Curve = "z",
    precision: Sequence[int] = (),
    aligned: int = 0,
) -> tuple[DataFrame, list[Dimension]]:
    """`frame`'s `rows` rows cut into about `files` files by (`leading` columns, `curve` key of `columns`)
    and sorted within each (one column: by its value), with the dimensions used. Table partition
    columns lead, so each file mostly falls in one table partition.

    One sample, collected to the driver, gives both each dimension's range boundaries and the file
    boundaries of the order key; a file index computed from those boundaries then decides each row's
    file. Spark's range partitioning would instead read and compute the whole input once more just to
    sample it. Boundaries only balance file sizes: a sample that misjudges them makes files uneven,
    never loses a row; a row's file depends on its values alone, so a retried task sends it to the
    same file.

    With `file_column`, rows are not moved: each gets its file's index in that column instead (what
    the estimator's virtual files aggregate by, without a shuffle into as many partitions as files).
    `observe` wraps the frame the shuffle reads (after the sample's job, which reads it too).
    `helpers` names the columns added for a while (default: a prefix no column of `frame` starts with).
    `row_groups` gives each row its row group within its file (`GroupIndex`). `precision` is Z-order's bit
    pattern over `columns` (`curves.key_bit_order`; ignored for one column, which is sorted by value).
    The first `aligned` `leading` columns start a new file wherever their values change (`aligned_cuts`)."""
    from pyspark.sql import functions as F

    check_curve(curve, len(columns), precision)
    files = max(files, 1)
    names = helpers or Helpers.avoiding(frame.columns)
    every = hashable_columns([frame.schema[c] for c in frame.columns])
    if not columns and not leading:
        return _unordered(frame, files, every, file_column=file_column, observe=observe, row_groups=row_groups), []
    added = [names.tie] if len(columns) == 1 else []
    if added:
        # a deterministic tie-breaker lets a value shared by many rows (a SOP id, a low-cardinality
        # column) be split into target-size files; a random one could move rows on task retries
        frame = frame.withColumn(names.tie, F.xxhash64(*every))
    values = _sample(frame, [*leading, *columns, *added], rows, max(sample_rows, 100 * files), seed)
    ranges = ranges_for(files, len(columns))
    dimensions = [Dimension(c, quantile_boundaries(values[c], ranges) if ranges else ()) for c in columns]
    if len(dimensions) > 1:
        frame = _with_key(frame, dimensions, names, (curve, precision))
        added.append(names.zkey)
    key_columns, sampled = _order_key(dimensions, leading, values, names, curve=(curve, precision))
    cuts = aligned_cuts(sampled, files, aligned)
    if row_groups is not None:  # the same order cut `groups` times finer: consecutive rows of a file
        finer = aligned_cuts(sampled, files * row_groups.groups, aligned)
        frame = with_cut_index(frame, key_columns, finer, row_groups.column)
    return _placed(frame, key_columns, cuts, names, file_column=file_column, observe=observe).drop(*added), dimensions


CurveSpec = tuple[Curve, Sequence[int]]
"""The curve, and Z-order's bit pattern (`FeatureSet.curve`, `FeatureSet.precision`)."""


def _with_key(frame: DataFrame, dimensions: Sequence[Dimension], names: Helpers, curve: CurveSpec) -> DataFrame:
    """`frame` with the order key of two or more `dimensions` in `names.zkey`: their range ids along
    the curve (`curves`), a column of its own as the file index and the sort compare it many times."""
    from pyspark.sql import functions as F

    for i, d in enumerate(dimensions):
        frame = with_range_id(frame, d.column, d.boundaries, names.range_id(i))
    ids = [F.col(f"`{names.range_id(i)}`") for i in range(len(dimensions))]
    bits = [d.bits for d in dimensions]
    keyed = with_curve_key(frame, names.zkey, ids, bits, curve=curve[0], scratch=names.curve, precision=curve[1])
    return keyed.drop(*[names.range_id(i) for i in range(len(dimensions))])


def _placed(
    frame: DataFrame,
    key_columns: Sequence[Column],
    cuts: Sequence[tuple[Any, ...]],
    names: Helpers,
    *,
    file_column: str | None,
    observe: Callable[[DataFrame], DataFrame] | None,
) -> DataFrame:
    """Each row's file from its order key and the file `cuts`: its index in `file_column`, or the rows
    moved into one shuffle partition per file (`observe` wrapping what the shuffle reads) and sorted
    (the index computed on the way in `names.cut_index`)."""
    from pyspark.sql import functions as F

    if file_column is not None:
        return with_cut_index(frame, key_columns, cuts, file_column)
    keys = F.array(*[F.lit(k).cast("long") for k in hash_partition_keys(frame, len(cuts) + 1)])  # probed as longs
    frame = with_cut_index(frame, key_columns, cuts, names.cut_index)
    partition = F.element_at(keys, F.col(f"`{names.cut_index}`") + 1)
    if observe is not None:
        frame = observe(frame)
    return frame.repartition(len(cuts) + 1, partition).sortWithinPartitions(*key_columns).drop(names.cut_index)


def _unordered(
    frame: DataFrame,
    files: int,
    every: Sequence[Column],
    *,
    file_column: str | None,
    observe: Callable[[DataFrame], DataFrame] | None,
    row_groups: GroupIndex | None,
) -> DataFrame:
    """`zorder` with no dimension and nothing leading (compaction): rows spread over `files` files by
    their hash (`every`: the row's hashable columns), in no particular order within a file either."""
    from pyspark.sql import functions as F

    if row_groups is not None:
        frame = frame.withColumn(row_groups.column, F.pmod(F.xxhash64(F.lit(1), *every), F.lit(row_groups.groups)))
    if file_column is not None:
        return frame.withColumn(file_column, F.pmod(F.xxhash64(*every), F.lit(files)))
    return (observe(frame) if observe else frame).repartition(files)


def _sample(frame: DataFrame, names: Sequence[str], rows: int, wanted: int, seed: int) -> dict[str, list[Any]]:
    """About `wanted` of the `rows` rows' `names` columns, on the driver, one list per column."""
    from pyspark.sql import functions as F

    sample = frame.select(*[F.col(f"`{c}`") for c in names])
    if rows > wanted:
        sample = sample.sample(withReplacement=False, fraction=min(1.0, wanted / rows), seed=seed)
    table = to_arrow(sample)  # columnar: converting Row objects took most of the sampling time
    return {name: table.column(i).to_pylist() for i, name in enumerate(names)}


def _order_key(
    dimensions: Sequence[Dimension],
    leading: Sequence[str],
    values: Mapping[str, list[Any]],
    names: Helpers,
    *,
    curve: CurveSpec,
) -> tuple[list[Column], list[list[Any]]]:
    """What rows are ordered by, as Spark columns, and the same key's components over the sampled rows
    in `values` (one list per component; the curve's key by `curves.curve_ids`, as Spark computes it)."""
    from pyspark.sql import functions as F

    spark_columns = [F.col(f"`{c}`") for c in leading]
    parts = [values[c] for c in leading]
    if len(dimensions) == 1:
        spark_columns += [F.col(f"`{dimensions[0].column}`"), F.col(f"`{names.tie}`")]
        parts += [values[dimensions[0].column], values[names.tie]]
    elif dimensions:
        spark_columns.append(F.col(f"`{names.zkey}`"))  # a column of its own: file index and sort compare it many times
        ids = [range_ids(values[d.column], d.boundaries) for d in dimensions]
        parts.append(curve_ids(curve[0], ids, [d.bits for d in dimensions], precision=curve[1]).tolist())
    return spark_columns, parts


def range_ids(values: list[Any], boundaries: Sequence[Any]) -> np.ndarray:
    """`range_id_of` over a sample column at once (a binary search per value in numpy's C loop), over the
    values as `present_values` gives them: numbers natively, so a NaN is above every boundary, as Spark
    orders it (over Python objects numpy's search put every value after a NaN in the wrong range)."""
    present, column = present_values(values)
    ids = np.zeros(len(values), dtype=np.int64)
    if not boundaries or not len(column):
        ids[present] = 1
        return ids
    if column.dtype == object:
        cuts = np.empty(len(boundaries), dtype=object)
        cuts[:] = list(boundaries)
    else:
        cuts = np.asarray(boundaries)
    ids[present] = 1 + np.searchsorted(cuts, column, side="right")
    return ids


_PARTITION_KEYS: dict[int, tuple[int, ...]] = {}  # Spark's hash is fixed, so the table is per count only


def hash_partition_keys(frame: DataFrame, partitions: int) -> tuple[int, ...]:
    """For each shuffle partition p, a long that ``repartition(partitions, key)`` sends to p (Spark's
    hash partitioning is ``pmod(hash(key), partitions)``, the `hash` function itself, so Spark computes
    the table). Repartitioning by these keys puts file i's rows in partition i, without a range
    partitioner's extra pass."""
    if partitions not in _PARTITION_KEYS:
        _PARTITION_KEYS[partitions] = _probe_keys(frame.sparkSession, partitions)
    return _PARTITION_KEYS[partitions]


def _probe_keys(spark: SparkSession, partitions: int) -> tuple[int, ...]:
    from pyspark.sql import functions as F

    found: dict[int, int] = {}
    size = partitions * 16
    while len(found) < partitions:
        probe = to_arrow(spark.range(size).select("id", F.pmod(F.hash("id"), F.lit(partitions)).alias("p")))
        for key, target in zip(probe.column(0).to_pylist(), probe.column(1).to_pylist(), strict=True):
            found.setdefault(target, key)
        size *= 4
    return tuple(found[p] for p in range(partitions))
