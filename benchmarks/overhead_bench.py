"""The cost of deciding against the cost of doing, as new data grows.

    python -m benchmarks overhead [--sizes 0.1,0.3,1] [--quick] [--report NAME]

For each size (GB of new, unclustered ``lineitem`` data appended by ``write_deltalake`` in 8 appends)
with the replay's query stream logged (60 queries, both phases), one decision (`estimate`: analysis,
feature search, layout comparison with compression) is timed after a warm-up decision on a small
table (a long-running service pays JVM warm-up once), then the OPTIMIZE job it chose (or, when it
skips, the job of its closest layout) is run and timed. The ratio decision / job is the decision
overhead (issue 11's target: <= 25% at 1 GB, heading under 5% by 10 GB); the curve over the sizes
shows where it heads. Both are measured in the same process, one after the other.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks.common import table, write_report
from benchmarks.replay_bench import HOUR, START, insert
from benchmarks.replay_data import _plain, queries, schema_of
from costmodel.cost import DEFAULT_MODEL
from optimizer import tpch
from optimizer.analysis import TableContext
from optimizer.clustering import optimize
from optimizer.config import SparkSettings, Thresholds
from optimizer.estimate.decision import estimate
from optimizer.features import FeatureSet
from optimizer.runtime import build_session
from optimizer.table import open_table
from querylog.capture import SqlContext
from querylog.recorder import Recorder
from querylog.store import QueryLogTable

MB_PER_SCALE = 219.0  # lineitem MB per TPC-H scale factor as delta-rs writes it (measured in the replay)
APPENDS = 8


def build(work: Path, gigabytes: float) -> tuple[str, str, float]:
    """lineitem with about `gigabytes` of data in 8 appends, and a query log; (table, log, seconds)."""
    started = time.perf_counter()
    scale = round(gigabytes * 1000 / MB_PER_SCALE, 3)
    parts = tpch.generate("lineitem", scale, work / "tpch", parts=APPENDS)
    uri = str(work / "lineitem")
    first = None
    for path in parts:
        batch = _plain(pq.read_table(path))
        if first is None:
            first = batch
        insert(uri, batch)
        path.unlink()
    assert first is not None
    orders = _plain(pq.read_table(tpch.generate("orders", 0.01, work / "tpch")[0]))
    schema = schema_of({"lineitem": first, "orders": orders})
    log = str(work / "querylog")
    rng = random.Random(3)
    with Recorder(QueryLogTable(log), work / "spill", context=SqlContext(schema=schema)) as recorder:
        for i, (_, sql) in enumerate(queries(1, 40, rng) + queries(2, 20, rng)):
            recorder.record_sql(sql, ts=START + HOUR * (i / 10))
    return uri, log, time.perf_counter() - started


def measure(spark: Any, uri: str, log: str, thresholds: Thresholds) -> dict[str, Any]:
    """One timed decision, then the job it chose (or its closest layout's), timed."""
    lineitem = open_table(uri)
    now = START + HOUR * 7
    started = time.perf_counter()
    decision = estimate(TableContext(spark, lineitem, "lineitem", QueryLogTable(log), thresholds, now, DEFAULT_MODEL))
    decide = time.perf_counter() - started
    features = decision.features or FeatureSet()
    result = optimize(spark, lineitem, features, thresholds.target_file_size)
    return {
        "new_bytes": decision.new_bytes,
        "decision_seconds": round(decide, 2),
        "decision_steps": decision.seconds,
        "search_estimates": decision.search.estimates if decision.search is not None else None,
        "action": decision.action,
        "features": features.as_dict(),
        "estimated_job_seconds": round(decision.cost.seconds, 1) if decision.cost else None,
        "job_seconds": round(result.seconds.get("total", 0.0), 2),
        "job_steps": dict(result.seconds),
    }


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks overhead")
    parser.add_argument("--sizes", default="0.1,0.3,1", help="GB of new data, comma-separated")
    parser.add_argument("--quick", action="store_true", help="sizes 0.02,0.05")
    parser.add_argument("--report", default="overhead", help="report name (a separate run keeps its own)")
    args = parser.parse_args(argv)
    sizes = [0.02, 0.05] if args.quick else [float(s) for s in args.sizes.split(",")]
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=8, driver_memory="8g"))
    work = Path(tempfile.mkdtemp(prefix="deltaopt-overhead-"))
    rows = []
    try:
        warm_uri, warm_log, _ = build(work / "warm", 0.02)
        measure(spark, warm_uri, warm_log, Thresholds(min_new_bytes=0, target_file_size=4 << 20))
        for gigabytes in sizes:
            uri, log, built = build(work / f"g{gigabytes:g}", gigabytes)
            target = 128 << 20 if gigabytes >= 0.5 else 32 << 20
            figures = measure(spark, uri, log, Thresholds(min_new_bytes=0, target_file_size=target))
            figures |= {"gigabytes": gigabytes, "target_file_size": target, "build_seconds": round(built, 1)}
            rows.append(figures)
            print(json.dumps(figures), flush=True)
            shutil.rmtree(work / f"g{gigabytes:g}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    name = "overhead-quick" if args.quick else args.report
    (Path(__file__).parent / "reports" / f"{name}.json").write_text(json.dumps(rows, indent=1))
    body = table(
        ("new data", "decision s", "analyse / search / benefit s", "search estimates", "job s", "decision / job"),
        [
            (
                f"{r['new_bytes'] / 1e9:.2f} GB",
                f"{r['decision_seconds']:.1f}",
                " / ".join(f"{r['decision_steps'].get(k, 0):.1f}" for k in ("analyse", "search", "benefit")),
                r["search_estimates"],
                f"{r['job_seconds']:.1f}",
                f"{r['decision_seconds'] / r['job_seconds']:.0%}" if r["job_seconds"] else "-",
            )
            for r in rows
        ],
    )
    print(body)
    command = f"python -m benchmarks overhead --sizes {','.join(f'{s:g}' for s in sizes)}"
    if name not in ("overhead", "overhead-quick"):
        command += f" --report {name}"
    write_report(name, "Decision overhead against the job, as new data grows", body, command)
