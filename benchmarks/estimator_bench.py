"""Benefit-estimation accuracy (thesis Table 5.1) and the estimator's overhead.

    python -m benchmarks estimator [--scale 0.2] [--queries 200]

For 0-3 Z features x 0/4/8/12 SOP features on TPC-H lineitem: estimate the scanned-bytes reduction of
the workload with virtual files, then actually cluster a copy of the data with the same features and
measure the real reduction (same pruning, real Parquet footers). The error factor is
max(estimated / real, real / estimated) of the reduction per query. The overhead is the estimator's
time (sample, virtual layout, replay) relative to the clustering's.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.common import table, write_report
from optimizer import tpch
from optimizer.analysis.sample import sample_frame
from optimizer.clustering import optimize
from optimizer.config import SparkSettings, Thresholds
from optimizer.demo import load_part
from optimizer.estimate.layouts import benefit_of
from optimizer.estimate.replay import workload_queries
from optimizer.features import FeatureSet, SopFeature, ZFeature
from optimizer.runtime import build_session
from optimizer.skipping.scan import column_sizes, table_file_stats
from optimizer.table import open_table
from querylog.predicates.attribute import scan_filters
from querylog.records import ScanRecord

NOW = datetime(2024, 6, 1, tzinfo=UTC)
Z = ("l_shipdate", "l_extendedprice", "l_quantity")
SOP = tpch.LINEITEM_SOP_FEATURES


def workload(count: int) -> list[ScanRecord]:
    """Range filters on the Z columns with changing literals, plus 0-2 of the 12 fixed predicates."""
    rng = random.Random(5)
    records = []
    for i in range(count):
        sql = tpch.lineitem_queries(1, seed=rng.randrange(1 << 30))[0]
        where = sql.split(" WHERE ", 1)[1]
        extra = rng.sample(SOP, rng.choice((0, 1, 1, 2)))
        query = f"SELECT l_orderkey, l_extendedprice FROM lineitem WHERE {' AND '.join([where, *extra])}"
        (scan,) = scan_filters(query).scans
        records.append(ScanRecord(f"q{i}", NOW - timedelta(minutes=i), "lineitem", scan.filters, scan.columns, "bench"))
    return records


def real_bytes_per_query(lineitem, records, thresholds) -> float:  # type: ignore[no-untyped-def]
    from optimizer.estimate.replay import query_bytes

    snapshot = lineitem.snapshot()
    stats = table_file_stats(lineitem, snapshot)
    sizes = {f.path: column_sizes(lineitem, f) or {} for f in snapshot.files}
    queries = workload_queries(records, NOW, thresholds.recency_half_life)
    weight = sum(q.weight for q in queries)
    return sum(q.weight * query_bytes(q, stats, sizes)[0] for q in queries) / weight


def run(scale: float = 0.2, queries: int = 200) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="deltaopt-estimator-"))
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=8, driver_memory="8g"))
    base = open_table(str(work / "base"))
    for part in tpch.generate("lineitem", scale, work / "tpch", parts=8):
        load_part(spark, base, part, files_per_part=4)
    snapshot = base.snapshot()
    records = workload(queries)
    target = max(1 << 20, snapshot.total_bytes // 64)
    thresholds = Thresholds(sample_rows=100_000, target_file_size=target)
    sample = sample_frame(spark, base, snapshot, snapshot.files, thresholds.sample_rows).cache()
    sample.count()
    figures = []
    for nz in range(4):
        for ns in (0, 4, 8, 12):
            features = FeatureSet(
                z=tuple(ZFeature(z) for z in Z[:nz]),
                sop=tuple(SopFeature(p) for p in SOP[:ns]),
                sop_weights={p: 1.0 for p in SOP[:ns]},
            )
            started = time.perf_counter()
            estimate = benefit_of(
                base,
                snapshot,
                snapshot.files,
                features=features,
                sample=sample,
                records=records,
                thresholds=thresholds,
                now=NOW,
            )
            estimate_seconds = time.perf_counter() - started
            copy = work / f"z{nz}s{ns}"
            shutil.copytree(base.uri, copy)
            clustered = open_table(str(copy))
            result = optimize(spark, clustered, features, target) if not features.is_empty else None
            real_after = real_bytes_per_query(clustered, records, thresholds)
            before = estimate.bytes_per_query_before
            estimated_reduction = before - estimate.bytes_per_query_after
            real_reduction = before - real_after
            if min(estimated_reduction, real_reduction) > 0.01 * before:
                factor = max(estimated_reduction / real_reduction, real_reduction / estimated_reduction)
            else:
                factor = None
            cluster_seconds = result.seconds.get("total", 0.0) if result else 0.0
            figures.append(
                {
                    "z": nz,
                    "sop": ns,
                    "before": before,
                    "estimated_after": estimate.bytes_per_query_after,
                    "real_after": real_after,
                    "error_factor": factor,
                    "estimate_seconds": estimate_seconds,
                    "cluster_seconds": cluster_seconds,
                }
            )
            print(figures[-1], flush=True)
            shutil.rmtree(copy, ignore_errors=True)
    grid = [
        [f"{nz} Z"]
        + [
            (lambda f: "-" if f["error_factor"] is None else f"{f['error_factor']:.2f}")(
                next(f for f in figures if f["z"] == nz and f["sop"] == ns)
            )
            for ns in (0, 4, 8, 12)
        ]
        for nz in range(4)
    ]
    detail = [
        (
            f["z"],
            f["sop"],
            f"{f['before'] / 1e6:.2f}",
            f"{f['estimated_after'] / 1e6:.2f}",
            f"{f['real_after'] / 1e6:.2f}",
            "-" if f["error_factor"] is None else f"{f['error_factor']:.2f}",
            f"{f['estimate_seconds']:.1f} s",
            f"{f['cluster_seconds']:.1f} s",
        )
        for f in figures
    ]
    factors = [f["error_factor"] for f in figures if f["error_factor"] is not None]
    overhead = sum(f["estimate_seconds"] for f in figures if f["cluster_seconds"]) / max(
        sum(f["cluster_seconds"] for f in figures), 1e-9
    )
    body = (
        f"TPC-H lineitem scale {scale} ({snapshot.num_records:,} rows, {snapshot.total_bytes / 1e6:.0f} MB, "
        f"{len(snapshot.files)} files), {queries} queries, sample {thresholds.sample_rows:,} rows, "
        f"target file size {target / 1e6:.1f} MB.\n\n"
        "Error factor of the estimated scanned-bytes reduction (max(est/real, real/est)):\n\n"
        + table(("", "0 SOP", "4 SOP", "8 SOP", "12 SOP"), grid)
        + f"\n\nWorst {max(factors):.2f}, median {sorted(factors)[len(factors) // 2]:.2f} "
        "(thesis Table 5.1: up to 1.44). "
        f"Estimator time / clustering time: {overhead:.1%}.\n\n"
        + table(
            ("Z", "SOP", "MB/query before", "estimated after", "real after", "factor", "estimate", "cluster"), detail
        )
        + f"\n\n```json\n{json.dumps(figures, indent=1)}\n```\n"
    )
    print(body)
    write_report(
        "estimator",
        "Benefit estimation accuracy and overhead",
        body,
        f"python -m benchmarks estimator --scale {scale} --queries {queries}",
    )
    return {"figures": figures, "overhead": overhead}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks estimator")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    run(args.scale, args.queries)
