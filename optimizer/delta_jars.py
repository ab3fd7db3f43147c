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
from collections.abc import Callable, Iterable
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


def resolve(conf: dict[str, str], what: str) -> None:
    """Start (and stop) a small local Spark with `conf`, so its Ivy resolves `what` into the cache `conf`
    names. Raises `SparkRuntimeError` when Maven Central does not serve it."""
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
        resolve(session_conf(), f"{coordinates()} into {delta_home()}")
        found = cached_jars()
    if found is None:
        raise SparkRuntimeError(f"Spark started but {coordinates()} is not in {delta_home() / 'jars'}")
    return found


def report(fetched: Callable[[], list[Path]], what: Callable[[], str]) -> int:
    """Run a fetch for a command line: what was fetched (named once it is, as the fetch checks the versions)
    and the cached jars on stdout, or one line on stderr and 1."""
    try:
        jars = fetched()
    except SparkRuntimeError as err:
        print(f"deltaopt: {err}", file=sys.stderr)
        return 1
    print(f"{what()} jars cached in {jars[0].parent}:")
    for jar in jars:
        print(f"  {jar.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m optimizer.delta_jars", description="cache Delta's JVM jars")
    parser.parse_args(argv)
    return report(fetch, lambda: f"Delta Lake {delta_version()}")


if __name__ == "__main__":
    raise SystemExit(main())
