"""Per-table service state that survives restarts.

One JSON file per table under ``service.state_dir``, replaced atomically (written and fsynced under a
temporary name, then renamed), so a crash leaves either the old or the new state, never a torn one.

* ``log_version``: the query-log version tailed so far (the next tail starts after it);
* ``last_optimized_version``: the table version our last OPTIMIZE committed;
* ``run``: an OPTIMIZE in progress (run id, table version it read); a restart that finds one checks
  the table's history: committed runs are recorded as done, others died before committing, left the
  table as it was, and are retried by a later tick;
* ``last_decision``: a summary of the latest decision, for ``deltaopt status``;
* ``current_layout``: the clustering features the latest estimate chose (files laid out under other
  features are drift suspects);
* ``reclustered``: (time, bytes) of the re-clustering runs of the last 24 h, the daily budget's ledger;
* ``recluster_checked``: when each older layout's files were last estimated, so that the few groups
  one tick estimates rotate;
* ``verdict``: the last verdict a tick may repeat while nothing it was made from moved (`service.idle`):
  what it was made from (``key``), ``at``, ``action``, ``reason``; null: none (``{}`` in older files);
* ``measured``: the committed jobs whose realised benefit later scans still add to (`service.realised`),
  each with the bytes those scans read so far per kind of reader; ``realised``: the table's running sums
  over every job ever measured, and the same sums weighed by recency (``realised_half_life``), whose
  realised / estimated factor scales the table's next benefit estimates once ``realised_min_jobs`` jobs
  with an estimate were measured (`RealisedTotals.calibration`).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from costmodel.benefit import Calibration, realised_factor
from optimizer.verdict import Verdict
from querylog.durable import atomic_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LastVerdict:
    """The last verdict a full tick made that a later tick may repeat while nothing it was made from
    moved (`service.idle`)."""

    key: str  # what it was made from (`idle.verdict_key`)
    at: str  # when (ISO 8601)
    action: Verdict  # DEFERRED for a job handed to the fleet queue
    reason: str


@dataclass(frozen=True)
class RunInProgress:
    run_id: str
    read_version: int
    started: str


@dataclass(frozen=True)
class ReaderBytes:
    """What the scans measured so far read, summed, as one kind of reader prunes: over the files a job
    replaced (`before`), over the files it wrote (`after`), and the replaced files unpruned (`total`)."""

    before: float = 0.0
    after: float = 0.0
    total: float = 0.0

    def plus(self, before: float, after: float, total: float) -> ReaderBytes:
        return ReaderBytes(self.before + before, self.after + after, self.total + total)


@dataclass(frozen=True)
class MeasuredJob:
    """A committed job whose realised benefit later scans add to (`service.realised`). Scans count from
    `committed` (no earlier than the commit) until the benefit horizon ends or, once a later commit
    rewrote some of its files (`superseded`), until that commit (`until`)."""

    run_id: str
    version: int  # the version the job committed: its files are those added at it
    committed: str  # ISO 8601
    estimated_share: float | None  # share of a query's bytes the estimate expected it to save (None: none)
    estimated_benefit: float | None  # the estimate's benefit over its horizon, cluster-seconds
    checked_version: int  # the newest version at which every file of the job was still active
    scans: int = 0
    unevaluable: int = 0  # scans whose filters could not be evaluated: counted as reading everything
    missed: int = 0  # scans that fell in the window when the job's files could not be read from the log
    readers: dict[str, ReaderBytes] = field(default_factory=dict)
    superseded: int | None = None  # the later version that rewrote some of its files
    until: str | None = None  # scans after this instant (that version's commit) do not count
    row_ts: str | None = None  # the start time of its decisions-table row (None: it has none)
    # how many jobs with an estimate were measured before this one's first scans: its evidence weighs
    # 2 ** -(jobs measured since / realised_half_life) in the calibration (None: no estimate, or not yet)
    ordinal: int | None = None

    def with_(self, **changes: Any) -> MeasuredJob:
        return replace(self, **changes)


@dataclass(frozen=True)
class RealisedTotals:
    """A table's running sums over every measured job: cluster-seconds saved, and what the estimates
    said the same scans would save (`estimated`, from jobs with an estimate)."""

    jobs: int = 0
    scans: int = 0
    bytes_saved: float = 0.0
    realised: float = 0.0  # cluster-seconds saved
    estimated: float = 0.0  # cluster-seconds the estimates expected over the same scans
    estimated_realised: float = 0.0  # `realised` of the jobs that have an estimate: the ratio's divisor
    estimated_jobs: int = 0  # jobs with an estimate measured on at least one scan (0 in older state files)
    # `estimated` and `estimated_realised` with each job's share weighed down as newer jobs are measured
    # (`realised_half_life`): what the calibration divides, so a table's factor follows its recent jobs.
    # None in older state files: the plain sums, until the next job is measured.
    recent_estimated: float | None = None
    recent_realised: float | None = None

    @property
    def ratio(self) -> float | None:
        """Estimated / realised over the scans measured (None until something was realised)."""
        return round(self.estimated / self.estimated_realised, 4) if self.estimated_realised > 0 else None

    def calibration(self, min_jobs: int, half_life: float = 0.0) -> Calibration | None:
        """The factor the table's next benefit estimates are scaled by (`costmodel.benefit.realised_factor`:
        realised / estimated over the jobs with an estimate, the recent ones weighing most where the
        `half_life` is set; 0: every job the same, whatever was weighed before), None before `min_jobs`
        of them were measured."""
        estimated, realised = self.recent_sums() if half_life > 0 else (self.estimated, self.estimated_realised)
        factor = realised_factor(estimated, realised, self.estimated_jobs, min_jobs=min_jobs)
        return Calibration(factor, self.estimated_jobs) if factor is not None else None

    def recent_sums(self) -> tuple[float, float]:
        """(estimated, realised) weighed by recency; the plain sums where none were kept yet or the
        weighed ones are not finite numbers (a damaged file: they would never recover)."""
        recent = (self.recent_estimated, self.recent_realised)
        if recent[0] is None or recent[1] is None or not all(math.isfinite(v) for v in (recent[0], recent[1])):
            return self.estimated, self.estimated_realised
        return recent[0], recent[1]


@dataclass(frozen=True)
class TableState:
    table: str
    log_version: int | None = None
    last_optimized_version: int | None = None
    run: RunInProgress | None = None
    last_decision: dict[str, Any] = field(default_factory=dict)
    ticks: int = 0
    current_layout: str | None = None
    current_layout_since: str = ""  # when the estimate last chose a different layout
    reclustered: tuple[tuple[str, int], ...] = ()
    recluster_checked: dict[str, str] = field(default_factory=dict)
    verdict: LastVerdict | None = None  # the verdict a tick may repeat while nothing moved; None: none
    liquid_wanted: tuple[str, ...] = ()  # a liquid table: the keys the workload wanted on the last full ticks
    liquid_streak: int = 0  # on how many of them running (`service.liquid.Streak`)
    measured: tuple[MeasuredJob, ...] = ()  # jobs later scans are still measured against
    realised: RealisedTotals = field(default_factory=RealisedTotals)

    def with_(self, **changes: Any) -> TableState:
        return replace(self, **changes)

    def with_layout(self, key: str, now: datetime) -> TableState:
        """The estimate chose `key` for today's workload."""
        if key == self.current_layout:
            return self
        return replace(self, current_layout=key, current_layout_since=now.isoformat())

    def reclustered_since(self, since: datetime) -> int:
        """Bytes re-clustered by runs that started at or after `since`."""
        return sum(size for ts, size in self.reclustered if datetime.fromisoformat(ts) >= since)

    def with_reclustered(self, now: datetime, size: int) -> TableState:
        """The ledger with one more run, entries older than a day dropped."""
        day_ago = now - timedelta(days=1)
        kept = tuple((ts, n) for ts, n in self.reclustered if datetime.fromisoformat(ts) >= day_ago)
        return replace(self, reclustered=(*kept, (now.isoformat(), size)))


class StateStore:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, table: str) -> Path:
        return self.directory / f"{table}.state.json"

    def load(self, table: str) -> TableState:
        path = self.path(table)
        if not path.exists():
            return TableState(table)
        data = json.loads(path.read_text())
        run = data.get("run")
        return TableState(
            table=data["table"],
            log_version=data.get("log_version"),
            last_optimized_version=data.get("last_optimized_version"),
            run=RunInProgress(**run) if run else None,
            last_decision=data.get("last_decision") or {},
            ticks=int(data.get("ticks", 0)),
            current_layout=data.get("current_layout"),
            current_layout_since=str(data.get("current_layout_since") or ""),
            reclustered=tuple((str(ts), int(n)) for ts, n in data.get("reclustered") or ()),
            recluster_checked={str(k): str(v) for k, v in (data.get("recluster_checked") or {}).items()},
            verdict=_last_verdict(data.get("verdict")),
            liquid_wanted=tuple(str(k) for k in data.get("liquid_wanted") or ()),
            liquid_streak=int(data.get("liquid_streak") or 0),
            measured=tuple(_measured_job(job) for job in data.get("measured") or ()),
            realised=_realised_totals(data.get("realised") or {}, path),
        )

    def save(self, state: TableState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with atomic_file(self.path(state.table), "w") as out:
            json.dump(asdict(state), out, indent=1, default=str)


def _last_verdict(data: dict[str, Any] | None) -> LastVerdict | None:
    """The stored verdict; state files of earlier versions hold ``{}`` for none. One that cannot be
    read whole (a missing field, an action this version does not know) is not repeated: the next tick
    decides afresh, as it would without one."""
    if not data:
        return None
    try:
        return LastVerdict(str(data["key"]), str(data["at"]), Verdict(data["action"]), str(data["reason"]))
    except (KeyError, ValueError):
        return None


def _realised_totals(data: dict[str, Any], path: Path) -> RealisedTotals:
    """The stored running sums, kept as they are; one warning when the factor's sums are not finite
    numbers (a damaged file: `realised_factor` then gives no factor, and benefits stay raw)."""
    totals = RealisedTotals(**data)
    if not all(math.isfinite(value) for value in (totals.estimated, totals.estimated_realised)):
        log.warning(
            "%s: realised.estimated %s / realised.estimated_realised %s: not a finite number, so its "
            "benefits are not calibrated (realised_min_jobs) until the sums are fixed",
            path,
            totals.estimated,
            totals.estimated_realised,
        )
    return totals


def _measured_job(data: dict[str, Any]) -> MeasuredJob:
    """A stored measured job (its readers' sums as dicts)."""
    readers = {str(name): ReaderBytes(**sums) for name, sums in (data.get("readers") or {}).items()}
    return MeasuredJob(**{**data, "readers": readers})
