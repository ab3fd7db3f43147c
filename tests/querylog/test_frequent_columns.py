"""`optimizer.inspect.frequent_filter_columns`: the same log names the same columns in every process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from optimizer.inspect import frequent_filter_columns
from querylog.records import ScanRecord
from querylog.store import QueryLogTable


def test_columns_filtered_equally_often_come_by_name_whatever_order_the_scans_hold_them(tmp_path: Path):
    now = datetime(2024, 6, 1, tzinfo=UTC)
    scans = [("b = 1", "a > 2"), ("a < 3", "b = 2"), ("c = 1",), ("c = 2",), ("z IN (1)",)]
    for name, order in (("forward", scans), ("reversed", [s[::-1] for s in reversed(scans)])):
        log = QueryLogTable(str(tmp_path / name))
        log.append(
            [ScanRecord(f"q{i}", now - timedelta(minutes=i), "t", f, ("a",), "test") for i, f in enumerate(order)]
        )
        assert frequent_filter_columns(str(tmp_path / name), limit=3) == ["a", "b", "c"]
        assert frequent_filter_columns(str(tmp_path / name), limit=2) == ["a", "b"]  # a, b and c tie: by name
