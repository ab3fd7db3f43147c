"""Benefit-estimation accuracy (thesis Table 5.1) and the estimator's overhead.

    python -m benchmarks estimator [--scale 0.2] [--queries 200] [--row-groups 8]

For 0-3 Z features x 0/4/8/12 SOP features on TPC-H lineitem: estimate the scanned-bytes reduction of
the workload with virtual files, then actually cluster a copy of the data with the same features and
measure the real reduction, for each kind of reader: deltaopt's pruning (every statistic) and a standard
reader (Delta's file statistics), each then skipping the row groups of the files it keeps by their
footer statistics (docs/READERS.md). The job writes `--row-groups` row groups' worth of row-group size per target
file, as the estimate assumes. The error factor is max(estimated / real, real / estimated) of the
reduction per query. The overhead is the estimator's time (sample, virtual layout, replay) relative to
the clustering's.
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
from typing import Any

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
from optimizer.skipping.scan import table_file_stats
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


def real_bytes_per_query(lineitem, records, thresholds) -> dict[str, float]:
    """Bytes per query each kind of reader reads of the table as it is: files kept by deltaopt's pruning
    or by Delta's statistics, then, in both, row groups by their footers (docs/READERS.md)."""
    from benchmarks.kept_share import PricedFiles
    from optimizer.estimate.replay import query_bytes

    files = PricedFiles.of(lineitem)
    snapshot = files.snapshot
    views = {
        "deltaopt": table_file_stats(lineitem, snapshot),
        "standard": table_file_stats(lineitem, snapshot, snapshot.files, {}),
    }
    queries = workload_queries(records, NOW, thresholds.recency_half_life)
    weight = sum(q.weight for q in queries)
    return {
        reader: sum(q.weight * query_bytes(q, stats, files.sizes, files.groups)[0] for q in queries) / weight
        for reader, stats in views.items()
    }


def _factor(before: float, estimated_after: float, real_after: float) -> float | None:
    """max(estimated / real, real / estimated) of the reduction; None when either is under 1%."""
    estimated, real = before - estimated_after, before - real_after
    if min(estimated, real) > 0.01 * before:
        return max(estimated / real, real / estimated)
    return None


def run(scale: float = 0.2, queries: int = 200, row_groups: int = 8) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="deltaopt-estimator-"))
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=8, driver_memory="8g"))
    base = open_table(str(work / "base"))
    for part in tpch.generate("lineitem", scale, work / "tpch", parts=8):
        load_part(spark, base, part, files_per_part=4)
    snapshot = base.snapshot()
    records = workload(queries)
    target = max(1 << 20, snapshot.total_bytes // 64)
    thresholds = Thresholds(sample_rows=100_000, target_file_size=target, row_group_size=max(target // row_groups, 1))
    sample = sample_frame(spark, base, snapshot, snapshot.files, thresholds.sample_rows).cache()
    sample.count()
    figures: list[dict[str, Any]] = []
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
            output = thresholds.output
            result = optimize(spark, clustered, features, target, output=output) if not features.is_empty else None
            real = real_bytes_per_query(clustered, records, thresholds)
            cluster_seconds = result.seconds.get("total", 0.0) if result else 0.0
            figure: dict[str, Any] = {"z": nz, "sop": ns, "estimate_seconds": estimate_seconds}
            for reader in ("standard", "deltaopt"):
                estimated = estimate.readers[reader]
                before, after = estimated["bytes_per_query_before"], estimated["bytes_per_query_after"]
                figure[reader] = {
                    "before": before,
                    "estimated_after": after,
                    "real_after": real[reader],
                    "error_factor": _factor(before, after, real[reader]),
                }
            figures.append({**figure, "cluster_seconds": cluster_seconds})
            print(figures[-1], flush=True)
            shutil.rmtree(copy, ignore_errors=True)
    grids = {reader: _grid(figures, reader) for reader in ("standard", "deltaopt")}
    detail = [
        (
            f["z"],
            f["sop"],
            *[
                f"{f[r]['before'] / 1e6:.2f} / {f[r]['estimated_after'] / 1e6:.2f} / {f[r]['real_after'] / 1e6:.2f}"
                for r in ("standard", "deltaopt")
            ],
            f"{f['estimate_seconds']:.1f} s",
            f"{f['cluster_seconds']:.1f} s",
        )
        for f in figures
    ]
    overhead = sum(f["estimate_seconds"] for f in figures if f["cluster_seconds"]) / max(
        sum(f["cluster_seconds"] for f in figures), 1e-9
    )
    sections = []
    for reader, title in (
        ("standard", "a standard reader (files, then row groups)"),
        ("deltaopt", "deltaopt's pruning"),
    ):
        factors = sorted(f[reader]["error_factor"] for f in figures if f[reader]["error_factor"] is not None)
        summary = f"Worst {factors[-1]:.2f}, median {factors[len(factors) // 2]:.2f}." if factors else "No reduction."
        sections.append(
            f"Error factor of the estimated scanned-bytes reduction for {title} (max(est/real, real/est)):\n\n"
            + table(("", "0 SOP", "4 SOP", "8 SOP", "12 SOP"), grids[reader])
            + f"\n\n{summary}"
        )
    body = (
        f"TPC-H lineitem scale {scale} ({snapshot.num_records:,} rows, {snapshot.total_bytes / 1e6:.0f} MB, "
        f"{len(snapshot.files)} files), {queries} queries, sample {thresholds.sample_rows:,} rows, "
        f"target file size {target / 1e6:.1f} MB, row-group size {thresholds.row_group_size / 1e6:.2f} MB "
        f"({row_groups} per target file).\n\n" + "\n\n".join(sections) + " (thesis Table 5.1: up to 1.44).\n\n"
        f"Estimator time / clustering time: {overhead:.1%}.\n\n"
        + table(
            (
                "Z",
                "SOP",
                "standard MB/query: before / estimated / real after",
                "deltaopt: before / estimated / real after",
                "estimate",
                "cluster",
            ),
            detail,
        )
        + f"\n\n```json\n{json.dumps(figures, indent=1)}\n```\n"
    )
    print(body)
    write_report(
        "estimator",
        "Benefit estimation accuracy and overhead",
        body,
        f"python -m benchmarks estimator --scale {scale} --queries {queries} --row-groups {row_groups}",
    )
    return {"figures": figures, "overhead": overhead}


def _grid(figures: list[dict[str, Any]], reader: str) -> list[list[str]]:
    """The error factors of `reader` as a Z x SOP grid."""

    def cell(nz: int, ns: int) -> str:
        factor = next(f for f in figures if f["z"] == nz and f["sop"] == ns)[reader]["error_factor"]
        return "-" if factor is None else f"{factor:.2f}"

    return [[f"{nz} Z", *[cell(nz, ns) for ns in (0, 4, 8, 12)]] for nz in range(4)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks estimator")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--row-groups", type=int, default=8, help="row groups per target file (row-group size)")
    args = parser.parse_args(argv)
    run(args.scale, args.queries, args.row_groups)
