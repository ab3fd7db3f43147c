"""Reading a table's rows: Spark's Parquet reader where it reads them right, Delta's reader where the
table's features need it (`optimizer.table.protocol`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote

from optimizer.table.delta_engine import DeltaEngine
from optimizer.table.protocol import check_readable
from optimizer.table.rewrite_path import Capabilities, reads_through_delta
from optimizer.table.stats import data_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import DataFile, Snapshot, TableAccess


def read_rows(
    table: TableAccess, spark: SparkSession, files: Sequence[DataFile], snapshot: Snapshot, *, for_rewrite: bool = False
) -> DataFrame:
    """The rows of `files`, with the table's schema (partition columns restored from the log).

    Tables whose rows only Delta's reader gets right (deletion vectors, column mapping, type widening)
    are read through Delta's engine, as is every rewrite of a table with row tracking enabled
    (`for_rewrite`: each row then carries its row id and row commit version in the table's materialised
    columns). Row tracking supported but disabled keeps no ids (Delta's ``preserveRowTrackingColumns``
    adds nothing then), so such a table is read like any other.
    Raises `UnsupportedTableError` where Delta's reader is needed and the session has none."""
    from pyspark.sql import functions as F

    features = snapshot.features
    check_readable(features, table.uri, delta_engine=Capabilities.of_session(spark).delta_engine)
    schema = snapshot.spark_schema()
    if not files:
        return spark.createDataFrame([], schema)
    if reads_through_delta(features, for_rewrite=for_rewrite):
        engine = DeltaEngine(spark, table.spark_uri("").rstrip("/"))
        at = engine.snapshot(snapshot.version)
        preserve = for_rewrite and features.row_tracking
        return engine.read(at, engine.add_files(at, files), preserve_row_tracking=preserve)
    stored = data_columns(schema, snapshot.partition_columns)
    # the log's paths are URL-encoded; Hadoop takes them as they are on storage
    if not snapshot.partition_columns:
        return spark.read.schema(stored).parquet(*[table.spark_uri(unquote(f.path)) for f in files])
    groups: dict[tuple[tuple[str, str | None], ...], list[DataFile]] = {}
    for f in files:
        key = tuple((c, f.partition_values.get(c)) for c in snapshot.partition_columns)
        groups.setdefault(key, []).append(f)
    frames = []
    for key, members in groups.items():
        frame = spark.read.schema(stored).parquet(*[table.spark_uri(unquote(f.path)) for f in members])
        for column, value in key:
            frame = frame.withColumn(column, F.lit(value).cast(schema[column].dataType))
        frames.append(frame.select(*[F.col(f"`{name}`") for name in schema.names]))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
