"""A workload that moves: does the layout follow it, old data included?

    python -m benchmarks drift [--scale 0.2] [--appends 3] [--rate 60] [--quiet-hours 4] [--quick]

Simulated time, one hour per step, a Poisson stream of ``--rate`` queries per hour recorded through the
`Recorder`. Phase 1: the TPC-H-like lineitem stream (ranges on dates, quantities, discounts and a few
recurring predicates), ``--appends`` hourly appends. Phase 2: a different family: narrow ranges on
``l_partkey`` and ``l_suppkey``, a derived expression ``l_extendedprice * (1 - l_discount)`` with
changing thresholds combined with changing ``l_shipmode IN (a, b)`` pairs, and a string function
``SUBSTRING(l_shipinstruct, 1, 4) IN (...)``. Phase 2 appends every other hour (the service ticks
hourly, so it has ticks without new data), then ``--quiet-hours`` hours of queries with no appends.

Three copies of the table receive the same appends and share one query log:

* **none**: never optimised;
* **frequency**: the service with ``selection: frequency`` and re-clustering off: the thesis's gates
  choose the features of each new increment, old files are never revisited;
* **benefit**: the service with the defaults: benefit-driven feature search and drift re-clustering
  within ``recluster_bytes_per_tick`` / ``recluster_bytes_per_day``.

Measured at the end of each phase, on held-out queries of each phase's stream: mean compressed column
bytes read per query with deltaopt's pruning and with a standard reader (Delta min/max of bare columns
only), and at the end DuckDB's Delta extension's files scanned. Both services use a 12 h workload
window and a 2 h recency half-life, so that hours of simulated time are what days are in production.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import table, write_report
from benchmarks.flow_bench import duckdb_files, load_config_spark, measure, poisson_arrivals
from costmodel.benefit import MB
from optimizer import tpch
from optimizer.analysis.search import SearchResult
from optimizer.config import Config, load_config
from optimizer.demo import load_part
from optimizer.runtime import build_session
from optimizer.table import open_table
from querylog.predicates.attribute import scan_filters
from querylog.recorder import Recorder
from querylog.store import QueryLogTable

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
HELD_OUT = 80
MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
INSTRUCTIONS = ("DELI", "TAKE", "COLL", "NONE")
COPIES = ("none", "frequency", "benefit")


def phase_one(count: int, seed: int) -> list[str]:
    return tpch.lineitem_queries(count, seed=seed)


def phase_two(scale: float) -> Callable[[int, int], list[str]]:
    """The second family's generator for a table of `scale` (key ranges are 1% of the key space)."""
    parts = max(int(200_000 * scale), 100)
    suppliers = max(int(10_000 * scale), 10)

    def generate(count: int, seed: int) -> list[str]:
        rng = random.Random(seed)
        queries = []
        for _ in range(count):
            draw = rng.random()
            if draw < 0.4:
                key = rng.randrange(1, parts)
                where = f"l_partkey >= {key} AND l_partkey < {key + parts // 100}"
            elif draw < 0.7:
                a, b = rng.sample(MODES, 2)
                revenue = rng.randrange(60_000, 95_000, 500)
                where = f"l_extendedprice * (1 - l_discount) > {revenue} AND l_shipmode IN ('{a}', '{b}')"
            elif draw < 0.9:
                key = rng.randrange(1, suppliers)
                where = f"l_suppkey BETWEEN {key} AND {key + suppliers // 100}"
            else:
                a, b = rng.sample(INSTRUCTIONS, 2)
                key = rng.randrange(1, parts)
                where = (
                    f"SUBSTRING(l_shipinstruct, 1, 4) IN ('{a}', '{b}') AND l_partkey BETWEEN {key} "
                    f"AND {key + parts // 50}"
                )
            columns = ", ".join(rng.sample(tpch.READ_COLUMNS, rng.randrange(1, 4)))
            queries.append(f"SELECT {columns} FROM lineitem WHERE {where}")
        return queries

    return generate


def held_out(queries: Sequence[str]) -> list[tuple[str | None, tuple[str, ...]]]:
    result = []
    for sql in queries:
        (scan,) = scan_filters(sql).scans
        result.append((" AND ".join(f"({f})" for f in scan.filters) or None, tuple(scan.columns)))
    return result


def write_config(root: Path, name: str, table_path: Path, log_path: Path, thresholds: dict[str, Any]) -> Config:
    settings = {
        "spark": {"master": "local[2]", "shuffle_partitions": 8},
        "defaults": thresholds,
        "tables": [{"name": name, "path": str(table_path), "table_id": "lineitem", "query_log": str(log_path)}],
        "service": {"state_dir": str(root / f"state-{name}"), "jitter": 0},
        "logging": {"level": "WARNING"},
    }
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return load_config(path)


def run(spark: Any, parts: Sequence[Path], root: Path, args: argparse.Namespace) -> dict[str, Any]:
    from optimizer.service.service import context, run_once

    copies = {name: open_table(str(root / name)) for name in COPIES}
    for copy in copies.values():
        load_part(spark, copy, parts[0], args.files_per_append)
    increment = copies["none"].snapshot().total_bytes
    common = {
        "min_new_bytes": increment // 2,
        "target_file_size": max(1 << 20, increment // 6),
        "sample_rows": 50_000,
        "workload_window": "12h",
        "recency_half_life": "2h",
    }
    log_path = root / "querylog"
    services = {
        "frequency": context(
            write_config(
                root,
                "frequency",
                root / "frequency",
                log_path,
                {**common, "selection": "frequency", "recluster_bytes_per_tick": 0},
            ),
            spark=lambda: spark,
        ),
        "benefit": context(
            write_config(
                root,
                "benefit",
                root / "benefit",
                log_path,
                {
                    **common,
                    "recluster_bytes_per_tick": int(increment * args.budget_increments),
                    "recluster_bytes_per_day": int(increment * args.budget_increments * 24),
                },
            ),
            spark=lambda: spark,
        ),
    }
    budget = int(increment * args.budget_increments)
    second = phase_two(args.scale)
    held = {"phase 1": held_out(phase_one(HELD_OUT, 999)), "phase 2": held_out(second(HELD_OUT, 998))}
    rng = random.Random(3)
    ticks: list[dict[str, Any]] = []
    measured: dict[str, dict[str, dict[str, float]]] = {}
    clock = START
    serial = 0
    remaining = list(parts[1:])
    log = QueryLogTable(str(log_path))

    def hour(generate: Callable[[int, int], list[str]], phase: str, append: bool) -> None:
        nonlocal clock, serial
        arrivals = poisson_arrivals(rng, args.rate, clock, 1.0)
        for ts, sql in zip(arrivals, generate(len(arrivals), 1000 + serial), strict=True):
            recorder.record_sql(sql, ts=ts)
        serial += 1
        recorder.flush()
        clock += HOUR
        if append:
            part = remaining.pop(0)
            for copy in copies.values():
                load_part(spark, copy, part, args.files_per_append)
        for name, ctx in services.items():
            started = time.perf_counter()
            record = run_once(ctx, now=clock)[0].as_dict()
            ticks.append(_brief(name, phase, append, clock, record, time.perf_counter() - started))
            last = ticks[-1]
            print(f"  {clock:%H:%M} {name:9} {last['action']:9} {last['reason'][:150]}", flush=True)

    with Recorder(log, root / "spill", capacity=500) as recorder:
        print("== phase 1", flush=True)
        for _ in range(args.appends):
            hour(phase_one, "phase 1", append=True)
        measured["end of phase 1"] = {name: measure(copy, held["phase 1"]) for name, copy in copies.items()}
        print("== phase 2", flush=True)
        for _ in range(args.appends):
            hour(second, "phase 2", append=True)
            hour(second, "phase 2", append=False)
        for _ in range(args.quiet_hours):
            hour(second, "phase 2", append=False)
    for phase, queries in held.items():
        measured[f"end of phase 2, {phase} queries"] = {name: measure(copy, queries) for name, copy in copies.items()}
    duck = duckdb_files(copies, held["phase 2"])
    rows = {name: copy.snapshot().num_records for name, copy in copies.items()}
    return {
        "increment": increment,
        "budget": budget,
        "ticks": ticks,
        "measured": measured,
        "duckdb": duck,
        "rows": rows,
        "log_scans": len(log.read("lineitem", since=START - HOUR, until=clock + HOUR)),
    }


def _brief(name: str, phase: str, append: bool, now: datetime, record: dict[str, Any], seconds: float) -> dict:
    recluster = record.get("recluster") or {}
    estimate = recluster.get("estimate") or {}
    searched = record.get("search") or estimate.get("search")  # the new data's, else re-clustering's
    search = SearchResult.from_dict(searched) if searched else None
    features = record.get("features") or {}
    job = record.get("job") or {}
    return {
        "service": name,
        "phase": phase,
        "append": append,
        "ts": now.isoformat(),
        "action": record.get("action"),
        "reason": record.get("reason") or "",
        "z": features.get("z"),
        "sop": features.get("sop"),
        "search_seconds": (record.get("seconds") or {}).get("search", (estimate.get("seconds") or {}).get("search")),
        "estimate_seconds": record.get("seconds"),
        "search_estimates": search.estimates if search is not None else None,
        "search_chosen": search.chosen_names if search is not None else None,
        "recluster_bytes": recluster.get("bytes") if record.get("action") == "recluster" else 0,
        "recluster_seconds": recluster.get("seconds"),
        "drift": recluster.get("reason"),
        "groups": [
            {k: g.get(k) for k in ("features", "files", "bytes", "current", "verdict")}
            for g in recluster.get("groups", [])
        ],
        "job_seconds": job.get("seconds"),
        "job_bytes_in": job.get("bytes_in"),
        "tick_seconds": round(seconds, 2),
    }


def render(result: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"TPC-H lineitem scale {args.scale}: an initial load, {args.appends} hourly appends with the phase-1 stream, "
        f"then {args.appends} appends every other hour and {args.quiet_hours} quiet hours with the phase-2 stream; "
        f"{args.rate:g} queries per simulated hour ({result['log_scans']} logged scans). Increment "
        f"{result['increment'] / MB:.1f} MB; re-clustering budget {result['budget'] / MB:.1f} MB per tick. "
        f"{HELD_OUT} held-out queries per phase. Rows per copy at the end: {result['rows']}.\n",
        "## Bytes read per query (MB of the columns read; deltaopt's pruning | standard reader)\n",
    ]
    rows = []
    for moment, figures in result["measured"].items():
        rows.append(
            (
                moment,
                *(f"{figures[c]['deltaopt_bytes'] / MB:.2f}" for c in COPIES),
                *(f"{figures[c]['standard_bytes'] / MB:.2f}" for c in COPIES),
                f"{figures['frequency']['deltaopt_bytes'] / max(figures['benefit']['deltaopt_bytes'], 1):.2f}x",
                f"{figures['frequency']['standard_bytes'] / max(figures['benefit']['standard_bytes'], 1):.2f}x",
            )
        )
    lines.append(
        table(
            (
                "when, which queries",
                "none",
                "frequency",
                "benefit",
                "std: none",
                "std: frequency",
                "std: benefit",
                "frequency / benefit",
                "std: frequency / benefit",
            ),
            rows,
        )
    )
    duck = result["duckdb"]["copies"]
    lines.append(
        "\nDuckDB's Delta extension, phase-2 held-out queries on the final tables, mean files scanned: "
        + ", ".join(
            f"{name} {v['mean_files']:.1f}/{v['total_files']}" + (f" ({v['unknown']} unknown)" if v["unknown"] else "")
            for name, v in duck.items()
            if v["mean_files"] is not None
        )
        + "\n"
    )
    lines.append("## Ticks\n")
    tick_rows = [
        (
            t["ts"][11:16],
            t["phase"] + (" +append" if t["append"] else ""),
            t["service"],
            t["action"],
            ", ".join(t["z"] or []) or "-",
            len(t["sop"] or []),
            f"{t['search_seconds']:.1f} ({t['search_estimates']})" if t["search_seconds"] is not None else "-",
            f"{t['recluster_bytes'] / MB:.1f}" if t["recluster_bytes"] else "-",
            f"{t['job_seconds']:.1f}" if t["job_seconds"] else "-",
            f"{t['tick_seconds']:.1f}",
        )
        for t in result["ticks"]
    ]
    headers = ("time", "phase", "service", "action", "Z", "SOP", "search s (estimates)", "re-clustered MB")
    lines.append(table((*headers, "job s", "tick s"), tick_rows))
    benefit_ticks = [t for t in result["ticks"] if t["service"] == "benefit"]
    searched = [t["search_seconds"] for t in benefit_ticks if t["search_seconds"] is not None]
    reclustered = sum(t["recluster_bytes"] or 0 for t in benefit_ticks)
    phase2 = result["measured"]["end of phase 2, phase 2 queries"]
    phase1 = result["measured"]["end of phase 1"]
    lines.append(
        f"\nSearch: {len(searched)} searches, {sum(searched):.1f} s in all, at most {max(searched, default=0):.1f} s. "
        f"Re-clustered {reclustered / MB:.1f} MB in "
        f"{sum(1 for t in benefit_ticks if t['action'] == 'recluster')} runs.\n"
    )
    lines.append(
        "Verdict: phase-2 queries after phase 2 read "
        f"{phase2['frequency']['deltaopt_bytes'] / max(phase2['benefit']['deltaopt_bytes'], 1):.2f}x fewer bytes with "
        f"the benefit-driven service than with the frequency-gated one (deltaopt's pruning; "
        f"{phase2['frequency']['standard_bytes'] / max(phase2['benefit']['standard_bytes'], 1):.2f}x for a standard "
        f"reader); phase-1 queries at the end of phase 1: benefit {phase1['benefit']['deltaopt_bytes'] / MB:.2f} MB vs "
        f"frequency {phase1['frequency']['deltaopt_bytes'] / MB:.2f} MB per query.\n"
    )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks drift")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--appends", type=int, default=3, help="appends per phase")
    parser.add_argument("--rate", type=float, default=60.0, help="queries per simulated hour")
    parser.add_argument("--quiet-hours", type=int, default=4, help="phase-2 hours without appends at the end")
    parser.add_argument("--budget-increments", type=float, default=2.0, help="re-clustering budget per tick")
    parser.add_argument("--files-per-append", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="scale 0.05, 2 appends per phase, 2 quiet hours")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.appends, args.quiet_hours = 0.05, 2, 2
    work = Path(tempfile.mkdtemp(prefix="deltaopt-drift-"))
    spark = build_session(load_config_spark())
    name = "drift" if not args.quick else "drift-quick"
    try:
        parts = tpch.generate("lineitem", args.scale, work / "tpch", parts=2 * args.appends + 1)
        result = run(spark, parts, work / "run", args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    (Path(__file__).parent / "reports" / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    body = render(result, args)
    print(body)
    command = (
        f"python -m benchmarks drift --scale {args.scale} --appends {args.appends} --rate {args.rate:g} "
        f"--quiet-hours {args.quiet_hours} --budget-increments {args.budget_increments:g}"
    )
    write_report(name, "Workload drift: phase 1, then a different phase 2", body, command)
