"""Z-order shaped or SOP-only: the shape of a canonical conjunct (thesis Algorithm 1, P1).

A conjunct is **Z-order shaped** when it compares an expression over columns with a constant by
``< <= > >= =``, tests it against a list of constants (``expr IN (a, b)``), or is a prefix test
``STARTSWITH(expr, 'p')`` (``LIKE 'p%'`` is normalised to that). The expression and the constants are
kept apart: the expression is the Z candidate (one *family* of predicates whatever their literals),
each constant one of its comparison points. Everything else (``NOT IN``, ``LIKE '%x%'``, regexes,
``<>``, OR of several columns, comparisons of two expressions) is **SOP-only**: the whole predicate is
the candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from querylog.predicates.normalize import parse_canonical, sql
from querylog.predicates.parse import DIALECT
from querylog.predicates.tree import is_constant

_TOKENIZER = Dialect.get_or_raise(DIALECT).tokenizer_class()

Z_OPERATORS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}


@dataclass(frozen=True)
class ZShape:
    """``expression op literal`` with `expression` reading `column` (the first, alphabetically, when
    it reads several, as ``l_extendedprice * (1 - l_discount)`` does)."""

    expression: str
    op: str  # one of = < <= > >= startswith in
    literal: str  # for "in": the list as written, ``('MAIL', 'SHIP')``
    column: str
    values: tuple[str, ...] = ()  # for "in": each constant of the list

    @property
    def points(self) -> tuple[str, ...]:
        """The comparison points this conjunct contributes to its expression's family."""
        return self.values if self.op == "in" else (self.literal,)


@dataclass(frozen=True)
class Conjunct:
    """One canonical filter conjunct of a table scan."""

    sql: str
    columns: tuple[str, ...]
    z: ZShape | None

    @property
    def is_z_shaped(self) -> bool:
        return self.z is not None


def column_names(expression: exp.Expr) -> tuple[str, ...]:
    """Top-level columns an expression reads (a struct field counts as its root column)."""
    names = set()
    for column in expression.find_all(exp.Column):
        names.add(column.name.lower())
    return tuple(sorted(names))


def z_shape(expression: exp.Expr) -> ZShape | None:
    if isinstance(expression, exp.In):
        return _in_shape(expression)
    if isinstance(expression, exp.StartsWith):
        left, right, op = expression.this, expression.expression, "startswith"
    elif type(expression) in Z_OPERATORS:
        left, right, op = expression.this, expression.expression, Z_OPERATORS[type(expression)]
    else:
        return None
    columns = _left_columns(left)
    if not columns or not _is_literal(right):
        return None
    return ZShape(expression=sql(left), op=op, literal=sql(right), column=columns[0])


def _left_columns(left: exp.Expr) -> tuple[str, ...] | None:
    """The columns a Z candidate's expression reads; None when it reads none or holds a subquery."""
    if any(isinstance(n, exp.Subquery | exp.Select) for n in left.walk()):
        return None
    return column_names(left) or None


def _is_literal(node: exp.Expr) -> bool:
    """A comparison point: a constant that is not NULL."""
    return is_constant(node) and not isinstance(node, exp.Null)


def _in_shape(expression: exp.In) -> ZShape | None:
    """``expr IN (c1, c2, ...)`` with constant, non-NULL items (``NOT IN`` is a `Not` and stays SOP)."""
    left, items = expression.this, expression.expressions
    columns = _left_columns(left)
    if not columns or not items or expression.args.get("query") or expression.args.get("unnest"):
        return None
    if not all(_is_literal(i) for i in items):
        return None
    values = tuple(sql(i) for i in items)
    return ZShape(sql(left), "in", "(" + ", ".join(values) + ")", columns[0], values)


def classify(expression: exp.Expr) -> Conjunct:
    """Classify a canonical conjunct (output of `normalize.normalize_conjuncts`)."""
    return Conjunct(sql=sql(expression), columns=column_names(expression), z=z_shape(expression))


LITERAL_TOKENS = frozenset({TokenType.STRING, TokenType.NUMBER, TokenType.NATIONAL_STRING})


@dataclass(frozen=True)
class _Template:
    """How every text with one token template classifies: token indexes of the Z shape's parts."""

    columns: tuple[str, ...]
    op: str | None  # None: SOP-only
    lhs: tuple[int, int] = (0, 0)  # token index range [first, last] of the expression
    rhs: tuple[int, int] = (0, 0)  # token index range of the constant


_TEMPLATES: dict[tuple[tuple[object, str], ...], _Template] = {}


@lru_cache(maxsize=262_144)
def classify_text(text: str) -> Conjunct:
    """Classify a canonical conjunct stored as text in the query log.

    Texts that differ only in literals tokenise to the same template and parse to the same tree shape
    (a literal token's content never changes the parse), so each template is parsed and classified
    once; the expression and the literal of a Z shape are then cut out of each text at the token
    boundaries found for the template. Parsing dominated analysis of large logs (10x faster).
    """
    tokens = _TOKENIZER.tokenize(text)
    key = tuple((t.token_type, "?" if t.token_type in LITERAL_TOKENS else t.text) for t in tokens)
    template = _TEMPLATES.get(key)
    if template is None:
        template = _template(text, tokens)
        if template is None:  # not in canonical form: nothing to reuse
            return classify(parse_canonical(text))
        if len(_TEMPLATES) < 100_000:
            _TEMPLATES[key] = template
    if template.op is None:
        return Conjunct(text, template.columns, None)

    def cut(span: tuple[int, int]) -> str:
        return text[tokens[span[0]].start : tokens[span[1]].end + 1]

    return Conjunct(
        text, template.columns, ZShape(cut(template.lhs), template.op, cut(template.rhs), template.columns[0])
    )


def _template(text: str, tokens: list) -> _Template | None:
    """The template of canonical `text`; None when `text` is not what its canonical rendering is."""
    conjunct = classify(parse_canonical(text))
    if conjunct.z is None:
        return _Template(conjunct.columns, None)
    if conjunct.z.op == "in":  # lists vary in length and items: classified text by text (still cached)
        return None
    starts = [t.start for t in tokens]
    ends = [t.end + 1 for t in tokens]
    try:
        if conjunct.z.op == "startswith":
            # STARTSWITH ( lhs , rhs ): the comma right after the expression's rendering splits them
            comma = starts.index(len("STARTSWITH(") + len(conjunct.z.expression))
            lhs, rhs = (2, comma - 1), (comma + 1, len(tokens) - 2)
        else:
            operator = starts.index(len(conjunct.z.expression) + 1)
            lhs, rhs = (0, operator - 1), (operator + 1, len(tokens) - 1)
    except ValueError:
        return None
    if (
        text[starts[lhs[0]] : ends[lhs[1]]] != conjunct.z.expression
        or text[starts[rhs[0]] : ends[rhs[1]]] != conjunct.z.literal
    ):
        return None
    return _Template(conjunct.columns, conjunct.z.op, lhs, rhs)
