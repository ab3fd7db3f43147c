"""Liquid tables under the service against an expert's keys and deltaopt's own layout (issue 47, item 5).

    python -m benchmarks liquid [--scale 0.1] [--initial 5] [--shift 8] [--stable 20] [--rate 60] [--quick]

TPC-H ``lineitem`` sorted by ``l_shipdate`` and cut into batches (`benchmarks.replay_data`), one batch
appended per simulated hour to three copies while a live Poisson stream is recorded through the
`Recorder` (`benchmarks.flow_bench.record_hour`):

* **expert** (a): a liquid table created ``CLUSTER BY`` the columns the first stream filters most
  (`benchmarks.delta_peers.expert_columns`), Delta's ``OPTIMIZE`` after every append;
* **service** (b): a liquid table created ``CLUSTER BY`` a column no stream filters, watched by the
  service with ``liquid: set``: it picks the keys and runs Delta's ``OPTIMIZE`` only when it decides to;
* **deltaopt** (c): a plain copy written by deltaopt's writer, laid out by the service's own layouts
  (the flow benchmark's "service" copy).

Phases: ``--initial`` ticks of the TPC-H-like stream (date, price, quantity ranges), ``--shift`` ticks of
another family (`benchmarks.drift_bench.phase_two`: part and supplier key ranges, ship modes), then
``--stable`` ticks of that second family unchanged. Hours stand for days (a 12 h workload window, a 2 h
recency half-life), as in the drift benchmark. Every tick measures the three copies on held-out queries
of the current phase: compressed column bytes a Delta min/max reader reads, and Spark's own Delta scan.
Rendered by `benchmarks.liquid_report`, with the issue's done-when checks as measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from benchmarks.common import write_report
from benchmarks.delta_peers import MAX_FILE_SIZE, DeltaPeer, expert_columns
from benchmarks.drift_bench import held_out, phase_two
from benchmarks.flow_bench import append_everywhere, load_config_spark, measure, record_hour, spark_scans
from benchmarks.liquid_checks import COPIES
from benchmarks.liquid_report import render
from benchmarks.replay_data import batches
from optimizer import tpch
from optimizer.config import Config, load_config
from optimizer.demo import load_part
from optimizer.runtime import build_session
from optimizer.table import TableAccess, open_table
from optimizer.table.delta_sql import DeltaSql
from querylog.predicates.attribute import scan_filters
from querylog.recorder import Recorder
from querylog.store import QueryLogTable

REPORTS = Path(__file__).parent / "reports"
Stream = Callable[[int, int], Sequence[str]]
Held = list[tuple[str | None, tuple[str, ...]]]


@dataclass(frozen=True)
class Phase:
    name: str
    ticks: int
    draw: Stream  # (count, seed) -> SQL of the stream
    held: Held  # held-out queries of the same stream, another seed: every copy, every tick, Spark's scan too
    judged: Held  # more of them, the estimate's saving is judged on: (b) right before and after its jobs,
    # min/max over the files' statistics only, cheap (30 queries left a run's realised saving to chance:
    # one query in a range the job happened to split moved it by a third)


@dataclass
class Bench:
    """The three copies, the two services and the shared query log of one run."""

    spark: Any
    expert: DeltaPeer
    liquid: DeltaPeer
    plain: TableAccess
    services: dict[str, Any]  # copy name -> its service context
    log: QueryLogTable
    target: int
    rate: float  # queries per simulated hour
    files: int  # files per append
    rng: random.Random  # the stream's arrivals


def phases(args: argparse.Namespace) -> list[Phase]:
    """The stream before the shift, after it, and the same stream held stable."""
    first: Stream = lambda count, seed: tpch.lineitem_queries(count, seed=seed)  # noqa: E731
    second: Stream = phase_two(args.scale)
    held_first = held_out(first(args.held_out, 999))
    held_second = held_out(second(args.held_out, 998))
    judged_first = held_out(first(args.judged, 997))
    judged_second = held_out(second(args.judged, 996))
    return [
        Phase("initial", args.initial, first, held_first, judged_first),
        Phase("shift", args.shift, second, held_second, judged_second),
        Phase("stable", args.stable, second, held_second, judged_second),
    ]


def filtered_columns(draw: Stream) -> set[str]:
    """The columns 400 queries of a stream filter on (as the log's attribution names them)."""
    return {f.split(" ")[0] for sql in draw(400, 7) for scan in scan_filters(sql).scans for f in scan.filters}


def service_config(root: Path, name: str, path: str, thresholds: dict[str, Any], **table: Any) -> Config:
    """One service watching one copy, the shared query log (``table_id: lineitem``), its own state."""
    entry = {"name": name, "path": path, "table_id": "lineitem", "query_log": str(root / "querylog"), **table}
    settings = {
        "spark": {"master": "local[2]", "shuffle_partitions": 8},
        "defaults": thresholds,
        "tables": [entry],
        "service": {"state_dir": str(root / f"state-{name}"), "jitter": 0},
        "logging": {"level": "WARNING"},
    }
    config = root / f"{name}.yaml"
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    return load_config(config)


def write_parts(args: argparse.Namespace, work: Path, count: int) -> list[Path]:
    """`count` shipdate-ordered batches of lineitem as Parquet files (rows shuffled inside a batch)."""
    out = []
    for i, part in enumerate(batches("lineitem", args.scale, count, work)):
        path = work / "parts" / f"part-{i:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(part, path)
        out.append(path)
    return out


def setup(spark: Any, args: argparse.Namespace, root: Path, first: Path, expert_keys: tuple[str, ...]) -> Bench:
    """The three copies holding the first batch, and a service for (b) and one for (c)."""
    from optimizer.service.service import context

    plain = open_table(str(root / "deltaopt"))
    load_part(spark, plain, first, args.files_per_append)
    increment = plain.snapshot().total_bytes
    target = max(1 << 20, increment // 6) if args.target_mb is None else int(args.target_mb * (1 << 20))
    spark.conf.set(MAX_FILE_SIZE, str(target))  # the cluster's file size, for (a)'s and (b)'s OPTIMIZE alike
    expert = DeltaPeer(spark, str(root / "expert"), "liquid", expert_keys, target)
    liquid = DeltaPeer(spark, str(root / "service"), "liquid", (args.initial_key,), target)
    for peer in (expert, liquid):
        peer.load(spark.read.parquet(str(first)).repartition(args.files_per_append))
    thresholds = {
        "min_new_bytes": increment // 2,
        "target_file_size": target,
        "sample_rows": 50_000,
        "workload_window": "12h",
        "recency_half_life": "2h",
    }
    services = {
        "service": context(service_config(root, "service", liquid.path, thresholds, liquid="set"), spark=lambda: spark),
        "deltaopt": context(service_config(root, "deltaopt", str(root / "deltaopt"), thresholds), spark=lambda: spark),
    }
    log = QueryLogTable(str(root / "querylog"))
    return Bench(
        spark,
        expert=expert,
        liquid=liquid,
        plain=plain,
        services=services,
        log=log,
        target=target,
        rate=args.rate,
        files=args.files_per_append,
        rng=random.Random(5),
    )


def tick(bench: Bench, recorder: Recorder, step: int, phase: Phase, part: Path) -> dict[str, Any]:
    """One simulated hour: the stream recorded, the batch appended everywhere, (a) optimised, both
    services ticked, and every copy measured on the phase's held-out queries."""
    from optimizer.service.service import run_once

    now = record_hour(recorder, bench.rng, bench.rate, step, phase.draw)
    append_everywhere(bench.spark, part, [bench.plain], [bench.expert, bench.liquid], bench.files)
    expert = bench.expert.optimize()
    before = measure(open_table(bench.liquid.path), phase.judged)
    started = time.perf_counter()
    record = run_once(bench.services["service"], now=now)[0].as_dict()
    service = brief(record, time.perf_counter() - started)
    if service["committed"]:
        service["held_before"] = before
        service["held_after"] = measure(open_table(bench.liquid.path), phase.judged)
    service["keys_after"] = list(DeltaSql(bench.spark, bench.liquid.path).clustering_columns() or ())
    service["measured"] = realised_state(bench.services["service"])
    started = time.perf_counter()
    plain = brief(run_once(bench.services["deltaopt"], now=now)[0].as_dict(), time.perf_counter() - started)
    tables = {
        "expert": open_table(bench.expert.path),
        "service": open_table(bench.liquid.path),
        "deltaopt": bench.plain,
    }
    return {
        "step": step,
        "phase": phase.name,
        "now": now.isoformat(),
        "load": os.getloadavg()[0],
        "expert": {"optimize": expert.__dict__},
        "service": service,
        "deltaopt": plain,
        "scans": spark_scans(bench.spark, tables, phase.held),
    }


def realised_state(ctx: Any) -> dict[str, Any]:
    """The service's own realised figures from its state (`service.realised`): the table's totals and each
    job still measured. Read from the state, not the record: a tick that starts a job returns the job's
    record, which carries no ``realised`` section."""
    from optimizer.service.realised import figures, totals_dict

    table = ctx.config.tables[0]
    state = ctx.state.load(table.name)
    jobs = [figures(job, table.thresholds) for job in state.measured]
    return {"totals": totals_dict(state.realised), "jobs": jobs}


def brief(record: dict[str, Any], seconds: float) -> dict[str, Any]:
    """What the report needs of a tick record: the verdict, the liquid section, the estimate behind the
    job, the job, and the realised figures of earlier jobs the service measured."""
    job = record.get("job") or {}
    liquid = record.get("liquid") or {}
    estimates = {name: _estimate(liquid.get(name)) for name in ("current", "change", "full_change")}
    committed = job.get("version") is not None and not job.get("error") and not job.get("not_started")
    return {
        "action": record.get("action"),
        "reason": record.get("reason") or "",
        "features": record.get("features"),
        "benefit": _estimate(record).get("benefit") if committed else None,
        "liquid": {k: v for k, v in liquid.items() if k not in estimates} | {"estimates": estimates},
        "job": {k: job.get(k) for k in ("run_id", "version", "seconds", "bytes_in", "bytes_out", "error")},
        "committed": committed,
        "realised": record.get("realised") or [],
        "tick_seconds": round(seconds, 2),
    }


def _estimate(decision: dict[str, Any] | None) -> dict[str, Any]:
    """An estimate's net, cost and benefit figures (empty when there is none)."""
    if not decision:
        return {}
    benefit = decision.get("benefit") or {}
    keep = (
        "bytes_per_query_before",
        "bytes_per_query_after_skipping",  # at today's bytes: the skipping part, compression apart
        "bytes_per_query_after",
        "bytes_per_query_total",
        "benefit",
        "saved_mb_per_query",
    )
    return {
        "net": decision.get("net"),
        "cost": (decision.get("cost") or {}).get("seconds"),
        "features": decision.get("features"),
        "benefit": {k: benefit.get(k) for k in keep}
        | {"stored_ratio": (benefit.get("compression") or {}).get("ratio"), "calibration": benefit.get("calibration")}
        if benefit
        else None,
    }


def run(spark: Any, args: argparse.Namespace, work: Path, raw: Path) -> dict[str, Any]:
    """The whole run: setup, then every phase's ticks; the raw figures saved after each tick."""
    plan = phases(args)
    expert_keys = expert_columns((scan.filters for sql in plan[0].draw(400, 7) for scan in scan_filters(sql).scans), 4)
    streamed = filtered_columns(plan[0].draw) | filtered_columns(plan[1].draw)
    if args.initial_key in streamed:
        raise SystemExit(f"--initial-key {args.initial_key}: the stream filters on it; pick a column it never filters")
    total = sum(p.ticks for p in plan)
    parts = write_parts(args, work, total + 1)
    bench = setup(spark, args, work / "tables", parts[0], expert_keys)
    result: dict[str, Any] = {"args": vars(args), "expert_keys": expert_keys, "target": bench.target, "ticks": []}
    result["increment"] = bench.plain.snapshot().total_bytes
    result["settings"] = _liquid_settings(bench)
    step = 0
    with Recorder(bench.log, work / "spill", capacity=500) as recorder:
        for phase in plan:
            for _ in range(phase.ticks):
                step += 1
                result["ticks"].append(tick(bench, recorder, step, phase, parts[step]))
                _progress(result["ticks"][-1])
                raw.write_text(json.dumps(result, indent=1, default=str))
    return result


def _liquid_settings(bench: Bench) -> dict[str, Any]:
    thresholds = bench.services["service"].config.tables[0].thresholds
    return {
        "liquid_key_ticks": thresholds.liquid_key_ticks,
        "liquid_key_margin": thresholds.liquid_key_margin,
        "cost_per_mb_read": thresholds.cost_per_mb_read,
        "readers": dict(thresholds.readers),
    }


def _progress(t: dict[str, Any]) -> None:
    service, scans = t["service"], t["scans"]
    mb = " ".join(f"{name} {scans[name]['standard_column_mb']:.2f}" for name in COPIES)
    operation = service["liquid"].get("operation") or service["action"]
    print(
        f"  {t['step']:3} {t['phase']:8} min/max MB/q: {mb} | (b) {operation} keys {service['keys_after']} "
        f"| (c) {t['deltaopt']['action']} | load {t['load']:.1f}",
        flush=True,
    )


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks liquid")
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--initial", type=int, default=5, help="ticks of the first stream")
    parser.add_argument("--shift", type=int, default=8, help="ticks after the stream moved to other columns")
    parser.add_argument("--stable", type=int, default=20, help="ticks more of the moved stream, unchanged")
    parser.add_argument("--within", type=int, default=6, help="ticks after the shift a key change must come within")
    parser.add_argument("--rate", type=float, default=60.0, help="queries per simulated hour")
    parser.add_argument("--files-per-append", type=int, default=10)
    parser.add_argument("--held-out", type=int, default=30, help="held-out queries per phase")
    parser.add_argument("--judged", type=int, default=300, help="held-out queries per phase (b)'s jobs are judged on")
    parser.add_argument("--initial-key", default="l_linenumber", help="(b)'s first key: a column no stream filters")
    parser.add_argument("--target-mb", type=float, default=None, help="file size (default: an increment / 6, >= 1 MiB)")
    parser.add_argument("--quick", action="store_true", help="scale 0.05, 3 + 4 + 3 ticks, 15 held-out queries")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--from-raw", type=Path, help="render the report of a saved raw JSON (e.g. a stopped run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.initial, args.shift, args.stable, args.held_out, args.judged = 0.05, 3, 4, 3, 15, 60
    return args


def main(argv: Sequence[str]) -> None:
    args = parse(argv)
    if args.from_raw is not None:  # a stopped run, or a report rendered again: the raw file's own figures
        result = json.loads(args.from_raw.read_text())
        note = f"\n(Rendered from {args.from_raw.name}, the raw figures of the run it names, after the run.)\n"
        _report(args.from_raw.stem, result, note)
        return
    name = "liquid-quick" if args.quick else "liquid"
    work = Path(tempfile.mkdtemp(prefix="deltaopt-liquid-"))
    REPORTS.mkdir(parents=True, exist_ok=True)
    raw = REPORTS / f"{name}.json"
    started = time.perf_counter()
    try:
        result = run(build_session(load_config_spark()), args, work, raw)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    raw.write_text(json.dumps(result, indent=1, default=str))
    _report(name, result, "")


def _report(name: str, result: dict[str, Any], note: str) -> None:
    """Print the report and write it beside the raw JSON."""
    body = render(result) + note
    print(body)
    args = result["args"]
    command = (
        f"python -m benchmarks liquid --scale {args['scale']} --initial {args['initial']} --shift {args['shift']} "
        f"--stable {args['stable']} --rate {args['rate']:g} --held-out {args['held_out']} --within {args['within']}"
        + (f" --judged {args['judged']}" if "judged" in args else "")
    )
    title = "Liquid tables under the service: expert keys, the service's keys, deltaopt's layout"
    write_report(name, title, body, command)
