"""The ``deltaopt querylog`` sub-commands: import sources into a query log, show it, show its quarantine."""

from __future__ import annotations

import argparse
from typing import Any

from optimizer.cli.common import configured_table, print_json
from optimizer.errors import DeltaOptError


def _querylog_target(args: argparse.Namespace):
    """The log table and SQL context from --config/--table, or from --log alone, resolving with the
    schema sources of the configuration plus the command line's (and, with --derive-joins, deriving
    join filters on Spark for the tables deltaopt optimises: `querylog_context.derivation_context`)."""
    from optimizer.cli.querylog_context import catalog_for, derivation_context, sql_context
    from optimizer.config import SchemaSettings, SparkSettings
    from optimizer.runtime import build_session
    from querylog.capture import SqlContext
    from querylog.store import QueryLogTable

    derive = getattr(args, "derive_joins", False)
    through_facts = getattr(args, "derive_through_facts", False)
    if through_facts and not derive:
        raise DeltaOptError("--derive-through-facts only changes join derivation: give --derive-joins too")
    if args.config:
        config, table = configured_table(args)
        log_table = QueryLogTable(args.log or table.query_log_path)
        watched, configured, spark_settings = {t.name: t.path for t in config.tables}, config.schemas, config.spark
    elif args.log:
        config, log_table = None, QueryLogTable(args.log)
        watched = _located_table(args.log)
        configured = SchemaSettings()
        spark_settings = SparkSettings()
    else:
        raise DeltaOptError("give --log PATH, or --config FILE [--table NAME]")
    sources = SchemaSettings(  # the command line adds to the configuration (and its file wins)
        file=getattr(args, "schema_file", None) or configured.file,
        locations=(*configured.locations, *getattr(args, "schema_location", [])),
        spark_catalog=configured.spark_catalog or getattr(args, "spark_catalog", False),
    )
    spark = build_session(spark_settings) if sources.spark_catalog or derive else None
    catalog = catalog_for(watched, sources, spark)
    if config is not None:
        context = sql_context(config, catalog)
    else:  # --log alone: every table is logged; the one beside the log is known by name and path
        aliases = {n.lower(): n.lower() for n in watched} | {p.rstrip("/"): n.lower() for n, p in watched.items()}
        context = SqlContext(schema=catalog.schema or None, aliases=aliases)
    if derive and spark is not None:
        located = next(iter(watched), None) if config is None else None  # --log alone: the table beside it
        context = derivation_context(
            context, spark, catalog, config=config, through_facts=through_facts, located=located
        )
    return log_table, context


def _located_table(log_path: str) -> dict[str, str]:
    """With --log alone: the table the log sits beside (``<table>_querylog``, the default layout), so
    its columns resolve."""
    base = log_path.rstrip("/")
    if not base.endswith("_querylog"):
        return {}
    table_path = base[: -len("_querylog")]
    return {table_path.rsplit("/", 1)[-1].lower(): table_path}


def cmd_querylog_import(args: argparse.Namespace) -> int:
    from querylog.importers.eventlog import import_event_log
    from querylog.importers.sqltext import HistoryColumns, import_history, import_sql_file

    log_table, context = _querylog_target(args)
    if args.sql:
        report = import_sql_file(log_table, args.sql, context)
    elif args.history:
        columns = HistoryColumns(text=args.text_column, time=args.time_column, query_id=args.id_column)
        report = import_history(log_table, args.history, context, columns)
    else:
        report = import_event_log(log_table, args.eventlog, context)
    print(report.describe())
    stale = _older_than_window(args, report)
    if stale:
        print(f"  WARNING: {stale}")
    return 0


def _older_than_window(args: argparse.Namespace, report: Any) -> str | None:
    """Why the rows just imported will not be analysed, when all are older than the workload window."""
    from datetime import UTC, datetime

    from optimizer.config import Thresholds

    if not report.scans or report.newest is None:
        return None
    window = configured_table(args)[1].thresholds.workload_window if args.config else Thresholds().workload_window
    age = (datetime.now(UTC) - report.newest).total_seconds()
    if age <= window:
        return None
    return (
        f"every imported scan is older than the workload window ({window / 86400:g} days; newest "
        f"{report.newest:%Y-%m-%d}): analyse and the service will not see them; use --window or workload_window"
    )


def cmd_querylog_show(args: argparse.Namespace) -> int:
    log_table, _ = _querylog_target(args)
    rows = sorted(log_table.read(args.table_id), key=lambda r: r.ts)[-args.last :]
    if args.json:
        print_json([r.__dict__ for r in rows])
        return 0
    for r in rows:
        print(f"{r.ts:%Y-%m-%d %H:%M:%S} {r.table_id} [{r.source}] {' AND '.join(r.filters) or '(no filter)'}")
    print(f"{len(rows)} row(s)")
    return 0


def cmd_querylog_quarantine(args: argparse.Namespace) -> int:
    from querylog.store import QuarantineTable, quarantine_path

    log_table, _ = _querylog_target(args)
    records = QuarantineTable(quarantine_path(log_table.uri)).read()
    for q in records[-args.last :]:
        print(f"{q.ts:%Y-%m-%d %H:%M:%S} {q.source} {q.location}: {q.reason}")
    print(f"{len(records)} quarantined input(s) in {quarantine_path(log_table.uri)}")
    return 0
