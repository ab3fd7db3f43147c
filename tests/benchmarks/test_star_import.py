"""The star-import benchmark (issue 49) at a tiny scale: the fact is never a derivation source, the
paused dimensions' scans get no derived filter, and the fact's derived filters equal DuckDB's
independent evaluation on the sample. Also, without Spark: the DuckDB judge does tell a wrong,
partial or absent derived filter from a right one (the comparison can fail)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from deltalake import write_deltalake

from benchmarks.star_import import run
from benchmarks.star_import_check import DuckDBKeys, expected, judge
from benchmarks.star_import_data import DIMENSIONS, FACT, FAMILIES, Drawn, Joined, date_dimension
from querylog.records import DerivedFilter, ScanRecord

LIMITS = {"max_in": 32, "max_keys": 1000}


def _fact_scan(filters: list[str], via: str, direct: tuple[str, ...] = ()) -> ScanRecord:
    derived = tuple(DerivedFilter(text, via) for text in filters)
    return ScanRecord("q0", datetime.now(UTC), FACT, (*direct, *filters), ("*",), "history", derived=derived)


def test_the_duckdb_judge_tells_wrong_partial_and_absent_filters_from_right_ones(tmp_path):
    write_deltalake(str(tmp_path / "d_date"), date_dimension())
    duck = DuckDBKeys({"d_date": str(tmp_path / "d_date")})
    year = Joined("d_date", "lo_orderdate", "d_datekey", "d_year = 1993")
    statement = Drawn("date year", "-", (year, Joined("part", "lo_partkey", "p_partkey", None)))
    via = "d_date.d_datekey WHERE d_year = 1993"
    try:
        right = expected(duck, year, **LIMITS)
        assert right[:2] == ["lo_orderdate >= 19930101", "lo_orderdate <= 19931231"] and len(right) == 3
        counts = judge(duck, statement, _fact_scan(right, via), **LIMITS)
        assert +counts == {"compared": 1, "equal": 1, "sound": 1}  # + drops the zero counts
        partial = judge(duck, statement, _fact_scan(right[:2], via), **LIMITS)
        assert partial["equal"] == 0 and partial["sound"] == 1
        wrong = judge(duck, statement, _fact_scan(["lo_orderdate <= 19930601"], via), **LIMITS)
        assert wrong["equal"] == 0 and wrong["sound"] == 0
        absent = judge(duck, statement, _fact_scan([], via), **LIMITS)
        assert absent["missing"] == 1 and absent["equal"] == 0
        other = judge(duck, statement, _fact_scan(["lo_partkey <= 9"], "part.p_partkey WHERE p_size = 1"), **LIMITS)
        assert other["unexpected"] == 1
    finally:
        duck.close()


@pytest.mark.slow
@pytest.mark.spark
def test_the_fact_is_no_source_paused_scans_derive_nothing_and_duckdb_agrees(spark, tmp_path):
    result = run(0.01, 60, sample=20, spark=spark, work=tmp_path, report=False)
    imported = result["import"]
    assert imported["statements"] == 60 and imported["quarantined"] == 0
    assert imported["passes"].get(FACT, 0) == 0, f"the fact was a derivation source: {imported['passes']}"
    assert set(imported["passes"]) <= set(DIMENSIONS) and imported["passes"]
    assert result["paused_scans"]["scans"] > 0 and result["paused_scans"]["derived"] == 0
    duckdb = result["duckdb"]
    assert set(duckdb["families"]) == set(FAMILIES)  # the sample covers every family
    for family, counts in duckdb["families"].items():
        assert counts["compared"] > 0, family
        assert counts["equal"] == counts["compared"], f"{family}: {counts}"
        assert counts["sound"] == counts["compared"], f"{family}: {counts}"
        assert counts["missing"] == 0 and counts["unexpected"] == 0, f"{family}: {counts}"
    assert all(duckdb["derived_per_family"][family] > 0 for family in FAMILIES)
