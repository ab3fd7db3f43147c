"""The query rate: how many future queries a window of the log stands for."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from costmodel.rate import project_rate

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def poisson(rate_per_hour: float, start_hours_ago: float, end_hours_ago: float = 0.0, seed: int = 1) -> list:
    """Arrival times of a Poisson stream between two ages, as of NOW."""
    rng = random.Random(seed)
    times, age = [], start_hours_ago
    while True:
        age -= rng.expovariate(rate_per_hour)
        if age <= end_hours_ago:
            return times
        times.append(NOW - timedelta(hours=age))


def rate_of(times, **kwargs) -> float:  # type: ignore[no-untyped-def]
    """Projected queries per hour with the default window (7d) and half-life (3d)."""
    settings = {"half_life": 3 * DAY, "window": 7 * DAY, **kwargs}
    return project_rate(times, NOW, **settings).per_day / 24


DAY = 86400.0


def test_a_young_log_is_measured_over_the_hours_it_has_existed():
    """7 hours of log at 60/h: dividing by the whole 7-day window would say ~5/h."""
    assert rate_of(poisson(60, 7)) == pytest.approx(60, rel=0.1)


def test_an_old_log_is_measured_over_the_window():
    times = poisson(10, 14 * 24, seed=2)
    in_window = [t for t in times if t >= NOW - timedelta(days=7)]
    assert rate_of(in_window, recorded_before_window=True) == pytest.approx(10, rel=0.1)


def test_a_gap_when_the_log_was_not_recording_is_left_out():
    """Two days of imported history, three silent days, then two days from a recorder."""
    times = poisson(30, 7 * 24, 5 * 24, seed=3) + poisson(30, 2 * 24, seed=4)
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert len(rate.gaps) == 1, "the three silent days are one gap"
    assert rate.per_day / 24 == pytest.approx(30, rel=0.1)
    assert rate.covered_seconds == pytest.approx(4 * DAY, rel=0.02)


def test_quiet_nights_of_a_daytime_workload_are_not_gaps():
    """Queries 8 hours a day: the 16-hour nights are real quiet time (shorter than `log_gap`)."""
    times = [t for day in range(7) for t in poisson(90, 24 * (day + 1), 24 * (day + 1) - 8, seed=10 + day)]
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.gaps == ()
    assert rate.per_day / 24 == pytest.approx(90 * 8 / 24, rel=0.15)


def test_a_short_burst_barely_moves_the_rate():
    """A one-hour burst at 4x the rate a day ago moves a week-long stream's rate by under 10%."""
    times = poisson(20, 7 * 24, seed=5) + poisson(60, 25, 24, seed=6)
    assert rate_of(times, recorded_before_window=True) == pytest.approx(20, rel=0.1)


def test_a_stream_that_stopped_stops_paying():
    """Four days at 20/h and three silent days up to now: the silence counts, and pulls the rate down."""
    times = poisson(20, 7 * 24, 3 * 24, seed=7)
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.gaps == (), "the silence up to now is never a gap"
    assert rate.per_day / 24 < 0.6 * 20


def test_a_sparse_stream_keeps_its_silences():
    """One query every ~2 days: its silences are its rate, not gaps in the log."""
    times = [NOW - timedelta(days=d) for d in (6.5, 4.4, 2.6, 0.5)]
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.gaps == ()
    assert 0.3 < rate.per_day < 0.8


def test_the_projection_scales_with_the_horizon_and_needs_a_stream():
    times = poisson(60, 7)
    rate = project_rate(times, NOW, half_life=3 * DAY, window=7 * DAY)
    assert rate.expected(7 * DAY) == pytest.approx(7 * rate.expected(DAY))
    assert project_rate([], NOW, half_life=3 * DAY, window=7 * DAY).per_day == 0
    single = project_rate(times[:1], NOW, half_life=3 * DAY, window=7 * DAY)
    assert single.per_day == 0, "one query marks where the log starts; it is not yet a rate"
    two_quick = project_rate([NOW - timedelta(seconds=2), NOW - timedelta(seconds=1)], NOW, half_life=DAY, window=DAY)
    assert two_quick.per_day <= 24 * 1.02, "at least an hour is assumed (one query per hour, decayed)"
