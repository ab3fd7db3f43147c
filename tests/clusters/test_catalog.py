"""A table named in a real Hive metastore (PySpark's Hive 2.3 client with an embedded Derby database kept
in the test's directory, no mock): ``table: sales.orders`` is resolved through the session's catalog,
and OPTIMIZE is committed by Delta on the catalog table."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.clusters.test_standalone import deltaopt, rows_of

pytestmark = pytest.mark.spark


def hive_conf(root: Path) -> dict[str, str]:
    """A metastore in `root` (embedded Derby: one JVM at a time opens it)."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
    }


def in_metastore(root: Path, sql: list[str]) -> list[list]:
    """Run `sql` in a session of its own on the metastore (a child process: Derby takes one JVM at a time);
    returns each statement's rows."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from optimizer.config import SparkSettings
        from optimizer.runtime import build_session
        spark = build_session(SparkSettings(master="local[1]", delta="required", conf={hive_conf(root)!r}))
        out = [[list(r) for r in spark.sql(s).collect()] for s in {sql!r}]
        print(json.dumps(out, default=str))
        """
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=root, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_metastore_table_named_schema_dot_table(spark, tmp_path):
    from optimizer.table import open_table

    in_metastore(
        tmp_path,
        [
            "CREATE SCHEMA sales",
            "CREATE TABLE sales.orders USING delta AS SELECT id, id * 7919 % 1000 AS x, "
            "concat('c', id % 7) AS category FROM range(0, 6000, 1, 4)",
        ],
    )
    location = tmp_path / "warehouse" / "sales.db" / "orders"
    assert (location / "_delta_log").is_dir()  # a managed table: only the metastore knows where it is
    before = rows_of(spark, str(location))
    config = tmp_path / "deltaopt.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "spark": {"master": "local[1]", "delta": "required", "conf": hive_conf(tmp_path)},
                "tables": [{"name": "orders", "table": "sales.orders"}],
                "service": {"state_dir": str(tmp_path / "state")},
            }
        )
    )
    done = deltaopt("optimize", "--config", str(config), "--table", "orders", "--z", "x", "--json", cwd=tmp_path)
    assert done["committed_by"] == "delta-spark" and done["rows"] == 6000
    last = open_table(str(location)).history()[-1]
    assert last.operation == "OPTIMIZE" and "Delta-Lake" in (last.engine or "") and last.is_deltaopt_optimize
    assert rows_of(spark, str(location)) == before
    ((newest,),) = in_metastore(tmp_path, ["DESCRIBE HISTORY sales.orders LIMIT 1"])
    assert newest[0] == last.version and newest[4] == "OPTIMIZE"  # the catalog's table is the one that changed


def test_an_unknown_catalog_name_is_refused_by_name(tmp_path):
    config = tmp_path / "deltaopt.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "spark": {"master": "local[1]", "conf": hive_conf(tmp_path)},
                "tables": [{"name": "orders", "table": "sales.missing"}],
            }
        )
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, "-m", "optimizer.cli", "optimize", "--config", str(config), "--table", "orders"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode != 0
    assert "catalog table sales.missing" in done.stderr and "Traceback" not in done.stderr
