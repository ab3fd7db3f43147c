"""Partition values exactly as the log holds them (issue 45 item 3, follow-up).

A timestamp partition value without a zone (``2024-01-01 10:00:00``, as Delta wrote them before
``write.utcTimestampPartitionValues`` and as delta-rs writes them) names a local time that every reader
reads in its own session zone. A rewrite must keep that spelling: turned into the UTC ISO form of the
instant the optimising session read, the rows move for readers in other zones. A rewrite whose files
hold one instant under spellings readers elsewhere tell apart is refused. The delta-rs commit path's
removes, and every `DataFile`, carry the log's own spellings (typed values rendered by Python are not
Delta's: ``True``, ``1e+20``, ``2024-01-01 10:00:00+00:00``).

Tables are made by delta-spark; the legacy spelling by delta-spark 4.0.1 itself with
``spark.databricks.delta.write.utcTimestampPartitionValues=false`` (``DelayedCommitProtocol`` then logs
the directory's local time) or by delta-rs's ``write_deltalake``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from optimizer import errors
from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.table import open_table
from optimizer.table.rewrite import COMMIT_CONF
from tests.session_conf import session_conf as conf

pytestmark = pytest.mark.spark

READER_ZONE = "America/Los_Angeles"
ZONE_CONF = "spark.sql.session.timeZone"
LEGACY_CONF = "spark.databricks.delta.write.utcTimestampPartitionValues"
UTC_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
# local times, one a repeated hour and one a skipped hour in Los Angeles, one with a fraction
LOCAL_TIMES = ("2024-01-01 10:00:00", "2024-01-01 20:00:00", "2024-11-03 01:30:00", "2024-06-30 23:59:59.5")
CASES = {"plain": {}, "column-mapping": {"delta.columnMapping.mode": "name"}}


def _create(spark, path: str, columns: str, partition: str, properties: dict[str, str]) -> None:
    props = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({columns}) USING delta PARTITIONED BY ({partition})"
        + (f" TBLPROPERTIES ({props})" if props else "")
    )


def _append(spark, path: str, values: tuple[str, ...], *, legacy: bool, rows: int = 240, files: int = 3) -> None:
    """`rows` rows (id, k, ts) cycling through the local times `values`, read in the session's zone,
    appended in `files` commits by delta-spark: with the legacy setting, the log holds them zone-less."""
    literals = ", ".join(f"'{v}'" for v in values)
    frame = spark.range(rows).selectExpr(
        "id",
        "cast(id % 7 as int) k",
        f"cast(element_at(array({literals}), cast(id % {len(values)} + 1 as int)) as timestamp) ts",
    )
    with conf(spark, LEGACY_CONF, "false" if legacy else "true"):
        for start in range(files):
            frame.where(f"id % {files} = {start}").write.format("delta").mode("append").save(path)


def _append_with_delta_rs(path: str, values: tuple[str, ...], rows: int = 240) -> None:
    """The same rows written by delta-rs (which logs a timestamp partition value zone-less, meaning UTC)."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from deltalake import write_deltalake

    stamps = [datetime.fromisoformat(values[i % len(values)]).replace(tzinfo=UTC) for i in range(rows)]
    data = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "k": pa.array([i % 7 for i in range(rows)], pa.int32()),
            "ts": pa.array(stamps, pa.timestamp("us", tz="UTC")),
        }
    )
    write_deltalake(path, data, mode="append")


def _logged(spark, path: str) -> dict[str, dict[str, str | None]]:
    """{file name: partition values} of every active file, as the log holds them (Delta's own snapshot)."""
    from pyspark.sql import DataFrame

    from optimizer.table.delta_engine import DeltaEngine

    files = DataFrame(DeltaEngine(spark, path).latest().allFiles().toDF(), spark)
    return {_name(r["path"]): dict(r["partitionValues"]) for r in files.select("path", "partitionValues").collect()}


def _spellings(spark, path: str) -> set[str | None]:
    return {v for values in _logged(spark, path).values() for v in values.values()}


def _name(path: str) -> str:
    """A log path as on storage (file names repeat across partition directories: the whole path)."""
    from urllib.parse import unquote

    return unquote(path)


def _rows_in(spark, path: str, zone: str, columns: tuple[str, ...] = ("ts",)) -> list[tuple]:
    """The table's rows as a reader in `zone` renders them."""
    with conf(spark, ZONE_CONF, zone):
        frame = spark.read.format("delta").load(path)
        rendered = frame.selectExpr("id", *[f"cast(`{c}` as string) AS `{c}`" for c in columns])
        return sorted(tuple(r) for r in rendered.collect())


def _optimize_in(spark, path: str, zone: str):
    table = open_table(path)
    with conf(spark, ZONE_CONF, zone):
        snapshot = table.snapshot()
        return optimize(
            spark, table, FeatureSet.from_dict({"z": ["k"]}), 16_000, files=snapshot.files, snapshot=snapshot
        )


@pytest.mark.parametrize(
    ("case", "writer"), [("plain", "delta-spark"), ("plain", "delta-rs"), ("column-mapping", "delta-spark")]
)
def test_zone_less_timestamp_partition_values_keep_their_spelling(delta_spark, tmp_path: Path, case: str, writer: str):
    """Every file of a partition holds one zone-less spelling: the rewritten files hold it too, in a
    UTC session and in one whose zone is not UTC, and a reader in Los Angeles sees the same rows."""
    spark, path = delta_spark, str(tmp_path / f"{case}-{writer}")
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", CASES[case])
    if writer == "delta-rs":
        _append_with_delta_rs(path, LOCAL_TIMES)
    else:
        _append(spark, path, LOCAL_TIMES, legacy=True)
    before, rows = _spellings(spark, path), _rows_in(spark, path, READER_ZONE)
    assert before and not any(UTC_ISO.match(v) for v in before if v), before  # the legacy form
    for zone in ("UTC", "Asia/Kolkata"):
        files = len(open_table(path).snapshot().files)
        result = _optimize_in(spark, path, zone)
        assert result.version is not None and result.files_in == files, zone
        assert _spellings(spark, path) == before, f"partition values respelled optimising in {zone}"
        assert _rows_in(spark, path, READER_ZONE) == rows, f"rows moved for a reader in {READER_ZONE} ({zone})"


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_instant_spelled_two_ways_is_refused(delta_spark, tmp_path: Path, case: str):
    """In a UTC session ``2024-01-01 10:00:00`` and ``2024-01-01T10:00:00.000000Z`` are one instant; to
    a reader in Los Angeles they are eight hours apart. One spelling for both would move one file's rows
    for him: refused in one line, nothing committed."""
    spark, path = delta_spark, str(tmp_path / case)
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", CASES[case])
    with conf(spark, ZONE_CONF, "UTC"):
        _append(spark, path, ("2024-01-01 10:00:00",), legacy=True, files=2)
        _append(spark, path, ("2024-01-01 10:00:00",), legacy=False, files=2)
    assert _spellings(spark, path) == {"2024-01-01 10:00:00", "2024-01-01T10:00:00.000000Z"}
    version, rows = open_table(path).snapshot().version, _rows_in(spark, path, READER_ZONE)
    with pytest.raises(errors.RewriteValidationError, match=r"ts.*'2024-01-01 10:00:00'.*nothing was"):
        _optimize_in(spark, path, "UTC")
    assert open_table(path).snapshot().version == version
    assert _rows_in(spark, path, READER_ZONE) == rows


def test_spellings_one_instant_only_in_the_session_zone(delta_spark, tmp_path: Path):
    """``2024-01-01 15:30:00`` (zone-less) and ``2024-01-01T10:00:00.000000Z`` are different instants in
    UTC (kept apart, each keeps its spelling) and the same one in Kolkata (refused there)."""
    spark, path = delta_spark, str(tmp_path / "kolkata")
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", {})
    with conf(spark, ZONE_CONF, "UTC"):
        _append(spark, path, ("2024-01-01 15:30:00",), legacy=True, files=2)
        _append(spark, path, ("2024-01-01 10:00:00",), legacy=False, files=2)
    before, rows = _spellings(spark, path), _rows_in(spark, path, READER_ZONE)
    assert before == {"2024-01-01 15:30:00", "2024-01-01T10:00:00.000000Z"}
    assert _optimize_in(spark, path, "UTC").version is not None
    assert _spellings(spark, path) == before and _rows_in(spark, path, READER_ZONE) == rows
    version = open_table(path).snapshot().version
    with pytest.raises(errors.RewriteValidationError, match=r"'2024-01-01 15:30:00'.*Asia/Kolkata"):
        _optimize_in(spark, path, "Asia/Kolkata")
    assert open_table(path).snapshot().version == version
    assert _rows_in(spark, path, READER_ZONE) == rows


TYPED_COLUMNS = "id BIGINT, k INT, b BOOLEAN, d DOUBLE, m DECIMAL(10,2), dt DATE, ts TIMESTAMP, s STRING"
TYPED_PARTITIONS = "b, d, m, dt, ts, s"
# (legacy spelling?, row): one instant per timestamp spelling, so delta-rs tells the files apart
TYPED_ROWS = (
    (True, "true, 1e20, 1.5, date'2024-01-01', timestamp'2024-01-01 10:00:00', 'a b'"),
    (False, "false, 1.0, -0.01, date'2024-01-02', timestamp'2024-06-30 23:59:59.5', 'x%y'"),
    (True, "true, -0.0, 0.00, date'2024-01-03', timestamp'2024-11-03 01:30:00', ''"),
    (False, "null, null, null, null, null, null"),
)


def _typed_table(spark, path: str, properties: dict[str, str]) -> None:
    """Boolean, double, decimal, date, timestamp (zone-less and UTC ISO) and string partition values."""
    _create(spark, path, TYPED_COLUMNS, TYPED_PARTITIONS, properties)
    for i, (legacy, row) in enumerate(TYPED_ROWS):
        with conf(spark, LEGACY_CONF, "false" if legacy else "true"):
            select = f"SELECT id, cast(id % 7 as int), {row} FROM range({i * 100}, {i * 100 + 50})"
            spark.sql(f"INSERT INTO delta.`{path}` {select}")


def _by_logical_names(spark, path: str) -> dict[str, dict[str, str | None]]:
    """The log's partition values keyed by logical column names (column mapping keys them physically)."""
    from pyspark.sql.types import StructType

    from optimizer.table.delta_engine import DeltaEngine

    schema = StructType.fromJson(__import__("json").loads(DeltaEngine(spark, path).latest().schema().json()))
    names = {f.metadata.get("delta.columnMapping.physicalName", f.name): f.name for f in schema.fields}
    return {name: {names[k]: v for k, v in values.items()} for name, values in _logged(spark, path).items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_data_files_hold_the_logs_spellings(delta_spark, tmp_path: Path, case: str):
    """delta-rs returns typed partition values; their Python text is not the log's. Every `DataFile`
    holds the log's own string, under logical names (column mapping too)."""
    spark, path = delta_spark, str(tmp_path / case)
    _typed_table(spark, path, CASES[case])
    logged = _by_logical_names(spark, path)
    assert {v["ts"] for v in logged.values()} == {
        "2024-01-01 10:00:00",
        "2024-06-30T23:59:59.500000Z",
        "2024-11-03 01:30:00",
        None,
    }
    files = {_name(f.path): dict(f.partition_values) for f in open_table(path).snapshot().files}
    assert files == logged


def _removes(spark, path: str, version: int) -> dict[str, dict[str, str | None]]:
    """{file name: partition values} of the remove actions of commit `version` (Delta's own log reader)."""
    from optimizer.table.delta_engine import DeltaEngine, python_list

    changes = DeltaEngine(spark, path).log().getChanges(version, False)
    removes: dict[str, dict[str, str | None]] = {}
    while changes.hasNext():
        pair = changes.next()
        if int(pair._1()) != version:
            continue
        for action in python_list(pair._2()):
            if action.getClass().getSimpleName() == "RemoveFile":
                removes[_name(str(action.path()))] = _scala_dict(action.partitionValues())
    return removes


def _scala_dict(scala_map: Any) -> dict[str, str | None]:
    found, it = {}, scala_map.iterator()
    while it.hasNext():
        pair = it.next()
        found[str(pair._1())] = None if pair._2() is None else str(pair._2())
    return found


def test_delta_rs_removes_carry_the_logs_spellings(delta_spark, tmp_path: Path):
    """The delta-rs commit path's removes name each file's partition values as its add did."""
    spark, path = delta_spark, str(tmp_path / "removes")
    _typed_table(spark, path, {})
    before = _logged(spark, path)
    with conf(spark, COMMIT_CONF, "delta-rs"), conf(spark, ZONE_CONF, "UTC"):
        table = open_table(path)
        snapshot = table.snapshot()
        result = optimize(
            spark, table, FeatureSet.from_dict({"z": ["k"]}), 16_000, files=snapshot.files, snapshot=snapshot
        )
    assert result.version is not None
    assert _removes(spark, path, result.version) == before
    assert {v["ts"] for v in _logged(spark, path).values()} == {v["ts"] for v in before.values()}


PREDICATES = (
    "ts = timestamp'2024-01-01 10:00:00'",
    "ts > timestamp'2024-01-01 09:00:00' AND ts < timestamp'2024-01-01 11:00:00'",
    "ts IS NULL",
    "b = true",
    "d = 1e20",
    "m = 1.5",
    "dt = date'2024-01-02'",
    "s = 'x%y'",
    "s = 'a b' AND b",
)


@pytest.mark.parametrize("zone", ["UTC", READER_ZONE])
def test_partition_filters_keep_every_file_that_matches(delta_spark, tmp_path: Path, zone: str):
    """Pruning on the `DataFile` partition values never drops a file a filter matches rows in (Delta's
    reader in the session's zone decides which do): a guard, the spellings it reads are the log's."""
    from optimizer.skipping.scan import plan_scan

    spark, path = delta_spark, str(tmp_path / "pruning")
    _typed_table(spark, path, {})
    table = open_table(path)
    with conf(spark, ZONE_CONF, zone):
        for predicate in PREDICATES:
            frame = spark.read.format("delta").load(path).where(predicate)
            read = frame.select("_metadata.file_path").distinct().collect()
            matching = {_name(r[0]).split(f"{path}/", 1)[-1] for r in read}
            kept = {_name(f.path) for f in plan_scan(table, predicate).files}
            assert matching and matching <= kept, predicate
