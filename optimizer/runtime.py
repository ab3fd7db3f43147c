"""The one place that builds a SparkSession, and what it can do.

Three ways to reach Spark, chosen by configuration:

* **embedded** (default): ``local[*]`` in this process, with the settings docs/ARCHITECTURE.md
  ("Runtime facts") requires (UTC session time zone, microsecond Parquet timestamps so delta-rs can read the files, no
  ``_SUCCESS`` markers in table directories, few shuffle partitions).
* **cluster**: any other master URL (``spark://``, ``yarn``, ``k8s://``).
* **connect**: a Spark Connect URL (``sc://``), e.g. the cluster that wrote the data.

Data work is the same in all three: Spark reads and writes Parquet; the Delta log is read and written
by delta-rs on the driver (see `optimizer.table`). Whether the Delta Lake JVM classes are loadable is
detected and reported, so an operator sees which mode runs; the data path does not depend on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from optimizer.config import SparkSettings
from optimizer.errors import SparkRuntimeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Settings every session deltaopt builds needs (docs/ARCHITECTURE.md, "Runtime facts"), whatever the master.
REQUIRED_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    # INT96 timestamps become nanosecond timestamps that delta-rs refuses (timestampNanos).
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    # Predicates from users are evaluated on data: a bad cast must give NULL, not fail the job.
    "spark.sql.ansi.enabled": "false",
}

# Only for the embedded default: a quiet, small, single-machine session.
EMBEDDED_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    # Raw local FS: no .crc side files next to table data.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.file.impl.disable.cache": "true",
}

Mode = Literal["embedded", "cluster", "connect"]


@dataclass(frozen=True)
class RuntimeInfo:
    """What the session is and can do; printed by the CLI and recorded with decisions."""

    mode: Mode
    master: str
    spark_version: str
    delta_jvm: bool | None  # None: cannot be checked (Spark Connect has no JVM gateway)

    def describe(self) -> str:
        delta = {True: "Delta JVM classes present", False: "no Delta JVM classes", None: "Delta JVM unknown"}
        return (
            f"Spark {self.spark_version} ({self.mode}, {self.master}); {delta[self.delta_jvm]}; "
            "Delta log via delta-rs, data via Spark Parquet I/O"
        )


def session_mode(settings: SparkSettings) -> Mode:
    if settings.connect_url:
        return "connect"
    return "embedded" if settings.master.startswith("local") else "cluster"


def build_session(settings: SparkSettings | None = None) -> SparkSession:
    """Build (or return the active) SparkSession for `settings`.

    Raises `SparkRuntimeError` when Spark cannot start (no Java, unreachable master or Connect server).
    """
    from pyspark.sql import SparkSession

    settings = settings or SparkSettings()
    mode = session_mode(settings)
    conf = dict(REQUIRED_CONF)
    if mode == "embedded":
        conf.update(EMBEDDED_CONF)
        log4j = Path(__file__).with_name("log4j2.properties")
        conf.setdefault("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        if settings.driver_memory:
            conf["spark.driver.memory"] = settings.driver_memory
    conf["spark.sql.shuffle.partitions"] = str(settings.shuffle_partitions)
    conf.update(settings.conf)

    # a fresh Builder: ``SparkSession.builder`` is shared by the process and keeps every option set on it
    builder = SparkSession.Builder().appName(settings.app_name)
    if mode == "connect":
        builder = builder.remote(settings.connect_url or "")
        # Static and JVM-level settings cannot be changed from a Connect client; session ones can.
        conf = {k: v for k, v in conf.items() if k.startswith("spark.sql.")}
    else:
        builder = builder.master(settings.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    if settings.delta_packages:
        builder = _with_delta_packages(builder)
    try:
        spark = builder.getOrCreate()
    except Exception as err:  # py4j / grpc / OS errors: all mean "no Spark"
        target = settings.connect_url or settings.master
        raise SparkRuntimeError(f"cannot start or reach Spark at {target}: {err}") from err
    if mode == "embedded":
        spark.sparkContext.setLogLevel("ERROR")
    info = runtime_info(spark, settings)
    log.info("spark session ready: %s", info.describe())
    return spark


def _with_delta_packages(builder: SparkSession.Builder) -> SparkSession.Builder:
    try:
        from delta import configure_spark_with_delta_pip
    except ImportError as err:
        raise SparkRuntimeError(
            "spark.delta_packages is true but delta-spark is not installed: pip install 'deltaopt[delta]'"
        ) from err
    builder = builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension").config(
        "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    )
    return configure_spark_with_delta_pip(builder)


def delta_jvm_available(spark: SparkSession) -> bool | None:
    """Whether ``io.delta.tables.DeltaTable`` loads in the driver JVM; None under Spark Connect."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return None
    try:
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
    except Exception:  # ClassNotFoundException arrives as a Py4JJavaError
        return False
    return True


def runtime_info(spark: SparkSession, settings: SparkSettings | None = None) -> RuntimeInfo:
    settings = settings or SparkSettings()
    mode = session_mode(settings)
    if mode == "connect":
        master = settings.connect_url or "sc://"
    else:
        master = spark.sparkContext.master or settings.master
        mode = "embedded" if master.startswith("local") else "cluster"
    return RuntimeInfo(mode=mode, master=master, spark_version=spark.version, delta_jvm=delta_jvm_available(spark))
