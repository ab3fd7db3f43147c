"""Layouts chosen for standard readers vs for deltaopt's pruning, each measured by both readers.

    python -m benchmarks readers [--scale 0.1] [--hours 6] [--rate 60] [--quick]

One table (TPC-H ``lineitem`` loaded as small files, as a streaming writer leaves them) and one logged
workload: the TPC-H-like stream of the flow benchmark (ranges on dates, quantities and discounts, and
recurring whole predicates such as ``l_shipmode IN ('MAIL', 'SHIP')``), ``--rate`` queries per hour for
``--hours`` hours. Two copies are optimised with the features the estimate chooses, one with
``readers: standard`` (the default) and one with ``readers: deltaopt`` (which scores layouts as
every estimate did before readers existed), and a third as the estimator chose before this change
(``readers: deltaopt`` with ``selection: frequency``: the thesis's gates, then the best of the layout
variants: "today's choice"). Each copy is then measured on held-out queries of the same stream by
three readers:

* deltaopt's pruning (`plan_scan` with every statistic),
* a standard reader modelled by the same pruning on the Delta log's statistics only,
* DuckDB's Delta extension (an independent standard reader): files scanned per query from
  ``EXPLAIN ANALYZE``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.common import table, write_report
from benchmarks.flow_bench import (
    duckdb_files,
    held_out,
    load_config_spark,
    measure,
    poisson_arrivals,
    stream,
)
from benchmarks.flow_model import START
from costmodel.benefit import MB
from costmodel.cost import DEFAULT_MODEL
from optimizer import tpch
from optimizer.analysis import TableContext
from optimizer.clustering import optimize
from optimizer.config import Thresholds
from optimizer.demo import load_part
from optimizer.estimate.decision import estimate
from optimizer.features import FeatureSet
from optimizer.runtime import build_session
from optimizer.table import open_table
from querylog.recorder import Recorder
from querylog.store import QueryLogTable

READERS = ("standard", "deltaopt", "before")
SETTINGS: dict[str, dict[str, Any]] = {
    "standard": {"readers": "standard"},
    "deltaopt": {"readers": "deltaopt"},
    "before": {"readers": "deltaopt", "selection": "frequency"},
}
LABELS = {
    "none": "none",
    "standard": "readers: standard",
    "deltaopt": "readers: deltaopt",
    "before": "before (deltaopt, frequency gates)",
}


def run(spark: Any, part: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    copies = {name: open_table(str(work / name)) for name in ("none", *READERS)}
    for copy in copies.values():
        load_part(spark, copy, part, args.files)
    size = copies["none"].snapshot().total_bytes
    log = QueryLogTable(str(work / "querylog"))
    rng = random.Random(11)
    arrivals = poisson_arrivals(rng, args.rate, START, args.hours)
    with Recorder(log, work / "spill", capacity=500) as recorder:
        for ts, sql in zip(arrivals, stream(len(arrivals), 77, True), strict=True):
            recorder.record_sql(sql, ts=ts)
    now = START + timedelta(hours=args.hours)
    decisions: dict[str, dict[str, Any]] = {}
    for reader in READERS:
        thresholds = Thresholds(
            min_new_bytes=1, target_file_size=max(1 << 20, size // 12), sample_rows=50_000, **SETTINGS[reader]
        )
        decision = estimate(TableContext(spark, copies[reader], "lineitem", log, thresholds, now, DEFAULT_MODEL))
        decisions[reader] = decision.as_dict()
        print(f"  readers: {reader}: {decision.action} - {decision.reason}", flush=True)
        features = decision.features or FeatureSet()
        if not features.is_empty:
            optimize(spark, copies[reader], features, thresholds.target_file_size)
    held = held_out(True)
    figures = {name: measure(copy, held) for name, copy in copies.items()}
    duck = duckdb_files(copies, held)
    return {"bytes": size, "scans": len(arrivals), "decisions": decisions, "figures": figures, "duckdb": duck}


def render(result: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"TPC-H lineitem scale {args.scale}, {result['bytes'] / MB:.1f} MB in {args.files} files; {result['scans']} "
        f"logged queries ({args.rate:g}/h for {args.hours:g} h); measured on 100 held-out queries of the same "
        "stream.\n",
    ]
    rows = []
    duck = result["duckdb"]["copies"]
    for name in ("none", *READERS):
        f = result["figures"][name]
        decision = result["decisions"].get(name) or {}
        features = decision.get("features") or {}
        layout = (
            f"Z {features.get('z') or []}, SOP {len(features.get('sop') or [])}" if name != "none" else "not optimised"
        )
        d = duck[name]
        rows.append(
            (
                LABELS[name],
                layout,
                f"{f['standard_files']:.1f}/{f['files']:.0f}",
                f"{d['mean_files']:.1f}/{d['total_files']}" + (f" ({d['unknown']} unknown)" if d["unknown"] else "")
                if d["mean_files"] is not None
                else "-",
                f"{f['deltaopt_files']:.1f}/{f['files']:.0f}",
                f"{f['standard_bytes'] / MB:.2f}",
                f"{f['deltaopt_bytes'] / MB:.2f}",
            )
        )
    lines.append(
        table(
            (
                "layout chosen for",
                "features",
                "files kept: standard model",
                "files scanned: DuckDB",
                "files kept: deltaopt",
                "MB/query: standard",
                "MB/query: deltaopt",
            ),
            rows,
        )
    )
    lines.append("\nEstimates behind each choice (bytes per query before -> after, per reader):\n")
    for reader in READERS:
        benefit = result["decisions"][reader].get("benefit") or {}
        per = benefit.get("readers") or {}
        lines.append(
            f"* {LABELS[reader]}: "
            + "; ".join(
                f"{name} ({v['share']:.0%}) {v['bytes_per_query_before'] / MB:.2f} -> "
                f"{v['bytes_per_query_after'] / MB:.2f}"
                for name, v in per.items()
            )
            + f"; layouts compared: {[lay['layout'] for lay in result['decisions'][reader].get('layouts') or []]}"
        )
    standard, before = result["figures"]["standard"], result["figures"]["before"]

    def files(name: str) -> str:
        mean = duck[name]["mean_files"]
        return "?" if mean is None else f"{mean:.1f}"

    lines.append(
        f"\nVerdict: for standard readers the layout chosen with `readers: standard` reads "
        f"{standard['standard_bytes'] / MB:.2f} MB per query against {before['standard_bytes'] / MB:.2f} MB for the "
        f"choice made before this change, DuckDB scanning {files('standard')} vs {files('before')} files; with "
        f"deltaopt's pruning: {standard['deltaopt_bytes'] / MB:.2f} vs {before['deltaopt_bytes'] / MB:.2f} MB.\n"
    )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks readers")
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--rate", type=float, default=60.0)
    parser.add_argument("--files", type=int, default=40, help="small files the table is loaded as")
    parser.add_argument("--quick", action="store_true", help="scale 0.03, 2 hours")
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.hours = 0.03, 2.0
    work = Path(tempfile.mkdtemp(prefix="deltaopt-readers-"))
    spark = build_session(load_config_spark())
    name = "readers" if not args.quick else "readers-quick"
    try:
        (part,) = tpch.generate("lineitem", args.scale, work / "tpch")
        result = run(spark, part, work / "run", args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (Path(__file__).parent / "reports" / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    body = render(result, args)
    print(body)
    command = f"python -m benchmarks readers --scale {args.scale} --hours {args.hours:g} --rate {args.rate:g}"
    write_report(name, "Layouts for standard readers vs deltaopt's pruning", body, command)
