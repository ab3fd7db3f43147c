"""Real servers for the cluster tests, started by the tests themselves from what `make install` put in
the environment: Spark's standalone master and worker and its Connect server (the installed PySpark),
with Delta's jars where a cluster would have them, and an S3-compatible server (moto)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pyspark

SPARK_HOME = os.path.dirname(pyspark.__file__)
# The JIT of the JVMs the cluster tests start: C1 only. Each runs seconds of work on small tables, where C2's
# compiler threads cost more CPU than their code saves (measured on 2 cores: one `deltaopt optimize` of a
# small table, 18.4 s of CPU and 10.8 s -> 11.1 s and 8.8 s). What the JVMs run is unchanged.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def process_env(**extra: str) -> dict[str, str]:
    """The environment of a process the cluster tests start: the run's with `extra`, its JVMs (and theirs:
    a worker's executors) compiling with C1 only (`QUICK_JIT`)."""
    options = " ".join(filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), QUICK_JIT]))
    return {**os.environ, "JAVA_TOOL_OPTIONS": options, **extra}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running(
    command: Sequence[str], port: int, log_file: Path, timeout: float = 180, graceful: bool = False
) -> Iterator[subprocess.Popen]:
    """`command` started, waited for until it listens on `port`, and stopped afterwards: killed, as a test
    server keeps nothing that must outlive it, unless `graceful` (a standalone worker stops the executors it
    started). Fails the test with the end of its log when it does not come up."""
    env = process_env(SPARK_HOME=SPARK_HOME, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(log_file, "w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        try:
            _wait(process, port, log_file, timeout)
            yield process
        finally:
            _stop(process, graceful)


def _stop(process: subprocess.Popen, graceful: bool) -> None:
    if not graceful:
        process.kill()
    else:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


def _wait(process: subprocess.Popen, port: int, log_file: Path, timeout: float) -> None:
    """Returns once `process` listens on `port`. A listener that is not `process` is another program that took
    the port between `free_port` and the server's start (two test workers start many): that fails at once,
    where a Spark master would have moved to the next port and its clients hung on this one."""
    import pytest

    name = " ".join(process.args[:3])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with socket.socket() as client:
            if client.connect_ex(("127.0.0.1", port)) == 0:
                if _listens(process.pid, port) is not False:
                    return
                pytest.fail(f"port {port} is held by another process, not {name}: pick another (free_port)")
        time.sleep(0.1)
    pytest.fail(f"{name} did not start: {log_file.read_text()[-3000:]}")


def _listens(pid: int, port: int) -> bool | None:
    """Whether process `pid` holds a socket listening on `port` (Linux's /proc: the listening sockets' inodes
    among the process's open files); None where /proc does not tell."""
    tables = [table for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")) if table.exists()]
    if not tables:
        return None
    inodes = set()
    for table in tables:
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            listening = fields[3] == "0A"  # TCP_LISTEN
            if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    descriptors = Path(f"/proc/{pid}/fd")
    for descriptor in descriptors.iterdir() if descriptors.exists() else ():
        try:
            if os.readlink(descriptor) in inodes:
                return True
        except OSError:  # closed while we looked
            continue
    return False


def spark_class(name: str, *args: str) -> list[str]:
    return [os.path.join(SPARK_HOME, "bin", "spark-class"), name, *args]


def delta_submit_conf() -> list[str]:
    """spark-submit arguments that give a server Delta's engine, as a cluster with Delta has it."""
    from optimizer import delta_jars

    conf = delta_jars.session_conf()
    arguments = []
    for key, value in conf.items():
        arguments += ["--conf", f"{key}={value}"]
    return arguments


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet HTTP handler that reads and answers JSON (the Jobs API stand-ins)."""

    def body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def reply(self, body: dict, status: int = 200) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass
