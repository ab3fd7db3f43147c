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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from optimizer.clustering.joined import with_joined
from optimizer.clustering.layout import cluster_frame
from optimizer.clustering.zorder import Helpers
from optimizer.features import FeatureSet, ZFeature
from optimizer.skipping.collect import StatsSpec, stats_spec
from optimizer.skipping.filestats import FileStats, file_stats, table_column_types
from optimizer.table.access import DataFile, Snapshot
from optimizer.table.stats import data_columns, decode_stats, delta_stats_json, file_stat_aggregates, stats_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class VirtualFiles:
    files: tuple[FileStats, ...]  # as deltaopt's pruning sees them (extended statistics included)
    rows: Mapping[str, int]  # virtual path -> rows
    written: Mapping[str, Mapping[str, int]] | None = None  # virtual path -> column bytes as written
    standard: tuple[FileStats, ...] = ()  # as a standard reader sees them (Delta statistics only)


# Rows of the sample the virtual layout's Z ranges and file boundaries are drawn from (the job draws
# 100,000 from all the data): enough for even files, and converting more to Python dominated a layout.
BOUNDARY_ROWS = 20_000

# Column bytes of a frame written one file per partition, by partition; None: could not be measured.
Measure = Callable[["DataFrame"], Mapping[int, Mapping[str, int]] | None]


def virtual_files(
    sample: DataFrame, snapshot: Snapshot, features: FeatureSet, files: int, measure: Measure | None = None
) -> VirtualFiles:
    """`sample` clustered on `features` into `files` virtual files with their statistics; with
    `measure`, also the column bytes `measure` finds for them (one file per virtual file)."""
    from pyspark.sql import functions as F

    schema = snapshot.spark_schema()
    stored = data_columns(schema, snapshot.partition_columns)
    columns = stats_columns(stored, snapshot.configuration)
    delta_columns = {c.name.lower() for c in columns if c.minmax}
    # a virtual file's key set would list only its sampled keys, and prune where the real file's could
    # not: the estimate leaves key sets out. A joined feature's attribute is looked up (once, here) and
    # its range per virtual file kept instead: the replay states dimension filters on it
    # (`analysis.joined.helper_filters`), where the real files' key sets judge the keys they imply
    sample, _ = with_joined(sample, features.joined)
    helpers = tuple(ZFeature(j.helper) for j in features.joined if j.helper in sample.columns)
    spec: StatsSpec = replace(
        stats_spec(sample, replace(features, z_add=(*features.z_add, *helpers)), delta_columns), keys=()
    )
    rows_in = sample.count()
    file_index = f"{Helpers.avoiding(sample.columns).prefix}file"  # beside the sample's columns: no name of theirs
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
    )
    aggregates = file_stat_aggregates(columns, spec.aggregates())
    if measure is None:  # statistics per file index: no shuffle into as many partitions as files
        per_file = layout.frame.groupBy(F.col(file_index).alias("__file")).agg(*aggregates).collect()
        measured = None
    else:
        frame = layout.frame.persist()  # the layout's shuffle runs once
        try:
            per_file = frame.groupBy(F.spark_partition_id().alias("__file")).agg(*aggregates).collect()
            measured = measure(frame.select(*[F.col(f"`{n}`") for n in stored.names]))
        finally:
            frame.unpersist()
    types = table_column_types(schema.fields)
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
    written = {_virtual_path(i): sizes for i, sizes in measured.items()} if measured is not None else None
    return VirtualFiles(tuple(stats), rows, written, tuple(standard))


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
