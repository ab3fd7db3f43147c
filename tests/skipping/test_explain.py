"""`deltaopt explain`: what a filter reads for standard readers and for deltaopt's pruning, and which
statistics skipped which files."""

from __future__ import annotations

import json

import pytest

from optimizer.cli import main
from optimizer.clustering import optimize
from optimizer.features import FeatureSet, SopFeature, ZFeature
from optimizer.skipping.explain import explain
from optimizer.table import open_table

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def clustered(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """40,000 rows in 8 files, SOP-clustered on `s LIKE '%x%'` with `x` as an additional Z statistic."""
    from pyspark.sql import functions as F

    path = str(tmp_path_factory.mktemp("explain") / "t")
    frame = (
        spark.range(40_000)
        .withColumn("x", (F.col("id") * 7919) % 1000)
        .withColumn("s", F.when(F.col("id") % 8 == 0, F.lit("axb")).otherwise(F.lit("abc")))
    )
    table = open_table(path)
    table.create(spark, frame.repartition(4))
    features = FeatureSet(sop=(SopFeature("s LIKE '%x%'"),), z_add=(ZFeature("x % 10"),))
    optimize(spark, table, features, 60_000)
    return table


def test_sop_bits_skip_what_standard_readers_read(clustered):
    result = explain(clustered, "s LIKE '%x%'", ["id"])
    assert result.standard.files == result.total_files, "min/max of s cannot exclude a LIKE '%x%'"
    assert result.deltaopt.files < result.total_files, "SOP bits can"
    assert result.skipped_by["SOP bits"] == result.total_files - result.deltaopt.files
    assert result.skipped_by["column min/max"] == 0 and result.skipped_by["partition values"] == 0
    assert result.deltaopt.column_bytes is not None and result.deltaopt.column_bytes < result.deltaopt.bytes


def test_min_max_skips_count_for_both_readers(clustered):
    result = explain(clustered, "x > 990")
    assert result.standard.files == result.deltaopt.files, "a bare-column range is seen by every reader"
    assert result.skipped_by["SOP bits"] == 0 and result.skipped_by["expression min/max"] == 0
    assert sum(result.skipped_by.values()) == result.total_files - result.deltaopt.files


def test_explain_on_the_command_line(clustered, capsys):
    assert main(["explain", "--table", clustered.uri, "--where", "s LIKE '%x%'", "--columns", "id"]) == 0
    text = capsys.readouterr().out
    assert "standard readers (Delta min/max)" in text and "SOP bits" in text
    assert main(["explain", "--table", clustered.uri, "--where", "s LIKE '%x%'", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["skipped_by"]["SOP bits"] > 0 and data["standard"]["files"] == data["total_files"]


@pytest.mark.parametrize(
    "where",
    ["x > 990", "s LIKE '%x%'", "x BETWEEN 100 AND 200 AND s = 'axb'", "x % 10 = 3", "s = 'abc' OR x < 5"],
)
def test_standard_readers_are_not_confused_by_deltaopts_additions(spark, clustered, where):
    """deltaopt's statistics ride in the add actions' stats JSON (key "deltaopt") and its commits carry
    custom metadata: DuckDB's Delta extension and delta-rs still read the table exactly, filtered
    counts equal to a full Spark scan's."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from benchmarks.standard_reader import DuckDBReader

    snapshot = clustered.snapshot()
    expected = clustered.read_files(spark, snapshot.files, snapshot).filter(F.expr(where)).count()
    reader = DuckDBReader()
    try:
        assert reader.count(clustered.uri, where) == expected
    finally:
        reader.close()
    arrow = DeltaTable(clustered.uri).to_pyarrow_table()
    assert arrow.num_rows == snapshot.num_records
