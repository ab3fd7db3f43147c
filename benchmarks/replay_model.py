"""What the replay measures, shared by the benchmark that fills it (`replay_bench`) and the report that
reads it (`replay_report`): the strategies and tables, and the result's dataclasses. Kept apart so the
report imports only this, never the benchmark (no import circle)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STRATEGIES = ("none", "expert z_order", "deltaopt optimize", "deltaopt service")
TABLES = ("lineitem", "orders")


@dataclass
class ScanResult:
    """One scan of one query on one strategy's copy."""

    strategy: str
    batch: int
    phase: int
    table: str
    template: str
    seconds: float  # Spark: read() over the kept files, filter and aggregate the read columns
    files_kept: int  # deltaopt's pruning
    files_total: int
    bytes_read: int  # column bytes of the kept files (deltaopt's pruning)
    standard_files: int | None  # DuckDB's Delta extension (None: the extension failed on the filter)
    rows: int  # rows Spark matched over the kept files
    reference_rows: int  # rows matched over every file
    reference: str  # "duckdb" or "spark" (the extension failed)
    lower_bound: float  # bytes of the matching rows' read columns


@dataclass
class BatchTimes:
    """Seconds one strategy spent around one batch."""

    insert: float = 0.0
    optimize: float = 0.0  # rewriting (OPTIMIZE jobs, z_order)
    decide: float = 0.0  # analysis and estimation (the service's ticks besides their jobs; the manual analysis)
    query: float = 0.0

    @property
    def total(self) -> float:
        return self.insert + self.optimize + self.decide + self.query


@dataclass
class Replay:
    scale: float
    batches: int
    per_batch: int
    drift_at: int
    halfway: int
    scans: list[ScanResult] = field(default_factory=list)
    times: dict[str, list[BatchTimes]] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)  # the service's tick records, brief
    rows: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # strategy -> table -> (rows, hash)
    seconds: float = 0.0
    standard_errors: dict[str, int] = field(default_factory=dict)  # DuckDB extension failures by message
