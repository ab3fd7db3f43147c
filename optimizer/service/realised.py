"""Realised benefit: what a committed job saved the scans the query log recorded after it.

A job that committed at version v replaced the files removed at v (their statistics are in the snapshot
at v-1) with the files added at v. Each scan recorded after the commit is priced twice, over the job's
files and over the files they replaced, for each kind of reader with the statistics it prunes by:
standard readers by Delta's min/max, deltaopt's pruning by its extended statistics too. The pricing is
the estimate's own (`estimate.replay.query_bytes` over `skipping.pruning`); statistics come from the
Delta log and the extended-statistics sidecars, and no data file is read, so files are priced whole
(the log has no column sizes nor row groups: a scan's projection is not priced, on either side).

The unit is the estimate's: bytes saved / MB x ``cost_per_mb_read`` = cluster-seconds saved over the
scans seen so far, the kinds of reader mixed by the table's reader shares (as `costmodel.benefit.combine`
mixes them). Scans count from the commit until the benefit horizon the estimate priced ends, so a job's
final figure compares with its estimated ``benefit``; along the way ``estimated_for_scans`` is what the
estimate's saved share of a query's bytes gives over the same scans, and estimated / realised over every
job is kept in the table's state (`state.RealisedTotals`) for the estimator, which scales the table's next
benefits by its inverse (`RealisedTotals.calibration`). Both sides stay on the estimate's raw figures (its
byte share, and `BenefitEstimate.raw_benefit` for the job's estimated benefit), never on a calibrated
benefit: otherwise the ratio would converge to 1 by construction and the correction would flip.

Sound, never flattering: a scan whose filters cannot be evaluated counts as reading everything on both
sides (and is counted as such); dimension (join) filters are not credited; once a later commit removes
any of the job's files, only scans up to that commit count, and the figures say so.

Cheap: a tick measures only the jobs its tailed scans fall after; a job's two file sets are read from the
log once per process (`service.realised_files`) and reused by every later tick.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from costmodel.benefit import MB
from optimizer.config import READERS, TableSettings, Thresholds
from optimizer.errors import DeltaOptError
from optimizer.estimate.replay import Query, query_bytes
from optimizer.service.realised_files import JobFiles, job_files
from optimizer.service.state import MeasuredJob, ReaderBytes, RealisedTotals, TableState
from optimizer.skipping.pruning import prepare
from optimizer.table import open_table
from optimizer.verdict import Verdict
from querylog.errors import PredicateError
from querylog.records import ScanRecord

if TYPE_CHECKING:
    from optimizer.estimate.record import Decision
    from optimizer.service.record import TickRecord
    from optimizer.table.access import Snapshot, TableAccess

log = logging.getLogger(__name__)

MAX_JOBS = 32  # jobs a table measures at once; past it the oldest stop
PRICED = "whole files, by the Delta log's statistics (no column sizes, no row groups)"
COMMITTED = (Verdict.OPTIMIZE, Verdict.RECLUSTER)  # a job record with one of these committed


# ---- which jobs are measured ---------------------------------------------------------------------


def track_job(state: TableState, record: TickRecord, settings: TableSettings | None = None) -> TableState:
    """`state` with the job `record` committed among those later scans measure (unchanged when the
    record has no committed job). The commit is placed at the job's end (its start `record.ts` plus its
    seconds): no earlier than the commit, so no scan of the files it replaced counts. With the table's
    `settings`, the job's file sets are read now, before the sidecars of the files it replaced may be
    pruned (`jobs._prune_sidecars`): deltaopt's readers then price those files with their statistics."""
    job = record.job
    outcome = job.outcome if job is not None else None
    if job is None or outcome is None or outcome.version is None or record.action not in COMMITTED:
        return state
    committed = record.ts + timedelta(seconds=record.tick_seconds)
    measured = _new_job(job.run_id, outcome.version, committed, record.chosen)
    if settings is not None:
        _remember(settings, outcome.version)
    return _tracked(state, measured.with_(row_ts=record.ts.isoformat()))


def _remember(settings: TableSettings, version: int) -> None:
    """Best effort: a job whose files cannot be read now is read when scans arrive (logged then too)."""
    try:
        job_files(open_table(settings.path, dict(settings.storage_options)), version)
    except (DeltaOptError, OSError) as err:
        log.warning("%s: files of version %d not read for its realised benefit yet: %s", settings.name, version, err)


def track_settled(table: TableAccess, before: TableState, after: TableState) -> TableState:
    """`after` with the job a run found committed after a crash (`jobs.settle_run`) measured too: at
    its commit's time; its estimate died with the process, so it has realised figures only."""
    run, version = before.run, after.last_optimized_version
    if run is None or version is None or version == before.last_optimized_version:
        return after
    commit = next((c for c in table.history(version) if c.version == version), None)
    committed = commit.timestamp if commit is not None and commit.timestamp is not None else datetime.now(UTC)
    return _tracked(after, _new_job(run.run_id, version, committed, None))


def _new_job(run_id: str, version: int, committed: datetime, decision: Decision | None) -> MeasuredJob:
    """A job to measure, with the estimate's saved share of a query's bytes and its benefit: both raw
    (the byte figures are never calibrated; the benefit is the estimate's own, before any factor)."""
    benefit = decision.benefit if decision is not None else None
    share = None
    if benefit is not None and benefit.bytes_per_query_total > 0:
        share = (benefit.bytes_per_query_before - benefit.bytes_per_query_after) / benefit.bytes_per_query_total
    estimated = benefit.raw_benefit if benefit is not None else None
    return MeasuredJob(run_id, version, committed.isoformat(), share, estimated, checked_version=version)


def _tracked(state: TableState, job: MeasuredJob) -> TableState:
    kept = tuple(j for j in state.measured if j.run_id != job.run_id)
    return state.with_(measured=(*kept, job)[-MAX_JOBS:])


# ---- measuring ------------------------------------------------------------------------------------


def measure(
    table: TableAccess,
    state: TableState,
    scans: Sequence[ScanRecord],
    *,
    latest: Snapshot,
    thresholds: Thresholds,
    now: datetime,
) -> tuple[TableState, list[dict[str, Any]]]:
    """Add `scans` (a tick's tail of the query log) to the jobs they fall after. Returns the state
    (the table's totals moved, jobs whose horizon ended dropped) and the figures so far of each job
    measured (`figures`)."""
    horizon = timedelta(seconds=thresholds.benefit_horizon)
    kept: list[MeasuredJob] = []
    measured: list[dict[str, Any]] = []
    totals = state.realised
    for job in state.measured:
        if _seen(job, scans, horizon):
            later = _measure_job(table, job, scans, latest=latest, horizon=horizon, jobs=state.measured)
            totals, job = _moved(totals, job, later, thresholds)
            measured.append(figures(job, thresholds))
        if _at(job.committed) + horizon >= now:
            kept.append(job)
    return state.with_(measured=tuple(kept), realised=totals), measured


def _at(when: str | datetime) -> datetime:
    """An instant (ISO 8601 text or a datetime), in UTC when it names no zone."""
    at = datetime.fromisoformat(when) if isinstance(when, str) else when
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _seen(job: MeasuredJob, scans: Sequence[ScanRecord], horizon: timedelta) -> list[ScanRecord]:
    """The scans that count for `job`: after its commit, within the horizon, and not after the commit
    that superseded it."""
    start = _at(job.committed)
    end = start + horizon
    if job.until is not None:
        end = min(end, _at(job.until))
    return [s for s in scans if start < _at(s.ts) <= end]


def _measure_job(
    table: TableAccess,
    job: MeasuredJob,
    scans: Sequence[ScanRecord],
    *,
    latest: Snapshot,
    horizon: timedelta,
    jobs: Sequence[MeasuredJob],
) -> MeasuredJob:
    """`job` with the scans that count for it priced. Files the log no longer has (its retention), or a
    version that replaced no file, make the scans missed, logged and counted."""
    try:
        files = job_files(table, job.version)
        job = _superseded(table, job, files, latest, jobs)
    except (DeltaOptError, OSError) as err:
        log.warning("%s: realised benefit of run %s not measured: %s", table.uri, job.run_id, err)
        return job.with_(missed=job.missed + len(_seen(job, scans, horizon)))
    if not files.before_bytes:  # e.g. an OPTIMIZE that found nothing to do, reporting the version it read
        log.warning("%s: version %d of run %s replaced no file: nothing to measure", table.uri, job.version, job.run_id)
        return job.with_(missed=job.missed + len(_seen(job, scans, horizon)))
    return _priced(job, _seen(job, scans, horizon), files)


def _superseded(
    table: TableAccess, job: MeasuredJob, files: JobFiles, latest: Snapshot, jobs: Sequence[MeasuredJob]
) -> MeasuredJob:
    """`job`, superseded from the first version after it at which one of its files is no longer active
    (found by bisecting the versions since it was last seen whole)."""
    if job.superseded is not None or latest.version <= job.checked_version:
        return job
    if files.added <= {f.path for f in latest.files}:
        return job.with_(checked_version=latest.version)
    whole, broken = job.checked_version, latest.version
    while broken - whole > 1:
        middle = (whole + broken) // 2
        if files.added <= {f.path for f in table.snapshot(middle).files}:
            whole = middle
        else:
            broken = middle
    until = _commit_time(table, broken, jobs, fallback=_at(job.committed))
    return job.with_(checked_version=whole, superseded=broken, until=until.isoformat())


def _commit_time(table: TableAccess, version: int, jobs: Sequence[MeasuredJob], *, fallback: datetime) -> datetime:
    """When the commit at `version` landed, or earlier (sound: no scan of its files counts for the job it
    superseded): a measured job's start when it is one (the service's clock, as its scans'), else the
    log's time; without either, `fallback`."""
    ours = next((j for j in jobs if j.version == version), None)
    if ours is not None:
        return _at(ours.row_ts or ours.committed)
    commit = next((c for c in table.history(version) if c.version == version), None)
    return commit.timestamp if commit is not None and commit.timestamp is not None else fallback


def _priced(job: MeasuredJob, seen: Sequence[ScanRecord], files: JobFiles) -> MeasuredJob:
    """`job` with `seen` priced on both file sets for each kind of reader (identical filters priced once)."""
    readers = dict(job.readers)
    unevaluable = 0
    for filters, count in Counter(tuple(s.filters) for s in seen).items():
        query = _query(filters)
        if query is None:
            unevaluable += count
        for reader in READERS:
            before, after, total = _scan_bytes(query, files, reader)
            readers[reader] = readers.get(reader, ReaderBytes()).plus(before * count, after * count, total * count)
    return job.with_(scans=job.scans + len(seen), unevaluable=job.unevaluable + unevaluable, readers=readers)


def _query(filters: tuple[str, ...]) -> Query | None:
    """The scan's filters as the replay prepares them; None when they cannot be evaluated."""
    try:
        predicate = prepare(" AND ".join(f"({f})" for f in filters) if filters else None)
    except PredicateError:
        return None
    return Query(predicate, None, 1.0)  # whole files: no projection


def _scan_bytes(query: Query | None, files: JobFiles, reader: str) -> tuple[float, float, float]:
    """(bytes read over the replaced files, over the job's files, the replaced files unpruned); a scan
    that cannot be evaluated reads everything on both sides."""
    before_total, after_total = files.totals
    if query is None:
        return before_total, after_total, before_total
    try:
        before, total = query_bytes(query, files.before[reader], files.before_bytes)
        after, _ = query_bytes(query, files.after[reader], files.after_bytes)
    except PredicateError:
        return before_total, after_total, before_total
    return before, after, total


# ---- figures ------------------------------------------------------------------------------------


class _Numbers(NamedTuple):
    saved: float  # bytes, readers mixed by their shares
    benefit: float  # cluster-seconds
    estimated: float | None  # cluster-seconds the estimate's saved share gives over the same scans
    read: ReaderBytes  # the mixed sums


def _numbers(job: MeasuredJob, thresholds: Thresholds) -> _Numbers:
    weights = {name: thresholds.readers.get(name, 0.0) for name in job.readers}
    weight = sum(weights.values())
    if weight <= 0:
        return _Numbers(0.0, 0.0, 0.0 if job.estimated_share is not None else None, ReaderBytes())
    mixed = ReaderBytes(
        *(sum(weights[n] * getattr(job.readers[n], f) for n in weights) / weight for f in ("before", "after", "total"))
    )
    saved = mixed.before - mixed.after
    cost = thresholds.cost_per_mb_read
    estimated = job.estimated_share * mixed.total / MB * cost if job.estimated_share is not None else None
    return _Numbers(saved, saved / MB * cost, estimated, mixed)


def _moved(
    totals: RealisedTotals, old: MeasuredJob, new: MeasuredJob, thresholds: Thresholds
) -> tuple[RealisedTotals, MeasuredJob]:
    """The table's totals with what `new` (the job `old` plus this tick's scans) adds, and `new` with its
    place among the jobs with an estimate once its first scans are measured (`MeasuredJob.ordinal`)."""
    before = _numbers(old, thresholds)
    after = _numbers(new, thresholds)
    estimated = realised_estimated = 0.0
    first = old.scans == 0 and new.scans > 0  # the job's first scans: one more job measured
    estimated_jobs = 0  # of them, jobs with an estimate
    recent = totals.recent_sums()
    if after.estimated is not None and before.estimated is not None:
        estimated = after.estimated - before.estimated
        realised_estimated = after.benefit - before.benefit
        estimated_jobs = 1 if first else 0
        added = (estimated, realised_estimated)
        recent, new = _weighed(recent, added, jobs=totals.estimated_jobs, job=new, first=first, thresholds=thresholds)
    moved = RealisedTotals(
        jobs=totals.jobs + (1 if first else 0),
        scans=totals.scans + new.scans - old.scans,
        bytes_saved=totals.bytes_saved + after.saved - before.saved,
        realised=totals.realised + after.benefit - before.benefit,
        estimated=totals.estimated + estimated,
        estimated_realised=totals.estimated_realised + realised_estimated,
        estimated_jobs=totals.estimated_jobs + estimated_jobs,
        recent_estimated=recent[0],
        recent_realised=recent[1],
    )
    return moved, new


def _weighed(
    recent: tuple[float, float],
    added: tuple[float, float],
    *,
    jobs: int,
    job: MeasuredJob,
    first: bool,
    thresholds: Thresholds,
) -> tuple[tuple[float, float], MeasuredJob]:
    """The recency-weighed sums with a job's (estimated, realised) increment `added`, of the `jobs` jobs
    with an estimate measured so far. The sums are sum(d ** (jobs - 1 - ordinal) * figure) over the jobs,
    with d = 2 ** (-1 / realised_half_life): a job's first scans make it job `jobs` (weight 1) and weigh
    every earlier job's figures (those still to come included) down by d. A job tracked before ordinals
    were kept has none: its scans weigh as the newest job's."""
    half_life = thresholds.realised_half_life
    decay = 0.5 ** (1 / half_life) if half_life > 0 else 1.0
    if first:
        recent = (recent[0] * decay, recent[1] * decay)
        job = job.with_(ordinal=jobs)
        jobs += 1
    # an ordinal past the count (the totals reset by hand, its jobs kept) weighs as the newest job's
    weight = decay ** max(0, jobs - 1 - job.ordinal) if job.ordinal is not None else 1.0
    return (recent[0] + weight * added[0], recent[1] + weight * added[1]), job


def figures(job: MeasuredJob, thresholds: Thresholds) -> dict[str, Any]:
    """A job's realised figures so far, as its decisions-table row and the tick's record hold them."""
    numbers = _numbers(job, thresholds)
    ratio = None
    if numbers.estimated is not None and numbers.benefit > 0:
        ratio = round(numbers.estimated / numbers.benefit, 4)
    superseded = None
    if job.superseded is not None:
        superseded = f"version {job.superseded} rewrote some of its files: scans after {job.until} not counted"
    return {
        "run_id": job.run_id,
        "version": job.version,
        "scans": job.scans,
        "unevaluable": job.unevaluable,
        "missed": job.missed,
        "bytes_read_before": round(numbers.read.before, 1),
        "bytes_read_after": round(numbers.read.after, 1),
        "bytes_saved": round(numbers.saved, 1),
        "benefit": round(numbers.benefit, 4),
        "estimated_benefit": job.estimated_benefit,
        "estimated_for_scans": round(numbers.estimated, 4) if numbers.estimated is not None else None,
        "ratio": ratio,
        "window": {"from": job.committed, "until": job.until},
        "superseded": superseded,
        "priced": PRICED,
        "readers": {name: asdict(sums) for name, sums in sorted(job.readers.items())},
    }


def totals_dict(totals: RealisedTotals) -> dict[str, Any]:
    """A table's (or the fleet's) realised totals as `deltaopt status` shows them."""
    return {
        "jobs": totals.jobs,
        "scans": totals.scans,
        "bytes_saved": round(totals.bytes_saved, 1),
        "benefit": round(totals.realised, 4),
        "estimated": round(totals.estimated, 4),
        "ratio": totals.ratio,
    }


def summed(totals: Iterable[RealisedTotals]) -> RealisedTotals:
    """Several tables' totals as one (the fleet's)."""
    found = list(totals)
    return RealisedTotals(
        jobs=sum(t.jobs for t in found),
        scans=sum(t.scans for t in found),
        bytes_saved=sum(t.bytes_saved for t in found),
        realised=sum(t.realised for t in found),
        estimated=sum(t.estimated for t in found),
        estimated_realised=sum(t.estimated_realised for t in found),
        estimated_jobs=sum(t.estimated_jobs for t in found),
    )


def realised_line(totals: RealisedTotals, factor: float | None = None) -> str:
    """A table's (or the fleet's) realised totals as one line for a terminal; `factor`: what the table's next
    benefit estimates are scaled by (the fleet has none)."""
    if not totals.scans:
        return "realised: no scan measured after a job yet"
    ratio = f"; estimated / realised x{totals.ratio:.2f}" if totals.ratio is not None else ""
    if factor is not None:
        ratio += f"; next benefits x{factor:.2f}"
    shown = totals_dict(totals)  # rounded as the JSON shows them, so both say the same
    return (
        f"realised: {shown['benefit']:,.1f} cluster-s saved ({shown['bytes_saved'] / 1e6:,.1f} MB) over "
        f"{totals.scans:,} scan(s) after {totals.jobs} job(s){ratio}"
    )
