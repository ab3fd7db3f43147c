"""The one place that builds a SparkSession, and what it can do.

Three ways to reach Spark, chosen by configuration:

* **embedded** (default): ``local[*]`` in this process, with the settings docs/ARCHITECTURE.md
  ("Runtime facts") requires (UTC session time zone, microsecond Parquet timestamps so delta-rs can read the files, no
  ``_SUCCESS`` markers in table directories, few shuffle partitions).
* **cluster**: any other master URL (``spark://``, ``yarn``, ``k8s://``), or, when the configuration
  names no master, the Spark this process was started in (spark-submit, a Databricks job): its master,
  jars and Delta, never replaced by an embedded one.
* **connect**: a Spark Connect URL (``sc://``), e.g. the cluster that wrote the data.

Data work is the same in the first two: Spark reads and writes Parquet, the Delta log is read by
delta-rs on the driver (see `optimizer.table`). Sessions deltaopt builds load the Delta Lake engine (the
jars `optimizer.delta_jars` caches in the environment) unless ``spark.delta: off``, and the stores'
connectors their tables need; where the session has Delta, OPTIMIZE commits through Delta's own
transaction. A Connect session has no JVM here: Delta's own OPTIMIZE runs on the server
(`optimizer.table.rewrite_path`, docs/CLUSTERS.md). Which one commits is detected and reported.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from optimizer.config import SparkSettings, TableSettings
from optimizer.errors import SparkRuntimeError
from optimizer.table.rewrite import COMMIT_CONF  # SparkSettings.commit, readable by jobs wherever they run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Settings every session deltaopt builds needs (docs/ARCHITECTURE.md, "Runtime facts"), whatever the master.
REQUIRED_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    # INT96 timestamps become nanosecond timestamps that delta-rs refuses (timestampNanos).
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Dates before 1582 / timestamps before 1900 read and written as they are (proleptic Gregorian, as Delta's
    # other readers and writers take them): Spark 4's defaults. Spark 3.5's (EXCEPTION) fail the rewrite of
    # such a table, and the read of such a file delta-rs or DuckDB wrote (no Spark version in its footer);
    # a file Spark 2.x or a LEGACY writer wrote says so in its footer and is still rebased on read.
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    # Predicates from users are evaluated on data: a bad cast must give NULL, not fail the job.
    "spark.sql.ansi.enabled": "false",
    # PySpark 4 records the Python call site of every Column and function call for error messages, at
    # five JVM round trips and a stack capture each: building a layout's range-id expression (a binary
    # search of up to 1,024 boundaries) spent more time there than in the rest of its estimate. An
    # operator who wants call sites in error contexts sets it back in the configuration's spark.conf (read
    # when the session starts: Spark 4 refuses it at runtime, PySpark reads it once; Spark 3.5 ignores it).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}

# Only for the embedded default: a quiet, small, single-machine session.
EMBEDDED_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    # Raw local FS: no .crc side files next to table data.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.file.impl.disable.cache": "true",
    # the same for FileContext, which Delta's log store writes commits with
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}

Mode = Literal["embedded", "cluster", "connect"]


@dataclass(frozen=True)
class RuntimeInfo:
    """What the session is and can do; printed by the CLI and recorded with decisions."""

    mode: Mode
    master: str
    spark_version: str
    delta_jvm: bool | None  # None: cannot be checked (Spark Connect has no JVM gateway)
    commit_engine: str = "delta-rs"  # who commits OPTIMIZE in this session: delta-spark, delta-sql or delta-rs
    delta_version: str | None = None  # the loaded Delta engine's release, as its jar states it

    def describe(self) -> str:
        loaded = f"Delta engine loaded ({self.delta_version})" if self.delta_version else "Delta engine loaded"
        delta = {True: loaded, False: "no Delta engine", None: "Delta engine unknown (Connect)"}
        commits = {
            "delta-spark": "OPTIMIZE commits through Delta's transaction",
            "delta-sql": "OPTIMIZE is Delta's own command on the server",
            "delta-rs": "OPTIMIZE commits through delta-rs",
        }
        return (
            f"Spark {self.spark_version} ({self.mode}, {self.master}); {delta[self.delta_jvm]}; "
            f"{commits.get(self.commit_engine, self.commit_engine)}; data via Spark Parquet I/O"
        )


# Set where a Spark driver already runs this process: spark-submit's Python driver, a Databricks job.
ATTACH_ENV = ("PYSPARK_GATEWAY_PORT", "DATABRICKS_RUNTIME_VERSION")


def attached(settings: SparkSettings) -> bool:
    """Whether to use the Spark this process was started in (its master, jars and Delta) rather than
    build one: a driver launched by spark-submit or a cluster job, where the configuration names no master."""
    return (
        not settings.connect_url
        and "master" not in settings.model_fields_set
        and any(os.environ.get(name) for name in ATTACH_ENV)
    )


def session_mode(settings: SparkSettings) -> Mode:
    if settings.connect_url:
        return "connect"
    if attached(settings):
        return "cluster"
    return "embedded" if settings.master.startswith("local") else "cluster"


def build_session(settings: SparkSettings | None = None, tables: Sequence[TableSettings] = ()) -> SparkSession:
    """Build (or return the active) SparkSession for `settings`, able to reach `tables`: their object
    stores' connector jars (fetched and cached like Delta's) and storage options (`optimizer.table.storage`).

    Raises `SparkRuntimeError` when Spark cannot start (no Java, unreachable master or Connect server).
    """
    settings = settings or SparkSettings()
    mode = session_mode(settings)
    conf = dict(REQUIRED_CONF)
    if mode != "connect":  # a Connect server reaches its stores with its own jars and settings
        conf.update(store_conf(tables))
    if mode == "embedded":
        conf.update(EMBEDDED_CONF)
        log4j = Path(__file__).with_name("log4j2.properties")
        conf.setdefault("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        if settings.driver_memory:
            conf["spark.driver.memory"] = settings.driver_memory
    conf["spark.sql.shuffle.partitions"] = str(settings.shuffle_partitions)
    stores_jars = conf.get("spark.jars")
    conf.update(settings.conf)  # the operator's settings win; their jars and the stores' connectors both load
    if mode == "embedded" and "spark.driver.extraJavaOptions" not in settings.conf:
        # the JVM's zone is the session's: Delta up to 4.0 derives timestamp partition values in the JVM's
        # zone (optimizer/table/delta_writer.py), which on a host not set to UTC would differ from the session's
        zone = conf["spark.sql.session.timeZone"]
        conf["spark.driver.extraJavaOptions"] += f" -Duser.timezone={zone}"
    if stores_jars and settings.conf.get("spark.jars"):
        conf["spark.jars"] = f"{settings.conf['spark.jars']},{stores_jars}"

    conf[COMMIT_CONF] = settings.commit
    # a Connect client cannot add jars; a driver started by a cluster has the cluster's Delta (or none)
    delta = settings.delta_mode if mode != "connect" and not attached(settings) else "off"
    if delta != "off":
        from optimizer.delta_jars import delta_version

        delta_version()  # a PySpark (or delta-spark) outside the supported matrix: refused here, naming it
        try:
            spark = _start(settings, mode, _with_delta(conf))
        except SparkRuntimeError as err:
            reason = _why_delta_failed(err)
            if delta == "required":
                raise SparkRuntimeError(f"spark.delta is required but the Delta engine did not load: {reason}") from err
            log.warning("Delta Lake engine not loaded (%s); continuing without it: commits go through delta-rs", reason)
            spark = _start(settings, mode, conf)
    else:
        spark = _start(settings, mode, conf)
    if mode == "embedded":
        spark.sparkContext.setLogLevel("ERROR")
    from optimizer.table.rewrite_path import check_commit_kept

    check_commit_kept(spark, settings.commit, settings.connect_url or settings.master)
    info = runtime_info(spark, settings)
    if delta == "required" and not info.delta_jvm:
        raise SparkRuntimeError("spark.delta is required but the session has no Delta engine classes")
    log.info("spark session ready: %s", info.describe())
    return spark


def store_conf(tables: Sequence[TableSettings]) -> dict[str, str]:
    """Connector jars for the stores `tables` live in, and each S3 table's bucket settings."""
    from optimizer import store_jars
    from optimizer.table.storage import hadoop_conf, scheme_of

    conf: dict[str, str] = {}
    stores = {store_jars.STORE_OF_SCHEME[s] for t in tables if (s := scheme_of(t.path)) in store_jars.STORE_OF_SCHEME}
    jars = [store_jars.store_conf(store)["spark.jars"] for store in sorted(stores)]
    if jars:
        conf["spark.jars"] = ",".join(jars)
    for table in tables:
        conf.update(hadoop_conf(table.path, table.storage_options))
    return conf


def _why_delta_failed(err: SparkRuntimeError) -> str:
    """The useful part of a failed start with Delta: usually jars that are neither cached nor reachable."""
    from optimizer import delta_jars

    try:
        cached = delta_jars.cached_jars()
    except SparkRuntimeError as missing:  # the delta-spark wheel itself is not installed
        return str(missing)
    if cached is None:
        return (
            f"{delta_jars.coordinates()} is not cached in {delta_jars.delta_home()} and could not be resolved from "
            "Maven Central; run `python -m optimizer.delta_jars` (part of `make install`) where it is reachable"
        )
    return str(err)


def _with_delta(conf: dict[str, str]) -> dict[str, str]:
    """`conf` plus what loads Delta; jars and extensions the user configured are kept beside Delta's."""
    from optimizer import delta_jars
    from optimizer.cache_lock import locked

    merged = {"spark.databricks.delta.snapshotPartitions": "4", **conf}  # few tasks to replay small logs
    with locked(delta_jars.delta_home(), exclusive=False):  # not while a fetch is still retrieving them
        delta_conf = delta_jars.session_conf()
    for key, value in delta_conf.items():
        mine = conf.get(key)
        listed = key in ("spark.jars", "spark.jars.packages", "spark.sql.extensions")
        merged[key] = f"{mine},{value}" if mine and listed and value not in mine else (mine or value)
    return merged


def _start(settings: SparkSettings, mode: Mode, conf: dict[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession

    # a fresh Builder: ``SparkSession.builder`` is shared by the process and keeps every option set on it
    builder = SparkSession.Builder().appName(settings.app_name)
    if mode == "connect":
        builder = builder.remote(settings.connect_url or "")
        # Static and JVM-level settings cannot be changed from a Connect client; session ones can.
        conf = {k: v for k, v in conf.items() if k.startswith(("spark.sql.", "spark.deltaopt."))}
    elif not attached(settings):  # attached: the master (and jars) the process was started with
        builder = builder.master(settings.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as err:  # py4j / grpc / OS errors: all mean "no Spark"
        target = settings.connect_url or settings.master
        raise SparkRuntimeError(f"cannot start or reach Spark at {target}: {err}") from err


def runtime_info(spark: SparkSession, settings: SparkSettings | None = None) -> RuntimeInfo:
    settings = settings or SparkSettings()
    mode = session_mode(settings)
    if mode == "connect":
        master = settings.connect_url or "sc://"
    else:
        master = spark.sparkContext.master or settings.master
        mode = "embedded" if master.startswith("local") else "cluster"
    from optimizer.table.rewrite_path import Capabilities

    capabilities = Capabilities.of_session(spark)
    return RuntimeInfo(
        mode=mode,
        master=master,
        spark_version=spark.version,
        delta_jvm=capabilities.delta_in_jvm,
        commit_engine=capabilities.engine(),
        delta_version=capabilities.release() if mode != "connect" else None,
    )
