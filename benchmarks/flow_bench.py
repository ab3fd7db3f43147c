"""The product's own flow: appends arriving, a live query stream, the service ticking after each append.

    python -m benchmarks flow [--scale 0.3] [--appends 8] [--rate 60] [--quick]

Time is simulated (one append per hour) so that the query stream has a real rate: each hour, queries
arrive as a Poisson stream of ``--rate`` per hour and are recorded through the `Recorder` (spill,
flush, exactly-once appends to the query log) with their arrival times; then an increment of TPC-H
``lineitem`` is appended (as small files, like a streaming writer) and the service ticks
(`run_once`, the code ``deltaopt serve --once`` runs) with the simulated clock. Three copies of the
table receive the same appends:

* **none**: never optimised;
* **manual**: after every append, ``deltaopt optimize`` of the new files with the features the
  analyser's thesis gates choose (``selection: frequency``; what an operator's cron would do: optimise
  always);
* **service**: whatever the service decides;
* on the filtered stream, what a Delta user would run instead, written by Delta's own writer in the same
  Spark session (`benchmarks.delta_peers`): **Delta ZORDER BY** (``OPTIMIZE ... ZORDER BY`` after every
  append, on the columns the stream filters most) and **liquid clustering** (a ``CLUSTER BY`` table on
  the same columns, ``OPTIMIZE`` after every append). Their rewrite time, bytes written and whether they
  rewrote already-clustered data are reported beside the service's, and at the end every copy is read
  by Spark's own Delta scan (files and bytes per held-out query), deltaopt's pruning and DuckDB.

Per tick the report gives the service's decision and estimate (projected queries, skipping and
compression terms), the manual run's measured job time and measured saving, and whether the manual
run paid off within the benefit horizon: the marginal column bytes it saved per held-out query (the
same stream's distribution, another seed) times the stream's true rate over the horizon, priced at
``cost_per_mb_read``, against its measured job seconds. When the service optimises, its estimated
bytes per query after the rewrite are checked against the bytes the same workload reads from the
files the run really wrote (compression included). Bytes are compressed bytes of the columns each
query reads (Parquet footers); files kept are counted for deltaopt's pruning and for a standard reader
(Delta min/max of bare columns only), and at the end with DuckDB's Delta extension.

Scenarios: a filtered stream (TPC-H-like range filters and recurring predicates), the same stream at a
rate too low to pay for a rewrite, and an unfiltered stream (nothing to skip: the service must skip).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from benchmarks import kept_share
from benchmarks.common import write_report
from benchmarks.delta_peers import DeltaPeer, expert_columns
from benchmarks.flow_model import HELD_OUT, START, STEP, Granularity, Scenario, Tick
from benchmarks.flow_report import render, save_raw
from costmodel.benefit import MB
from optimizer import tpch
from optimizer.analysis import TableContext, analyse_table
from optimizer.clustering import optimize
from optimizer.config import Config, load_config
from optimizer.demo import load_part
from optimizer.estimate.replay import query_bytes, workload_queries
from optimizer.runtime import build_session
from optimizer.skipping.extended import load_index, unclustered_files
from optimizer.skipping.scan import column_sizes, plan_scan, table_file_stats
from optimizer.table import TableAccess, open_table
from querylog.predicates.attribute import scan_filters
from querylog.recorder import Recorder
from querylog.store import QueryLogTable


def stream(count: int, seed: int, filtered: bool) -> list[str]:
    """`count` queries of the stream: TPC-H-like lineitem filters, or none at all."""
    queries = tpch.lineitem_queries(count, seed=seed)
    if filtered:
        return queries
    return [q.split(" WHERE ", 1)[0] for q in queries]


def poisson_arrivals(rng: random.Random, rate: float, begin: datetime, hours: float) -> list[datetime]:
    """Arrival times of a Poisson stream of `rate` per hour over `hours` from `begin`."""
    times: list[datetime] = []
    clock = 0.0
    while True:
        clock += rng.expovariate(rate)
        if clock >= hours:
            return times
        times.append(begin + timedelta(hours=clock))


def record_hour(
    recorder: Recorder, rng: random.Random, rate: float, step: int, draw: Callable[[int, int], Sequence[str]]
) -> datetime:
    """Record simulated hour `step`'s Poisson arrivals (`draw(count, seed)` gives their SQL, the seed
    another per hour) and flush them to the log; returns the hour's end, when the service ticks."""
    begin, now = START + (step - 1) * STEP, START + step * STEP
    arrivals = poisson_arrivals(rng, rate, begin, 1.0)
    for ts, sql in zip(arrivals, draw(len(arrivals), 999 + step), strict=True):
        recorder.record_sql(sql, ts=ts)
    recorder.flush()
    return now


def append_everywhere(
    spark: Any, part: Path, copies: Iterable[TableAccess], peers: Iterable[DeltaPeer], files: int
) -> None:
    """One increment appended as `files` small files to every copy (deltaopt's writer) and every peer
    (Delta's writer)."""
    for copy in copies:
        load_part(spark, copy, part, files)
    for peer in peers:
        peer.load(spark.read.parquet(str(part)).repartition(files))


def held_out(filtered: bool) -> list[tuple[str | None, tuple[str, ...]]]:
    """(WHERE text, columns) of the held-out queries the copies are measured with."""
    result = []
    for sql in stream(HELD_OUT, 999, filtered):
        (scan,) = scan_filters(sql).scans
        where = " AND ".join(f"({f})" for f in scan.filters) or None
        result.append((where, tuple(scan.columns)))
    return result


def measure(lineitem: TableAccess, queries: Sequence[tuple[str | None, tuple[str, ...]]]) -> dict[str, float]:
    """Mean column bytes and files per query, by deltaopt's pruning and by Delta min/max only."""
    snapshot = lineitem.snapshot()
    readers = {
        "deltaopt": table_file_stats(lineitem, snapshot),
        "standard": table_file_stats(lineitem, snapshot, None, {}),
    }
    out: dict[str, float] = {"files": float(len(snapshot.files))}
    for reader, stats in readers.items():
        read = kept = 0.0
        for where, columns in queries:
            plan = plan_scan(lineitem, where, columns, snapshot=snapshot, stats=stats)
            read += plan.column_bytes_read or 0
            kept += len(plan.files)
        out[f"{reader}_bytes"] = read / len(queries)
        out[f"{reader}_files"] = kept / len(queries)
    return out


def measured_after(
    lineitem: TableAccess, before: set[str], log: QueryLogTable, config: Config, now: datetime
) -> float | None:
    """Bytes per query the service's workload reads from the files its run wrote (weights as the
    estimate's): the real counterpart of ``bytes_per_query_after``."""
    thresholds = config.tables[0].thresholds
    snapshot = lineitem.snapshot()
    written = [f for f in snapshot.files if f.path not in before]
    if not written:
        return None
    records = log.read("lineitem", since=now - timedelta(seconds=thresholds.workload_window), until=now)
    queries = workload_queries(records, now, thresholds.recency_half_life)
    stats = table_file_stats(lineitem, snapshot, written, load_index(lineitem, snapshot))
    sizes = {f.path: column_sizes(lineitem, f) or {} for f in written}
    weight = sum(q.weight for q in queries)
    return sum(q.weight * query_bytes(q, stats, sizes)[0] for q in queries) / weight if weight else None


def write_config(root: Path, table_path: Path, target: int, min_new: int, row_group: int | None = None) -> Config:
    defaults = {"min_new_bytes": min_new, "target_file_size": target}
    settings = {
        "spark": {"master": "local[2]", "shuffle_partitions": 8},
        "defaults": defaults | ({"row_group_size": row_group} if row_group else {}),
        "tables": [{"name": "lineitem", "path": str(table_path)}],
        "service": {"state_dir": str(root / "state"), "jitter": 0},
        "logging": {"level": "WARNING"},
    }
    path = root / "deltaopt.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return load_config(path)


def run_scenario(
    spark: Any,
    scenario: Scenario,
    parts: Sequence[Path],
    root: Path,
    files_per_part: int,
    *,
    granularity: Granularity,
) -> dict:
    from optimizer.service.service import context, run_once

    root.mkdir(parents=True)
    copies = {name: open_table(str(root / name)) for name in ("none", "manual", "service")}
    for copy in copies.values():
        load_part(spark, copy, parts[0], files_per_part)  # the table exists before the service watches it
    increment = copies["none"].snapshot().total_bytes
    target = granularity.target or max(1 << 20, increment // 6)
    row_group = target // granularity.row_groups if granularity.row_groups else None
    if row_group:  # Delta's writer and OPTIMIZE read Parquet's setting from the session's conf
        spark.conf.set("parquet.block.size", str(row_group))
    if granularity.codec:
        spark.conf.set("spark.sql.parquet.compression.codec", granularity.codec)
    config = write_config(root, root / "service", target, min_new=increment // 2, row_group=row_group)
    thresholds = config.tables[0].thresholds
    log = QueryLogTable(config.tables[0].query_log_path)
    ctx = context(config, spark=lambda: spark)
    held = held_out(scenario.filtered)
    peers = delta_peers(spark, root, target) if scenario.peers else {}
    for peer in peers.values():
        peer.load(spark.read.parquet(str(parts[0])).repartition(files_per_part))
    rng = random.Random(5)
    ticks: list[Tick] = []
    previous_saving = 0.0
    print(f"== {scenario.name}: {scenario.rate:g} queries/hour, {len(parts)} appends", flush=True)
    with Recorder(log, root / "spill", capacity=500) as recorder:
        if scenario.history_hours:
            begin = START - timedelta(hours=scenario.history_hours)
            history = poisson_arrivals(rng, scenario.rate, begin, scenario.history_hours)
            for ts, sql in zip(history, stream(len(history), 500, scenario.filtered), strict=True):
                recorder.record_sql(sql, ts=ts)
        for step, part in enumerate(parts[1:], start=1):
            now = record_hour(
                recorder, rng, scenario.rate, step, lambda count, seed: stream(count, seed, scenario.filtered)
            )
            append_everywhere(spark, part, copies.values(), peers.values(), files_per_part)

            service_before = {f.path for f in copies["service"].snapshot().files}
            unclustered = sum(f.size for f in unclustered_files(copies["service"], copies["service"].snapshot()))
            started = time.perf_counter()
            decision = run_once(ctx, now=now)[0].as_dict()
            tick = Tick(step, decision, time.perf_counter() - started)
            merge = decision.get("merge") or {}
            chosen = merge["estimate"] if merge.get("taken") else decision  # the estimate the job ran on
            if decision.get("action") == "optimize" and chosen.get("benefit"):
                tick.estimated_after = chosen["benefit"]["bytes_per_query_after"]
                tick.measured_after = measured_after(copies["service"], service_before, log, config, now)
                job = decision.get("job") or {}
                tick.service_seconds = job.get("seconds")
                tick.service_rewrite = {
                    "bytes_in": job.get("bytes_in", 0),
                    "bytes_out": job.get("bytes_out", 0),
                    "rewrote_clustered": job.get("bytes_in", 0) > unclustered,
                }
                if tick.measured_after is not None:
                    saved = (chosen["benefit"]["bytes_per_query_before"] - tick.measured_after) / MB
                    queries = scenario.rate * thresholds.benefit_horizon / 3600
                    tick.service_benefit = saved * queries * thresholds.cost_per_mb_read

            for name, peer in peers.items():
                tick.peer_rewrites[name] = peer.optimize().__dict__

            manual = copies["manual"]
            new = unclustered_files(manual, manual.snapshot())
            gated = thresholds.model_copy(update={"selection": "frequency"})  # the thesis's gates choose
            features = analyse_table(TableContext(spark, manual, "lineitem", log, gated, now), files=new).features
            if not features.is_empty:
                result = optimize(spark, manual, features, target, files=new)
                tick.manual_seconds = result.seconds.get("total")
                tick.manual_features = features.as_dict()

            figures = {name: measure(copy, held) for name, copy in copies.items()}
            tick.bytes_per_query = {n: f["deltaopt_bytes"] for n, f in figures.items()}
            tick.standard_bytes_per_query = {n: f["standard_bytes"] for n, f in figures.items()}
            tick.files = {n: (round(f["deltaopt_files"], 1), int(f["files"])) for n, f in figures.items()}
            saving = tick.bytes_per_query["none"] - tick.bytes_per_query["manual"]
            if tick.manual_seconds is not None:
                tick.manual_saved_mb = (saving - previous_saving) / MB
                horizon_queries = scenario.rate * thresholds.benefit_horizon / 3600
                tick.manual_benefit = tick.manual_saved_mb * horizon_queries * thresholds.cost_per_mb_read
                tick.pays_off = tick.manual_benefit > tick.manual_seconds
            previous_saving = saving
            ticks.append(tick)
            print(f"  tick {step}: {decision.get('action')} - {decision.get('reason')}", flush=True)
            print(
                f"    manual: {tick.manual_seconds and round(tick.manual_seconds, 1)} s, saved "
                f"{tick.manual_saved_mb and round(tick.manual_saved_mb, 3)} MB/query, pays off: {tick.pays_off}; "
                f"bytes/query none {tick.bytes_per_query['none'] / MB:.2f} manual "
                f"{tick.bytes_per_query['manual'] / MB:.2f} service {tick.bytes_per_query['service'] / MB:.2f} MB",
                flush=True,
            )
    final = {**copies, **{name: open_table(peer.path) for name, peer in peers.items()}}
    duck = duckdb_files(final, held)
    readers = spark_scans(spark, final, held) if peers else {}
    kept = kept_share.race(spark, final, held) if peers else {}
    return {
        "kept_over_bound": kept,
        "granularity": granularity,
        "scenario": scenario,
        "ticks": ticks,
        "duckdb": duck,
        "target": target,
        "increment": increment,
        "spark_scans": readers,
        "peers": {name: [r.__dict__ for r in peer.rewrites] for name, peer in peers.items()},
        "peer_columns": next(iter(peers.values())).columns if peers else (),
    }


def delta_peers(spark: Any, root: Path, target: int) -> dict[str, DeltaPeer]:
    """Delta's ZORDER BY and liquid clustering on the columns the stream filters most."""
    columns = expert_columns((scan.filters for sql in stream(400, 7, True) for scan in scan_filters(sql).scans), 4)
    return {
        kind: DeltaPeer(spark, str(root / f"delta_{kind}"), kind, columns, target)  # type: ignore[arg-type]
        for kind in ("zorder", "liquid")
    }


def spark_scans(spark: Any, copies: dict[str, TableAccess], held: Sequence[tuple[str | None, tuple[str, ...]]]) -> dict:
    """Per copy, on its final state: mean files and MB Spark's own Delta scan read per held-out query,
    and deltaopt's pruning (column MB) for comparison."""
    from benchmarks.spark_reader import SparkDeltaReader

    reader = SparkDeltaReader(spark)
    out: dict[str, Any] = {}
    for name, copy in copies.items():
        scans = [reader.scan(copy.uri, where, columns) for where, columns in held]
        figures = measure(copy, held)
        out[name] = {
            "files": sum(s.files for s in scans) / len(scans),
            "mb": sum(s.bytes for s in scans) / len(scans) / MB,
            "total_files": scans[0].total,
            "deltaopt_column_mb": figures["deltaopt_bytes"] / MB,
            "standard_column_mb": figures["standard_bytes"] / MB,
        }
    return out


def duckdb_files(copies: dict[str, TableAccess], held: Sequence[tuple[str | None, tuple[str, ...]]]) -> dict:
    """Mean files DuckDB's Delta extension scans per held-out query on each copy's final state."""
    from benchmarks.standard_reader import DuckDBReader

    reader = DuckDBReader()
    out: dict[str, Any] = {}
    try:
        for name, copy in copies.items():
            counts = [reader.files_scanned(copy.uri, where) for where, _ in held]
            known = [c for c in counts if c is not None]
            out[name] = {
                "mean_files": sum(c.files for c in known) / len(known) if known else None,
                "total_files": known[0].total if known else None,
                "unknown": len(counts) - len(known),
            }
        errors = dict(reader.errors.most_common(3))
    finally:
        reader.close()
    return {"copies": out, "errors": errors}


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks flow")
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--appends", type=int, default=8)
    parser.add_argument("--rate", type=float, default=60.0, help="queries per simulated hour")
    parser.add_argument("--low-rate", type=float, default=2.0, help="the too-sparse scenario's rate (7 days logged)")
    parser.add_argument("--files-per-append", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="scale 0.05, 4 appends")
    parser.add_argument("--only", choices=["filtered"], help="run only the filtered stream (with Delta's peers)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--target-kb", type=int, help="target file size of every copy (default: a sixth of an append)")
    parser.add_argument("--row-groups", type=int, help="row groups per target file, for every writer")
    parser.add_argument("--codec", help="Parquet codec of Spark's writers (Delta's peers), e.g. zstd as deltaopt's")
    args = parser.parse_args(argv)
    granularity = Granularity(args.target_kb and args.target_kb << 10, args.row_groups, args.codec)
    if args.quick:
        args.scale, args.appends = 0.05, 4
    work = Path(tempfile.mkdtemp(prefix="deltaopt-flow-"))
    print(f"work directory: {work}" + (" (kept)" if args.keep else ""), flush=True)
    spark = build_session(load_config_spark())
    parts = tpch.generate("lineitem", args.scale, work / "tpch", parts=args.appends + 1)
    scenarios = (
        Scenario("filtered stream", args.rate, True, "optimise when the manual run pays off", peers=True),
        Scenario(
            "filtered stream, too sparse to pay", args.low_rate, True, "skip: too few queries", history_hours=7 * 24
        ),
        Scenario("unfiltered stream", args.rate, False, "skip: nothing to skip"),
    )
    if args.only:
        scenarios = scenarios[:1]
    results = []
    name = ("flow" if not args.quick else "flow-quick") + (f"-{args.only}" if args.only else "")
    name += "-granular" if args.target_kb or args.row_groups else ""
    try:
        for i, scenario in enumerate(scenarios):
            results.append(
                run_scenario(spark, scenario, parts, work / f"s{i}", args.files_per_append, granularity=granularity)
            )
            save_raw(results, Path(__file__).parent / "reports" / f"{name}.json")  # kept if a later step fails
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    body = render(results, args.scale, args.appends)
    print(body)
    command = f"python -m benchmarks flow --scale {args.scale} --appends {args.appends} --rate {args.rate:g}" + (
        f" --only {args.only}" if args.only else ""
    )
    for option, value in (("--target-kb", args.target_kb), ("--row-groups", args.row_groups), ("--codec", args.codec)):
        command += f" {option} {value}" if value else ""
    write_report(name, "The product flow: appends, a live stream, ticks", body, command)


def load_config_spark():
    from optimizer.config import SparkSettings

    return SparkSettings(master="local[2]", shuffle_partitions=8, driver_memory="4g")
