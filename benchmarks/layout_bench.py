"""Layouts side by side on TPC-H lineitem: bytes and files a workload scans, and rewrite time.

    python -m benchmarks layouts [--scale 1] [--queries 200]

One run loads the same lineitem increments into identical tables, lays each out differently, and
replays one workload (range filters with changing literals on dates, prices and quantities, plus fixed
complex predicates such as ``l_shipmode IN (...)``, ``l_comment LIKE '%...%'``, ``month(l_shipdate) =
12``, ``l_returnflag = 'R' AND l_linestatus = 'F'``) against each with the same pruning code:

* none: the files as loaded (small appended files, no layout);
* delta-rs ``optimize.z_order`` on the most frequent plain columns of the workload (the peer);
* Delta's own ``OPTIMIZE ... ZORDER BY`` and liquid clustering (``CLUSTER BY`` + ``OPTIMIZE``) on the
  same columns, in the same Spark session, on copies written by Delta's writer (`benchmarks.delta_peers`);
* Z-order only, SOP only, and combined: deltaopt's OPTIMIZE with the analyser's features.

Every layout is also read by standard readers: Spark's own Delta scan (files and bytes it read for the
first ``--spark-queries`` queries, `benchmarks.spark_reader`) and DuckDB's Delta extension (files it
scanned).

Bytes are compressed bytes of the columns each query reads (Parquet footers), summed over the
workload; the selectivity lower bound is what a perfect layout would read: each query's matching rows'
share of those bytes. A second experiment repeats the thesis's Figure 4.2: zero bits in SOP file
statistics with the MST ordering of SOP ids versus clustering order.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.common import table, write_report
from benchmarks.delta_peers import DeltaPeer, expert_columns
from costmodel.cost import DEFAULT_MODEL
from optimizer import tpch
from optimizer.analysis import TableContext, analyse_table
from optimizer.analysis.sample import sample_frame
from optimizer.clustering import optimize
from optimizer.clustering.ordering import file_vectors, order_partitions, zero_bits
from optimizer.clustering.sop import cluster
from optimizer.config import SparkSettings, Thresholds
from optimizer.demo import load_part
from optimizer.estimate.candidates import candidate_layouts
from optimizer.estimate.layouts import layout_benefit, layout_cost, workload_replay
from optimizer.runtime import build_session
from optimizer.skipping.collect import sop_vector
from optimizer.skipping.extended import load_index
from optimizer.skipping.scan import plan_scan, table_file_stats
from optimizer.table import open_table
from querylog.predicates.attribute import scan_filters
from querylog.records import ScanRecord
from querylog.store import QueryLogTable

NOW = datetime(2024, 6, 1, tzinfo=UTC)
FIGURE_4_2_FEATURES = tpch.LINEITEM_SOP_FEATURES


def workload(queries: int) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(WHERE text, canonical filters, columns read) per query."""
    result = []
    for sql in tpch.lineitem_queries(queries, seed=21):
        (scan,) = scan_filters(sql).scans
        result.append((" AND ".join(f"({f})" for f in scan.filters), scan.filters, scan.columns))
    return result


def replay(lineitem, queries):  # type: ignore[no-untyped-def]
    """Workload totals on one layout: column bytes read, files read, per-query bytes."""
    snapshot = lineitem.snapshot()
    stats = table_file_stats(lineitem, snapshot)
    read = files = total = 0
    for where, _, columns in queries:
        plan = plan_scan(lineitem, where, columns, snapshot=snapshot, stats=stats)
        read += plan.column_bytes_read or 0
        total += plan.column_bytes_total or 0
        files += len(plan.files)
    return read, files, total, len(snapshot.files), snapshot.total_bytes


def figure_4_2(spark, lineitem, rows_per_file: float) -> list[tuple[str, int, int, int]]:  # type: ignore[no-untyped-def]
    """Zero bits in SOP-only file statistics (files cut along the SOP-id order), with C2's order versus
    the order clustering produced the partitions in, for 5 and 11 features."""
    snapshot = lineitem.snapshot()
    frame = lineitem.read_files(spark, snapshot.files, snapshot)
    out = []
    for count in (5, 11):
        predicates = list(FIGURE_4_2_FEATURES[:count])
        vectors = {int(r[0]): int(r[1]) for r in frame.groupBy(sop_vector(predicates)).count().collect()}
        partitions = cluster(sorted(vectors.items()), [1.0] * count, max(int(rows_per_file), 1))
        ordered = order_partitions(partitions, rows_per_file, [1.0] * count)
        zeros = [zero_bits([v for v, _ in file_vectors(o, rows_per_file)], count) for o in (ordered, partitions)]
        out.append((f"SOP only, {count} features", zeros[0], zeros[1], len(partitions)))
    return out


def zeros_in_index(lineitem, features: int) -> int:  # type: ignore[no-untyped-def]
    return sum(s.sop_bits[:features].count("0") for s in load_index(lineitem, lineitem.snapshot()).values())


def standard_readers(spark, layouts, plan, count: int) -> dict[str, tuple[float, float, str]]:  # type: ignore[no-untyped-def]
    """Per layout: files and MB Spark's Delta scan read over the first `count` queries, and files DuckDB
    scanned over the queries its extension answered (how many it failed on, in brackets)."""
    from benchmarks.spark_reader import SparkDeltaReader
    from benchmarks.standard_reader import DuckDBReader

    reader = SparkDeltaReader(spark)
    duck = DuckDBReader()
    out = {}
    try:
        for name, lineitem, _ in layouts:
            files = read = 0.0
            ducked: list[int] = []
            for where, _, columns in plan[:count]:
                scanned = reader.scan(lineitem.uri, where, tuple(columns))
                files += scanned.files
                read += scanned.bytes
                counted = duck.files_scanned(lineitem.uri, where, tuple(columns))
                if counted is not None:
                    ducked.append(counted.files)
            failed = f" ({count - len(ducked)} failed)" if len(ducked) < count else ""
            out[name] = (files, read / 1e6, f"{sum(ducked)} in {len(ducked)} q{failed}")
    finally:
        duck.close()
    return out


def layout_health_figure(layouts, columns: list[str]) -> str:  # type: ignore[no-untyped-def]
    """Per layout, the average depth and overlaps of each column (as `deltaopt table info` reports them),
    as a table and a grouped bar chart of depth (`reports/layouts-health.png`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.common import REPORTS
    from optimizer.skipping.health import layout_health

    health = {name: layout_health(t.snapshot().files, columns) for name, t, _ in layouts}
    fig, ax = plt.subplots(figsize=(14, 4.5))
    width = 0.8 / len(health)
    for i, (name, figures) in enumerate(health.items()):
        ax.bar([c + i * width for c in range(len(columns))], [h.average_depth for h in figures], width, label=name)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(columns))], columns)
    ax.set_ylabel("average depth (files a value falls in)")
    ax.set_yscale("log")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    REPORTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(REPORTS / "layouts-health.png", dpi=110)
    plt.close(fig)
    rows = [
        [name, *(f"{h.average_depth:.1f} / {h.average_overlaps:.1f}" for h in figures)]
        for name, figures in health.items()
    ]
    return (
        "Layout health per column, average depth / average overlaps (`deltaopt table info`; lower is better;\n"
        "`layouts-health.png`)\n\n" + table(("layout", *columns), rows)
    )


def run(scale: float = 1.0, queries: int = 200, spark_queries: int = 50) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="deltaopt-layouts-"))
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=8, driver_memory="8g"))
    parts = tpch.generate("lineitem", scale, work / "tpch", parts=8)
    plan = workload(queries)

    def load(name: str):  # type: ignore[no-untyped-def]
        t = open_table(str(work / name))
        for part in parts:
            load_part(spark, t, part, files_per_part=4)
        return t

    base = load("none")
    snapshot = base.snapshot()
    target = max(1 << 20, snapshot.total_bytes // 64)
    rows_per_file = snapshot.num_records * target / snapshot.total_bytes
    log = QueryLogTable(str(work / "lineitem_querylog"))
    log.append(
        [ScanRecord(f"q{i}", NOW - timedelta(minutes=i), "lineitem", f, c, "bench") for i, (_, f, c) in enumerate(plan)]
    )
    thresholds = Thresholds(sample_rows=100_000, target_file_size=target, min_sop_frequency=0.05)
    features = analyse_table(TableContext(spark, base, "lineitem", log, thresholds, NOW)).features
    print(f"analyser: {features.as_dict()}")

    peer_columns = list(expert_columns((filters for _, filters, _ in plan), max(len(features.z), 2)))
    layouts: list[tuple[str, object, float]] = [("none (as loaded)", base, 0.0)]
    peer = load("deltars_zorder")
    started = time.perf_counter()
    from deltalake import DeltaTable

    DeltaTable(peer.uri).optimize.z_order(peer_columns, target_size=target)
    layouts.append((f"delta-rs z_order({', '.join(peer_columns)})", peer, time.perf_counter() - started))
    delta_columns = tuple(peer_columns[:4])  # liquid clustering takes at most 4 keys
    for kind in ("zorder", "liquid"):
        delta_peer = DeltaPeer(spark, str(work / f"delta_{kind}"), kind, delta_columns, target)  # type: ignore[arg-type]
        for part in parts:
            delta_peer.load(spark.read.parquet(str(part)).repartition(4))
        rewrite = delta_peer.optimize()
        layouts.append((delta_peer.name, open_table(delta_peer.path), rewrite.seconds))
    candidates = dict(candidate_layouts(features))  # the estimator's candidates, all measured for real
    names = {"Z-order only": "Z-order only", "SOP only": "SOP only", "as analysed": "combined SOP + Z-order"}
    variants = {names.get(name, f"combined, {name}"): chosen for name, chosen in candidates.items()}
    for name, chosen in variants.items():
        lineitem = load("layout" + str(len(layouts)))
        result = optimize(spark, lineitem, chosen, target, progress=lambda m, name=name: print(f"  [{name}] {m}"))
        layouts.append((name, lineitem, result.seconds.get("total", 0.0)))
    sample = sample_frame(spark, base, snapshot, snapshot.files, thresholds.sample_rows).cache()
    records = log.read("lineitem")
    logged = workload_replay(base, snapshot, snapshot.files, records=records, thresholds=thresholds, now=NOW)
    estimates = {
        names.get(name, f"combined, {name}"): layout_benefit(logged, snapshot, chosen, sample, thresholds=thresholds)
        for name, chosen in candidates.items()
    }
    picked = max(
        estimates,
        key=lambda n: estimates[n].benefit - layout_cost(DEFAULT_MODEL, snapshot.total_bytes, variants[n]).seconds,
    )
    unordered = load("combined_clustering_order")
    optimize(spark, unordered, features, target, order_ids=False)
    combined_zeros = (zeros_in_index(layouts[-1][1], len(features.sop)), zeros_in_index(unordered, len(features.sop)))

    matching = base.read_files(spark, snapshot.files, snapshot)
    from pyspark.sql import functions as F

    counts = matching.agg(
        *[F.sum(F.when(F.expr(w), 1).otherwise(0)).alias(f"q{i}") for i, (w, _, _) in enumerate(plan)]
    ).collect()[0]
    rows = snapshot.num_records or 1
    lower = 0.0
    base_stats = table_file_stats(base, snapshot)
    for i, (where, _, columns) in enumerate(plan):
        total = plan_scan(base, where, columns, snapshot=snapshot, stats=base_stats).column_bytes_total or 0
        lower += total * (counts[f"q{i}"] or 0) / rows

    results = []
    none_read = None
    peer_seconds = layouts[1][2]
    for name, lineitem, seconds in layouts:
        read, files, total, file_count, size = replay(lineitem, plan)
        none_read = none_read or read
        results.append((name, file_count, size, files, read, read / none_read, read / max(lower, 1), seconds))
    spark_queries = min(spark_queries, len(plan))
    standard = standard_readers(spark, layouts, plan, spark_queries)
    rows_out = [
        (
            n + (" <- estimator's choice" if n == picked else ""),
            fc,
            f"{size / 1e6:.0f}",
            f,
            f"{r / 1e6:.1f} MB",
            f"{rel:.3f}",
            f"{lb:.1f}x",
            f"{standard[n][0]:.0f} / {standard[n][1]:.0f} MB",
            standard[n][2],
            f"{s:.0f} s" if s else "-",
            f"{peer_seconds / s:.2f}x" if s else "-",
            f"{estimates[n].p_after:.3f}" if n in estimates else "-",
        )
        for n, fc, size, f, r, rel, lb, s in results
    ]
    zero = [
        *figure_4_2(spark, base, rows_per_file),
        ("combined layout, analyser's SOP features", *combined_zeros, len(features.sop)),
    ]
    body = (
        f"TPC-H lineitem scale {scale} ({snapshot.num_records:,} rows, {snapshot.total_bytes / 1e6:.0f} MB in "
        f"{len(snapshot.files)} files), {queries} queries, target file size {target / 1e6:.1f} MB.\n\n"
        + table(
            (
                "layout",
                "files",
                "MB",
                "files scanned",
                "column bytes scanned",
                "vs none",
                "vs lower bound",
                f"Spark Delta scan: files / MB ({spark_queries} q)",
                "DuckDB files",
                "rewrite",
                "throughput vs delta-rs",
                "estimated share",
            ),
            rows_out,
        )
        + "\n\nThroughput vs delta-rs: the same input rewritten to the same target file size, bytes per second\n"
        "relative to delta-rs `z_order` in this run (both on this machine's 2 cores); issue 11 asks for >= 0.5x.\n"
        "Files scanned and column bytes: deltaopt's pruning over all queries. Spark Delta scan: the files and\n"
        "(whole-file) bytes Spark's own Delta scan read for the first queries, with Delta's min/max skipping;\n"
        "DuckDB: files its Delta extension scanned for those of the same queries it answered (its 'total_files\n"
        "inconsistent' internal error on some filters leaves the others).\n"
        f"\nSelectivity lower bound: {lower / 1e6:.1f} MB (the bytes of matching rows only).\n"
        f"Analyser's features: {json.dumps(features.as_dict())}\n\n"
        "Figure 4.2: zero bits in SOP file statistics, C2's ordering of SOP ids versus clustering order\n\n"
        + table(("layout", "C2 order", "clustering order", "partitions / features"), zero)
        + "\n\n"
        + "\n".join(f"- {n}: {o / max(i, 1):.2f}x the zero bits ({o} vs {i})" for n, o, i, _ in zero)
        + "\n\n"
        + layout_health_figure(layouts, peer_columns)
        + "\n"
    )
    print(body)
    write_report(
        "layouts",
        "Layouts on TPC-H lineitem: scanned bytes and rewrite time",
        body,
        f"python -m benchmarks layouts --scale {scale} --queries {queries} --spark-queries {spark_queries}",
    )
    return {"results": results, "lower_bound": lower, "figure_4_2": zero}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks layouts")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--spark-queries", type=int, default=50, help="queries read by Spark's Delta scan and DuckDB")
    parser.add_argument(
        "--small-rewrites", action="store_true", help="only the small-table rewrite cost against delta-rs (75-725 MB)"
    )
    args = parser.parse_args(argv)
    if args.small_rewrites:
        from benchmarks.small_rewrites import run as small_rewrites

        small_rewrites()
        return
    run(args.scale, args.queries, args.spark_queries)
