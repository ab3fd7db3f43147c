"""A star schema with recurring query families: how much of the fact table each layout lets a reader
skip when the selective filters sit on the dimensions.

    python -m benchmarks star [--scale 0.1] [--queries 300] [--family NAME ...]

One run:

1. generates TPC-H ``lineitem`` (the fact table, in 4 appends as loaded), ``part`` and ``supplier``
   with ``tpchgen-cli`` and writes them as Delta tables under one warehouse;
2. draws `queries` SQL queries from six families (`benchmarks.star_workload`), each with literals that
   change from query to query, popular values more often: a part brand, a part container, a supplier
   nation (dimension filters whose keys are scattered over the key domain), a ship month (a direct
   range), a brand within a month, and a part type (more keys than a key set may list: the limit);
3. imports them twice with schemas and join derivation: once with ranges only (deltaopt before
   join-induced key sets: ``JoinDeriver(max_keys=0)``) and once as the product does now;
4. lays ``lineitem`` out six ways: none (as loaded), date-ordered (delta-rs ``z_order`` on the ship
   date alone), delta-rs ``z_order`` on the columns an expert picks (ship date, part key, supplier
   key), and the service's decision (analysis, layout search, cost and benefit, priced for readers
   through deltaopt's pruning; written whatever the action) on the first log, on the second without
   the dimensions' locations (key sets, no joined features) and on the second with them (joined
   features may be chosen; their files record joined ranges);
5. replays every query's scan with its direct and derived filters (from the second log: the same
   filters for every layout) and its dimension filters (joined ranges) and reports, per family and
   layout, the fact bytes and files read by deltaopt's pruning, by a reader that only has Delta's
   min/max (what dynamic file pruning on file statistics sees), by DuckDB's Delta extension, and the
   lower bound: files that hold a row the query keeps.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlglot
from deltalake import DeltaTable

from benchmarks.common import short_key_lists, table, write_report
from benchmarks.standard_reader import DuckDBReader
from benchmarks.star_workload import FAMILIES, generate, workload
from costmodel.cost import DEFAULT_MODEL
from optimizer.analysis import TableContext
from optimizer.catalog import build_catalog
from optimizer.clustering import optimize
from optimizer.config import SparkSettings, Thresholds
from optimizer.estimate.decision import estimate
from optimizer.joins import JoinDeriver
from optimizer.runtime import build_session
from optimizer.skipping.extended import location_key
from optimizer.skipping.joined import JoinFilter, from_derived
from optimizer.skipping.scan import plan_scan, table_file_stats
from optimizer.table import open_table
from querylog.capture import Captured, SqlContext, capture_sql, prefetch_derived
from querylog.store import QueryLogTable

EXPERT = ("l_shipdate", "l_partkey", "l_suppkey")
DATE_ORDER = ("l_shipdate",)  # the date-ordered layout standard readers are judged against
FILES = 48  # the rewrite target: this fraction of the table as loaded
READERS = {"deltaopt": 1.0}  # who the service prices layouts for: here, readers through deltaopt's pruning


def matching_files(
    reader: DuckDBReader, root: str, paths: list[str], where: str | None, joins: Sequence[JoinFilter] = ()
) -> set[str]:
    """The lower bound: the files (relative paths) holding at least one row that satisfies `where` and
    joins a dimension row satisfying each of `joins`' filters (the query's own semi-joins)."""
    conditions = [sqlglot.transpile(where, read="spark", write="duckdb")[0]] if where else []
    for join in joins:
        dimension = sqlglot.transpile(join.where, read="spark", write="duckdb")[0]
        conditions.append(
            f'"{join.fact_column}" IN (SELECT "{join.key}" FROM delta_scan(\'{join.location}\') WHERE {dimension})'
        )
    if not conditions:
        return set(paths)
    listed = ", ".join(f"'{root}/{p}'" for p in paths)
    rows = reader.connection.execute(
        f"SELECT DISTINCT filename FROM read_parquet([{listed}], filename = true) WHERE {' AND '.join(conditions)}"
    ).fetchall()
    return {str(r[0])[len(root) + 1 :] for r in rows}


def replay(
    path: str, scans: list[tuple[str, Any]], reader: DuckDBReader, locations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Per family: queries, and the column bytes and files read by each reader over its scans. With the
    dimensions' `locations`, each scan's dimension filters (from its derived filters' ``via``) also
    prune with the files' joined ranges, as `plan_scan(joins=...)` does for a query that joins."""
    delta = open_table(path)
    snapshot = delta.snapshot()
    dimensions = dict(locations or {})
    versions = {location_key(where): open_table(where).snapshot().version for where in dimensions.values()}
    stats = table_file_stats(delta, snapshot, versions=versions)
    min_max = table_file_stats(delta, snapshot, None, {})  # Delta's statistics only
    by_path = {s.path: s for s in stats}
    paths = [f.path for f in snapshot.files]
    families: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float, {"duckdb files": 0.0}))
    for family, scan in scans:
        where = " AND ".join(scan.filters) or None
        joins = [replace(j, version=versions[location_key(j.location)]) for j in from_derived(scan.derived, dimensions)]
        counts = families[family]
        counts["queries"] += 1
        bound = matching_files(reader, path, paths, where, joins)
        for reader_name, file_stats in (("deltaopt", stats), ("min/max", min_max)):
            plan = plan_scan(delta, where, scan.columns, snapshot=snapshot, stats=file_stats, joins=joins)
            counts[f"{reader_name} files"] += len(plan.files)
            counts[f"{reader_name} bytes"] += plan.column_bytes_read or 0
            counts["unsound"] += not bound <= {f.path for f in plan.files}  # a matching file skipped
        plan = plan_scan(delta, None, scan.columns, snapshot=snapshot, stats=[by_path[p] for p in sorted(bound)])
        counts["bound files"] += len(bound)
        counts["bound bytes"] += plan.column_bytes_read or 0
        seen = reader.files_scanned(path, where)
        if seen is not None:
            counts["duckdb files"] += seen.files
            counts["duckdb known"] += 1
    return {"files": len(paths), "rows": snapshot.num_records, "families": {k: dict(v) for k, v in families.items()}}


COMPARED = 40  # statements also imported one key at a time (as before batching), for the side-by-side rate


def _import(
    work: Path, drawn: list[tuple[str, str]], context: SqlContext, label: str
) -> tuple[QueryLogTable, dict[str, Any]]:
    """Each query captured as the recorder does, with query id ``q<i>`` (its position in `drawn`), the
    join-derived filters prefetched in batches as the importers do; the import's rate."""
    log = QueryLogTable(str(work / f"log-{label}"))
    captured, seconds = _capture(drawn, context, batched=True)
    log.append(captured.scans)
    derived = sum(1 for s in captured.scans if s.derived)
    rate = len(drawn) / seconds
    print(f"import ({label}): {len(captured.scans)} scans, {derived} with derived filters, {rate:,.1f} statements/s")
    passes = getattr(context.derive, "evaluated", None)
    return log, {
        "statements": len(drawn),
        "seconds": round(seconds, 2),
        "per_second": round(rate, 1),
        "derived_scans": derived,
        "spark_passes": passes,
        "captured": captured,
    }


def _capture(drawn: list[tuple[str, str]], context: SqlContext, *, batched: bool) -> tuple[Captured, float]:
    now = datetime.now(UTC)
    memo = context.templates()
    started = time.perf_counter()
    if batched:
        prefetch_derived([text for _, text in drawn], context, memo)
    captured = Captured()
    for i, (_, text) in enumerate(drawn):
        captured += capture_sql(text, now, "star", context, query_id=f"q{i}", scans=memo)
    return captured, time.perf_counter() - started


def _one_key_at_a_time(drawn: list[tuple[str, str]], context: SqlContext, batched: Captured) -> dict[str, Any]:
    """The first `COMPARED` statements imported twice more, each time with a fresh deriver (nothing
    cached): key by key as before batching, and batched; both rates side by side, and whether the derived
    filters are those of the whole batched import."""
    head = drawn[:COMPARED]
    rates = {}
    derived = {}
    for label, batch in (("one key at a time", False), ("batched", True)):
        fresh = replace(context, derive=replace(context.derive, _cache={}))  # type: ignore[type-var]
        captured, seconds = _capture(head, fresh, batched=batch)
        rates[label] = round(len(head) / seconds, 1)
        derived[label] = {s.query_id: s.derived for s in captured.scans}
    whole = {s.query_id: s.derived for s in batched.scans if int(s.query_id[1:]) < COMPARED}
    return {
        "statements": len(head),
        "per_second": rates["one key at a time"],
        "batched_per_second": rates["batched"],
        "same_derived_filters": derived["one key at a time"] == derived["batched"] == whole,
    }


def run(
    scale: float = 0.1,
    queries: int = 300,
    *,
    families: Sequence[str] = (),
    spark: Any = None,
    work: Path | None = None,
    report: bool = True,
    files: int = FILES,
    readers: Mapping[str, float] = READERS,
) -> dict[str, Any]:
    """The whole benchmark over `families` (default: all), rewriting into files of about 1/`files` of
    the table as loaded (a large table's file count at a small scale), the service pricing layouts for
    `readers` (shares of deltaopt's pruning and standard readers); `report=False` (the tests) writes
    no report."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {sorted(FAMILIES)}")
    work = work or Path(tempfile.mkdtemp(prefix="deltaopt-star-"))
    warehouse = work / "warehouse"
    clock = time.perf_counter()
    generate(warehouse, scale)
    generated = time.perf_counter() - clock
    drawn = workload(queries, families=families)
    spark = spark or build_session(SparkSettings(master="local[2]", shuffle_partitions=8, driver_memory="8g"))
    catalog = build_catalog(locations=[str(warehouse)])
    logs: dict[str, QueryLogTable] = {}
    imports: dict[str, dict[str, Any]] = {}
    for label, deriver in (
        ("ranges only", JoinDeriver(spark, catalog.locations, max_keys=0)),
        ("key sets", JoinDeriver(spark, catalog.locations)),
    ):
        context = SqlContext(schema=catalog.schema, watched={"lineitem"}, derive=deriver)
        logs[label], imports[label] = _import(work, drawn, context, label)
    imports["one key at a time"] = _one_key_at_a_time(drawn, context, imports["key sets"].pop("captured"))
    imports["ranges only"].pop("captured")
    scans = sorted(logs["key sets"].read("lineitem"), key=lambda s: int(s.query_id[1:]))
    if len(scans) != len(drawn):
        raise RuntimeError(f"{len(drawn)} queries drawn but {len(scans)} lineitem scans logged")

    base = warehouse / "lineitem"
    snapshot = open_table(str(base)).snapshot()
    target = max(1 << 20, snapshot.total_bytes // files)
    layouts: dict[str, str] = {"none (as loaded)": str(base)}
    seconds: dict[str, float] = {}
    for label, columns in (("date-ordered", DATE_ORDER), ("expert", EXPERT)):
        copy = work / f"lineitem_{label}"
        shutil.copytree(base, copy)
        clock = time.perf_counter()
        DeltaTable(str(copy)).optimize.z_order(list(columns), target_size=target)
        seconds[label] = round(time.perf_counter() - clock, 1)
        layouts[f"delta-rs z_order({', '.join(columns)})"] = str(copy)
    # priced for `readers` (by default those that read through deltaopt's pruning: the question here);
    # the min/max and DuckDB columns show what standard readers get from the same layouts
    thresholds = Thresholds(sample_rows=100_000, target_file_size=target, min_new_bytes=1, readers=dict(readers))
    decisions = {}
    runs = [  # (label, log, where dimensions are: joined features need them)
        ("ranges only", logs["ranges only"], {}),
        ("key sets", logs["key sets"], {}),
        ("joined features", logs["key sets"], dict(catalog.locations)),
    ]
    for label, log, locations in runs:
        now = datetime.now(UTC)
        context = TableContext(
            spark, open_table(str(base)), "lineitem", log, thresholds, now, DEFAULT_MODEL, locations=locations
        )
        decision = estimate(context)
        name = f"deltaopt ({label})"
        decisions[name] = {"action": decision.action.value, "reason": decision.reason, **decision.as_dict()["features"]}
        if decision.features is None or decision.features.is_empty:
            continue
        copy = work / f"lineitem_{len(layouts)}"
        shutil.copytree(base, copy)
        clock = time.perf_counter()
        optimize(spark, open_table(str(copy)), decision.features, target)
        seconds[name] = round(time.perf_counter() - clock, 1)
        layouts[name] = str(copy)

    reader = DuckDBReader()
    of_query = [f for f, _ in drawn]
    paired = list(zip(of_query, scans, strict=True))
    measured = {name: replay(path, paired, reader, catalog.locations) for name, path in layouts.items()}
    reader.close()
    results = {
        "scale": scale,
        "queries": queries,
        "target_files": files,
        "readers": dict(readers),
        "families": list(families or FAMILIES),
        "generate_seconds": round(generated, 1),
        "decisions": decisions,
        "rewrite_seconds": seconds,
        "layouts": measured,
        "duckdb_errors": dict(reader.errors),
        "imports": imports,
    }
    if report:
        report_name = _report_name(families, scale, files, readers)
        (Path(__file__).parent / "reports" / f"{report_name}.json").write_text(
            json.dumps(results, indent=1, default=str)
        )
        _report(results, report_name)
    return results


def _imports_line(imports: Mapping[str, Any]) -> str:
    """The imports' rates, batched and one key at a time, side by side."""
    if "key sets" not in imports:
        return ""
    batched, single = imports["key sets"], imports["one key at a time"]
    return (
        f"Import with join derivation (key sets): {batched['statements']} statements in {batched['seconds']} s, "
        f"{batched['per_second']} statements/s ({batched['spark_passes']} Spark passes over the dimensions, "
        f"{batched['derived_scans']} scans with derived filters). Side by side on the first {single['statements']}, "
        f"nothing cached: one key at a time as before batching {single['per_second']} statements/s, batched "
        f"{single['batched_per_second']} statements/s; derived filters the same: {single['same_derived_filters']}."
    )


def _report_name(
    families: Sequence[str], scale: float = 0.1, files: int = FILES, readers: Mapping[str, float] = READERS
) -> str:
    """``star`` for every family, else ``star-`` and the families' words; a scale, file target or
    readers other than the defaults add ``-sf<scale>`` / ``-<files>files`` / ``-<reader><share>...``."""
    name = "star"
    if families and set(families) != set(FAMILIES):
        name += "-" + "-".join(re.sub(r"[^a-z]+", "-", f.lower()).strip("-") for f in families)
    if scale != 0.1:
        name += f"-sf{scale:g}"
    name += f"-{files}files" if files != FILES else ""
    return name + ("".join(f"-{r}{share:g}" for r, share in readers.items()) if dict(readers) != READERS else "")


def _report(results: dict[str, Any], report_name: str) -> None:
    layouts = results["layouts"]
    none = layouts["none (as loaded)"]["families"]
    rows = []
    for family in FAMILIES:
        if family not in none:
            continue
        base = none[family]["deltaopt bytes"] or 1
        for name, measured in layouts.items():
            c = measured["families"][family]
            q = c["queries"]
            rows.append(
                (
                    family if name == "none (as loaded)" else "",
                    name,
                    f"{c['deltaopt bytes'] / q / 1e6:.2f} ({c['deltaopt bytes'] / base:.3f})",
                    f"{c['deltaopt files'] / q:.1f}",
                    f"{c['min/max bytes'] / q / 1e6:.2f} ({c['min/max bytes'] / base:.3f})",
                    f"{c['duckdb files'] / c['duckdb known']:.1f}" if c.get("duckdb known") else "-",
                    f"{c['bound bytes'] / q / 1e6:.2f} / {c['bound files'] / q:.1f}",
                )
            )
    files = ", ".join(f"{name}: {m['files']}" for name, m in layouts.items())
    unsound = sum(c.get("unsound", 0) for m in layouts.values() for c in m["families"].values())
    body = (
        f"TPC-H scale {results['scale']} (lineitem the fact table; part, supplier its dimensions), generated in "
        f"{results['generate_seconds']} s; {results['queries']} queries from {len(results['families'])} "
        f"families ({', '.join(results['families'])}).\n\n"
        f"Files per layout: {files}. Rewrite seconds: {json.dumps(results['rewrite_seconds'])}. "
        f"Scans where a reader skipped a file holding a matching row: {unsound}.\n\n"
        f"{_imports_line(results.get('imports', {}))}\n\n"
        "Per family and layout, per query: fact column MB read by deltaopt's pruning (share of none's), "
        "files it reads, MB read by a reader with Delta's min/max only (dynamic file pruning on file "
        "statistics; share of none's), files DuckDB's Delta extension scans, and the lower bound "
        "(MB / files holding a row that satisfies the query's fact filters and joins a matching dimension "
        "row). The filters are the same for every layout: the direct ones, those derived from the "
        "dimension filters (ranges and key sets) and the dimension filters themselves, which deltaopt's "
        "pruning checks against files' joined ranges (`plan_scan(joins=...)`).\n\n"
        + table(
            ("family", "layout", "deltaopt MB", "deltaopt files", "min/max MB", "DuckDB files", "bound MB / files"),
            rows,
        )
        + "\n\nThe service's decisions (trigger gate off; the layout is written whatever the action):\n\n"
        + "".join(f"- {name}: {short_key_lists(json.dumps(d))}\n" for name, d in results["decisions"].items())
        + (
            f"\nDuckDB errors (those scans' counts unknown): {results['duckdb_errors']}\n"
            if results["duckdb_errors"]
            else ""
        )
    )
    print(body)
    everything = set(results["families"]) == set(FAMILIES)
    chosen = "" if everything else "".join(f" --family '{f}'" for f in results["families"])
    if results["target_files"] != FILES:
        chosen += f" --files {results['target_files']}"
    if results["readers"] != READERS:
        chosen += " --readers " + ",".join(f"{r}={share:g}" for r, share in results["readers"].items())
    write_report(
        report_name,
        "Star schema: fact bytes read per query family and layout",
        body,
        f"python -m benchmarks star --scale {results['scale']} --queries {results['queries']}{chosen}",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks star")
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument(
        "--family", action="append", default=[], choices=sorted(FAMILIES), help="only these query families (repeat)"
    )
    parser.add_argument("--files", type=int, default=FILES, help="rewrite into files of 1/FILES of the table")
    parser.add_argument(
        "--readers",
        default="deltaopt=1",
        help="shares the service prices layouts for, e.g. deltaopt=0.5,standard=0.5",
    )
    args = parser.parse_args(argv)
    readers = {name: float(share) for name, _, share in (p.partition("=") for p in args.readers.split(","))}
    run(args.scale, args.queries, families=args.family, files=args.files, readers=readers)
