"""The benefit of a layout: workload bytes saved on the data it would rewrite, in cost units (5.2).

Per query of the workload window (its filters and the columns it reads):

* **before**: the bytes it reads from the files to be rewritten, pruned with their *current*
  statistics and measured from their Parquet footers (the thesis assumed no skipping at all here, its
  stated source of error);
* **after**: the share of bytes it reads from the virtual files of the clustered sample, times the
  same files' bytes as the new layout would store them: clustered data compresses differently
  (usually better), a change every query gets, filtered or not. `Compression` holds per-column ratios
  measured by scratch writes (`optimizer.estimate.stored_bytes`); without one, bytes per row stay as they
  are.

**Readers.** Standard engines (Spark with Delta, Databricks, Trino, DuckDB) skip files with the Delta
log's min/max of bare columns only; deltaopt's pruning also uses expression min/max and SOP bits.
The estimate is made for each kind of reader, with the statistics it uses, and `combine` weighs them
by the table's reader shares: a layout's value is what the table's readers will see of it.

The saving splits into a **skipping** term (files pruned) and a **compression** term (fewer bytes in
the files still read); both are reported. Queries count with the same recency weights as the
analysis. The saving per future query is the weighted mean of before - after; the number of future
queries is the recency-weighted rate measured over the period the log covered (`costmodel.rate`) times
the benefit horizon. Benefit = queries * MB saved per query * cost per MB.

**Calibration.** What a table's committed jobs realised on the scans after them, against what their
estimates said those scans would save, is a measured correction for the next estimate of the same
table (as the cost model uses measured seconds): `realised_factor` turns the running sums into a
factor, and `calibrated` scales a benefit by it, keeping the raw figure beside it.

This module holds the figures and their arithmetic; the replay that decides which files each query
keeps (it needs the pruning) is `optimizer.estimate.replay`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

from costmodel.rate import QueryRate

MB = 1e6
CALIBRATION_BOUNDS = (0.25, 4.0)  # a factor outside them is clamped: no table is silenced or forced


@dataclass(frozen=True)
class Compression:
    """How the new layout changes stored bytes, per column: bytes after / bytes before, the product
    of a compaction term (file size, codec, writer) and a clustering term (row order); see
    `optimizer.estimate.stored_bytes` for how each is measured."""

    ratios: Mapping[str, float]
    codec_before: str | None
    codec_after: str | None
    sample_bytes_before: int  # the sample in current order, as the job would write it
    sample_bytes_after: int  # the sample in the layout's order
    compaction: Mapping[str, float] = field(default_factory=dict)
    clustering: Mapping[str, float] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)  # column bytes the overall ratios weigh by

    @property
    def ratio(self) -> float:
        """Overall ratio, columns weighted by `weights` (equally when there are none)."""
        return _weighted(self.ratios, self.weights)

    @property
    def compaction_ratio(self) -> float:
        """The compaction term over all columns, weighted as `ratio`."""
        return _weighted(self.compaction, self.weights)

    @property
    def clustering_ratio(self) -> float:
        """The clustering term over all columns, weighted as `ratio`."""
        return _weighted(self.clustering, self.weights)

    def as_dict(self) -> dict[str, object]:
        return {
            "ratio": round(self.ratio, 4),
            "compaction": round(self.compaction_ratio, 4),
            "clustering": round(self.clustering_ratio, 4),
            "codec_before": self.codec_before,
            "codec_after": self.codec_after,
            "sample_bytes_before": self.sample_bytes_before,
            "sample_bytes_after": self.sample_bytes_after,
            "ratios": {c: round(r, 4) for c, r in sorted(self.ratios.items())},
        }


def _weighted(ratios: Mapping[str, float], weights: Mapping[str, float]) -> float:
    if not ratios:
        return 1.0
    weight = {c: weights.get(c, 0.0) if weights else 1.0 for c in ratios}
    total = sum(weight.values())
    return sum(r * weight[c] for c, r in ratios.items()) / total if total else 1.0


@dataclass(frozen=True)
class Calibration:
    """A table's measured correction of its benefit estimates (`realised_factor`): the factor, the jobs
    with an estimate it is based on, and, on a calibrated benefit, the estimate's own figure."""

    factor: float
    jobs: int
    raw_benefit: float | None = None  # the benefit before scaling (set by `calibrated`)

    def as_dict(self) -> dict[str, object]:
        return {"factor": self.factor, "jobs": self.jobs, "raw_benefit": self.raw_benefit}


def realised_factor(estimated: float, realised: float, jobs: int, *, min_jobs: int) -> float | None:
    """The factor to scale a table's new benefit estimates by: realised / estimated over the scans
    measured after its jobs (1 / the estimated-to-realised ratio), from `jobs` jobs that had an estimate.

    Why: the estimate prices virtual files of a sample and a projected query rate; what the table's
    jobs then saved on real scans is the measurement that corrects it, as measured seconds calibrate
    the cost model. None (no correction) below `min_jobs` jobs, where a few scans would decide, when
    `min_jobs` is 0 (off), or when the estimates expected no saving (nothing to scale). Clamped to
    `CALIBRATION_BOUNDS` so that one odd measurement (a job whose scans all missed its files, a
    burst of scans that happened to hit) can neither silence a table's jobs nor force them. None too
    when a sum is not a finite number (a damaged state file): a nan factor would make every benefit
    nan and every verdict a skip, an infinite one would pass for a clamped measurement."""
    if min_jobs <= 0 or jobs < min_jobs or not (math.isfinite(estimated) and math.isfinite(realised)):
        return None
    if estimated <= 0:
        return None
    low, high = CALIBRATION_BOUNDS
    return round(min(max(realised / estimated, low), high), 4)


def calibrated(benefit: BenefitEstimate, calibration: Calibration | None) -> BenefitEstimate:
    """`benefit` with its `benefit` figure scaled by `calibration`'s factor and the raw figure kept in
    its `calibration` (the parts, byte figures and readers' figures stay the estimate's own: what a
    realised measurement compares with). Unchanged without a calibration; idempotent."""
    if calibration is None:
        return benefit
    raw = benefit.raw_benefit
    kept = replace(calibration, raw_benefit=raw)
    return replace(benefit, benefit=round(raw * calibration.factor, 4), calibration=kept)


@dataclass(frozen=True)
class BenefitEstimate:
    queries_in_window: int
    expected_queries: float  # over the benefit horizon
    bytes_per_query_before: float  # weighted mean over the workload, measured on the current files
    bytes_per_query_after: float  # estimated on the virtual files, compression change included
    bytes_per_query_total: float  # what a query would read without any skipping
    saved_mb_per_query: float
    benefit: float  # cost units (cluster seconds)
    sample_rows: int
    virtual_files: int
    seconds: float
    bytes_per_query_after_skipping: float | None = None  # after, at today's bytes per row
    benefit_skipping: float = 0.0  # the part of `benefit` from files pruned
    benefit_compression: float = 0.0  # the part from fewer bytes in the files still read
    rate: QueryRate | None = None
    compression: Compression | None = None
    readers: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # reader -> its figures and share
    calibration: Calibration | None = None  # the table's correction `benefit` is scaled by (None: none)

    @property
    def raw_benefit(self) -> float:
        """The estimate's own benefit, before any calibration: what realised figures compare with."""
        if self.calibration is not None and self.calibration.raw_benefit is not None:
            return self.calibration.raw_benefit
        return self.benefit

    @property
    def p_before(self) -> float:
        return self.bytes_per_query_before / self.bytes_per_query_total if self.bytes_per_query_total else 1.0

    @property
    def p_after(self) -> float:
        return self.bytes_per_query_after / self.bytes_per_query_total if self.bytes_per_query_total else 1.0

    def as_dict(self) -> dict[str, object]:
        skipped = ("rate", "compression", "readers", "calibration")
        data = {k: v for k, v in asdict(self).items() if k not in skipped}
        calibration = {"calibration": self.calibration.as_dict()} if self.calibration is not None else {}
        return {
            **data,
            "rate": self.rate.as_dict() if self.rate else None,
            "compression": self.compression.as_dict() if self.compression else None,
            "p_before": round(self.p_before, 4),
            "p_after": round(self.p_after, 4),
            "readers": {name: dict(figures) for name, figures in self.readers.items()},
            **calibration,  # only when a factor applied: records without one are as they were
        }


_WEIGHED = (
    "bytes_per_query_before",
    "bytes_per_query_after",
    "bytes_per_query_total",
    "saved_mb_per_query",
    "benefit",
    "bytes_per_query_after_skipping",
    "benefit_skipping",
    "benefit_compression",
)


def combine(by_reader: Mapping[str, BenefitEstimate], shares: Mapping[str, float]) -> BenefitEstimate:
    """One estimate for the table's mix of readers: each figure of `_WEIGHED` is the share-weighted
    mean of the readers' figures (readers without a share are reported, weighing nothing)."""
    weights = {name: shares.get(name, 0.0) for name in by_reader}
    total = sum(weights.values())
    if total <= 0:
        raise ValueError(f"no estimate for any reader with a share: {sorted(shares)} vs {sorted(by_reader)}")
    first = next(iter(by_reader.values()))
    mixed = {
        name: round(sum(weights[r] * float(getattr(e, name) or 0.0) for r, e in by_reader.items()) / total, 4)
        for name in _WEIGHED
    }
    readers = {
        name: {
            "share": round(weights[name] / total, 4),
            "bytes_per_query_before": e.bytes_per_query_before,
            "bytes_per_query_after_skipping": e.bytes_per_query_before
            if e.bytes_per_query_after_skipping is None
            else e.bytes_per_query_after_skipping,
            "bytes_per_query_after": e.bytes_per_query_after,
            "benefit": e.benefit,
        }
        for name, e in by_reader.items()
    }
    seconds = round(sum(e.seconds for e in by_reader.values()), 3)
    return replace(first, **mixed, readers=readers, seconds=seconds)  # type: ignore[arg-type]


def recompressed(
    column_bytes: Mapping[str, Mapping[str, float]], ratios: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """`column_bytes` as the new layout would store them: each column times its ratio."""
    return {path: {c: v * ratios.get(c, 1.0) for c, v in sizes.items()} for path, sizes in column_bytes.items()}
