"""The Delta Lake JVM jars for the embedded Spark: resolved once from Maven Central, then used offline.

The Python package ``delta-spark`` (pinned in pyproject.toml beside PySpark) carries only the Python
API; the engine is a jar on Maven Central whose name follows the installed PySpark (`artifact`):
``delta-spark_2.12`` for Delta 3.x on Spark 3.5 (Scala 2.12), ``delta-spark_2.13`` for Delta 4.0, and
``delta-spark_{4.1|4.2}_2.13`` from Delta 4.1 on, where the unsuffixed name is built for the newest Spark
only. The release is the installed wheel's where it pairs with PySpark, else the one `DELTA_FOR_SPARK`
names; a PySpark outside the supported matrix is refused up front. Spark's own Ivy
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

# PySpark's minor release -> the Delta release fetched for it, and the Delta lines that pair with it
DELTA_FOR_SPARK = {"3.5": "3.3.3", "4.0": "4.0.1", "4.1": "4.3.1", "4.2": "4.4.0"}
DELTA_LINES = {"3.5": ("3.2", "3.3"), "4.0": ("4.0",), "4.1": ("4.3",), "4.2": ("4.4",)}
SUPPORTED = (
    "Spark 3.5 + Delta 3.2/3.3 (Scala 2.12), Spark 4.0 + Delta 4.0, Spark 4.1 + Delta 4.3, Spark 4.2 + Delta 4.4"
)
JARS_ENV = "DELTAOPT_DELTA_JARS"
EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def minor(version: str) -> str:
    """``major.minor`` of a release (``4.0.5`` -> ``4.0``)."""
    return ".".join(version.split(".")[:2])


def delta_release(pyspark_version: str, installed: str | None) -> str:
    """The Delta release for PySpark `pyspark_version`: the `installed` ``delta-spark`` wheel's where it
    pairs with it, else `DELTA_FOR_SPARK`'s. Raises `SparkRuntimeError` with the supported matrix for a
    PySpark outside it, or a wheel of another Delta line (installed with ``--no-deps``)."""
    spark = minor(pyspark_version)
    if spark not in DELTA_FOR_SPARK:
        raise SparkRuntimeError(f"PySpark {pyspark_version} is not supported; supported: {SUPPORTED}")
    if installed is None:
        return DELTA_FOR_SPARK[spark]
    if minor(installed) not in DELTA_LINES[spark]:
        raise SparkRuntimeError(
            f"delta-spark {installed} does not pair with PySpark {pyspark_version}; supported: {SUPPORTED}"
        )
    return installed


def artifact(delta: str, pyspark_version: str, scala: str) -> str:
    """The Maven artifact of Delta `delta`'s engine for PySpark `pyspark_version` built for Scala `scala`
    (what Delta's own ``configure_spark_with_delta_pip`` names): from Delta 4.1 one artifact per Spark."""
    major, minor_release = (int(part) for part in minor(delta).split("."))
    if (major, minor_release) >= (4, 1):
        return f"delta-spark_{minor(pyspark_version)}_{scala}"
    return f"delta-spark_{scala}"


def pyspark_version() -> str:
    """The installed PySpark's release."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:  # a PySpark on the path, not installed by pip (a cluster's own)
        import pyspark

        return str(pyspark.__version__)


def scala_binary() -> str:
    """The Scala binary version the installed PySpark's jars are built for (``2.12`` or ``2.13``)."""
    import pyspark

    found = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("scala-library-*.jar"))
    if found:
        return minor(found[-1].name[len("scala-library-") : -len(".jar")])
    return "2.12" if minor(pyspark_version()) == "3.5" else "2.13"  # PyPI's builds


def delta_version() -> str:
    """The Delta release that pairs with the installed PySpark (`delta_release`)."""
    try:
        installed: str | None = metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        installed = None
    return delta_release(pyspark_version(), installed)


def engine_artifact() -> str:
    """This environment's Delta engine artifact (`artifact`)."""
    return artifact(delta_version(), pyspark_version(), scala_binary())


def coordinates() -> str:
    """Maven coordinates of the Delta engine for this environment."""
    return f"io.delta:{engine_artifact()}:{delta_version()}"


def ivy_home() -> Path:
    """Where Ivy keeps its cache and the resolved jars: inside the environment, not the home directory."""
    configured = os.environ.get(JARS_ENV)
    return Path(configured) if configured else Path(sys.prefix) / "share" / "deltaopt" / "ivy"


def cached_jars() -> list[Path] | None:
    """The resolved jars for this Delta version, or None when they have not been fetched yet."""
    version = delta_version()
    directory = ivy_home() / "jars"
    engine = directory / f"io.delta_{engine_artifact()}-{version}.jar"
    storage = directory / f"io.delta_delta-storage-{version}.jar"
    if not (engine.is_file() and storage.is_file()):
        return None
    # every jar Ivy retrieved for these coordinates (other Delta versions' and other Sparks' engines left out)
    return sorted(
        p
        for p in directory.glob("*.jar")
        if not p.name.startswith("io.delta_")
        or (version in p.name and (p == engine or not p.name.startswith("io.delta_delta-spark_")))
    )


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


# Hadoop's cloud connectors, fetched the same way when a table lives in such a store. hadoop-aws names the
# whole AWS SDK bundle (over 500 MB); only the SDK modules S3A loads are taken instead, at the version
# Hadoop 3.4.2 moved to (the bundle of 3.4.1 is excluded).
AWS_SDK = "2.29.52"
STORES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "s3a": (
        (
            "org.apache.hadoop:hadoop-aws:{hadoop}",
            f"software.amazon.awssdk:s3:{AWS_SDK}",
            f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK}",
            f"software.amazon.awssdk:sts:{AWS_SDK}",
        ),
        ("software.amazon.awssdk:bundle",),
    ),
}
STORE_OF_SCHEME = {"s3": "s3a", "s3a": "s3a"}


def hadoop_version() -> str:
    """The Hadoop client PySpark ships (its connectors must be the same version)."""
    import pyspark

    found = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("hadoop-client-api-*.jar"))
    if not found:
        raise SparkRuntimeError("the installed PySpark has no hadoop-client-api jar: cannot pick a connector")
    return found[-1].name[len("hadoop-client-api-") : -len(".jar")]


def store_home(store: str) -> Path:
    return ivy_home() / f"store-{store}"


def cached_store_jars(store: str) -> list[Path] | None:
    """The cached connector jars for `store` ("s3a"), or None when they have not been fetched."""
    directory = store_home(store) / "jars"
    connector = directory / f"org.apache.hadoop_hadoop-aws-{hadoop_version()}.jar"
    return sorted(directory.glob("*.jar")) if connector.is_file() else None


def store_conf(store: str) -> dict[str, str]:
    """``spark.jars`` entries of the connector for `store`, fetched first (in a child process, since a
    session may already run here) when they are not cached. Raises `SparkRuntimeError` naming the
    coordinates when Maven Central does not serve them."""
    if store not in STORES:
        raise SparkRuntimeError(f"no connector is known for the {store}:// store; put it on spark.jars")
    jars = cached_store_jars(store)
    if jars is None:
        import subprocess

        done = subprocess.run(
            [sys.executable, "-m", "optimizer.delta_jars", "--store", store],
            capture_output=True,
            text=True,
            check=False,
        )
        jars = cached_store_jars(store)
        if jars is None:
            raise SparkRuntimeError(f"could not fetch the {store} connector: {done.stderr.strip()[-500:]}")
    return {"spark.jars": ",".join(str(p) for p in jars)}


def fetch_store(store: str) -> list[Path]:
    """Resolve the connector of `store` into its cache by starting (and stopping) a small local Spark."""
    found = cached_store_jars(store)
    if found is not None:
        return found
    packages, excludes = STORES[store]
    conf = {
        "spark.jars.packages": ",".join(p.format(hadoop=hadoop_version()) for p in packages),
        "spark.jars.excludes": ",".join(excludes),
        "spark.jars.ivy": str(store_home(store)),
    }
    _resolve(conf, f"the {store} connector")
    found = cached_store_jars(store)
    if found is None:
        raise SparkRuntimeError(f"Spark started but the {store} connector is not in {store_home(store) / 'jars'}")
    return found


def _resolve(conf: dict[str, str], what: str) -> None:
    from pyspark.sql import SparkSession

    builder = SparkSession.Builder().master("local[1]").appName("deltaopt-fetch-jars")
    builder = builder.config("spark.ui.enabled", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
        spark.stop()
    except Exception as err:  # Ivy's resolution failure surfaces as a py4j / RuntimeError at start-up
        raise SparkRuntimeError(f"could not resolve {what} from Maven Central: {err}") from err


def fetch() -> list[Path]:
    """Resolve the jars into the cache by starting (and stopping) a small local Spark; returns them.

    Raises `SparkRuntimeError` when Maven Central does not serve them (the message names the coordinates).
    """
    found = cached_jars()
    if found is not None:
        return found
    _resolve(session_conf(), f"{coordinates()} into {ivy_home()}")
    found = cached_jars()
    if found is None:
        raise SparkRuntimeError(f"Spark started but {coordinates()} is not in {ivy_home() / 'jars'}")
    return found


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m optimizer.delta_jars", description="cache Spark's JVM jars")
    parser.add_argument("--store", choices=sorted(STORES), help="fetch this object store's connector instead")
    args = parser.parse_args(argv)
    try:
        jars = fetch_store(args.store) if args.store else fetch()
    except SparkRuntimeError as err:
        print(f"deltaopt: {err}", file=sys.stderr)
        return 1
    what = f"the {args.store} connector's" if args.store else f"Delta Lake {delta_version()}"
    print(f"{what} jars cached in {jars[0].parent}:")
    for jar in jars:
        print(f"  {jar.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
