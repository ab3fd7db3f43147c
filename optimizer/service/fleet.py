"""One fleet queue: every table's candidate job ranked by net benefit per cluster-second, started under
a compute budget.

A tick (`ticking`, then `settle`) that decides a job (new data, a merge, drift re-clustering) queues a
`Candidate` instead of starting it; `dispatch` then starts the candidates that rank highest, as long as

* a job slot is free (``service.max_concurrent_jobs``), and
* the candidate's estimated cluster-seconds fit what is left of the budget this hour and today
  (``service.budget``) once every better-ranked waiting candidate has been given its share: the same
  greedy walk an offline ranking of the candidates would make, so a cheap low-value job never takes
  budget a better one needs.

A job is admitted on its estimate times the measured/estimated ratio of the last day's jobs (once three
have ended: `correction`), so a cost model off by a steady factor does not overrun the budget.
Rank is ``net / cost`` (cluster-seconds saved per cluster-second spent), multiplied by
``1 + waited / aging`` so that a deferred candidate gains on fresh ones and no table starves: after
``k`` aging periods its rank is ``k + 1`` times its own. Jobs are charged their estimate while they run
and their measured seconds once they end. A candidate that is not started says why (its rank, the
budget left, what it needs) in its table's decision.

The queue holds no Spark and no table handle: a candidate's `start` runs the job and writes its record
(`optimizer.service.tick`). `launch` says where jobs of other tables start (inline by default; the
serve loop hands them to its worker pool). The ledger and the waiting list are written to
``<state_dir>/fleet.json`` for ``deltaopt status`` (`service.fleet_file`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from optimizer.service.fleet_file import Charge, FleetFile, as_json

log = logging.getLogger(__name__)
MIN_COST = 1.0  # cluster-seconds: a job priced below this ranks as if it cost this much
MIN_MEASURED = 3  # jobs measured before their measured/estimated ratio corrects admissions
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
_Decided = TypeVar("_Decided")


@dataclass(frozen=True)
class Budget:
    """Cluster-seconds the fleet's jobs may use per rolling hour and day (None: no limit)."""

    per_hour: float | None = None
    per_day: float | None = None
    aging: float = 3600.0  # seconds of waiting that add the candidate's own rank once more


@dataclass(frozen=True)
class Candidate:
    """A job one table's tick decided on, waiting for a slot and budget."""

    table: str
    kind: str  # "optimize" or "recluster"
    net: float  # benefit - cost, cluster-seconds
    cost: float  # estimated cluster-seconds of the job
    key: str  # the verdict it was decided under (`service.idle`): a tick that reuses it finds it here
    since: datetime  # first submitted; kept when the table's next estimate replaces the candidate
    start: Callable[[datetime, str], Any] = field(compare=False, repr=False)  # runs it; the note says how

    @property
    def rate(self) -> float:
        return self.net / max(self.cost, MIN_COST)

    def priority(self, now: datetime, aging: float) -> float:
        waited = max((now - self.since).total_seconds(), 0.0)
        return self.rate * (1.0 + waited / aging if aging > 0 else 1.0)


@dataclass(frozen=True)
class Dispatched:
    """What `dispatch` did: the records of the jobs it ran in this thread, by table; for the calling table,
    why its job waits (`deferred`) or that the queue holds every job back (`held`); why each waits."""

    records: dict[str, Any] = field(default_factory=dict)
    deferred: str | None = None
    held: bool = False
    waiting: dict[str, str] = field(default_factory=dict)  # by table


@dataclass(frozen=True)
class TickSlot:
    """What a tick learns as it starts (`FleetQueue.ticking`): why it must not decide (`busy`), or its
    table's waiting candidate (which does not start while the table ticks)."""

    busy: str | None = None
    waiting: Candidate | None = None

    @property
    def waiting_key(self) -> str | None:  # the verdict it was decided under (`service.idle`)
        return self.waiting.key if self.waiting is not None else None


class FleetQueue:
    def __init__(
        self,
        slots: int = 1,
        budget: Budget | None = None,
        path: str | Path | None = None,
        *,
        launch: Callable[[Callable[[], None]], None] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.slots = slots
        self.budget = budget or Budget()
        self.file = FleetFile(path) if path is not None else None
        self.launch = launch  # None: every job runs in the dispatching thread, one after another
        self.clock = clock
        self.timer = timer  # measures a job's cluster-seconds (its wall time on the cluster)
        self._lock = threading.RLock()
        self._waiting: dict[str, Candidate] = {}
        self._running: dict[str, Charge] = {}
        self._ticking: set[str] = set()
        self._ledger: list[Charge] = self.file.charges() if self.file is not None else []
        self._held = 0
        self._warming: set[str] = set()
        self._stopped = False

    # -- what ticks call -------------------------------------------------------------------------

    @contextmanager
    def ticking(self, table: str) -> Iterator[TickSlot]:
        """Mark `table` as ticking while the block runs (its queued job does not start meanwhile);
        yields its `TickSlot`: why the tick must not touch the table (its job, or another tick of it,
        runs), or the table's waiting candidate."""
        with self._lock:
            busy = None
            if table in self._running:
                busy = "an OPTIMIZE job of this table is running: decided again after it ends"
            elif table in self._ticking:
                busy = "another tick of this table is running"
            else:
                self._ticking.add(table)
            slot = TickSlot(busy, self._waiting.get(table) if busy is None else None)
        try:
            yield slot
        finally:
            if busy is None:
                with self._lock:
                    self._ticking.discard(table)
                    self._warming.discard(table)

    def settle(self, table: str, now: datetime, candidate: Candidate | None, *, waiting: bool = False) -> Dispatched:
        """End `table`'s tick: queue its `candidate` (or, `waiting`, keep the one queued) and start what
        ranks first, its own job in this thread; neither: no job, a candidate queued earlier is void."""
        if candidate is not None:
            self.submit(candidate)
        elif not waiting:
            self.drop(table)
            return Dispatched()
        return self.dispatch(now, own=table)

    def submit(self, candidate: Candidate) -> None:
        """Queue `candidate`, replacing the table's earlier one (its waiting time carries over)."""
        with self._lock:
            earlier = self._waiting.get(candidate.table)
            if earlier is not None and earlier.since < candidate.since:
                candidate = replace(candidate, since=earlier.since)
            self._waiting[candidate.table] = candidate
            self._save(candidate.since)

    def drop(self, table: str) -> None:
        """Forget `table`'s candidate (paused, no longer watched, decided again without a job)."""
        with self._lock:
            if self._waiting.pop(table, None) is not None:
                self._save(self.clock())

    @contextmanager
    def held(self) -> Iterator[None]:
        """Start nothing while the block runs (a pass ranks every table's candidate before any starts);
        the candidates then start in rank order."""
        with self._lock:
            self._held += 1
        try:
            yield
        finally:
            with self._lock:
                self._held -= 1

    def ranked_pass(self, now: datetime, decide: Callable[[], _Decided]) -> tuple[_Decided, Dispatched]:
        """One pass over the fleet: `decide` runs with the queue held (each table's tick queues its
        candidate, none starts), then the candidates start best first (`dispatch`). Returns what `decide`
        returned and what the dispatch did."""
        with self.held():
            decided = decide()
        return decided, self.dispatch(now)

    def stop(self) -> None:
        """Start no more jobs (the service is shutting down); the waiting ones are forgotten with it."""
        with self._lock:
            self._stopped = True

    def warm_up(self, tables: set[str]) -> None:
        """Start nothing until each of `tables` has ticked once: ranking needs their candidates."""
        with self._lock:
            self._warming = set(tables)

    # -- dispatch ---------------------------------------------------------------------------------

    def dispatch(self, now: datetime, own: str | None = None) -> Dispatched:
        """Start the best-ranked candidates that a slot and the budget allow; `own`'s job, if chosen,
        runs in this thread, others go to `launch` (or run in this thread too, without one)."""
        ran: dict[str, Any] = {}
        while True:
            with self._lock:
                chosen, reasons = self._choose(now, own)
                if chosen is None:
                    held = bool(self._held) and own not in ran
                    return Dispatched(ran, reasons.get(own or ""), held, reasons)
                self._waiting.pop(chosen.table)
                expected = chosen.cost * self.correction()
                self._running[chosen.table] = Charge(now, expected, chosen.table, chosen.cost, running=True)
                self._save(now)
            note = self._note(chosen, now)
            if chosen.table == own or self.launch is None:
                ran[chosen.table] = self._run(chosen, now, note)
            else:
                self.launch(self._pooled(chosen, now, note))

    def reasons(self, now: datetime) -> dict[str, str]:
        """Why each waiting candidate waits, as a dispatch now would say."""
        with self._lock:
            return self._choose(now, None)[1]

    def _pooled(self, candidate: Candidate, now: datetime, note: str) -> Callable[[], None]:
        """`candidate`'s job for the worker pool: once it ends, the freed slot goes to the next best."""

        def job() -> None:
            try:
                self._run(candidate, now, note)
            finally:
                self.dispatch(self.clock())

        return job

    def _choose(self, now: datetime, own: str | None) -> tuple[Candidate | None, dict[str, str]]:
        """The candidate to start now, or None and why each waiting one waits."""
        ranked = self.ranked(now)
        if self._stopped:
            return None, {c.table: f"{self._rank(c, ranked, now)}; the service is stopping" for c in ranked}
        if self._held or self._warming:
            why = "the pass ranks every table's candidate before any job starts"
            if self._warming:
                why = f"ranking waits for the first tick of {len(self._warming)} more table(s)"
            return None, {c.table: f"{self._rank(c, ranked, now)}; {why}" for c in ranked}
        if len(self._running) >= self.slots:
            why = f"all {self.slots} job slot(s) busy ({', '.join(sorted(self._running))})"
            return None, {c.table: f"{self._rank(c, ranked, now)}; {why}" for c in ranked}
        hour, day = self.left(now)
        factor = self.correction()
        reasons: dict[str, str] = {}
        for candidate in ranked:  # the greedy walk: each that fits takes its share of what is left
            needs = candidate.cost * factor
            fits = needs <= min(hour, day)
            if fits and (candidate.table not in self._ticking or candidate.table == own):
                return candidate, reasons
            if fits:  # its table is being decided again: it keeps its share meanwhile
                reasons[candidate.table] = f"{self._rank(candidate, ranked, now)}; its table is being decided again"
                hour, day = hour - needs, day - needs
            else:
                reasons[candidate.table] = (
                    f"{self._rank(candidate, ranked, now)}; needs {needs:,.0f} cluster-s{_corrected(factor)}, "
                    f"budget left {_limit(hour)} this hour, {_limit(day)} today after better-ranked jobs"
                )
        return None, reasons

    def _rank(self, candidate: Candidate, ranked: list[Candidate], now: datetime) -> str:
        aged = candidate.priority(now, self.budget.aging) / candidate.rate if candidate.rate > 0 else 1.0
        return (
            f"ranked {ranked.index(candidate) + 1} of {len(ranked)} by net benefit per cluster-second "
            f"({candidate.rate:,.2f}, x{aged:.2f} for waiting since {candidate.since.isoformat(timespec='seconds')})"
        )

    def _note(self, candidate: Candidate, now: datetime) -> str:
        waited = (now - candidate.since).total_seconds()
        return (
            f"started by the fleet queue (net benefit per cluster-second {candidate.rate:,.2f}, "
            f"waited {waited:,.0f} s; budget used {self.describe_use(now)})"
        )

    def _run(self, candidate: Candidate, now: datetime, note: str) -> Any:
        started = self.timer()
        try:
            return candidate.start(now, note)
        finally:
            seconds = self.timer() - started
            with self._lock:
                self._running.pop(candidate.table, None)
                self._ledger.append(Charge(now, seconds, candidate.table, candidate.cost))
                self._save(now)

    # -- the budget -------------------------------------------------------------------------------

    def correction(self) -> float:
        """Measured over estimated cluster-seconds of the last day's jobs (1 until `MIN_MEASURED` have
        ended): a job is admitted on its estimate times this, so a cost model that is off by a steady
        factor does not overrun the budget (and the fleet's own runs correct it)."""
        with self._lock:
            measured = [c for c in self._ledger if c.estimated > 0]
            if len(measured) < MIN_MEASURED:
                return 1.0
            return sum(c.seconds for c in measured) / sum(c.estimated for c in measured)

    def ranked(self, now: datetime) -> list[Candidate]:
        """The waiting candidates, best first."""
        with self._lock:
            return sorted(self._waiting.values(), key=lambda c: (-c.priority(now, self.budget.aging), c.since, c.table))

    def used(self, now: datetime, window: timedelta) -> float:
        """Cluster-seconds charged to jobs that started within `window` before `now` (running jobs at
        their estimate)."""
        with self._lock:
            charges = [*self._ledger, *self._running.values()]
            return sum(c.seconds for c in charges if c.at > now - window)

    def left(self, now: datetime) -> tuple[float, float]:
        """Cluster-seconds left this hour and today (infinite without a limit)."""
        hour = self.budget.per_hour - self.used(now, HOUR) if self.budget.per_hour is not None else float("inf")
        day = self.budget.per_day - self.used(now, DAY) if self.budget.per_day is not None else float("inf")
        return hour, day

    def describe_use(self, now: datetime) -> str:
        hour = self.used(now, HOUR)
        day = self.used(now, DAY)
        return f"{hour:,.0f} cluster-s this hour{_of(self.budget.per_hour)}, {day:,.0f} today{_of(self.budget.per_day)}"

    # -- persistence ------------------------------------------------------------------------------

    def snapshot(self, now: datetime) -> dict[str, Any]:
        """What ``deltaopt status`` shows: the budget's use, running jobs, the waiting list in rank order."""
        with self._lock:
            ranked = self.ranked(now)
            return {
                "at": now.isoformat(),
                "budget": asdict(self.budget),
                "used": {"hour": round(self.used(now, HOUR), 1), "day": round(self.used(now, DAY), 1)},
                "slots": self.slots,
                "running": [as_json(c) for c in self._running.values()],
                "waiting": [
                    {
                        "table": c.table,
                        "kind": c.kind,
                        "net": round(c.net, 1),
                        "cost": round(c.cost, 1),
                        "rate": round(c.rate, 3),
                        "priority": round(c.priority(now, self.budget.aging), 3),
                        "since": c.since.isoformat(),
                    }
                    for c in ranked
                ],
                "ledger": [as_json(c) for c in self._ledger],
            }

    def _save(self, now: datetime) -> None:
        if self.file is None:
            return
        self._ledger = [c for c in self._ledger if c.at > now - DAY]  # the ledger keeps one day
        self.file.write(self.snapshot(now))


def _corrected(factor: float) -> str:
    return "" if factor == 1.0 else f" (its estimate x{factor:.2f}, as measured jobs ran)"


def _limit(value: float) -> str:
    return "unlimited" if value == float("inf") else f"{max(value, 0.0):,.0f} cluster-s"


def _of(limit: float | None) -> str:
    return f" of {limit:,.0f}" if limit is not None else ""
