"""Timestamps are instants: no rewrite may shift them by a session time zone (issue 45, items 3 and 4).

Tables are made by delta-spark in a UTC session; `optimize` then runs in a session whose time zone is
not UTC (Asia/Kolkata, America/Los_Angeles) and in UTC. A reader in America/Los_Angeles must see the
same rows before and after, and the log must keep Delta's own form of each partition value: timestamps
as UTC ISO (``2024-01-01T10:00:00.000000Z``), timestamp_ntz zone-less.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from optimizer import errors
from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.table import open_table

pytestmark = [pytest.mark.spark, pytest.mark.every_change]  # session time zones: tests/tiers.py keeps them

READER_ZONE = "America/Los_Angeles"
ZONE_CONF = "spark.sql.session.timeZone"
UTC_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
# written in UTC: 10:00; near midnight (another day in Kolkata and in Los Angeles); the spring-forward
# instant of Los Angeles and both sides of its fall-back hour (01:30 local twice); a fraction of a second
INSTANTS = (
    "2024-01-01 10:00:00",
    "2024-01-01 20:00:00",
    "2024-01-01 00:30:00",
    "2024-03-10 10:00:00",
    "2024-11-03 08:30:00",
    "2024-11-03 09:30:00",
    "2024-06-30 23:59:59.5",
)
# zone-less local values, one of them not a valid local time in Los Angeles (spring-forward gap)
LOCAL_TIMES = ("2024-01-01 10:00:00", "2024-03-10 02:30:00", "2024-11-03 01:30:00", "2024-12-31 23:59:59.25")

CASES = {
    "plain": {},
    "deletion-vectors": {"delta.enableDeletionVectors": "true"},
    "column-mapping": {"delta.columnMapping.mode": "name"},
    "row-tracking": {"delta.enableRowTracking": "true"},
}


@contextmanager
def session_zone(spark, zone: str) -> Iterator[None]:
    """`spark`'s session time zone set to `zone` for the block, restored afterwards."""
    previous = spark.conf.get(ZONE_CONF)
    spark.conf.set(ZONE_CONF, zone)
    try:
        yield
    finally:
        spark.conf.set(ZONE_CONF, previous)


def _create(spark, path: str, columns: str, partition: str | None, properties: dict[str, str]) -> None:
    props = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({columns}) USING delta"
        + (f" PARTITIONED BY ({partition})" if partition else "")
        + (f" TBLPROPERTIES ({props})" if props else "")
    )


def _append(spark, path: str, select: str, values: tuple[str, ...], rows: int = 420, files: int = 4) -> None:
    """`rows` rows cycling through `values` (as SQL string literals), written in `files` files each."""
    literals = ", ".join(f"'{v}'" for v in values)
    frame = spark.range(rows).selectExpr("id", f"element_at(array({literals}), cast(id % {len(values)} + 1 as int)) v")
    for start in range(files):
        part = frame.where(f"id % {files} = {start}").selectExpr(*select.split(";"))
        part.write.format("delta").mode("append").save(path)


def _rows_in(spark, path: str, zone: str, columns: tuple[str, ...]) -> list[tuple]:
    """The table's rows as a reader in `zone` renders them (timestamps as strings in that zone)."""
    with session_zone(spark, zone):
        frame = spark.read.format("delta").load(path)
        rendered = frame.selectExpr("id", *[f"cast(`{c}` as string) AS `{c}`" for c in columns])
        return sorted(tuple(r) for r in rendered.collect())


def _log_values(spark, path: str) -> list[str | None]:
    """Every active file's partition values as the log holds them (the strings, read by Delta's own
    snapshot; a test table has one partition column, keyed by its physical name under column mapping)."""
    from pyspark.sql import DataFrame

    from optimizer.table.delta_engine import DeltaEngine

    files = DataFrame(DeltaEngine(spark, path).latest().allFiles().toDF(), spark)
    values = []
    for row in files.select("partitionValues").collect():
        (value,) = row["partitionValues"].values()
        values.append(value)
    return sorted(values, key=str)


def _optimize_in(spark, path: str, zone: str, z: str = "k"):
    """`optimize` over every file in a session whose time zone is `zone`; the run's result."""
    table = open_table(path)
    with session_zone(spark, zone):
        snapshot = table.snapshot()
        return optimize(spark, table, FeatureSet.from_dict({"z": [z]}), 16_000, files=snapshot.files, snapshot=snapshot)


def _checked(spark, path: str, columns: tuple[str, ...], zones: tuple[str, ...]) -> None:
    """Optimise in each of `zones` in turn; after each, the Los Angeles reader's rows and the log's
    partition values are what they were, and the run committed."""
    before_rows = _rows_in(spark, path, READER_ZONE, columns)
    before_log = _log_values(spark, path)
    for zone in zones:
        files_before = len(open_table(path).snapshot().files)
        result = _optimize_in(spark, path, zone)
        assert result.version is not None and result.files_in == files_before, zone
        assert _rows_in(spark, path, READER_ZONE, columns) == before_rows, f"rows moved optimising in {zone}"
        assert sorted(set(_log_values(spark, path)), key=str) == sorted(set(before_log), key=str), zone


@pytest.mark.parametrize("case", sorted(CASES))
def test_timestamp_partitions_keep_their_instant_in_every_session_zone(delta_spark, tmp_path: Path, case: str):
    """Items 3 and 4: the plain path (with or without deletion vectors) wrote the directory's local
    time into the log without its zone; Delta's writer path never verified (UTC ISO against
    `cast(ts as string)`). Both now keep the exact instant in Delta's UTC ISO form."""
    spark, path = delta_spark, str(tmp_path / case)
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", CASES[case])
    _append(spark, path, "id;cast(id % 7 as int) k;cast(v as timestamp) ts", INSTANTS)
    if case == "deletion-vectors":
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 0")
    logged = _log_values(spark, path)
    assert all(UTC_ISO.match(v) for v in logged) and len(set(logged)) == len(INSTANTS)
    _checked(spark, path, ("ts",), ("Asia/Kolkata", "UTC"))


@pytest.mark.parametrize("case", ["plain", "column-mapping"])
def test_timestamp_ntz_partitions_stay_zone_less(delta_spark, tmp_path: Path, case: str):
    spark, path = delta_spark, str(tmp_path / case)
    properties = {"delta.feature.timestampNtz": "supported", **CASES[case]}
    _create(spark, path, "id BIGINT, k INT, ntz TIMESTAMP_NTZ", "ntz", properties)
    _append(spark, path, "id;cast(id % 7 as int) k;cast(v as timestamp_ntz) ntz", LOCAL_TIMES)
    assert set(_log_values(spark, path)) == {v for v in LOCAL_TIMES}  # Delta's form: zone-less
    _checked(spark, path, ("ntz",), ("Asia/Kolkata", READER_ZONE))


def test_timestamp_data_columns_keep_their_values(delta_spark, tmp_path: Path):
    """Timestamp and timestamp_ntz data columns, one of them a Z-order key, under a date partition."""
    spark, path = delta_spark, str(tmp_path / "data")
    _create(spark, path, "id BIGINT, k INT, d DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ", "d", {})
    select = "id;cast(id % 7 as int) k;cast(cast(v as timestamp) as date) d;cast(v as timestamp) ts;"
    _append(spark, path, select + "cast(v as timestamp_ntz) ntz", INSTANTS)
    before = _rows_in(spark, path, READER_ZONE, ("d", "ts", "ntz"))
    for zone in ("Asia/Kolkata", "UTC"):
        table = open_table(path)
        with session_zone(spark, zone):
            snapshot = table.snapshot()
            result = optimize(
                spark, table, FeatureSet.from_dict({"z": ["ts", "ntz"]}), 16_000, files=snapshot.files,
                snapshot=snapshot,
            )  # fmt: skip
        assert result.version is not None
        assert _rows_in(spark, path, READER_ZONE, ("d", "ts", "ntz")) == before, zone


def test_plain_path_in_a_zone_with_a_repeated_hour(delta_spark, tmp_path: Path):
    """Optimising in Los Angeles: 08:30Z and 09:30Z are both 01:30 there. Directory names rendered in
    the session zone cannot tell them apart; the plain path's directories are named in UTC, so both
    instants keep their own partition."""
    spark, path = delta_spark, str(tmp_path / "fallback")
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", {})
    _append(spark, path, "id;cast(id % 7 as int) k;cast(v as timestamp) ts", INSTANTS)
    _checked(spark, path, ("ts",), (READER_ZONE,))
    with session_zone(spark, "UTC"):
        hours = spark.read.format("delta").load(path).where("ts >= '2024-11-03 08:00:00'").groupBy("ts").count()
        assert {str(r["ts"]): r["count"] for r in hours.collect()} == {
            "2024-11-03 08:30:00": 60,
            "2024-11-03 09:30:00": 60,
        }


def test_delta_writer_refuses_an_ambiguous_local_time(delta_spark, tmp_path: Path):
    """Delta's writer names directories in the session zone and derives the log's value from them: in
    Los Angeles's repeated hour two instants share one directory. The rewrite is refused in one line
    and nothing is committed (Delta's own OPTIMIZE would put one of them an hour off)."""
    spark, path = delta_spark, str(tmp_path / "ambiguous")
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", CASES["column-mapping"])
    _append(spark, path, "id;cast(id % 7 as int) k;cast(v as timestamp) ts", INSTANTS)
    version = open_table(path).snapshot().version
    before_rows = _rows_in(spark, path, "UTC", ("ts",))
    with pytest.raises(errors.RewriteValidationError, match="2024-11-03 01:30:00"):
        _optimize_in(spark, path, READER_ZONE)
    assert open_table(path).snapshot().version == version
    assert _rows_in(spark, path, "UTC", ("ts",)) == before_rows
