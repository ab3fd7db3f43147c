"""What every ``deltaopt`` sub-command shares: JSON output and the configured table it names."""

from __future__ import annotations

import argparse
import json
from typing import Any

from optimizer.errors import DeltaOptError


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, sort_keys=True))


def load_resolved(path: str):
    """The configuration at `path` with catalog-named tables resolved to their locations and every
    table's storage options registered (`optimizer.catalog.resolve_tables`); Spark starts only when a
    table is named in the catalog."""
    from optimizer.catalog import resolve_tables
    from optimizer.config import load_config
    from optimizer.runtime import build_session

    config = load_config(path)
    return resolve_tables(config, lambda: build_session(config.spark, config.tables))


def configured_table(args: argparse.Namespace):
    config = load_resolved(args.config)
    if args.table:
        return config, config.table(args.table)
    if len(config.tables) != 1:
        raise DeltaOptError("--table is required when the configuration has several tables")
    return config, config.tables[0]


def watched(args: argparse.Namespace):
    """(config, table settings, Spark, Delta table, query log) of the configured table in `args`."""
    from optimizer.runtime import build_session
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    config, table = configured_table(args)
    if getattr(args, "window", None):
        from optimizer.config_types import parse_duration

        thresholds = table.thresholds.model_copy(update={"workload_window": parse_duration(args.window)})
        table = table.model_copy(update={"thresholds": thresholds})
    spark = build_session(config.spark, config.tables)
    return config, table, spark, open_table(table.path), QueryLogTable(table.query_log_path)
