"""Promises of docs/TABLE-FEATURES.md that no other test checked: what a rewrite of a deletion-vector
table leaves in the log, the features Delta's transaction and writer handle (constraints, generated,
identity and default columns, change data feed, vacuum protocol check, Iceberg compatibility), what
the history records, and which features need Delta's engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer import errors
from optimizer.table.protocol import check_rewritable, table_features
from tests.table.test_table_features import _make, _optimize_checked

pytestmark = pytest.mark.spark

SOP = "tag IN ('t1', 't2')"


def _actions(path: str, version: int) -> list[dict]:
    with open(Path(path) / "_delta_log" / f"{version:020d}.json") as commit:
        return [json.loads(line) for line in commit]


def _active_vectors(path: str, version: int) -> dict[str, dict]:
    """Active file path -> its deletion vector descriptor at `version`, for the files that have one
    (the commits replayed: these tables have no checkpoint)."""
    found: dict[str, dict | None] = {}
    for v in range(version + 1):
        actions = _actions(path, v)
        for a in actions:  # a DELETE removes a file and adds it back with its deletion vector
            if "remove" in a:
                found.pop(a["remove"]["path"], None)
        found.update({a["add"]["path"]: a["add"].get("deletionVector") for a in actions if "add" in a})
    return {p: dv for p, dv in found.items() if dv}


def test_deletion_vectors_stay_on_the_removed_files_and_the_history_names_the_users_expressions(
    delta_spark, tmp_path: Path
):
    spark, path = delta_spark, str(tmp_path / "dv")
    _make(spark, path, {"delta.enableDeletionVectors": "true"}, rows=1200, files=4)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 0")
    vectors = _active_vectors(path, 2)  # create, append, delete
    assert vectors  # the DELETE left deletion vectors

    _, result = _optimize_checked(spark, path, sop=SOP)

    actions = _actions(path, result.version)
    removes = {a["remove"]["path"]: a["remove"] for a in actions if "remove" in a}
    assert {p: removes[p].get("deletionVector") for p in vectors} == vectors  # descriptors kept on the removes
    assert not any(a["add"].get("deletionVector") for a in actions if "add" in a)  # new files carry none
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    named = json.loads(info["operationParameters"]["zOrderBy"])
    assert named and set(named) <= {"k", "id", f"sop({SOP})"}  # the user's expressions, never helpers


def test_features_delta_handles_keep_their_promises_after_a_rewrite(delta_spark, tmp_path: Path):
    """Check constraints, generated, identity and default columns, change data feed and the vacuum
    protocol check: the rewrite commits through Delta's transaction; afterwards the change feed shows
    no change for it, and new rows still get identity values above every old one, generated values,
    defaults, and the constraint."""
    from delta.tables import DeltaTable, IdentityGenerator

    spark, path = delta_spark, str(tmp_path / "handled")
    (  # generated and identity columns: through the builder (path-based SQL DDL refuses them)
        DeltaTable.create(spark)
        .location(path)
        .addColumn("uid", "BIGINT", generatedAlwaysAs=IdentityGenerator())
        .addColumn("id", "BIGINT")
        .addColumn("k", "INT")
        .addColumn("tag", "STRING")
        .addColumn("doubled", "BIGINT", generatedAlwaysAs="id * 2")
        .addColumn("note", "STRING")
        .property("delta.enableChangeDataFeed", "true")
        .property("delta.feature.allowColumnDefaults", "supported")
        .property("delta.feature.vacuumProtocolCheck", "supported")
        .execute()
    )
    spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN note SET DEFAULT 'none'")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive CHECK (id >= 0)")
    for start in (0, 400, 800):
        spark.sql(
            f"INSERT INTO delta.`{path}` (id, k, tag) SELECT id, cast(id % 97 as int), concat('t', id % 13) "
            f"FROM range({start}, {start + 400})"
        )
    _, result = _optimize_checked(spark, path, sop=SOP)

    changes = spark.sql(f"SELECT * FROM table_changes_by_path('{path}', {result.version}, {result.version})")
    assert changes.count() == 0  # dataChange=false: no change rows
    spark.sql(f"INSERT INTO delta.`{path}` (id, k, tag) VALUES (5000, 1, 'new')")
    rows = spark.read.format("delta").load(path)
    new = rows.where("id = 5000").collect()[0]
    assert new["uid"] > rows.where("id < 5000").agg({"uid": "max"}).collect()[0][0]
    assert (new["doubled"], new["note"]) == (10000, "none")
    assert rows.select("uid").distinct().count() == 1201
    with pytest.raises(Exception, match=r"DELTA_VIOLATE_CONSTRAINT|CHECK constraint"):
        spark.sql(f"INSERT INTO delta.`{path}` (id, k, tag) VALUES (-1, 1, 'bad')")


def test_iceberg_compatible_tables_are_rewritten_through_delta(delta_spark, tmp_path: Path):
    spark, path = delta_spark, str(tmp_path / "iceberg")
    _make(spark, path, {"delta.columnMapping.mode": "name", "delta.enableIcebergCompatV2": "true"}, rows=900, files=3)
    table, _ = _optimize_checked(spark, path)
    assert "icebergCompatV2" in table.snapshot().features.writer_features


@pytest.mark.parametrize(
    ("readers", "configuration", "named"),
    [
        (["columnMapping"], {"delta.columnMapping.mode": "name"}, "columnMapping"),
        (["typeWidening"], {}, "typeWidening"),
        (["deletionVectors"], {}, "deletionVectors"),
    ],
)
def test_features_only_delta_reads_right_are_refused_without_its_engine(readers, configuration, named):
    features = table_features(
        3, 7, readers, readers, configuration=configuration, schema_json='{"type": "struct", "fields": []}'
    )
    check_rewritable(features, "/t", delta_engine=True)
    with pytest.raises(errors.UnsupportedTableError, match=f"{named}.*no Delta engine") as refused:
        check_rewritable(features, "/t", delta_engine=False)
    assert "\n" not in str(refused.value)
