"""Tables found rather than listed: under a storage prefix and in a catalog schema, re-listed while the
service runs, with configured entries winning and deltaopt's own query logs never watched."""

from __future__ import annotations

import logging
import shutil
import threading
import time

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from optimizer.config import parse_config
from optimizer.service.discovery import Discovery


def delta(path) -> None:  # type: ignore[no-untyped-def]
    write_deltalake(str(path), pa.table({"x": [1, 2, 3]}))


def test_a_prefix_gives_its_tables_and_configured_entries_win(tmp_path):
    lake = tmp_path / "lake"
    for name in ("orders", "sub/events", "orders_querylog"):
        delta(lake / name)
    config = parse_config(
        {
            "defaults": {"min_new_bytes": "1MiB"},
            "tables": [{"name": "mine", "path": str(lake / "orders"), "interval": 7}],
            "discover": [{"prefix": str(lake), "interval": 60}],
        }
    )
    discovery = Discovery(config, spark=lambda: None)  # type: ignore[arg-type,return-value]
    discovery.relist()
    tables = {t.name: t for t in discovery.tables()}
    assert set(tables) == {"mine", "events"}  # orders is configured as "mine"; the query log is not a table
    assert tables["mine"].interval == 7 and tables["events"].interval == 60
    assert tables["events"].thresholds.min_new_bytes == 1 << 20  # the defaults


def test_a_catalog_schema_gives_its_delta_tables(spark, tmp_path):
    spark.sql("CREATE SCHEMA IF NOT EXISTS found")
    spark.sql(f"CREATE TABLE found.orders (x INT) USING delta LOCATION '{tmp_path / 'orders'}'")
    spark.sql(f"CREATE TABLE found.plain (x INT) USING parquet LOCATION '{tmp_path / 'plain'}'")
    try:
        config = parse_config({"discover": [{"schema": "found"}]})
        discovery = Discovery(config, spark=lambda: spark)
        discovery.relist()
        (table,) = discovery.tables()  # the Parquet table is not watched
        assert table.name == "found.orders" and table.table == "found.orders"
        assert table.path.rstrip("/").endswith("orders")
    finally:
        spark.sql("DROP SCHEMA found CASCADE")


def test_serve_ticks_a_new_table_within_one_relisting_and_drops_a_vanished_one(tmp_path, monkeypatch, caplog):
    from optimizer.service import service as service_module

    lake = tmp_path / "lake"
    delta(lake / "first")
    config = parse_config(
        {
            "discover": [{"prefix": str(lake), "relist": 1, "interval": 1}],
            "service": {"state_dir": str(tmp_path / "state"), "jitter": 0, "workers": 2},
        }
    )
    ctx = service_module.context(config, spark=lambda: None)  # type: ignore[arg-type,return-value]
    seen: set[str] = set()
    monkeypatch.setattr(service_module, "tick", lambda table, _ctx, now=None: seen.add(table.name))
    server = threading.Thread(target=service_module.serve, args=(ctx, False))
    caplog.set_level(logging.INFO, logger="optimizer.service.service")
    server.start()
    try:
        assert _until(lambda: "first" in seen)
        delta(lake / "second")  # created while the service runs
        assert _until(lambda: "second" in seen), seen
        shutil.rmtree(lake / "first")
        assert _until(lambda: "no longer found" in caplog.text)
        time.sleep(2.5)  # two more listings: reported once
    finally:
        ctx.stopping.set()
        server.join(timeout=30)
    assert caplog.text.count("first is no longer found") == 1


def _until(condition, seconds: float = 15) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("source", [{}, {"prefix": "/x", "schema": "s"}, {"schema": "a.b.c"}])
def test_a_discovery_source_is_one_prefix_or_one_schema(source):
    from optimizer.errors import ConfigError

    with pytest.raises(ConfigError, match="discover"):
        parse_config({"discover": [source]})
