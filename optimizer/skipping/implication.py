"""When does a query conjunct *imply* a SOP feature?

A file whose bit for feature f is 0 has no row satisfying f; if a query conjunct q implies f (every row
satisfying q satisfies f), no row of the file satisfies q either and the file can be skipped. The
thesis matched q and f by exact text; beyond that, provably stricter forms on the same expression:

* equal canonical text;
* a range inside the feature's range (``x > 10`` implies ``x > 5``);
* an IN list inside the feature's IN list, an equality on a value of the feature's list, values all
  inside the feature's range;
* a longer prefix (``STARTSWITH(s, 'abc')`` implies ``STARTSWITH(s, 'ab')``);
* through AND/OR: q1 AND q2 implies f if either does; q implies f1 OR f2 if it implies either;
  q1 OR q2 implies f if both do; q implies f1 AND f2 if it implies both.

Constants are compared only within one type family (`values.literal_family`); otherwise no
implication is claimed, which keeps the file.

Number constants take part only where they compare with each other as Spark compares each with the
expression (`_numbers_comparable`): on integer and decimal expressions, exact constants Spark widens
with them unrounded; on others, integer literals within 2**24, the same value in every type
(`numbers.exact_everywhere`). Spark rounds other constants by the type of each comparison, and two
that differ, such as ``f > 9007199254740992`` and ``f = 9007199254740993`` on a DOUBLE, may round to
one value.

A quoted constant is compared as text only on an expression known to hold strings: on a TIMESTAMP or
DATE column ``'2024-01-05 00:00:00'`` sorts after ``'2024-01-05'`` but is the same instant, and
``'2024-1-5'`` after ``'2024-01-10'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from optimizer.skipping.numbers import decimal_shape, exact_everywhere, literal_type, rounds_when_widened
from optimizer.skipping.values import NULL, Span, Unknown, constant, literal_family
from querylog.predicates.tree import rendered

OPS: dict[type[exp.Expr], str] = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


@dataclass(frozen=True)
class ValueSet:
    """The values of one expression a predicate accepts: a finite set or an interval."""

    expression: str
    family: str
    values: frozenset[Any] | None = None  # finite set (None: interval)
    low: Any = None
    low_open: bool = False
    high: Any = None
    high_open: bool = False
    prefix: str | None = None  # STARTSWITH
    # the number constants, and whether each is the same value in any type (`numbers.exact_everywhere`):
    # how they compare with each other as Spark compares each with the expression (`_numbers_comparable`)
    numbers: tuple[exp.Expr, ...] = ()
    exact: bool = True
    listed: bool = False  # from an IN list, which Spark types as one (its integers as INT), unlike a comparison

    def contains(self, value: Any) -> bool:
        if self.prefix is not None:
            return isinstance(value, str) and value.startswith(self.prefix)
        if self.values is not None:
            return value in self.values
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))


def value_set(node: exp.Expr) -> ValueSet | None:
    """The accepted values of an atomic conjunct on one non-constant expression, or None."""
    node = node.unnest()
    try:
        if type(node) in OPS:
            target = node.expression
            kind = literal_family(target)
            typed = _numbers(kind, [target])
            value = constant(target, kind)
            if value is NULL or isinstance(value, Span):  # Span: an instant the zone decides
                return None
            op = OPS[type(node)]
            expression = rendered(node.this)
            if op == "=":
                return ValueSet(expression, kind, frozenset([value]), **typed)
            if op in ("<", "<="):
                return ValueSet(expression, kind, high=value, high_open=op == "<", **typed)
            return ValueSet(expression, kind, low=value, low_open=op == ">", **typed)
        if isinstance(node, exp.In) and not node.args.get("query") and node.expressions:
            kinds = {literal_family(v) for v in node.expressions if not isinstance(v.unnest(), exp.Null)}
            if len(kinds) != 1:
                return None
            kind = kinds.pop()
            typed = _numbers(kind, [v for v in node.expressions if not isinstance(v.unnest(), exp.Null)])
            values = [constant(v, kind) for v in node.expressions]
            if any(isinstance(v, Span) for v in values):
                return None
            present = frozenset(v for v in values if v is not NULL)
            return ValueSet(rendered(node.this), kind, present, listed=True, **typed)
        if isinstance(node, exp.StartsWith):
            prefix = node.expression.unnest()
            if isinstance(prefix, exp.Literal) and prefix.is_string:
                return ValueSet(rendered(node.this), "string", prefix=prefix.this)
    except (Unknown, TypeError):
        return None
    return None


def _numbers(kind: str, constants: list[exp.Expr]) -> dict[str, Any]:
    """`ValueSet.numbers` and `ValueSet.exact` of a set's constants (none where they are no numbers)."""
    if kind != "number":
        return {}
    return {"numbers": tuple(constants), "exact": all(exact_everywhere(c) for c in constants)}


def _numbers_comparable(q: ValueSet, f: ValueSet, types: Mapping[str, str]) -> bool:
    """Whether the two sets' number constants compare with each other as Spark compares each with the
    expression (`types`: its Spark type, by lower-cased path or canonical text). On an integer or
    decimal expression: exact constants (no double or float) that Spark 4 widens with it unrounded
    (`numbers.rounds_when_widened`; an IN list widens integers as INT where a comparison does not,
    which the check assumes of both); on any other: constants exact in every type."""
    type_name = types.get(q.expression) or types.get(q.expression.lower()) or ""
    constants = (*q.numbers, *f.numbers)
    if decimal_shape(type_name) is not None:
        exact = {literal_type(c) for c in constants} <= {"integer", "decimal"}
        return exact and not rounds_when_widened(type_name, constants)
    # of an unknown type (a decimal of scale 29 or more, maybe), a list and a comparison may widen apart
    return q.exact and f.exact and (bool(type_name) or q.listed == f.listed)


def _subset(q: ValueSet, f: ValueSet, strings: frozenset[str], types: Mapping[str, str]) -> bool:
    if q.expression != f.expression or q.family != f.family or q.family == "other":
        return False
    if q.family == "number" and not _numbers_comparable(q, f, types):
        return False
    if q.family == "string" and q.prefix is None and not {q.expression, q.expression.lower()} & strings:
        return False  # quoted constants on a column that may not hold strings: their text order says nothing
    try:
        if q.prefix is not None:
            return f.prefix is not None and q.prefix.startswith(f.prefix)
        if q.values is not None:
            return all(f.contains(v) for v in q.values)
        if f.values is not None or f.prefix is not None:
            return False
        low_ok = f.low is None or (
            q.low is not None and (q.low > f.low or (q.low == f.low and (q.low_open or not f.low_open)))
        )
        high_ok = f.high is None or (
            q.high is not None and (q.high < f.high or (q.high == f.high and (q.high_open or not f.high_open)))
        )
        return low_ok and high_ok
    except TypeError:  # values of different families
        return False


def implies(
    q: exp.Expr, f: exp.Expr, strings: frozenset[str] = frozenset(), types: Mapping[str, str] | None = None
) -> bool:
    """True only when every row satisfying `q` satisfies `f`; `strings` are the rendered expressions
    (lower-cased columns) known to hold strings, the only ones whose quoted constants compare as text;
    `types` the Spark types known of expressions, which say where number constants compare exactly."""
    types = types or {}
    q = q.unnest()
    f = f.unnest()
    if rendered(q) == rendered(f):
        return True
    if isinstance(f, exp.Or):
        return any(implies(q, part, strings, types) for part in f.flatten())
    if isinstance(q, exp.And):
        return any(implies(part, f, strings, types) for part in q.flatten())
    if isinstance(q, exp.Or):
        return all(implies(part, f, strings, types) for part in q.flatten())
    if isinstance(f, exp.And):
        return all(implies(q, part, strings, types) for part in f.flatten())
    qs = _value_set(q)
    fs = _value_set(f)
    return qs is not None and fs is not None and _subset(qs, fs, strings, types)


def _value_set(node: exp.Expr) -> ValueSet | None:
    """`value_set`, cached on the node (pruning asks once per file)."""
    if "deltaopt.value_set" not in node.meta:
        node.meta["deltaopt.value_set"] = value_set(node)
    return node.meta["deltaopt.value_set"]
