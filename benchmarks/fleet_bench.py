"""A whole lakehouse under one service: idle sweeps, the fleet queue against an offline ranking, the
passes until every table that merits a job has had one, memory and threads by fleet size.

    python -m benchmarks fleet [--tables 100,1000] [--worth 30] [--flat 6] [--nudged 10] [--jobs 10]

For each fleet size N, in one process with one embedded Spark: N small tables written by delta-rs, each
with its query log. `--worth` of them hold data above `min_new_bytes` and a logged range workload on
`x`, each with a different query rate (so their net benefit per cluster-second differs); `--flat` hold
as much data and workload but scans priced at next to nothing (verdict "skip": a Spark estimate, nothing
to gain); `--nudged` are small and get a little new data after the sweep; the rest are small and idle.

1. decide: one pass, every table ticked with the queue held (what `serve --once` does first).
2. the budget: ``--jobs`` times the median estimated cost of the queued jobs, per hour. The queue starts
   jobs best first while they fit; the realised net benefit (the committed jobs' estimates) is compared
   with an offline greedy ranking of the same candidates under the same budget (by net benefit per
   cluster-second, each taken if it still fits). Jobs are real OPTIMIZE runs, charged their measured
   seconds.
3. sweep: every unchanged table again (all but those a job moved and the nudged), 5 minutes later, timed,
   with Spark made unreachable and the decisions table's version compared (no Spark, no commit: asserted).
4. nudge: a little new data in the nudged tables, then a pass over all: which tables were decided again.
5. hourly passes until every table that merited a job in pass 1 has had one (aging and the budget's hour).
Memory is the process's resident set (VmRSS) after the size, threads the live count.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.common import by_size, fleet_config, sizes_table, write_report
from costmodel.cost import DEFAULT_MODEL, CostModel
from optimizer.config import SparkSettings, parse_config
from optimizer.runtime import build_session
from optimizer.service.fleet import Budget, Candidate
from querylog.records import ScanRecord
from querylog.store import QueryLogTable

NOW = datetime(2026, 1, 5, 12, tzinfo=UTC)
BIG_ROWS = 200_000  # about 3 MB as delta-rs writes it: above min_new_bytes


def frame(ids: Any) -> pa.Table:
    """Rows with a range-filtered column `x` and a payload the scans read too."""
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([(j * 7919) % 1000 for j in ids], pa.int64()),
            "pad": pa.array([f"{(j * 2654435761) % 4294967296:010d}" for j in ids]),
        }
    )


def build(work: Path, count: int, worth: int, flat: int) -> dict[str, Any]:
    """`count` tables and their logs; the configuration of a service watching them."""
    tables = []
    for i in range(count):
        name, path = f"t{i:04d}", str(work / f"t{i:04d}")
        big = i < worth + flat
        rows = BIG_ROWS + 20_000 * (i % 5) if big else 50
        write_deltalake(path, frame(range(rows)))
        queries = 8 + 12 * i if i < worth else 60  # a different query rate for each table worth a job
        records = [
            ScanRecord(
                f"q{i}-{k}",
                NOW - timedelta(minutes=k * 60 / queries),
                name,
                (f"x >= {k * 15 % 1000}", f"x < {k * 15 % 1000 + 20}"),
                ("x", "pad"),
                "bench",
            )
            for k in range(queries)
        ]
        QueryLogTable(path + "_querylog").append(records)
        entry: dict[str, Any] = {"name": name, "path": path, "interval": 60}
        if worth <= i < worth + flat:  # scans cost next to nothing: no layout pays
            entry["thresholds"] = {"cost_per_mb_read": 1e-6}
        tables.append(entry)
    # scans priced so that a clustered layout pays; a job writes several files: range filters skip most
    return fleet_config(work, tables, cost_per_mb_read=2.0, target_file_size=400_000)


def greedy(candidates: list[Candidate], limit: float, scale: float = 1.0) -> tuple[set[str], float]:
    """The offline ranking: by net benefit per cluster-second, each taken if it still fits (every cost
    times `scale`)."""
    chosen, left, net = set(), limit, 0.0
    for c in sorted(candidates, key=lambda c: -c.rate):
        if c.cost * scale <= left:
            chosen.add(c.table)
            left -= c.cost * scale
            net += c.net
    return chosen, net


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def calibrated(spark: Any) -> tuple[CostModel, float]:
    """The default cost model scaled to this machine by real jobs (the first three warm the JVM up and are
    left out; the median ratio of the others), as ``deltaopt calibrate`` would fit it: the budget is then
    in the seconds jobs take."""
    from optimizer.service.service import context, run_once

    work = Path(tempfile.mkdtemp(prefix="deltaopt-fleet-calibrate-"))
    try:
        ctx = context(parse_config(build(work, 8, 8, 0)), spark=lambda: spark)
        ctx.cost_model = DEFAULT_MODEL
        ratios = [
            r.job.outcome.seconds / r.decision.cost.seconds
            for r in run_once(ctx, NOW)
            if r.job is not None and r.job.outcome is not None and r.decision is not None and r.decision.cost
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    factor = statistics.median(ratios[3:])
    model = DEFAULT_MODEL
    scaled = replace(
        model,
        overhead=model.overhead * factor,
        base=model.base * factor,
        per_z=model.per_z * factor,
        per_sop=model.per_sop * factor,
        per_additional=model.per_additional * factor,
        measured=f"default x {factor:.2f} (fleet benchmark calibration)",
    )
    return scaled, factor


def one_size(spark: Any, work: Path, count: int, args: argparse.Namespace, model: CostModel) -> dict[str, Any]:
    from optimizer.service.service import context, finish_pass, run_once
    from optimizer.service.tick import tick

    config = parse_config(build(work, count, args.worth, args.flat))
    ctx = context(config, spark=lambda: spark)
    ctx.cost_model = model
    tables = list(config.tables)
    started = time.perf_counter()
    with ctx.queue.held():  # the pass's ticks, timed apart from its jobs; the budget is set between
        decided = {table.name: tick(table, ctx, NOW) for table in tables}
    decide_s = time.perf_counter() - started
    candidates = ctx.queue.ranked(NOW)
    merit = {c.table for c in candidates}
    limit = args.jobs * statistics.median(c.cost for c in candidates)
    ctx.queue.budget = Budget(per_hour=limit, aging=3600)
    offline, offline_net = greedy(candidates, limit)
    by_table = {c.table: c for c in candidates}
    started = time.perf_counter()
    first = {r.table: r for r in finish_pass(ctx, decided, ctx.queue.dispatch(NOW))}
    jobs_s = time.perf_counter() - started
    ran = {
        t
        for t, r in first.items()
        if r.job is not None and r.job.outcome is not None and r.job.outcome.version is not None
    }
    realised = sum(by_table[t].net for t in ran)
    charged = ctx.queue.used(NOW + timedelta(minutes=1), timedelta(hours=1))
    ratio = sum(first[t].job.outcome.seconds for t in ran) / sum(by_table[t].cost for t in ran)  # type: ignore[union-attr]
    hindsight, hindsight_net = greedy(candidates, limit, ratio)

    unchanged = [t for t in tables if t.name not in ran and not _nudged(t.name, args)]
    version = DeltaTable(config.service.decisions_path).version()

    def no_spark() -> Any:
        raise AssertionError("an unchanged table used Spark")

    ctx.spark = no_spark
    started = time.perf_counter()
    sweep = run_once(ctx, NOW + timedelta(minutes=5), unchanged)
    sweep_s = time.perf_counter() - started
    assert all(r.reused for r in sweep), [r.reason for r in sweep if not r.reused][:3]
    assert DeltaTable(config.service.decisions_path).version() == version  # no commit
    ctx.spark = lambda: spark

    for i in range(args.worth + args.flat, args.worth + args.flat + args.nudged):  # a little new data
        write_deltalake(str(work / f"t{i:04d}"), frame([10**9 + i]), mode="append")
    started = time.perf_counter()
    nudge = run_once(ctx, NOW + timedelta(minutes=10), tables)
    nudge_s = time.perf_counter() - started
    redecided = sorted(r.table for r in nudge if not r.reused)

    served, passes = set(ran), 0
    while merit - served and passes < args.max_passes:
        passes += 1
        later = NOW + timedelta(hours=passes, minutes=11)
        records = run_once(ctx, later, tables)
        served |= {r.table for r in records if r.job is not None and r.job.outcome is not None}
    return {
        "tables": count,
        "decide_s": round(decide_s, 1),
        "candidates": len(candidates),
        "budget_cluster_s_per_hour": round(limit, 1),
        "jobs_pass1": len(ran),
        "measured_over_estimated": round(ratio, 2),
        "hindsight_jobs": len(hindsight),
        "hindsight_jobs_started": len(hindsight & ran),
        "realised_net": round(realised, 1),
        "hindsight_net": round(hindsight_net, 1),
        "realised_share": round(realised / hindsight_net, 3) if hindsight_net else None,
        "offline_jobs_on_estimates": len(offline),
        "share_of_offline_on_estimates": round(realised / offline_net, 3) if offline_net else None,
        "jobs_s": round(jobs_s, 1),
        "charged_s": round(charged, 1),
        "sweep_tables": len(unchanged),
        "sweep_s": round(sweep_s, 2),
        "ms_per_unchanged": round(1000 * sweep_s / len(unchanged), 1),
        "nudge_pass_s": round(nudge_s, 1),
        "decided_again": len(redecided),
        "hourly_passes_until_all_served": passes if not merit - served else f">{passes}",
        "rss_mb": rss_mb(),
        "threads": threading.active_count(),
    }


def _nudged(name: str, args: argparse.Namespace) -> bool:
    index = int(name[1:])
    return args.worth + args.flat <= index < args.worth + args.flat + args.nudged


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks fleet")
    parser.add_argument("--tables", default="100,1000", help="fleet sizes, comma-separated")
    parser.add_argument("--worth", type=int, default=30, help="tables with a job worth running")
    parser.add_argument("--flat", type=int, default=6, help="tables above the threshold with nothing to gain")
    parser.add_argument("--nudged", type=int, default=10, help="idle tables that get a little new data")
    parser.add_argument("--jobs", type=float, default=10, help="the hourly budget in median job costs")
    parser.add_argument("--max-passes", type=int, default=12)
    parser.add_argument("--report", default="fleet")
    args = parser.parse_args(argv)
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    model, factor = calibrated(spark)
    print(f"cost model: the default x {factor:.2f} on this machine", flush=True)
    rows = by_size(args.tables, "deltaopt-fleet-", lambda work, count: one_size(spark, work, count, args, model))
    body = sizes_table(rows) + "\n"
    body += (
        "\ndecide: pass 1, every table estimated or found idle, jobs queued unstarted. realised_net: the "
        "estimated net benefit of the jobs the queue started and committed within the hourly budget (jobs charged "
        "their measured seconds). hindsight_net: the same candidates ranked offline by net benefit per "
        "cluster-second, each taken if it fits, with every cost as this run's jobs measured it (estimate x "
        "measured_over_estimated); share_of_offline_on_estimates: against the same ranking on the estimates "
        "alone (the cost model's error included). sweep: every "
        "table no job moved and no new data reached, 5 minutes later, Spark unreachable and no decisions-table "
        "commit (both asserted). decided_again: tables the nudge pass did not repeat a verdict for (the "
        "nudged ones and those whose job moved them). hourly passes: until every table with a queued job in "
        "pass 1 had one. "
        "rss_mb: resident set after the size (one process, sizes in order); threads: live.\n"
    )
    body += f"\nThe cost model: the default scaled by {factor:.2f} to this machine by calibration jobs.\n"
    write_report(args.report, "A fleet under one service", body, f"python -m benchmarks fleet {' '.join(argv)}")
