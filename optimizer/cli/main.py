"""The ``deltaopt`` command line: the argument parser and the entry point.

Each sub-command is a small function in `optimizer.cli.commands`, `.service` or `.querylog`. Errors from the library
(`DeltaOptError`, `QueryLogError`) become one clear line on stderr and exit status 2 (4 when a service job's liquid
table has other clustering keys than its decision saw: `by_delta.KeysChangedError`, nothing run); a failure inside
Spark or its JVM (py4j, PySpark's captured and Connect exceptions) one line naming the Java or Spark error and exit
status 3, its full trace logged at DEBUG (`optimizer.cli.common.spark_failure_line`). Any other exception is a bug:
its traceback stays.

The console script is `entry`, which leaves the process without Python's finalisation once the
command has returned and its output is flushed: native threads of delta-rs (tokio) and pyarrow torn
down during finalisation abort the process (exit 134, "terminate called without an active
exception") in a share of runs, after a command that succeeded. Everything a command writes (commits,
state files, decision logs) is durable before `main` returns, so nothing is lost by skipping it; the
Spark JVM child exits when its gateway's stdin closes with the process.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from optimizer import __version__
from optimizer.cli.commands import (
    cmd_analyse,
    cmd_calibrate,
    cmd_config_check,
    cmd_demo,
    cmd_explain,
    cmd_optimize,
    cmd_table_info,
)
from optimizer.cli.common import spark_failure_line
from optimizer.cli.querylog import cmd_querylog_import, cmd_querylog_quarantine, cmd_querylog_show
from optimizer.cli.report import cmd_report
from optimizer.cli.service import cmd_decisions, cmd_estimate, cmd_serve, cmd_status
from optimizer.errors import KNOWN

Handler = Callable[[argparse.Namespace], int]

log = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2  # a library error: the input, the configuration or the table's shape
EXIT_SPARK_FAILED = 3  # Spark or its JVM failed while the command ran


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: one small builder per command group, in the order `--help` lists them."""
    parser = argparse.ArgumentParser(
        prog="deltaopt",
        allow_abbrev=False,
        description="Keeps Delta tables laid out (SOP + Z-order) for the queries people actually run.",
    )
    parser.add_argument("--version", action="version", version=f"deltaopt {__version__}")
    parser.add_argument("--log-level", default="WARNING", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_demo,
        _add_table,
        _add_analyse,
        _add_optimize,
        _add_explain,
        _add_estimate,
        _add_costmodel,
        _add_serve,
        _add_status,
        _add_decisions,
        _add_querylog,
        _add_config,
    ):
        add(commands)
    return parser


def _add_demo(commands: Any) -> None:
    demo = commands.add_parser("demo", help="run the whole pipeline on a sample TPC-H table, embedded Spark")
    demo.add_argument("--workdir", default="demo-output", help="where tables, logs and state go")
    demo.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (0.1 = 600k rows)")
    demo.add_argument("--parts", type=int, default=8, help="lineitem is loaded in this many increments")
    demo.add_argument("--keep", action="store_true", help="reuse an existing workdir instead of starting over")
    demo.set_defaults(handler=cmd_demo)


def _add_table(commands: Any) -> None:
    table = commands.add_parser("table", help="inspect a Delta table").add_subparsers(dest="sub", required=True)
    info = table.add_parser("info", help="version, files, bytes, file sizes, clustering state")
    info.add_argument("path")
    info.add_argument("--column", action="append", default=[], help="also show layout health for this column")
    info.add_argument("--log", help="query-log table whose frequent filter columns to show (default: <path>_querylog)")
    info.add_argument("--json", action="store_true")
    info.set_defaults(handler=cmd_table_info)


def _add_analyse(commands: Any) -> None:
    analyse = commands.add_parser("analyse", help="choose clustering features from the workload, and say why")
    analyse.add_argument("--config", required=True)
    analyse.add_argument("--table", help="configured table name (optional with a single table)")
    analyse.add_argument("--window", help="how far back to read the log, e.g. 30d (default: workload_window)")
    analyse.add_argument("--json", action="store_true")
    analyse.set_defaults(handler=cmd_analyse)


def _add_optimize(commands: Any) -> None:
    opt = commands.add_parser("optimize", help="rewrite files with a SOP + Z-order layout (manual run)")
    opt.add_argument("--table", required=True, help="table path, or a configured table name with --config")
    opt.add_argument("--config", help="YAML configuration: thresholds, and the analyser when no features are given")
    opt.add_argument("--z", action="append", default=[], help="Z-order expression (repeatable, or a,b,c)")
    opt.add_argument("--sop", action="append", default=[], help="SOP predicate (repeatable)")
    opt.add_argument("--z-add", action="append", default=[], help="expression with statistics only")
    opt.add_argument("--sop-add", action="append", default=[], help="predicate with statistics only")
    opt.add_argument("--target-file-size", help="e.g. 128MiB (default: configured, else 128MiB)")
    opt.add_argument("--all-files", action="store_true", help="rewrite every file, not only unclustered ones")
    opt.add_argument("--features-json", help="a whole feature set as JSON (what the service sends a cluster)")
    opt.add_argument("--run-id", help="identifier recorded in the commit (default: generated)")
    opt.add_argument("--codec", help="Parquet codec: zstd (default), snappy, gzip, lz4, lz4_raw, none")
    opt.add_argument("--codec-level", type=int, help="codec level (zstd 1-22)")
    opt.add_argument("--row-group-size", help="Parquet row-group size, e.g. 16MiB (default: configured)")
    opt.add_argument("--output-json", help="writer settings as JSON (what the service sends a cluster)")
    opt.add_argument("--connect", help="run on this Spark Connect server (sc://host:port): Delta's OPTIMIZE there")
    opt.add_argument(
        "--commit",
        choices=["auto", "delta-spark", "delta-rs"],
        help="who commits (default: configured, else auto); delta-rs beside Delta writers only when set here",
    )
    opt.add_argument(
        "--liquid",
        choices=["keep", "suggest", "set"],
        help="a liquid-clustered table's keys (default: configured, else keep): keep them (Delta's OPTIMIZE clusters "
        "by them), suggest (change nothing; name the keys the workload wants), set (make the Z columns the keys)",
    )
    opt.add_argument(
        "--full",
        action="store_true",
        help="a liquid-clustered table: Delta's OPTIMIZE FULL (Delta 3.3+), re-clustering the files clustered by "
        "other keys too, as after a key change",
    )
    opt.add_argument(
        "--decided-keys",
        help="a service job: the liquid keys its decision saw, as JSON; other keys now: nothing is run",
    )
    opt.add_argument(
        "--no-key-statistics",
        action="store_true",
        help="leave the table's statistics columns as they are (default: clustering keys get min/max first)",
    )
    opt.add_argument("--json", action="store_true")
    opt.set_defaults(handler=cmd_optimize)


def _add_explain(commands: Any) -> None:
    exp = commands.add_parser("explain", help="files and bytes a filter reads: standard readers vs deltaopt's pruning")
    exp.add_argument("--table", required=True, help="table path")
    exp.add_argument("--where", required=True, help="a SQL predicate, e.g. \"l_shipdate >= DATE '1995-01-01'\"")
    exp.add_argument("--columns", help="columns the query reads, a,b,c (default: all)")
    exp.add_argument(
        "--join",
        nargs=4,
        action="append",
        default=[],
        metavar=("FACT_COLUMN", "DIMENSION", "KEY", "WHERE"),
        help="the query joins the dimension table at path DIMENSION on FACT_COLUMN = KEY and filters it by "
        "WHERE (repeat); files' joined ranges skip by it",
    )
    exp.add_argument("--json", action="store_true")
    exp.set_defaults(handler=cmd_explain)


def _add_estimate(commands: Any) -> None:
    est = commands.add_parser("estimate", help="cost, benefit and the decision for a table's new data")
    est.add_argument("--config", required=True)
    est.add_argument("--table", help="configured table name (optional with a single table)")
    est.add_argument("--window", help="how far back to read the log, e.g. 30d (default: workload_window)")
    est.add_argument("--json", action="store_true")
    est.set_defaults(handler=cmd_estimate)


def _add_costmodel(commands: Any) -> None:
    costmodel = commands.add_parser("costmodel", help="the OPTIMIZE cost model").add_subparsers(
        dest="sub", required=True
    )
    cal = costmodel.add_parser("calibrate", help="time real OPTIMIZE runs on samples and fit the cost model")
    cal.add_argument("--table", required=True, help="table path, or a configured table name with --config")
    cal.add_argument("--config")
    cal.add_argument("--rows", default="250000,1000000", help="sample sizes in rows, comma-separated")
    cal.add_argument("--quick", action="store_true", help="only three feature configurations")
    cal.add_argument("--out", help="where to store the model (default: service.cost_model)")
    cal.set_defaults(handler=cmd_calibrate)


def _add_serve(commands: Any) -> None:
    srv = commands.add_parser("serve", help="run the service: tick every configured table until stopped")
    srv.add_argument("--config", required=True)
    srv.add_argument("--once", action="store_true", help="one tick per table, then exit (cron style)")
    srv.add_argument("--dry-run", action="store_true", help="log decisions, never optimise")
    srv.set_defaults(handler=cmd_serve)


def _add_status(commands: Any) -> None:
    status = commands.add_parser("status", help="per table: latest decision, clustering state, unclustered bytes")
    status.add_argument("--config", required=True)
    status.add_argument("--json", action="store_true")
    status.add_argument(
        "--fleet", action="store_true", help="the whole fleet from the service's state: queue, budget, last jobs"
    )
    status.set_defaults(handler=cmd_status)


def _add_decisions(commands: Any) -> None:
    dec = commands.add_parser("decisions", help="the decision history of a table")
    dec.add_argument("--config", required=True)
    dec.add_argument("--table", help="only this table")
    dec.add_argument("--last", type=int, default=20)
    dec.add_argument("--json", action="store_true")
    dec.set_defaults(handler=cmd_decisions)
    report = commands.add_parser(
        "report", help="a table's decisions as a chart: bytes per query, jobs, realised benefit"
    )
    report.add_argument("table", help="the configured table's name")
    report.add_argument("--config", required=True)
    report.add_argument("--output", help="a .png, .svg, .pdf or .html file (default: TABLE-report.png)")
    report.add_argument("--last", type=int, default=500, help="the latest records drawn")
    report.set_defaults(handler=cmd_report)


def _add_querylog(commands: Any) -> None:
    querylog = commands.add_parser("querylog", help="the query log").add_subparsers(dest="sub", required=True)
    for name, handler, text in (
        (
            "import",
            cmd_querylog_import,
            "import queries from a SQL file, a history export or a Spark event log",
        ),
        ("show", cmd_querylog_show, "print logged scans"),
        ("quarantine", cmd_querylog_quarantine, "print inputs that could not be logged, with reasons"),
    ):
        sub = querylog.add_parser(name, help=text)
        sub.add_argument("--log", help="query-log table path (default: the configured table's)")
        sub.add_argument("--config", help="YAML configuration (schemas, identities, watched tables)")
        sub.add_argument("--table", help="configured table whose log to use")
        sub.set_defaults(handler=handler)
        if name == "import":
            source = sub.add_mutually_exclusive_group(required=True)
            source.add_argument("--sql", help="file of SQL statements separated by ';'")
            source.add_argument("--history", help="query-history export (.csv, .json, .jsonl)")
            source.add_argument("--eventlog", help="Spark event log file or rolling-log directory")
            sub.add_argument("--text-column", help="history: column with the query text")
            sub.add_argument("--time-column", help="history: column with the start time")
            sub.add_argument("--id-column", help="history: column with the query id")
            sub.add_argument("--schema-file", help="SQL DDL or YAML of the tables queries read (with --config: wins)")
            sub.add_argument(
                "--schema-location",
                action="append",
                default=[],
                help="directory of Delta tables whose schemas resolve columns (repeatable; adds to --config's)",
            )
            sub.add_argument("--spark-catalog", action="store_true", help="also resolve with the Spark catalog")
            sub.add_argument(
                "--derive-joins",
                action="store_true",
                help=(
                    "record filters that joins imply on the keys of the tables deltaopt optimises (listed, not "
                    "paused; --log alone: the table beside the log), evaluating dimension filters on Spark"
                ),
            )
            sub.add_argument(
                "--derive-through-facts",
                action="store_true",
                help=(
                    "also use a fact table as a join source for a dimension's scans; off by default: "
                    "one pass over the fact per filter set version"
                ),
            )
        else:
            sub.add_argument("--last", type=int, default=50)
        if name == "show":
            sub.add_argument("--table-id", help="only scans of this table identity")
            sub.add_argument("--json", action="store_true")


def _add_config(commands: Any) -> None:
    config = commands.add_parser("config", help="configuration files").add_subparsers(dest="sub", required=True)
    check = config.add_parser("check", help="validate a YAML configuration")
    check.add_argument("file")
    check.set_defaults(handler=cmd_config_check)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` names; a known error or a Spark/JVM failure becomes one line on stderr and its
    exit status (2, 3), so that an operator reads what failed rather than a py4j traceback."""
    from optimizer.logs import configure_logging

    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    handler: Handler = args.handler
    try:
        return handler(args)
    except KNOWN as err:
        print(f"deltaopt: error: {err}", file=sys.stderr)
        return int(getattr(err, "exit_status", EXIT_BAD_INPUT))  # one a remote caller must tell apart has its own
    except Exception as err:
        line = spark_failure_line(args, err)
        if line is None:
            raise  # a bug in deltaopt: Python's traceback, untouched
        log.debug("the full trace of the Spark failure", exc_info=err)
        print(line, file=sys.stderr)
        return EXIT_SPARK_FAILED


def entry() -> None:
    """The ``deltaopt`` console script: `main`, flush, then exit without native teardown."""
    try:
        code = main()
    except SystemExit as stop:  # argparse (--help, usage errors) and explicit exits
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 2)
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
    except BaseException:
        logging.shutdown()
        raise  # an unexpected error keeps Python's own traceback and exit path
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (deltaopt ... | head): nothing to say
            stream.flush()
    logging.shutdown()
    os._exit(code)
