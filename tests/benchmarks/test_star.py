"""The star benchmark's machinery at a tiny scale: key sets reach the log, every layout keeps the
fact table's rows, and no reader skips a file that holds a matching row (the lower bound is exact)."""

from __future__ import annotations

import pytest

from benchmarks.star_bench import run
from benchmarks.star_workload import FAMILIES
from optimizer.table import open_table
from querylog.store import QueryLogTable


@pytest.mark.slow
@pytest.mark.spark
def test_every_layout_keeps_the_rows_and_no_reader_skips_a_matching_file(spark, tmp_path):
    result = run(0.01, 40, spark=spark, work=tmp_path, report=False)
    scans = QueryLogTable(str(tmp_path / "log-key sets")).read("lineitem")
    assert any(" IN (" in d.filter and d.filter.count(",") > 32 for s in scans for d in s.derived)
    compared = result["imports"]["one key at a time"]
    assert compared["same_derived_filters"] and compared["statements"] == 40  # batching changes no filter
    loaded = open_table(str(tmp_path / "warehouse" / "lineitem")).snapshot().num_records
    assert len(result["layouts"]) >= 3
    for name, measured in result["layouts"].items():
        assert measured["rows"] == loaded, f"{name} changed lineitem's row count"
        families = measured["families"]
        assert set(families) <= set(FAMILIES) and sum(c["queries"] for c in families.values()) == 40
        for family, counts in families.items():
            assert counts.get("unsound", 0) == 0, f"{name}, {family}: a file with a matching row was skipped"
            assert counts["bound files"] <= counts["deltaopt files"] <= counts["min/max files"]
            assert counts["min/max files"] <= counts["queries"] * measured["files"]
