"""Statement templates: filling a template gives exactly what the full derivation gives, for any values."""

from __future__ import annotations

import json
import random

import pytest
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from querylog.errors import PredicateError
from querylog.predicates.attribute import QueryScans, scan_filters
from querylog.predicates.templates import StatementTemplates
from tests.golden import FIXTURES, load_cases

SCHEMA = json.loads((FIXTURES / "tpch" / "schema.json").read_text())
NUMBERS = ("1", "5", "10", "2.50", "0.1", "3", "1e3", "007")
STRINGS = ("1995-01-01", "1996-03-15", "1995-1-4", "R", "it's", "a\\b", "%x%", "abc%", "1")
# Shapes where a literal's value changes what the passes do (merged ranges, IN lists, folded
# arithmetic, date truncation, LIKE prefixes), next to ones where it does not.
ADVERSARIAL = (
    "SELECT a FROM t WHERE x > 5 AND x > 3",
    "SELECT a FROM t WHERE x >= 5 AND x < 3 AND y = 'R'",
    "SELECT a FROM t WHERE x = 1 OR x = 2",
    "SELECT a FROM t WHERE (x = 1 AND y = 2) OR (x = 1 AND z = 3)",
    "SELECT a FROM t WHERE x > 5 AND (x > 3 OR y < 2)",
    "SELECT a FROM t WHERE X > 5 AND x < 3",
    "SELECT a FROM t WHERE x + 1 = 5",
    "SELECT a FROM t WHERE x * (1 - y) > 10",
    "SELECT a FROM t WHERE DATE_TRUNC('MONTH', d) = DATE '1995-01-01'",
    "SELECT a FROM t WHERE d < DATE '1995-01-01' + INTERVAL '1' YEAR AND d >= DATE '1995-01-01'",
    "SELECT a FROM t WHERE x BETWEEN 5 AND 3 AND s LIKE 'abc%'",
    "SELECT a FROM t WHERE NOT x > 5 AND x <> 4 AND 3 < y",
    "SELECT a FROM t WHERE x > 5 /* hint */ AND y = 'R' GROUP BY 1 LIMIT 10",
    "SELECT a FROM t WHERE x > 5 AND y > 5 AND z IN (1, 2, 2)",
    "SELECT a FROM t WHERE s.f > 5 AND CAST(x AS DECIMAL(10, 2)) > 1.5",
    "SELECT a FROM t WHERE d >= CAST('1995-01-01' AS TIMESTAMP) AND x = -5",
    "SELECT t.a FROM t JOIN u ON t.k = u.k WHERE u.x BETWEEN 1 AND 5 AND t.y = 'R' AND u.z < 3",
    "SELECT t.a FROM t LEFT JOIN u ON t.k = u.k AND u.x = 5 WHERE t.y > 1 OR u.x = 3",
    "SELECT a FROM t WHERE x = 5 AND x = 5",
)


def _variants(sql: str, rng: random.Random, count: int) -> list[str]:
    """`sql` with each literal replaced by one of a few values (so templates recur, values collide,
    and orders between them change), `count` times."""
    tokens = Dialect.get_or_raise("spark").tokenizer_class().tokenize(sql)
    literals = [t for t in tokens if t.token_type in (TokenType.STRING, TokenType.NUMBER)]
    variants = []
    for _ in range(count):
        pieces, position = [], 0
        for token in literals:
            if token.token_type == TokenType.NUMBER:
                value = rng.choice(NUMBERS[:3]) if rng.random() < 0.7 else rng.choice(NUMBERS)
            else:
                value = exp.Literal.string(rng.choice(STRINGS[:3] if rng.random() < 0.7 else STRINGS)).sql("spark")
            pieces += [sql[position : token.start], value]
            position = token.end + 1
        variants.append("".join([*pieces, sql[position:]]))
    return variants


def _outcome(derive, sql: str) -> QueryScans | str:  # type: ignore[no-untyped-def]
    try:
        return derive(sql)
    except PredicateError as err:
        return f"PredicateError: {err}"


@pytest.mark.parametrize("schema", [SCHEMA, None], ids=["schema", "no schema"])
def test_filled_templates_equal_the_full_derivation(schema):
    """Every golden statement and every adversarial shape, with literals varied: the memo answers each
    exactly as `scan_filters` does, and it did fill templates (the test would see a wrong one)."""
    rng = random.Random(7)
    statements = [c.source for c in load_cases("querylog/tpch_scans.txt") + load_cases("querylog/scans.txt")]
    stream = [v for sql in [*statements, *ADVERSARIAL] for v in _variants(sql, rng, 10)]
    rng.shuffle(stream)
    templates = StatementTemplates(schema)
    for sql in stream:
        assert _outcome(templates, sql) == _outcome(lambda s: scan_filters(s, schema), sql), sql
    stats = templates.stats
    assert stats.filled > len(stream) // 6, stats  # many statements have too many literals to recur
    assert stats.rejected >= 1, "x + 1 = 5 is rewritten to x = 4: its template must fail its check"


def test_value_dependent_literals_are_part_of_the_template():
    """Merged ranges and IN lists keep their values in the key: different values, different scans."""
    templates = StatementTemplates()
    for _ in range(3):
        merged = templates("SELECT a FROM t WHERE x > 5 AND x > 3")
    assert merged.scans[0].filters == ("x > 5",)
    assert templates("SELECT a FROM t WHERE x > 2 AND x > 3").scans[0].filters == ("x > 3",)
    # the shape's first sighting, the template's first, its derivation, then filled in
    for value in ("1995-01-01", "1995-02-01", "1995-03-01", "1995-04-01"):
        (scan,) = templates(f"SELECT a FROM t WHERE d >= DATE '{value}' AND y = 'R'").scans
    assert scan.filters == ("d >= CAST('1995-04-01' AS DATE)", "y = 'R'")
    assert templates.stats.filled == 1, templates.stats


def test_the_memo_is_bounded():
    templates = StatementTemplates(capacity=10)
    for i in range(50):
        for _ in range(3):
            templates(f"SELECT c{i} FROM t WHERE x > {i}")
    assert len(templates._once) + len(templates._templates) + len(templates._slots) <= 10
    assert templates("SELECT c1 FROM t WHERE x > 7").scans[0].filters == ("x > 7",)


def test_a_literal_compared_with_a_function_is_part_of_the_template():
    """DATE_TRUNC(...) = DATE 'd' becomes a range only when d is aligned: a template derived from
    unaligned dates must not answer for an aligned one."""
    templates = StatementTemplates()
    for day in ("1996-03-15", "1996-03-16", "1996-03-17", "1996-03-18", "1995-01-01"):
        sql = f"SELECT a FROM t WHERE DATE_TRUNC('MONTH', d) = DATE '{day}' AND y = 'R'"
        assert templates(sql) == scan_filters(sql), sql
    assert templates.stats.filled == 0, templates.stats
