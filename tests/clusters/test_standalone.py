"""A real ``spark://`` cluster (a standalone master and worker from the installed PySpark): deltaopt's
driver runs the data work on the cluster's executor and commits through Delta's transaction."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.clusters.driver import Driver
from tests.clusters.servers import process_env
from tests.service.test_service import CHEAP, log_queries

pytestmark = pytest.mark.spark


def delta_table(spark, path: str, start: int, rows: int, mode: str = "overwrite") -> None:  # type: ignore[no-untyped-def]
    """Data written by Spark with Delta, as the users' jobs write it."""
    from pyspark.sql import functions as F

    frame = spark.range(start, start + rows).withColumn("x", (F.col("id") * 7919) % 1000)
    frame.withColumn("category", F.concat(F.lit("c"), (F.col("id") % 7).cast("string"))).repartition(4).write.format(
        "delta"
    ).mode(mode).save(path)


def rows_of(spark, path: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Count and an order-insensitive hash of the table's rows, read by Spark's Delta scan."""
    from pyspark.sql import functions as F

    row = spark.read.format("delta").load(path).agg(F.count("*"), F.sum(F.xxhash64("*"))).collect()[0]
    return int(row[0]), int(row[1])


def deltaopt(*args: str, cwd: Path) -> dict:
    """Run the CLI as an operator would, in its own process (its own driver)."""
    env = process_env(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout) if "--json" in args else {"out": done.stdout}


def cluster_config(tmp_path: Path, master: str, table: dict) -> Path:
    thresholds = {"min_new_bytes": 1, "target_file_size": 100_000, "sample_rows": 2000, "min_comparison_points": 3}
    data = {
        "spark": {"master": master, "shuffle_partitions": 4, "delta": "required"},
        "defaults": {**thresholds, "cost_per_mb_read": 10.0},
        "tables": [table],
        "service": {"state_dir": str(tmp_path / "state"), "jitter": 0},
    }
    (tmp_path / "state").mkdir(exist_ok=True)
    CHEAP.save(tmp_path / "state" / "costmodel.json")
    path = tmp_path / "deltaopt.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_optimize_and_serve_on_a_standalone_cluster(spark, standalone, tmp_path):
    from optimizer.table import open_table

    master, work = standalone
    earlier = set(work.glob("app-*"))  # the cluster is shared by the run's cluster tests
    path = str(tmp_path / "events")
    delta_table(spark, path, 0, 6000)
    config = cluster_config(tmp_path, master, {"name": "events", "path": path})
    before = rows_of(spark, path)
    # the operator's two commands in one driver process (one JVM, one application on the cluster)
    with Driver(tmp_path, tmp_path / "driver.log") as driver:
        optimized = driver.cli("optimize", "--config", str(config), "--table", "events", "--z", "x", "--json")
        done = optimized.json()
        assert done["committed_by"] == "delta-spark" and done["rows"] == 6000
        last = open_table(path).history()[-1]
        assert last.operation == "OPTIMIZE" and "Delta-Lake" in (last.engine or "") and last.is_deltaopt_optimize
        assert rows_of(spark, path) == before

        delta_table(spark, path, 10**6, 4000, mode="append")  # new data arrives, and queries on it
        log_queries(path + "_querylog", now=datetime.now(UTC))
        before = rows_of(spark, path)
        served = driver.cli("serve", "--once", "--config", str(config))
    assert served.code == 0, served.err[-3000:]
    assert optimized.master == served.master == master  # both commands' sessions ran on the cluster
    record = json.loads((tmp_path / "state" / "decisions.jsonl").read_text().splitlines()[-1])
    assert record["action"] == "optimize" and record["job"]["version"] is not None, record["reason"]
    assert record["job"]["details"]["committed_by"] == "delta-spark"
    assert len(set(work.glob("app-*")) - earlier) == 1  # the driver's executors ran on the cluster's worker
    last = open_table(path).history()[-1]
    assert last.version == record["job"]["version"] and last.operation == "OPTIMIZE"
    assert rows_of(spark, path) == before
