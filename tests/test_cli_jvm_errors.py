"""A failure raised by Spark or its JVM while a command runs is one line on stderr and exit status 3 (issue 46):
the Java exception class or Spark error class, the first line of its message and the session's versions; the
full trace only at DEBUG. A bug in deltaopt's own Python keeps its traceback."""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from optimizer.cli import main

pytestmark = pytest.mark.spark

CLI = importlib.import_module("optimizer.cli.main")  # the module: `optimizer.cli.main` the attribute is the function


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`main` points the root logger at the captured stderr of this test; put back what was there."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _table_info_raises(monkeypatch: pytest.MonkeyPatch, failing: Callable[[], Any]) -> None:
    """Make `deltaopt table info` run `failing` in place of its handler (the parser binds the handler by name)."""
    monkeypatch.setattr(CLI, "cmd_table_info", lambda args: failing())


def _versions(spark: Any) -> str:
    from optimizer.runtime import runtime_info

    info = runtime_info(spark)
    assert info.delta_version, "the shared session loads Delta"
    return f"(Spark {info.spark_version}, Delta {info.delta_version})"


def test_a_java_exception_is_one_line_with_its_class_and_the_versions(spark, monkeypatch, capsys, tmp_path):
    _table_info_raises(monkeypatch, lambda: spark._jvm.java.lang.Class.forName("no.such.Class"))
    assert main(["table", "info", str(tmp_path)]) == 3
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    expected = "deltaopt: error: table info failed in Spark: java.lang.ClassNotFoundException: no.such.Class"
    assert lines == [f"{expected} {_versions(spark)}"]
    assert captured.out == ""


def test_a_spark_analysis_error_is_one_line_with_its_error_class(spark, monkeypatch, capsys, tmp_path):
    missing = tmp_path / "missing"
    _table_info_raises(monkeypatch, lambda: spark.read.parquet(str(missing)))
    assert main(["table", "info", str(tmp_path)]) == 3
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    head = "deltaopt: error: table info failed in Spark: PATH_NOT_FOUND: Path does not exist: "
    pattern = rf"{re.escape(head)}\S*{re.escape(str(missing))}\b.*"
    assert re.fullmatch(pattern + re.escape(f" {_versions(spark)}"), lines[0]), lines[0]
    assert "[PATH_NOT_FOUND]" not in lines[0] and "JVM stacktrace" not in lines[0]


def test_a_call_the_jvm_has_no_method_for_is_a_bug_and_keeps_its_traceback(spark, monkeypatch):
    """py4j's "Method limit([class java.lang.String]) does not exist" (a plain `Py4JError`) is a wrong call by
    deltaopt, or a Delta signature the adapter does not know: a bug, not a failure of Spark's."""
    from py4j.protocol import Py4JError

    _table_info_raises(monkeypatch, lambda: spark.range(1)._jdf.limit("a"))
    with pytest.raises(Py4JError, match="does not exist"):
        main(["table", "info", "/nowhere"])


def test_debug_logging_shows_the_full_trace(spark, monkeypatch, capsys, tmp_path):
    _table_info_raises(monkeypatch, lambda: spark._jvm.java.lang.Class.forName("no.such.Class"))
    assert main(["--log-level", "debug", "table", "info", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err
    assert "at java.base/java.lang.Class.forName" in err  # the Java stack
    assert err.splitlines()[-1].startswith(
        "deltaopt: error: table info failed in Spark: java.lang.ClassNotFoundException"
    )


def test_a_python_bug_keeps_its_traceback(spark, monkeypatch, tmp_path: Path):
    """Not every exception is Spark's: an AttributeError in deltaopt's code propagates untouched."""

    def bug() -> None:
        spark.no_such_attribute  # noqa: B018

    _table_info_raises(monkeypatch, bug)
    with pytest.raises(AttributeError, match="no_such_attribute"):
        main(["table", "info", str(tmp_path)])


def test_a_pyspark_type_error_is_a_python_bug_too(spark, monkeypatch, tmp_path: Path):
    """PySpark's own argument checks raise PySparkTypeError (a PySparkException and a TypeError): a wrong call in
    deltaopt, not a Spark failure, so it keeps its traceback."""
    from pyspark.errors import PySparkTypeError

    _table_info_raises(monkeypatch, lambda: spark.createDataFrame([(1,)], schema=42))
    with pytest.raises(PySparkTypeError):
        main(["table", "info", str(tmp_path)])
