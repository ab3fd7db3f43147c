"""Workload analyser at scale: 100,000 logged queries, a 100,000-row sample, 20 candidates.

The log holds canonical conjuncts over 12 Z-shaped expressions with changing literals and 8 fixed
SOP predicates on TPC-H lineitem (scale 0.2, 1.2M rows). Prints the analyser's time with its
breakdown, side by side with a plain Spark count of the same files as the baseline of this machine.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.common import table, timed, write_report
from optimizer import tpch
from optimizer.analysis import TableContext, analyse_table
from optimizer.config import SparkSettings, Thresholds
from optimizer.runtime import build_session
from optimizer.table import open_table
from querylog.predicates.normalize import canonical_conjuncts
from querylog.predicates.parse import parse_condition
from querylog.records import ScanRecord
from querylog.store import QueryLogTable

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def _date(rng: random.Random) -> str:
    return str(dt.date(1992, 1, 2) + dt.timedelta(days=rng.randrange(2500)))


# 12 Z-shaped expressions (canonical text with a changing literal) ...
Z_TEMPLATES = (
    lambda r: f"l_shipdate >= CAST('{_date(r)}' AS DATE)",
    lambda r: f"l_commitdate < CAST('{_date(r)}' AS DATE)",
    lambda r: f"l_receiptdate > CAST('{_date(r)}' AS DATE)",
    lambda r: f"l_extendedprice > {r.randrange(1000, 100000)}",
    lambda r: f"l_quantity < {r.randrange(1, 50)}",
    lambda r: f"l_discount >= {r.randrange(0, 10) / 100}".replace("0.0 ", "0 "),
    lambda r: f"l_tax <= {r.randrange(1, 8) / 100}",
    lambda r: f"l_orderkey > {r.randrange(1, 1_000_000)}",
    lambda r: f"l_partkey < {r.randrange(1, 40000)}",
    lambda r: f"l_suppkey = {r.randrange(1, 2000)}",
    lambda r: f"MONTH(l_shipdate) = {r.randrange(1, 13)}",
    lambda r: f"YEAR(l_receiptdate) >= {r.randrange(1992, 1999)}",
)
# ... and 8 fixed predicates.
SOP_PREDICATES = (
    "l_shipmode IN ('MAIL', 'SHIP')",
    "l_returnflag = 'R'",
    "l_linestatus = 'F'",
    "l_comment LIKE '%furiously%'",
    "l_shipinstruct = 'DELIVER IN PERSON'",
    "l_commitdate < l_receiptdate",
    "NOT l_shipmode IN ('AIR', 'REG AIR')",
    "l_comment LIKE '%ironic%'",
)


def log_records(count: int, seed: int = 3) -> list[ScanRecord]:
    rng = random.Random(seed)
    records = []
    for i in range(count):
        filters = {rng.choice(Z_TEMPLATES)(rng) for _ in range(rng.randrange(1, 3))}
        filters |= {p for p in SOP_PREDICATES if rng.random() < 0.15}
        ts = NOW - timedelta(seconds=rng.randrange(0, 5 * 86400))
        records.append(ScanRecord(f"q{i}", ts, "lineitem", tuple(sorted(filters)), ("l_orderkey",), "bench"))
    return records


def run(queries: int = 100_000, scale: float = 0.2) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="deltaopt-analyser-"))
    records = log_records(queries)
    texts = sorted({f for r in records for f in r.filters})
    for text in random.Random(1).sample(texts, 200):  # the log must hold canonical text
        assert canonical_conjuncts(parse_condition(text)) == [text], text
    log = QueryLogTable(str(work / "lineitem_querylog"))
    log.append(records)

    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=4))
    data = tpch.generate("lineitem", scale, work / "tpch")[0]
    lineitem = open_table(str(work / "lineitem"))
    lineitem.create(spark, spark.read.parquet(str(data)).repartition(8))
    snapshot = lineitem.snapshot()
    _, count_seconds = timed(lambda: lineitem.read_files(spark, snapshot.files, snapshot).count())

    thresholds = Thresholds(sample_rows=100_000, min_sop_frequency=0.02)
    analyse_table(TableContext(spark, lineitem, "lineitem", log, thresholds, NOW))  # warm-up: JIT, caches
    from querylog.predicates.classify import classify_text

    classify_text.cache_clear()
    result, seconds = timed(lambda: analyse_table(TableContext(spark, lineitem, "lineitem", log, thresholds, NOW)))
    candidates = len(result.candidates)
    z_graph = result.seconds.get("z_graph", 0.0)
    figures = {
        "queries": queries,
        "distinct_conjuncts": len(texts),
        "candidates": candidates,
        "sample_rows": result.sample_rows,
        "analyse_seconds": seconds,
        "spark_count_seconds": count_seconds,
        "analyse_vs_count": seconds / count_seconds,
        **{f"step_{k}": v for k, v in result.seconds.items()},
    }
    rows = [
        ("analyse_table (read log, summarise, sample, graphs)", f"{seconds:.1f} s"),
        ("  summarise 100k scans (frequencies, points)", f"{result.seconds.get('workload', 0):.1f} s"),
        ("  evaluate Z candidates on the sample (Spark)", f"{result.seconds.get('z_sample', 0):.1f} s"),
        ("  Z correlation graph (sort-index, all pairs)", f"{z_graph:.1f} s"),
        ("  SOP candidates, evaluation and graph", f"{result.seconds.get('sop', 0):.1f} s"),
        ("baseline: Spark count of the same table", f"{count_seconds:.1f} s"),
    ]
    chosen = result.features.as_dict()
    body = (
        table(("measurement", "time"), rows)
        + f"\n\n{queries} logged scans ({len(texts)} distinct conjuncts), {candidates} candidates, "
        f"sample of {result.sample_rows} rows; the analyser takes {figures['analyse_vs_count']:.1f}x a plain count.\n\n"
        f"Chosen: Z={chosen['z']}, SOP={chosen['sop']}\n\n```json\n{json.dumps(figures, indent=1)}\n```\n"
    )
    print(body)
    write_report(
        "analyser",
        "Workload analyser: 100k queries, 100k-row sample, 20 candidates",
        body,
        "python -m benchmarks analyser",
    )
    return figures
