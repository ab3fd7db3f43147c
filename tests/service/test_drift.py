"""Drift: files clustered for an older workload are re-clustered when today's workload gains from it,
within the byte budget, as ordinary verified rewrites."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from pathlib import Path

import pytest

from optimizer.config import Thresholds
from optimizer.service.drift import recluster_budget
from optimizer.service.state import TableState
from querylog.records import ScanRecord
from querylog.store import QueryLogTable
from tests.service.test_service import NOW, log_queries, make_table, write_config


def log_id_ranges(path: str, count: int, at) -> None:  # type: ignore[no-untyped-def]
    """Phase 2 of the workload: narrow ranges on `id`, a column the first layout ignored."""
    QueryLogTable(path).append(
        [
            ScanRecord(
                f"p2-{i}",
                at - timedelta(minutes=i),
                "events",
                (f"id >= {i * 311 % 19000}", f"id < {i * 311 % 19000 + 250}"),
                ("id", "pad"),
                "test",
            )
            for i in range(count)
        ]
    )


def table_rows(spark, path):  # type: ignore[no-untyped-def]
    from optimizer.table import open_table
    from optimizer.table.fingerprint import fingerprint

    table = open_table(path)
    snapshot = table.snapshot()
    return fingerprint(table.read_files(spark, snapshot.files, snapshot))


@pytest.fixture
def drifting(spark, tmp_path):  # type: ignore[no-untyped-def]
    from optimizer.config import load_config
    from optimizer.service.service import context

    table_path = str(tmp_path / "events")
    write_config(tmp_path, [{"name": "events", "path": table_path, "interval": 5}])
    make_table(spark, table_path)
    log_queries(table_path + "_querylog")
    return context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark), table_path


@pytest.mark.spark
def test_old_files_follow_a_moved_workload(drifting, spark, capsys):
    from optimizer.cli import main
    from optimizer.service.tick import tick
    from optimizer.table import open_table

    ctx, table_path = drifting
    settings = ctx.config.tables[0]
    first = tick(settings, ctx, NOW).as_dict()
    assert first["action"] == "optimize" and first["features"]["z"] == ["x"]
    before = table_rows(spark, table_path)

    later = NOW + timedelta(days=8)  # phase 1 has left the workload window
    log_id_ranges(table_path + "_querylog", 60, later)
    record = tick(settings, ctx, later + timedelta(minutes=1)).as_dict()
    assert "too little new data: 0 bytes" not in record["reason"]
    assert record["action"] == "recluster", record.get("recluster")
    assert "id" in record["features"]["z"] and "x" not in record["features"]["z"]
    plan = record["recluster"]
    (group,) = plan["groups"]
    assert group["features"] == 'z=["x"] sop=[]' and group["verdict"].endswith("; chosen")
    assert plan["estimate"]["benefit"]["bytes_per_query_after"] < plan["estimate"]["benefit"]["bytes_per_query_before"]
    assert record["job"]["files_in"] == first["job"]["files_out"]
    assert table_rows(spark, table_path) == before  # same rows, count and both hashes
    history = open_table(table_path).history(record["job"]["version"])
    assert history[-1].operation_parameters.get("dataChange") in (None, False, "false")
    state = ctx.state.load("events")
    assert state.reclustered and state.reclustered[-1][1] == plan["bytes"] > 0
    assert main(["status", "--config", str(Path(table_path).parent / "deltaopt.yaml"), "--json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    (layout,) = status["layouts"]  # every file is now clustered under today's features
    assert layout["current"] and '"id"' in layout["features"] and layout["bytes"] == status["clustered_bytes"]
    assert main(["status", "--config", str(Path(table_path).parent / "deltaopt.yaml")]) == 0
    assert f"    current features: {layout['files']} files, " in capsys.readouterr().out  # the same, for a terminal

    again = tick(settings, ctx, later + timedelta(minutes=2)).as_dict()
    assert again["action"] == "skip"
    assert "estimated since the chosen layout last changed" in again["recluster"]["reason"]


@pytest.mark.spark
def test_a_budget_smaller_than_any_file_rewrites_nothing(drifting):
    from optimizer.service.tick import tick

    ctx, table_path = drifting
    settings = ctx.config.tables[0]
    assert tick(settings, ctx, NOW).as_dict()["action"] == "optimize"
    later = NOW + timedelta(days=8)
    log_id_ranges(table_path + "_querylog", 60, later)
    small = settings.model_copy(
        update={"thresholds": settings.thresholds.model_copy(update={"recluster_bytes_per_tick": 1000})}
    )
    record = tick(small, ctx, later).as_dict()
    assert record["action"] == "skip" and "job" not in record
    assert "larger than this tick's budget" in record["recluster"]["groups"][0]["verdict"]


def test_the_group_laid_out_like_the_current_features_is_not_starved():
    """Checks due every tick (a short recluster_check_interval) and two older layouts always due: each
    group is still estimated within two ticks, the current layout's too (it never was: others came first)."""
    from optimizer.clustering.groups import FileGroup
    from optimizer.service.drift import GROUPS_PER_TICK, _due_groups
    from optimizer.table.access import DataFile

    def group(key: str, size: int) -> FileGroup:
        return FileGroup(key, (DataFile(f"{key}.parquet", size, 1),), ("run",))

    groups = [group("old-a", 10), group("old-b", 20), group("current", 1000)]
    thresholds = Thresholds(recluster_check_interval=60)
    state = TableState("t", current_layout="current", current_layout_since=(NOW - timedelta(hours=1)).isoformat())
    estimated: list[tuple[str, ...]] = []
    for minute in range(0, 60, 10):  # a tick every 10 minutes, the interval is one
        now = NOW + timedelta(minutes=minute)
        checked = tuple(g.key for g in _due_groups(groups, state, thresholds, now)[:GROUPS_PER_TICK])
        estimated.append(checked)
        state = state.with_(recluster_checked={**state.recluster_checked, **dict.fromkeys(checked, now.isoformat())})
    assert set(estimated[0]) == {"old-a", "old-b"}  # suspects never checked since the layout changed come first
    assert "current" in estimated[1]
    for first, second in itertools.pairwise(estimated):
        assert {g.key for g in groups} <= set(first) | set(second)


def test_the_daily_budget_counts_the_last_24_hours():
    thresholds = Thresholds(recluster_bytes_per_tick=600, recluster_bytes_per_day=1000)
    day_ago = NOW - timedelta(days=1)
    state = TableState("t").with_reclustered(NOW - timedelta(hours=30), 900)
    assert recluster_budget(thresholds, state.reclustered_since(day_ago)) == 600  # the 30 h old run no longer counts
    state = state.with_reclustered(NOW - timedelta(hours=2), 700)
    assert [n for _, n in state.reclustered] == [700]  # the ledger drops entries older than a day
    assert recluster_budget(thresholds, state.reclustered_since(day_ago)) == 300
    assert recluster_budget(thresholds, state.with_reclustered(NOW, 400).reclustered_since(day_ago)) == 0


@pytest.mark.spark
def test_re_clustering_continues_across_ticks_within_the_budget(drifting):
    from optimizer.service.tick import tick
    from optimizer.table import open_table

    ctx, table_path = drifting
    settings = ctx.config.tables[0]
    first = tick(settings, ctx, NOW).as_dict()
    assert first["job"]["files_out"] >= 4
    table = open_table(table_path)
    half = sum(f.size for f in table.snapshot().files) // 2
    small = settings.model_copy(
        update={"thresholds": settings.thresholds.model_copy(update={"recluster_bytes_per_tick": half})}
    )
    later = NOW + timedelta(days=8)
    log_id_ranges(table_path + "_querylog", 60, later)
    one = tick(small, ctx, later).as_dict()
    assert one["action"] == "recluster" and 0 < one["recluster"]["bytes"] <= half
    two = tick(small, ctx, later + timedelta(minutes=5)).as_dict()
    assert two["action"] == "recluster", two["recluster"]
    rest = tick(small, ctx, later + timedelta(minutes=10)).as_dict()
    groups = {g["features"]: g for g in rest["recluster"]["groups"]}
    assert 'z=["x"] sop=[]' not in groups or rest["action"] == "recluster", rest["recluster"]
