"""Hadoop's object-store connectors (S3A) for the embedded Spark, fetched like Delta's jars when a table lives
in such a store: resolved once from Maven Central by Spark's Ivy into a cache beside Delta's
(`optimizer.delta_jars.ivy_home`), one per Hadoop release, then put on ``spark.jars`` directly.

hadoop-aws depends on the whole AWS SDK bundle (280 MB for SDK v1, over 500 MB for v2): it is excluded and
only the SDK modules S3A loads are taken, at the SDK release of PySpark's Hadoop line (hadoop-project's pom;
for 3.4 the one Hadoop 3.4.2 moved to). Hadoop 3.3 (PySpark 3.5) is built on SDK v1 (com.amazonaws): S3A's
client and transfer manager (s3, bringing core and kms), assumed roles (sts), and dynamodb, whose exception
classes every S3ARetryPolicy and S3AUtils' exception translation load. From 3.4 on: SDK v2
(software.amazon.awssdk).

A fetch holds the cache's lock (`optimizer.cache_lock`) and marks it ``resolving`` until Ivy is done, so a
session never takes a half-fetched cache. ``python -m optimizer.store_jars s3a`` fetches ahead;
docs/DELTA-SPARK.md has the facts.
"""

from __future__ import annotations

import sys
from pathlib import Path

from optimizer import delta_jars
from optimizer.cache_lock import locked
from optimizer.errors import SparkRuntimeError

SDK_V1 = ("com.amazonaws", ("aws-java-sdk-s3", "aws-java-sdk-sts", "aws-java-sdk-dynamodb"), "aws-java-sdk-bundle")
SDK_V2 = ("software.amazon.awssdk", ("s3", "s3-transfer-manager", "sts"), "bundle")
S3A_SDK = {"3.3": (SDK_V1, "1.12.262"), "3.4": (SDK_V2, "2.29.52"), "3.5": (SDK_V2, "2.35.4")}
STORES = ("s3a",)
STORE_OF_SCHEME = {"s3": "s3a", "s3a": "s3a"}


def hadoop_version() -> str:
    """The Hadoop client PySpark ships (its connectors must be the same version)."""
    found = sorted(delta_jars.spark_jars_dir().glob("hadoop-client-api-*.jar"))
    if not found:
        raise SparkRuntimeError("the installed PySpark has no hadoop-client-api jar: cannot pick a connector")
    return found[-1].name[len("hadoop-client-api-") : -len(".jar")]


def store_modules(store: str) -> tuple[list[str], list[str]]:
    """Maven coordinates of `store`'s connector for PySpark's Hadoop, and the modules resolution excludes
    (the SDK bundle, and what PySpark ships). Raises `SparkRuntimeError` for a Hadoop line without one."""
    hadoop = hadoop_version()
    if delta_jars.minor(hadoop) not in S3A_SDK:
        known = ", ".join(S3A_SDK)
        raise SparkRuntimeError(
            f"no {store} connector is known for Hadoop {hadoop} (PySpark's; known: Hadoop {known}): put "
            f"hadoop-aws {hadoop} and the AWS SDK it was built on on spark.jars"
        )
    (group, modules, bundle), sdk = S3A_SDK[delta_jars.minor(hadoop)]
    packages = [f"org.apache.hadoop:hadoop-aws:{hadoop}", *(f"{group}:{module}:{sdk}" for module in modules)]
    return packages, [f"{group}:{bundle}", *delta_jars.spark_modules()]


def store_home(store: str) -> Path:
    """The Ivy directory of `store`'s connector for PySpark's Hadoop line (one per Hadoop release)."""
    return delta_jars.ivy_home() / f"store-{store}-{hadoop_version()}"


def cached_store_jars(store: str) -> list[Path] | None:
    """The cached connector jars for `store` ("s3a"), or None when they have not been fetched or a fetch did
    not complete: a ``resolving`` file, there from a fetch's start until its Spark has started, tells a cache
    whose fetch was stopped halfway (a cache fetched before there was one has none: it was whole). A fetch
    stopped after Ivy was done leaves it too, and the next session fetches again: slower, never wrong."""
    directory = store_home(store) / "jars"
    connector = directory / f"org.apache.hadoop_hadoop-aws-{hadoop_version()}.jar"
    whole = connector.is_file() and not (store_home(store) / "resolving").exists()
    return delta_jars.without_spark_modules(directory.glob("*.jar")) if whole else None


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
            fetch_command(store),
            capture_output=True,
            text=True,
            check=False,
        )
        jars = _read_store_jars(store)
        if jars is None:
            raise SparkRuntimeError(f"could not fetch the {store} connector: {done.stderr.strip()[-500:]}")
    return {"spark.jars": ",".join(str(p) for p in jars)}


def fetch_command(store: str, python: str = sys.executable) -> list[str]:
    """The command that fetches `store`'s connector into this environment's cache (`main`), run by `python`."""
    return [python, "-m", "optimizer.store_jars", store]


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
        delta_jars.resolve(conf, f"the {store} connector")
        resolving.unlink(missing_ok=True)  # missing_ok: where there are no locks another fetch may have ended first
        found = cached_store_jars(store)
    if found is None:
        raise SparkRuntimeError(f"Spark started but the {store} connector is not in {store_home(store) / 'jars'}")
    return found


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m optimizer.store_jars", description="cache a store's connector")
    parser.add_argument("store", choices=sorted(STORES), help="the object store whose connector to fetch")
    args = parser.parse_args(argv)
    return delta_jars.report(lambda: fetch_store(args.store), lambda: f"the {args.store} connector's")


if __name__ == "__main__":
    raise SystemExit(main())
