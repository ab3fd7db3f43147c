"""How OPTIMIZE writes Parquet: the codec (configured, or the table's own property), row groups sized
for skipping inside a file, and files every reader can still read."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from optimizer.clustering import optimize
from optimizer.config import Thresholds
from optimizer.errors import ConfigError
from optimizer.features import FeatureSet, ZFeature
from optimizer.table import open_table
from optimizer.table.output import OutputSettings, resolve_output


def footers(table):  # type: ignore[no-untyped-def]
    fs, root = table.filesystem()
    return [pq.ParquetFile(fs.open_input_file(f"{root}/{f.path}")).metadata for f in table.snapshot().files]


def codecs(table) -> set[str]:  # type: ignore[no-untyped-def]
    return {str(m.row_group(0).column(c).compression) for m in footers(table) for c in range(m.num_columns)}


def test_zstd_is_the_default_and_the_table_property_wins():
    assert Thresholds().output.codec == "zstd"
    assert Thresholds().output.writer_options()["compression"] == "zstd"
    configured = Thresholds(codec="snappy", codec_level=None).output
    assert configured.source == "configuration"
    chosen = resolve_output(configured, {"delta.parquet.compression.codec": "gzip"})
    assert chosen.codec == "gzip" and "table property" in chosen.source
    assert resolve_output(configured, {}).codec == "snappy"
    assert resolve_output(configured, {"delta.parquet.compression.codec": "brotli-ish"}).codec == "snappy"
    assert OutputSettings(level=9).writer_options()["parquet.compression.codec.zstd.level"] == "9"
    with pytest.raises(ConfigError, match="codec"):
        OutputSettings(codec="bzip9")


@pytest.fixture
def frame(spark):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    return (
        spark.range(60_000)
        .withColumn("x", (F.col("id") * 7919) % 10_000)
        .withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
        .repartition(6)
    )


@pytest.mark.spark
@pytest.mark.parametrize(("output", "expected"), [(OutputSettings(), "ZSTD"), (OutputSettings("snappy"), "SNAPPY")])
def test_the_codec_is_read_back_from_the_footers(spark, tmp_path, frame, output, expected):
    table = open_table(str(tmp_path / "t"))
    table.create(spark, frame)
    result = optimize(spark, table, FeatureSet(z=(ZFeature("x"),)), 1 << 30, output=output)
    assert codecs(table) == {expected}
    assert result.output["codec"] == expected.lower()
    (commit,) = [c for c in table.history() if c.version == result.version]
    assert commit.deltaopt["output"]["codec"] == expected.lower(), "the OPTIMIZE commit says which codec"


def _set_property_as_another_engine_would(path, key: str, value: str) -> None:  # type: ignore[no-untyped-def]
    """delta-rs refuses to write ``delta.parquet.compression.codec`` (it cannot parse the value) but
    reads tables that have it; such tables come from other engines. The test stands in for that engine
    by setting the property in the first commit's metaData (test fixture only, never product code)."""
    import json

    first = path / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines()]
    for action in actions:
        if "metaData" in action:
            action["metaData"]["configuration"][key] = value
    first.write_text("\n".join(json.dumps(a) for a in actions) + "\n")


@pytest.mark.spark
def test_the_tables_codec_property_is_honoured(spark, tmp_path, frame):
    table = open_table(str(tmp_path / "t"))
    table.create(spark, frame)
    _set_property_as_another_engine_would(tmp_path / "t", "delta.parquet.compression.codec", "gzip")
    assert table.snapshot().configuration["delta.parquet.compression.codec"] == "gzip"
    optimize(spark, table, FeatureSet(z=(ZFeature("x"),)), 1 << 30, output=OutputSettings("zstd"))
    assert codecs(table) == {"GZIP"}


@pytest.mark.spark
def test_delta_writer_cuts_row_groups_at_the_configured_size_too(spark, tmp_path, frame):
    """With row tracking the files go through Delta's writer, which passes only the codec of its options
    on to Parquet: the row-group size reaches it through the session (`delta_engine.session_conf`), set
    only while the files are written; rows and their ids are kept."""
    path = str(tmp_path / "t")
    frame.write.format("delta").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    table = open_table(path)
    ids = spark.read.format("delta").load(table.uri).select("_metadata.row_id", *frame.columns)
    before = sorted(ids.collect())
    result = optimize(
        spark, table, FeatureSet(z=(ZFeature("x"),)), 1 << 30, output=OutputSettings(row_group_bytes=256 << 10)
    )
    assert result.output["writer"] == "delta" and result.output["row_group_bytes"] == 256 << 10, result.output
    (metadata,) = footers(table)
    assert metadata.num_row_groups >= 4, metadata.num_row_groups
    assert spark.conf.get("parquet.block.size", None) is None, "the session's setting was not put back"
    after = spark.read.format("delta").load(table.uri).select("_metadata.row_id", *frame.columns)
    assert sorted(after.collect()) == before


@pytest.mark.spark
def test_row_groups_are_cut_at_the_configured_size_and_readers_agree(spark, tmp_path, frame):
    """Small row groups give several per file, each with statistics; delta-rs and DuckDB read every row."""
    from deltalake import DeltaTable

    from benchmarks.standard_reader import DuckDBReader

    table = open_table(str(tmp_path / "t"))
    table.create(spark, frame)
    optimize(spark, table, FeatureSet(z=(ZFeature("x"),)), 1 << 30, output=OutputSettings(row_group_bytes=256 << 10))
    (metadata,) = footers(table)
    assert metadata.num_row_groups >= 4, metadata.num_row_groups
    x = metadata.schema.names.index("x")
    ranges = [
        (metadata.row_group(g).column(x).statistics.min, metadata.row_group(g).column(x).statistics.max)
        for g in range(metadata.num_row_groups)
    ]
    assert all(lo is not None for lo, _ in ranges), "every row group has statistics"
    chunk = metadata.row_group(0).column(x)
    assert chunk.has_column_index and chunk.has_offset_index, "page indexes let readers skip pages too"
    assert ranges == sorted(ranges), "Z-order within the file makes row-group ranges ascend"
    assert DeltaTable(table.uri).to_pyarrow_table().num_rows == 60_000
    reader = DuckDBReader()
    try:
        assert reader.count(table.uri, None) == 60_000
        assert reader.count(table.uri, "x = 7") == frame.filter("x = 7").count()
    finally:
        reader.close()
