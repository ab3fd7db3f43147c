"""Timestamp partition values of a table whose files have random prefixes (review finding on
`delta_writer._exact_timestamps`).

With ``delta.randomizeFilePrefixes=true`` a Delta writer that honours it puts each file under a random
prefix, so no ``ts=...`` directory names the value: the log's value is the one Delta's writer computed.
delta-spark 4.0.1's own ``TransactionalWrite.getCommitter`` passes no random prefix to its commit
protocol (the files still land in partition directories), so the tests set the property and emulate its
layout where deltaopt reads the directories (`delta_writer.directory_values` finds none). Delta logs
it in its UTC ISO form, or zone-less with ``spark.databricks.delta.write.utcTimestampPartitionValues``
off; taken as it is, a zone-less spelling the replaced files hold would become UTC ISO (or the reverse)
and the rows would move for readers in other zones, while the job's own check, reading in the session's
zone, sees the same instants. The rewrite keeps every file's spelling, or is refused in one line with
nothing committed. Column mapping makes deltaopt stage with Delta's writer (`stage_with_delta`); the
tables are made by delta-spark, optimised in a session whose zone is not UTC.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer import errors
from optimizer.table import delta_writer, open_table
from tests.session_conf import session_conf as conf
from tests.table.test_partition_value_forms import (
    LEGACY_CONF,
    READER_ZONE,
    UTC_ISO,
    ZONE_CONF,
    _append,
    _create,
    _logged,
    _optimize_in,
    _rows_in,
)

pytestmark = pytest.mark.spark

PROPERTIES = {"delta.columnMapping.mode": "name", "delta.randomizeFilePrefixes": "true"}
SESSION_ZONE = "Asia/Kolkata"


@pytest.mark.parametrize(("logged", "written"), [("zone-less", "utc"), ("utc", "zone-less")])
def test_random_prefixes_never_respell_a_timestamp_partition(
    delta_spark, tmp_path: Path, monkeypatch, logged: str, written: str
):
    """The log holds `logged` spellings; Delta's writer would log `written` ones: the rewrite keeps the
    log's spellings and every reader's rows, or is refused with nothing committed."""
    spark, path = delta_spark, str(tmp_path / f"{logged}-{written}")
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", PROPERTIES)
    with conf(spark, ZONE_CONF, "UTC"):
        _append(spark, path, ("2024-01-01 10:00:00", "2024-01-01 20:00:00"), legacy=logged == "zone-less")
    before, rows = _logged(spark, path), _rows_in(spark, path, READER_ZONE)
    spellings = {v for values in before.values() for v in values.values()}
    assert all(bool(UTC_ISO.match(v)) == (logged == "utc") for v in spellings), spellings
    version = open_table(path).snapshot().version
    monkeypatch.setattr(delta_writer, "directory_values", lambda path: {})  # random prefixes: no directory

    with conf(spark, LEGACY_CONF, "false" if written == "zone-less" else "true"):
        try:
            result = _optimize_in(spark, path, SESSION_ZONE)
        except errors.RewriteValidationError as refused:
            assert "\n" not in str(refused) and "nothing was committed" in str(refused), refused
            assert open_table(path).snapshot().version == version, "refused, yet something was committed"
            result = None

    after = {v for values in _logged(spark, path).values() for v in values.values()}
    assert after == spellings, f"partition values respelled: {spellings} -> {after}"
    assert _rows_in(spark, path, READER_ZONE) == rows, f"rows moved for a reader in {READER_ZONE}"
    if result is not None:
        assert result.version is not None and result.version > version


def test_a_value_logged_without_a_directory_outside_the_jvms_zone_is_refused(delta_spark, tmp_path: Path, monkeypatch):
    """Delta up to 4.0 derives an undirected timestamp partition value from the local-time directory name it
    would have written, parsed in the JVM's zone: Delta 3.3 (column mapping: random prefixes) logged 00:30Z
    written in Asia/Kolkata as 06:00Z, and the job's check caught it only as "written rows differ". Outside
    the JVM's zone the value is refused by name before anything is committed; in its zone the rewrite commits."""
    spark, path = delta_spark, str(tmp_path / "undirected")
    _create(spark, path, "id BIGINT, k INT, ts TIMESTAMP", "ts", PROPERTIES)
    with conf(spark, ZONE_CONF, "UTC"):
        _append(spark, path, ("2024-01-01 00:30:00", "2024-01-01 20:00:00"), legacy=False)
    rows, version = _rows_in(spark, path, READER_ZONE), open_table(path).snapshot().version
    monkeypatch.setattr(delta_writer, "directory_values", lambda path: {})  # random prefixes: no directory
    jvm_zone = str(spark._jvm.java.time.ZoneId.systemDefault().getId())
    other = "Asia/Kolkata" if "Kolkata" not in jvm_zone else "America/Los_Angeles"

    with pytest.raises(errors.RewriteValidationError) as refused:
        _optimize_in(spark, path, other)
    assert f"session whose time zone ({other}) is not the JVM's ({jvm_zone})" in str(refused.value)
    assert open_table(path).snapshot().version == version

    result = _optimize_in(spark, path, jvm_zone)
    assert result.version is not None and result.version > version
    assert _rows_in(spark, path, READER_ZONE) == rows
