"""What `deltaopt report TABLE` draws, read from the decision records: the table's bytes per query over
time as each estimate saw it, the jobs, and each job's estimated benefit against what it realised
(`service.realised`). Pure: records in, series out; drawing is `optimizer.cli.report`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Estimated:
    """One tick's estimate: the bytes a query reads from the new data now, and after the chosen layout."""

    ts: datetime
    before: float
    after: float


@dataclass(frozen=True)
class JobPoint:
    """One committed job: when, what it was (its verdict, and a liquid table's operation), the benefit its
    estimate expected over the horizon, and what it realised so far (None: not measured yet)."""

    ts: datetime
    label: str
    estimated: float | None
    realised: float | None
    scans: int = 0
    estimated_for_scans: float | None = None  # the estimate's saved share over the same scans


@dataclass(frozen=True)
class Report:
    table: str
    estimates: list[Estimated] = field(default_factory=list)
    jobs: list[JobPoint] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.estimates and not self.jobs


def report_of(table: str, records: Sequence[Mapping[str, Any]]) -> Report:
    """The series of `table`'s records (oldest first, as `DecisionLog.read` returns them). A record that
    committed nothing contributes only its estimate; one without an estimate (too little new data, a
    repeated verdict) contributes nothing."""
    report = Report(table)
    for record in records:
        if record.get("table") != table:
            continue
        ts = datetime.fromisoformat(str(record["ts"]))
        benefit = record.get("benefit") or {}
        if "bytes_per_query_before" in benefit and "bytes_per_query_after" in benefit:
            before, after = benefit["bytes_per_query_before"], benefit["bytes_per_query_after"]
            report.estimates.append(Estimated(ts, float(before), float(after)))
        job = record.get("job") or {}
        if job.get("version") is not None:
            report.jobs.append(_job_point(ts, record, benefit))
    return report


def _job_point(ts: datetime, record: Mapping[str, Any], benefit: Mapping[str, Any]) -> JobPoint:
    """A committed job's point: its estimate's benefit, and the realised figures its row carries."""
    realised = record.get("realised") or {}
    liquid = record.get("liquid") or {}
    label = str(liquid.get("operation") or record.get("action") or "job")
    estimated = benefit.get("benefit")
    return JobPoint(
        ts,
        label,
        float(estimated) if estimated is not None else None,
        float(realised["benefit"]) if "benefit" in realised else None,
        int(realised.get("scans") or 0),
        realised.get("estimated_for_scans"),
    )
