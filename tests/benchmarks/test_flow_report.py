"""The flow benchmark's report (`benchmarks.flow_report`) on results whose figures are known: each tick's
decision, the held-out bytes per copy, the race against Delta's layouts and the verdict say what was
measured. No Spark: the results are built by hand."""

from __future__ import annotations

import json

from benchmarks.flow_model import Granularity, Scenario, Tick
from benchmarks.flow_report import render, save_raw
from benchmarks.kept_share import kept_over_bound
from costmodel.benefit import MB

COPIES = ("none", "manual", "service")


def tick(step: int, action: str, *, paid: bool) -> Tick:
    """A tick whose copies read 3, 2 and 1 MB per held-out query (standard readers 6, 5, 4)."""
    decision = {
        "action": action,
        "cost": {"seconds": 12.5},
        "benefit": {"benefit": 40.0, "benefit_skipping": 30.0, "benefit_compression": 10.0, "expected_queries": 480,
                    "rate": {"per_day": 1440}, "compression": {"ratio": 0.8}},
    }  # fmt: skip
    optimised = action == "optimize"
    return Tick(
        step=step,
        decision=decision,
        tick_seconds=3.0,
        manual_seconds=20.0,
        manual_benefit=30.0 if paid else 5.0,
        pays_off=paid,
        bytes_per_query={c: (3 - i) * MB for i, c in enumerate(COPIES)},
        standard_bytes_per_query={c: (6 - i) * MB for i, c in enumerate(COPIES)},
        files={c: (float(4 - i), 10) for i, c in enumerate(COPIES)},
        estimated_after=1.1 * MB if optimised else None,
        measured_after=1.0 * MB if optimised else None,
        service_seconds=15.0 if optimised else None,
        service_benefit=45.0 if optimised else None,
        service_rewrite={"bytes_out": 7 * MB, "rewrote_clustered": False} if optimised else None,
    )


def result(scenario: Scenario, ticks: list[Tick], *, peers: bool) -> dict:
    """A scenario's results, each copy's figures its own: copy k (none 0, manual 1, service 2, Delta's
    ZORDER BY 3) kept k+1 files in DuckDB and read k+1 MB in Spark's scan."""
    names = (*COPIES, "zorder") if peers else COPIES
    copies = {c: {"mean_files": k + 1.0, "total_files": 10, "unknown": k % 2} for k, c in enumerate(names)}
    out: dict = {"scenario": scenario, "ticks": ticks, "increment": 6e6, "target": 1e6, "peers": {}}
    out["duckdb"] = {"copies": copies, "errors": {"Invalid Input Error": 2} if peers else {}}
    out["granularity"] = Granularity()
    if peers:
        out["spark_scans"] = {
            c: {"files": k + 1.5, "total_files": 10, "mb": k + 1.0, "deltaopt_column_mb": k + 0.25,
                "standard_column_mb": k + 0.75}
            for k, c in enumerate(names)
        }  # fmt: skip
        out["peers"] = {"zorder": [{"seconds": 9.0, "bytes_added": 8 * MB, "rewrote_clustered": True}]}
        out["peer_columns"] = ("l_shipdate", "l_quantity")
        out["kept_over_bound"] = {
            "service": kept_over_bound([(1.0, 4.0), (1.0, 4.0)], [0.125, 0.25]),  # 2x and 1x
            "zorder": kept_over_bound([(2.0, 4.0), (2.0, 4.0)], [0.125, 0.25]),  # 4x and 2x
        }
    return out


def test_the_report_states_each_tick_the_readers_the_race_and_the_verdict():
    filtered = Scenario("filtered stream", 60, True, "optimise", peers=True)
    unfiltered = Scenario("unfiltered stream", 60, False, "skip: nothing to skip")
    merged = tick(2, "optimize", paid=True)
    merged.decision["merge"] = {"taken": True, "runs": [1, 2], "estimate": {"cost": {"seconds": 20.0}}}
    body = render(
        [
            result(filtered, [tick(1, "optimize", paid=True), merged, tick(3, "skip", paid=True)], peers=True),
            result(unfiltered, [tick(1, "skip", paid=False)], peers=False),
        ],
        scale=0.3,
        appends=2,
    )
    assert body.startswith("TPC-H lineitem scale 0.3 in 2 increments")
    filtered_part, unfiltered_part = (
        " ".join(part.split()) for part in body.split("## unfiltered stream")
    )  # cells unpadded
    # tick 1: the decision's estimate, the estimated / measured MB after, the realised benefit / job seconds
    assert "| 1 | optimize | 12.5 | 40.0 | 30.0 / 10.0 | 480 (60/h) | 0.80 | 1.10 / 1.00 | 20.0 | 30.0 | yes | " \
        "45.0 / 15.0 | 3.0 |" in filtered_part  # fmt: skip
    # tick 2 merged earlier runs: the estimate shown is the merged job's (its cost, no benefit figures)
    assert "| 2 | optimize + 2 run(s) | 20.0 | - | - | - | - |" in filtered_part
    assert "| 3 | skip |" in filtered_part
    assert "| 1 | 3.00 | 2.00 | 1.00 | 6.00 | 5.00 | 4.00 | 4/10 | 3/10 | 2/10 |" in filtered_part
    assert "none 1.0/10, manual 2.0/10 (1 unknown), service 3.0/10, zorder 4.0/10 (1 unknown)" in filtered_part
    assert "Unknown counts are the extension's errors: {'Invalid Input Error': 2}" in filtered_part
    assert "n/a (no filters: every file is read)" in unfiltered_part
    assert "Unknown counts" not in unfiltered_part
    # the race: rewrites (count, seconds, MB written, re-clustering ones), Spark's scan, both readers, DuckDB
    assert "| none | 0 | 0.0 | 0.0 | 0 | 1.5/10 | 1.00 | 0.25 | 0.75 | 1.0/10 |" in filtered_part
    assert "| manual | 3 | 60.0 | - | 0 | 2.5/10 | 2.00 | 1.25 | 1.75 | 2.0/10 |" in filtered_part
    assert "| service | 2 | 30.0 | 14.0 | 0 | 3.5/10 | 3.00 | 2.25 | 2.75 | 3.0/10 |" in filtered_part
    assert "| Delta ZORDER BY | 1 | 9.0 | 8.0 | 1 | 4.5/10 | 4.00 | 3.25 | 3.75 | 4.0/10 |" in filtered_part
    assert "(l_shipdate, l_quantity)" in filtered_part and "Against Delta's own layouts" in filtered_part
    assert "| service | 1.41 | 2.00 | 2 | 0 | 25.0% |" in filtered_part  # what a min/max reader keeps
    assert "| Delta ZORDER BY | 2.83 | 4.00 | 2 | 0 | 50.0% |" in filtered_part
    assert "Against Delta's own layouts" not in unfiltered_part and "min/max reader keeps" not in unfiltered_part
    assert "optimised on 2 of 3 ticks, 2 of which paid off" in filtered_part
    assert "skipped 1, 1 of which a manual optimise of that append would have paid off" in filtered_part
    assert "estimated/measured bytes per query after: 1.10, 1.10" in filtered_part
    assert "optimised on 0 of 1 ticks" in unfiltered_part and "skipped 1, 0 of which" in unfiltered_part


def test_the_raw_figures_keep_each_tick_and_the_decision_s_brief(tmp_path):
    scenario = Scenario("filtered stream", 60, True, "optimise")
    ticks = [tick(1, "optimize", paid=True)]
    ticks[0].decision["layouts"] = {"chosen": "z"}
    ticks[0].decision["internal"] = "left out"
    path = tmp_path / "flow.json"
    save_raw([result(scenario, ticks, peers=False)], path)
    (saved,) = json.loads(path.read_text())
    assert saved["scenario"] == "filtered stream"
    assert saved["ticks"][0]["decision"]["layouts"] == {"chosen": "z"}
    assert "internal" not in saved["ticks"][0]["decision"]
    assert saved["ticks"][0]["service_benefit"] == 45.0
