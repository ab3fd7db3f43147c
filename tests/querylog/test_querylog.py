"""Query log: the table, the recorder (crash safety, exactly once), importers, tailing, quarantine."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta

import pytest

from querylog.capture import SqlContext
from querylog.errors import ImportSourceError, LogTableError
from querylog.importers.eventlog import import_event_log
from querylog.importers.sqltext import HistoryColumns, import_history, import_sql_file, split_statements
from querylog.recorder import Recorder
from querylog.store import QuarantineTable, QueryLogTable, quarantine_path
from tests.golden import FIXTURES

SCHEMA = json.loads((FIXTURES / "tpch" / "schema.json").read_text())
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def log(tmp_path) -> QueryLogTable:
    return QueryLogTable(str(tmp_path / "lineitem_querylog"))


def quarantine(log: QueryLogTable) -> QuarantineTable:
    return QuarantineTable(quarantine_path(log.uri))


def test_recorder_normalises_and_appends(log, tmp_path):
    with Recorder(log, tmp_path / "spill", context=SqlContext(schema=SCHEMA)) as recorder:
        recorder.record(
            "lineitem",
            ["lineitem.l_shipdate BETWEEN DATE '1994-01-01' AND DATE '1994-12-31'"],
            ["l_shipdate", "L_TAX"],
            ts=T0,
        )
        recorder.record_sql(
            "SELECT * FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey WHERE o.o_orderstatus = 'F'",
            ts=T0,
        )
    rows = sorted(log.read(), key=lambda r: r.table_id)
    assert [(r.table_id, r.filters) for r in rows] == [
        (
            "lineitem",
            ("l_shipdate <= CAST('1994-12-31' AS DATE)", "l_shipdate >= CAST('1994-01-01' AS DATE)"),
        ),
        ("lineitem", ()),
        ("orders", ("o_orderstatus = 'F'",)),
    ]
    assert rows[0].columns == ("l_shipdate", "l_tax")


def test_recorder_spills_when_full_and_nothing_is_lost_across_a_crash(log, tmp_path):
    """Records spilled to disk survive a crash between spill and flush and are appended once."""
    spill = tmp_path / "spill"
    crashed = Recorder(log, spill, capacity=3)
    for i in range(7):
        crashed.record("t", [f"x > {i}"], ["x"], ts=T0)
    crashed.settle()  # full queues are spilled behind the caller (as many records as had arrived)
    assert 1 <= len(list(spill.glob("*.scans.arrow"))) <= 2 and len(crashed._queue) < 3
    crashed.spill()  # e.g. at shutdown; then the process dies before flushing
    del crashed

    restarted = Recorder(log, spill, capacity=3)
    assert restarted.flush() == 7
    assert sorted(r.filters for r in log.read()) == sorted((f"x > {i}",) for i in range(7))
    assert list(spill.glob("*.arrow")) == []


def test_recorder_crash_after_commit_before_delete_appends_once(log, tmp_path):
    spill = tmp_path / "spill"
    recorder = Recorder(log, spill)
    recorder.record("t", ["x = 1"], ts=T0)
    recorder.spill()
    kept = tmp_path / "kept"
    shutil.copytree(spill, kept)
    recorder.flush()  # appended and deleted ...
    shutil.rmtree(spill)
    shutil.copytree(kept, spill)  # ... but as if the process died before deleting the spill file

    again = Recorder(log, spill)
    again.flush()
    assert len(log.read()) == 1
    assert list(spill.glob("*.arrow")) == []


def test_recorder_quarantines_unparseable_filters_without_losing_them(log, tmp_path):
    with Recorder(log, tmp_path / "spill") as recorder:
        recorder.record("t", ["x >>> 3"], ts=T0)
        recorder.record_sql("DROP TABLE t", ts=T0)
        recorder.record("t", ["y = 2"], ts=T0)
    assert [r.filters for r in log.read()] == [("y = 2",)]
    reasons = sorted(q.reason for q in quarantine(log).read())
    assert len(reasons) == 2
    assert any("cannot parse predicate" in r for r in reasons)
    assert any("not a query" in r for r in reasons)


def test_background_flush_thread(log, tmp_path):
    recorder = Recorder(log, tmp_path / "spill", flush_interval=0.05).start()
    recorder.record("t", ["x = 1"], ts=T0)
    deadline = datetime.now() + timedelta(seconds=20)
    while not log.exists() and datetime.now() < deadline:
        import time

        time.sleep(0.05)
    recorder.close()
    assert [r.filters for r in log.read()] == [("x = 1",)]


def test_read_window_and_tail(log, tmp_path):
    with Recorder(log, tmp_path / "spill") as recorder:
        recorder.record("a", ["x = 1"], ts=T0 - timedelta(days=10))
        recorder.record("a", ["x = 2"], ts=T0)
        recorder.record("b", ["y = 1"], ts=T0)
    assert [r.filters for r in log.read("a", since=T0 - timedelta(days=1))] == [("x = 2",)]
    first = log.tail(None, "a")
    assert len(first.records) == 2
    with Recorder(log, tmp_path / "spill") as recorder:
        recorder.record("a", ["x = 3"], ts=T0)
    second = log.tail(first.version, "a")
    assert [r.filters for r in second.records] == [("x = 3",)]
    assert log.tail(second.version, "a").records == ()


def test_missing_log_reads_empty_and_wrong_table_is_refused(log, tmp_path):
    assert log.read() == [] and log.tail(None).records == ()
    import pyarrow as pa
    from deltalake import write_deltalake

    other = tmp_path / "not_a_log"
    write_deltalake(str(other), pa.table({"a": [1]}))
    with pytest.raises(LogTableError, match="missing columns"):
        QueryLogTable(str(other)).read()


def test_split_statements_respects_strings_and_comments():
    text = "SELECT 'a;b' FROM t;\n-- only a comment;\nSELECT 2 FROM u -- trailing; comment\n;\n\n"
    statements = split_statements(text)
    assert [s.text for s in statements] == ["SELECT 'a;b' FROM t", "SELECT 2 FROM u -- trailing; comment"]
    assert [s.line for s in statements] == [1, 3]


def test_import_sql_file_quarantines_bad_statements_and_is_idempotent(log, tmp_path):
    path = tmp_path / "queries.sql"
    path.write_text(
        "SELECT * FROM lineitem WHERE l_quantity > 10;\n"
        "SELEKT nonsense;\n"
        "CREATE TABLE x (a INT);\n"
        "SELECT * FROM nation WHERE n_name = 'PERU';\n"
        "SELECT * FROM lineitem WHERE l_quantity > 10;\n"
    )
    context = SqlContext(schema=SCHEMA, watched={"lineitem"})
    report = import_sql_file(log, path, context, at=T0)
    assert (report.entries, report.scans, report.quarantined) == (5, 2, 3)
    assert len({r.query_id for r in log.read()}) == 2  # each occurrence is its own query
    reasons = {q.location: q.reason for q in quarantine(log).read()}
    assert "unparseable" in reasons["queries.sql:2"] or "not a query" in reasons["queries.sql:2"]
    assert "not a query" in reasons["queries.sql:3"]
    assert "reads no watched table" in reasons["queries.sql:4"]
    assert import_sql_file(log, path, context, at=T0).already_imported
    assert len(log.read()) == 2


def test_import_history_csv_and_json(log, tmp_path):
    csv_path = tmp_path / "history.csv"
    csv_path.write_text(
        "query_id,query_text,start_time,duration_ms\n"
        "q1,\"SELECT * FROM lineitem WHERE l_shipmode = 'AIR'\",2024-03-01T10:00:00Z,1200\n"
        "q2,,2024-03-01T10:01:00Z,5\n"
        'q3,"SELECT * FROM lineitem",yesterday,5\n'
    )
    report = import_history(log, csv_path, SqlContext(schema=SCHEMA))
    assert (report.scans, report.quarantined) == (1, 2)
    (row,) = log.read()
    assert (row.query_id, row.duration_ms, row.ts) == ("q1", 1200, datetime(2024, 3, 1, 10, tzinfo=UTC))

    json_path = tmp_path / "history.json"
    json_path.write_text(
        json.dumps(
            [
                {
                    "statement": {"text": "SELECT * FROM lineitem WHERE l_tax = 0"},
                    "started": 1709287200000,
                    "metrics": {"read_bytes": 99},
                },
                "garbage",
            ]
        )
    )
    report = import_history(
        log, json_path, SqlContext(schema=SCHEMA), HistoryColumns(text="statement.text", time="started")
    )
    assert (report.scans, report.quarantined) == (1, 1)
    new = [r for r in log.read() if r.filters == ("l_tax = 0",)]
    assert new[0].bytes_scanned == 99 and new[0].ts == datetime(2024, 3, 1, 10, tzinfo=UTC)


def test_import_event_log(log):
    report = import_event_log(
        log, FIXTURES / "eventlog" / "spark-events.jsonl", SqlContext(aliases={"/data/lineitem": "lineitem"})
    )
    assert report.quarantined == 3  # a garbage line, an event without time, a command without scans
    rows = [r for r in log.read("lineitem")]
    assert sorted(r.filters for r in rows) == sorted(
        [
            (
                "l_discount <= 0.07",
                "l_discount >= 0.05",
                "l_shipdate < CAST('1995-01-01' AS DATE)",
                "l_shipdate >= CAST('1994-01-01' AS DATE)",
            ),
            ("l_comment LIKE '%quick%'", "l_shipmode IN ('MAIL', 'SHIP')"),
            ("STARTSWITH(l_shipinstruct, 'DELIVER')", "l_quantity > 45.00"),
            ("MONTH(l_shipdate) = 12",),
        ]
    )
    assert all(r.duration_ms is not None and r.duration_ms > 0 for r in rows)


SPARK4_SCANS = sorted(
    [
        ("lineitem", ()),  # the generator's own writes read the generated files: real, unfiltered scans
        ("orders", ()),
        (
            "lineitem",
            (
                "l_discount <= 0.07",
                "l_discount >= 0.05",
                "l_shipdate < CAST('1995-01-01' AS DATE)",
                "l_shipdate >= CAST('1994-01-01' AS DATE)",
            ),
        ),
        ("lineitem", ("l_commitdate < l_receiptdate", "l_commitdate > l_shipdate", "l_shipmode IN ('MAIL', 'SHIP')")),
        ("orders", ("o_orderdate < CAST('1993-10-01' AS DATE)", "o_orderdate >= CAST('1993-07-01' AS DATE)")),
        ("lineitem", ("l_shipdate > CAST('1995-03-15' AS DATE)",)),
        ("orders", ("o_orderdate < CAST('1995-03-15' AS DATE)",)),
        ("lineitem", ("l_discount > l_tax", "l_quantity > 45.00")),
    ]
)
SPARK4_ALIASES = {
    f"/tmp/deltaopt-eventlog-fixture/{path}": name
    for path, name in (
        ("lineitem", "lineitem"),
        ("orders", "orders"),
        ("tpch/lineitem.parquet", "lineitem"),
        ("tpch/orders.parquet", "orders"),
    )
}


@pytest.mark.parametrize("fixture", ["spark4-defaults", "spark4-uncompressed", "spark4-lz4"])
def test_spark4_event_logs_import_every_scan(log, fixture):
    """Logs as PySpark 4 writes them by default (rolling directory, zstd in 113 frames), uncompressed,
    and with the lz4 codec (lz4-java blocks): every SQL execution's scans, column-to-column conjuncts
    from DataFilters included, and the same rows whatever the codec."""
    directory = FIXTURES / "eventlog" / fixture
    report = import_event_log(log, directory, SqlContext(aliases=SPARK4_ALIASES))
    assert report.warnings == (), report.warnings
    assert report.entries == 9, "nine SQL executions: 2 writes, 2 views, 4 SQL queries, 1 DataFrame filter"
    assert report.quarantined == 2, "the two temp-view commands scan nothing"
    rows = sorted((r.table_id, r.filters) for r in log.read())
    assert rows == SPARK4_SCANS


def test_a_truncated_zstd_log_warns_instead_of_succeeding_silently(log, tmp_path):
    (source,) = (FIXTURES / "eventlog" / "spark4-defaults").glob("events_*")
    data = source.read_bytes()
    cut = tmp_path / "events_1_app.zstd"
    cut.write_bytes(data[: len(data) // 3])  # the writer died mid-frame: what was decoded is kept, and said
    report = import_event_log(log, cut)
    assert [w for w in report.warnings if "ends inside a zstd frame" in w] == [
        "events_1_app.zstd: ends inside a zstd frame (truncated, or still being written)"
    ], report.warnings
    first_frame = tmp_path / "first" / "events_1_app.zstd"
    first_frame.parent.mkdir()
    first_frame.write_bytes(data[: data.index(b"\x28\xb5\x2f\xfd", 4)])  # only the first of many frames
    report = import_event_log(log, first_frame.parent)
    assert report.scans == 0
    assert any("decoded only" in w for w in report.warnings), report.warnings
    assert "WARNING" in report.describe()


def test_sql_executions_that_give_no_scan_are_a_warning(log):
    directory = FIXTURES / "eventlog" / "spark4-uncompressed"
    report = import_event_log(log, directory, SqlContext(watched=frozenset({"customer"})))
    assert report.scans == 0
    assert any("9 SQL executions found but no scan captured" in w for w in report.warnings), report.warnings


def test_column_comparisons_are_read_from_data_filters():
    from querylog.importers.pushed_filters import parse_data_filter

    schema = {"a": "date", "b": "date", "c": "string"}
    assert parse_data_filter("(a#1 < b#2)", schema).sql() == "a < b"
    both = parse_data_filter("(month(a#1) = month(b#2))", schema)
    assert both is not None and both.sql() == "MONTH(CAST(a AS DATE)) = MONTH(CAST(b AS DATE))"
    assert parse_data_filter("(a#1 < x#9)", schema) is None, "an unknown column is not guessed"
    assert parse_data_filter("(c#3 = abc)", schema) is None, "an unquoted value is not guessed"


def test_import_missing_source_is_a_clear_error(log, tmp_path):
    with pytest.raises(ImportSourceError, match="cannot read"):
        import_sql_file(log, tmp_path / "nope.sql")


@pytest.mark.spark
def test_dataframe_scans_match_the_sql_path(spark, tmp_path):
    """A DataFrame and the equivalent SQL give the same canonical filters."""
    from pyspark.sql import functions as F

    from querylog.dataframe import dataframe_scans
    from querylog.predicates.attribute import scan_filters

    path = str(tmp_path / "t")
    spark.range(100).selectExpr(
        "id", "date_add(date'2024-01-01', cast(id as int)) AS d", "cast(id as string) AS s"
    ).write.parquet(path)
    df = spark.read.parquet(path)
    query = df.filter(
        (F.col("d") >= "2024-02-01") & (F.month("d") == 3) & F.col("s").isin("1", "2") & F.col("s").startswith("1")
    )
    ((table, filters, columns),) = dataframe_scans(query, {path: "t"})
    expected = (
        scan_filters(
            "SELECT * FROM t WHERE d >= DATE '2024-02-01' AND month(d) = 3 AND s IN ('1', '2') AND s LIKE '1%'"
        )
        .scans[0]
        .filters
    )
    assert table == "t"
    assert tuple(filters) == expected
    assert columns == ["d", "id", "s"]
