"""What ticks share: the service's context (configuration, Spark, state, decisions, the fleet queue).

What one tick decides lives in `service.draft`: this module imports neither the tick nor the job."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from costmodel.cost import CostModel
from optimizer.catalog import table_locations
from optimizer.config import Config, TableSettings
from optimizer.service.decisions import DecisionLog
from optimizer.service.executors import Executor
from optimizer.service.fleet import FleetQueue
from optimizer.service.metrics import Metrics
from optimizer.service.record import TickRecord
from optimizer.service.remote import choose_executor
from optimizer.service.state import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import Commit

ExecutorChooser = Callable[[TableSettings, "list[Commit]"], tuple[Executor, str]]


@dataclass
class ServiceContext:
    """What ticks share: configuration, the service's Spark, state, decisions, cost model, the fleet
    queue (job slots and budget) and the estimate slots."""

    config: Config
    spark: Callable[[], SparkSession]
    state: StateStore
    decisions: DecisionLog
    cost_model: CostModel
    queue: FleetQueue = field(default_factory=FleetQueue)
    estimate_slots: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(2))
    stopping: threading.Event = field(default_factory=threading.Event)
    choose: ExecutorChooser | None = None  # tests inject executors; default: choose_executor
    metrics: Metrics | None = None
    _locations: dict[str, str] | None = None

    def log(self, record: TickRecord, table: bool = True) -> None:
        """Write a record: the decision log (and with `table` the decisions table), and the metrics."""
        self.decisions.write(record.as_dict(), table=table)
        if self.metrics is not None:
            self.metrics.observe(record)

    def locations(self) -> dict[str, str]:
        """Where the configured tables and those under ``schemas.locations`` are (listed once per
        service: the dimensions joined features read)."""
        if self._locations is None:
            self._locations = table_locations(self.config)
        return self._locations

    def executor_for(self, table: TableSettings, commits: list[Commit]) -> tuple[Executor, str]:
        if self.choose is not None:
            return self.choose(table, commits)
        return choose_executor(self.config.execution, commits, self.spark, self.config.spark)
