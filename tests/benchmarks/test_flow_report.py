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
    copies = {c: {"mean_files": 2.5, "total_files": 10, "unknown": 0} for c in COPIES}
    out: dict = {"scenario": scenario, "ticks": ticks, "increment": 6e6, "target": 1e6, "peers": {}}
    out["duckdb"] = {"copies": copies, "errors": {}}
    out["granularity"] = Granularity()
    if peers:
        scans = {c: {"files": 3.0, "total_files": 10, "mb": 2.0, "deltaopt_column_mb": 1.0,
                     "standard_column_mb": 1.5} for c in (*COPIES, "zorder")}  # fmt: skip
        out["spark_scans"] = scans
        out["peers"] = {"zorder": [{"seconds": 9.0, "bytes_added": 8 * MB, "rewrote_clustered": True}]}
        out["peer_columns"] = ("l_shipdate", "l_quantity")
        summary = kept_over_bound([(1.0, 4.0)], [0.125])
        out["kept_over_bound"] = {"service": summary, "zorder": summary}
    return out


def test_the_report_states_each_tick_the_readers_the_race_and_the_verdict():
    filtered = Scenario("filtered stream", 60, True, "optimise", peers=True)
    unfiltered = Scenario("unfiltered stream", 60, False, "skip: nothing to skip")
    body = render(
        [
            result(filtered, [tick(1, "optimize", paid=True), tick(2, "skip", paid=True)], peers=True),
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
    assert "| 2 | skip |" in filtered_part
    assert "| 1 | 3.00 | 2.00 | 1.00 | 6.00 | 5.00 | 4.00 | 4/10 | 3/10 | 2/10 |" in filtered_part
    assert "none 2.5/10, manual 2.5/10, service 2.5/10" in filtered_part
    assert "n/a (no filters: every file is read)" in unfiltered_part
    # the race: the service's one rewrite wrote 7 MB, Delta's ZORDER BY re-clustered old data once
    assert "| service | 1 | 15.0 | 7.0 | 0 |" in filtered_part
    assert "| Delta ZORDER BY | 1 | 9.0 | 8.0 | 1 |" in filtered_part
    assert "(l_shipdate, l_quantity)" in filtered_part and "Against Delta's own layouts" in filtered_part
    assert "Against Delta's own layouts" not in unfiltered_part
    assert "optimised on 1 of 2 ticks, 1 of which paid off" in filtered_part
    assert "skipped 1, 1 of which a manual optimise of that append would have paid off" in filtered_part
    assert "estimated/measured bytes per query after: 1.10" in filtered_part
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
