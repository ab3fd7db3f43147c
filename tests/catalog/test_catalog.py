"""Schemas from where users keep them: Delta tables under locations, the Spark catalog, a file."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from optimizer.catalog import build_catalog, delta_tables_under, schemas_from_spark_catalog
from querylog.errors import SchemaSourceError


def _delta(path, **columns):  # type: ignore[no-untyped-def]
    write_deltalake(str(path), pa.table(columns))


def test_delta_tables_are_found_below_a_location_by_directory_name(tmp_path):
    _delta(tmp_path / "warehouse" / "Date_Dim", d_date_sk=pa.array([1], pa.int32()), d_year=pa.array([2001]))
    _delta(tmp_path / "warehouse" / "sales" / "store_sales", ss_sold_date_sk=pa.array([1], pa.int64()))
    (tmp_path / "warehouse" / "notes").mkdir()
    found = delta_tables_under(str(tmp_path / "warehouse"))
    assert found == {
        "date_dim": str(tmp_path / "warehouse" / "Date_Dim"),
        "store_sales": str(tmp_path / "warehouse" / "sales" / "store_sales"),
    }
    catalog = build_catalog(locations=[str(tmp_path / "warehouse")])
    assert catalog.schema["date_dim"] == {"d_date_sk": "int", "d_year": "bigint"}
    assert catalog.locations["store_sales"].endswith("store_sales")


def test_an_unlistable_location_is_a_clear_error(tmp_path):
    with pytest.raises(SchemaSourceError, match="cannot list schema location"):
        delta_tables_under(str(tmp_path / "nowhere"))


def test_the_watched_tables_schema_wins_over_a_schema_file(tmp_path):
    _delta(tmp_path / "t", a=pa.array([1], pa.int64()))
    (tmp_path / "schema.yml").write_text("t: {a: string, b: int}\nu: {c: int}\n")
    catalog = build_catalog({"t": str(tmp_path / "t")}, schema_file=str(tmp_path / "schema.yml"))
    assert catalog.schema == {"t": {"a": "bigint"}, "u": {"c": "int"}}
    assert catalog.locations == {"t": str(tmp_path / "t")}


@pytest.mark.spark
def test_tables_and_views_of_the_spark_catalog(spark):
    spark.createDataFrame([(1, "x")], "i_item_sk bigint, i_category string").createOrReplaceTempView("item_view")
    schema = schemas_from_spark_catalog(spark)
    assert schema["item_view"] == {"i_item_sk": "bigint", "i_category": "string"}
