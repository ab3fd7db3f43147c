"""Issue 47: a tick scales every benefit it weighs by the table's realised / estimated factor (the
running sums of `state.RealisedTotals`), and the record keeps the raw figure; the sums themselves stay
on the raw estimates, or the ratio would converge to 1 by construction."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from costmodel.benefit import BenefitEstimate, Calibration, calibrated
from optimizer.estimate.record import Decision, NewData, decide
from optimizer.service.realised import _moved, figures, measure, track_job
from optimizer.service.state import MeasuredJob, RealisedTotals, StateStore, TableState
from optimizer.verdict import Verdict
from tests.service.test_liquid_tick import liquid_table, service_ctx, small_files  # noqa: F401 - the fixture
from tests.service.test_realised import T0, THRESHOLDS, cluster, job_record, scan, sizes, unclustered
from tests.service.test_service import NOW, service  # noqa: F401 - the fixture

HALF = RealisedTotals(  # 4 jobs with an estimate realised half of it
    jobs=4, scans=40, bytes_saved=4e6, realised=5.0, estimated=10.0, estimated_realised=5.0, estimated_jobs=4
)


def test_the_table_s_sums_give_the_factor_once_enough_jobs_with_an_estimate_were_measured(tmp_path):
    assert HALF.calibration(3) == Calibration(0.5, 4)
    assert HALF.calibration(5) is None and HALF.calibration(0) is None
    without = replace(HALF, estimated_jobs=0)  # a state file of an earlier version: no count, no factor
    assert without.calibration(3) is None
    store = StateStore(tmp_path)
    store.save(TableState("events", realised=HALF))
    assert store.load("events").realised == HALF


def test_the_reason_names_the_raw_estimate_and_the_factor():
    raw = BenefitEstimate(10, 70.0, 8e6, 2e6, 10e6, 6.0, 15.4, 5000, 4, 0.1)
    scaled = calibrated(raw, Calibration(0.62, 5))
    action, reason = decide(scaled.benefit, 9.0, calibration=scaled.calibration)
    assert action is Verdict.OPTIMIZE
    assert reason.startswith(
        "benefit 9.5 (estimate 15.4 x0.62, this table's realised/estimated over 5 jobs) exceeds cost 9.0"
    )
    assert decide(15.4, 9.0) == decide(15.4, 9.0, calibration=None)  # no factor: the reason of before
    assert "estimate" not in decide(15.4, 9.0)[1]


def test_the_realised_sums_keep_accumulating_the_raw_estimate(tmp_path):
    """A job decided on a calibrated benefit is measured against its raw estimate: its estimated benefit
    is the raw figure, and the table's `estimated` sum grows by the estimate's own byte share."""
    table = unclustered(tmp_path / "events")
    version = cluster(table, "job1")
    raw = BenefitEstimate(10, 70.0, 8e6, 2e6, 10e6, 6.0, 15.4, 5000, 4, 0.1)
    scaled = calibrated(raw, Calibration(0.5, 4))
    decision = Decision(NewData("events", version - 1, 4, 1, 1), Verdict.OPTIMIZE, "r", benefit=scaled)
    state = track_job(TableState("events", realised=HALF), replace(job_record("job1", version, T0), decision=decision))
    (tracked,) = state.measured
    assert tracked.estimated_benefit == 15.4 and tracked.estimated_share == pytest.approx((8e6 - 2e6) / 10e6)

    seen = [scan(T0 + timedelta(minutes=1), "x < 250")]
    state, (shown,) = measure(table, state, seen, latest=table.snapshot(), thresholds=THRESHOLDS, now=T0)

    replaced = sum(sizes(table, version - 1).values())
    expected = 0.6 * replaced / 1e6 * THRESHOLDS.cost_per_mb_read  # the raw share of the scan's bytes
    assert shown["estimated_benefit"] == 15.4 and shown["estimated_for_scans"] == pytest.approx(expected, abs=1e-4)
    assert state.realised.estimated == pytest.approx(HALF.estimated + expected)
    assert state.realised.estimated_realised == pytest.approx(HALF.estimated_realised + shown["benefit"], abs=1e-4)
    assert state.realised.estimated_jobs == HALF.estimated_jobs + 1
    assert figures(state.measured[0], THRESHOLDS)["estimated_benefit"] == 15.4


def _scaled(settings, decision: Decision, ratio: float):  # type: ignore[no-untyped-def]
    """`settings` with the benefit priced per MB so that the raw estimate is `ratio` x its cost (the
    benefit is linear in ``cost_per_mb_read``; the cost model is not), from a first tick's figures."""
    assert decision.benefit is not None and decision.cost is not None and decision.benefit.benefit > 0
    per_mb = settings.thresholds.cost_per_mb_read * ratio * decision.cost.seconds / decision.benefit.benefit
    thresholds = settings.thresholds.model_copy(update={"cost_per_mb_read": per_mb})
    return settings.model_copy(update={"thresholds": thresholds})


def _flipped(section: dict) -> None:  # type: ignore[type-arg]
    """The decision's record: raw benefit over the cost (the raw estimate said optimise), the scaled one
    under it, the factor and the jobs it is based on named."""
    calibration = section["benefit"]["calibration"]
    cost = section["cost"]["seconds"]
    assert calibration["factor"] == 0.5 and calibration["jobs"] == 4
    assert calibration["raw_benefit"] > cost > section["benefit"]["benefit"]
    assert section["benefit"]["benefit"] == pytest.approx(calibration["raw_benefit"] * 0.5, abs=1e-3)
    assert "x0.50, this table's realised/estimated over 4 jobs) does not exceed cost" in section["reason"]


@pytest.mark.spark
def test_a_tick_skips_what_the_raw_estimate_would_optimise_on_a_table_whose_jobs_realised_half(service):  # noqa: F811
    from optimizer.service.tick import tick

    ctx, _, _ = service
    settings = ctx.config.tables[0]
    probe = tick(settings.model_copy(update={"dry_run": True}), ctx, NOW)  # no state: raw figures
    assert probe.decision is not None and probe.decision.benefit.calibration is None
    settings = _scaled(settings, probe.decision, 1.5)  # raw benefit 1.5 x the cost: the raw estimate optimises
    ctx.state.save(TableState("events", realised=HALF))

    done = tick(settings, ctx, NOW)

    assert done.action is Verdict.SKIP and done.job is None, done.reason
    record = done.as_dict()
    _flipped(record)
    assert all(layout["net"] < 0 for layout in record["layouts"])  # every layout weighed at the scaled figure
    assert ctx.state.load("events").realised == HALF  # nothing measured: the sums as they were


@pytest.mark.spark
def test_a_liquid_tick_does_not_run_delta_s_optimize_the_raw_estimate_would_run(spark, tmp_path):
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    liquid_table(spark, path, "x")
    ctx = service_ctx(spark, tmp_path, path, "keep")
    settings = ctx.config.tables[0]
    probe = tick(settings.model_copy(update={"dry_run": True}), ctx, NOW)
    assert probe.liquid is not None and probe.liquid.current is not None and probe.liquid.current.optimize
    settings = _scaled(settings, probe.liquid.current, 1.5)
    ctx.state.save(TableState("events", realised=HALF))

    done = tick(settings, ctx, NOW)

    assert done.action is Verdict.SKIP and done.job is None, done.reason
    liquid = done.as_dict()["liquid"]
    assert liquid["operation"] is None and liquid["wanted"] == ["x"]
    _flipped(liquid["current"])
    assert "no OPTIMIZE" in done.reason


def _job(run_id: str, share: float) -> tuple[MeasuredJob, MeasuredJob]:
    """A job whose estimate expected it to save half of a query's bytes, before and after one scan that
    read 100 MB over the files it replaced and found it saved `share` of them."""
    from optimizer.service.state import ReaderBytes

    old = MeasuredJob(run_id, 1, T0.isoformat(), 0.5, 1.0, checked_version=1)
    seen = {"standard": ReaderBytes(before=100e6, after=100e6 * (1 - share), total=100e6)}
    return old, old.with_(scans=1, readers=seen)


def _factor(shares: list[float], half_life: float) -> tuple[float, RealisedTotals]:
    thresholds = THRESHOLDS.model_copy(update={"realised_half_life": half_life})
    totals = RealisedTotals()
    for n, share in enumerate(shares):
        totals, measured = _moved(totals, *_job(f"job{n}", share), thresholds)
        assert measured.ordinal == n  # its place among the jobs with an estimate
    calibration = totals.calibration(3, half_life)
    assert calibration is not None
    return calibration.factor, totals


def test_the_factor_follows_the_table_s_recent_jobs_and_the_all_time_ratio_stays():
    """4 jobs realised half their estimate, then the data changed and 8 realised all of it: with a half-life
    of 2 jobs the factor is near 1 (the newest jobs weigh most); with 0 every job weighs the same, as before
    the half-life existed. The status ratio stays over every job either way."""
    shares = [0.25] * 4 + [0.5] * 8  # realised / estimated: 0.5, then 1
    recent, totals = _factor(shares, 2.0)
    flat, flat_totals = _factor(shares, 0.0)
    assert recent >= 0.95 and flat == pytest.approx((4 * 0.5 + 8) / 12, abs=1e-4)
    assert totals.ratio == flat_totals.ratio == pytest.approx(12 / 10, abs=1e-4)
    assert _factor([0.5] * 4 + [0.25] * 8, 2.0)[0] <= 0.55  # and back down when recent jobs realise half


def test_scans_of_an_older_job_weigh_as_that_job_does_when_a_newer_one_is_measured_the_same_tick():
    """Job A is measured on a tick, then on the next with job B's first scans: A's two increments weigh
    d (one job older than B) whatever order they were added in; B's weigh 1."""
    thresholds = THRESHOLDS.model_copy(update={"realised_half_life": 1.0})  # d = 1/2
    a0, a1 = _job("a", 0.5)
    totals, a1 = _moved(RealisedTotals(), a0, a1, thresholds)
    a2 = a1.with_(scans=2, readers={k: v.plus(v.before, v.after, v.total) for k, v in a1.readers.items()})
    totals, a2 = _moved(totals, a1, a2, thresholds)
    b0, b1 = _job("b", 0.25)
    totals, b1 = _moved(totals, b0, b1, thresholds)
    per_scan = 0.5 * 100e6 / 1e6 * THRESHOLDS.cost_per_mb_read  # the estimate's figure of one scan
    assert totals.recent_estimated == pytest.approx(0.5 * (2 * per_scan) + per_scan)
    assert totals.recent_realised == pytest.approx(0.5 * (2 * per_scan) + per_scan / 2)
    assert (a2.ordinal, b1.ordinal, totals.estimated_jobs) == (0, 1, 2)


def test_the_weighed_sums_and_each_job_s_place_survive_a_restart_and_older_files_use_the_plain_sums(tmp_path):
    store = StateStore(tmp_path)
    job = _job("a", 0.5)[1].with_(ordinal=3)
    totals = replace(HALF, recent_estimated=2.0, recent_realised=1.5)
    store.save(TableState("events", measured=(job,), realised=totals))
    loaded = store.load("events")
    assert loaded.realised == totals and loaded.measured == (job,)
    assert totals.calibration(3, 8.0) == Calibration(0.75, 4)  # the weighed sums, not the plain ones (0.5)
    assert totals.calibration(3, 0.0) == Calibration(0.5, 4)  # half-life 0 now: every job the same, as said
    assert HALF.calibration(3, 8.0) == Calibration(0.5, 4)  # a file of an earlier version: the plain sums
    damaged = replace(totals, recent_estimated=float("nan"))  # would never recover: the plain sums instead
    assert damaged.calibration(3, 8.0) == Calibration(0.5, 4)


def test_a_job_numbered_past_the_table_s_count_weighs_as_the_newest_job_not_more():
    """The totals reset by hand while the measured jobs keep their places: no weight above 1 (half-life 8:
    35 times for place 40), no overflow (half-life 0.01)."""
    for half_life in (8.0, 0.01):
        thresholds = THRESHOLDS.model_copy(update={"realised_half_life": half_life})
        old, new = _job("a", 0.5)
        old = old.with_(ordinal=40, scans=1, readers=new.readers)
        new = old.with_(scans=2, readers={k: v.plus(v.before, v.after, v.total) for k, v in old.readers.items()})
        totals, _ = _moved(
            RealisedTotals(estimated_jobs=3, recent_estimated=0.0, recent_realised=0.0), old, new, thresholds
        )
        assert totals.recent_estimated == pytest.approx(totals.estimated)
