"""Parsing SQL text from users' queries with sqlglot (Spark dialect by default).

Bare predicates go through ``sqlglot.condition`` (plain ``parse_one`` turns ``comment LIKE ...`` into a
``Command``, COMMENT being a statement keyword). Full statements must contain a query; anything else
(DDL, SET, a syntax error) raises `PredicateError` with a reason the importers quarantine.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from querylog.errors import PredicateError

DIALECT = "spark"
QUERY_TYPES = (exp.Select, exp.Union, exp.Intersect, exp.Except)


def parse_condition(text: str, dialect: str = DIALECT) -> exp.Expr:
    """A boolean predicate, e.g. ``"l_shipdate >= DATE '1994-01-01'"``."""
    if not text or not text.strip():
        raise PredicateError("empty predicate")
    try:
        return sqlglot.condition(text, dialect=dialect)
    except (ParseError, TokenError, ValueError) as err:
        raise PredicateError(f"cannot parse predicate {text[:200]!r}: {_first_line(err)}") from err
    except RecursionError as err:  # untrusted text nested beyond the parser's recursion
        raise PredicateError(f"cannot parse predicate {text[:200]!r}: nested too deeply") from err


def parse_query(sql: str, dialect: str = DIALECT) -> exp.Expr:
    """The query inside a statement: a SELECT (or set operation), also inside INSERT ... SELECT and
    CREATE TABLE ... AS SELECT. Raises `PredicateError` for statements that read no table."""
    if not sql or not sql.strip():
        raise PredicateError("empty statement")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (ParseError, TokenError, ValueError) as err:
        raise PredicateError(f"unparseable SQL: {_first_line(err)}") from err
    except RecursionError as err:
        raise PredicateError("unparseable SQL: nested too deeply for the parser") from err
    if len(statements) != 1:
        raise PredicateError(f"expected one statement, found {len(statements)}")
    statement = statements[0]
    if isinstance(statement, QUERY_TYPES):
        return statement
    if isinstance(statement, exp.Insert | exp.Create):
        query = statement.expression
        if isinstance(query, QUERY_TYPES):
            return query
    raise PredicateError(f"not a query: {type(statement).__name__.upper()} statement")


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
