"""The decision record: what `estimate` decided and every number that went into it, and its reason text.

One module owns the record so the service, the CLI and the decision log read the same fields; the
reason's wording (`basis`, `window_note`) is written here, beside the fields it summarises.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from costmodel.benefit import MB, BenefitEstimate
from costmodel.cost import CostEstimate
from optimizer.features import FeatureSet
from querylog.records import ScanRecord

if TYPE_CHECKING:
    from optimizer.analysis.analyser import Analysis
    from querylog.store import OlderRecords

LISTED_CANDIDATES = 200  # candidate reports a decision record lists (the analysis sorts features first)


class Verdict(StrEnum):
    """What an estimate decided (the tick record's `action` refines it: dry run, lost race, ...)."""

    OPTIMIZE = "optimize"
    SKIP = "skip"


@dataclass(frozen=True)
class Decision:
    table: str
    version: int
    action: Verdict
    reason: str
    new_files: int
    new_bytes: int
    min_new_bytes: int
    net: float | None = None  # benefit - cost, cost units
    cost: CostEstimate | None = None
    benefit: BenefitEstimate | None = None
    features: FeatureSet | None = None  # the layout chosen (None: no features)
    layout: str | None = None  # its name among the layouts compared (None: only one was)
    analysis: dict[str, object] = field(default_factory=dict)
    layouts: list[dict[str, object]] = field(default_factory=list)  # every layout compared, with its numbers
    seconds: dict[str, float] = field(default_factory=dict)
    outside_window: dict[str, object] | None = None  # logged scans older than the workload window
    output: dict[str, object] | None = None  # codec and row groups OPTIMIZE would write with
    search: dict[str, Any] | None = None  # the benefit-driven feature search, candidate by candidate
    key_statistics: dict[str, Any] | None = None  # clustering keys without min/max, and the property change

    @property
    def optimize(self) -> bool:
        return self.action is Verdict.OPTIMIZE

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["benefit"] = self.benefit.as_dict() if self.benefit else None
        data["features"] = self.features.as_dict() if self.features is not None else {}
        return data


def decide(benefit: float, cost: float) -> tuple[Verdict, str]:
    net = benefit - cost
    if net > 0:
        return Verdict.OPTIMIZE, f"benefit {benefit:.1f} exceeds cost {cost:.1f} (net {net:+.1f} cluster-seconds)"
    return Verdict.SKIP, f"benefit {benefit:.1f} does not exceed cost {cost:.1f} (net {net:+.1f} cluster-seconds)"


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


def analysis_summary(analysis: Analysis) -> dict[str, object]:
    """The analysis in the decision record; its candidate list is bounded (features first), so one
    line stays readable whatever the log holds."""
    listed = analysis.candidates[:LISTED_CANDIDATES]
    summary: dict[str, object] = {
        "scans": analysis.scans,
        "malformed_rows": analysis.malformed_rows,
        "sample_rows": analysis.sample_rows,
        "candidates": [{"feature": c.feature, "role": c.role.value, "reason": c.reason} for c in listed],
        "from_joins": analysis.from_joins,  # features that stand for dimension filters, and which
    }
    if len(analysis.candidates) > len(listed):
        summary["candidates_not_listed"] = len(analysis.candidates) - len(listed)
    return summary
