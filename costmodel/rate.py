"""How many queries to expect: a recency-weighted rate measured over the time the log actually covered.

The benefit of a layout is paid back by future queries, so the estimator projects the workload's rate
over the benefit horizon. The rate is an exponentially weighted average (recent queries count more,
with the analysis's half-life): the decayed count of logged scans divided by the decay kernel's area
over the period the log was *recording*, not over the whole workload window. Dividing by the window's
area treats a log that started 7 hours ago as if it had seen nothing for the other 7 days (about 12x
low with a 7d window and 3d half-life, 150x with 400d / 30d).

The covered period:

* **start**: the window's start when the log holds older records of the table (it was recording
  before the window), otherwise the table's first record, which marks the start and is not counted
  (the usual estimator for a stream observed from its first arrival);
* **gaps**: a silence *between* two records longer than ``max(gap, 20 x the median inter-arrival)``
  is time the log was not recording (a history imported, then a recorder started days later; a
  recorder that was down), not time without queries: it is left out. 20 median inter-arrivals is a
  silence that a steady stream has a negligible chance of (e^-20), and the ``gap`` floor (1 day by
  default) keeps nights of a daytime workload counted as quiet time;
* **the silence up to now** always counts: a workload that stopped should stop paying for layouts;
* at least ``min_period`` (1 hour) is assumed, so two queries a second apart do not project millions.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

DAY = 86400.0
GAP_MEDIANS = 20  # a silence this many median inter-arrivals long is not chance
MIN_PERIOD = 3600.0


@dataclass(frozen=True)
class QueryRate:
    """A measured query rate and the period it was measured on."""

    counted: int  # logged scans that went into the rate
    per_day: float  # recency-weighted queries per day
    period_start: datetime | None
    period_end: datetime
    covered_seconds: float  # recording time within the period (gaps left out)
    gaps: tuple[tuple[datetime, datetime], ...] = ()  # silences counted as "not recording"

    def expected(self, horizon: float) -> float:
        """Queries expected over the next `horizon` seconds."""
        return self.per_day * horizon / DAY

    def as_dict(self) -> dict[str, object]:
        return {
            "counted": self.counted,
            "per_day": round(self.per_day, 3),
            "period_start": self.period_start.isoformat() if self.period_start else None,
            "period_end": self.period_end.isoformat(),
            "covered_hours": round(self.covered_seconds / 3600, 3),
            "gaps": [[a.isoformat(), b.isoformat()] for a, b in self.gaps],
        }


def _kernel_area(a: float, b: float, half_life: float) -> float:
    """Integral of 0.5 ** (age / half_life) over ages [a, b] seconds (a <= b)."""
    scale = half_life / math.log(2)
    return scale * (0.5 ** (a / half_life) - 0.5 ** (b / half_life))


def project_rate(
    timestamps: Sequence[datetime],
    now: datetime,
    *,
    half_life: float,
    window: float,
    recorded_before_window: bool = False,
    gap: float = DAY,
    min_period: float = MIN_PERIOD,
) -> QueryRate:
    """The recency-weighted rate of `timestamps` (scans of one table) as of `now`.

    `recorded_before_window`: the log holds records of the table older than the window, so the whole
    window is covered. `gap`: the shortest silence that may count as "not recording".
    """
    window_start = now - timedelta(seconds=window)
    times = sorted(t for t in timestamps if window_start <= t <= now)
    if not times:
        return QueryRate(0, 0.0, window_start if recorded_before_window else None, now, 0.0)
    if recorded_before_window:
        start, counted = window_start, times
    else:
        start, counted = times[0], times[1:]
    points = [start, *counted]
    pairs = list(itertools.pairwise(points))
    steps = [(b - a).total_seconds() for a, b in pairs]
    threshold = max(gap, GAP_MEDIANS * statistics.median(steps)) if steps else math.inf
    gaps = tuple(pair for pair, step in zip(pairs, steps, strict=True) if step > threshold)

    def age(t: datetime) -> float:
        return (now - t).total_seconds()

    area = _kernel_area(0.0, age(start), half_life) - sum(_kernel_area(age(b), age(a), half_life) for a, b in gaps)
    covered = age(start) - sum((b - a).total_seconds() for a, b in gaps)
    area = max(area, _kernel_area(0.0, min(min_period, window), half_life))
    decayed = sum(0.5 ** (age(t) / half_life) for t in counted)
    return QueryRate(
        counted=len(counted),
        per_day=decayed / area * DAY if area > 0 else 0.0,
        period_start=start,
        period_end=now,
        covered_seconds=covered,
        gaps=gaps,
    )
