"""Shared fixtures. One SparkSession per test process (`make test` runs two: Makefile): JVM start-up dominates
(docs/ARCHITECTURE.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# The JVMs the tests start run the same code with two flags that suit them on 2 cores (spark-submit adds
# SPARK_SUBMIT_OPTS to a driver's command; the drivers the CLI, service and crash tests start inherit it):
# - the throughput garbage collector: the heaps are small and short-lived, and G1's concurrent threads compete
#   with the work (measured: 0.96x wall on the table-features, optimize and liquid-tick tests, paired runs);
# - the C1 compiler only, for the short-lived drivers of one command each, whose seconds of work do not repay
#   C2's compiler threads (as `tests.clusters.servers.QUICK_JIT`; the two kill -9 tests went from 13.7 and
#   11.6 s to 11.2 and 9.4 s in two idle full runs). The run's own session (`MAIN_JVM_OPTIONS`)
#   lives for the whole run and keeps C2: C1 alone made it 1.38x slower.
MAIN_JVM_OPTIONS = "-XX:+UseParallelGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{MAIN_JVM_OPTIONS} -XX:TieredStopAtLevel=1")


def pytest_configure(config: pytest.Config) -> None:
    """With `make test`'s workers (pytest-xdist), Delta's jars are fetched once, here in the controller, before
    the workers start their sessions: two JVMs resolving into one Ivy cache at once, with no lock between them,
    could overwrite each other's files. `make install` has normally cached them, and then this only looks."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        from optimizer import delta_jars
        from optimizer.errors import SparkRuntimeError

        try:
            delta_jars.fetch()
        except SparkRuntimeError as err:  # the workers' sessions report it as a run without them does
            config.issue_config_time_warning(pytest.PytestConfigWarning(str(err)), stacklevel=2)


OBJECT_STORAGE = "tests/clusters/test_object_storage.py"
STORE_FETCH = pytest.StashKey["subprocess.Popen[bytes]"]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """On a clean checkout the object-storage tests would wait the better part of a minute for S3A's jars from
    Maven Central (`make install` caches Delta's only; a user's first use of s3:// fetches the connector). When
    they are about to run, one process of the run (the only one, or xdist's first worker) fetches it in the
    background from the start, beside the other tests; a test that gets there first waits on the cache's lock
    (`optimizer.cache_lock`) rather than resolving beside it. A failed fetch leaves the tests to fetch and
    report as before."""
    config = session.config
    worker = getattr(config, "workerinput", {}).get("workerid", "gw0")
    listing = config.option.collectonly or config.option.setuponly or config.option.setupplan
    if worker != "gw0" or listing or session.testsfailed:
        return
    if not any(item.nodeid.startswith(OBJECT_STORAGE) for item in session.items):
        return
    from optimizer import store_jars
    from optimizer.errors import SparkRuntimeError

    try:
        cached = store_jars.cached_store_jars("s3a") is not None
    except SparkRuntimeError:  # no Hadoop line to fetch for: the tests report it themselves
        return
    if not cached:
        command = store_jars.fetch_command("s3a")
        quiet = subprocess.DEVNULL
        config.stash[STORE_FETCH] = subprocess.Popen(command, stdout=quiet, stderr=quiet, start_new_session=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The background fetch ends before this process reports its session finished (an xdist worker is stopped
    soon after). A run interrupted (Ctrl-C does not reach the fetch's own session) stops it at once, and one
    stuck past the lock's wait is stopped too, with its JVM (the object-storage tests have failed by then,
    naming the lock it held); its ``resolving`` mark makes the next run fetch again."""
    from optimizer.cache_lock import WAIT_SECONDS  # as long as the tests wait for the fetch's lock

    fetch = session.config.stash.get(STORE_FETCH, None)
    if fetch is None:
        return
    try:
        fetch.wait(timeout=0 if exitstatus == pytest.ExitCode.INTERRUPTED else WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(fetch.pid, signal.SIGKILL)
        fetch.wait()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects, so `-m 'not thorough'` sees the mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the tests in tests/thorough.txt `thorough`: the default run covers each of their lines with a
    cheaper test (`python -m tests.tiers`); `make test-slow` runs them. A test pinned since (`every_change`)
    stays in the default run."""
    from tests.tiers import listed

    thorough = listed()
    for item in items:
        if item.nodeid in thorough and not item.get_closest_marker("every_change"):
            item.add_marker(pytest.mark.thorough)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session

    # Delta rebuilds a snapshot's state with 50 tasks by default (sized for clusters); the tests' tables have
    # a few files each, so 2 tasks do the same work with less scheduling (measured: about 7% off Delta-heavy tests).
    # Whole-stage code generation compiles one Java class per query stage with Janino: on the tests' tables of a
    # few thousand rows that compile costs more than the rows (measured: 0.92x wall on the table-features,
    # optimize and liquid-tick tests, paired runs). Spark then runs the same plans expression by expression;
    # every result is the same, and deltaopt's own code is exercised exactly as before.
    # Tables created by name (CREATE SCHEMA / TABLE without a location) go to the run's own directory, not the
    # checkout's spark-warehouse/, which another run or `make test`'s other worker (Makefile) would share.
    tuned = {"spark.databricks.delta.snapshotPartitions": "2", "spark.sql.codegen.wholeStage": "false"}
    tuned["spark.sql.warehouse.dir"] = str(tmp_path_factory.mktemp("warehouse"))
    # Python tasks run under tests/pyspark_worker/deltaopt_test_daemon.py: PySpark's daemon, without re-reading
    # pyspark.zip's directory in every task (its docstring: most of the Python workers' CPU); its directory is on
    # the workers' path.
    tuned["spark.python.daemon.module"] = "deltaopt_test_daemon"
    tuned["spark.executorEnv.PYTHONPATH"] = str(Path(__file__).resolve().parent / "pyspark_worker")
    settings = SparkSettings(master="local[2]", shuffle_partitions=4, app_name="deltaopt-tests", conf=tuned)
    with pytest.MonkeyPatch.context() as env:  # the JVM keeps what it saw at its start
        env.setenv("SPARK_SUBMIT_OPTS", MAIN_JVM_OPTIONS)
        session = build_session(settings)
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _template_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The run's directory of template tables (`tests.templates.copy_of`: built once, copied per test)."""
    from tests import templates

    templates.use_root(tmp_path_factory.mktemp("templates"))
    yield
    templates.use_root(None)


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    return str(tmp_path / "table")
