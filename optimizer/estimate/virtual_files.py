"""Virtual files (thesis 5.2): a clustered sample cut like the real job would cut it, with statistics.

The sample is laid out by `optimizer.clustering.job.cluster_frame` (the job's own C1-C3 code) into as
many files as the real job would write, so each holds the same share of rows as a real target-size
file: each row gets its file's index, or, with `measure`, rows are moved into one Spark partition per
file and written (to scratch) so the estimate can price how differently the layout compresses. Each
virtual file's statistics are computed by the same aggregates as a real file's (Delta column
statistics, encoded and decoded as the log would hold them, plus the extended statistics of
`StatsSpec`), so pruning treats it exactly like a real file. Column sizes come from the real files'
Parquet footers, per row.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from optimizer.clustering.joined import with_joined
from optimizer.clustering.layout import cluster_frame
from optimizer.clustering.zorder import GroupIndex, Helpers
from optimizer.estimate.leaf_boxes import LEAF_RANGE, LeafBoxes
from optimizer.features import FeatureSet, ZFeature
from optimizer.skipping.collect import StatsSpec, stats_spec
from optimizer.skipping.filestats import FileStats, file_stats, partition_bounded, table_column_types
from optimizer.table.access import DataFile, Snapshot
from optimizer.table.footer_stats import footer_type
from optimizer.table.stats import (
    StatsColumn,
    data_columns,
    decode_stats,
    delta_stats_json,
    file_stat_aggregates,
    stats_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class VirtualFiles:
    files: tuple[FileStats, ...]  # as deltaopt's pruning sees them (extended statistics included)
    rows: Mapping[str, int]  # virtual path -> rows
    written: Mapping[str, Mapping[str, int]] | None = None  # virtual path -> column bytes as written
    standard: tuple[FileStats, ...] = ()  # as a standard reader sees them (Delta statistics only)
    # virtual path -> its row groups in file order, as a reader skipping row groups sees them (footer
    # statistics; `rows` set, no bytes: the caller prices rows); empty when each file is one row group
    groups: Mapping[str, tuple[FileStats, ...]] = field(default_factory=dict)


# Sampled rows a virtual row group holds at least: a filter matching 1% of rows misses all of 200 rows
# 13% of the time, so the group looks skippable where the real one (100,000s of rows) is read.
GROUP_SAMPLE_ROWS = 200

# Rows of the sample the virtual layout's Z ranges and file boundaries are drawn from (the job draws
# 100,000 from all the data): enough for even files, and converting more to Python dominated a layout.
BOUNDARY_ROWS = 20_000

UNSORTED_SEED = 29  # the shuffled order of a file's rows where the writer sorts none (`sorted_within`)

# Column bytes of a frame written one file per partition, by partition; None: could not be measured.
Measure = Callable[["DataFrame"], Mapping[int, Mapping[str, int]] | None]


def virtual_files(
    sample: DataFrame,
    snapshot: Snapshot,
    features: FeatureSet,
    files: int,
    measure: Measure | None = None,
    *,
    row_groups: tuple[int, Collection[str]] = (1, ()),
    rows: Callable[[], int] | None = None,
    sorted_within: bool = True,
) -> VirtualFiles:
    """`sample` clustered on `features` into `files` virtual files with their statistics; with `measure`,
    also the column bytes `measure` finds for them (one file per virtual file). With `row_groups` = (count,
    filtered columns), each file's rows, in the order the job sorts them within a file, are cut into about
    `count` row groups (at most one per `GROUP_SAMPLE_ROWS` sampled rows), bounded on the columns rows are
    ordered by (`_ordered_columns`); none without `sorted_within` (Delta's OPTIMIZE by default: a file's rows
    in no order, written shuffled). `rows`: the sample's row count (counted here for joined features)."""
    from pyspark.sql import functions as F

    schema = snapshot.spark_schema()
    stored = data_columns(schema, snapshot.partition_columns)
    columns = [*stats_columns(stored, snapshot.configuration), *_partition_stats(schema, snapshot.partition_columns)]
    sample, spec = _with_spec(sample, features, {c.name.lower() for c in columns if c.minmax})
    rows_in = rows() if rows is not None and not features.joined else sample.count()
    prefix = Helpers.avoiding(sample.columns).prefix  # beside the sample's columns: no name of theirs
    file_index, group_index = f"{prefix}file", f"{prefix}group"
    ordered = _ordered_columns(features, stored) if sorted_within else set()
    count = min(row_groups[0], rows_in // (max(files, 1) * GROUP_SAMPLE_ROWS)) if ordered else 0
    cut = GroupIndex(group_index, count) if count > 1 else None
    layout = cluster_frame(
        sample,
        features,
        stored.names,
        snapshot.partition_columns,
        rows_per_file=max(rows_in / max(files, 1), 1.0),
        files=files,
        fingerprint=False,  # never written as a rewrite: nothing to verify
        file_column=None if measure else file_index,  # files to write, or only their rows' file index
        boundary_rows=BOUNDARY_ROWS,
        row_groups=cut,
        known_rows=rows_in,
    )
    # a group's statistics also of the filtered columns past Delta's (footers have every column's), after them
    in_groups = [*columns, *_past_delta(stored, columns, ordered & set(row_groups[1]))] if cut else columns
    aggregates = file_stat_aggregates(in_groups, spec.aggregates())
    bounded = [replace(c, minmax=c.minmax and _footer_bounded(c) and c.name.lower() in ordered) for c in in_groups]
    boxes = LeafBoxes.of(features, stored, prefix, _curve_columns(features)) if cut else None  # a tree's others
    if measure is None:  # statistics per file index: no shuffle into as many partitions as files
        per_file, groups = _aggregated(layout.frame, (file_index, cut), aggregates, bounded, boxes)
        measured = None
    else:
        frame = layout.frame.withColumn(file_index, F.spark_partition_id()).persist()  # the shuffle runs once
        try:
            per_file, groups = _aggregated(frame, (file_index, cut), aggregates, bounded, boxes)
            measured = measure(_as_written(frame, stored.names, sorted_within))
        finally:
            frame.unpersist()
    written = {_virtual_path(i): sizes for i, sizes in measured.items()} if measured is not None else None
    made = _files_of(per_file, columns, table_column_types(schema.fields), spec)
    return replace(made, written=written, groups=groups)


def _partition_stats(schema: StructType, partition_columns: Sequence[str]) -> list[StatsColumn]:
    """The partition columns as statistics of the virtual files: a real file's partition value bounds it
    (`skipping.filestats._partition_bounds`), so a virtual file's range over its rows must too, or a
    filter on the partition column would prune the files before and none after. Only the types a
    partition value bounds (strings and `partition_value`'s): timestamps stay unknown on both sides."""
    kept = {name.lower() for name in partition_columns}
    return [
        StatsColumn((f.name,), f.dataType.simpleString(), True)
        for f in schema.fields
        if f.name.lower() in kept and partition_bounded(f.dataType.simpleString())
    ]


def _as_written(frame: DataFrame, names: Sequence[str], sorted_within: bool) -> DataFrame:
    """The stored columns of the laid-out `frame`, each partition's rows as the writer leaves them: in the
    layout's order, or shuffled where the writer sorts none (Delta's range partitioning hands each file
    runs of rows from the tasks that read its input, in no order of the layout)."""
    from pyspark.sql import functions as F

    rows = frame.select(*[F.col(f"`{n}`") for n in names])
    return rows if sorted_within else rows.sortWithinPartitions(F.rand(UNSORTED_SEED))


def _with_spec(sample: DataFrame, features: FeatureSet, delta_columns: set[str]) -> tuple[DataFrame, StatsSpec]:
    """The sample with joined features' attributes, and the extended statistics its files get.

    A virtual file's key set would list only its sampled keys, and prune where the real file's could
    not: the estimate leaves key sets out. A joined feature's attribute is looked up (once, here) and
    its range per virtual file kept instead: the replay states dimension filters on it
    (`analysis.joined.helper_filters`), where the real files' key sets judge the keys they imply."""
    sample, _ = with_joined(sample, features.joined)
    helpers = tuple(ZFeature(j.helper) for j in features.joined if j.helper in sample.columns)
    spec = stats_spec(sample, replace(features, z_add=(*features.z_add, *helpers)), delta_columns)
    return sample, replace(spec, keys=())


def _files_of(
    per_file: Sequence[Row], columns: Sequence[StatsColumn], types: Mapping[str, str], spec: StatsSpec
) -> VirtualFiles:
    """The virtual files of the per-file aggregate rows, as each kind of reader sees them."""
    stats = []
    standard = []
    rows = {}
    for row in per_file:
        values = row.asDict()
        path = _virtual_path(values["__file"])
        count, mins, maxs, nulls = decode_stats(delta_stats_json(values, columns), columns)
        data_file = DataFile(path, 0, count, 0, {}, mins, maxs, nulls)
        stats.append(file_stats(data_file, types, spec.extended(values, "estimate")))
        standard.append(file_stats(data_file, types, None))
        rows[path] = count
    return VirtualFiles(tuple(stats), rows, None, tuple(standard))


def _ordered_columns(features: FeatureSet, stored: StructType) -> set[str]:
    """The stored columns (lower case) rows are ordered by within a file: the Z features that are plain
    columns, and a cut tree's columns where its leaves are row groups (a file is a run of leaves, each
    confined to its box on them). Only on those are a virtual row group's bounds priced: a real group
    of 100,000s of rows spans nearly any other column's range, where a few hundred sampled rows look
    narrow (a filter matching 0.1% of rows misses 200 of them 82% of the time), so bounds on other
    columns would credit skipping the real groups never allow."""
    names = {n.lower() for n in stored.names}
    ordered = _curve_columns(features)
    if features.cuts is not None and features.cuts.has_row_groups:
        ordered |= {c.lower() for c in features.cuts.columns}
    return ordered & names


def _curve_columns(features: FeatureSet) -> set[str]:
    """The Z features' columns (lower case) where they are plain columns (an expression names none)."""
    return {f.expression.strip().strip("`").lower() for f in features.z}


def _footer_bounded(column: StatsColumn) -> bool:
    """Whether footers bound `column` as Spark orders it (a top-level column of a `footer_type`)."""
    return len(column.path) == 1 and footer_type(column.type_name)


def _past_delta(stored: StructType, columns: Sequence[StatsColumn], filtered: Collection[str]) -> list[StatsColumn]:
    """The `filtered` top-level columns of `stored` footers bound that Delta keeps no min/max of."""
    kept = {c.name.lower() for c in columns if c.minmax}
    return [
        StatsColumn((f.name,), f.dataType.simpleString(), True)
        for f in stored.fields
        if f.name.lower() in filtered and f.name.lower() not in kept and footer_type(f.dataType.simpleString())
    ]


def _aggregated(
    frame: DataFrame,
    helpers: tuple[str, GroupIndex | None],
    aggregates: Sequence[Column],
    columns: Sequence[StatsColumn],
    boxes: LeafBoxes | None = None,
) -> tuple[list[Row], dict[str, tuple[FileStats, ...]]]:
    """The per-file aggregate rows (column ``__file``), and with a `GroupIndex`, each file's row groups.
    With groups, the layout is aggregated once, per (file, group), and the few group rows are merged
    into file rows by Spark (`_merge`): a second pass over the layout (or a rollup, which triples its
    rows) cost as much as the layout itself."""
    from pyspark.sql import functions as F

    file_index, cut = helpers
    if boxes is not None:  # each group's leaves, to bound it by their boxes (`LeafBoxes`)
        frame, aggregates = boxes.with_leaf(frame), [*aggregates, *boxes.aggregates()]
    if cut is None:
        return frame.groupBy(F.col(f"`{file_index}`").alias("__file")).agg(*aggregates).collect(), {}
    keys = (F.col(f"`{file_index}`").alias("__file"), F.col(f"`{cut.column}`").alias("__group"))
    grouped = frame.groupBy(*keys).agg(*aggregates).persist()
    try:
        in_groups = grouped.collect()
        merged = [_merge(name) for name in grouped.columns if name not in ("__file", "__group", *LEAF_RANGE)]
        per_file = grouped.groupBy("__file").agg(*merged).collect()
    finally:
        grouped.unpersist()
    return per_file, _row_groups(in_groups, columns, boxes)


def _merge(name: str) -> Column:
    """The aggregate that merges one per-group statistic into its file's, by the name
    `file_stat_aggregates` and `StatsSpec.aggregates` give it: counts add up, minima and maxima (Spark's
    own order: NaN above every number, collations) and SOP bits take the extreme."""
    from pyspark.sql import functions as F

    column = F.col(f"`{name}`")
    if name == "__rows" or name.startswith(("nulls_", "__xnull_")):
        return F.sum(column).alias(name)
    if name.startswith(("min_", "__xmin_")):
        return F.min(column).alias(name)
    if name.startswith(("max_", "__xmax_", "__sop_")):
        return F.max(column).alias(name)
    raise ValueError(f"no merge for the virtual-file aggregate {name!r}")  # key sets: the estimate has none


def _row_groups(
    rows: Sequence[Row], columns: Sequence[StatsColumn], boxes: LeafBoxes | None = None
) -> dict[str, tuple[FileStats, ...]]:
    """Each virtual file's row groups in file order, with min/max of the `columns` marked so (those
    footers bound, rows are ordered by: `_ordered_columns`; a row-group cut tree's other columns by its
    leaves' boxes: `LeafBoxes`) and null counts."""
    types = {c.name: c.type_name for c in columns}
    found: dict[str, list[FileStats]] = {}
    aggregated = [row.asDict() for row in rows]
    decoded = [(values, decode_stats(delta_stats_json(values, columns), columns)) for values in aggregated]
    if boxes is not None:
        decoded = boxes.bounded(decoded)
    for values, (count, mins, maxs, nulls) in sorted(decoded, key=lambda d: (d[0]["__file"], d[0]["__group"])):
        path = _virtual_path(values["__file"])
        data_file = DataFile(f"{path}#{values['__group']}", 0, count, 0, {}, mins, maxs, nulls)
        found.setdefault(path, []).append(file_stats(data_file, types, None))
    return {path: tuple(entries) for path, entries in found.items()}


def _virtual_path(partition: int) -> str:
    return f"virtual-{partition:05d}"


def in_stored_order(sample: DataFrame, snapshot: Snapshot, files: int) -> DataFrame:
    """The sample's stored columns cut into `files` contiguous chunks in their current order: the
    baseline the virtual files' compression is compared with (same rows, same number of files)."""
    from pyspark.sql import functions as F

    stored = data_columns(snapshot.spark_schema(), snapshot.partition_columns)
    order = f"{Helpers.avoiding(sample.columns).prefix}order"  # beside the sample's columns: no name of theirs
    ordered = sample.withColumn(order, F.monotonically_increasing_id())  # increasing in read order
    chunks = ordered.repartitionByRange(max(files, 1), order).sortWithinPartitions(order)
    return chunks.select(*[F.col(f"`{n}`") for n in stored.names])


def bytes_per_row(column_sizes: Sequence[Mapping[str, int] | None], row_counts: Sequence[int]) -> dict[str, float]:
    """Compressed bytes per row of each column, over files with known footers."""
    totals: dict[str, float] = {}
    rows = 0
    for sizes, count in zip(column_sizes, row_counts, strict=True):
        if sizes is None:
            continue
        rows += count
        for name, size in sizes.items():
            totals[name] = totals.get(name, 0.0) + size
    return {name: size / rows for name, size in totals.items()} if rows else {}
