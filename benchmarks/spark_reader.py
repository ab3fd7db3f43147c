"""Spark's own Delta scan as a standard reader: the files and bytes it reads for a filter.

``spark.read.format("delta")`` plans with Delta's data skipping (``PrepareDeltaScan``: partition values
and the log's min/max, ``spark.databricks.delta.stats.skipping``); the executed plan's file scan then
reports ``numFiles`` / ``filesSize``: what it kept. The query runs for real (``max`` of the read
columns), so the counters are the ones of an executed scan, not of a plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SparkScan:
    files: int  # files the Delta scan read
    bytes: int  # their bytes
    total: int  # active files in the table


class SparkDeltaReader:
    """Spark with Delta (the session must have the Delta engine loaded)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def scan(self, path: str, where: str | None, columns: tuple[str, ...] = ()) -> SparkScan:
        from pyspark.sql import functions as F

        table = self.spark.read.format("delta").load(path)
        frame = table.where(where) if where else table
        projection = [F.max(F.col(f"`{c}`")) for c in columns] or [F.count(F.lit(1))]
        frame = frame.agg(*projection)
        frame.collect()
        files = bytes_ = 0
        for node in _nodes(frame._jdf.queryExecution().executedPlan()):
            if node.getClass().getSimpleName() in ("FileSourceScanExec", "BatchScanExec"):
                metrics = node.metrics()
                files += _metric(metrics, "numFiles")
                bytes_ += _metric(metrics, "filesSize")
        return SparkScan(files=files, bytes=bytes_, total=self.total_files(path))

    def total_files(self, path: str) -> int:
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
        return int(detail["numFiles"])


def _nodes(plan: Any) -> Iterator[Any]:
    """Every node of an executed plan, through adaptive execution's wrappers and query stages."""
    name = plan.getClass().getSimpleName()
    if name == "AdaptiveSparkPlanExec":
        yield from _nodes(plan.executedPlan())
        return
    yield plan
    if name.endswith("QueryStageExec"):
        yield from _nodes(plan.plan())
    children = plan.children().iterator()
    while children.hasNext():
        yield from _nodes(children.next())


def _metric(metrics: Any, key: str) -> int:
    return int(metrics.get(key).get().value()) if metrics.contains(key) else 0
