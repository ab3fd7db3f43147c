"""The Delta Lake JVM jars for the embedded Spark: resolved once from Maven Central, then used offline.

The Python package ``delta-spark`` (pinned in pyproject.toml beside PySpark) carries only the Python
API; the engine is ``io.delta:delta-spark_2.13`` of the same version on Maven Central. Spark's own Ivy
(``spark.jars.packages``) resolves it with its transitive jars (``delta-storage``, ``antlr4-runtime``)
into a cache *inside the project's environment* (``<venv>/share/deltaopt/ivy``, or
``$DELTAOPT_DELTA_JARS``), never the user's home. Afterwards sessions put the cached files on
``spark.jars`` directly, so nothing is resolved again and no network is needed.

``make install`` runs ``python -m optimizer.delta_jars`` once; a session started before that resolves
on its first start instead. docs/DELTA-SPARK.md has the recipe and the facts it rests on.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from optimizer.errors import SparkRuntimeError

SCALA_BINARY = "2.13"  # Spark 4.0 is built for Scala 2.13 only
JARS_ENV = "DELTAOPT_DELTA_JARS"
EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def delta_version() -> str:
    """The Delta release that pairs with the installed PySpark: the ``delta-spark`` wheel's version."""
    try:
        return metadata.version("delta-spark")
    except metadata.PackageNotFoundError as err:
        raise SparkRuntimeError("the Python package delta-spark is not installed; run `make install`") from err


def coordinates() -> str:
    """Maven coordinates of the Delta engine for this environment."""
    return f"io.delta:delta-spark_{SCALA_BINARY}:{delta_version()}"


def ivy_home() -> Path:
    """Where Ivy keeps its cache and the resolved jars: inside the environment, not the home directory."""
    configured = os.environ.get(JARS_ENV)
    return Path(configured) if configured else Path(sys.prefix) / "share" / "deltaopt" / "ivy"


def cached_jars() -> list[Path] | None:
    """The resolved jars for this Delta version, or None when they have not been fetched yet."""
    version = delta_version()
    directory = ivy_home() / "jars"
    engine = directory / f"io.delta_delta-spark_{SCALA_BINARY}-{version}.jar"
    storage = directory / f"io.delta_delta-storage-{version}.jar"
    if not (engine.is_file() and storage.is_file()):
        return None
    # every jar Ivy retrieved for these coordinates (other Delta versions' jars are left out)
    return sorted(p for p in directory.glob("*.jar") if not p.name.startswith("io.delta_") or version in p.name)


def session_conf() -> dict[str, str]:
    """Spark settings that load Delta: cached jars on ``spark.jars``, else Ivy resolution into the cache."""
    conf = {"spark.sql.extensions": EXTENSIONS, "spark.sql.catalog.spark_catalog": CATALOG}
    jars = cached_jars()
    if jars is not None:
        conf["spark.jars"] = ",".join(str(p) for p in jars)
    else:
        conf["spark.jars.packages"] = coordinates()
        conf["spark.jars.ivy"] = str(ivy_home())
    return conf


def fetch() -> list[Path]:
    """Resolve the jars into the cache by starting (and stopping) a small local Spark; returns them.

    Raises `SparkRuntimeError` when Maven Central does not serve them (the message names the coordinates).
    """
    found = cached_jars()
    if found is not None:
        return found
    from pyspark.sql import SparkSession

    builder = SparkSession.Builder().master("local[1]").appName("deltaopt-fetch-jars")
    builder = builder.config("spark.ui.enabled", "false")
    for key, value in session_conf().items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
        spark.stop()
    except Exception as err:  # Ivy's resolution failure surfaces as a py4j / RuntimeError at start-up
        where = ivy_home()
        raise SparkRuntimeError(f"could not resolve {coordinates()} from Maven Central into {where}: {err}") from err
    found = cached_jars()
    if found is None:
        raise SparkRuntimeError(f"Spark started but {coordinates()} is not in {ivy_home() / 'jars'}")
    return found


def main() -> int:
    try:
        jars = fetch()
    except SparkRuntimeError as err:
        print(f"deltaopt: {err}", file=sys.stderr)
        return 1
    print(f"Delta Lake {delta_version()} jars cached in {ivy_home() / 'jars'}:")
    for jar in jars:
        print(f"  {jar.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
