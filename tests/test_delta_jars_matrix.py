"""The JVM jars of each supported Spark/Delta pair (issue 46): the S3A connector follows the Hadoop line
PySpark ships (AWS SDK v1 modules for Hadoop 3.3, v2 for 3.4 and later, never the whole SDK bundle), and
what Ivy resolves for Delta or a connector goes on ``spark.jars`` only where Spark's own jars directory
does not already have that module. A fake PySpark jars directory and cache stand in: no network, no JVM."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from optimizer import delta_jars, store_jars
from optimizer.errors import SparkRuntimeError


def jar(path: Path, *entries: str) -> Path:
    """A jar at `path` holding empty `entries` (class files, ``META-INF/maven/.../pom.properties``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for entry in entries or ("META-INF/MANIFEST.MF",):
            archive.writestr(entry, "")
    return path


def pom(org: str, artifact: str) -> str:
    return f"META-INF/maven/{org}/{artifact}/pom.properties"


@pytest.fixture
def spark_jars(tmp_path, monkeypatch) -> Path:
    """PySpark's jars directory as PySpark 4.2 ships it, in part: Hadoop 3.5.0 (the API jar names its own
    module; the shaded runtime has no pom of its own), jackson with its pom, RoaringBitmap without one,
    JetBrains' ``annotations`` and ``log4j-1.2-api`` (an artifact name with a version-like part)."""
    directory = tmp_path / "pyspark-jars"
    jar(
        directory / "hadoop-client-api-3.5.0.jar", pom("org.apache.hadoop", "hadoop-client-api"), "org/apache/h/A.class"
    )
    jar(
        directory / "hadoop-client-runtime-3.5.0.jar",
        "org/apache/hadoop/shaded/X.class",
        pom("com.google.guava", "guava"),
    )
    jar(directory / "jackson-databind-2.18.6.jar", pom("com.fasterxml.jackson.core", "jackson-databind"))
    jar(directory / "RoaringBitmap-1.3.0.jar", "org/roaringbitmap/RoaringBitmap.class")
    jar(directory / "annotations-17.0.0.jar", "org/jetbrains/annotations/NotNull.class")
    jar(directory / "log4j-1.2-api-2.24.3.jar", pom("org.apache.logging.log4j", "log4j-1.2-api"))
    jar(directory / "httpclient-4.5.14.jar", pom("org.apache.httpcomponents", "httpclient"))
    jar(directory / "scala-library-2.13.18.jar", "scala/Option.class")
    monkeypatch.setattr(delta_jars, "spark_jars_dir", lambda: directory, raising=False)
    monkeypatch.setattr(store_jars, "hadoop_version", lambda: "3.5.0")
    return directory


@pytest.fixture
def pair_43(tmp_path, monkeypatch) -> Path:
    """This environment as PySpark 4.1.1 + delta-spark 4.3.1, its jar cache under `tmp_path`."""
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path / "ivy"))
    monkeypatch.setattr(delta_jars, "pyspark_version", lambda: "4.1.1")
    monkeypatch.setattr(delta_jars.metadata, "version", lambda name: {"delta-spark": "4.3.1"}[name])
    monkeypatch.setattr(delta_jars, "scala_binary", lambda: "2.13")
    return delta_jars.delta_home() / "jars"


def test_the_delta_jars_on_spark_jars_leave_out_modules_pyspark_already_ships(spark_jars, pair_43):
    """Delta 4.3's pom pulls a second Hadoop, jackson, log4j, RoaringBitmap...: Spark's own copies win
    (parent-first), so a duplicate on spark.jars only mixes two versions of one module's classes."""
    delta = ["io.delta_delta-spark_4.1_2.13-4.3.1.jar", "io.delta_delta-storage-4.3.1.jar"]
    needed = [*delta, "io.delta_delta-kernel-api-4.3.1.jar", "io.unitycatalog_unitycatalog-client-0.5.0.jar"]
    needed += ["software.amazon.awssdk_annotations-2.29.52.jar"]  # not JetBrains' annotations: kept
    shipped = ["org.apache.hadoop_hadoop-client-api-3.4.2.jar", "org.apache.hadoop_hadoop-client-runtime-3.4.2.jar"]
    shipped += ["com.fasterxml.jackson.core_jackson-databind-2.13.5.jar", "org.roaringbitmap_RoaringBitmap-1.2.1.jar"]
    shipped += ["org.apache.logging.log4j_log4j-1.2-api-2.25.3.jar"]
    for name in needed + shipped:
        jar(pair_43 / name)
    found = [p.name for p in delta_jars.cached_jars() or []]
    assert found == sorted(needed), f"on spark.jars beside PySpark's own: {sorted(set(found) - set(needed))}"


def test_delta_is_resolved_without_the_modules_pyspark_ships(spark_jars, pair_43, monkeypatch):
    """At resolution already (no download of a second Hadoop): every module whose own pom a jar of
    PySpark's carries is excluded; a shaded jar's embedded poms name other modules and are not read as its."""
    seen: list[dict[str, str]] = []

    def resolve(conf: dict[str, str], what: str) -> None:
        seen.append(conf)
        for name in ("io.delta_delta-spark_4.1_2.13-4.3.1.jar", "io.delta_delta-storage-4.3.1.jar"):
            jar(pair_43 / name)

    monkeypatch.setattr(delta_jars, "resolve", resolve)
    delta_jars.fetch()
    excludes = seen[0].get("spark.jars.excludes", "").split(",")
    assert seen[0]["spark.jars.packages"] == "io.delta:delta-spark_4.1_2.13:4.3.1"
    for module in ("org.apache.hadoop:hadoop-client-api", "com.fasterxml.jackson.core:jackson-databind"):
        assert module in excludes, f"{module} is resolved although PySpark ships it: excludes {excludes}"
    assert "org.apache.logging.log4j:log4j-1.2-api" in excludes
    # pom-less jars: the organisation is read from their classes' packages
    assert {"org.apache.hadoop:hadoop-client-runtime", "org.roaringbitmap:RoaringBitmap"} <= set(excludes)
    assert "com.google.guava:guava" not in excludes  # embedded in hadoop-client-runtime, relocated
    assert "software.amazon.awssdk:annotations" not in excludes  # JetBrains' jar of that name is another module


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("hadoop-client-api-3.5.0", ("hadoop-client-api", "3.5.0")),
        ("log4j-1.2-api-2.24.3", ("log4j-1.2-api", "2.24.3")),
        ("hive-shims-0.23-2.3.9", ("hive-shims-0.23", "2.3.9")),
        ("zstd-jni-1.5.6-9", ("zstd-jni", "1.5.6-9")),
        ("json4s-jackson_2.12-3.7.0-M11", ("json4s-jackson_2.12", "3.7.0-M11")),
        (
            "netty-transport-native-epoll-4.1.118.Final-linux-x86_64",
            ("netty-transport-native-epoll", "4.1.118.Final-linux-x86_64"),
        ),
        ("py4j", None),
    ],
)
def test_a_jar_name_splits_into_artifact_and_version(name, split):
    assert delta_jars.artifact_version(name) == split


def fetched_store(hadoop: str, monkeypatch, tmp_path) -> dict[str, str]:
    """The Spark settings `fetch_store("s3a")` resolves the connector with, PySpark shipping `hadoop`."""
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path / "ivy"))
    monkeypatch.setattr(store_jars, "hadoop_version", lambda: hadoop)
    monkeypatch.setattr(delta_jars, "spark_jars_dir", lambda: tmp_path / "no-jars", raising=False)
    seen: list[dict[str, str]] = []

    def resolve(conf: dict[str, str], what: str) -> None:
        seen.append(conf)
        jar(store_jars.store_home("s3a") / "jars" / f"org.apache.hadoop_hadoop-aws-{hadoop}.jar")

    monkeypatch.setattr(delta_jars, "resolve", resolve)
    store_jars.fetch_store("s3a")
    return seen[0]


def test_the_s3a_connector_of_hadoop_3_3_takes_the_sdk_v1_modules_s3a_loads_not_the_bundle(monkeypatch, tmp_path):
    """PySpark 3.5 ships Hadoop 3.3.4, whose hadoop-aws is built on AWS SDK v1 1.12.262: S3A's client (s3,
    with its transfer manager), assumed roles (sts) and the DynamoDB exception classes S3ARetryPolicy and
    S3AUtils name; the SDK v2 modules would leave S3AFileSystem without com.amazonaws classes."""
    conf = fetched_store("3.3.4", monkeypatch, tmp_path)
    packages = conf["spark.jars.packages"].split(",")
    assert packages == [
        "org.apache.hadoop:hadoop-aws:3.3.4",
        "com.amazonaws:aws-java-sdk-s3:1.12.262",
        "com.amazonaws:aws-java-sdk-sts:1.12.262",
        "com.amazonaws:aws-java-sdk-dynamodb:1.12.262",
    ]
    assert "com.amazonaws:aws-java-sdk-bundle" in conf["spark.jars.excludes"].split(",")


@pytest.mark.parametrize(("hadoop", "sdk"), [("3.4.1", "2.29.52"), ("3.4.2", "2.29.52"), ("3.5.0", "2.35.4")])
def test_the_s3a_connector_of_hadoop_3_4_and_later_takes_sdk_v2_modules(monkeypatch, tmp_path, hadoop, sdk):
    conf = fetched_store(hadoop, monkeypatch, tmp_path)
    assert conf["spark.jars.packages"].split(",") == [
        f"org.apache.hadoop:hadoop-aws:{hadoop}",
        f"software.amazon.awssdk:s3:{sdk}",
        f"software.amazon.awssdk:s3-transfer-manager:{sdk}",
        f"software.amazon.awssdk:sts:{sdk}",
    ]
    assert "software.amazon.awssdk:bundle" in conf["spark.jars.excludes"].split(",")


def test_a_hadoop_line_without_a_known_connector_is_refused_before_any_download(monkeypatch, tmp_path):
    monkeypatch.setattr(delta_jars, "resolve", lambda conf, what: pytest.fail(f"resolved {conf}"))
    with pytest.raises(SparkRuntimeError, match=r"no s3a connector is known for Hadoop 3\.2\.4 .*spark\.jars"):
        fetched_store("3.2.4", monkeypatch, tmp_path)


def test_the_connector_jars_leave_out_modules_pyspark_ships(spark_jars, tmp_path, monkeypatch):
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path / "ivy"))
    directory = store_jars.store_home("s3a") / "jars"
    needed = ["org.apache.hadoop_hadoop-aws-3.5.0.jar", "software.amazon.awssdk_s3-2.35.4.jar"]
    needed += ["software.amazon.awssdk_annotations-2.35.4.jar"]
    for name in [*needed, "org.apache.httpcomponents_httpclient-4.5.13.jar"]:
        jar(directory / name)
    assert [p.name for p in store_jars.cached_store_jars("s3a") or []] == sorted(needed)


def test_a_connector_cache_whose_fetch_was_stopped_is_not_taken(monkeypatch, tmp_path):
    """Ivy retrieves jar by jar: a fetch stopped halfway (Ctrl-C; its JVM may go on alone) leaves the
    connector without the SDK, which would fail later with a missing class. A fetch is marked from its start
    until it completes."""
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path / "ivy"))
    monkeypatch.setattr(store_jars, "hadoop_version", lambda: "3.4.1")
    home = store_jars.store_home("s3a")  # under tmp_path: only after the two lines above
    assert home.is_relative_to(tmp_path)

    def stopped(conf: dict[str, str], what: str) -> None:
        jar(home / "jars" / "org.apache.hadoop_hadoop-aws-3.4.1.jar")  # the connector, then no SDK
        raise KeyboardInterrupt

    monkeypatch.setattr(delta_jars, "resolve", stopped)
    with pytest.raises(KeyboardInterrupt):
        store_jars.fetch_store("s3a")
    assert (home / "jars" / "org.apache.hadoop_hadoop-aws-3.4.1.jar").is_file()
    assert store_jars.cached_store_jars("s3a") is None
    fetched_store("3.4.1", monkeypatch, tmp_path)  # the next fetch resolves again and completes
    assert store_jars.cached_store_jars("s3a") is not None


def test_a_session_without_the_connector_fetches_it_with_the_command_that_fetches_it(monkeypatch, tmp_path):
    """`store_conf` runs the connector's fetch in a child process (a session may already run here), the same
    command the test run and the version matrix start ahead: that command reaches `fetch_store`."""
    import subprocess

    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path / "ivy"))
    monkeypatch.setattr(store_jars, "hadoop_version", lambda: "3.4.1")
    monkeypatch.setattr(delta_jars, "spark_jars_dir", lambda: tmp_path / "no-jars", raising=False)
    connector = store_jars.store_home("s3a") / "jars" / "org.apache.hadoop_hadoop-aws-3.4.1.jar"
    assert connector.is_relative_to(tmp_path)
    commands: list[list[str]] = []

    def child(command: list[str], **_: object) -> subprocess.CompletedProcess:
        commands.append(command)
        jar(connector)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(subprocess, "run", child)
    assert store_jars.store_conf("s3a") == {"spark.jars": str(connector)}
    (command,) = commands
    assert command == store_jars.fetch_command("s3a")
    python, flag, module, *argv = command
    assert (python, flag, module) == (sys.executable, "-m", store_jars.__name__)  # this environment's cache
    fetched: list[str] = []
    monkeypatch.setattr(store_jars, "fetch_store", lambda store: fetched.append(store) or [connector])
    assert store_jars.main(argv) == 0 and fetched == ["s3a"]


def test_a_fetch_and_a_reader_wait_for_a_resolution_in_progress_and_take_its_jars(monkeypatch, tmp_path):
    """Ivy has no lock: a second process resolving the same connector would write the same files, and one
    reading the cache mid-retrieval would take the connector without the SDK. Both wait for the lock (held
    here as another process would hold it: flock is per open file) and then use what the first retrieved."""
    import subprocess
    import threading

    from optimizer.cache_lock import locked

    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path / "ivy"))
    monkeypatch.setattr(store_jars, "hadoop_version", lambda: "3.4.1")
    monkeypatch.setattr(delta_jars, "spark_jars_dir", lambda: tmp_path / "no-jars", raising=False)
    resolved: list[object] = []
    monkeypatch.setattr(delta_jars, "resolve", lambda conf, what: resolved.append(conf))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: resolved.append(a) or subprocess.CompletedProcess(a, 1))
    home = store_jars.store_home("s3a")
    assert home.is_relative_to(tmp_path)
    results: dict[str, object] = {}
    calls = {"fetch": lambda: store_jars.fetch_store("s3a"), "read": lambda: store_jars.store_conf("s3a")}
    threads = [threading.Thread(target=lambda n=n, c=c: results.update({n: c()})) for n, c in calls.items()]
    with locked(home, exclusive=True):
        for thread in threads:
            thread.start()
        threads[0].join(0.5)
        assert [t.is_alive() for t in threads] == [True, True] and results == {}
        connector = jar(home / "jars" / "org.apache.hadoop_hadoop-aws-3.4.1.jar")
        sdk = jar(home / "jars" / "software.amazon.awssdk_s3-2.29.52.jar")
    for thread in threads:
        thread.join(10)
    assert resolved == []
    assert sorted(results["fetch"]) == [connector, sdk]  # type: ignore[arg-type]
    assert sorted(results["read"]["spark.jars"].split(",")) == [str(connector), str(sdk)]  # type: ignore[index]


def test_a_lock_held_too_long_is_named_and_a_file_system_without_locks_is_used_unlocked(tmp_path, monkeypatch):
    import fcntl

    from optimizer.cache_lock import locked

    with locked(tmp_path / "cache", exclusive=False):  # shared: readers do not wait for each other
        with locked(tmp_path / "cache", exclusive=False, wait_seconds=0):
            pass
        held = pytest.raises(SparkRuntimeError, match=r"cache\.lock for 0 s while fetching jars into .*cache")
        with held, locked(tmp_path / "cache", exclusive=True, wait_seconds=0):
            pass

    def no_flock(handle: int, mode: int) -> None:
        raise OSError(37, "No locks available")  # ENOLCK: an NFS mount without a lock daemon

    monkeypatch.setattr(fcntl, "flock", no_flock)
    with locked(tmp_path / "cache", exclusive=True, wait_seconds=0):
        entered = True
    assert entered
