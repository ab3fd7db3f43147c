"""The star flow's machinery at a tiny scale: the recorder's log holds join-derived filters, the
service ticks over the warehouse, every copy keeps the fact rows, and no reader skips a matching file."""

from __future__ import annotations

import pytest

from benchmarks.star_flow import FACT, SERVICES, run
from benchmarks.star_flow_report import render
from querylog.store import QueryLogTable


@pytest.mark.slow
@pytest.mark.spark
def test_star_flow_ticks_keep_rows_and_readers_stay_sound(spark, tmp_path):
    families = ("part brand", "supplier nation", "ship month")
    result = run(0.01, 2, 30, families=families, spark=spark, work=tmp_path, report=False)
    scans = QueryLogTable(str(tmp_path / "warehouse" / f"{FACT}_querylog")).read(FACT)
    assert any(s.derived for s in scans), "the recorder derived no join filter"
    assert len(result["ticks"]) == 2
    assert all(set(t["services"]) == {label for label, _, _ in SERVICES} for t in result["ticks"])
    assert all(label in render(result) for label, _, _ in SERVICES)
    race = result["kept_over_bound"]  # issue 48's per-scan race, on the direct and derived filters
    assert set(race) == {"service", "zorder", "liquid"} and "Service against the better" in render(result)
    assert all(r["scans"] > 0 and 0 < r["geometric_mean"] < float("inf") for r in race.values()), race
    final = result["final"]
    assert len({copy.pop("rows") for copy in final.values()}) == 1, "a copy changed the fact table's rows"
    for name, figures in final.items():
        for family, counts in figures.items():
            assert counts["unsound"] == 0, f"{name}, {family}: a file with a matching row was skipped"
    for name, figures in result["ticks"][-1]["copies"].items():
        everything = figures["all"]
        assert everything["deltaopt files"] <= everything["min/max files"] <= figures["files"], name
