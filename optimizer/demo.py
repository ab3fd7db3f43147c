"""``deltaopt demo``: the service's main job on a TPC-H lineitem table with embedded Spark.

1. generate lineitem with ``tpchgen-cli`` in increments and load the first half as small files, the way
   a streaming writer leaves a table;
2. record a workload through the query recorder (range filters with changing literals plus fixed
   complex predicates) into the table's query log;
3. run service ticks: the first finds the unclustered data, analyses the workload, estimates cost and
   benefit and optimises; then new increments and new queries arrive and the next tick optimises only
   the new data; a last tick finds nothing new;
4. show the decisions, the table, and what a few queries now skip.

Everything lands under the work directory; the last lines say where the decision log is.
"""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from optimizer import tpch
from optimizer.config import load_config
from optimizer.inspect import human_bytes, render, table_info
from optimizer.runtime import build_session, runtime_info
from optimizer.service.record import TickRecord
from optimizer.table import TableAccess, open_table


def _say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def load_part(spark, table, part_file: Path, files_per_part: int = 4):
    """Append one generated lineitem increment as `files_per_part` small files (like a streaming writer)."""
    df = spark.read.parquet(str(part_file)).repartition(files_per_part)
    if not table.exists():
        return table.create(spark, df, metadata={"source": "deltaopt demo", "part": part_file.name})
    snapshot = table.snapshot()
    staged = table.stage(spark, df, snapshot, "data")
    table.append(staged, snapshot, {"source": "deltaopt demo", "part": part_file.name})
    return table.snapshot()


def write_config(root: Path, table_path: Path) -> Path:
    """The demo's configuration: the example's keys, sized for a laptop-scale table."""
    config = {
        "spark": {"master": "local[*]", "shuffle_partitions": 8},
        "defaults": {
            "min_new_bytes": "4MiB",
            "target_file_size": "1MiB",
            "sample_rows": 50000,
            "min_sop_frequency": 0.05,
            "cost_per_mb_read": 0.05,
            "benefit_horizon": "30d",
        },
        "tables": [{"name": "lineitem", "path": str(table_path), "interval": "1m"}],
        "service": {"state_dir": str(root / "state"), "jitter": 0},
        "logging": {"level": "INFO"},
    }
    path = root / "deltaopt.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def record_workload(log_path: str, spill: Path, count: int, seed: int, now: datetime) -> None:
    """Queries reach the log the way applications send them: through the recorder's spill and flush."""
    from querylog.recorder import Recorder
    from querylog.store import QueryLogTable

    with Recorder(QueryLogTable(log_path), spill, capacity=200) as recorder:
        for i, sql in enumerate(tpch.lineitem_queries(count, seed=seed)):
            recorder.record_sql(sql, ts=now - timedelta(minutes=count - i))


def _show(record: TickRecord) -> None:
    _say(f"tick: {record.action.upper()} - {record.reason}")
    outcome = record.job.outcome if record.job is not None else None
    if record.job is not None and outcome is not None:
        _say(
            f"  job ({record.job.executor}): {outcome.files_in} files -> {outcome.files_out} files, "
            f"{human_bytes(outcome.bytes_in)} -> {human_bytes(outcome.bytes_out)}, committed v{outcome.version}"
        )
    features = record.features
    if features:
        _say(f"  features: Z={features['z']} SOP={features['sop']}")
    if record.recluster is not None and not record.reclustered:
        _say(f"  old data: {record.recluster.reason}")


def run_demo(workdir: str, scale: float = 0.1, parts: int = 8, fresh: bool = True) -> int:
    from optimizer.service.service import context, run_once

    root = Path(workdir).resolve()
    if fresh and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    _say(f"generating TPC-H lineitem at scale {scale} in {parts} increments with tpchgen-cli")
    part_files = tpch.generate("lineitem", scale, root / "tpch", parts=parts)
    table_path = root / "lineitem"
    config = load_config(write_config(root, table_path))
    spark = build_session(config.spark)
    _say(runtime_info(spark).describe())
    table = open_table(str(table_path))
    half = max(parts // 2, 1)
    first = part_files[:half]
    later = part_files[half:]
    for part in first:
        load_part(spark, table, part)
    _say(f"loaded {len(first)} increments into {table_path} ({len(table.snapshot().files)} small files)")

    now = datetime.now(UTC)
    log_path = config.tables[0].query_log_path
    record_workload(log_path, root / "spill", 300, seed=1, now=now)
    _say(f"recorded 300 queries into the query log {log_path}")
    _say("layout health of the workload's filter columns as loaded (`deltaopt table info`):")
    for health in table_info(table, log_uri=log_path).health:
        _say(f"  {health.describe()}")

    ctx = context(config, spark=lambda: spark)
    _show(run_once(ctx)[0])

    for part in later:
        load_part(spark, table, part)
    record_workload(log_path, root / "spill", 100, seed=2, now=datetime.now(UTC))
    _say(f"{len(later)} new increments and 100 new queries arrived")
    _show(run_once(ctx)[0])
    _show(run_once(ctx)[0])

    _show_outcome(table, log_path)
    _say(f"done in {time.monotonic() - started:.0f}s")
    _say(f"decision log: {config.decision_log_path}")
    _say(f"decisions table: {config.service.decisions_path}; try: deltaopt decisions --config {root / 'deltaopt.yaml'}")
    return 0


def _show_outcome(table: TableAccess, log_path: str) -> None:
    """The table after the service's ticks: its layout health, the rewrites in its history, and what
    some workload queries read now."""
    from optimizer.skipping.scan import plan_scan

    print(render(table_info(table, log_uri=log_path)))
    _say("the table's history of layout rewrites (who committed, as Delta's history shows them):")
    for commit in table.history():
        if commit.is_deltaopt_optimize:
            metrics = commit.metadata.get("operationMetrics") or {}
            files = f", {metrics['numRemovedFiles']} files -> {metrics['numAddedFiles']}" if metrics else ""
            run = commit.deltaopt.get("runId")
            _say(f"  v{commit.version}: {commit.operation} by {commit.engine}, run {run}{files}")
    _say("what some workload queries read now:")
    for sql in tpch.lineitem_queries(4, seed=3):
        where = sql.split(" WHERE ", 1)[1]
        plan = plan_scan(table, where)
        _say(
            f"  {plan.skipped_files}/{plan.total_files} files skipped, {human_bytes(plan.bytes_read)} of "
            f"{human_bytes(plan.total_bytes)} read: {where[:90]}"
        )
