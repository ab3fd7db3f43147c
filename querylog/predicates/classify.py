"""Z-order shaped or SOP-only: the shape of a canonical conjunct (thesis Algorithm 1, P1).

A conjunct is **Z-order shaped** when it compares an expression over exactly one column with a
constant by ``< <= > >= =``, or is a prefix test ``STARTSWITH(expr, 'p')`` (``LIKE 'p%'`` is
normalised to that). The expression and the constant are kept apart: the expression is the Z
candidate, the constant one of its comparison points. Everything else (``IN`` lists, ``LIKE
'%x%'``, regexes, ``<>``, OR of several columns, UDF-like calls, two-column comparisons) is
**SOP-only**: the whole predicate is the candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from querylog.predicates.normalize import parse_canonical, sql

Z_OPERATORS: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}


@dataclass(frozen=True)
class ZShape:
    """``expression op literal`` with `expression` over the single column `column`."""

    expression: str
    op: str  # one of = < <= > >= startswith
    literal: str
    column: str


@dataclass(frozen=True)
class Conjunct:
    """One canonical filter conjunct of a table scan."""

    sql: str
    columns: tuple[str, ...]
    z: ZShape | None

    @property
    def is_z_shaped(self) -> bool:
        return self.z is not None


def column_names(expression: exp.Expression) -> tuple[str, ...]:
    """Top-level columns an expression reads (a struct field counts as its root column)."""
    names = set()
    for column in expression.find_all(exp.Column):
        names.add(column.name.lower())
    return tuple(sorted(names))


def _is_constant(expression: exp.Expression) -> bool:
    return not any(isinstance(n, exp.Column | exp.Subquery | exp.Select) for n in expression.walk())


def z_shape(expression: exp.Expression) -> ZShape | None:
    if isinstance(expression, exp.StartsWith):
        left, right, op = expression.this, expression.expression, "startswith"
    elif type(expression) in Z_OPERATORS:
        left, right, op = expression.this, expression.expression, Z_OPERATORS[type(expression)]
    else:
        return None
    columns = column_names(left)
    if len(columns) != 1 or not _is_constant(right) or isinstance(right, exp.Null):
        return None
    if any(isinstance(n, exp.Subquery | exp.Select) for n in left.walk()):
        return None
    return ZShape(expression=sql(left), op=op, literal=sql(right), column=columns[0])


def classify(expression: exp.Expression) -> Conjunct:
    """Classify a canonical conjunct (output of `normalize.normalize_conjuncts`)."""
    return Conjunct(sql=sql(expression), columns=column_names(expression), z=z_shape(expression))


def classify_text(text: str) -> Conjunct:
    """Classify a canonical conjunct stored as text in the query log."""
    return classify(parse_canonical(text))
