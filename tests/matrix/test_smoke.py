"""The smoke suite of every supported Spark/Delta pair (`make test-matrix`, issue 46).

Run in an environment per pair (tests/matrix/__main__.py), each test makes its table with that pair's
Delta, then runs deltaopt as a user does (``deltaopt optimize``, ``deltaopt serve --once``) and checks
what a reader sees: rows (count and order-insensitive hash, read in UTC and in Los Angeles), row ids and
row commit versions where row tracking is on, and history written by that Delta (an OPTIMIZE whose files
are all ``dataChange=false``). In the default environment these run under ``-m matrix``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from optimizer.cli.main import main
from optimizer.table.fingerprint import fingerprint
from tests.session_conf import session_conf

pytestmark = [pytest.mark.matrix, pytest.mark.spark]

ZONES = ("UTC", "America/Los_Angeles")
PAIR = os.environ.get("DELTAOPT_MATRIX_PAIR", "4.0.5/4.0.1")  # PySpark/Delta the runner built this env for


def delta_release(spark) -> str:
    from optimizer.runtime import runtime_info

    return str(runtime_info(spark).delta_version)


def test_the_session_runs_the_pair_the_environment_was_built_for(spark):
    from optimizer.table.rewrite_path import commit_engine

    pyspark, delta = PAIR.split("/")
    assert spark.version == pyspark
    assert delta_release(spark) == delta
    assert commit_engine(spark) == "delta-spark"


def seen(spark, path: str, tracked: bool = False) -> dict[str, object]:
    """What readers see, in each zone: count and hash of the rows (with their row ids when `tracked`)."""
    found: dict[str, object] = {}
    for zone in ZONES:
        with session_conf(spark, "spark.sql.session.timeZone", zone):
            frame = spark.read.format("delta").load(path)
            columns = [frame[c].cast("string").alias(c) for c in frame.columns]
            if tracked:
                columns += [frame["_metadata.row_id"].alias("rid"), frame["_metadata.row_commit_version"].alias("rcv")]
            found[zone] = fingerprint(frame.select(*columns))
    return found


def last_commit(spark, path: str) -> tuple[dict, list[dict]]:
    """The newest history entry by that Delta, and its file actions (read from the log, as any reader can)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version", ascending=False).first().asDict()
    log = Path(path) / "_delta_log" / f"{history['version']:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    return history, [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]


def commit_info(path: str, version: int) -> dict:
    log = Path(path) / "_delta_log" / f"{version:020d}.json"
    return next(json.loads(line)["commitInfo"] for line in log.read_text().splitlines() if "commitInfo" in line)


def assert_optimize_committed(spark, path: str, before: int, by_deltaopt: bool = True) -> dict:
    """The newest commit is an OPTIMIZE after `before`, every file action ``dataChange=false``, written by
    this session's Delta (its ``engineInfo``) and, `by_deltaopt`, through deltaopt's own transaction (its
    commit tag), not Delta's OPTIMIZE command or delta-rs."""
    history, files = last_commit(spark, path)
    assert history["version"] > before and history["operation"] == "OPTIMIZE", history
    assert files and all(f["dataChange"] is False for f in files)
    info = commit_info(path, history["version"])
    assert f"Delta-Lake/{PAIR.split('/')[1]}" in info["engineInfo"], info["engineInfo"]
    assert ("deltaopt" in info.get("tags", {})) == by_deltaopt, info.get("tags")
    return history


def optimize(*args: str) -> None:
    assert main(["optimize", *args, "--target-file-size", "64KiB"]) == 0


def version(spark, path: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()["version"])


def test_plain_table(spark, tmp_path):
    path = str(tmp_path / "plain")
    frame = spark.range(6000).selectExpr("id", "cast((id * 7919) % 1000 as int) x", "concat('c', id % 7) c")
    frame.repartition(6).write.format("delta").save(path)
    rows, before = seen(spark, path), version(spark, path)

    optimize("--table", path, "--z", "x", "--sop", "c = 'c1'")

    assert seen(spark, path) == rows
    assert_optimize_committed(spark, path, before)


@pytest.fixture
def tracked_table(spark, tmp_path) -> str:
    """Deletion vectors, column mapping by name and row tracking, written in four appends, then a DELETE
    that leaves deletion vectors."""
    path = str(tmp_path / "tracked")
    features = {
        "delta.enableDeletionVectors": "true",
        "delta.columnMapping.mode": "name",
        "delta.enableRowTracking": "true",
    }
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in features.items())
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, x INT, `c name` STRING) USING delta TBLPROPERTIES ({properties})"
    )
    for start in range(0, 8000, 2000):
        rows = spark.range(start, start + 2000).selectExpr(
            "id", "cast((id * 7919) % 1000 as int)", "concat('c', id % 7)"
        )
        rows.toDF("id", "x", "c name").repartition(2).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 3")
    return path


def test_deletion_vectors_column_mapping_and_row_tracking(spark, tracked_table, tmp_path):
    """deltaopt's OPTIMIZE leaves what Delta's own OPTIMIZE ZORDER BY leaves on a copy of the table: the
    rows, row ids and row commit versions, an OPTIMIZE in history with the same row-tracking tag."""
    rows, before = seen(spark, tracked_table, tracked=True), version(spark, tracked_table)
    assert spark.read.format("delta").load(tracked_table).count() == 7200
    copy = str(tmp_path / "copy")
    shutil.copytree(tracked_table, copy)
    spark.sql(f"OPTIMIZE delta.`{copy}` ZORDER BY (x)")

    optimize("--table", tracked_table, "--z", "x", "--sop", "`c name` = 'c1'")

    assert seen(spark, tracked_table, tracked=True) == rows == seen(spark, copy, tracked=True)
    ours = assert_optimize_committed(spark, tracked_table, before)
    deltas = assert_optimize_committed(spark, copy, before, by_deltaopt=False)
    assert ours["operationMetrics"]["numRemovedFiles"] == deltas["operationMetrics"]["numRemovedFiles"] == "8"
    tags = [commit_info(path, before + 1).get("tags", {}) for path in (tracked_table, copy)]
    assert tags[0].get("delta.rowTracking.preserved") == tags[1].get("delta.rowTracking.preserved") == "true"


def test_timestamp_partitions(spark, tmp_path):
    path = str(tmp_path / "partitioned")
    with session_conf(spark, "spark.sql.session.timeZone", "UTC"):
        frame = spark.range(4000).selectExpr(
            "id", "cast((id * 7919) % 1000 as int) x", "timestamp_seconds(1717200000 + (id % 4) * 3600) ts"
        )
        frame.repartition(8).write.format("delta").partitionBy("ts").save(path)
    rows, before = seen(spark, path), version(spark, path)

    config = tmp_path / "zone.yaml"  # the session zone deltaopt runs in: the operator's spark.conf
    zone = {"spark": {"conf": {"spark.sql.session.timeZone": "America/Los_Angeles"}}}
    config.write_text(yaml.safe_dump({**zone, "tables": [{"name": "partitioned", "path": path}]}))
    try:
        optimize("--table", "partitioned", "--z", "x", "--config", str(config))
        assert spark.conf.get("spark.sql.session.timeZone") == "America/Los_Angeles"  # it ran in that zone
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")

    assert seen(spark, path) == rows
    assert_optimize_committed(spark, path, before)


def test_ancient_dates_written_by_another_engine(spark, tmp_path):
    """Dates before 1582 and timestamps before 1900 in files delta-rs wrote (no Spark version in their
    footers): Spark 3.5 reads and writes them only with its datetime rebase modes CORRECTED."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    path = str(tmp_path / "ancient")
    days = [dt.date(1, 1, 1), dt.date(1500, 3, 1), dt.date(1970, 1, 1), dt.date(9999, 12, 31)]
    for start in range(0, 400, 100):
        ids = list(range(start, start + 100))
        day = [days[i % 4] for i in ids]
        at = [dt.datetime(d.year, d.month, d.day, 12, tzinfo=dt.UTC) for d in day]
        write_deltalake(
            path, pa.table({"id": ids, "d": day, "at": pa.array(at, pa.timestamp("us", "UTC"))}), mode="append"
        )
    rows, before = seen(spark, path), version(spark, path)

    optimize("--table", path, "--z", "id")

    assert seen(spark, path) == rows
    assert spark.read.format("delta").load(path).where("d = date'0001-01-01'").count() == 100
    assert_optimize_committed(spark, path, before)


def test_liquid_table_keeps_its_keys(spark, tmp_path):
    path = str(tmp_path / "liquid")
    spark.sql(f"CREATE TABLE delta.`{path}` (a INT, b BIGINT) USING delta CLUSTER BY (a)")
    for start in (0, 600, 1200):
        rows = spark.range(start, start + 600).selectExpr("cast(id % 7 as int) a", "(id * 7919) % 1000 b")
        rows.repartition(2).write.format("delta").mode("append").save(path)
    rows, before = seen(spark, path), version(spark, path)

    optimize("--table", path, "--z", "b")

    assert seen(spark, path) == rows
    assert spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["clusteringColumns"] == ["a"]
    assert_optimize_committed(spark, path, before, by_deltaopt=False)  # Delta's own OPTIMIZE, by its keys


def test_serve_once_decides_and_commits(spark, tracked_table, tmp_path):
    from datetime import UTC, datetime

    from tests.service.test_service import CHEAP, log_queries

    log_queries(tracked_table + "_querylog", count=60, now=datetime.now(UTC), table="tracked")
    state = tmp_path / "state"
    state.mkdir()
    CHEAP.save(state / "costmodel.json")
    thresholds = {"min_new_bytes": 1, "target_file_size": 65536, "sample_rows": 5000, "min_comparison_points": 3}
    config = {
        "defaults": {**thresholds, "cost_per_mb_read": 10.0},
        "tables": [{"name": "tracked", "path": tracked_table}],
        "service": {"state_dir": str(state), "jitter": 0},
    }
    (tmp_path / "deltaopt.yaml").write_text(yaml.safe_dump(config))
    rows, before = seen(spark, tracked_table, tracked=True), version(spark, tracked_table)

    assert main(["serve", "--once", "--config", str(tmp_path / "deltaopt.yaml")]) == 0

    decisions = [json.loads(line) for line in (state / "decisions.jsonl").read_text().splitlines()]
    assert [d["action"] for d in decisions] == ["optimize"], decisions
    assert decisions[0].get("job"), decisions
    assert seen(spark, tracked_table, tracked=True) == rows
    assert_optimize_committed(spark, tracked_table, before)
