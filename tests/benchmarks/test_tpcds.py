"""The TPC-DS benchmark's machinery at a tiny scale: coverage grows with schemas and derivation, the
date key is recognised as standing for date_dim's filters, every layout keeps store_sales' rows."""

from __future__ import annotations

import pytest

from benchmarks.tpcds_bench import run
from optimizer.table import open_table


@pytest.mark.slow
@pytest.mark.spark
def test_schemas_and_join_derivation_reach_the_fact_table(spark, tmp_path):
    result = run(0.01, 2, spark=spark, work=tmp_path, report=False)
    imports = result["imports"]
    bare, schemas, derived = (imports[k] for k in imports)
    assert bare["statements"] == schemas["statements"] == 99
    assert schemas["resolved"] > bare["resolved"], "schemas from the warehouse must resolve more statements"
    sales = [i["tables"]["store_sales"] for i in (bare, schemas, derived)]
    assert sales[0]["filtered"] <= sales[1]["filtered"] < sales[2]["filtered"]
    assert sales[2]["derived"] > 0 and "ss_sold_date_sk" in result["from_joins"]
    assert any("date_dim.d_date_sk WHERE" in v for v in result["from_joins"]["ss_sold_date_sk"]["via"])
    loaded = open_table(str(tmp_path / "warehouse" / "store_sales")).snapshot().num_records
    assert loaded and "deltaopt: the analyser's features" in result["layouts"]
    for name, measured in result["layouts"].items():
        assert measured["rows"] == loaded, f"{name} changed store_sales' row count"
        assert measured["duckdb_scans_known"] > 0, f"{name}: DuckDB measured no scan"
