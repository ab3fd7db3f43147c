"""sqlglot's ``simplify`` without one rule's defect: the merge of two comparisons of one column whose
bounds are equal but whose strictness differs.

sqlglot 30.x merges ``x < a OR x <= b`` (and the ``>`` forms, and the ``AND`` ones) by comparing the
bounds only: with ``a == b`` it keeps whichever comparison came second, so ``i = 0 OR p <= 0 OR p < 0``
became ``i = 0 OR p < 0`` and lost the rows where ``p = 0`` (found by the normalisation property test,
``tests/querylog/test_normalisation.py``). Such a pair is left as it is here: a predicate that stays
longer never changes meaning, and the other merges (different bounds) are right.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.optimizer.simplify import Simplifier, cast_as_datetime, extract_date

ORDERED = (exp.LT, exp.LTE, exp.GT, exp.GTE)


def _bound(node: exp.Expr) -> Any:
    """The constant side of a comparison as sqlglot's merge compares it (number, text, or date/time), or
    None when it is none of those."""
    for side in (node.expression, node.this):
        if side.is_number:
            return side.to_py()
        if side.is_string:
            return side.name
        found = extract_date(side)
        if found:
            return cast_as_datetime(found)
    return None


def same_bound_other_strictness(left: exp.Expr, right: exp.Expr) -> bool:
    """Whether `left` and `right` are order comparisons of different kinds over equal bounds (`x < 0`,
    `x <= 0`): the pair sqlglot's merge gets wrong."""
    if not (isinstance(left, ORDERED) and isinstance(right, ORDERED)) or type(left) is type(right):
        return False
    a = _bound(left)
    b = _bound(right)
    try:
        return a is not None and b is not None and bool(a == b)
    except TypeError:  # a date against a number: not comparable, sqlglot does not merge them either
        return False


class SoundSimplifier(Simplifier):
    """`Simplifier` whose comparison merge leaves pairs with equal bounds and different strictness."""

    def _simplify_comparison(
        self, expression: exp.Expr, left: exp.Expr, right: exp.Expr, or_: bool = False
    ) -> exp.Expr | None:
        if same_bound_other_strictness(left, right):
            return None
        return super()._simplify_comparison(expression, left, right, or_)


def simplify(expression: exp.Expr, dialect: str) -> exp.Expr:
    """sqlglot's ``simplify(expression, dialect=...)`` with `SoundSimplifier`."""
    return SoundSimplifier(dialect=dialect).simplify(expression)
