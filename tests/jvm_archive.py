"""A class-data archive (JDK AppCDS) for the JVMs the tests start: Spark's and Delta's classes mapped from one
file instead of parsed and verified from the jars again in every JVM.

The default run starts dozens of JVMs besides its own session: a driver per CLI, service and crash test, the
standalone master, worker and executors, the Connect and Databricks-style servers. Each spent seconds loading
the same tens of thousands of classes. `python -m tests.jvm_archive` (run by ``make test`` before pytest)
starts one embedded driver with ``-XX:ArchiveClassesAtExit``, has it load what the tests' drivers load
(deltaopt's own rewrite through Delta's transaction, Delta's OPTIMIZE, DML and liquid clustering), and keeps
the archive in the environment under a key of the Java, PySpark and Delta jars it was made from.
`jvm_options` then gives every JVM the tests start ``-XX:SharedArchiveFile``.

What a JVM runs is unchanged: an archived class is the same class, and the JVM checks the archive itself (its
JDK, and that its class path starts with the one the archive was made on) and loads from the jars where it
does not match (another PySpark's, a server with other jars first), silently (``-Xlog:cds=off``). Without an
archive (plain ``pytest``, a JDK before 13) the options are empty and the run is as before, only slower.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

# silent where the archive does not apply: its mismatch warnings would be one more line on the children's stderr
SILENT = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# a JDK that does not know an option ignores it instead of refusing to start (JDK 8 and 11 have no dynamic archive)
TOLERANT = "-XX:+IgnoreUnrecognizedVMOptions"
SWITCH = "DELTAOPT_JVM_ARCHIVE"


@lru_cache(maxsize=1)
def _java_version() -> str:
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return ""
    return done.stderr


def _key() -> str:
    """What the archive depends on: the JDK, and every jar on the drivers' class path (PySpark's, Delta's)."""
    import pyspark

    from optimizer import delta_jars

    jars = sorted(Path(pyspark.__file__).with_name("jars").glob("*.jar"))
    jars += sorted(delta_jars.cached_jars() or [])
    digest = hashlib.sha256(_java_version().encode())
    for jar in jars:
        stat = jar.stat()
        digest.update(f"{jar}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def archive_path() -> Path:
    """Where this environment's archive lives (beside the Delta jars `make install` caches)."""
    return Path(sys.prefix, "share", "deltaopt", "jvm-archive", f"{_key()}.jsa")


def jvm_options() -> str:
    """The options that give a JVM the archive; empty when there is none for this environment, or when
    ``DELTAOPT_JVM_ARCHIVE=off`` (to measure a run without it)."""
    if os.environ.get(SWITCH) == "off":
        return ""
    archive = archive_path()
    return f"{TOLERANT} -XX:SharedArchiveFile={archive} {SILENT}" if archive.is_file() else ""


def build() -> Path | None:
    """Makes this environment's archive unless it exists: one training driver, its output in a log beside the
    archive, written to a temporary name and moved into place only when the driver ended well (archives made
    from other jars are removed). Returns its path, or None when this JDK cannot or training failed: the run
    then goes on without one, which only makes it slower, and says so in one line."""
    archive = archive_path()
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    options = f"{TOLERANT} -XX:ArchiveClassesAtExit={partial} {SILENT}"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {options}".strip()}
    log = archive.with_suffix(".log")
    with tempfile.TemporaryDirectory(prefix="deltaopt-jvm-archive-") as work, open(log, "w") as output:
        command = [sys.executable, "-m", "tests.jvm_archive", "--train", work]
        done = subprocess.run(command, env=env, stdout=output, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        print(f"JVM class-data archive not made (training exit {done.returncode}; see {log})", file=sys.stderr)
        return None
    for old in archive.parent.glob("*.jsa"):
        old.unlink()
    partial.replace(archive)
    return archive


def train(work: Path) -> None:
    """What the tests' drivers do, once: deltaopt's optimize through Delta's transaction, Delta's OPTIMIZE with
    ZORDER and on a liquid table, DML on a table with deletion vectors and row tracking, reads with filters."""
    from optimizer.cli.main import main as cli
    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session

    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=4))
    plain, liquid = str(work / "plain"), str(work / "liquid")
    rows = spark.range(2000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s", "current_timestamp() AS t")
    for _ in range(2):
        rows.write.format("delta").mode("append").save(plain)
    spark.sql(
        f"ALTER TABLE delta.`{plain}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'delta.enableRowTracking' = 'true')"
    )
    spark.sql(f"DELETE FROM delta.`{plain}` WHERE k = 1")
    spark.sql(f"UPDATE delta.`{plain}` SET s = 'x' WHERE k = 2")
    spark.sql(
        f"MERGE INTO delta.`{plain}` AS a USING (SELECT id, id % 7 AS k, 'm' AS s, current_timestamp() AS t "
        "FROM range(3990, 4100)) AS b ON a.id = b.id "
        "WHEN MATCHED THEN UPDATE SET s = 'y' WHEN NOT MATCHED THEN INSERT *"
    )
    if cli(["optimize", "--table", plain, "--z", "id", "--sop", "k = 4", "--all-files"]) != 0:
        raise SystemExit("the training optimize failed")
    spark.sql(f"OPTIMIZE delta.`{plain}` ZORDER BY (id)").collect()
    spark.sql(f"CREATE TABLE delta.`{liquid}` (id BIGINT, k BIGINT, s STRING) USING delta CLUSTER BY (k)")
    spark.sql(f"INSERT INTO delta.`{liquid}` SELECT id, k, s FROM delta.`{plain}`")
    spark.sql(f"OPTIMIZE delta.`{liquid}`").collect()
    spark.read.format("delta").load(liquid).where("k = 5 AND id > 10").count()
    spark.sql(f"DESCRIBE HISTORY delta.`{plain}`").collect()
    jvm = spark.sparkContext._gateway.proc  # the driver writes the archive as it exits, after this process would
    spark.stop()
    jvm.stdin.close()  # PySpark's gateway exits (normally, so the archive is written) when its stdin closes
    jvm.wait(timeout=600)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--train"]:
        train(Path(sys.argv[2]))
    else:
        made = build()
        print(f"JVM class-data archive: {made or 'none (the run is slower, not different)'}")
