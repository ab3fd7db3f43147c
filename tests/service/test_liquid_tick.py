"""Liquid tables under the service (issue 47): a tick prices Delta's own OPTIMIZE by the rules Delta runs it
by and runs it when it pays; the keys change only with ``liquid: set``, after the workload wanted the new
ones for `liquid_key_ticks` ticks running; ``suggest`` runs nothing. Real liquid tables made by
delta-spark; the files Delta's OPTIMIZE rewrites are checked against `zcubes.liquid_rewrite`."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from optimizer.table import open_table
from optimizer.table.zcubes import MIN_CUBE_SIZE_KEY, clustered_files, liquid_rewrite, min_cube_size
from optimizer.verdict import Verdict
from tests.service.test_service import NOW, log_queries, write_config

pytestmark = pytest.mark.spark
MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"


@pytest.fixture(autouse=True)
def small_files(spark):  # type: ignore[no-untyped-def]
    """Delta's OPTIMIZE writes files of the tests' target size (100 kB, `write_config`), not 1 GiB: the
    estimate prices files of Delta's maxFileSize as the session sets it (`estimate.liquid.as_delta_writes`)."""
    previous = spark.conf.get(MAX_FILE_SIZE, None)
    spark.conf.set(MAX_FILE_SIZE, "100000")
    yield
    spark.conf.unset(MAX_FILE_SIZE) if previous is None else spark.conf.set(MAX_FILE_SIZE, previous)


def rows_of(spark, path: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Count and an order-insensitive hash of the table's rows, read by Spark's Delta scan."""
    from pyspark.sql import functions as F

    row = spark.read.format("delta").load(path).agg(F.count("*"), F.sum(F.xxhash64("*"))).collect()[0]
    return int(row[0]), int(row[1])


def liquid_table(spark, path: str, key: str, batches: int = 2) -> None:  # type: ignore[no-untyped-def]
    """A table clustered by `key`, with `batches` appends of 10,000 rows in 3 files each."""
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, x BIGINT, pad STRING) USING delta CLUSTER BY ({key})")
    for batch in range(batches):
        append(spark, path, batch)


def append(spark, path: str, batch: int) -> None:  # type: ignore[no-untyped-def]
    start = batch * 10_000
    rows = spark.range(start, start + 10_000).selectExpr(
        "id", "(id * 7919) % 1000 x", "sha2(cast(id as string), 256) pad"
    )
    rows.repartition(3).write.format("delta").mode("append").save(path)


def keys(spark, path: str) -> list[str]:  # type: ignore[no-untyped-def]
    return list(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["clusteringColumns"])


def operations(spark, path: str) -> list[str]:  # type: ignore[no-untyped-def]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    return [r["operation"] for r in history]


def removed_by_last_commit(path: str) -> set[str]:
    table = open_table(path)
    latest = table.snapshot()
    before = table.snapshot(latest.version - 1)
    return {f.path for f in before.files} - {f.path for f in latest.files}


@pytest.mark.parametrize("sealed", [False, True])
def test_the_files_delta_s_optimize_rewrites_are_the_ones_the_rules_predict(spark, tmp_path: Path, sealed: bool):
    """A cube below minCubeSize (the default: 100 GiB) is re-clustered with the new files; a sealed one
    (minCubeSize set below its size) is left alone."""
    path = str(tmp_path / "events")
    liquid_table(spark, path, "x")
    spark.sql(f"OPTIMIZE delta.`{path}`")  # one ZCube
    append(spark, path, 2)
    append(spark, path, 3)
    previous = spark.conf.get(MIN_CUBE_SIZE_KEY, None)
    if sealed:
        spark.conf.set(MIN_CUBE_SIZE_KEY, "1")
    try:
        tagged = clustered_files(spark, path)
        assert tagged is not None and any(f.cube is not None for f in tagged)
        predicted = {f.path for f in liquid_rewrite(tagged, ["x"], min_cube_size=min_cube_size(spark))}
        spark.sql(f"OPTIMIZE delta.`{path}`")
    finally:
        spark.conf.unset(MIN_CUBE_SIZE_KEY) if previous is None else spark.conf.set(MIN_CUBE_SIZE_KEY, previous)
    assert predicted == removed_by_last_commit(path)
    cubed = {f.path for f in tagged if f.cube is not None}
    assert (predicted & cubed == set()) is sealed  # sealed: only the two appends' files


def test_a_cube_with_deleted_rows_is_weighed_as_delta_weighs_it(spark, tmp_path: Path):
    """Deletion vectors shrink a cube below minCubeSize for Delta (its logical size), though its files'
    bytes on disk are above it: Delta's OPTIMIZE re-clusters it with the new data, and the rules say so."""
    path = str(tmp_path / "events")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, x BIGINT, pad STRING) USING delta CLUSTER BY (x) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    append(spark, path, 0)
    append(spark, path, 1)
    spark.sql(f"OPTIMIZE delta.`{path}`")  # one ZCube
    cube = {f.path: f.size for f in clustered_files(spark, path) or []}
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 4 <> 0")  # three rows of four: deletion vectors
    append(spark, path, 2)
    tagged = clustered_files(spark, path)
    assert tagged is not None and {f.path for f in tagged if f.cube is not None} == set(cube)
    between = str(sum(cube.values()) // 2)  # below the cube's bytes, above a quarter of them
    previous = spark.conf.get(MIN_CUBE_SIZE_KEY, None)
    spark.conf.set(MIN_CUBE_SIZE_KEY, between)
    try:
        predicted = {f.path for f in liquid_rewrite(tagged, ["x"], min_cube_size=min_cube_size(spark))}
        spark.sql(f"OPTIMIZE delta.`{path}`")
    finally:
        spark.conf.unset(MIN_CUBE_SIZE_KEY) if previous is None else spark.conf.set(MIN_CUBE_SIZE_KEY, previous)
    assert set(cube) <= removed_by_last_commit(path)  # Delta re-clustered the cube
    assert predicted == removed_by_last_commit(path)


def service_ctx(spark, tmp_path: Path, path: str, liquid: str, delta: str = "auto", **thresholds):  # type: ignore[no-untyped-def]
    from optimizer.config import load_config
    from optimizer.service.service import context

    data = write_config(tmp_path, [{"name": "events", "path": path, "interval": 5, "liquid": liquid}])
    data["defaults"].update(thresholds)
    data["spark"]["delta"] = delta
    (tmp_path / "deltaopt.yaml").write_text(yaml.safe_dump(data))
    log_queries(path + "_querylog")
    return context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)


def test_a_table_clustered_by_the_workload_s_keys_is_optimized_by_delta(spark, tmp_path: Path):
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    liquid_table(spark, path, "x")
    before = rows_of(spark, path)
    ctx = service_ctx(spark, tmp_path, path, "keep")

    done = tick(ctx.config.tables[0], ctx, NOW)

    assert done.action is Verdict.OPTIMIZE, done.reason
    liquid = done.as_dict()["liquid"]
    assert liquid["operation"] == "CLUSTERING" and liquid["keys"] == ["x"] and liquid["wanted"] == ["x"]
    assert liquid["rewritten_files"] == 6 and liquid["cubes_known"] is True
    assert done.job is not None and done.job.outcome is not None and done.job.outcome.version is not None
    assert operations(spark, path)[-1] == "OPTIMIZE" and keys(spark, path) == ["x"]
    assert rows_of(spark, path) == before
    assert all(f.cube is not None for f in clustered_files(spark, path) or [])  # Delta clustered every file


def test_set_changes_the_keys_only_after_the_workload_wanted_them_for_the_ticks_it_takes(spark, tmp_path: Path):
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    liquid_table(spark, path, "id")
    ctx = service_ctx(spark, tmp_path, path, "set", liquid_key_ticks=2, liquid_key_margin=0.0)
    table = ctx.config.tables[0]

    first = tick(table, ctx, NOW)

    assert first.as_dict()["liquid"]["wanted"] == ["x"], first.reason
    assert "1 of the 2 ticks" in first.reason and keys(spark, path) == ["id"]
    assert "CLUSTER BY" not in operations(spark, path)[1:]
    append(spark, path, 2)  # new data: the next tick is a full one
    before = rows_of(spark, path)

    second = tick(table, ctx, NOW + timedelta(minutes=10))

    assert second.action is Verdict.OPTIMIZE, second.reason
    assert second.as_dict()["liquid"]["operation"] == "AUTO_CLUSTERING_COLUMN_SELECTION"
    assert "keys changed" in second.reason and keys(spark, path) == ["x"]
    assert operations(spark, path)[-2:] == ["CLUSTER BY", "OPTIMIZE"]
    assert rows_of(spark, path) == before


@pytest.mark.parametrize("liquid", ["keep", "suggest"])
def test_keep_and_suggest_leave_the_user_s_keys_and_name_the_wanted_ones(spark, tmp_path: Path, liquid: str):
    from optimizer.service.tick import tick

    path = str(tmp_path / "events")
    liquid_table(spark, path, "id")
    committed = operations(spark, path)
    ctx = service_ctx(spark, tmp_path, path, liquid, liquid_key_ticks=1)

    done = tick(ctx.config.tables[0], ctx, NOW)

    section = done.as_dict()["liquid"]
    assert section["keys"] == ["id"] and section["wanted"] == ["x"], done.reason
    assert f"liquid: {liquid}" in done.reason and "wants keys (x) over (id)" in done.reason
    assert keys(spark, path) == ["id"]
    if liquid == "suggest":
        assert done.action is Verdict.SKIP and operations(spark, path) == committed


@pytest.mark.parametrize("full", [False, True])
def test_a_key_change_re_clusters_the_files_clustered_by_the_old_keys_only_with_full(spark, tmp_path: Path, full):
    """``deltaopt optimize --liquid set --full`` (what a key-change job with FULL runs): every file ends up
    in a ZCube of the new keys; without FULL the files clustered by the old keys stay as Delta left them."""
    from optimizer.cli.main import main

    path = str(tmp_path / "events")
    liquid_table(spark, path, "id")
    spark.sql(f"OPTIMIZE delta.`{path}`")  # the files clustered by id
    append(spark, path, 2)
    before = rows_of(spark, path)

    command = ["optimize", "--table", path, "--z", "x", "--liquid", "set", "--json", *(["--full"] if full else [])]
    assert main(command) == 0

    assert keys(spark, path) == ["x"] and rows_of(spark, path) == before
    cubes = {f.keys for f in clustered_files(spark, path) or []}
    assert cubes == ({("x",)} if full else {("x",), ("id",)})
    assert operations(spark, path)[-2:] == ["CLUSTER BY", "OPTIMIZE"]


def test_full_is_refused_for_a_table_that_is_not_liquid(spark, tmp_path: Path, capsys):
    from optimizer.cli.main import main

    path = str(tmp_path / "plain")
    spark.range(100).selectExpr("id", "id % 10 x").write.format("delta").save(path)
    committed = operations(spark, path)

    assert main(["optimize", "--table", path, "--z", "x", "--full"]) != 0

    assert "not liquid-clustered: OPTIMIZE FULL" in capsys.readouterr().err
    assert operations(spark, path) == committed


def test_a_session_that_commits_by_delta_rs_skips_the_liquid_table_and_its_key_streak_starts_again(
    spark, tmp_path: Path
):
    """``spark.commit: delta-rs`` (in the session's conf, as `optimizer.runtime` puts it) leaves no Delta engine
    to cluster the liquid table: the tick reads the path its job would take and skips before any estimate,
    naming the setting; the ticks that wanted new keys before it no longer count toward a key change, and
    the skip is not repeated once the session can cluster the table (the verdict key cannot see a session).
    ``spark.delta: off`` is how a driver attached to a cluster is built: the session still has the cluster's
    Delta, and the ticks around the skip read what the session can do, not what the setting predicts."""
    from optimizer.service.tick import tick
    from optimizer.table.rewrite import COMMIT_CONF

    path = str(tmp_path / "events")
    liquid_table(spark, path, "id")
    ctx = service_ctx(spark, tmp_path, path, "set", delta="off", liquid_key_ticks=2, liquid_key_margin=0.0)
    table = ctx.config.tables[0]
    assert "1 of the 2 ticks" in tick(table, ctx, NOW).reason  # priced: the session has Delta, whatever the setting
    append(spark, path, 2)
    before, committed = rows_of(spark, path), operations(spark, path)
    spark.conf.set(COMMIT_CONF, "delta-rs")
    try:
        skipped = tick(table, ctx, NOW + timedelta(minutes=10))
    finally:
        spark.conf.unset(COMMIT_CONF)

    assert skipped.action is Verdict.SKIP, skipped.reason
    assert "is liquid-clustered and only Delta's OPTIMIZE clusters it" in skipped.reason
    assert "delta-rs (spark.commit is delta-rs)" in skipped.reason
    assert skipped.job is None and skipped.liquid is None and skipped.decision is None  # nothing priced
    assert operations(spark, path) == committed and rows_of(spark, path) == before

    again = tick(table, ctx, NOW + timedelta(minutes=20))  # nothing moved, but the session can cluster it now

    assert not again.reason.startswith("nothing moved since"), again.reason  # the skip was not repeated
    assert "1 of the 2 ticks" in again.reason and keys(spark, path) == ["id"]
