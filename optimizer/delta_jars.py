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

Only what Spark lacks goes on ``spark.jars``. From Delta 4.1 the pom also pulls modules PySpark ships at
other versions (Delta 4.3/4.4: a second Hadoop client, jackson, log4j, slf4j, parquet, zstd-jni, snappy,
RoaringBitmap); Spark's own copy is loaded first anyway, so the other one only mixes two versions of a
module's classes. Which ones is read from PySpark's ``jars/`` directory, never listed by hand
(`provided_by_spark`): a jar of the same artifact that is the same Maven module (its own pom, or its
classes under the organisation's package). Resolution already excludes the modules whose own pom a jar
of PySpark's carries (`spark_modules`); the cached-jar list leaves out the rest (older caches, pom-less jars).

``make install`` runs ``python -m optimizer.delta_jars`` once; a session started before that resolves
on its first start instead, unlocked. Fetches hold the cache's lock (`optimizer.cache_lock`) and sessions
read under it, so two fetches resolve once and no session takes half a cache. docs/DELTA-SPARK.md has the
recipe and the facts it rests on.
"""

from __future__ import annotations

import os
import re
import sys
import zipfile
from collections.abc import Iterable
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from optimizer.cache_lock import locked
from optimizer.errors import SparkRuntimeError

# PySpark's minor release -> the Delta release fetched for it, and the Delta lines that pair with it
DELTA_FOR_SPARK = {"3.5": "3.3.3", "4.0": "4.0.1", "4.1": "4.3.1", "4.2": "4.4.0"}
DELTA_LINES = {"3.5": ("3.2", "3.3"), "4.0": ("4.0",), "4.1": ("4.2", "4.3"), "4.2": ("4.4",)}
SUPPORTED = (
    "Spark 3.5 + Delta 3.2/3.3 (Scala 2.12), Spark 4.0 + Delta 4.0, Spark 4.1 + Delta 4.2/4.3, Spark 4.2 + Delta 4.4"
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


def spark_jars_dir() -> Path:
    """PySpark's own jars directory (its Scala, Hadoop and the rest of Spark's classpath)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def scala_binary() -> str:
    """The Scala binary version the installed PySpark's jars are built for (``2.12`` or ``2.13``)."""
    found = sorted(spark_jars_dir().glob("scala-library-*.jar"))
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


def delta_home() -> Path:
    """The Ivy directory of this environment's Delta engine: one per artifact and release, so that the
    third-party jars one Delta pulls never go on the classpath of another sharing `ivy_home` (a Spark 4.1
    environment switched from Delta 4.2 to 4.3, or $DELTAOPT_DELTA_JARS shared by several environments)."""
    return ivy_home() / f"{engine_artifact()}-{delta_version()}"


def cached_jars() -> list[Path] | None:
    """The resolved jars for this Delta version, or None when they have not been fetched yet."""
    version = delta_version()
    directory = delta_home() / "jars"
    engine = directory / f"io.delta_{engine_artifact()}-{version}.jar"
    storage = directory / f"io.delta_delta-storage-{version}.jar"
    if not (engine.is_file() and storage.is_file()):
        return None
    # every jar Ivy retrieved for these coordinates (other Delta versions' and other Sparks' engines left out)
    return without_spark_modules(
        p
        for p in directory.glob("*.jar")
        if not p.name.startswith("io.delta_")
        or (version in p.name and (p == engine or not p.name.startswith("io.delta_delta-spark_")))
    )


VERSION_START = re.compile(r"-(?=\d)")
DOTTED = re.compile(r"\d+\.\d")


def artifact_version(stem: str) -> tuple[str, str] | None:
    """``(artifact, version)`` of a Maven file name without ``.jar``: the version starts at the first
    ``-<digit>`` after which no ``-`` part is itself a dotted version, so ``log4j-1.2-api-2.24.3`` is
    ``log4j-1.2-api`` and ``zstd-jni-1.5.6-9`` is ``zstd-jni``. None without a version."""
    for start in VERSION_START.finditer(stem):
        version = stem[start.end() :]
        if not any(DOTTED.match(part) for part in version.split("-")[1:]):
            return stem[: start.start()], version
    return None


@lru_cache(maxsize=8)
def _spark_artifacts(directory: Path) -> dict[str, tuple[Path, ...]]:
    """PySpark's jars by artifact name (file names only: cheap at every session start)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(directory.glob("*.jar")):
        if split := artifact_version(path.stem):
            found.setdefault(split[0], []).append(path)
    return {artifact: tuple(paths) for artifact, paths in found.items()}


def _own_orgs(names: list[str], artifact: str) -> set[str]:
    """Organisations of the poms named `artifact` among a jar's entries `names` (a shaded jar also carries
    the poms of the modules it relocated, under their own artifact names)."""
    suffix = f"/{artifact}/pom.properties"
    return {n.split("/")[2] for n in names if n.startswith("META-INF/maven/") and n.endswith(suffix)}


def _package_orgs(names: list[str]) -> set[str]:
    """The dotted prefixes (2 to 4 parts) of the packages a jar's classes live in: the organisations a jar
    without its own pom may be published under (``org.roaringbitmap``, ``org.apache.hadoop``)."""
    found: set[str] = set()
    for name in names:
        if name.endswith(".class") and not name.startswith("META-INF/"):
            parts = name.split("/")[:-1]
            found |= {".".join(parts[:size]) for size in range(2, min(len(parts), 4) + 1)}
    return found


@lru_cache(maxsize=512)
def _is_module(path: Path, org: str, artifact: str) -> bool:
    """Whether Spark's jar `path` is Maven module ``org:artifact``: its pom says so, or (a shaded or pom-less
    jar, e.g. hadoop-client-runtime, RoaringBitmap) its classes live under the organisation's package.
    A same-named jar of another organisation (JetBrains' ``annotations``, not the AWS SDK's) is not."""
    package = org.replace(".", "/") + "/"
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    return org in _own_orgs(names, artifact) or any(n.startswith(package) and n.endswith(".class") for n in names)


def provided_by_spark(path: Path) -> bool:
    """Whether Ivy's retrieved jar `path` (``<org>_<artifact>-<rev>.jar``) is a module PySpark's own jars
    directory already has, at whatever version: Spark's copy wins, parent-first, so it stays off spark.jars."""
    org, _, rest = path.stem.partition("_")
    split = artifact_version(rest)
    if not rest or split is None:
        return False
    shipped = _spark_artifacts(spark_jars_dir()).get(split[0], ())
    return any(_is_module(jar, org, split[0]) for jar in shipped)


def without_spark_modules(paths: Iterable[Path]) -> list[Path]:
    """`paths`, sorted, less the modules PySpark ships (`provided_by_spark`)."""
    return sorted(p for p in paths if not provided_by_spark(p))


def spark_modules() -> list[str]:
    """``group:artifact`` of every module PySpark's jars directory has, as `provided_by_spark` reads it: from
    a jar's own pom, else (pom-less or shaded jars) from its classes' packages. What ``spark.jars.excludes``
    keeps Ivy from downloading again (and from following further). Read once, at resolution."""
    found: set[str] = set()
    for artifact, paths in _spark_artifacts(spark_jars_dir()).items():
        for path in paths:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
            found |= {f"{org}:{artifact}" for org in _own_orgs(names, artifact) or _package_orgs(names)}
    return sorted(found)


def session_conf() -> dict[str, str]:
    """Spark settings that load Delta: cached jars on ``spark.jars``, else Ivy resolution into the cache."""
    conf = {"spark.sql.extensions": EXTENSIONS, "spark.sql.catalog.spark_catalog": CATALOG}
    jars = cached_jars()
    if jars is not None:
        conf["spark.jars"] = ",".join(str(p) for p in jars)
    else:
        conf["spark.jars.packages"] = coordinates()
        conf["spark.jars.ivy"] = str(delta_home())
        if excludes := spark_modules():
            conf["spark.jars.excludes"] = ",".join(excludes)
    return conf


# Hadoop's cloud connectors, fetched the same way when a table lives in such a store. hadoop-aws depends on
# the whole AWS SDK bundle (280 MB for SDK v1, over 500 MB for v2): it is excluded and only the SDK modules
# S3A loads are taken, at the SDK release of PySpark's Hadoop line (hadoop-project's pom; for 3.4 the one
# Hadoop 3.4.2 moved to). Hadoop 3.3 (PySpark 3.5) is built on SDK v1 (com.amazonaws): S3A's client and
# transfer manager (s3, bringing core and kms), assumed roles (sts), and dynamodb, whose exception classes
# every S3ARetryPolicy and S3AUtils' exception translation load. From 3.4 on: SDK v2 (software.amazon.awssdk).
SDK_V1 = ("com.amazonaws", ("aws-java-sdk-s3", "aws-java-sdk-sts", "aws-java-sdk-dynamodb"), "aws-java-sdk-bundle")
SDK_V2 = ("software.amazon.awssdk", ("s3", "s3-transfer-manager", "sts"), "bundle")
S3A_SDK = {"3.3": (SDK_V1, "1.12.262"), "3.4": (SDK_V2, "2.29.52"), "3.5": (SDK_V2, "2.35.4")}
STORES = ("s3a",)
STORE_OF_SCHEME = {"s3": "s3a", "s3a": "s3a"}


def hadoop_version() -> str:
    """The Hadoop client PySpark ships (its connectors must be the same version)."""
    found = sorted(spark_jars_dir().glob("hadoop-client-api-*.jar"))
    if not found:
        raise SparkRuntimeError("the installed PySpark has no hadoop-client-api jar: cannot pick a connector")
    return found[-1].name[len("hadoop-client-api-") : -len(".jar")]


def store_modules(store: str) -> tuple[list[str], list[str]]:
    """Maven coordinates of `store`'s connector for PySpark's Hadoop, and the modules resolution excludes
    (the SDK bundle, and what PySpark ships). Raises `SparkRuntimeError` for a Hadoop line without one."""
    hadoop = hadoop_version()
    if minor(hadoop) not in S3A_SDK:
        known = ", ".join(S3A_SDK)
        raise SparkRuntimeError(
            f"no {store} connector is known for Hadoop {hadoop} (PySpark's; known: Hadoop {known}): put "
            f"hadoop-aws {hadoop} and the AWS SDK it was built on on spark.jars"
        )
    (group, modules, bundle), sdk = S3A_SDK[minor(hadoop)]
    packages = [f"org.apache.hadoop:hadoop-aws:{hadoop}", *(f"{group}:{module}:{sdk}" for module in modules)]
    return packages, [f"{group}:{bundle}", *spark_modules()]


def store_home(store: str) -> Path:
    """The Ivy directory of `store`'s connector for PySpark's Hadoop line (one per Hadoop release)."""
    return ivy_home() / f"store-{store}-{hadoop_version()}"


def cached_store_jars(store: str) -> list[Path] | None:
    """The cached connector jars for `store` ("s3a"), or None when they have not been fetched or a fetch did
    not complete: a ``resolving`` file, there from a fetch's start until its Spark has started, tells a cache
    whose fetch was stopped halfway (a cache fetched before there was one has none: it was whole). A fetch
    stopped after Ivy was done leaves it too, and the next session fetches again: slower, never wrong."""
    directory = store_home(store) / "jars"
    connector = directory / f"org.apache.hadoop_hadoop-aws-{hadoop_version()}.jar"
    whole = connector.is_file() and not (store_home(store) / "resolving").exists()
    return without_spark_modules(directory.glob("*.jar")) if whole else None


def store_conf(store: str) -> dict[str, str]:
    """``spark.jars`` entries of the connector for `store`, fetched first (in a child process, since a
    session may already run here) when they are not cached. Raises `SparkRuntimeError` naming the
    coordinates when Maven Central does not serve them."""
    if store not in STORES:
        raise SparkRuntimeError(f"no connector is known for the {store}:// store; put it on spark.jars")
    jars = _read_store_jars(store)
    if jars is None:
        import subprocess

        done = subprocess.run(
            [sys.executable, "-m", "optimizer.delta_jars", "--store", store],
            capture_output=True,
            text=True,
            check=False,
        )
        jars = _read_store_jars(store)
        if jars is None:
            raise SparkRuntimeError(f"could not fetch the {store} connector: {done.stderr.strip()[-500:]}")
    return {"spark.jars": ",".join(str(p) for p in jars)}


def _read_store_jars(store: str) -> list[Path] | None:
    """`cached_store_jars` under the shared lock (not inside it: `fetch_store` holds the exclusive one there)."""
    with locked(store_home(store), exclusive=False):
        return cached_store_jars(store)


def fetch_store(store: str) -> list[Path]:
    """Resolve the connector of `store` into its cache by starting (and stopping) a small local Spark; a
    process already resolving it is waited for, and its jars taken."""
    with locked(store_home(store), exclusive=True):
        found = cached_store_jars(store)
        if found is not None:
            return found
        packages, excludes = store_modules(store)
        conf = {
            "spark.jars.packages": ",".join(packages),
            "spark.jars.excludes": ",".join(excludes),
            "spark.jars.ivy": str(store_home(store)),
        }
        resolving = store_home(store) / "resolving"
        try:
            resolving.parent.mkdir(parents=True, exist_ok=True)
            resolving.write_text(conf["spark.jars.packages"] + "\n")
        except OSError as err:
            raise SparkRuntimeError(f"cannot fetch the {store} connector into {store_home(store)}: {err}") from err
        _resolve(conf, f"the {store} connector")
        resolving.unlink(missing_ok=True)  # missing_ok: where there are no locks another fetch may have ended first
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
    """Resolve the jars into the cache by starting (and stopping) a small local Spark; returns them. A
    process already resolving them is waited for, and its jars taken.

    Raises `SparkRuntimeError` when Maven Central does not serve them (the message names the coordinates).
    """
    with locked(delta_home(), exclusive=True):
        found = cached_jars()
        if found is not None:
            return found
        _resolve(session_conf(), f"{coordinates()} into {delta_home()}")
        found = cached_jars()
    if found is None:
        raise SparkRuntimeError(f"Spark started but {coordinates()} is not in {delta_home() / 'jars'}")
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
