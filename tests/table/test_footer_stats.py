"""Statistics read from footers equal the per-file aggregation they replace, and unknown stays unknown."""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from decimal import Decimal

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from optimizer.table import open_table
from optimizer.table.footer_stats import footer_indices, footer_stats, from_footer
from optimizer.table.stats import StatsColumn, collect_file_stats, data_columns, delta_stats_json, stats_columns

SCHEMA = (
    "i int, b bigint, t tinyint, d date, s string, flag boolean, small decimal(9,3), "
    "wide decimal(30,4), f double, ts timestamp, blob binary, nothing string, st struct<x: int, y: string>"
)


def _rows(seed: int, count: int) -> list[tuple[object, ...]]:
    """Nulls everywhere, negative decimals, strings longer than the 32-character prefix, non-ASCII."""
    rng = random.Random(seed)
    words = ["", "a", "zz", "é", "日本", "x" * 40, "ab" * 20 + "!", "Zebra"]

    def maybe(value: object) -> object:
        return None if rng.random() < 0.2 else value

    return [
        (
            maybe(rng.randint(-(2**31), 2**31 - 1)),
            maybe(rng.randint(-(2**63), 2**63 - 1)),
            maybe(rng.randint(-128, 127)),
            maybe(date(1970, 1, 1) + timedelta(days=rng.randint(-5000, 30000))),
            maybe(rng.choice(words) + str(rng.randint(0, 9))),
            maybe(rng.random() < 0.5),
            maybe(Decimal(rng.randint(-(10**9) + 1, 10**9 - 1)).scaleb(-3)),
            maybe(Decimal(rng.randint(-(10**20), 10**20)).scaleb(-4)),
            maybe(rng.choice([rng.uniform(-1e6, 1e6), float("nan")])),
            None,
            maybe(bytes([rng.randint(0, 255)])),
            None,
            maybe((rng.randint(0, 9), rng.choice(words))),
        )
        for _ in range(count)
    ]


def test_only_types_footers_order_as_spark_does_come_from_footers(spark):
    schema = spark.createDataFrame([], SCHEMA).schema
    chosen = {c.name for c in stats_columns(schema) if from_footer(c)}
    assert chosen == {"i", "b", "t", "d", "s", "flag", "small", "blob", "nothing"}  # not floats, stamps, wide, nested


def test_written_files_get_the_statistics_the_aggregation_computes(spark, tmp_path):
    """Several files with several row groups each: every stats document equals the one computed by
    aggregating all columns in Spark (the way before footers were read)."""
    frame = spark.createDataFrame(_rows(3, 3000), SCHEMA).repartition(3)
    table = open_table(str(tmp_path / "t"))
    snapshot = table.create(spark, frame.limit(1))
    staged = table.stage(spark, frame, snapshot, "check", options={"parquet.block.size": "4096"})
    fs, root = table.filesystem()
    assert any(pq.ParquetFile(fs.open_input_file(f"{root}/{f.path}")).metadata.num_row_groups > 1 for f in staged)

    stored = data_columns(snapshot.spark_schema(), snapshot.partition_columns)
    columns = stats_columns(stored, snapshot.configuration)
    aggregated = collect_file_stats(spark, [table.spark_uri(f.path) for f in staged], stored, columns)
    for f in staged:
        (row,) = [r for uri, r in aggregated.items() if uri.endswith("/" + f.path)]
        assert json.loads(f.stats_json) == json.loads(delta_stats_json(row, columns)), f.path


def test_a_footer_without_statistics_leaves_bounds_and_null_counts_unknown(tmp_path):
    data = pa.table({"x": pa.array([3, None, 7], pa.int64())})
    pq.write_table(data, tmp_path / "plain.parquet", write_statistics=False)
    columns = [StatsColumn(("x",), "bigint", True)]
    (row,) = footer_stats(pafs.LocalFileSystem(), str(tmp_path), ["plain.parquet"], columns, {0}).values()
    assert (row["min_0"], row["max_0"], row["nulls_0"], row["__footer_rows"]) == (None, None, None, 3)
    document = json.loads(delta_stats_json({**row, "__rows": 3}, columns))
    assert document == {"numRecords": 3, "minValues": {}, "maxValues": {}, "nullCount": {}}


def test_a_missing_column_is_an_error_not_an_empty_statistic(tmp_path):
    from optimizer.errors import RewriteValidationError

    pq.write_table(pa.table({"x": [1]}), tmp_path / "one.parquet")
    columns = [StatsColumn(("y",), "bigint", True)]
    with pytest.raises(RewriteValidationError, match="no column 'y'"):
        footer_stats(pafs.LocalFileSystem(), str(tmp_path), ["one.parquet"], columns, footer_indices(columns))
