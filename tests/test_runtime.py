"""The session deltaopt builds: Delta's jars from the environment's cache, settings merged, the commit
path reported."""

from __future__ import annotations

import pytest

from optimizer import delta_jars
from optimizer.config import SparkSettings, parse_config
from optimizer.errors import ConfigError
from optimizer.runtime import _with_delta, build_session, runtime_info


def test_jars_are_cached_inside_the_environment_and_named_by_the_wheel_version(monkeypatch, tmp_path):
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path))
    version = delta_jars.delta_version()
    assert delta_jars.coordinates() == f"io.delta:delta-spark_2.13:{version}"
    # nothing cached: the session resolves through Ivy into the environment's directory, not ~/.ivy2
    assert delta_jars.cached_jars() is None
    conf = delta_jars.session_conf()
    assert conf["spark.jars.packages"] == delta_jars.coordinates()
    assert conf["spark.jars.ivy"] == str(tmp_path / f"delta-spark_2.13-{version}")  # one per Delta release
    # cached: the files go on spark.jars and nothing is resolved again
    jars = tmp_path / f"delta-spark_2.13-{version}" / "jars"
    jars.mkdir(parents=True)
    for name in (f"io.delta_delta-spark_2.13-{version}.jar", f"io.delta_delta-storage-{version}.jar", "x_y-1.jar"):
        (jars / name).write_bytes(b"")
    (jars / "io.delta_delta-storage-0.1.jar").write_bytes(b"")  # another version's jar is left out
    conf = delta_jars.session_conf()
    assert "spark.jars.packages" not in conf
    assert sorted(p.rsplit("/", 1)[-1] for p in conf["spark.jars"].split(",")) == [
        f"io.delta_delta-spark_2.13-{version}.jar",
        f"io.delta_delta-storage-{version}.jar",
        "x_y-1.jar",
    ]
    assert conf["spark.sql.extensions"] == delta_jars.EXTENSIONS


def test_a_session_reads_deltas_cache_only_after_a_fetch_in_progress_has_retrieved_every_jar(monkeypatch, tmp_path):
    """`make install`'s fetch retrieves Delta's jars one by one; a session started meanwhile saw the engine and
    storage jars and took the list without the rest. It waits for the fetch's lock instead."""
    import threading

    from optimizer.cache_lock import locked

    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path))
    version = delta_jars.delta_version()
    jars = tmp_path / f"delta-spark_2.13-{version}" / "jars"
    jars.mkdir(parents=True)
    seen: list[dict[str, str]] = []
    reader = threading.Thread(target=lambda: seen.append(_with_delta({})))
    with locked(delta_jars.delta_home(), exclusive=True):  # a fetch, mid-retrieval
        for name in (f"io.delta_delta-spark_2.13-{version}.jar", f"io.delta_delta-storage-{version}.jar"):
            (jars / name).write_bytes(b"")
        reader.start()
        reader.join(0.5)
        assert reader.is_alive() and seen == []
        (jars / "x_last-1.jar").write_bytes(b"")  # the last jar it retrieves
    reader.join(10)
    assert "x_last-1.jar" in seen[0]["spark.jars"]


def test_the_users_jars_and_extensions_are_kept_beside_deltas(monkeypatch, tmp_path):
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path))
    merged = _with_delta({"spark.sql.extensions": "com.example.Ext", "spark.jars.packages": "a:b:1"})
    assert merged["spark.sql.extensions"] == f"com.example.Ext,{delta_jars.EXTENSIONS}"
    assert merged["spark.jars.packages"] == f"a:b:1,{delta_jars.coordinates()}"


def test_delta_and_commit_settings_are_validated():
    tables = [{"name": "t", "path": "/x"}]
    config = parse_config({"version": 1, "spark": {"delta": "required", "commit": "delta-rs"}, "tables": tables})
    assert config.spark.delta_mode == "required" and config.spark.commit == "delta-rs"
    assert SparkSettings(delta_packages=True).delta_mode == "required"  # the old spelling still works
    with pytest.raises(ConfigError, match=r"spark\.delta: got 'sometimes'"):
        parse_config({"version": 1, "spark": {"delta": "sometimes"}, "tables": tables})


@pytest.mark.spark
def test_the_test_session_loaded_delta_and_says_who_commits(spark):
    info = runtime_info(spark)
    assert info.delta_jvm is True and info.commit_engine == "delta-spark"
    assert "Delta engine loaded" in info.describe() and "Delta's transaction" in info.describe()
    assert spark.range(3).count() == 3


def test_a_driver_a_cluster_started_keeps_the_clusters_spark(monkeypatch):
    """spark-submit and Databricks start the driver with the cluster's master and Delta: a configuration
    that names no master must not replace them with an embedded local[*]."""
    from optimizer.config import SparkSettings
    from optimizer.runtime import attached, session_mode

    for name in ("PYSPARK_GATEWAY_PORT", "DATABRICKS_RUNTIME_VERSION"):
        monkeypatch.delenv(name, raising=False)
    assert not attached(SparkSettings()) and session_mode(SparkSettings()) == "embedded"
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    assert attached(SparkSettings()) and session_mode(SparkSettings()) == "cluster"
    assert not attached(SparkSettings(master="local[2]"))  # named in the configuration: that one
    assert not attached(SparkSettings(connect_url="sc://host:15002"))


class _Captured(Exception):
    """Raised by a stand-in for `runtime._start`: the settings a session would have started with."""


def _start_settings(monkeypatch, settings: SparkSettings) -> dict[str, str]:
    def capture(_settings, _mode, conf):
        raise _Captured(conf)

    monkeypatch.setattr("optimizer.runtime._start", capture)
    with pytest.raises(_Captured) as started:
        build_session(settings)
    return started.value.args[0]


def test_the_embedded_jvms_zone_is_the_sessions(monkeypatch):
    """Delta up to 4.0 derives timestamp partition values in the JVM's zone: on a host not set to UTC the
    embedded JVM would disagree with the session's zone (UTC, or the operator's)."""
    conf = _start_settings(monkeypatch, SparkSettings(master="local[1]"))
    assert conf["spark.driver.extraJavaOptions"].endswith(" -Duser.timezone=UTC")
    kolkata = {"spark.sql.session.timeZone": "Asia/Kolkata"}
    conf = _start_settings(monkeypatch, SparkSettings(master="local[1]", conf=kolkata))
    assert conf["spark.driver.extraJavaOptions"].endswith(" -Duser.timezone=Asia/Kolkata")
    own = {"spark.driver.extraJavaOptions": "-Dmine=1"}  # the operator's own options are theirs
    assert (
        _start_settings(monkeypatch, SparkSettings(master="local[1]", conf=own))["spark.driver.extraJavaOptions"]
        == "-Dmine=1"
    )


def test_sessions_skip_pysparks_call_site_capture_unless_the_operator_wants_it(monkeypatch, spark):
    """PySpark 4 captures the Python call site of every Column call (five JVM round trips each); the
    sessions deltaopt builds turn it off, the operator's setting wins, and the run's session has it off."""
    key = "spark.python.sql.dataFrameDebugging.enabled"
    assert _start_settings(monkeypatch, SparkSettings(master="local[1]"))[key] == "false"
    assert _start_settings(monkeypatch, SparkSettings(master="local[1]", conf={key: "true"}))[key] == "true"
    assert spark.conf.get(key) == "false"


class _ConnectSession:
    """A Spark Connect session as a server that keeps only the settings it lists leaves it: no JVM
    gateway, and ``spark.deltaopt.commit`` dropped (or kept, with `keeps`)."""

    def __init__(self, keeps: dict[str, str]) -> None:
        from types import SimpleNamespace

        self.conf = SimpleNamespace(get=lambda key, default=None: keeps.get(key, default))


def test_a_session_that_drops_spark_commit_delta_rs_is_refused_naming_it():
    """The path of every rewrite is chosen from the session's conf: where the server dropped the key,
    "auto" would choose Delta's SQL over the operator's delta-rs without a word. ``delta-spark`` and
    ``auto`` on Connect are Delta's SQL whatever the server keeps: not refused."""
    from optimizer.errors import SparkRuntimeError
    from optimizer.table.rewrite import COMMIT_CONF
    from optimizer.table.rewrite_path import check_commit_kept

    url = "sc://example:15002"
    with pytest.raises(SparkRuntimeError, match=rf"spark.commit is delta-rs but the session at {url}"):
        check_commit_kept(_ConnectSession({}), "delta-rs", url)  # type: ignore[arg-type]
    check_commit_kept(_ConnectSession({COMMIT_CONF: "delta-rs"}), "delta-rs", url)  # type: ignore[arg-type]
    for commit in ("auto", "delta-spark"):
        check_commit_kept(_ConnectSession({}), commit, url)  # type: ignore[arg-type]
