"""The decision record: what `estimate` decided and every number that went into it, and its reason text.

One module owns the record so the service, the CLI and the decision log read the same fields; the
reason's wording (`basis`, `window_note`) is written here, beside the fields it summarises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from costmodel.benefit import MB, BenefitEstimate, Calibration
from costmodel.cost import CostEstimate
from optimizer.features import FeatureSet
from optimizer.verdict import Verdict
from querylog.records import ScanRecord

if TYPE_CHECKING:
    from optimizer.analysis.analyser import Analysis
    from optimizer.analysis.search import SearchResult
    from optimizer.table.output import OutputSettings
    from querylog.store import OlderRecords

LISTED_CANDIDATES = 200  # candidate reports a decision record lists (the analysis sorts features first)


@dataclass(frozen=True)
class NewData:
    """What every decision states whatever it decides (the estimate's first step): the version read,
    the new files against the threshold, the writer settings a job would use, and the logged scans the
    workload window leaves out (None when the log was not read: too little new data)."""

    table: str
    version: int
    new_files: int
    new_bytes: int
    min_new_bytes: int
    output: OutputSettings | None = None  # codec and row groups OPTIMIZE would write with
    outside_window: OlderRecords | None = None  # logged scans older than the workload window


@dataclass(frozen=True)
class ListedCandidate:
    """One candidate of the analysis as the record lists it (its fate, not its figures)."""

    feature: str
    role: str
    reason: str


@dataclass(frozen=True)
class AnalysisSummary:
    """The analysis in the decision record; its candidate list is bounded (features first), so one
    line stays readable whatever the log holds."""

    scans: int
    malformed_rows: int
    sample_rows: int
    candidates: tuple[ListedCandidate, ...]
    from_joins: Mapping[str, Mapping[str, object]]  # features that stand for dimension filters, and which
    not_listed: int = 0  # candidates past LISTED_CANDIDATES

    @classmethod
    def of(cls, analysis: Analysis) -> AnalysisSummary:
        listed = analysis.candidates[:LISTED_CANDIDATES]
        return cls(
            analysis.scans,
            analysis.malformed_rows,
            analysis.sample_rows,
            tuple(ListedCandidate(c.feature, c.role.value, c.reason) for c in listed),
            analysis.from_joins,
            len(analysis.candidates) - len(listed),
        )

    def as_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "scans": self.scans,
            "malformed_rows": self.malformed_rows,
            "sample_rows": self.sample_rows,
            "candidates": [asdict(c) for c in self.candidates],
            "from_joins": {k: dict(v) for k, v in self.from_joins.items()},
        }
        if self.not_listed:
            data["candidates_not_listed"] = self.not_listed
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnalysisSummary:
        """The section read back from a record (older records may lack the later keys)."""
        candidates = data.get("candidates") or []
        return cls(
            int(data.get("scans", 0)),
            int(data.get("malformed_rows", 0)),
            int(data.get("sample_rows", 0)),
            tuple(ListedCandidate(str(c["feature"]), str(c["role"]), str(c["reason"])) for c in candidates),
            dict(data.get("from_joins") or {}),
            int(data.get("candidates_not_listed", 0)),
        )


@dataclass(frozen=True)
class LayoutSummary:
    """One layout the estimate compared, with its figures (`LayoutEstimate.summary`)."""

    layout: str  # its name: "as analysed", "Z-order only", ...
    z: tuple[str, ...]
    joined: tuple[str, ...]  # joined features' helper columns (the key only when there are some)
    sop: tuple[str, ...]
    cost: float
    benefit: float
    net: float
    p_after: float

    def as_dict(self) -> dict[str, object]:
        return {
            "layout": self.layout,
            "z": list(self.z),
            **({"joined": list(self.joined)} if self.joined else {}),
            "sop": list(self.sop),
            "cost": self.cost,
            "benefit": self.benefit,
            "net": self.net,
            "p_after": self.p_after,
        }


@dataclass(frozen=True)
class KeyStatistics:
    """Clustering keys without min/max statistics, and the property change that adds them
    (`optimizer.table.key_stats.key_statistics`)."""

    columns: tuple[str, ...]
    properties: Mapping[str, str]  # empty: off, or no sound change
    enabled: bool  # stats_for_clustering_keys

    def as_dict(self) -> dict[str, object]:
        return {"columns": list(self.columns), "properties": dict(self.properties), "enabled": self.enabled}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeyStatistics:
        properties = data.get("properties") or {}
        return cls(tuple(data["columns"]), {str(k): str(v) for k, v in properties.items()}, bool(data["enabled"]))


@dataclass(frozen=True)
class Decision:
    new: NewData
    action: Verdict
    reason: str
    net: float | None = None  # benefit - cost, cost units
    cost: CostEstimate | None = None
    benefit: BenefitEstimate | None = None
    features: FeatureSet | None = None  # the layout chosen (None: no features)
    layout: str | None = None  # its name among the layouts compared (None: only one was)
    analysis: AnalysisSummary | None = None
    layouts: tuple[LayoutSummary, ...] = ()  # every layout compared, with its numbers
    seconds: Mapping[str, float] = field(default_factory=dict)
    search: SearchResult | None = None  # the benefit-driven feature search, candidate by candidate
    key_statistics: KeyStatistics | None = None  # clustering keys without min/max, and the property change

    @property
    def optimize(self) -> bool:
        return self.action is Verdict.OPTIMIZE

    @property
    def table(self) -> str:
        return self.new.table

    @property
    def version(self) -> int:
        return self.new.version

    @property
    def new_files(self) -> int:
        return self.new.new_files

    @property
    def new_bytes(self) -> int:
        return self.new.new_bytes

    @property
    def min_new_bytes(self) -> int:
        return self.new.min_new_bytes

    @property
    def outside_window(self) -> OlderRecords | None:
        return self.new.outside_window

    def as_dict(self) -> dict[str, Any]:
        """The record's JSON object: every key, in the order earlier versions wrote them."""
        new = self.new
        return {
            "table": new.table,
            "version": new.version,
            "action": self.action,
            "reason": self.reason,
            "new_files": new.new_files,
            "new_bytes": new.new_bytes,
            "min_new_bytes": new.min_new_bytes,
            "net": self.net,
            "cost": asdict(self.cost) if self.cost is not None else None,
            "benefit": self.benefit.as_dict() if self.benefit else None,
            "features": self.features.as_dict() if self.features is not None else {},
            "layout": self.layout,
            "analysis": self.analysis.as_dict() if self.analysis is not None else {},
            "layouts": [layout.as_dict() for layout in self.layouts],
            "seconds": dict(self.seconds),
            "outside_window": new.outside_window.as_dict() if new.outside_window is not None else None,
            "output": new.output.as_dict() if new.output is not None else None,
            "search": self.search.as_dict() if self.search is not None else None,
            "key_statistics": self.key_statistics.as_dict() if self.key_statistics is not None else None,
        }


def decide(benefit: float, cost: float, *, calibration: Calibration | None = None) -> tuple[Verdict, str]:
    """The verdict on `benefit` (already scaled by `calibration`, when one applied) against `cost`; the
    reason names the raw estimate and the factor, so an operator sees why a job was or was not run."""
    net = benefit - cost
    figure = f"benefit {benefit:.1f}{calibration_note(calibration)}"
    if net > 0:
        return Verdict.OPTIMIZE, f"{figure} exceeds cost {cost:.1f} (net {net:+.1f} cluster-seconds)"
    return Verdict.SKIP, f"{figure} does not exceed cost {cost:.1f} (net {net:+.1f} cluster-seconds)"


def calibration_note(calibration: Calibration | None) -> str:
    """What the reason says of a calibrated benefit: the estimate's own figure and the factor (none
    without a calibration, so records made without one read as before)."""
    if calibration is None or calibration.raw_benefit is None:
        return ""
    return (
        f" (estimate {calibration.raw_benefit:.1f} x{calibration.factor:.2f}, this table's realised/estimated "
        f"over {calibration.jobs} jobs)"
    )


def basis(benefit: BenefitEstimate) -> str:
    """The figures behind a benefit, in words an operator can check."""
    rate = benefit.rate
    measured = (
        f"{rate.per_day:,.0f} queries/day measured over {rate.covered_seconds / 3600:,.1f} h of log"
        if rate is not None
        else "query rate unknown"
    )
    c = benefit.compression
    compression = (
        f"; stored bytes x{c.ratio:.2f} ({c.codec_before} -> {c.codec_after}, compaction and clustering)"
        if c is not None
        else ""
    )
    readers = "; ".join(
        f"{name} readers ({figures['share']:.0%}) {figures['bytes_per_query_before'] / MB:,.2f} -> "
        f"{figures['bytes_per_query_after'] / MB:,.2f}"
        for name, figures in benefit.readers.items()
    )
    return (
        f"{benefit.expected_queries:,.0f} queries expected ({measured}); "
        f"{benefit.bytes_per_query_before / MB:,.2f} -> {benefit.bytes_per_query_after / MB:,.2f} MB per query"
        + (f" ({readers})" if readers else "")
        + compression
    )


def window_note(older: OlderRecords, records: Sequence[ScanRecord]) -> str:
    """What the window left out, when that may be why there is nothing to decide on."""
    if not older.count:
        return ""
    first = older.first.isoformat() if older.first else "?"
    last = older.last.isoformat() if older.last else "?"
    return f" ({len(records)} scans in the window; {older.count} older scans, {first} .. {last}, are outside it)"
