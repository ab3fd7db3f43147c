"""Planning a scan with every statistic the table has, and reading only what it needs.

`plan_scan` prunes the active files with Delta min/max, extended min/max and SOP bits (one pruning
code, `pruning.might_match`) and reports bytes: of the files kept, and of the columns the query reads
in them (from the Parquet footers' column-chunk sizes; files are immutable, so footers are cached).
`read` reads only the kept files and still applies the whole filter, so its result is exactly the
filtered table. Join filters (`skipping.joined`: a filter on a dimension the scan joins) also skip with
the files' joined ranges, at the dimension version the scan reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from optimizer.skipping.extended import ExtendedStats, load_index
from optimizer.skipping.filestats import FileStats, file_stats, table_column_types
from optimizer.skipping.joined import JoinFilter, JoinPruning
from optimizer.skipping.pruning import Predicate, column_names_of, might_match, prepare
from optimizer.skipping.row_groups import GroupFooter, RowGroup, footer_row_groups, group_footers
from optimizer.table.access import DataFile, Snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import TableAccess


@dataclass(frozen=True)
class ScanPlan:
    predicate: str
    files: tuple[DataFile, ...]  # to read
    total_files: int
    total_bytes: int
    bytes_read: int  # whole files kept
    column_bytes_read: int | None  # of the columns read, in the files kept (None: unknown)
    column_bytes_total: int | None  # of those columns in all files

    @property
    def skipped_files(self) -> int:
        return self.total_files - len(self.files)


def table_file_stats(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile] | None = None,
    index: Mapping[str, ExtendedStats] | None = None,
    versions: Mapping[str, int | None] | None = None,
) -> list[FileStats]:
    """Pruning statistics of `files` (default: every active file): Delta stats plus fresh extended
    stats from `index` (loaded when not given), with the joined ranges recorded at the dimension
    `versions` ({location: version a scan reads}, `joined.versions_of`)."""
    types = table_column_types(snapshot.spark_schema().fields)
    index = load_index(table, snapshot) if index is None else index
    return [file_stats(f, types, index.get(f.path), versions) for f in (snapshot.files if files is None else files)]


def plan_scan(
    table: TableAccess,
    predicate: str | None,
    columns: Sequence[str] | None = None,
    snapshot: Snapshot | None = None,
    stats: Sequence[FileStats] | None = None,
    *,
    joins: Sequence[JoinFilter] | JoinPruning = (),
    zone: str | None = None,
) -> ScanPlan:
    """Files a scan of `table` filtered by `predicate` and by the dimension filters of `joins` must
    read, and the bytes it reads. `stats`, when given, come from `table_file_stats` with the versions of
    the same dimensions (`joins` are pinned to their current versions unless they carry one; a caller
    that plans many scans with the same filters passes a `JoinPruning`, pinned and parsed once). `zone`
    is the reading session's time zone, in which offset-less timestamp literals are read (None: unknown)."""
    snapshot = snapshot or table.snapshot()
    prepared = prepare(predicate, zone)
    joined = joins if isinstance(joins, JoinPruning) else JoinPruning.of(joins)
    stats = stats if stats is not None else table_file_stats(table, snapshot, versions=joined.versions)
    keep = {s.path for s in stats if might_match(prepared, s) and joined.may_join(s)}
    kept = tuple(f for f in snapshot.files if f.path in keep)
    wanted = _columns_read(prepared, columns)
    names = snapshot.features.logical_names
    sizes = {f.path: column_sizes(table, f, names) for f in snapshot.files} if wanted is not None else {}
    return ScanPlan(
        predicate=prepared.sql,
        files=kept,
        total_files=len(snapshot.files),
        total_bytes=snapshot.total_bytes,
        bytes_read=sum(f.size for f in kept),
        column_bytes_read=_sum_columns(sizes, [f.path for f in kept], wanted),
        column_bytes_total=_sum_columns(sizes, list(sizes), wanted),
    )


def _columns_read(predicate: Predicate, columns: Sequence[str] | None) -> set[str] | None:
    """The query's columns plus the filter's; None when every column is read."""
    if columns is None or "*" in columns:
        return None
    return {c.lower() for c in columns} | {c for c in column_names_of(predicate)}


def _sum_columns(
    sizes: Mapping[str, Mapping[str, int] | None], paths: Sequence[str], wanted: set[str] | None
) -> int | None:
    if wanted is None:
        return None
    total = 0
    for path in paths:
        per_column = sizes.get(path)
        if per_column is None:
            return None
        total += sum(size for name, size in per_column.items() if name.split(".")[0] in wanted)
    return total


def column_sizes(
    table: TableAccess, data_file: DataFile, names: Mapping[str, str] | None = None
) -> Mapping[str, int] | None:
    """Compressed bytes per top-level column of a data file, from its Parquet footer, keyed by logical
    name (`names`: physical -> logical, `Snapshot.features.logical_names`, under column mapping; a
    physical column no logical one maps to, a dropped column's, is left out)."""
    sizes = _footer_sizes(table.uri, data_file.path, data_file.size, tuple(sorted(table.storage_options.items())))
    if sizes is None or not names:
        return sizes
    top = {physical.lower(): logical.lower() for physical, logical in names.items() if "." not in physical}
    return {top[c]: size for c, size in sizes.items() if c in top}


def file_row_groups(
    table: TableAccess, data_file: DataFile, column_types: Mapping[str, str], names: Mapping[str, str] | None = None
) -> tuple[RowGroup, ...] | None:
    """A data file's row groups as a reader skipping row groups sees them (`skipping.row_groups`), with
    bounds of the columns in `column_types`; None when the footer cannot be read."""
    footer = _footer(table.uri, data_file.path, data_file.size, tuple(sorted(table.storage_options.items())))
    return None if footer is None else footer_row_groups(data_file, footer[1], column_types, names)


@lru_cache(maxsize=65536)
def _footer_sizes(uri: str, path: str, size: int, options: tuple[tuple[str, str], ...]) -> Mapping[str, int] | None:
    """A file's column sizes (files are immutable: cached for many files; small)."""
    footer = _footer(uri, path, size, options)
    return None if footer is None else footer[0]


@lru_cache(maxsize=1024)
def _footer(
    uri: str, path: str, size: int, options: tuple[tuple[str, str], ...]
) -> tuple[Mapping[str, int], tuple[GroupFooter, ...]] | None:
    """One file's footer, read once for both its column sizes and its row groups; the groups hold
    bounds per column, so fewer files' are kept."""
    from optimizer.table import open_table
    from optimizer.table.footers import metadata_sizes
    from optimizer.table.paths import open_location

    table = open_table(uri, dict(options))
    fs, location = open_location(table, path)  # decoded; under the table, or where an absolute URI points
    try:
        metadata = pq.ParquetFile(fs.open_input_file(location)).metadata
    except (OSError, ValueError):
        return None
    return metadata_sizes(metadata), group_footers(metadata)


def read(
    spark: SparkSession,
    table: TableAccess | str,
    where: str | None = None,
    columns: Sequence[str] | None = None,
    joins: Sequence[JoinFilter] = (),
) -> DataFrame:
    """The rows of `table` (a table or its URI) satisfying `where` (Spark SQL) and, for each of
    `joins`, joining a dimension row that satisfies its filter (a left semi join with the dimension
    read at the version the pruning used), reading only the files deltaopt's pruning keeps: the
    snapshot's active files, partition values restored from the log, every statistic (partition
    values, min/max, expression min/max, SOP bits, key sets, joined ranges) used to skip.
    The filters themselves are applied by Spark, so the result is exactly the filtered table."""
    from pyspark.sql import functions as F

    from optimizer.table import open_table

    if isinstance(table, str):
        table = open_table(table)
    snapshot = table.snapshot()
    joined = JoinPruning.of(joins)
    zone = spark.conf.get("spark.sql.session.timeZone", None)  # the zone `where`'s literals are read in
    plan = plan_scan(table, where, None, snapshot, joins=joined, zone=zone)
    frame = table.read_files(spark, plan.files, snapshot)
    if where is not None and where.strip():
        frame = frame.filter(F.expr(where))
    for join in joined.filters:
        dimension = open_table(join.location)
        at = dimension.snapshot(join.version)
        keys = dimension.read_files(spark, at.files, at).filter(F.expr(join.where)).select(F.col(f"`{join.key}`"))
        frame = frame.join(keys, F.col(f"`{join.fact_column}`") == keys[f"`{join.key}`"], "left_semi")
    return frame.select(*columns) if columns else frame


def create_view(
    spark: SparkSession,
    name: str,
    table: TableAccess | str,
    *,
    where: str | None = None,
    columns: Sequence[str] | None = None,
    joins: Sequence[JoinFilter] = (),
) -> DataFrame:
    """`read` registered as the temporary view `name`, for Spark SQL: ``SELECT ... FROM name``.

    The files are chosen when the view is created, for `where`; filters a SQL query adds on top are
    applied by Spark to those files' rows. A temporary view, not a Python data source: PySpark 4.0's
    data source API cannot receive a query's filters (``DataSourceReader.pushFilters`` arrives in
    Spark 4.1), and a source that cannot see the filter cannot skip files for it."""
    frame = read(spark, table, where, columns, joins)
    frame.createOrReplaceTempView(name)
    return frame
