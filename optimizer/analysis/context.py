"""What an analysis or an estimate of one table reads, as one value, and its cached data sample.

The analysis, the new-data estimate and the drift step all read the same things (the session, the
table and its identity in the query log, the log, the table's thresholds, the cost model, the time
they decide at) and all analyse a sample that must stay cached while they work and be released after.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from costmodel.benefit import Calibration
from costmodel.cost import DEFAULT_MODEL, CostModel
from optimizer.analysis.sample import sample_frame
from optimizer.config import Thresholds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import DataFile, Snapshot, TableAccess
    from querylog.store import QueryLogTable


@dataclass(frozen=True)
class TableContext:
    spark: SparkSession
    table: TableAccess
    table_id: str  # the table's identity in the query log
    log: QueryLogTable
    thresholds: Thresholds
    now: datetime
    cost_model: CostModel = DEFAULT_MODEL
    locations: Mapping[str, str] = field(default_factory=dict)  # other tables {lower-case name: URI}: dimensions
    calibration: Calibration | None = None  # the table's realised / estimated factor every benefit is scaled by

    def with_thresholds(self, thresholds: Thresholds) -> TableContext:
        return replace(self, thresholds=thresholds)


@contextmanager
def cached_sample(
    context: TableContext, snapshot: Snapshot, files: Sequence[DataFile], *, seed: int = 17
) -> Iterator[DataFrame]:
    """A sample of `files` (`sample_frame`, sized by the thresholds), cached while the block runs."""
    thresholds = context.thresholds
    sample = sample_frame(
        context.spark,
        context.table,
        snapshot,
        files,
        thresholds.sample_rows,
        seed=seed,
        scan_bytes=thresholds.sample_scan_bytes,
    ).cache()
    try:
        yield sample
    finally:
        sample.unpersist()
