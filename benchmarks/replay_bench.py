"""The thesis's end-to-end experiment (Chapter 6): a time-ordered replay of inserts and queries in
which layout strategies compete on total time, measured for deltaopt's reader and a standard one.

    python -m benchmarks replay [--scale 1] [--batches 8] [--queries 10] [--quick]

TPC-H ``lineitem`` and ``orders`` arrive in date-ordered batches appended by ``write_deltalake``
(`benchmarks.replay_data`). After each insert, each strategy does its maintenance, then the batch's
queries run against every strategy's copy (one simulated hour per batch):

* **none**: never optimised;
* **expert z_order**: delta-rs ``optimize.z_order`` on the columns an expert picks from the first
  phase's filters, once, halfway;
* **deltaopt optimize**: a manual ``deltaopt optimize`` (the analyser's features from the log,
  every file) once, halfway;
* **deltaopt service**: ``serve --once`` after every insert (`run_once` with the simulated clock),
  optimising and re-clustering as it decides.

Every scan of every query is really executed on Spark through `optimizer.skipping.scan.read` (the
files deltaopt's pruning keeps, the filter applied by Spark); the same scan is planned for the files
and column bytes deltaopt's pruning keeps, and run by DuckDB's Delta extension (a standard reader:
the Delta log's min/max of bare columns) for the files it scans. Soundness is checked on every scan:
the rows Spark matched over the kept files equal the rows DuckDB matches over the whole table (Spark
over every file when the extension fails on a filter). The lower bound is the bytes of the matching
rows' columns (matching rows x the table's bytes per row of those columns).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import write_report
from benchmarks.replay_data import EXPERT_COLUMNS, batches, queries, schema_of
from benchmarks.replay_model import STRATEGIES, TABLES, BatchTimes, Replay, ScanResult
from benchmarks.replay_report import plots, render
from benchmarks.standard_reader import DuckDBReader
from optimizer.analysis import TableContext, analyse_table
from optimizer.clustering import optimize
from optimizer.config import Config, SparkSettings, load_config
from optimizer.runtime import build_session
from optimizer.skipping.scan import column_sizes, plan_scan, read
from optimizer.table import TableAccess, open_table
from querylog.capture import SqlContext
from querylog.predicates.attribute import scan_filters
from querylog.recorder import Recorder
from querylog.store import QueryLogTable

START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _slug(strategy: str) -> str:
    return strategy.replace(" ", "_")


def write_config(work: Path, copies: dict[str, TableAccess], batch_bytes: dict[str, int], count: int) -> Config:
    """The service's configuration: both tables share one query log; a table's new data is worth a
    decision from 1.5 batches on, and files are cut at 1/16 of the table's final size (>= 1 MiB)."""
    tables = []
    for name, table in copies.items():
        thresholds = {
            "min_new_bytes": int(batch_bytes[name] * 1.5),
            "target_file_size": max(1 << 20, batch_bytes[name] * count // 16),
        }
        tables.append({"name": name, "path": table.uri, "query_log": str(work / "querylog"), "thresholds": thresholds})
    settings = {
        "spark": {"master": "local[2]", "shuffle_partitions": 8},
        "tables": tables,
        "service": {"state_dir": str(work / "state"), "jitter": 0},
        "logging": {"level": "WARNING"},
    }
    path = work / "deltaopt.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return load_config(path)


def insert(uri: str, batch: Any) -> float:
    """Append one batch the way an ordinary writer does; its wall time."""
    from deltalake import write_deltalake

    started = time.perf_counter()
    write_deltalake(uri, batch, mode="append")
    return time.perf_counter() - started


def expert_zorder(table: TableAccess, name: str, target: int) -> float:
    from deltalake import DeltaTable

    started = time.perf_counter()
    DeltaTable(table.uri).optimize.z_order(EXPERT_COLUMNS[name], target_size=target)
    return time.perf_counter() - started


def manual_optimize(spark: Any, table: TableAccess, name: str, config: Config, now: datetime) -> tuple[float, float]:
    """What ``deltaopt optimize --config ... --all-files`` does: the analyser's features from the log,
    then the verified OPTIMIZE of every file. (analysis seconds, OPTIMIZE seconds)."""
    settings = config.table(name)
    log = QueryLogTable(settings.query_log_path)
    started = time.perf_counter()
    features = analyse_table(TableContext(spark, table, settings.identity, log, settings.thresholds, now)).features
    analysed = time.perf_counter() - started
    started = time.perf_counter()
    optimize(
        spark,
        table,
        features,
        settings.thresholds.target_file_size,
        files=table.snapshot().files,
        metadata={"trigger": "manual"},
    )
    return analysed, time.perf_counter() - started


class Measurer:
    """Runs one query's scans against one strategy's copies and records what each reader read."""

    def __init__(self, spark: Any, duck: DuckDBReader, schema: dict[str, dict[str, str]]) -> None:
        self.spark = spark
        self.duck = duck
        self.schema = schema
        self.bytes_per_row: dict[tuple[str, tuple[str, ...]], float] = {}

    def prepare(self, reference: dict[str, TableAccess]) -> None:
        """Bytes per row of each table's columns on the unoptimised copy (for the lower bound)."""
        self.sizes: dict[str, tuple[dict[str, int], int]] = {}
        for name, table in reference.items():
            snapshot = table.snapshot()
            totals: dict[str, int] = {}
            for f in snapshot.files:
                for column, size in (column_sizes(table, f) or {}).items():
                    totals[column] = totals.get(column, 0) + size
            self.sizes[name] = (totals, sum(f.num_records or 0 for f in snapshot.files))

    def lower_bound(self, name: str, columns: Sequence[str], rows: int) -> float:
        totals, table_rows = self.sizes[name]
        wanted = totals.values() if "*" in columns else [totals.get(c, 0) for c in columns]
        return rows * sum(wanted) / table_rows if table_rows else 0.0

    def run(self, sql: str, copies: dict[str, TableAccess], **tags: Any) -> list[ScanResult]:
        from pyspark.sql import functions as F

        results = []
        for scan in scan_filters(sql, self.schema).scans:
            table = copies[scan.table]
            where = " AND ".join(f"({f})" for f in scan.filters) or None
            columns = [c for c in scan.columns if c != "*"]
            snapshot = table.snapshot()
            plan = plan_scan(table, where, columns or None, snapshot=snapshot)
            started = time.perf_counter()
            frame = read(self.spark, table, where, columns or None)
            (row,) = frame.agg(F.count(F.lit(1)).alias("__n"), *[F.max(f"`{c}`") for c in columns]).collect()
            seconds = time.perf_counter() - started
            standard = self.duck.files_scanned(table.uri, where, tuple(columns))
            reference, source = self._reference(table, where)
            results.append(
                ScanResult(
                    table=scan.table,
                    seconds=round(seconds, 4),
                    files_kept=len(plan.files),
                    files_total=plan.total_files,
                    bytes_read=int(plan.column_bytes_read or 0),
                    standard_files=standard.files if standard else None,
                    rows=int(row["__n"]),
                    reference_rows=reference,
                    reference=source,
                    lower_bound=self.lower_bound(scan.table, columns or ["*"], reference),
                    **tags,
                )
            )
        return results

    def _reference(self, table: TableAccess, where: str | None) -> tuple[int, str]:
        """Rows matching `where` over every file: DuckDB's count, or Spark's when the extension fails."""
        from pyspark.sql import functions as F

        try:
            return self.duck.count(table.uri, where), "duckdb"
        except Exception:  # the extension's internal errors on some filters
            snapshot = table.snapshot()
            frame = table.read_files(self.spark, snapshot.files, snapshot)
            return (frame.filter(F.expr(where)) if where else frame).count(), "spark"


def fingerprint(spark: Any, table: TableAccess) -> tuple[int, int]:
    """(rows, order-insensitive hash of every row) of the table as of now."""
    from pyspark.sql import functions as F

    snapshot = table.snapshot()
    frame = table.read_files(spark, snapshot.files, snapshot)
    columns = [F.col(f"`{c}`") for c in sorted(frame.columns)]
    (row,) = frame.agg(F.count(F.lit(1)), F.sum(F.xxhash64(*columns).cast("decimal(38,0)"))).collect()
    return int(row[0]), int(row[1] or 0)


def replay(
    spark: Any, scale: float, count: int, per_batch: int, work: Path, seed: int = 3, progress: Any = print
) -> Replay:
    """Run the whole replay under `work`; every strategy, every batch, every query's scans measured."""
    from optimizer.service.service import context

    data = {name: batches(name, scale, count, work, seed) for name in TABLES}
    schema = schema_of({name: parts[0] for name, parts in data.items()})
    copies = {s: {n: open_table(str(work / _slug(s) / n)) for n in TABLES} for s in STRATEGIES}
    halfway, drift_at = count // 2 - 1, (5 * count + 7) // 8
    result = Replay(scale, count, per_batch, drift_at, halfway)
    result.times = {s: [BatchTimes() for _ in range(count)] for s in STRATEGIES}
    duck = DuckDBReader()
    measurer = Measurer(spark, duck, schema)
    rng = random.Random(seed)
    started = time.perf_counter()
    config: Config | None = None
    try:
        with Recorder(QueryLogTable(str(work / "querylog")), work / "spill", context=SqlContext(schema=schema)) as rec:
            for b in range(count):
                now = START + b * HOUR
                for strategy in STRATEGIES:
                    for name in TABLES:
                        result.times[strategy][b].insert += insert(copies[strategy][name].uri, data[name][b])
                if config is None:
                    sizes = {n: copies["none"][n].snapshot().total_bytes for n in TABLES}
                    config = write_config(work, copies["deltaopt service"], sizes, count)
                    ctx = context(config, spark=lambda: spark)
                _maintain(spark, result, copies, config, ctx, b, now, progress)
                phase = 2 if b >= drift_at else 1
                stream = queries(phase, per_batch, rng)
                measurer.prepare(copies["none"])
                if b == 0:
                    measurer.run(stream[0][1], copies["none"], strategy="warm-up", batch=b, phase=phase, template="")
                for i, (template, sql) in enumerate(stream):
                    rec.record_sql(sql, ts=now + HOUR * (i + 0.5) / len(stream))
                    for strategy in STRATEGIES[i % 4 :] + STRATEGIES[: i % 4]:  # no strategy always first
                        scans = measurer.run(
                            sql, copies[strategy], strategy=strategy, batch=b, phase=phase, template=template
                        )
                        result.times[strategy][b].query += sum(s.seconds for s in scans)
                        result.scans.extend(scans)
                rec.flush()
                progress(f"batch {b + 1}/{count} (phase {phase}): " + _batch_line(result, b))
        result.standard_errors = dict(duck.errors.most_common(5))
    finally:
        duck.close()
    result.rows = {s: {n: fingerprint(spark, copies[s][n]) for n in TABLES} for s in STRATEGIES}
    result.seconds = time.perf_counter() - started
    return result


def _maintain(
    spark: Any,
    result: Replay,
    copies: dict[str, dict[str, TableAccess]],
    config: Config,
    ctx: Any,
    b: int,
    now: datetime,
    progress: Any,
) -> None:
    """Each strategy's work after batch `b`'s insert."""
    from optimizer.service.service import run_once

    if b == result.halfway:
        for name in TABLES:
            target = config.table(name).thresholds.target_file_size
            result.times["expert z_order"][b].optimize += expert_zorder(copies["expert z_order"][name], name, target)
            analysed, rewritten = manual_optimize(spark, copies["deltaopt optimize"][name], name, config, now)
            result.times["deltaopt optimize"][b].decide += analysed
            result.times["deltaopt optimize"][b].optimize += rewritten
    for record in run_once(ctx, now=now + HOUR * 0.999):
        job = record.job.outcome.seconds if record.job and record.job.outcome else 0.0
        result.times["deltaopt service"][b].optimize += job
        result.times["deltaopt service"][b].decide += max(record.tick_seconds - job, 0.0)
        brief = {"batch": b, "table": record.table, "action": str(record.action), "reason": record.reason[:240]}
        if record.decision is not None and record.decision.features is not None:
            brief["features"] = record.decision.features.as_dict()
        result.actions.append(brief)
        progress(f"  service {record.table}: {record.action} - {record.reason[:160]}")


def _batch_line(result: Replay, b: int) -> str:
    parts = []
    for strategy in STRATEGIES:
        scans = [s for s in result.scans if s.batch == b and s.strategy == strategy]
        mb = sum(s.bytes_read for s in scans) / 1e6
        parts.append(f"{strategy} {mb:.1f} MB / {result.times[strategy][b].total:.1f} s")
    return "; ".join(parts)


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks replay")
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default SF1)")
    parser.add_argument("--batches", type=int, default=8, help="insert batches (at least 8)")
    parser.add_argument("--queries", type=int, default=10, help="queries per batch")
    parser.add_argument("--quick", action="store_true", help="scale 0.05, 4 queries per batch")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.queries = 0.05, 4
    if args.batches < 8:
        parser.error("--batches must be at least 8")
    name = "replay-quick" if args.quick else "replay"
    work = Path(tempfile.mkdtemp(prefix="deltaopt-replay-"))
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=8, driver_memory="6g"))
    try:
        result = replay(spark, args.scale, args.batches, args.queries, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    reports = Path(__file__).parent / "reports"
    (reports / f"{name}.json").write_text(json.dumps(asdict(result), indent=1, default=str))
    images = plots(result, reports, name)
    body = render(result, images)
    print(body)
    command = f"python -m benchmarks replay --scale {args.scale:g} --batches {args.batches} --queries {args.queries}"
    write_report(name, "Replay: inserts and queries over time, four strategies, two kinds of reader", body, command)
