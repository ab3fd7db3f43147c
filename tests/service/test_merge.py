"""Merging young runs: new data joins the latest runs laid out the same way when the union nets more,
size-tiered so that appends do not rewrite the whole table each time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from optimizer.service.merge import MERGE_RATIO, Run, taken_reason, young_runs
from optimizer.table.access import DataFile
from tests.service.test_drift import table_rows
from tests.service.test_service import NOW, log_queries, make_table, write_config


def run(run_id: str, size: int, written: int) -> Run:
    return Run(run_id, (DataFile(f"{run_id}.parquet", size, 1, modification_time=written),))


def test_runs_merge_size_tiered_like_a_binary_counter():
    """Equal appends: the table holds one run per set bit of the append count, and each byte is
    rewritten about log2(appends) times, not once per append as a whole-table re-clustering would."""
    runs: list[Run] = []
    written = 0
    for step in range(1, 17):
        merged = young_runs(runs, new_bytes=100, budget=10**9)
        kept = [r for r in runs if r not in merged]
        size = 100 + sum(r.bytes for r in merged)
        written += size
        runs = [*kept, run(f"r{step}", size, step)]
        assert sorted(r.bytes for r in runs) == sorted(100 << i for i in range(step.bit_length()) if step >> i & 1)
    assert written == 100 * (16 + 8 * 4)  # 16 appends, each byte merged again log2(16) = 4 times on average


def test_a_larger_run_stops_the_merge_and_the_budget_bounds_it():
    runs = [run("old", 1000, 1), run("mid", 140, 2), run("new", 100, 3)]
    assert [r.run_id for r in young_runs(runs, 100, 10**9)] == ["new", "mid"]  # 1000 > 1.5 * 340
    assert [r.run_id for r in young_runs(runs, 100, 200)] == ["new"]  # "mid" would pass the budget
    assert young_runs(runs, 60, 10**9) == [] and MERGE_RATIO * 60 < 100


@pytest.mark.spark
def test_an_append_as_large_as_the_last_run_is_clustered_with_it(spark, tmp_path):
    from optimizer.clustering.groups import clustered_groups
    from optimizer.config import load_config
    from optimizer.service.service import context
    from optimizer.service.tick import tick
    from optimizer.table import open_table

    table_path = str(tmp_path / "events")
    write_config(tmp_path, [{"name": "events", "path": table_path, "interval": 5}])
    make_table(spark, table_path)
    log_queries(table_path + "_querylog")
    ctx = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    settings = ctx.config.tables[0]
    first = tick(settings, ctx, NOW).as_dict()
    assert first["action"] == "optimize" and "merge" not in first  # nothing clustered yet

    make_table(spark, table_path, rows=20000, start=10**6, files=6)
    log_queries(table_path + "_querylog", count=30, now=NOW + timedelta(minutes=1))
    before = table_rows(spark, table_path)
    second = tick(settings, ctx, NOW + timedelta(minutes=2)).as_dict()
    merge = second["merge"]
    assert merge["runs"] == [first["job"]["run_id"]] and merge["bytes"] > 0
    union = merge["estimate"]
    assert union["new_files"] == 6 + first["job"]["files_out"]
    assert merge["taken"], merge["reason"]
    assert union["net"] > merge["net_alone"] and second["net"] == union["net"]
    assert second["action"] == "optimize" and "merged with 1 earlier run(s)" in second["reason"]
    assert second["job"]["files_in"] == union["new_files"]
    assert table_rows(spark, table_path) == before  # same rows, count and both hashes
    table = open_table(table_path)
    (group,) = clustered_groups(table, table.snapshot())
    assert group.runs == (second["job"]["run_id"],)  # one run holds every clustered file
    assert ctx.state.load("events").reclustered[-1][1] == merge["bytes"]


def test_the_reason_names_the_unions_layout_when_it_differs():
    """The record keeps the new data's reason (its layout); a union laid out otherwise must say so, or
    an operator reads the wrong layout for the job that ran."""
    from optimizer.estimate.record import Decision, NewData
    from optimizer.verdict import Verdict

    def decision(net: float, layout: str | None) -> Decision:
        return Decision(NewData("t", 3, 1, 1, 1), Verdict.OPTIMIZE, "r", net=net, layout=layout)

    differs = taken_reason(
        "1 earlier run(s)", decision(5.0, "p_brand alone"), decision(9.0, "p_brand, s_nationkey alone")
    )
    assert differs == (
        "merged with 1 earlier run(s): net +9.0 against +5.0 for the new data alone; "
        "the union laid out as p_brand, s_nationkey alone"
    )
    same = taken_reason("1 earlier run(s)", decision(5.0, "p_brand alone"), decision(9.0, "p_brand alone"))
    assert same.endswith("for the new data alone")
