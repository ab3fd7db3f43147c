"""The flow benchmark's records (`benchmarks.flow_bench` runs it, `benchmarks.flow_report` renders it): a
scenario, the files' granularity, and what one tick measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
STEP = timedelta(hours=1)
HELD_OUT = 100


@dataclass(frozen=True)
class Scenario:
    name: str
    rate: float  # queries per simulated hour
    filtered: bool
    expect: str  # what the service should do, for the report
    history_hours: float = 0.0  # the log already holds this much of the stream when the appends start
    peers: bool = False  # race Delta's ZORDER BY and liquid clustering on this stream


@dataclass(frozen=True)
class Granularity:
    """How fine every copy's files and row groups are (issue 48's race at a production table's granularity
    relative to its data): the target file size (None: a sixth of an append, at least 1 MiB), row groups per
    target file for every writer (Parquet's ``parquet.block.size`` in the session, deltaopt's
    ``row_group_size``; None: each writer's default), and the session's Parquet codec (None: Spark's)."""

    target: int | None = None
    row_groups: int | None = None
    codec: str | None = None


@dataclass
class Tick:
    step: int
    decision: dict[str, Any]
    tick_seconds: float
    manual_seconds: float | None = None  # the manual OPTIMIZE job's wall time
    manual_features: dict[str, Any] | None = None
    bytes_per_query: dict[str, float] = field(default_factory=dict)  # copy -> held-out mean, deltaopt pruning
    standard_bytes_per_query: dict[str, float] = field(default_factory=dict)  # Delta min/max only
    files: dict[str, tuple[float, int]] = field(default_factory=dict)  # copy -> (mean files kept, files)
    estimated_after: float | None = None  # the service's estimate, bytes per query on the rewritten files
    measured_after: float | None = None  # the same workload on the files the run wrote
    manual_saved_mb: float | None = None  # marginal MB saved per held-out query by this tick's manual run
    manual_benefit: float | None = None  # that saving over the horizon at the true rate, cost units
    pays_off: bool | None = None
    service_seconds: float | None = None  # the service's own job, when it optimised
    service_rewrite: dict[str, Any] | None = None  # bytes in / out of its job, and whether it rewrote clustered data
    peer_rewrites: dict[str, Any] = field(default_factory=dict)  # peer name -> its OPTIMIZE after this append
    service_benefit: float | None = None  # its realised saving (before - measured after) at the true rate
