"""The decisions table: rows committed in batches (one commit for many ticks), the operator columns
predictive optimization's history has, and tables written before those columns existed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from optimizer.service.decisions import DecisionLog

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


def record(table: str, at: datetime, action: str = "skip", **extra: object) -> dict[str, object]:
    return {"ts": at.isoformat(), "table": table, "path": f"/lake/{table}", "action": action, "reason": "r", **extra}


def test_many_ticks_one_commit_and_every_line_at_once(tmp_path):
    decisions = DecisionLog(str(tmp_path / "d.jsonl"), str(tmp_path / "decisions"), flush_seconds=3600)
    for i in range(50):
        decisions.write(record(f"t{i % 7}", NOW + timedelta(seconds=i)))
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 50  # the file has every line at once
    table = DeltaTable(str(tmp_path / "decisions"))
    assert table.version() == 0 and table.to_pyarrow_table().num_rows == 1  # the first row commits at once
    assert len(decisions.read(last=100)) == 50  # rows not yet committed are read too
    assert decisions.flush() == 49 and decisions.flush() == 0
    table = DeltaTable(str(tmp_path / "decisions"))
    assert table.version() == 1 and table.to_pyarrow_table().num_rows == 50
    decisions.write(record("t0", NOW), table=False)  # a repeated verdict: the file only
    assert decisions.flush() == 0 and len(decisions.read(last=100)) == 50


def test_rows_carry_what_predictive_optimization_history_does(tmp_path):
    decisions = DecisionLog(str(tmp_path / "d.jsonl"), str(tmp_path / "decisions"))
    job = {
        "run_id": "abc",
        "files_in": 6,
        "bytes_in": 1000,
        "files_out": 1,
        "bytes_out": 900,
        "rows": 20,
        "seconds": 4.5,
    }
    decisions.write(
        record(
            "sales",
            NOW,
            "optimize",
            job=job,
            cost={"seconds": 3.0},
            benefit={"benefit": 50.0},
            net=47.0,
            tick_seconds=5.0,
        )
    )
    decisions.write(record("quiet", NOW, "deferred", cost={"seconds": 2.0}, net=9.0))
    decisions.write(record("idle", NOW))
    decisions.flush()
    rows = {r["table_name"]: r for r in DeltaTable(str(tmp_path / "decisions")).to_pyarrow_table().to_pylist()}
    done = rows["sales"]
    assert done["operation_type"] == "CLUSTERING" and done["operation_status"] == "SUCCESSFUL"
    assert done["operation_id"] == "abc" and done["usage_unit"] == "CLUSTER_SECONDS" and done["usage_quantity"] == 4.5
    assert dict(done["operation_metrics"])["number_of_compacted_files"] == "6"
    assert done["cost"] == 3.0 and done["benefit"] == 50.0 and done["estimated_net_benefit"] == 47.0
    assert done["end_time"] - done["start_time"] == timedelta(seconds=5)
    assert rows["quiet"]["operation_status"] == "DEFERRED" and rows["quiet"]["usage_quantity"] is None
    assert rows["idle"]["operation_type"] is None and json.loads(rows["idle"]["record"])["action"] == "skip"


def test_a_table_written_before_the_operator_columns_gains_them(tmp_path):
    old = pa.schema(
        [
            ("ts", pa.timestamp("us", tz="UTC")),
            ("table", pa.string()),
            ("action", pa.string()),
            ("reason", pa.string()),
            ("record", pa.string()),
        ]
    )
    line = json.dumps(record("t", NOW))
    write_deltalake(
        str(tmp_path / "decisions"),
        pa.Table.from_pylist([{"ts": NOW, "table": "t", "action": "skip", "reason": "r", "record": line}], schema=old),
    )
    decisions = DecisionLog(str(tmp_path / "d.jsonl"), str(tmp_path / "decisions"))
    decisions.write(record("t", NOW + timedelta(minutes=1), "optimize", job={"run_id": "x", "seconds": 1.0}))
    data = DeltaTable(str(tmp_path / "decisions")).to_pyarrow_table()
    assert data.num_rows == 2 and "operation_status" in data.column_names
    assert [r["action"] for r in decisions.read("t")] == ["skip", "optimize"]


def test_an_unwritable_table_keeps_its_rows_for_the_next_flush(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    decisions = DecisionLog(str(tmp_path / "d.jsonl"), str(blocked / "decisions"))
    decisions.write(record("t", NOW))
    assert decisions.flush() == 0 and len(decisions._pending) == 1
    blocked.unlink()
    assert decisions.flush() == 1
