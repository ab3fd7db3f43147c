"""What a pass over many unchanged tables costs once their verdicts are made.

    python -m benchmarks idle [--tables 100,300] [--estimated 4] [--report NAME]

For each fleet size N: N small tables written by delta-rs, each with a query log beside it, under one
service in one process (`serve --once` style passes, `run_once`). Most sit below `min_new_bytes`; the
first `--estimated` are above it with a logged range workload on `x` that cannot pay (scans are priced
at next to nothing), so their verdict ("skip") costs a full Spark estimate; the report prints it.
Pass 1 makes every verdict; pass 2, with nothing changed, is timed per table, with
Spark made unreachable (any use fails the benchmark) and the decisions table's version compared before
and after (no commit allowed). The same pass 2 is also run with the cache disabled (every verdict
forgotten) for the side-by-side ratio. Memory (RSS) and threads are read after each size.
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.common import by_size, fleet_config, sizes_table, write_report
from costmodel.cost import DEFAULT_MODEL
from optimizer.config import SparkSettings, parse_config
from optimizer.runtime import build_session
from querylog.records import ScanRecord
from querylog.store import QueryLogTable

NOW = datetime(2026, 1, 5, 12, tzinfo=UTC)


def build(work: Path, count: int, estimated: int) -> dict[str, Any]:
    """`count` tables and their logs; the configuration of a service watching them."""
    tables = []
    for i in range(count):
        path = str(work / f"t{i:04d}")
        rows = 300_000 if i < estimated else 50  # above min_new_bytes (about 2.5 MB as delta-rs writes it)
        x = [(j * 7919) % 1000 for j in range(rows)]
        write_deltalake(path, pa.table({"id": pa.array(range(rows), pa.int64()), "x": x}))
        stamps = [NOW - timedelta(minutes=k) for k in range(60)]
        filters = [(f"x >= {k * 15 % 1000}", f"x < {k * 15 % 1000 + 20}") for k in range(60)]  # a Z candidate
        records = [ScanRecord(f"q{i}-{k}", ts, f"t{i:04d}", filters[k], ("x",), "bench") for k, ts in enumerate(stamps)]
        QueryLogTable(path + "_querylog").append(records)
        tables.append({"name": f"t{i:04d}", "path": path, "interval": 60})
    # scans cost next to nothing: no layout pays, the verdict is "skip"
    return fleet_config(work, tables, cost_per_mb_read=1e-6)


def one_size(spark: Any, work: Path, count: int, estimated: int) -> dict[str, Any]:
    from optimizer.service.service import context, run_once

    ctx = context(parse_config(build(work, count, estimated)), spark=lambda: spark)
    ctx.cost_model = DEFAULT_MODEL
    started = time.perf_counter()
    first = run_once(ctx, NOW)
    pass1 = time.perf_counter() - started

    def no_spark() -> Any:
        raise AssertionError("an unchanged table used Spark")

    decisions = DeltaTable(ctx.config.service.decisions_path).version()
    ctx.spark = no_spark
    started = time.perf_counter()
    second = run_once(ctx, NOW + timedelta(minutes=5))
    pass2 = time.perf_counter() - started
    assert all(r.reused for r in second), [r.reason for r in second if not r.reused][:3]
    assert DeltaTable(ctx.config.service.decisions_path).version() == decisions  # no commit
    for table in ctx.config.tables:  # the same pass without reuse: every verdict forgotten
        ctx.state.save(ctx.state.load(table.name).with_(verdict=None))
    ctx.spark = lambda: spark
    started = time.perf_counter()
    run_once(ctx, NOW + timedelta(minutes=10))
    uncached = time.perf_counter() - started
    return {
        "tables": count,
        "estimated": sum(1 for r in first if "too little new data" not in r.reason),
        "pass1_s": round(pass1, 2),
        "pass2_s": round(pass2, 2),
        "ms_per_unchanged_table": round(1000 * pass2 / count, 1),
        "without_reuse_s": round(uncached, 2),
        "speedup": round(uncached / pass2, 1) if pass2 else None,
        "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "threads": threading.active_count(),
        "estimated_verdict": first[0].reason[:90],
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks idle")
    parser.add_argument("--tables", default="100,300", help="fleet sizes, comma-separated")
    parser.add_argument("--estimated", type=int, default=4, help="tables whose verdict costs a Spark estimate")
    parser.add_argument("--report", default="idle")
    args = parser.parse_args(argv)
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    rows = by_size(args.tables, "deltaopt-idle-", lambda work, count: one_size(spark, work, count, args.estimated))
    body = sizes_table(rows) + "\n"
    body += (
        "\npass 2: every table unchanged since pass 1, Spark unreachable, no decisions-table commit "
        "(both asserted); without_reuse: the same pass with every stored verdict forgotten. RSS is the "
        "process's peak so far (ru_maxrss), threads the live count after the size.\n"
    )
    write_report(
        args.report, "Idle checks: a pass over unchanged tables", body, f"python -m benchmarks idle {' '.join(argv)}"
    )
