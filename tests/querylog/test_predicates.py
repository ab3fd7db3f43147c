"""The predicate model: golden files for attribution and normalisation, classification, allow-list."""

from __future__ import annotations

import dataclasses
import json

import pytest
from sqlglot import exp

from querylog.errors import PredicateError, UnsafeExpressionError
from querylog.predicates.allowlist import check_evaluable, unsafe_parts
from querylog.predicates.attribute import scan_filters
from querylog.predicates.classify import ZShape, classify_text
from querylog.predicates.normalize import canonical_conjuncts, parse_canonical, sql
from querylog.predicates.parse import parse_condition, parse_query
from tests.golden import FIXTURES, load_cases

SCHEMA = json.loads((FIXTURES / "tpch" / "schema.json").read_text())


def _render(scans) -> tuple[str, ...]:
    ordered = sorted(scans.scans, key=lambda s: (s.table, s.alias, s.filters))
    return tuple(f"{s.table} AS {s.alias}: " + (" && ".join(s.filters) or "-") for s in ordered)


@pytest.mark.parametrize(
    "case", load_cases("querylog/tpch_scans.txt") + load_cases("querylog/scans.txt"), ids=lambda c: c.title
)
def test_scan_filters_golden(case):
    assert _render(scan_filters(case.source, SCHEMA)) == case.expected


@pytest.mark.parametrize("case", load_cases("querylog/normalize.txt"), ids=lambda c: c.title)
def test_normalize_golden(case):
    assert tuple(canonical_conjuncts(parse_condition(case.source))) == case.expected


def test_canonical_text_is_a_fixed_point():
    """Normalising canonical text again changes nothing (the log stores canonical text)."""
    for case in load_cases("querylog/normalize.txt"):
        for text in case.expected:
            assert canonical_conjuncts(parse_canonical(text)) == [text]


def test_read_columns_per_scan():
    scans = scan_filters(
        "SELECT l.l_orderkey, sum(l.l_extendedprice) FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
        "WHERE o.o_orderdate > DATE '1995-01-01' GROUP BY l.l_orderkey",
        SCHEMA,
    ).scans
    columns = {s.alias: s.columns for s in scans}
    assert columns["l"] == ("l_extendedprice", "l_orderkey")
    assert columns["o"] == ("o_orderdate", "o_orderkey")


TPCH_QUERIES = sorted((FIXTURES / "tpch").glob("q*.sql"))


def _lineitem_filters(sql: str, schema) -> set[str]:  # type: ignore[no-untyped-def]
    return {f for scan in scan_filters(sql, schema).scans if scan.table == "lineitem" for f in scan.filters}


@pytest.mark.parametrize("query", TPCH_QUERIES, ids=lambda p: p.stem)
def test_only_lineitem_known_gives_the_same_lineitem_filters(query):
    """A service watching only lineitem knows only its schema: every statement still resolves, the
    lineitem filters are those found with every schema known, and none reads another table's column
    (join conditions such as l_orderkey = o_orderkey in q4's EXISTS are not scan filters)."""
    sql = query.read_text()
    partial = _lineitem_filters(sql, {"lineitem": SCHEMA["lineitem"]})
    assert partial == _lineitem_filters(sql, SCHEMA)
    lineitem_columns = set(SCHEMA["lineitem"])
    for text in partial:
        columns = {c.name.lower() for c in parse_condition(text).find_all(exp.Column)}
        assert columns <= lineitem_columns, f"{text} reads a column lineitem does not have"


@pytest.mark.parametrize("query", TPCH_QUERIES, ids=lambda p: p.stem)
def test_no_schema_at_all_quarantines_nothing(query):
    """Without any schema, unknown tables get open schemas: no statement fails to resolve."""
    scan_filters(query.read_text())


def test_a_column_absent_from_a_known_schema_never_belongs_to_it():
    """In a correlated subquery over lineitem, p_partkey is not lineitem's: the comparison is a join."""
    sql = (
        "SELECT count(*) FROM part WHERE p_size = 3 AND EXISTS "
        "(SELECT 1 FROM lineitem WHERE l_partkey = p_partkey AND l_quantity < 5)"
    )
    scans = {s.table: s.filters for s in scan_filters(sql, {"lineitem": SCHEMA["lineitem"]}).scans}
    assert scans["lineitem"] == ("l_quantity < 5",)
    assert scans["part"] == ("p_size = 3",)


def test_a_name_two_unknown_tables_could_own_is_not_attributed():
    sql = "SELECT * FROM lineitem, a, b WHERE x = 1 AND l_quantity < 5 AND a.y = 2"
    scans = {s.table: s.filters for s in scan_filters(sql, {"lineitem": SCHEMA["lineitem"]}).scans}
    assert scans == {"lineitem": ("l_quantity < 5",), "a": ("y = 2",), "b": ()}


def test_an_unqualified_column_belongs_to_the_one_table_of_its_own_scope():
    """No schema at all: o_orderdate is written in the outer scope, whose only table is orders, so a
    correlated subquery over lineitem does not make it ambiguous (it did: orders recorded no filter)."""
    sql = (
        "SELECT o_orderpriority, count(*) FROM orders o WHERE o_orderdate >= DATE '1993-07-01' AND EXISTS "
        "(SELECT * FROM lineitem l WHERE l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate) "
        "GROUP BY 1"
    )
    result = scan_filters(sql)
    scans = {s.table: s.filters for s in result.scans}
    assert scans == {
        "orders": ("o_orderdate >= CAST('1993-07-01' AS DATE)",),
        "lineitem": ("l_commitdate < l_receiptdate",),
    }
    assert result.unattributed == ()


def test_the_same_unqualified_name_in_two_scopes_belongs_to_each_scopes_table():
    sql = "SELECT count(*) FROM a WHERE id = 1 AND EXISTS (SELECT 1 FROM b WHERE id = 2 AND b.x = a.x)"
    scans = {s.table: s.filters for s in scan_filters(sql).scans}
    assert scans == {"a": ("id = 1",), "b": ("id = 2",)}


def test_a_scope_with_a_known_table_having_the_column_owns_it():
    """The inner scope's known table has `flag`; the outer unknown table is not given it."""
    sql = "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM k WHERE flag = 1 AND k.id = t.id) AND v > 2"
    scans = {s.table: s.filters for s in scan_filters(sql, {"k": {"flag": "int", "id": "int"}}).scans}
    assert scans == {"k": ("flag = 1",), "t": ("v > 2",)}


def test_star_without_schema_reads_everything():
    (scan,) = scan_filters("SELECT * FROM t WHERE a > 1").scans
    assert scan.columns == ("*",) and scan.filters == ("a > 1",)


def test_join_predicates_are_counted():
    result = scan_filters(
        "SELECT * FROM lineitem l, orders o WHERE l.l_orderkey = o.o_orderkey AND l.l_tax < o.o_totalprice",
        SCHEMA,
    )
    assert result.join_predicates == 2
    assert all(not s.filters for s in result.scans)


def test_ambiguous_columns_without_schema_are_reported_not_guessed():
    result = scan_filters("SELECT * FROM a JOIN b ON a.id = b.id WHERE x > 3")
    assert result.unattributed == ("x > 3",)
    assert all(not s.filters for s in result.scans)


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TABLE t (a INT)",
        "SET spark.sql.shuffle.partitions = 4",
        "SELEC * FROM t",
        "",
        "SELECT 1; SELECT 2",
    ],
)
def test_statements_that_are_not_single_queries_are_rejected(statement):
    with pytest.raises(PredicateError):
        parse_query(statement)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "l_shipdate >= CAST('1994-01-01' AS DATE)",
            ZShape("l_shipdate", ">=", "CAST('1994-01-01' AS DATE)", "l_shipdate"),
        ),
        ("MONTH(l_shipdate) = 12", ZShape("MONTH(l_shipdate)", "=", "12", "l_shipdate")),
        ("STARTSWITH(p_name, 'forest')", ZShape("p_name", "startswith", "'forest'", "p_name")),
        ("props['country'] = 'NL'", ZShape("props['country']", "=", "'NL'", "props")),
        ("l_quantity * 2 < 4", ZShape("l_quantity * 2", "<", "4", "l_quantity")),
        (
            "l_shipmode IN ('MAIL', 'SHIP')",
            ZShape("l_shipmode", "in", "('MAIL', 'SHIP')", "l_shipmode", ("'MAIL'", "'SHIP'")),
        ),
        ("NOT l_shipmode IN ('MAIL', 'SHIP')", None),
        ("l_shipmode IN ('MAIL', NULL)", None),
        (
            "l_extendedprice * (1 - l_discount) > 100",
            ZShape("l_extendedprice * (1 - l_discount)", ">", "100", "l_discount"),
        ),
        ("l_comment LIKE '%special%'", None),
        ("l_commitdate < l_receiptdate", None),
        ("p_brand <> 'Brand#45'", None),
        ("a = 1 OR b = 2", None),
        ("NOT STARTSWITH(p_type, 'MEDIUM')", None),
        ("my_udf(x) = 1", ZShape("MY_UDF(x)", "=", "1", "x")),
    ],
)
def test_classification(text, expected):
    assert classify_text(text).z == expected


def test_allow_list_accepts_deterministic_functions():
    for text in [
        "MONTH(d) = 12",
        "LOWER(s) LIKE '%a%'",
        "m['k'] = 'v'",
        "CAST(x AS INT) > 3",
        "pmod(x, 7) = 1",
        "DATEDIFF(a, b) < 3",
        "s RLIKE '^a'",
        "COALESCE(x, 0) > 1",
        "s.a.b = 1",
        "x IN (1, 2)",
        "d = DATE 'epoch' OR t > TIMESTAMP '2024-01-01 12:00:00'",
    ]:
        check_evaluable(parse_canonical(text))


@pytest.mark.parametrize(
    ("text", "offender"),
    [
        ("my_udf(x) = 1", "my_udf()"),
        ("reflect('java.lang.Runtime', 'getRuntime') IS NULL", "reflect()"),
        ("rand() < 0.5", "rand()"),
        ("d > current_date()", "current_date()"),
        ("t <= TIMESTAMP 'now'", "CAST('now' AS TIMESTAMP) (read by the clock)"),  # review 66: read when run
        ("d < DATE 'tomorrow'", "CAST('tomorrow' AS DATE) (read by the clock)"),
        ("t > TIMESTAMP 'T12:00'", "CAST('T12:00' AS TIMESTAMP) (read by the clock)"),
        ("d = DATE 'today UTC'", "CAST('today UTC' AS DATE) (read by the clock)"),
        ("t > TIMESTAMP 'T12'", "CAST('T12' AS TIMESTAMP) (read by the clock)"),
        ("java_method('a', 'b') = 1", "java_method()"),
        ("x IN (SELECT y FROM t)", "Select"),
    ],
)
def test_allow_list_rejects_the_rest(text, offender):
    expression = parse_condition(text)
    assert offender in unsafe_parts(expression)
    with pytest.raises(UnsafeExpressionError, match="allow-list"):
        check_evaluable(expression)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("s RLIKE '(a+)+$'", "nested quantifier"),
        ("REGEXP_EXTRACT(s, '(a*)*b', 1) = 'z'", "nested quantifier"),
        ("s RLIKE '(?:[a-z]+ ?)+$'", "nested quantifier"),
        ("s RLIKE '(a)x\\\\1'", "backreference"),  # Spark SQL text '(a)x\\1' is the regex (a)x\1
        ("s RLIKE t", "not a string literal"),
        ("s RLIKE '(unclosed'", "cannot be checked"),
        ("s LIKE '%a%b%c%d%e%f%g%h%i%j%'", "11 '%' wildcards"),
        ("x IN (" + ", ".join(str(i) for i in range(1001)) + ")", "IN list of 1,001 values"),
        ("s = '" + "y" * 1001 + "'", "string literal of 1,001 characters"),
        ("x = " + " + ".join(["1"] * 60), "nested deeper"),
    ],
)
def test_predicates_with_unbounded_cost_are_refused_with_the_reason(text, why):
    """Logged predicates are untrusted: a catastrophic-backtracking regex or a giant literal would be
    evaluated on every row of every sample and OPTIMIZE."""
    with pytest.raises(UnsafeExpressionError, match="unbounded evaluation cost") as caught:
        check_evaluable(parse_condition(text))
    assert why in str(caught.value)


@pytest.mark.parametrize(
    "text", ["s RLIKE '^ab[0-9]+c$'", "s RLIKE '(a|b)*c'", "s LIKE '%furiously%'", "s RLIKE '(?>a+)+b'"]
)
def test_bounded_regexes_and_patterns_stay_evaluable(text):
    check_evaluable(parse_condition(text))


def test_a_predicate_nested_beyond_the_parser_is_a_clear_error():
    with pytest.raises(PredicateError, match="nested too deeply"):
        parse_condition("x = " + "(" * 2000 + "1" + ")" * 2000)


def test_sql_renders_quoted_identifiers_safely():
    """A hostile column name cannot escape into SQL: sqlglot quotes and escapes identifiers."""
    expression = parse_condition("`a`` OR 1=1 --` = 1")
    assert expression.sql(dialect="spark", identify=True) == "`a`` OR 1=1 --` = 1"
    assert sql(expression) == "`a`` OR 1=1 --` = 1"


def test_template_classification_matches_full_classification():
    """classify_text reuses one parse per token template; it must agree with parsing every text."""
    from optimizer.tpch import lineitem_queries
    from querylog.predicates.classify import classify

    texts = {t for case in load_cases("querylog/normalize.txt") for t in case.expected}
    for case in load_cases("querylog/tpch_scans.txt") + load_cases("querylog/scans.txt"):
        for line in case.expected:
            texts.update(f for f in line.split(": ", 1)[1].split(" && ") if f != "-")
    for query in lineitem_queries(300, seed=9):
        texts.update(scan_filters(query, SCHEMA).scans[0].filters)
    texts.update(["SUBSTRING(c_phone, 1, 2) = '13'", "SUBSTRING(c_phone, 1, 3) = '1'", "STARTSWITH(LOWER(s), 'ab')"])
    for text in sorted(texts):
        assert classify_text(text) == classify(parse_canonical(text)), text


def test_a_long_and_chain_is_cut_to_its_first_conjuncts_soundly():
    """Generated queries AND thousands of comparisons; sqlglot's pushdown is quadratic in the chain.
    The capture keeps the first `MAX_CONJUNCTS` (a weaker filter: every row the query reads satisfies
    it) and says it cut; a subquery conjunct past the cut is kept, so no scan disappears."""
    from datetime import UTC, datetime

    from querylog.capture import capture_sql
    from querylog.predicates.truncate import MAX_CONJUNCTS

    chain = " AND ".join(f"c{i % 5} <> {i}" for i in range(300))
    subquery = "EXISTS (SELECT 1 FROM other o WHERE o.k = events.k AND o.v = 1)"
    sql = f"SELECT count(*) FROM events WHERE {chain} AND {subquery}"
    result = scan_filters(sql)
    scans = {s.table: s for s in result.scans}
    every = {f"c{i % 5} <> {i}" for i in range(300)}
    assert result.dropped == 300 - MAX_CONJUNCTS
    assert len(scans["events"].filters) == MAX_CONJUNCTS and set(scans["events"].filters) <= every
    assert scans["other"].filters == ("v = 1",)
    captured = capture_sql(sql, datetime(2026, 1, 1, tzinfo=UTC), "test")
    assert captured.truncated == 1 and not captured.quarantined


def test_a_statement_past_the_size_limit_is_quarantined_with_the_reason():
    from datetime import UTC, datetime

    from querylog.capture import capture_sql
    from querylog.predicates.truncate import MAX_STATEMENT_CHARS

    sql = "SELECT * FROM t WHERE s = '" + "x" * MAX_STATEMENT_CHARS + "'"
    captured = capture_sql(sql, datetime(2026, 1, 1, tzinfo=UTC), "test")
    assert not captured.scans
    assert "characters (limit 500,000)" in captured.quarantined[0].reason


def test_a_pushed_filter_text_and_a_stored_row_are_bounded_too():
    from datetime import UTC, datetime

    from querylog.capture import capture_filters
    from querylog.predicates.truncate import MAX_SCAN_FILTERS
    from querylog.records import scans_from_arrow, scans_to_arrow

    at = datetime(2026, 1, 1, tzinfo=UTC)
    captured = capture_filters("t", [" AND ".join(f"a <> {i}" for i in range(200))], ["a"], at, "test")
    (scan,) = captured.scans
    assert len(scan.filters) == MAX_SCAN_FILTERS and captured.truncated == 1
    wide = dataclasses.replace(scan, filters=tuple(f"a <> {i}" for i in range(500)))
    (read,) = scans_from_arrow(scans_to_arrow([wide]))
    assert len(read.filters) == MAX_SCAN_FILTERS and set(read.filters) <= set(wide.filters)
