"""Small workloads and file statistics the estimate's tests share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from optimizer.skipping.filestats import Bounds, FileStats
from querylog.records import ScanRecord

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def records(*filters, count=1, age=timedelta(hours=1)):
    return [ScanRecord(f"q{i}", NOW - age, "t", tuple(filters), ("x",), "test") for i in range(count)]


def files(ranges):
    return [FileStats(f"f{i}", 100, {"x": Bounds("number", low, high, 0)}) for i, (low, high) in enumerate(ranges)]


def sizes(stats):
    return {s.path: {"x": 1e6, "y": 4e6} for s in stats}
