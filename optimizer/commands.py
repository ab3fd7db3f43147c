"""The ``deltaopt`` sub-commands.

Each takes the arguments `optimizer.cli` parsed, calls the library and prints the result (text by
default, ``--json`` where a machine reads it). Library errors propagate: `optimizer.cli.main` turns
them into one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from optimizer.errors import DeltaOptError


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, sort_keys=True))


def cmd_config_check(args: argparse.Namespace) -> int:
    from optimizer.config import load_config

    config = load_config(args.file)
    print(f"{args.file}: valid ({len(config.tables)} table(s))")
    for table in config.tables:
        t = table.thresholds
        print(
            f"  {table.name}: {table.path} (log {table.query_log_path}); every {table.interval:g}s; "
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


def configured_table(args: argparse.Namespace):
    from optimizer.config import load_config

    config = load_config(args.config)
    if args.table:
        return config, config.table(args.table)
    if len(config.tables) != 1:
        raise DeltaOptError("--table is required when the configuration has several tables")
    return config, config.tables[0]


def _watched(args: argparse.Namespace):
    """(config, table settings, Spark, Delta table, query log) of the configured table in `args`."""
    from optimizer.runtime import build_session
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    config, table = configured_table(args)
    if getattr(args, "window", None):
        from optimizer.config import parse_duration

        thresholds = table.thresholds.model_copy(update={"workload_window": parse_duration(args.window)})
        table = table.model_copy(update={"thresholds": thresholds})
    return config, table, build_session(config.spark), open_table(table.path), QueryLogTable(table.query_log_path)


def cmd_analyse(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime, timedelta

    from optimizer.analysis import TableContext, analyse_table

    _, table, spark, delta, log = _watched(args)
    now = datetime.now(UTC)
    result = analyse_table(TableContext(spark, delta, table.identity, log, table.thresholds, now))
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
    from optimizer.config import SparkSettings, load_config, parse_size
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
    spark = build_session(settings)
    table = open_table(path)
    snapshot = table.snapshot()
    features = _optimize_features(args, spark, table, configured)
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
    )
    if args.json:
        print_json(result.as_dict())
    elif result.version is None:
        print("nothing to optimise: no unclustered files")
    else:
        print(
            f"{path}: version {result.version}, {result.files_in} -> {result.files_out} files, "
            f"{result.bytes_in:,} -> {result.bytes_out:,} bytes, {result.rows:,} rows; committed by "
            + ("Delta's own transaction" if result.committed_by == "delta-spark" else result.committed_by)
        )
    if result.properties:
        print("  clustering keys got statistics: " + ", ".join(f"{k}={v}" for k, v in result.properties.items()))
    return 0


def _optimize_features(args: argparse.Namespace, spark: Any, table: Any, configured: Any) -> Any:
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
        from querylog.store import QueryLogTable

        log = QueryLogTable(configured.query_log_path)
        context = TableContext(spark, table, configured.identity, log, configured.thresholds, datetime.now(UTC))
        analysis = analyse_table(context)
        print(f"features from the workload: {analysis.features.as_dict()}", file=sys.stderr)
        return analysis.features
    print("no features given: compaction only", file=sys.stderr)
    return FeatureSet()


def _output_settings(args: argparse.Namespace, thresholds: Any) -> Any:
    """How `optimize` writes: --output-json (the service's request), else the flags over the configuration."""
    from optimizer.config import parse_size
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
    from optimizer.table import open_table

    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    result = explain(open_table(args.table), args.where, columns)
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


def cmd_estimate(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from costmodel.cost import load
    from optimizer.analysis import TableContext
    from optimizer.estimate.decision import estimate

    config, table, spark, delta, log = _watched(args)
    cost_model = load(config.service.cost_model_path)
    context = TableContext(spark, delta, table.identity, log, table.thresholds, datetime.now(UTC), cost_model)
    decision = estimate(context)
    if args.json:
        print_json(decision.as_dict())
        return 0
    print(f"{table.name} v{decision.version}: {decision.action.upper()} - {decision.reason}")
    print(
        f"  new data: {decision.new_files} files, {decision.new_bytes:,} bytes (threshold {decision.min_new_bytes:,})"
    )
    if decision.outside_window and decision.outside_window.get("count"):
        o = decision.outside_window
        print(f"  outside the workload window: {o['count']} logged scans ({o['first']} .. {o['last']})")
    if decision.cost and decision.benefit:
        b = decision.benefit
        print(f"  cost: {decision.cost.seconds:.1f} cluster-s ({decision.cost.terms})")
        print(
            f"  benefit: {b.benefit:.1f} cluster-s = {b.expected_queries:.0f} expected queries x "
            f"{b.saved_mb_per_query:.2f} MB saved each; scanned share {b.p_before:.1%} -> {b.p_after:.1%}"
        )
        print(f"    of which skipping {b.benefit_skipping:.1f}, compression {b.benefit_compression:.1f}")
        if b.rate is not None and b.rate.period_start is not None:
            print(
                f"  query rate: {b.rate.per_day:,.1f}/day over {b.rate.covered_seconds / 3600:,.1f} h of log "
                f"from {b.rate.period_start:%Y-%m-%d %H:%M} ({len(b.rate.gaps)} gap(s) left out)"
            )
        if b.compression is not None:
            c = b.compression
            figures = c.as_dict()
            print(
                f"  stored bytes x{c.ratio:.3f} ({c.codec_before} -> {c.codec_after}): compaction "
                f"x{figures['compaction']}, clustering x{figures['clustering']}"
            )
        for name, seen in b.readers.items():
            print(
                f"  {name} readers ({seen['share']:.0%} of reads): {seen['bytes_per_query_before'] / 1e6:.2f} -> "
                f"{seen['bytes_per_query_after'] / 1e6:.2f} MB per query, benefit {seen['benefit']:.1f}"
            )
        print(f"  features: {decision.features}")
    if decision.search:
        search = decision.search
        print(
            f"  feature search: {search['estimates']} estimates in {search['seconds']} s; chosen {search['chosen']}; "
            f"{search['stopped']}"
        )
        for candidate in search["candidates"]:
            print(f"    {candidate['kind']} {candidate['feature']}: {candidate['reason']}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from optimizer.config import SparkSettings, load_config
    from optimizer.estimate.calibrate import DEFAULT_GRID, calibrate
    from optimizer.runtime import build_session
    from optimizer.table import open_table

    config = load_config(args.config) if args.config else None
    path = config.table(args.table).path if config else args.table
    out = args.out or (config.service.cost_model_path if config else "costmodel.json")
    spark = build_session(config.spark if config else SparkSettings())
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


def cmd_serve(args: argparse.Namespace) -> int:
    from optimizer.config import load_config
    from optimizer.logs import configure_logging
    from optimizer.service.service import context, run_once, serve

    config = load_config(args.config)
    if args.dry_run:
        config = config.model_copy(update={"service": config.service.model_copy(update={"dry_run": True})})
    configure_logging(config.logging.level, config.logging.format)
    ctx = context(config)
    if args.once:
        for record in run_once(ctx):
            print(f"{record.table}: {record.action.upper()} - {record.reason}")
    else:
        serve(ctx)
    print(f"decision log: {config.decision_log_path} (table: {config.service.decisions_path})")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from optimizer.clustering.groups import clustered_groups
    from optimizer.config import load_config
    from optimizer.inspect import human_bytes, table_info
    from optimizer.service.state import StateStore
    from optimizer.table import open_table

    config = load_config(args.config)
    store = StateStore(config.service.state_dir)
    rows = []
    for table in config.tables:
        state = store.load(table.name)
        entry: dict[str, Any] = {
            "table": table.name,
            "paused": table.paused,
            "last_decision": state.last_decision,
            "ticks": state.ticks,
            "last_optimized_version": state.last_optimized_version,
        }
        try:
            delta = open_table(table.path)
            info = table_info(delta)
            entry.update(
                version=info.version,
                files=info.files,
                bytes=info.bytes,
                clustered_bytes=info.clustered_bytes,
                unclustered_bytes=info.unclustered_bytes,
                layouts=[
                    {**g.as_dict(), "current": g.key == state.current_layout}
                    for g in clustered_groups(delta, delta.snapshot())
                ],
            )
        except DeltaOptError as err:
            entry["error"] = str(err)
        rows.append(entry)
    if args.json:
        print_json(rows)
        return 0
    for entry in rows:
        decision = entry["last_decision"] or {}
        print(f"{entry['table']}{' [paused]' if entry['paused'] else ''}")
        if "error" in entry:
            print(f"  error: {entry['error']}")
        else:
            print(
                f"  version {entry['version']}, {entry['files']} files, {human_bytes(entry['bytes'])}; clustered "
                f"{human_bytes(entry['clustered_bytes'])}, unclustered {human_bytes(entry['unclustered_bytes'])}"
            )
            for layout in entry["layouts"]:
                which = "current features" if layout["current"] else "older features"
                print(
                    f"    {which}: {layout['files']} files, {human_bytes(layout['bytes'])} clustered on "
                    f"{layout['features']}"
                )
        print(
            f"  last decision: {decision.get('ts', 'never')} {str(decision.get('action', '')).upper()} "
            f"{decision.get('reason', '')}"
        )
    return 0


def cmd_decisions(args: argparse.Namespace) -> int:
    from optimizer.config import load_config
    from optimizer.service.decisions import DecisionLog

    config = load_config(args.config)
    records = DecisionLog(config.decision_log_path, config.service.decisions_path).read(args.table, args.last)
    if args.json:
        print_json(records)
        return 0
    for r in records:
        print(f"{r['ts']}  {r['table']}  v{r.get('version', '?')}  {r['action'].upper()}: {r['reason']}")
        job = r.get("job")
        if job:
            print(
                f"    job on {job.get('executor')} ({job.get('where')}): {job.get('files_in', 0)} -> "
                f"{job.get('files_out', 0)} files, {job.get('bytes_in', 0):,} -> {job.get('bytes_out', 0):,} bytes, "
                f"{job.get('seconds', 0)}s{', error: ' + job['error'] if job.get('error') else ''}"
            )
        if r.get("features"):
            print(f"    features: z={r['features'].get('z')} sop={r['features'].get('sop')}")
    print(f"{len(records)} decision(s)")
    return 0
