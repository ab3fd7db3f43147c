"""Schema files (DDL, YAML): what they declare, and clear errors for what is malformed."""

from __future__ import annotations

import pytest

from querylog.capture import SqlContext, capture_sql
from querylog.errors import SchemaSourceError
from querylog.schemas import load_schema_file, merge_schemas, parse_ddl, parse_yaml_schema

DDL = """
-- the warehouse's own script: other statements are ignored
CREATE SCHEMA IF NOT EXISTS tpcds;
CREATE TABLE tpcds.date_dim (d_date_sk INTEGER NOT NULL, d_year INTEGER, d_date DATE, PRIMARY KEY (d_date_sk));
CREATE TABLE store_sales (ss_sold_date_sk BIGINT, ss_item_sk BIGINT, ss_net_paid DECIMAL(7,2)) USING DELTA;
CREATE TABLE summary AS SELECT 1 AS x;
INSERT INTO store_sales VALUES (1, 2, 3.0);
"""


def test_ddl_declares_each_created_table_by_bare_and_qualified_name():
    schema = parse_ddl(DDL)
    assert schema["date_dim"] == {"d_date_sk": "int", "d_year": "int", "d_date": "date"}
    assert schema["tpcds.date_dim"] == schema["date_dim"]
    assert schema["store_sales"]["ss_net_paid"].replace(" ", "") == "decimal(7,2)"
    assert "summary" not in schema  # CREATE TABLE AS SELECT names no columns


def test_yaml_schema_and_its_errors(tmp_path):
    assert parse_yaml_schema("Item: {I_Item_SK: bigint, i_category: string}") == {
        "item": {"i_item_sk": "bigint", "i_category": "string"}
    }
    for text, message in (
        ("[a, b]", "must map table names"),
        ("item: bigint", "table 'item' must map column names"),
        ("item: {a: [", "does not parse"),
    ):
        with pytest.raises(SchemaSourceError, match=message):
            parse_yaml_schema(text)


def test_schema_files_by_suffix_and_their_errors(tmp_path):
    (tmp_path / "tables.sql").write_text(DDL)
    (tmp_path / "tables.yml").write_text("item: {i_item_sk: bigint}\n")
    (tmp_path / "empty.sql").write_text("SELECT 1;")
    (tmp_path / "broken.sql").write_text("CREATE TABLE (((")
    assert "store_sales" in load_schema_file(tmp_path / "tables.sql")
    assert load_schema_file(tmp_path / "tables.yml") == {"item": {"i_item_sk": "bigint"}}
    with pytest.raises(SchemaSourceError, match="declares no table"):
        load_schema_file(tmp_path / "empty.sql")
    with pytest.raises(SchemaSourceError, match="does not parse"):
        load_schema_file(tmp_path / "broken.sql")
    with pytest.raises(SchemaSourceError, match="cannot read schema file"):
        load_schema_file(tmp_path / "missing.sql")


def test_the_first_source_that_knows_a_table_wins():
    merged = merge_schemas({"t": {"a": "int"}}, {"T": {"b": "int"}, "u": {"C": "string"}})
    assert merged == {"t": {"a": "int"}, "u": {"c": "string"}}


def test_a_star_query_resolves_fully_only_with_every_schema():
    """The issue's failure: unqualified columns of a three-table join. With the DDL every column has
    its table, the statement counts as resolved, and each filter lands on its own table."""
    sql = (
        "SELECT d_year, SUM(ss_net_paid) FROM store_sales, date_dim WHERE ss_sold_date_sk = d_date_sk "
        "AND d_year = 2001 GROUP BY d_year"
    )
    ts = __import__("datetime").datetime(2024, 1, 1)
    known = capture_sql(sql, ts, "test", SqlContext(schema=parse_ddl(DDL)))
    assert (known.statements, known.resolved) == (1, 1)
    assert {s.table_id: s.filters for s in known.scans} == {"store_sales": (), "date_dim": ("d_year = 2001",)}
    partial = capture_sql(sql, ts, "test", SqlContext(schema={"store_sales": parse_ddl(DDL)["store_sales"]}))
    assert (partial.statements, partial.resolved) == (1, 0)
