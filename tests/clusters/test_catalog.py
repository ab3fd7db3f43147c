"""A table named in a real Hive metastore (PySpark's Hive 2.3 client with an embedded Derby database kept
in the module's directory, no mock): ``table: sales.orders`` is resolved through the session's catalog,
and OPTIMIZE is committed by Delta on the catalog table. The setup SQL, the commands and the refusal run
in one driver process (`tests.clusters.driver`), as Derby lets one JVM at a time open the database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.clusters.driver import Driver
from tests.clusters.test_standalone import rows_of

pytestmark = pytest.mark.spark


def hive_conf(root: Path) -> dict[str, str]:
    """A metastore in `root` (embedded Derby: one JVM at a time opens it)."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
    }


@pytest.fixture(scope="module")
def metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Driver]]:
    """A metastore directory and the one driver process this module's SQL and commands run in (embedded
    Derby: one JVM at a time opens it; one JVM for the module instead of one per step)."""
    root = tmp_path_factory.mktemp("metastore")
    with Driver(root, root / "driver.log") as driver:
        yield root, driver


def in_metastore(metastore: tuple[Path, Driver], sql: list[str]) -> list[list]:
    """Run `sql` in the driver's session on the metastore; returns each statement's rows."""
    root, driver = metastore
    return driver.sql({"master": "local[1]", "delta": "required", "conf": hive_conf(root)}, sql)


def test_a_metastore_table_named_schema_dot_table(spark, metastore, tmp_path):
    from optimizer.table import open_table

    root, driver = metastore
    in_metastore(
        metastore,
        [
            "CREATE SCHEMA sales",
            "CREATE TABLE sales.orders USING delta AS SELECT id, id * 7919 % 1000 AS x, "
            "concat('c', id % 7) AS category FROM range(0, 6000, 1, 4)",
        ],
    )
    location = root / "warehouse" / "sales.db" / "orders"
    assert (location / "_delta_log").is_dir()  # a managed table: only the metastore knows where it is
    before = rows_of(spark, str(location))
    config = tmp_path / "deltaopt.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "spark": {"master": "local[1]", "delta": "required", "conf": hive_conf(root)},
                "tables": [{"name": "orders", "table": "sales.orders"}],
                "service": {"state_dir": str(tmp_path / "state")},
            }
        )
    )
    done = driver.cli("optimize", "--config", str(config), "--table", "orders", "--z", "x", "--json").json()
    assert done["committed_by"] == "delta-spark" and done["rows"] == 6000
    last = open_table(str(location)).history()[-1]
    assert last.operation == "OPTIMIZE" and "Delta-Lake" in (last.engine or "") and last.is_deltaopt_optimize
    assert rows_of(spark, str(location)) == before
    ((newest,),) = in_metastore(metastore, ["DESCRIBE HISTORY sales.orders LIMIT 1"])
    assert newest[0] == last.version and newest[4] == "OPTIMIZE"  # the catalog's table is the one that changed


def test_an_unknown_catalog_name_is_refused_by_name(metastore, tmp_path):
    root, driver = metastore
    config = tmp_path / "deltaopt.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "spark": {"master": "local[1]", "conf": hive_conf(root)},
                "tables": [{"name": "orders", "table": "sales.missing"}],
            }
        )
    )
    done = driver.cli("optimize", "--config", str(config), "--table", "orders")
    assert done.code != 0
    assert "catalog table sales.missing" in done.err and "Traceback" not in done.err
