"""One deltaopt driver process for several commands (`Driver`): the CLI's `main` run in a child process as
an operator's shell would run ``deltaopt ...``, with what each command printed and returned, so that a test
that runs two commands, or SQL then a command, starts one JVM instead of one per command. The child is
this module run as ``python -m tests.clusters.driver``: it reads one JSON request a line and answers one
JSON line on the pipe it was started with (everything else the process or its JVM writes goes to the log)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tests.clusters.servers import process_env


@dataclass(frozen=True)
class Done:
    """What one command did: its exit status and output, and the master of the session it left active."""

    code: int
    out: str
    err: str
    master: str | None

    def json(self) -> dict:
        """The command's ``--json`` output; the test fails with its stderr when the command failed."""
        assert self.code == 0, self.err[-3000:]
        return json.loads(self.out)


class Driver:
    """A child process running deltaopt's commands one after another in one Python process (one Spark
    driver). Use as a context manager; the child is stopped on exit."""

    def __init__(self, cwd: Path, log: Path, timeout: float = 600) -> None:
        env = process_env(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        self.log, self.timeout = log, timeout
        self._log_file = open(log, "w")  # noqa: SIM115 - the child writes to it until `close`
        command = [sys.executable, "-m", "tests.clusters.driver"]
        root = Path(__file__).resolve().parents[2]  # the checkout: `tests` importable from any cwd
        env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
        self._child = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file, text=True, cwd=cwd, env=env
        )

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cli(self, *argv: str) -> Done:
        """``deltaopt *argv`` in the child: its exit status, stdout and stderr."""
        answer = self._ask({"cli": list(argv)})
        return Done(answer["code"], answer["out"], answer["err"], answer["master"])

    def sql(self, spark: dict[str, Any], statements: list[str]) -> list[list[list[Any]]]:
        """Each statement's rows, run on the child's session (built from SparkSettings `spark` unless one
        is active; a later command's `build_session` gets the same session back)."""
        answer = self._ask({"spark": spark, "sql": statements})
        assert "rows" in answer, answer.get("error", "")[-3000:]
        return answer["rows"]

    def close(self) -> None:
        if self._child.poll() is None:
            assert self._child.stdin is not None
            self._child.stdin.close()
            try:
                self._child.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
        self._log_file.close()

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        child = self._child
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(json.dumps(request) + "\n")
        child.stdin.flush()
        ready, _, _ = select.select([child.stdout], [], [], self.timeout)
        line = child.stdout.readline() if ready else ""
        if not line:
            self._log_file.flush()
            raise AssertionError(f"the driver child gave no answer to {request}: {self.log.read_text()[-3000:]}")
        return json.loads(line)


def _run_cli(argv: list[str]) -> dict[str, Any]:
    """`optimizer.cli.main.main(argv)` as the console script runs it (`entry`), its output captured."""
    from optimizer.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse, as `entry` reads it
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 2)
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
        except Exception:  # what Python itself prints for an uncaught error, and its exit status
            traceback.print_exc()
            code = 1
    return {"code": code, "out": out.getvalue(), "err": err.getvalue(), "master": _active_master()}


def _run_sql(spark: dict[str, Any], statements: list[str]) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session

    try:
        session = SparkSession.getActiveSession() or build_session(SparkSettings(**spark))
        rows = [[list(r) for r in session.sql(s).collect()] for s in statements]
    except Exception:
        return {"error": traceback.format_exc()}
    return {"rows": json.loads(json.dumps(rows, default=str))}


def _active_master() -> str | None:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    return None if session is None else str(session.sparkContext.master)


def _serve(requests: TextIO, answers: TextIO) -> None:
    for line in requests:
        request = json.loads(line)
        answer = _run_cli(request["cli"]) if "cli" in request else _run_sql(request["spark"], request["sql"])
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    # answers go to the pipe the parent reads; fd 1 (Python's and the JVM's stdout) goes to the log
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    _serve(sys.stdin, answers)
    answers.close()
    os._exit(0)  # as the console script: no native teardown of the JVM's gateway
