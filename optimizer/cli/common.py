"""What every ``deltaopt`` sub-command shares: JSON output, the configured table it names, and the one line
a failure inside Spark or its JVM becomes (`spark_failure_line`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from optimizer.errors import PYTHON_BUGS, DeltaOptError


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


def spark_failure_line(args: argparse.Namespace, err: Exception) -> str | None:
    """The one line `err` becomes when it is a failure from Spark or its JVM (a py4j error, a PySpark exception
    captured from the JVM or a Connect server): `deltaopt: error: <command> failed in Spark: <Java exception
    class or Spark error class>: <first line of its message>`, then the session's versions when known.
    None for anything else: a bug in deltaopt keeps Python's traceback."""
    py4j, pyspark = _spark_error_types()
    if isinstance(err, PYTHON_BUGS) or not isinstance(err, (*py4j, *pyspark)):
        return None
    command = " ".join(str(part) for part in (args.command, getattr(args, "sub", None)) if part)
    kind, message = _pyspark_failure(err) if isinstance(err, pyspark) else _py4j_failure(err)
    versions = _session_versions()
    line = f"deltaopt: error: {command} failed in Spark: {kind}: {message}"
    return f"{line} ({versions})" if versions else line


def _spark_error_types() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """(py4j's errors that are the JVM's, PySpark's root error), from modules already loaded: an exception of
    theirs cannot exist before its module is, and a command that never used Spark should not import it to find
    out. Of py4j's, a Java exception (`Py4JJavaError`) and a lost gateway (`Py4JNetworkError`) are Spark's; a
    plain `Py4JError` ("Method m([...]) does not exist") is a wrong call by deltaopt: a bug, traceback kept."""
    py4j = sys.modules.get("py4j.protocol")
    base = sys.modules.get("pyspark.errors.exceptions.base")
    jvm = (py4j.Py4JJavaError, py4j.Py4JNetworkError) if py4j else ()
    return jvm, ((base.PySparkException,) if base else ())


def _first_line(text: object) -> str:
    """The first non-blank line of `text`: what the error says, without the stack that follows it."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"


def _safely(call: Callable[[], Any]) -> Any:
    """`call()`, or None when it fails: most of an error's details are JVM calls, and the JVM may be gone."""
    try:
        return call()
    except Exception:  # a dead gateway, a Connect client: the detail is unknown, the line still prints
        return None


def _py4j_failure(err: Exception) -> tuple[str, str]:
    """(Java exception class, first line of its message) of a py4j error. A `Py4JJavaError` holds the Java
    exception; a plain `Py4JError` has only py4j's text, "An error occurred while calling oN.m. Trace:" and the
    Java side's "class: message" on the next line."""
    java = getattr(err, "java_exception", None)
    if java is not None:
        found = _safely(lambda: (str(java.getClass().getName()), _first_line(java.getMessage())))
        if found:
            return found
    text = err.args[0] if err.args and isinstance(err.args[0], str) else ""  # str(err) would ask the JVM again
    head, _, trace = text.partition("Trace:\n")
    if trace:
        kind, _, message = _first_line(trace).partition(": ")
        return kind, message or "(no message)"
    return type(err).__name__, _first_line(head)


def _pyspark_failure(err: Exception) -> tuple[str, str]:
    """(Spark error class, else the Java exception class, else PySpark's; first line of the message, without
    the "[ERROR_CLASS] " prefix Spark repeats) of a PySpark exception."""
    # getCondition from PySpark 4.0, getErrorClass before (3.5); a JVM call for captured errors
    condition_of = getattr(err, "getCondition", None) or getattr(err, "getErrorClass", None)
    condition = _safely(condition_of) if callable(condition_of) else None
    origin = getattr(err, "_origin", None)  # the Java exception PySpark captured (classic sessions only)
    java_class = _safely(lambda: str(origin.getClass().getName())) if origin is not None else None
    kind = condition or java_class or type(err).__name__
    message = _first_line(_safely(lambda: str(err)) or (err.args[0] if err.args else ""))
    return kind, message.removeprefix(f"[{condition}] ") if condition else message


def _session_versions() -> str | None:
    """The versions ("Spark 4.0.5, Delta 4.0.1") of the session this process already has; None when it has none (none is
    started for a message), when it is a Spark Connect one (asking would wait on a server that may be the
    failure) or when its JVM no longer answers."""
    if "pyspark.sql.session" not in sys.modules:
        return None
    from optimizer.runtime import runtime_info

    session = _safely(sys.modules["pyspark.sql.session"].SparkSession.getActiveSession)
    if session is None or getattr(session, "_jvm", None) is None:
        return None
    info = _safely(lambda: runtime_info(session))
    if info is None:
        return None
    if info.delta_version:
        return f"Spark {info.spark_version}, Delta {info.delta_version}"
    return f"Spark {info.spark_version}" + (", no Delta engine" if info.delta_jvm is False else "")
