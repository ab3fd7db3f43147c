"""A star schema run as users run it: a fact table growing by date, a live stream of star queries
recorded with join derivation, the service ticking; every layout judged by both kinds of reader.

    python -m benchmarks star-flow [--scale 0.3] [--appends 6] [--rate 60] [--family NAME ...]

TPC-H ``lineitem`` arrives in ship-date order (a fact table grows by date: each append holds the next
stretch of dates), as small files; ``part`` and ``supplier`` are Delta tables beside it in one
warehouse. Each simulated hour, queries of the `star_bench` families arrive as a Poisson stream and
are recorded through the `Recorder`, whose context has the warehouse's schemas and a `JoinDeriver`
(the log holds join-derived filters, as a deployment recording live does); then an increment is
appended to every copy and the service ticks (`run_once`, ``schemas.locations`` naming the
warehouse, so it may choose joined features, priced for the configured readers); Delta's peers run
their OPTIMIZE. Copies:

* **none**: never optimised (already ordered by date at append granularity, as such tables are);
* **service (standard readers)**: the watched table, whatever the service decides with the default
  configuration (layouts priced for readers that skip with Delta's min/max only);
* **service (deltaopt readers)**: a second watched copy with the same log, its layouts priced for
  readers through deltaopt's pruning (``readers: deltaopt``: joined features pay there);
* **Delta ZORDER BY (l_shipdate)**: the date-ordered layout, written by Delta's own engine after
  every append (what the issue's standard readers are judged against);
* **Delta liquid CLUSTER BY (l_shipdate, l_partkey, l_suppkey)**: the expert's star-schema columns.

After every tick each copy is measured on held-out queries (the same families, another seed): fact
column bytes kept by deltaopt's pruning (direct and derived filters, joined ranges) and by a reader
with Delta's min/max only (direct and derived filters: dynamic file pruning's best case). At the end,
per family: the same two, Spark's own Delta scan with the query's direct filters (open-source Spark
has no dynamic file pruning: that is what it reads), DuckDB's files, and files a reader skipped that
hold a matching row (must be 0).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from deltalake import write_deltalake

from benchmarks import kept_share
from benchmarks.common import write_report
from benchmarks.delta_peers import DeltaPeer
from benchmarks.flow_bench import append_everywhere, load_config_spark, record_hour
from benchmarks.replay_data import _plain
from benchmarks.star_bench import DATE_ORDER, EXPERT, matching_files
from benchmarks.star_flow_report import render
from benchmarks.star_flow_setup import DIMENSIONS, FACT, FILES_PER_INCREMENT, HELD_OUT, SERVICES
from benchmarks.star_workload import FAMILIES, workload
from costmodel.benefit import MB
from optimizer import tpch
from optimizer.catalog import build_catalog
from optimizer.config import Config, load_config
from optimizer.demo import load_part
from optimizer.estimate.record import AnalysisSummary
from optimizer.joins import JoinDeriver
from optimizer.runtime import build_session
from optimizer.skipping.extended import location_key
from optimizer.skipping.joined import JoinFilter, from_derived
from optimizer.skipping.scan import plan_scan, table_file_stats
from optimizer.table import TableAccess, open_table
from querylog.capture import SqlContext, capture_sql
from querylog.recorder import Recorder
from querylog.store import QueryLogTable


@dataclass(frozen=True)
class HeldQuery:
    """One held-out query's fact scan."""

    family: str
    where: str | None  # direct and derived filters: what deltaopt and dynamic file pruning prune with
    direct: str | None  # the query's own fact filters: what open-source Spark prunes with
    columns: tuple[str, ...]
    joins: tuple[JoinFilter, ...]  # its dimension filters, pinned: joined ranges prune with them


def date_ordered_appends(scale: float, count: int, out: Path) -> list[Path]:
    """``lineitem`` in `count` Parquet files of consecutive ship dates."""
    generated = tpch.generate(FACT, scale, out / "raw")
    data = _plain(pa.concat_tables([pq.read_table(p) for p in generated])).sort_by("l_shipdate")
    step = -(-data.num_rows // count)
    paths = []
    for i, start in enumerate(range(0, data.num_rows, step)):
        paths.append(out / f"append-{i}.parquet")
        pq.write_table(data.slice(start, step), paths[-1])
    return paths


def draw(count: int, seed: int, families: Sequence[str]) -> list[str]:
    """`count` queries of the `families`' stream, without their family."""
    return [sql for _, sql in workload(count, seed=seed, families=families)]


def held_out(
    count: int, families: Sequence[str], context: SqlContext, dimensions: Mapping[str, str], versions: Mapping[str, int]
) -> list[HeldQuery]:
    """The held-out queries' fact scans, captured as the recorder captures (another seed)."""
    held = []
    now = datetime.now(UTC)
    for family, sql in workload(count, seed=999, families=families):
        (scan,) = [s for s in capture_sql(sql, now, "held-out", context).scans if s.table_id == FACT]
        derived = {d.filter for d in scan.derived}
        direct = [f for f in scan.filters if f not in derived]
        joins = tuple(
            replace(j, version=versions[location_key(j.location)]) for j in from_derived(scan.derived, dimensions)
        )
        held.append(
            HeldQuery(
                family,
                " AND ".join(scan.filters) or None,
                " AND ".join(direct) or None,
                tuple(scan.columns),
                joins,
            )
        )
    return held


def measure(
    copy: TableAccess, held: Sequence[HeldQuery], versions: Mapping[str, int]
) -> tuple[dict[str, Any], list[dict[str, frozenset[str]]]]:
    """Per family and overall: mean column MB and files kept by deltaopt's pruning and by min/max
    (Delta's statistics only, as `flow_bench.measure` reads them); and per query, the files each reader
    kept (what the final soundness check compares with the files holding a match)."""
    snapshot = copy.snapshot()
    readers = {
        "deltaopt": table_file_stats(copy, snapshot, versions=versions),
        "min/max": table_file_stats(copy, snapshot, None, {}),
    }
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    kept: list[dict[str, frozenset[str]]] = []
    for query in held:
        kept.append({})
        for group in (query.family, "all"):
            sums[group]["queries"] += 1
        for reader, file_stats in readers.items():
            joins = query.joins if reader == "deltaopt" else ()
            plan = plan_scan(copy, query.where, query.columns, snapshot=snapshot, stats=file_stats, joins=joins)
            kept[-1][reader] = frozenset(f.path for f in plan.files)
            for group in (query.family, "all"):
                sums[group][f"{reader} MB"] += (plan.column_bytes_read or 0) / MB
                sums[group][f"{reader} files"] += len(plan.files)
    out: dict[str, Any] = {"files": len(snapshot.files)}
    for group, figures in sums.items():
        out[group] = {k: v / figures["queries"] for k, v in figures.items() if k != "queries"}
    return out, kept


def final_readers(
    spark: Any,
    copies: Mapping[str, str],
    held: Sequence[HeldQuery],
    kept: Mapping[str, list[dict[str, frozenset[str]]]],
) -> dict:
    """Per copy and family on the final state: Spark's own Delta scan (direct filters), DuckDB's files
    (direct and derived), and scans in which deltaopt's pruning or min/max skipped a matching file
    (`kept`: the files each reader kept per query on that state, from the last `measure`)."""
    from benchmarks.spark_reader import SparkDeltaReader
    from benchmarks.standard_reader import DuckDBReader

    spark_reader = SparkDeltaReader(spark)
    duck = DuckDBReader()
    out: dict[str, Any] = {}
    try:
        for name, uri in copies.items():
            snapshot = open_table(uri).snapshot()
            paths = [f.path for f in snapshot.files]
            sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
            for query, by_reader in zip(held, kept[name], strict=True):
                scan = spark_reader.scan(uri, query.direct, query.columns)
                seen = duck.files_scanned(uri, query.where)
                bound = matching_files(duck, uri, paths, query.where, query.joins)
                unsound = sum(not bound <= files for files in by_reader.values())
                for group in (query.family, "all"):
                    figures = sums[group]
                    figures["queries"] += 1
                    figures["spark MB"] += scan.bytes / MB
                    figures["spark files"] += scan.files
                    figures["duckdb files"] += seen.files if seen is not None else float("nan")
                    figures["bound files"] += len(bound)
                    figures["unsound"] += unsound
            out[name] = {
                g: {k: (v if k == "unsound" else v / f["queries"]) for k, v in f.items() if k != "queries"}
                for g, f in sums.items()
            } | {"rows": snapshot.num_records}
    finally:
        duck.close()
    return out


def write_config(root: Path, warehouse: Path, target: int, min_new: int) -> Config:
    """The service's configuration: the warehouse's fact table watched (twice: `SERVICES`, one log),
    its dimensions' schemas and locations known (so dimension filters derive and joined features are
    possible)."""
    log = str(warehouse / f"{FACT}_querylog")
    tables = [
        {"name": name, "path": str(warehouse / name), "table_id": FACT, "query_log": log}
        | ({"thresholds": {"readers": readers}} if readers else {})
        for _, name, readers in SERVICES
    ]
    settings = {
        "spark": {"master": "local[2]", "shuffle_partitions": 8},
        "defaults": {"min_new_bytes": min_new, "target_file_size": target},
        "tables": tables,
        "schemas": {"locations": [str(warehouse)]},
        "service": {"state_dir": str(root / "state"), "jitter": 0},
        "logging": {"level": "WARNING"},
    }
    path = root / "deltaopt.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return load_config(path)


def run(
    scale: float = 0.3,
    appends: int = 6,
    rate: float = 60.0,
    *,
    families: Sequence[str] = (),
    files_per_append: int = 10,
    files_per_increment: int = FILES_PER_INCREMENT,
    spark: Any = None,
    work: Path | None = None,
    report: bool = True,
) -> dict[str, Any]:
    """The whole flow; `report=False` (the tests) writes no report. Files are sized to 1/`files_per_increment`
    of an append."""
    from optimizer.service.service import context, run_once

    work = work or Path(tempfile.mkdtemp(prefix="deltaopt-star-flow-"))
    warehouse = work / "warehouse"
    raw = work / "tpch"
    for name in DIMENSIONS:
        (path,) = tpch.generate(name, scale, raw)
        write_deltalake(str(warehouse / name), _plain(pq.read_table(path)))
    parts = date_ordered_appends(scale, appends + 1, raw)
    spark = spark or build_session(load_config_spark())

    copies = {"none": open_table(str(work / "none"))} | {
        label: open_table(str(warehouse / name)) for label, name, _ in SERVICES
    }
    for copy in copies.values():
        load_part(spark, copy, parts[0], files_per_append)
    increment = copies["none"].snapshot().total_bytes
    target = max(1 << 20, increment // files_per_increment)
    peers = {
        f"Delta ZORDER BY ({', '.join(DATE_ORDER)})": DeltaPeer(
            spark, str(work / "zorder"), "zorder", DATE_ORDER, target
        ),
        f"Delta liquid ({', '.join(EXPERT)})": DeltaPeer(spark, str(work / "liquid"), "liquid", EXPERT, target),
    }
    for peer in peers.values():
        peer.load(spark.read.parquet(str(parts[0])).repartition(files_per_append))
    config = write_config(work, warehouse, target, min_new=increment // 2)
    log = QueryLogTable(config.tables[0].query_log_path)
    catalog = build_catalog(locations=[str(warehouse)])
    dimensions = {name: catalog.locations[name] for name in DIMENSIONS}
    versions = {location_key(uri): open_table(uri).snapshot().version for uri in dimensions.values()}
    recording = SqlContext(schema=catalog.schema, watched={FACT}, derive=JoinDeriver(spark, catalog.locations))
    held = held_out(HELD_OUT, families, recording, dimensions, versions)
    ctx = context(config, spark=lambda: spark)
    rng = random.Random(5)
    uris = {"none": str(work / "none")} | {label: str(warehouse / name) for label, name, _ in SERVICES}
    uris |= {n: p.path for n, p in peers.items()}
    ticks: list[dict[str, Any]] = []
    with Recorder(log, work / "spill", capacity=500, context=recording) as recorder:
        for step, part in enumerate(parts[1:], start=1):
            now = record_hour(recorder, rng, rate, step, lambda count, seed: draw(count, seed, families))
            append_everywhere(spark, part, copies.values(), peers.values(), files_per_append)
            started = time.perf_counter()
            records = run_once(ctx, now=now)
            tick_seconds = time.perf_counter() - started
            peer_seconds = {name: peer.optimize().seconds for name, peer in peers.items()}
            measured = {name: measure(open_table(uri), held, versions) for name, uri in uris.items()}
            figures = {name: m[0] for name, m in measured.items()}
            kept = {name: m[1] for name, m in measured.items()}
            services = {label: _decision(r.as_dict()) for (label, _, _), r in zip(SERVICES, records, strict=True)}
            ticks.append(
                {
                    "tick": step,
                    "services": services,
                    "tick_seconds": round(tick_seconds, 1),
                    "peer_seconds": peer_seconds,
                    "copies": figures,
                }
            )
            print(f"  tick {step}:", flush=True)
            for label, d in services.items():
                print(f"    {label}: {d['action']} - {str(d['reason'])[:200]}", flush=True)
            print(
                "    MB/query deltaopt/min-max: "
                + ", ".join(
                    f"{n} {f['all']['deltaopt MB']:.2f}/{f['all']['min/max MB']:.2f}" for n, f in figures.items()
                ),
                flush=True,
            )
    results = {
        "scale": scale,
        "appends": appends,
        "rate": rate,
        "families": list(families or FAMILIES),
        "target": target,
        "increment": increment,
        "ticks": ticks,
        "final": final_readers(spark, uris, held, kept),
        "kept_over_bound": _kept_over_bound(spark, uris, peers, held),
    }
    if report:
        name = "star-flow" + (f"-{files_per_increment}files" if files_per_increment != FILES_PER_INCREMENT else "")
        raw = Path(__file__).parent / "reports" / f"{name}.json"
        raw.write_text(json.dumps(results, indent=1, default=str))
        command = f"python -m benchmarks star-flow --scale {scale:g} --appends {appends} --rate {rate:g}" + "".join(
            f" --family '{f}'" for f in families
        )
        if files_per_increment != FILES_PER_INCREMENT:
            command += f" --files-per-increment {files_per_increment}"
        write_report(
            name,
            "Star schema flow: a fact table growing by date, live star queries, ticks",
            render(results),
            command,
        )
    return results


def _kept_over_bound(
    spark: Any, uris: Mapping[str, str], peers: Mapping[str, DeltaPeer], held: Sequence[HeldQuery]
) -> dict[str, dict[str, Any]]:
    """Issue 48's race on the final state (`kept_share`): per held-out scan, what a min/max reader keeps
    (files by Delta's statistics, row groups by footers) over the rows its direct and derived filters
    select (dynamic file pruning's best case), for the service priced for standard readers and Delta's
    two layouts."""
    (zorder,) = [p for p in peers.values() if p.kind == "zorder"]
    (liquid,) = [p for p in peers.values() if p.kind == "liquid"]
    copies = {"service": uris[SERVICES[0][0]], "zorder": zorder.path, "liquid": liquid.path}
    scans = [(q.where, q.columns) for q in held]
    race = kept_share.race(spark, {name: open_table(uri) for name, uri in copies.items()}, scans)
    return {name: asdict(result) for name, result in race.items()}


def _decision(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the report keeps of a tick's decision record."""
    analysis = AnalysisSummary.from_dict(record.get("analysis") or {})
    return {
        "action": record.get("action"),
        "reason": record.get("reason"),
        "features": record.get("features"),
        # the record's explanation of each joined candidate (chosen or not, and why)
        "joined_candidates": [asdict(c) for c in analysis.candidates if c.feature.split(".")[0] in DIMENSIONS],
        "from_joins": dict(analysis.from_joins) if record.get("analysis") else None,
        "job_seconds": (record.get("job") or {}).get("seconds"),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks star-flow")
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--appends", type=int, default=6)
    parser.add_argument("--rate", type=float, default=60.0, help="queries per simulated hour")
    parser.add_argument("--family", action="append", default=[], choices=sorted(FAMILIES))
    parser.add_argument(
        "--files-per-increment",
        type=int,
        default=FILES_PER_INCREMENT,
        help="target file size as a fraction of one append (more files: a larger table's file count)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="deltaopt-star-flow-"))
    try:
        run(
            args.scale,
            args.appends,
            args.rate,
            families=args.family,
            files_per_increment=args.files_per_increment,
            work=work,
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
