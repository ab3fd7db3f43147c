"""Workload analysis: candidates from the query log, correlations on a data sample, feature choice."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from optimizer.analysis.analyser import Analysis, CandidateReport, Role, analyse
from optimizer.analysis.context import TableContext, cached_sample
from optimizer.analysis.sample import evaluate

if TYPE_CHECKING:
    from optimizer.table.access import DataFile

__all__ = ["Analysis", "CandidateReport", "Role", "TableContext", "analyse", "analyse_table"]


def analyse_table(context: TableContext, *, files: Sequence[DataFile] | None = None, seed: int = 17) -> Analysis:
    """Analyse the log window ending at ``context.now`` against a sample of `files` (default: all
    active files)."""
    c = context
    snapshot = c.table.snapshot()
    chosen = list(files) if files is not None else list(snapshot.files)
    records = c.log.read(c.table_id, since=c.now - timedelta(seconds=c.thresholds.workload_window), until=c.now)
    with cached_sample(c, snapshot, chosen, seed=seed) as sample:
        evaluator = lambda z, s: evaluate(sample, z, s)  # noqa: E731
        return analyse(c.table_id, records, evaluator, c.thresholds, c.now, locations=c.locations)
