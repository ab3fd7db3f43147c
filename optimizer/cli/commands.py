"""The ``deltaopt`` sub-commands that inspect and rewrite tables (config, table info, demo, analyse,
optimize, explain, calibrate).

Each takes the arguments `optimizer.cli.main` parsed, calls the library and prints the result (text
by default, ``--json`` where a machine reads it). Library errors propagate: `optimizer.cli.main.main`
turns them into one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from optimizer.cli.common import print_json, watched

if TYPE_CHECKING:
    from optimizer.clustering.job import OptimizeResult


def cmd_config_check(args: argparse.Namespace) -> int:
    from optimizer.config import load_config

    config = load_config(args.file)
    print(f"{args.file}: valid ({len(config.tables)} table(s))")
    for table in config.tables:
        t = table.thresholds
        print(
            f"  {table.name}: {table.path or 'catalog table ' + str(table.table)} "
            f"(log {table.query_log or 'beside it'}); every {table.interval:g}s; "
            f"min new bytes {t.min_new_bytes}, theta {t.min_comparison_points}, gamma {t.min_sop_frequency}, "
            f"max Z {t.max_z_features}{' [paused]' if table.paused else ''}"
        )
    return 0


def cmd_table_info(args: argparse.Namespace) -> int:
    from optimizer.inspect import render, table_info
    from optimizer.table import open_table

    info = table_info(open_table(args.path), args.column, args.log)
    if args.json:
        print_json(info.as_dict())
    else:
        print(render(info))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from optimizer.demo import run_demo

    return run_demo(args.workdir, scale=args.scale, parts=args.parts, fresh=not args.keep)


def cmd_analyse(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime, timedelta

    from optimizer.analysis import TableContext, analyse_table
    from optimizer.catalog import table_locations

    config, table, spark, delta, log = watched(args)
    now = datetime.now(UTC)
    locations = table_locations(config)
    context = TableContext(spark, delta, table.identity, log, table.thresholds, now, locations=locations)
    result = analyse_table(context)
    older = log.older(table.identity, now - timedelta(seconds=table.thresholds.workload_window))
    if args.json:
        print_json({**result.as_dict(), "outside_window": older.as_dict()})
        return 0
    print(f"{table.name}: {result.scans} scans in the window, sample of {result.sample_rows} rows")
    if older.count:
        print(
            f"  {older.count} older scans are outside the window ({older.first:%Y-%m-%d} .. {older.last:%Y-%m-%d}); "
            "--window or workload_window reaches them"
        )
    for label, values in result.features.as_dict().items():
        if label != "sop_weights":
            print(f"  {label:8} {', '.join(values) or '-'}")  # type: ignore[arg-type]
    print("candidates:")
    for c in result.candidates:
        points = f" points={c.comparison_points}" if c.comparison_points is not None else ""
        print(f"  [{c.role.value:8}] {c.kind:3} {c.feature}  share={c.share:.1%}{points}\n             {c.reason}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    from optimizer.clustering import optimize
    from optimizer.config import SparkSettings, load_config
    from optimizer.config_types import parse_size
    from optimizer.runtime import build_session
    from optimizer.skipping.extended import unclustered_files
    from optimizer.table import open_table

    config = load_config(args.config) if args.config else None
    configured = config.table(args.table) if config else None
    path = configured.path if configured else args.table
    thresholds = configured.thresholds if configured else None
    settings = config.spark if config else SparkSettings()
    if args.connect:
        settings = settings.model_copy(update={"connect_url": args.connect})
    if args.commit:
        settings = settings.model_copy(update={"commit": args.commit})
    spark = build_session(settings, config.tables if config else ())
    if config is not None and configured is not None:
        from optimizer.catalog import resolve_tables

        config = resolve_tables(config, spark)
        configured = config.table(configured.name)
        path = configured.path
    table = open_table(path)
    snapshot = table.snapshot()
    features = _optimize_features(args, spark, table, configured, config)
    target = (
        parse_size(args.target_file_size)
        if args.target_file_size
        else (thresholds.target_file_size if thresholds else 128 << 20)
    )
    result = optimize(
        spark,
        table,
        features,
        target,
        files=snapshot.files if args.all_files else unclustered_files(table, snapshot),
        snapshot=snapshot,
        metadata={"trigger": "manual"},
        progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True),
        run_id=args.run_id,
        output=_output_settings(args, thresholds),
        stats_for_keys=not args.no_key_statistics and (thresholds.stats_for_clustering_keys if thresholds else True),
        liquid=args.liquid or (config.liquid_for(configured) if config and configured else "keep"),
        full=args.full,
        decided_keys=json.loads(args.decided_keys) if args.decided_keys is not None else None,
    )
    if args.json:
        print_json(result.as_dict())
    else:
        print(_optimized(path, result))
    return 0


def _optimized(path: str, result: OptimizeResult) -> str:
    """The human summary of one OPTIMIZE run (one by Delta's own commands says what they did)."""
    command = result.command  # Delta's own commands' run (None: deltaopt's layout, or nothing to lay out)
    by_delta = command.describe() if command is not None else None
    if result.version is None:
        if command is not None and command.liquid is not None and command.liquid.mode == "suggest":
            return str(by_delta)  # it says the table was left as it is
        return f"{by_delta}; nothing to commit" if by_delta else "nothing to optimise: no unclustered files"
    files = f"{path}: version {result.version}, {result.files_in} -> {result.files_out} files, "
    files += f"{result.bytes_in:,} -> {result.bytes_out:,} bytes"
    if by_delta:
        return f"{files}; committed by Delta's own OPTIMIZE\n  {by_delta}"
    who = {"delta-spark": "Delta's own transaction"}.get(result.committed_by, result.committed_by)
    lines = [f"{files}, {result.rows:,} rows; committed by {who}"]
    if result.properties:
        lines.append("  clustering keys got statistics: " + ", ".join(f"{k}={v}" for k, v in result.properties.items()))
    return "\n".join(lines)


def _optimize_features(args: argparse.Namespace, spark: Any, table: Any, configured: Any, config: Any) -> Any:
    """The feature set a manual run uses: --features-json, else the --z/--sop flags (canonicalised like
    logged predicates), else the analyser on the configured table's log, else none (compaction)."""
    from datetime import UTC, datetime

    from optimizer.features import FeatureSet, SopFeature, ZFeature
    from querylog.predicates.normalize import canonical_conjuncts
    from querylog.predicates.parse import parse_condition

    def canonical(texts: list[str], split: bool = False) -> list[str]:
        if split:  # Z expressions may come as a,b,c
            texts = [part.strip() for text in texts for part in text.split(",") if part.strip()]
        return [c for text in texts for c in canonical_conjuncts(parse_condition(text))]

    if args.features_json:
        return FeatureSet.from_dict(json.loads(args.features_json))
    if args.z or args.sop:
        return FeatureSet(
            z=tuple(ZFeature(e) for e in canonical(args.z, split=True)),
            sop=tuple(SopFeature(p) for p in canonical(args.sop)),
            z_add=tuple(ZFeature(e) for e in canonical(args.z_add, split=True)),
            sop_add=tuple(SopFeature(p) for p in canonical(args.sop_add)),
        )
    if configured is not None:
        from optimizer.analysis import TableContext, analyse_table
        from optimizer.catalog import table_locations
        from querylog.store import QueryLogTable

        log = QueryLogTable(configured.query_log_path)
        locations = table_locations(config)
        now = datetime.now(UTC)
        context = TableContext(spark, table, configured.identity, log, configured.thresholds, now, locations=locations)
        analysis = analyse_table(context)
        print(f"features from the workload: {analysis.features.as_dict()}", file=sys.stderr)
        return analysis.features
    print("no features given: compaction only", file=sys.stderr)
    return FeatureSet()


def _output_settings(args: argparse.Namespace, thresholds: Any) -> Any:
    """How `optimize` writes: --output-json (the service's request), else the flags over the configuration."""
    from optimizer.config_types import parse_size
    from optimizer.table.output import OutputSettings

    if args.output_json:
        return OutputSettings.from_dict(json.loads(args.output_json))
    base = thresholds.output if thresholds is not None else OutputSettings()
    if not (args.codec or args.codec_level or args.row_group_size):
        return base
    return OutputSettings(
        codec=args.codec or base.codec,
        level=args.codec_level if args.codec_level is not None else base.level,
        row_group_bytes=parse_size(args.row_group_size) if args.row_group_size else base.row_group_bytes,
        source="command line" if args.codec else base.source,
    )


def cmd_explain(args: argparse.Namespace) -> int:
    from optimizer.inspect import human_bytes
    from optimizer.skipping.explain import explain
    from optimizer.skipping.joined import JoinFilter
    from optimizer.table import open_table

    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    joins = [JoinFilter(*join) for join in args.join]
    result = explain(open_table(args.table), args.where, columns, joins)
    if args.json:
        print_json(result.as_dict())
        return 0
    print(f"{args.table}: {result.total_files} files, {human_bytes(result.total_bytes)}; filter {result.predicate}")
    for label, reads in (("standard readers (Delta min/max)", result.standard), ("deltaopt pruning", result.deltaopt)):
        column = f", {human_bytes(reads.column_bytes)} of the columns read" if reads.column_bytes is not None else ""
        print(f"  {label:34} {reads.files}/{result.total_files} files, {human_bytes(reads.bytes)}{column}")
    print("  files skipped by:")
    for stage, count in result.skipped_by.items():
        print(f"    {stage:20} {count}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from optimizer.cli.common import load_resolved
    from optimizer.config import SparkSettings
    from optimizer.estimate.calibrate import DEFAULT_GRID, calibrate
    from optimizer.runtime import build_session
    from optimizer.table import open_table

    config = load_resolved(args.config) if args.config else None
    path = config.table(args.table).path if config else args.table
    out = args.out or (config.service.cost_model_path if config else "costmodel.json")
    spark = build_session(config.spark if config else SparkSettings(), config.tables if config else ())
    rows = [int(r) for r in args.rows.split(",")]
    grid = DEFAULT_GRID[:3] if args.quick else DEFAULT_GRID
    model, runs = calibrate(spark, open_table(path), rows, grid, progress=lambda m: print(f"  {m}", flush=True))
    model.save(out)
    print(f"fitted on {len(runs)} runs (R^2 = {model.r2:.3f}); saved to {out}")
    print(
        f"  seconds = {model.overhead:.2f} + GB x ({model.base:.2f} + {model.per_z:.2f} z + {model.per_sop:.2f} sop "
        f"+ {model.per_additional:.2f} additional)"
    )
    return 0
