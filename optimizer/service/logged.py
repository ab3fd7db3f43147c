"""A decision-log line read back (`service.decisions` writes it), of any version deltaopt wrote: what
`deltaopt decisions` prints of it. Earlier lines lack keys (read as "?", 0 or None, as they always
printed) and a later version's may hold fields this one does not know (read past, never refused)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoggedJob:
    """The job of a logged decision, as `deltaopt decisions` prints it (a figure an older line lacks
    reads as 0, as it always printed)."""

    executor: str | None
    where: str | None
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0
    error: str | None = None

    @classmethod
    def from_dict(cls, job: Mapping[str, Any]) -> LoggedJob:
        return cls(
            job.get("executor"),
            job.get("where"),
            files_in=job.get("files_in", 0),
            files_out=job.get("files_out", 0),
            bytes_in=job.get("bytes_in", 0),
            bytes_out=job.get("bytes_out", 0),
            seconds=job.get("seconds", 0),
            error=job.get("error"),
        )


@dataclass(frozen=True)
class LoggedRealised:
    """What a logged job realised so far (`service.realised.figures`), as `deltaopt decisions` prints it."""

    benefit: float
    bytes_saved: float
    scans: int
    unevaluable: int = 0
    estimated_for_scans: float | None = None
    superseded: str | None = None  # a later rewrite of some of its files: the scans no longer counted

    @classmethod
    def from_dict(cls, realised: Mapping[str, Any]) -> LoggedRealised:
        return cls(
            realised["benefit"],
            realised["bytes_saved"],
            realised["scans"],
            unevaluable=realised.get("unevaluable", 0),
            estimated_for_scans=realised.get("estimated_for_scans"),
            superseded=realised.get("superseded"),
        )

    def line(self) -> str:
        against = ""
        if self.estimated_for_scans is not None:
            against = f" (estimate for those scans {self.estimated_for_scans:,.1f})"
        superseded = f"; {self.superseded}" if self.superseded else ""
        return (
            f"realised: {self.benefit:,.1f} cluster-s, {self.bytes_saved:,.0f} bytes saved over "
            f"{self.scans} scan(s){against}, {self.unevaluable} unevaluable{superseded}"
        )


@dataclass(frozen=True)
class LoggedLiquid:
    """A liquid table's tick (`service.liquid.LiquidPlan.as_dict`), named as Databricks' history names the
    operation."""

    mode: str | None
    operation: str | None  # None: no operation
    keys: tuple[str, ...] = ()
    wanted: tuple[str, ...] = ()
    full: bool = False

    @classmethod
    def from_dict(cls, liquid: Mapping[str, Any]) -> LoggedLiquid:
        return cls(
            liquid.get("mode"),
            liquid.get("operation"),
            tuple(liquid.get("keys") or ()),
            tuple(liquid.get("wanted") or ()),
            full=bool(liquid.get("full")),
        )

    def line(self) -> str:
        full = " FULL" if self.full else ""
        keys = ", ".join(self.keys) or "none"
        wanted = ", ".join(self.wanted) or "none"
        operation = self.operation or "no operation"
        return f"liquid ({self.mode}): {operation}{full}; keys ({keys}), the workload wants ({wanted})"


@dataclass(frozen=True)
class LoggedFeatures:
    """The layout a logged decision chose, as `deltaopt decisions` prints it: its Z expressions and SOP
    predicates only, read as written (None: the line has none), so that a line whose other layout fields
    this version does not know (a newer curve, cuts) still prints."""

    z: tuple[str, ...] | None
    sop: tuple[str, ...] | None

    @classmethod
    def from_dict(cls, features: Mapping[str, Any]) -> LoggedFeatures:
        return cls(_names(features.get("z")), _names(features.get("sop")))

    def line(self) -> str:
        z = list(self.z) if self.z is not None else None
        sop = list(self.sop) if self.sop is not None else None
        return f"features: z={z} sop={sop}"


def _names(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else (str(value),)


@dataclass(frozen=True)
class LoggedDecision:
    """A decision-log line read back, of any version (earlier ones lack keys, and held the tick's time
    under ``seconds``): what `deltaopt decisions` prints of it."""

    ts: str
    table: str
    action: str
    reason: str
    version: int | str = "?"  # "?" on a line without one
    job: LoggedJob | None = None
    features: LoggedFeatures | None = None  # the layout chosen
    realised: LoggedRealised | None = None  # a job's realised figures so far (`service.realised`)
    liquid: LoggedLiquid | None = None  # a liquid table's tick: the operation and keys (`service.liquid`)

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> LoggedDecision:
        job = record.get("job")
        features = record.get("features")
        realised = record.get("realised")
        liquid = record.get("liquid")
        return cls(
            str(record["ts"]),
            str(record["table"]),
            str(record["action"]),
            str(record["reason"]),
            version=record.get("version", "?"),
            job=LoggedJob.from_dict(job) if job else None,
            features=LoggedFeatures.from_dict(features) if features else None,
            realised=LoggedRealised.from_dict(realised) if realised else None,
            liquid=LoggedLiquid.from_dict(liquid) if liquid else None,
        )
