"""Join derivation only for the tables deltaopt optimises (issue 49): a paused or unlisted table's scans
are logged without derived filters and never cost the deriver a key; a derivation never walks back
through the table it derives for; an import pins the sources once around its prefetch and captures."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from optimizer.cli.querylog_context import derivation_targets, sql_context
from optimizer.config import Config, parse_config
from optimizer.joins import JoinDeriver
from querylog.capture import SqlContext, capture_sql, prefetch_derived
from querylog.importers.eventlog import import_event_log
from querylog.importers.sqltext import import_history, import_sql_file
from querylog.predicates.attribute import JoinKey
from querylog.recorder import Recorder
from querylog.records import DerivedFilter
from querylog.store import QueryLogTable
from tests.querylog.test_plan_joins import execution_line, inner_join, plan_scan

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
SCHEMA = """
CREATE TABLE lineorder (lo_orderkey BIGINT, lo_partkey BIGINT, lo_suppkey BIGINT, lo_orderdate INT,
                        lo_discount INT, lo_revenue BIGINT);
CREATE TABLE d_date (d_datekey INT, d_year INT);
CREATE TABLE part (p_partkey BIGINT, p_brand1 STRING);
"""
STAR = (
    "SELECT sum(lo_revenue) FROM lineorder JOIN d_date ON lo_orderdate = d_datekey "
    "JOIN part ON lo_partkey = p_partkey WHERE d_year = 1993 AND p_brand1 = 'MFGR#1338'"
)
FACT_FILTERED = (
    "SELECT count(*) FROM lineorder JOIN d_date ON lo_orderdate = d_datekey WHERE lo_discount < 2 AND d_year = 1994"
)
FACT_KEYS = {"lo_orderdate", "lo_partkey"}  # the only columns a key may be asked for: lineorder's


@dataclass
class Recording:
    """A `Derive` that records what it is asked (keys, batches, pins) and derives ``column <= 99``;
    `accepts` refuses the sources in `refuse`."""

    refuse: frozenset[str] = frozenset()
    asked: list[JoinKey] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def __call__(self, key: JoinKey) -> tuple[DerivedFilter, ...]:
        self.asked.append(key)
        self.events.append("derive")
        via = f"{key.other}.{key.other_column} WHERE {' AND '.join(key.other_filters)}"
        return (DerivedFilter(f"{key.column} <= 99", via),)

    @contextmanager
    def batch(self) -> Iterator[None]:
        self.events.append("batch")
        yield

    @contextmanager
    def pinned(self) -> Iterator[None]:
        self.events.append("pin")
        yield
        self.events.append("unpin")

    def accepts(self, key: JoinKey) -> bool:
        return key.other not in self.refuse


def star_config(tmp_path: Path) -> Config:
    """lineorder optimised, d_date listed but paused (a source only), part not listed at all."""
    schema = tmp_path / "schema.sql"
    schema.write_text(SCHEMA)
    tables = [
        {"name": "lineorder", "path": "/wh/lineorder"},
        {"name": "d_date", "path": "/wh/d_date", "paused": True},
    ]
    return parse_config({"tables": tables, "schemas": {"file": str(schema)}})


def star_context(tmp_path: Path, derive: Recording) -> SqlContext:
    """The context the CLI builds for `star_config` (`derivation_context`), with `derive` as its deriver."""
    config = star_config(tmp_path)
    return replace(sql_context(config), targets=derivation_targets(config), derive=derive)


def star_plan() -> dict:  # type: ignore[type-arg]
    """A DataFrame star query's plan: lineorder (filtered) joined with d_date and part (both filtered)."""
    output = "lo_orderdate#1,lo_partkey#2L,lo_discount#3"
    fact = plan_scan(
        "/wh/lineorder", output, "lo_orderdate:int,lo_partkey:bigint,lo_discount:int", "LessThan(lo_discount,2)"
    )
    date = plan_scan("/wh/d_date", "d_datekey#10,d_year#11", "d_datekey:int,d_year:int", "EqualTo(d_year,1993)")
    part = plan_scan(
        "/wh/part", "p_partkey#20L,p_brand1#21", "p_partkey:bigint,p_brand1:string", "EqualTo(p_brand1,B7)"
    )
    dated = inner_join("lo_orderdate#1", "d_datekey#10", fact, date)
    return inner_join("lo_partkey#2L", "p_partkey#20L", dated, part)


def test_no_derivation_for_paused_or_unlisted_tables(tmp_path):
    # capture_sql: the paused d_date's scan is logged, without derived filters and without asking
    derive = Recording()
    context = star_context(tmp_path, derive)
    for sql in (STAR, FACT_FILTERED):
        captured = capture_sql(sql, T0, "test", context)
        by_table = {s.table_id: s for s in captured.scans}
        assert set(by_table) == {"lineorder", "d_date"}  # watched: part is not listed
        assert by_table["d_date"].derived == ()
        assert by_table["lineorder"].derived
    assert {k.column for k in derive.asked} == FACT_KEYS
    # prefetch_derived: statements and plan scans of the target only
    derive = Recording()
    context = star_context(tmp_path, derive)
    plans = [
        ("d_date", [JoinKey("d_datekey", "lineorder", "lo_orderdate", ("lo_discount < 2",))]),
        ("/wh/part", [JoinKey("p_partkey", "lineorder", "lo_partkey", ("lo_discount < 2",))]),
        ("lineorder", [JoinKey("lo_partkey", "/wh/part", "p_partkey", ("p_brand1 = 'B7'",))]),
    ]
    prefetch_derived([STAR, FACT_FILTERED], context, plans=plans)
    assert "batch" in derive.events
    assert {k.column for k in derive.asked} == FACT_KEYS
    # the event log's plan path (an execution without SQL text)
    derive = Recording()
    context = star_context(tmp_path, derive)
    events = tmp_path / "events.jsonl"
    events.write_text(execution_line(1, star_plan()) + "\n")
    log = QueryLogTable(str(tmp_path / "eventlog_log"))
    import_event_log(log, events, context)
    assert {k.column for k in derive.asked} == FACT_KEYS
    assert [r.derived for r in log.read("d_date")] == [()]
    assert {d.via for r in log.read("lineorder") for d in r.derived} == {
        "d_date.d_datekey WHERE d_year = 1993",
        "/wh/part.p_partkey WHERE p_brand1 = 'B7'",
    }
    # the recorder's plan path (recorded scans with their joins) and its SQL path
    derive = Recording()
    context = star_context(tmp_path, derive)
    log = QueryLogTable(str(tmp_path / "recorder_log"))
    with Recorder(log, tmp_path / "spill", context=context) as recorder:
        for table_id, joins in plans:
            recorder.record(table_id, [], ["x"], ts=T0, joins=joins)
        recorder.record_sql(STAR, ts=T0)
    assert {k.column for k in derive.asked} == FACT_KEYS
    assert [r.derived for r in log.read("d_date")] == [(), ()]
    assert [r.derived for r in log.read("/wh/part")] == [()]
    assert all(r.derived for r in log.read("lineorder"))


def test_log_alone_targets_only_the_table_beside_the_log(tmp_path):
    from optimizer.cli.querylog import _located_table

    located = next(iter(_located_table(str(tmp_path / "lineorder_querylog"))))
    assert derivation_targets(None, located) == {"lineorder"}
    assert derivation_targets(None, next(iter(_located_table(str(tmp_path / "elsewhere"))), None)) == set()
    derive = Recording()
    context = SqlContext(targets=derivation_targets(None, located), derive=derive)
    qualified = (
        "SELECT 1 FROM lineorder l JOIN d_date d ON l.lo_orderdate = d.d_datekey "
        "WHERE l.lo_discount < 2 AND d.d_year = 1994"
    )
    captured = capture_sql(qualified, T0, "test", context)
    assert {s.table_id: bool(s.derived) for s in captured.scans} == {"lineorder": True, "d_date": False}
    assert [k.column for k in derive.asked] == ["lo_orderdate"]


def test_no_chain_through_the_target_table():
    derive = Recording()
    context = SqlContext(targets={"lineorder"}, derive=derive)
    # a self-join: the scan would derive from its own table
    self_join = "SELECT 1 FROM lineorder a JOIN lineorder b ON a.lo_orderkey = b.lo_orderkey WHERE b.lo_discount < 2"
    captured = capture_sql(self_join, T0, "test", context)
    assert [s.derived for s in captured.scans] == [(), ()]
    assert derive.asked == []
    # a chain whose outer table is the target itself (another scan of it) is never asked
    back = (
        "SELECT 1 FROM lineorder a JOIN supplier s ON a.lo_suppkey = s.s_suppkey "
        "JOIN lineorder b ON s.s_suppkey = b.lo_suppkey WHERE b.lo_discount < 2"
    )
    capture_sql(back, T0, "test", context)
    assert all(k.other != "lineorder" for k in derive.asked)
    # a snowflake chain through a real middle dimension still derives for the fact...
    snowflake = (
        "SELECT 1 FROM lineorder l JOIN supplier s ON l.lo_suppkey = s.s_suppkey "
        "JOIN nation n ON s.s_nationkey = n.n_nationkey WHERE n.n_name = 'GERMANY'"
    )
    derive.asked.clear()
    (fact,) = [s for s in capture_sql(snowflake, T0, "test", context).scans if s.table_id == "lineorder"]
    assert [(k.column, k.other) for k in derive.asked] == [("s_nationkey", "nation"), ("lo_suppkey", "supplier")]
    assert {d.filter for d in fact.derived} == {"lo_suppkey <= 99"}
    # ...but a middle the deriver refuses (`accepts`: a fact-side source) costs no key on its outer table
    refusing = Recording(refuse=frozenset({"supplier"}))
    capture_sql(snowflake, T0, "test", replace(context, derive=refusing))
    assert refusing.asked == []


@pytest.mark.parametrize("way", ["sql file", "history", "event log", "recorder"])
def test_an_import_pins_the_sources_once_around_prefetch_and_captures(tmp_path, way):
    derive = Recording()
    context = star_context(tmp_path, derive)
    log = QueryLogTable(str(tmp_path / "log"))
    if way == "sql file":
        (tmp_path / "q.sql").write_text(f"{STAR};\n{FACT_FILTERED};\n")
        import_sql_file(log, tmp_path / "q.sql", context)
    elif way == "history":
        rows = [{"query_text": sql, "start_time": "2024-03-01T12:00:00Z"} for sql in (STAR, FACT_FILTERED)]
        (tmp_path / "h.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        import_history(log, tmp_path / "h.jsonl", context)
    elif way == "event log":
        (tmp_path / "events.jsonl").write_text(execution_line(1, star_plan()) + "\n")
        import_event_log(log, tmp_path / "events.jsonl", context)
    else:
        with Recorder(log, tmp_path / "spill", context=context) as recorder:
            recorder.record_sql(STAR, ts=T0)
            recorder.record_sql(FACT_FILTERED, ts=T0)
    assert derive.events.count("pin") == 1
    assert derive.events[0] == "pin" and derive.events[-1] == "unpin"
    assert "batch" in derive.events and "derive" in derive.events  # the prefetch and the captures, inside


def test_derive_through_facts_needs_derive_joins(tmp_path, capsys):
    from optimizer.cli.main import main

    (tmp_path / "q.sql").write_text("SELECT 1 FROM lineorder;\n")
    argv = ["querylog", "import", "--log", str(tmp_path / "lineorder_querylog"), "--sql", str(tmp_path / "q.sql")]
    assert main([*argv, "--derive-through-facts"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--derive-through-facts" in err and "--derive-joins" in err
    assert not (tmp_path / "lineorder_querylog").exists(), "refused before any work"


def test_the_cli_derives_for_the_tables_it_optimises(tmp_path, monkeypatch, caplog):
    """`querylog import --derive-joins` (a Spark session stood in for: nothing is derived here): the
    targets are the configured tables not paused; roles come from `join_role`; --derive-through-facts
    reaches the deriver; with --log alone away from any table, one warning says nothing is derived."""
    import optimizer.runtime
    from optimizer.cli.main import build_parser
    from optimizer.cli.querylog import _querylog_target
    from optimizer.joins import JoinDeriver

    monkeypatch.setattr(optimizer.runtime, "build_session", lambda settings: object())
    schema = tmp_path / "schema.sql"
    schema.write_text(SCHEMA)
    config = tmp_path / "deltaopt.yaml"
    config.write_text(
        "tables:\n"
        "  - {name: lineorder, path: /wh/lineorder, join_role: fact}\n"
        "  - {name: d_date, path: /wh/d_date, paused: true, join_role: dimension}\n"
        f"schemas: {{file: {schema}}}\n"
    )
    sql = tmp_path / "q.sql"
    sql.write_text(STAR)
    base = ["querylog", "import", "--sql", str(sql), "--derive-joins"]
    args = build_parser().parse_args([*base, "--config", str(config), "--table", "lineorder", "--derive-through-facts"])
    _, context = _querylog_target(args)
    assert set(context.targets or ()) == {"lineorder"}
    assert isinstance(context.derive, JoinDeriver)
    assert context.derive.through_facts is True
    assert dict(context.derive.roles) == {"lineorder": "fact", "d_date": "dimension"}
    args = build_parser().parse_args([*base, "--log", str(tmp_path / "lineorder_querylog")])
    _, context = _querylog_target(args)
    assert set(context.targets or ()) == {"lineorder"}
    assert context.derive.through_facts is False
    with caplog.at_level(logging.WARNING):
        _, context = _querylog_target(build_parser().parse_args([*base, "--log", str(tmp_path / "log")]))
    assert context.targets is not None and set(context.targets) == set()
    warned = [r.getMessage() for r in caplog.records if "derivation target" in r.getMessage()]
    assert len(warned) == 1 and "nothing is derived" in warned[0]


@dataclass
class Asking(JoinDeriver):
    """A real `JoinDeriver` (its `accepts` and how it locates tables) that records the keys it is asked
    instead of evaluating them (no Spark); `accept_all` stands in for every middle being a dimension."""

    asked: list[JoinKey] = field(default_factory=list)
    accept_all: bool = False

    def __call__(self, key: JoinKey) -> tuple[DerivedFilter, ...]:
        self.asked.append(key)
        return (DerivedFilter(f"{key.column} <= 99", f"{key.other}.{key.other_column}"),)

    def accepts(self, key: JoinKey) -> bool:
        return self.accept_all or super().accepts(key)


@pytest.mark.parametrize("spelling", ["default.lineorder", "spark_catalog.default.lineorder", "delta.`/wh/lineorder`"])
def test_a_self_join_spelled_otherwise_is_not_derived_from_its_own_table(spelling):
    """The deriver reads ``default.lineorder`` (or a path) as the configured lineorder: a join of the
    target with it, directly or as a chain's outer table, would be a pass over the target itself."""
    locations = {"lineorder": "/wh/lineorder", "supplier": "/wh/supplier", "d_date": "/wh/d_date"}
    derive = Asking(None, locations, accept_all=True)  # type: ignore[arg-type]
    context = SqlContext(targets={"lineorder"}, derive=derive)
    direct = (
        f"SELECT 1 FROM lineorder a JOIN {spelling} b ON a.lo_orderkey = b.lo_partkey "
        "JOIN d_date d ON a.lo_orderdate = d.d_datekey WHERE b.lo_discount < 2 AND d.d_year = 1994"
    )
    (fact,) = [s for s in capture_sql(direct, T0, "test", context).scans if s.table_id == "lineorder"]
    assert [(k.column, k.other) for k in derive.asked] == [("lo_orderdate", "d_date")]
    assert {d.via for d in fact.derived} == {"d_date.d_datekey"}
    derive.asked.clear()
    back = (
        f"SELECT 1 FROM lineorder a JOIN supplier s ON a.lo_suppkey = s.s_suppkey "
        f"JOIN {spelling} b ON s.s_suppkey = b.lo_suppkey WHERE b.lo_discount < 2"
    )
    capture_sql(back, T0, "test", context)
    assert derive.asked == []  # the middle's only filtered neighbour is the target: nothing to derive


def test_a_middle_the_deriver_cannot_locate_or_open_costs_its_outer_table_nothing(tmp_path):
    """`accepts` is False for a source the deriver cannot read: deriving the outer dimension's keys for
    it would be a pass whose result nothing uses."""
    locations = {"supplier": str(tmp_path / "no_such_table"), "nation": str(tmp_path / "nation")}
    derive = Asking(None, locations)  # type: ignore[arg-type]
    assert not derive.accepts(JoinKey("lo_suppkey", "supplier", "s_suppkey", ()))  # located, unreadable
    assert not derive.accepts(JoinKey("lo_suppkey", "unknown_dim", "u_key", ()))  # not located
    context = SqlContext(targets={"lineorder"}, derive=derive)
    for middle in ("supplier", "unknown_dim"):
        chain = (
            f"SELECT 1 FROM lineorder l JOIN {middle} s ON l.lo_suppkey = s.s_suppkey "
            "JOIN nation n ON s.s_nationkey = n.n_nationkey WHERE n.n_name = 'GERMANY'"
        )
        capture_sql(chain, T0, "test", context)
        assert derive.asked == [], middle
