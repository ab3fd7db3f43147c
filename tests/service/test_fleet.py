"""The fleet queue: rank order, the job slots, the hourly and daily budget, aging, why a job waits, and
the ledger across a restart. Pure: the candidates' jobs are functions that note they ran."""

from __future__ import annotations

import itertools
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.service.fleet import Budget, Candidate, FleetQueue

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


class Timer:
    """The cluster's clock: each job advances it by exactly its estimate (so charges are known)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


TIMER = Timer()


def candidate(table: str, net: float, cost: float, ran: list[str], since: datetime = NOW, key: str = "k") -> Candidate:
    def start(when: datetime, note: str) -> str:
        ran.append(table)
        TIMER.seconds += cost
        return f"{table} started at {when.isoformat()}: {note}"

    return Candidate(table, "optimize", net, cost, key, since, start)


def fleet(**kwargs) -> FleetQueue:  # type: ignore[no-untyped-def]
    return FleetQueue(timer=TIMER, **kwargs)


def test_jobs_start_best_rank_first_not_first_come():
    ran: list[str] = []
    queue = fleet(slots=1)
    with queue.held():  # a pass: every table decides before any job starts
        for name, net, cost in [("low", 9, 10), ("high", 300, 10), ("mid", 50, 10), ("costly", 400, 400)]:
            queue.submit(candidate(name, net, cost, ran))
        assert queue.dispatch(NOW, own="low").held and not ran
    assert [c.table for c in queue.ranked(NOW)] == ["high", "mid", "costly", "low"]  # 30, 5, 1, 0.9 per second
    done = queue.dispatch(NOW)
    assert ran == ["high", "mid", "costly", "low"] and set(done.records) == set(ran)
    assert "started by the fleet queue (net benefit per cluster-second 30.00" in done.records["high"]


def test_a_ranked_pass_starts_nothing_until_every_table_decided_then_best_first():
    ran: list[str] = []
    queue = fleet(slots=1)

    def decide() -> dict[str, bool]:  # each table's tick: queue its job, which must not start yet
        held = {}
        for name, net in [("low", 9), ("high", 300), ("mid", 50)]:
            queue.submit(candidate(name, net, 10, ran))
            held[name] = queue.dispatch(NOW, own=name).held
        assert not ran
        return held

    decided, dispatched = queue.ranked_pass(NOW, decide)
    assert decided == {"low": True, "high": True, "mid": True}
    assert ran == ["high", "mid", "low"] and list(dispatched.records) == ran and not dispatched.held


def test_the_budget_goes_to_the_best_ranked_jobs_and_the_rest_say_why():
    ran: list[str] = []
    queue = fleet(slots=4, budget=Budget(per_hour=100, per_day=1000))
    with queue.held():
        queue.submit(candidate("a", net=500, cost=60, ran=ran))  # 8.3 per second
        queue.submit(candidate("b", net=200, cost=50, ran=ran))  # 4: does not fit after a
        queue.submit(candidate("c", net=100, cost=30, ran=ran))  # 3.3: fits in what a leaves
    queue.dispatch(NOW)
    assert ran == ["a", "c"]  # the greedy walk skips what does not fit, as an offline ranking does
    why = queue.reasons(NOW)["b"]
    assert why.startswith("ranked 1 of 1 by net benefit per cluster-second (4.00")
    assert "needs 50 cluster-s, budget left 10 cluster-s this hour, 910 cluster-s today" in why
    assert queue.left(NOW) == (10, 910)  # the jobs' measured seconds are charged


def test_a_better_job_keeps_its_share_of_the_budget_while_its_table_is_decided_again():
    ran: list[str] = []
    queue = fleet(slots=2, budget=Budget(per_hour=100))
    queue.submit(candidate("best", net=900, cost=80, ran=ran))
    queue.submit(candidate("cheap", net=30, cost=30, ran=ran))
    with queue.ticking("best"):
        assert queue.dispatch(NOW).records == {}  # cheap would eat what best needs
        assert "its table is being decided again" in queue.reasons(NOW)["best"]
    assert queue.dispatch(NOW, own="best").records.keys() == {"best"}
    assert ran == ["best"]  # 20 cluster-s left: cheap still does not fit


def test_the_hourly_budget_frees_as_the_hour_rolls_and_the_daily_one_does_not():
    ran: list[str] = []
    queue = fleet(budget=Budget(per_hour=60, per_day=100))
    queue.submit(candidate("earlier", net=100, cost=60, ran=ran))
    assert queue.dispatch(NOW - timedelta(minutes=30)).records.keys() == {"earlier"}
    queue.submit(candidate("a", net=100, cost=30, ran=ran))
    assert queue.dispatch(NOW).records == {}
    assert "budget left 0 cluster-s this hour, 40 cluster-s today" in queue.reasons(NOW)["a"]
    assert queue.dispatch(NOW + timedelta(minutes=31)).records.keys() == {"a"}
    queue.submit(candidate("b", net=100, cost=45, ran=ran))
    assert queue.dispatch(NOW + timedelta(hours=3)).records == {}  # the day's 100 are nearly spent
    assert "today" in queue.reasons(NOW + timedelta(hours=3))["b"]
    assert queue.dispatch(NOW + timedelta(days=1, minutes=1)).records.keys() == {"b"}


def test_aging_lets_a_low_ranked_job_overtake_fresh_better_ones():
    """A budget for one job an hour and a fresh better candidate every hour: without aging the low one
    would wait for ever; with it, it starts once (1 + waited / aging) x its rate reaches theirs."""
    ran: list[str] = []
    queue = fleet(budget=Budget(per_hour=10, aging=3600))
    queue.submit(candidate("low", net=10, cost=10, ran=ran))  # 1 per cluster-second
    for hour in range(1, 10):
        now = NOW + timedelta(hours=hour, minutes=1)
        queue.submit(candidate(f"fresh{hour}", net=40, cost=10, ran=ran, since=now))  # 4 per cluster-second
        queue.dispatch(now)
        if "low" in ran:
            break
    assert ran[-1] == "low" and len(ran) == 3  # two fresh ones first; at 3 h its rank x4 ties, older wins
    assert all(name.startswith("fresh") for name in ran[:-1])


def test_admissions_follow_what_jobs_really_took():
    """Jobs that take twice their estimate: once three have ended, the next are admitted at twice theirs,
    so the budget is not overrun by a cost model that is off."""
    ran: list[str] = []

    def slow(table: str) -> Candidate:
        def start(when: datetime, note: str) -> str:
            ran.append(table)
            TIMER.seconds += 20  # twice the estimate
            return note

        return Candidate(table, "optimize", 100, 10, "k", NOW, start)

    queue = fleet(budget=Budget(per_hour=100))
    for name in ("a", "b", "c"):
        queue.submit(slow(name))
    queue.dispatch(NOW)
    assert queue.correction() == 2.0 and queue.left(NOW)[0] == 40
    for name in ("d", "e", "f"):
        queue.submit(slow(name))
    queue.dispatch(NOW)
    assert ran == ["a", "b", "c", "d", "e"]  # 2 x 20 fit in the 40 left; f would overrun
    assert "needs 20 cluster-s (its estimate x2.00, as measured jobs ran)" in queue.reasons(NOW)["f"]


def test_a_replaced_candidate_keeps_its_waiting_time_and_a_dropped_one_is_gone():
    ran: list[str] = []
    queue = fleet(budget=Budget(per_hour=1))
    queue.submit(candidate("t", net=10, cost=10, ran=ran, since=NOW, key="v1"))
    queue.submit(candidate("t", net=20, cost=10, ran=ran, since=NOW + timedelta(hours=1), key="v2"))
    with queue.ticking("t") as slot:  # what the table's next tick finds waiting
        assert slot.waiting_key == "v2"
    assert queue.ranked(NOW + timedelta(hours=1))[0].since == NOW
    queue.drop("t")
    with queue.ticking("t") as slot:
        assert slot.waiting is None and slot.waiting_key is None
    assert queue.ranked(NOW) == []


def test_slots_bound_running_jobs_and_a_ticking_table_is_left_alone():
    gate, ran = threading.Event(), []
    launched: list[threading.Thread] = []

    def slow(when: datetime, note: str) -> str:
        gate.wait(10)
        ran.append("slow")
        return "slow"

    def pool(job):  # type: ignore[no-untyped-def]
        thread = threading.Thread(target=job)
        launched.append(thread)
        thread.start()

    queue = fleet(slots=1, launch=pool)
    queue.submit(Candidate("slow", "optimize", 100, 10, "k", NOW, slow))
    queue.submit(candidate("next", 10, 10, ran))
    queue.dispatch(NOW)  # slow goes to the pool and holds the only slot
    assert "all 1 job slot(s) busy (slow)" in queue.reasons(NOW)["next"]
    with queue.ticking("slow") as slot:
        assert slot.busy is not None and "job of this table is running" in slot.busy  # it must not decide again
        assert slot.waiting is None
    gate.set()
    for thread in launched:  # the freed slot goes to the next best, on the pool too
        thread.join(10)
    assert ran == ["slow", "next"]


def test_nothing_starts_until_every_table_ticked_once():
    ran: list[str] = []
    queue = fleet(slots=2)
    queue.warm_up({"a", "b"})
    with queue.ticking("a"):
        queue.submit(candidate("a", 10, 1, ran))
        assert "ranking waits for the first tick of 2 more table(s)" in (queue.dispatch(NOW, own="a").deferred or "")
    with queue.ticking("b"):
        assert queue.dispatch(NOW, own="b").records == {}  # b's tick is still under way
    assert queue.dispatch(NOW).records.keys() == {"a"}


def test_the_ledger_survives_a_restart(tmp_path):
    ran: list[str] = []
    path = tmp_path / "fleet.json"
    queue = fleet(budget=Budget(per_day=100), path=path)
    queue.submit(candidate("a", 10, 5, ran))
    queue.dispatch(NOW)
    queue.submit(candidate("b", 10, 5, ran))
    written = json.loads(path.read_text())
    assert [c["table"] for c in written["ledger"]] == ["a"] and written["waiting"][0]["table"] == "b"
    again = fleet(budget=Budget(per_day=100), path=path)
    assert again.used(NOW, timedelta(days=1)) == queue.used(NOW, timedelta(days=1)) > 0
    path.write_text("{not json")
    assert fleet(path=path).used(NOW, timedelta(days=1)) == 0  # unreadable: empty, with a warning


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(1, 1000), st.floats(1, 100)), min_size=1, max_size=12),
    st.floats(10, 500),
)
def test_one_pass_realises_what_an_offline_greedy_ranking_would(jobs, limit):
    """Whatever the candidates and the budget, the jobs one pass starts are the offline greedy choice:
    by net benefit per cluster-second, each taken if it still fits."""
    ran: list[str] = []
    queue = fleet(slots=len(jobs), budget=Budget(per_hour=limit))
    names = [f"t{i}" for i in range(len(jobs))]
    with queue.held():
        for name, (net, cost) in zip(names, jobs, strict=True):
            queue.submit(candidate(name, net, cost, ran))
    queue.dispatch(NOW)
    order = sorted(zip(names, jobs, strict=True), key=lambda item: (-item[1][0] / max(item[1][1], 1.0), item[0]))
    greedy, left = [], limit
    for name, (_, cost) in order:
        if cost <= left:
            greedy.append(name)
            left -= cost
    assert sorted(ran) == sorted(greedy)


def test_priority_grows_with_waiting():
    c = candidate("t", net=50, cost=10, ran=[])
    rates = [c.priority(NOW + timedelta(hours=h), 3600) for h in range(4)]
    assert rates == [5.0, 10.0, 15.0, 20.0]
    assert all(a < b for a, b in itertools.pairwise(rates))


@pytest.mark.parametrize("bad", [{"cluster_seconds_per_hour": 0}, {"aging": "0s"}, {"per_week": 5}])
def test_budget_settings_are_checked(bad):
    from optimizer.config import parse_config
    from optimizer.errors import ConfigError

    with pytest.raises(ConfigError):
        parse_config({"service": {"budget": bad}})


@pytest.mark.spark
def test_a_pass_starts_the_better_job_and_defers_the_other_until_the_budget_frees(spark, tmp_path, monkeypatch, capsys):
    """Two tables worth optimising, a budget for one job an hour: the pass starts the one that saves more
    per cluster-second; the other's decision says why it waits, and the next pass an hour later starts
    it from its repeated verdict (no estimate). The budget's ledger survives a restart."""
    from optimizer.config import load_config
    from optimizer.service import jobs as jobs_module
    from optimizer.service.service import context, run_once
    from tests.service.test_service import log_queries, make_table, write_config

    tables = [{"name": n, "path": str(tmp_path / n), "interval": 60} for n in ("busy", "quiet")]
    write_config(tmp_path, tables, budget={"cluster_seconds_per_hour": 1.5})
    for table, queries in (("busy", 60), ("quiet", 15)):
        make_table(spark, str(tmp_path / table))
        log_queries(str(tmp_path / table) + "_querylog", count=queries, now=NOW, table=table)
    ctx = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    first = {r.table: r for r in run_once(ctx, NOW)}
    assert first["busy"].action.value == "optimize" and first["busy"].job is not None
    quiet = first["quiet"]
    assert quiet.action.value == "deferred" and quiet.job is None and quiet.decision is not None
    assert quiet.decision.net is not None and first["busy"].decision is not None
    assert quiet.decision.net < first["busy"].decision.net
    assert "deferred: ranked 1 of 1 by net benefit per cluster-second" in quiet.reason
    assert "budget left 0 cluster-s this hour" in quiet.reason
    logged = ctx.decisions.read("quiet")[-1]
    assert logged["action"] == "deferred" and logged["reason"] == quiet.reason

    later = NOW + timedelta(hours=1, minutes=1)
    estimated: list[str] = []
    real = jobs_module.estimate  # the tick's estimate (`jobs.estimate_as_run`)
    monkeypatch.setattr(jobs_module, "estimate", lambda c, **kw: estimated.append(c.table_id) or real(c, **kw))
    second = {r.table: r for r in run_once(ctx, later)}
    assert second["quiet"].action.value == "optimize" and second["quiet"].job is not None
    assert estimated == ["busy"]  # quiet's verdict stood (nothing moved): its job started without an estimate
    assert "started by the fleet queue" in second["quiet"].reason
    assert ctx.queue.used(later, timedelta(hours=1)) > 0

    restarted = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    assert restarted.queue.used(later, timedelta(hours=1)) == pytest.approx(
        ctx.queue.used(later, timedelta(hours=1)), abs=0.01
    )
    third = {r.table: r for r in run_once(restarted, later + timedelta(minutes=1))}
    assert not third["quiet"].reused and third["quiet"].action.value == "skip"  # optimised: nothing new


def test_metrics_are_served_for_a_scraper():
    import urllib.request

    from optimizer.service.metrics import Metrics
    from tests.clusters.servers import free_port

    queue = fleet(slots=3, budget=Budget(per_day=500))
    queue.submit(candidate("waiting", net=10, cost=1000, ran=[]))
    metrics = Metrics(queue)
    port = free_port()
    metrics.serve(port, "127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert "deltaopt_queue_waiting 1.0" in text and "deltaopt_job_slots 3.0" in text
    assert 'deltaopt_budget_limit_seconds{window="day"} 500.0' in text


def test_fleet_status_shows_the_queue_best_first_the_last_jobs_and_the_budget(tmp_path):
    """``deltaopt status --fleet`` reads the fleet file the queue writes (`service.status.FleetStatus`): the
    budget used, the waiting jobs in rank order (the top ones only, counted all), the last jobs."""
    from optimizer.service.status import fleet_status

    ran: list[str] = []
    state_dir = tmp_path / "state"
    queue = fleet(slots=1, budget=Budget(per_hour=15), path=state_dir / "fleet.json")
    for name, net, cost in [("low", 9, 10), ("high", 300, 10), ("mid", 50, 10)]:
        queue.submit(candidate(name, net, cost, ran))
    queue.dispatch(NOW)
    assert ran == ["high"]  # 10 of the hour's 15 cluster-seconds used: the next job of 10 waits

    status = fleet_status(str(state_dir), str(state_dir / "fleet.json"), top=1)

    lines = status.describe()
    assert "10 cluster-s this hour of 15, 10 today; 0 of 1 job slot(s) busy" in lines[1]
    assert lines[2:5] == [
        "queue: 2 job(s) waiting, best first:",
        "  1. mid (optimize): net 50.0 cluster-s for 10.0, 5.00 per cluster-second, waiting since 2026-03-02 09:00",
        "last jobs:",
    ]
    assert lines[5].endswith(" high: 10.0 cluster-s (estimated 10.0)")
    shown = status.as_dict()
    assert shown["waiting"] == 2 and [c["table"] for c in shown["top_candidates"]] == ["mid"]
    assert [j["table"] for j in shown["last_jobs"]] == ["high"] and shown["budget"]["per_hour"] == 15
