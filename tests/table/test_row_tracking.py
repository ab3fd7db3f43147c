"""Row tracking as Delta defines it: row ids are preserved only while the feature is *enabled*
(``RowTracking.isEnabled``: supported and ``delta.enableRowTracking = true``). A table that supports the
feature with it disabled (the first step of ``ALTER TABLE ... DROP FEATURE rowTracking``) is optimised as
Delta's own OPTIMIZE optimises it, and row tracking enabled while a rewrite runs ends as Delta's OPTIMIZE
ends it (docs/TABLE-FEATURES.md, "row tracking")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

from optimizer import errors
from optimizer.table import open_table
from optimizer.table.fingerprint import fingerprint
from optimizer.table.protocol import check_rewritable, table_features
from optimizer.table.rewrite import RewriteRequest
from optimizer.table.rewrite_path import committer_for
from tests.table.test_table_features import _make, _optimize_checked

pytestmark = pytest.mark.spark

PRESERVED_TAG = "delta.rowTracking.preserved"
ENABLE = "ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking' = '{value}')"


def _commit_actions(path: str, version: int) -> list[dict]:
    with open(Path(path) / "_delta_log" / f"{version:020d}.json") as commit:
        return [json.loads(line) for line in commit]


def _row_ids(spark, path: str) -> list[tuple] | None:
    """(id, row id, row commit version) of every row, or None where Delta exposes no row ids."""
    from pyspark.errors import AnalysisException

    try:
        frame = (
            spark.read.format("delta").load(path).selectExpr("id", "_metadata.row_id", "_metadata.row_commit_version")
        )
        return sorted(map(tuple, frame.collect()))
    except AnalysisException:
        return None


def _outcome(spark, path: str, version: int) -> dict[str, object]:
    """What a rewrite committed as `version` left of row tracking: the commit's tag, the fresh row ids
    and commit versions Delta's transaction assigns to every new file, whether the new files carry the
    materialised columns, and whether row ids can be read."""
    import pyarrow.parquet as pq

    actions = _commit_actions(path, version)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    adds = [a["add"] for a in actions if "add" in a]
    materialised = {
        name for a in adds for name in pq.read_schema(Path(path) / unquote(a["path"])).names if name.startswith("_row-")
    }
    return {
        "operation": info["operation"],
        "preserved tag": (info.get("tags") or {}).get(PRESERVED_TAG),
        "fresh base row ids": all(a.get("baseRowId") is not None for a in adds),
        "default row commit version": {a.get("defaultRowCommitVersion") for a in adds} == {version},
        "materialised columns in new files": bool(materialised),
        "row ids readable": _row_ids(spark, path) is not None,
    }


def _supported_but_disabled(spark, path: str, properties: dict[str, str]) -> None:
    """A table made with row tracking on, rows deleted, then row tracking disabled (DROP FEATURE's first
    step): the protocol still lists the feature, the materialised column names stay in the metadata."""
    _make(spark, path, {**properties, "delta.enableRowTracking": "true"}, rows=1200, files=4)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 0")
    spark.sql(ENABLE.format(path=path, value="false"))


def test_supported_but_disabled_row_tracking_is_neither_preserved_nor_refused_with_an_engine():
    """Only enabled row tracking asks for the materialised columns and Delta's writer; the feature
    being supported still needs Delta's transaction (it assigns fresh row ids: delta-rs refuses)."""
    names = {
        "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-1",
        "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-1",
    }
    schema = '{"type": "struct", "fields": []}'
    disabled = table_features(
        1, 7, [], ["rowTracking", "domainMetadata"], configuration={**names, "delta.enableRowTracking": "false"},
        schema_json=schema,
    )  # fmt: skip
    enabled = table_features(
        1, 7, [], ["rowTracking", "domainMetadata"], configuration={**names, "delta.enableRowTracking": "TRUE"},
        schema_json=schema,
    )  # fmt: skip
    assert not disabled.row_tracking and not disabled.needs_delta_writer  # ids are not kept: plain files will do
    assert enabled.row_tracking and enabled.needs_delta_writer
    assert disabled.row_tracking_supported and enabled.row_tracking_supported
    check_rewritable(disabled, "/t", delta_engine=True)
    unset = table_features(1, 7, [], ["rowTracking", "domainMetadata"], configuration=names, schema_json=schema)
    assert not unset.row_tracking and unset.row_tracking_supported  # Delta's default: false
    for features in (disabled, enabled, unset):
        with pytest.raises(errors.UnsupportedTableError, match=r"rowTracking.*no Delta engine"):
            check_rewritable(features, "/t", delta_engine=False)


@pytest.mark.parametrize(
    "properties",
    [{}, {"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name"}],
    ids=["plain", "deletion-vectors+column-mapping"],
)
def test_supported_but_disabled_row_tracking_optimises_as_delta_optimize_does(delta_spark, tmp_path: Path, properties):
    """Rows unchanged (count and hash as Delta reads them), the history an OPTIMIZE, and row tracking
    left exactly as Delta's own OPTIMIZE leaves it on a copy of the same table: no preserved tag, fresh
    row ids and commit versions assigned by Delta's transaction, no materialised columns written, row
    ids not readable while the feature is disabled."""
    spark, path, copy = delta_spark, str(tmp_path / "disabled"), str(tmp_path / "copy")
    _supported_but_disabled(spark, path, properties)
    shutil.copytree(path, copy)

    _, result = _optimize_checked(spark, path)

    spark.sql(f"OPTIMIZE delta.`{copy}` ZORDER BY (k, id)")
    delta_version = int(spark.sql(f"DESCRIBE HISTORY delta.`{copy}`").first()["version"])
    assert fingerprint(spark.read.format("delta").load(copy)) == fingerprint(spark.read.format("delta").load(path))
    ours, deltas = _outcome(spark, path, result.version), _outcome(spark, copy, delta_version)
    assert ours == deltas
    assert ours == {
        "operation": "OPTIMIZE",
        "preserved tag": None,
        "fresh base row ids": True,
        "default row commit version": True,
        "materialised columns in new files": False,
        "row ids readable": False,
    }


def test_enabled_row_tracking_keeps_every_row_id_and_tags_the_commit_preserved(delta_spark, tmp_path: Path):
    spark, path = delta_spark, str(tmp_path / "enabled")
    _make(spark, path, {"delta.enableRowTracking": "true"}, rows=1200, files=4)
    spark.sql(f"UPDATE delta.`{path}` SET tag = 'u' WHERE id < 50")  # rows with a later commit version

    _, result = _optimize_checked(spark, path, tracked=True)  # ids and commit versions as they were

    assert _outcome(spark, path, result.version) == {
        "operation": "OPTIMIZE",
        "preserved tag": "true",
        "fresh base row ids": True,  # Delta assigns them; the materialised columns win where set
        "default row commit version": True,
        "materialised columns in new files": True,
        "row ids readable": True,
    }


@pytest.mark.every_change
@pytest.mark.parametrize("start", ["unsupported", "supported-but-disabled"])
def test_row_tracking_enabled_while_the_rewrite_runs_commits_with_new_row_ids(delta_spark, tmp_path: Path, start):
    """``SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')`` lands between the rewrite's read and its
    commit. Delta's conflict checker resolves it (the protocol upgrade and backfill are adopted, the
    enablement-only metadata commit is tolerated) and tags the rewrite ``delta.rowTracking.preserved:
    false``, as it tags Delta's own OPTIMIZE: the rows are unchanged, every rewritten row gets a fresh
    row id above the ones it had, and the rewrite's version as its row commit version."""
    spark, path = delta_spark, str(tmp_path / start)
    if start == "unsupported":
        _make(spark, path, {}, rows=1200, files=4)
    else:
        _supported_but_disabled(spark, path, {})
    expected = fingerprint(spark.read.format("delta").load(path))
    table = open_table(path)
    snapshot = table.snapshot()
    assert snapshot.configuration.get("delta.enableRowTracking") in (None, "false")  # not tracked when planned
    frame = table.read_files(spark, snapshot.files, snapshot, for_rewrite=True).coalesce(1)
    staged = table.stage(spark, frame, snapshot, "optimize")
    request = RewriteRequest(
        snapshot.version, snapshot.files, staged, {"operation": "OPTIMIZE", "runId": "rt"}, ("id",)
    )
    before: list[list[tuple]] = []

    def enable(_version: int) -> None:
        if not before:
            spark.sql(ENABLE.format(path=path, value="true"))
            before.append(_row_ids(spark, path) or [])

    version = committer_for(table, spark).rewrite(request, before_commit=enable)

    assert before and before[0], "row ids were readable once row tracking was enabled"
    assert table.history(version)[-1].deltaopt["runId"] == "rt"
    assert fingerprint(spark.read.format("delta").load(path)) == expected
    assert _outcome(spark, path, version)["preserved tag"] == "false"
    after = _row_ids(spark, path)
    assert after is not None and [r[0] for r in after] == [r[0] for r in before[0]]
    assert min(r[1] for r in after) > max(r[1] for r in before[0])  # every row id changed, none reused
    assert {r[2] for r in after} == {version}
