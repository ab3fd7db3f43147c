"""Workload analysis: candidates from the query log, correlations on a data sample, feature choice."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from optimizer.analysis.analyser import Analysis, CandidateReport, Role, analyse
from optimizer.analysis.sample import evaluate, sample_frame
from optimizer.config import Thresholds

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import DataFile, TableAccess
    from querylog.store import QueryLogTable

__all__ = ["Analysis", "CandidateReport", "Role", "analyse", "analyse_table"]


def analyse_table(
    spark: SparkSession,
    table: TableAccess,
    table_id: str,
    log: QueryLogTable,
    thresholds: Thresholds,
    now: datetime,
    files: Sequence[DataFile] | None = None,
    seed: int = 17,
) -> Analysis:
    """Analyse the log window ending at `now` against a sample of `files` (default: all active files)."""
    snapshot = table.snapshot()
    chosen = list(files) if files is not None else list(snapshot.files)
    records = log.read(table_id, since=now - timedelta(seconds=thresholds.workload_window), until=now)
    sample = sample_frame(
        spark, table, snapshot, chosen, thresholds.sample_rows, seed, thresholds.sample_scan_bytes
    ).cache()
    try:
        return analyse(table_id, records, lambda z, s: evaluate(sample, z, s), thresholds, now)
    finally:
        sample.unpersist()
