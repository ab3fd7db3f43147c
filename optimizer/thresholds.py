"""A table's thresholds: when the service estimates, what it prices and how the rewrite writes.

One pydantic model (`Thresholds`) under each table's ``thresholds:`` key, re-exported by `optimizer.config`
with the rest of the configuration; `deploy/config.example.yaml` documents every field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from optimizer.config_types import ByteSize, Duration, StrictModel
from optimizer.table.output import OutputSettings

READERS = ("standard", "deltaopt")


def parse_readers(value: Any) -> Any:
    """``standard`` / ``deltaopt`` as one reader taking every query; a mapping gives shares."""
    return {value: 1.0} if isinstance(value, str) else value


def _shares(value: dict[str, float]) -> dict[str, float]:
    unknown = sorted(set(value) - set(READERS))
    if unknown:
        raise ValueError(f"unknown reader(s) {unknown}: readers are {', '.join(READERS)}")
    total = sum(value.values())
    if not value or total <= 0 or any(v < 0 for v in value.values()):
        raise ValueError(f"reader shares must be non-negative and not all zero, got {value}")
    return {k: v / total for k, v in value.items()}


Readers = Annotated[dict[str, float], BeforeValidator(parse_readers)]


class Thresholds(StrictModel):
    """Per-table knobs of the analyser, estimator and clustering job (thesis ch. 4-5 names in brackets)."""

    min_new_bytes: ByteSize = Field(1 << 30, description="unclustered bytes before an estimate is made")
    min_comparison_points: int = Field(5, ge=1, description="theta: distinct literals for a Z candidate")
    min_sop_frequency: float = Field(
        0.05, gt=0, le=1, description="gamma: share of the (weighted) queries a SOP feature must reach"
    )
    max_z_features: int = Field(4, ge=1, le=8, description="Z-order dimensions, SOP id not counted")
    max_sop_features: int = Field(24, ge=1, le=64, description="SOP clustering features")
    max_joined_features: int = Field(
        2,
        ge=0,
        le=4,
        description="dimension attributes filtered through a join that may become Z dimensions of this fact table "
        "(looked up by a join when it is laid out; the estimate compares layouts with and without them); 0: none",
    )
    z_correlation_epsilon: float = Field(0.05, gt=0, lt=0.5, description="epsilon of the sort-index")
    sop_correlation_phi: float = Field(0.8, gt=0, le=1, description="phi: mean-square contingency edge")
    target_file_size: ByteSize = Field(128 << 20, description="size of the files OPTIMIZE writes")
    sample_rows: int = Field(100_000, ge=100, description="rows sampled for correlations and benefit")
    sample_scan_bytes: ByteSize = Field(
        2 << 30,
        description="most new data a decision's sample reads: past it, evenly spaced files in commit order "
        "(at least 8) are read instead of every file; 0: every file",
    )
    cost_per_mb_read: float = Field(
        0.01, gt=0, description="cost units (cluster seconds) to scan one MB; cost model uses the same units"
    )
    workload_window: Duration = Field(7 * 86400, gt=0, description="how far back the analyser reads the log")
    recency_half_life: Duration = Field(
        3 * 86400, gt=0, description="a query this old counts half as much as one issued now"
    )
    benefit_horizon: Duration = Field(
        7 * 86400, gt=0, description="future period over which saved scan bytes are counted"
    )
    log_gap: Duration = Field(
        86400,
        gt=0,
        description="a silence in the log longer than this (and than 20 median inter-arrivals) is time the log "
        "was not recording, left out of the query rate",
    )
    realised_min_jobs: int = Field(
        3,
        ge=0,
        description="once this many of a table's jobs with an estimate were measured on the scans after them, its "
        "new benefit estimates are scaled by what those jobs realised / what their estimates expected (clamped "
        "to 0.25-4x; the record keeps the raw figure); 0: off",
    )
    realised_half_life: float = Field(
        8.0,
        ge=0,
        description="jobs: in that factor, a job's realised and estimated figures weigh half as much once this "
        "many newer jobs with an estimate were measured, so the factor follows what the table's recent jobs "
        "realise when its data or workload change; 0: every job weighs the same for good",
    )
    estimate_compression: bool = Field(
        True, description="write the sample in both layouts to price how much better clustered data compresses"
    )
    sorted_within_files: bool = Field(
        True,
        description="the rewrite sorts each file's rows by its layout, as deltaopt's job does: the estimate then "
        "prices row groups along the layout and the compression of sorted rows; the service sets it off where it "
        "prices Delta's own OPTIMIZE, which sorts within files only with "
        "spark.databricks.io.skipping.mdc.sortWithinFiles (Delta 4.0 and later, off by default)",
    )
    file_count: Literal["nearest", "down"] = Field(
        "nearest",
        description="how the estimate counts the rewrite's output files: bytes / target_file_size to the nearest, "
        "as deltaopt's job always writes them; the service sets it down where it prices Delta's own OPTIMIZE "
        "(max(1, bytes / maxFileSize) per partition, in whole numbers); leave it nearest",
    )
    codec: Literal["zstd", "snappy", "gzip", "lz4", "lz4_raw", "none", "uncompressed"] = Field(
        "zstd", description="Parquet codec OPTIMIZE writes (the table's delta.parquet.compression.codec wins)"
    )
    codec_level: int | None = Field(None, ge=1, le=22, description="codec level (zstd 1-22, gzip 1-9)")
    row_group_size: ByteSize = Field(16 << 20, gt=0, description="Parquet row-group size OPTIMIZE writes")
    stats_for_clustering_keys: bool = Field(
        True,
        description="make the clustering keys' columns collect min/max (extend delta.dataSkippingStatsColumns or "
        "raise delta.dataSkippingNumIndexedCols before the rewrite) so standard readers can skip on them; off: "
        "the estimate prices what standard readers get without them",
    )
    compare_layouts: bool = Field(
        True, description="estimate Z-only, SOP-only and fewer-Z variants too, and keep the best net benefit"
    )
    readers: Readers = Field(
        default_factory=lambda: {"standard": 1.0},
        description="who reads the table: standard (engines that skip files by Delta min/max of bare columns "
        "and row groups by Parquet footers: Spark, Databricks, Trino, DuckDB; docs/READERS.md), deltaopt (reads "
        "through deltaopt's pruning), or shares of both; layouts are scored by the skipping those readers do",
    )
    liquid_key_ticks: int = Field(
        3,
        ge=1,
        description="a liquid table's keys change (liquid: set) only after this many ticks running in which the "
        "workload wanted the same new keys (hysteresis: a stable workload never flaps)",
    )
    liquid_key_margin: float = Field(
        0.2,
        ge=0,
        description="and only when Delta's OPTIMIZE by the new keys nets this share more than by the table's own "
        "(of the larger of that net and 1 cluster-second)",
    )
    selection: Literal["benefit", "frequency"] = Field(
        "benefit",
        description="benefit: theta and gamma only pre-filter candidates and a greedy search adds the one with the "
        "highest estimated marginal net benefit while it pays; frequency: the thesis's gates decide",
    )
    min_candidate_share: float = Field(
        0.01, gt=0, le=1, description="benefit search pre-filter: share of the (weighted) queries a candidate needs"
    )
    search_candidates: int = Field(
        6, ge=1, le=64, description="most Z and most SOP candidates (by frequency) the benefit search estimates"
    )
    search_estimates: int = Field(
        64,
        ge=1,
        description="no new round of the benefit search starts once it has estimated this many layouts (the "
        "first round, one per candidate, always runs; a layout with Z and SOP features is scored in both "
        "orders); the features so far stand (a bound in work, not time: the same features on any load)",
    )
    search_seconds: Duration | None = Field(
        None,
        gt=0,
        description="optional wall-clock bound on the benefit search as well (the choice then depends on the "
        "machine's load); none by default",
    )
    recluster_bytes_per_tick: ByteSize = Field(
        1 << 30,
        description="most bytes of clustered files one tick may re-cluster: files under an older feature set "
        "(drift) or earlier runs merged with new data (0: off)",
    )
    recluster_bytes_per_day: ByteSize = Field(8 << 30, description="most bytes re-clustered per 24 h")
    recluster_check_interval: Duration = Field(
        6 * 3600,
        description="how often files laid out under the latest chosen features are re-estimated for drift "
        "(files under other features are estimated on every tick that does not optimise new data)",
    )

    @field_validator("readers")
    @classmethod
    def _reader_shares(cls, value: dict[str, float]) -> dict[str, float]:
        return _shares(value)

    @property
    def output(self) -> OutputSettings:
        """How OPTIMIZE writes Parquet (before the table's own codec property is applied)."""
        source = "configuration" if "codec" in self.model_fields_set else "default"
        return OutputSettings(self.codec, self.codec_level, self.row_group_size, source)
