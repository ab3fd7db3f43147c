"""Which ``LogStore`` Delta commits a table's log through, and whether it coordinates separate drivers.

Delta's transaction writes ``_delta_log/N.json`` through the log store of its ``DeltaLog``
(``DeltaLog.store``), resolved from the SparkConf the SparkContext started with (delta-io/delta v4.0.1,
``storage/LogStore.scala`` ``LogStoreProvider.createLogStore``, ``storage/DelegatingLogStore.scala``):

1. ``spark.delta.logStore.class`` (or ``delta.logStore.class``) names one store for every path;
2. else ``DelegatingLogStore`` picks by the scheme *of the path it commits to*:
   ``spark.delta.logStore.<scheme>.impl`` (or ``delta.logStore.<scheme>.impl``), else the scheme's
   default (s3/s3a/s3n: ``S3SingleDriverLogStore``; abfs/abfss/adl/wasb/wasbs: ``AzureLogStore``; gs:
   ``GCSLogStore``; anything else: ``HDFSLogStore``).

deltaopt opens Delta on the table's Spark URI (`TableAccess.spark_uri`: ``s3://`` becomes ``s3a://``),
so on S3 the key that takes effect is ``spark.delta.logStore.s3a.impl``; a ``s3.impl`` key is never
read. A key set on the running session (``spark.conf.set``) is not read either: only the SparkConf.

`spark_commit_safety` asks Delta itself (the store of the ``DeltaLog`` the commit uses, for its log
path) and falls back to reading the keys with Delta's precedence (`configured_log_store`) when the
JVM cannot tell; `log_store_safety` decides from the class whether concurrent commits are atomic for
every writer, or raises `UnsafeStoreError` naming the key that takes effect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from optimizer.table.commit_safety import UnsafeStoreError
from optimizer.table.paths import hadoop_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)

Conf = Callable[[str, "str | None"], "str | None"]  # a SparkConf lookup: (key, default) -> value

STORAGE = "io.delta.storage."
DYNAMO_STORE = f"{STORAGE}S3DynamoDBLogStore"
S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
AZURE_SCHEMES = frozenset({"abfs", "abfss", "adl", "wasb", "wasbs"})
CLASS_KEY = "spark.delta.logStore.class"


def scheme_key(scheme: str) -> str:
    """The key Delta's ``DelegatingLogStore`` reads for paths of `scheme` (``logStoreSchemeConfKey``)."""
    return f"spark.delta.logStore.{scheme}.impl"


def default_store(scheme: str) -> str:
    """Delta's store for `scheme` when no key names one (``DelegatingLogStore.getDefaultLogStoreClassName``)."""
    if scheme in S3_SCHEMES:
        return f"{STORAGE}S3SingleDriverLogStore"
    if scheme in AZURE_SCHEMES:
        return f"{STORAGE}AzureLogStore"
    if scheme == "gs":
        return f"{STORAGE}GCSLogStore"
    return f"{STORAGE}HDFSLogStore"


@dataclass(frozen=True)
class LogStoreChoice:
    """The store Delta commits the log of the table at `uri` through (for paths of `scheme`), and the key
    that chose it (None: Delta's default for the scheme)."""

    uri: str
    scheme: str
    class_name: str
    key: str | None

    @property
    def short_name(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]


def scheme_of(uri: str) -> str:
    return urlparse(uri).scheme.lower() if "://" in uri or uri.startswith("file:") else ""


def _delta_conf(conf: Conf, key: str) -> str | None:
    """A log-store key as Delta reads it (``getLogStoreConfValue``): with ``spark.``, else without."""
    return conf(key, None) or conf(key.removeprefix("spark."), None)


def configured_log_store(uri: str, conf: Conf) -> LogStoreChoice:
    """The store Delta's rules pick for commits to `uri` (the path Delta opens) from SparkConf `conf`."""
    return _configured(uri, scheme_of(uri), conf)


def _configured(uri: str, scheme: str, conf: Conf) -> LogStoreChoice:
    chosen = _delta_conf(conf, CLASS_KEY)
    if chosen and not chosen.endswith("DelegatingLogStore"):
        return LogStoreChoice(uri, scheme, chosen, CLASS_KEY)
    key = scheme_key(scheme)
    named = _delta_conf(conf, key) if scheme else None
    return LogStoreChoice(uri, scheme, named or default_store(scheme), key if named else None)


def resolved_log_store(spark: SparkSession, uri: str, conf: Conf) -> LogStoreChoice:
    """The store Delta itself resolved for the log of the ``DeltaLog`` at `uri` (the instance its
    transaction commits through). Raises `UnsafeStoreError` when Delta cannot create that store (the
    commit would fail the same way); falls back to `configured_log_store` when the log cannot be opened."""
    from optimizer.table.delta_engine import DeltaEngine, java_message

    try:
        delta_log = DeltaEngine(spark, uri).log()
        log_path = delta_log.logPath()
        store = delta_log.store()
    except Exception as err:  # an unreachable store or a missing connector: Delta's rules still apply
        log.info("Delta could not open %s to resolve its log store (%s); reading the keys", uri, java_message(err))
        return _loadable(spark, configured_log_store(uri, conf))
    configured = _configured(uri, scheme_of(str(log_path.toString())), conf)
    try:
        if store.getClass().getName().endswith("DelegatingLogStore"):
            store = store.getDelegate(log_path)
    except Exception as err:
        raise UnsafeStoreError(
            f"{uri}: Delta cannot load the log store {configured.class_name} "
            f"({_why(configured)}): {java_message(err)}; "
            "nothing was committed"
        ) from err
    name = str(_implementation(store).getClass().getName())
    return LogStoreChoice(uri, configured.scheme, name, configured.key if name == configured.class_name else None)


def _loadable(spark: SparkSession, choice: LogStoreChoice) -> LogStoreChoice:
    """`choice` when its class is on the session's class path; else `UnsafeStoreError` (Delta could not
    create the store, so its commit would fail after the rewrite had been written)."""
    from optimizer.table.delta_engine import gateway, java_message

    jvm = gateway(spark)
    try:
        jvm.java.lang.Class.forName(
            choice.class_name, False, jvm.java.lang.Thread.currentThread().getContextClassLoader()
        )
    except Exception as err:
        raise UnsafeStoreError(
            f"{choice.uri}: Delta cannot load the log store {choice.class_name} ({_why(choice)}): "
            f"{java_message(err)}; put its jar on spark.jars; nothing was committed"
        ) from err
    return choice


def _implementation(store: Any) -> Any:
    """The Java ``io.delta.storage`` store inside Delta's Scala adaptor (``LogStoreAdaptor``), if any."""
    if store.getClass().getName().endswith("LogStoreAdaptor"):
        return store.logStoreImpl()
    return store


def spark_commit_safety(spark: SparkSession, table: TableAccess, package: str, single_writer: bool) -> str:
    """How Delta's commits to `table` in `spark` are made atomic; raises `UnsafeStoreError` if they are not."""
    if package.startswith("com.databricks"):
        return "Databricks Runtime's Delta commit coordination"
    started = spark.sparkContext.getConf()  # Delta reads the SparkConf, not the session's runtime settings

    def conf(key: str, default: str | None) -> str | None:
        return started.get(key, default)

    uri = table.spark_uri("").rstrip("/")
    return log_store_safety(resolved_log_store(spark, uri, conf), conf, single_writer)


# which (store, scheme) pairs make "write N.json unless it exists" atomic across drivers (delta-io/delta
# storage/: HDFSLogStore renames, AzureLogStore renames with ADLS Gen2's namespace, GCSLogStore preconditions)
MULTI_DRIVER = {
    ("HDFSLogStore", "hdfs"): "atomic rename on HDFS",
    ("HDFSLogStore", "viewfs"): "atomic rename on HDFS",
    ("AzureLogStore", "abfs"): "atomic rename on ADLS Gen2",
    ("AzureLogStore", "abfss"): "atomic rename on ADLS Gen2",
    ("GCSLogStore", "gs"): "GCS preconditions",
}
SINGLE_DRIVER = {("S3SingleDriverLogStore", scheme): "single driver" for scheme in S3_SCHEMES}
SINGLE_DRIVER |= {("AzureLogStore", scheme): "Blob storage, single driver" for scheme in ("wasb", "wasbs")}
LOCAL = {"HDFSLogStore", "LocalLogStore"}


def log_store_safety(choice: LogStoreChoice, conf: Conf, single_writer: bool = False) -> str:
    """How commits through `choice` are made atomic for every writer; raises `UnsafeStoreError` naming the
    key that takes effect when the store only coordinates commits of one driver.

    Local disk is allowed: Delta serialises its own commits within a JVM, and other processes' writers
    (delta-rs) use an atomic rename-if-absent. Single-driver stores are allowed only where the
    configuration says deltaopt is the table's only writer while it runs (`single_writer`)."""
    name, scheme = choice.short_name, choice.scheme
    if name == "S3DynamoDBLogStore":
        table = _delta_conf(conf, "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName") or "delta_log"
        return f"Delta's S3DynamoDBLogStore with lock table '{table}' (every writer must use it)"
    if (name, scheme) in MULTI_DRIVER:
        return f"Delta's {name}: {MULTI_DRIVER[name, scheme]}"
    if name in LOCAL and scheme in ("", "file"):
        return (
            f"Delta's {name} on the local file system: exists-then-rename, serialised within one JVM; "
            "other processes' writers rename atomically"
        )
    if (name, scheme) in SINGLE_DRIVER and single_writer:
        alone = "configured: no other writer commits while deltaopt runs"
        return f"Delta's {name} ({SINGLE_DRIVER[name, scheme]}); {alone}"
    if (name, scheme) in SINGLE_DRIVER:
        raise UnsafeStoreError(_single_driver_refusal(choice))
    raise UnsafeStoreError(
        f"{choice.uri}: deltaopt does not know whether Delta's {choice.class_name} ({_why(choice)}) makes "
        f"commits to '{scheme}://' atomic for every writer; nothing was committed"
    )


def _why(choice: LogStoreChoice) -> str:
    """What chose the store: the key that takes effect, else Delta's default for the scheme."""
    if choice.key:
        return f"{choice.key}={choice.class_name}"
    if choice.class_name == default_store(choice.scheme):
        return f"no {scheme_key(choice.scheme)}: Delta's default for {choice.scheme}://"
    return "as Delta resolved it"


def _single_driver_refusal(choice: LogStoreChoice) -> str:
    """The refusal naming the key that would take effect for the path Delta commits to."""
    scheme = choice.scheme
    if choice.key == CLASS_KEY:
        remedy = f"replace {CLASS_KEY} with {scheme_key(scheme)}={DYNAMO_STORE}"
    else:
        remedy = f"set {scheme_key(scheme)}={DYNAMO_STORE}"
    fix = (
        f"{remedy} in the Spark settings the session starts with, with a lock table every writer uses"
        if scheme in S3_SCHEMES
        else "run the job on the writers' own cluster"
    )
    return (
        f"{choice.uri}: Delta commits to {scheme}:// through {choice.short_name} ({_why(choice)}), which is safe "
        f"only when every writer commits through this Spark driver; {fix}, or set single_writer: true on the "
        "table if no other writer commits while deltaopt runs; nothing was committed"
    )


def delta_commit_safety(uri: str, package: str, conf: Conf, single_writer: bool = False) -> str:
    """How Delta commits to the table at `uri` are made atomic, from SparkConf `conf` alone (no JVM):
    the store Delta's rules pick for the path Delta commits to (`paths.hadoop_uri`)."""
    if package.startswith("com.databricks"):
        return "Databricks Runtime's Delta commit coordination"
    return log_store_safety(configured_log_store(hadoop_uri(uri), conf), conf, single_writer)
