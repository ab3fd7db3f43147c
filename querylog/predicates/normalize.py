"""Canonical forms for filter conjuncts, so equal predicates get equal text.

A pipeline of small passes (sqlglot-optimizer style), each ``pass(expression) -> expression``, run in
order by `normalize_conjuncts`. `PASSES` (the query log's canonical text) include sqlglot's
``simplify`` for constant folding; `SAFE_PASSES` (pruning) leave it out, because simplify has been
seen to change meaning (``p < 0 OR NOT p > 0`` became ``p < 0``; NOT is now pushed down before it):

>>> from querylog.predicates.parse import parse_condition
>>> [c.sql("spark") for c in normalize_conjuncts(parse_condition("NOT (5 > X) AND y BETWEEN 1 AND 2.50"))]
['x >= 5', 'y <= 2.50', 'y >= 1']

What the passes guarantee, beyond sqlglot's ``simplify`` (NOT pushed in, column side on the left with
the operator flipped, BETWEEN as two ranges, constant date arithmetic folded):

* negation explicit: ``x NOT LIKE p`` is ``NOT x LIKE p`` (never a ``negate`` flag);
* identifiers lower-cased (Spark resolves them case-insensitively), table qualifiers removed;
* ``x <=> c`` with a non-NULL constant is ``x = c``, and ``x <=> NULL`` is ``x IS NULL``;
* ``x = a OR x = b OR x IN (c)`` is ``x IN (a, b, c)``, lists deduplicated and sorted, a one-element
  list is an equality (`PASSES` only: Spark types a list as one, so `SAFE_PASSES` keep lists and ORs);
* ``x LIKE 'abc%'`` (no other wildcard) is ``STARTSWITH(x, 'abc')``;
* no parentheses that carry no meaning (``(x * 2) < 4`` is ``x * 2 < 4``; ``b = (x IS NULL)`` keeps its);
* numeric literals as written (Spark types ``2.0`` a DECIMAL and ``2`` an INT: ``i / 2.0`` is no ``i / 2``);
* operands of AND/OR, and the two columns of a column-to-column comparison, in a fixed order;
* the result split into its top-level conjuncts, TRUE conjuncts dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from querylog.predicates.parse import DIALECT, parse_condition
from querylog.predicates.sound_simplify import simplify
from querylog.predicates.tree import is_constant

Pass = Callable[[exp.Expr], exp.Expr]

FLIPPED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
}
COMPARISONS = tuple(FLIPPED)
LIKE_WILDCARDS = ("%", "_", "\\")


def sql(expression: exp.Expr) -> str:
    """The canonical text of a normalised expression."""
    return expression.sql(dialect=DIALECT)


def unqualify(expression: exp.Expr, qualifiers: Iterable[str] = ()) -> exp.Expr:
    """Drop table qualifiers; a qualifier that is not one of `qualifiers` is a struct column instead
    (``s.a`` on a table without an ``s`` alias reads field ``a`` of column ``s``)."""
    known = {q.lower() for q in qualifiers}

    def rewrite(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Column) or not node.table:
            return node
        parts = [p for p in (node.args.get("catalog"), node.args.get("db"), node.args.get("table")) if p]
        names = [p.name for p in parts]
        if names and names[-1].lower() in known:
            return exp.column(node.this.copy())
        root: exp.Expr = exp.column(parts[0].copy())
        for part in [*parts[1:], node.this]:
            root = exp.Dot(this=root, expression=part.copy())
        return root

    return expression.transform(rewrite, copy=True)


NEGATABLE = (exp.Like, exp.ILike, exp.Is)


def explicit_negation(expression: exp.Expr) -> exp.Expr:
    """sqlglot parses ``x NOT LIKE p`` as ``Like(negate=True)``; make it ``NOT (x LIKE p)`` so no later
    pass (or the pruning code) can miss the negation."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, NEGATABLE) and node.args.get("negate"):
            plain = node.copy()
            plain.set("negate", None)
            return exp.Not(this=plain)
        return node

    return expression.transform(rewrite, copy=False)


COMPLEMENT: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.LT: exp.GTE,
    exp.LTE: exp.GT,
    exp.GT: exp.LTE,
    exp.GTE: exp.LT,
    exp.EQ: exp.NEQ,
    exp.NEQ: exp.EQ,
}


def push_negations(expression: exp.Expr) -> exp.Expr:
    """NOT moved down to the leaves: De Morgan over AND/OR, complemented comparisons, BETWEEN as two
    ranges. Each step is an equivalence in SQL's three-valued logic, and with Spark's NaN (NaN is above
    every number, so ``NOT x < 5`` and ``x >= 5`` agree for NaN too)."""

    def push(node: exp.Expr, negate: bool) -> exp.Expr:
        node = node.unnest()
        if isinstance(node, exp.Not):
            return push(node.this, not negate)
        if isinstance(node, exp.And | exp.Or):
            parts = [push(p, negate) for p in node.flatten()]
            flip = isinstance(node, exp.And) == negate  # AND under NOT is OR
            return exp.or_(*parts, wrap=True) if flip else exp.and_(*parts, wrap=True)
        if isinstance(node, exp.Between):
            low, high = node.args["low"], node.args["high"]
            if negate:
                return exp.or_(
                    exp.LT(this=node.this.copy(), expression=low.copy()),
                    exp.GT(this=node.this.copy(), expression=high.copy()),
                )
            return exp.and_(
                exp.GTE(this=node.this.copy(), expression=low.copy()),
                exp.LTE(this=node.this.copy(), expression=high.copy()),
            )
        if negate and type(node) in COMPLEMENT:
            return COMPLEMENT[type(node)](this=node.this.copy(), expression=node.expression.copy())
        if negate and isinstance(node, exp.Boolean):
            return exp.Boolean(this=not node.this)
        copy = node.copy()
        return exp.Not(this=copy) if negate else copy

    return push(expression, False)


def remove_double_negation(expression: exp.Expr) -> exp.Expr:
    def rewrite(node: exp.Expr) -> exp.Expr:
        while isinstance(node, exp.Not) and isinstance(node.this.unnest(), exp.Not):
            node = node.this.unnest().this.unnest()
        return node

    return expression.transform(rewrite, copy=False)


PREDICATES = (*COMPARISONS, exp.In, exp.Between, exp.Like, exp.ILike, exp.Is, exp.RegexpLike, exp.StartsWith)
# predicates written between their operands: inside another operator, their parentheses decide the parse
INFIX_PREDICATES = (*COMPARISONS, exp.NullSafeEQ, exp.In, exp.Between, exp.Like, exp.ILike, exp.Is, exp.RegexpLike)
ATOMS = (exp.Column, exp.Literal, exp.Dot, exp.Bracket, exp.Func, exp.Cast, exp.Boolean, exp.Null)


def remove_redundant_parens(expression: exp.Expr) -> exp.Expr:
    """Parentheses around an atom, or around arithmetic directly inside a comparison (which binds more
    loosely than any arithmetic), carry no meaning: ``(x * 2) < 4`` is ``x * 2 < 4``. Around a predicate
    written between its operands, inside anything but AND, OR or NOT, they do."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Paren):
            return node
        inner = node.this
        if isinstance(inner, exp.And | exp.Or | exp.Not | exp.Xor):
            return node
        if isinstance(inner, INFIX_PREDICATES) and not isinstance(node.parent, exp.And | exp.Or | exp.Not | None):
            return node  # b1 = (b2 IS NULL) is not b1 = b2 IS NULL, which Spark reads as (b1 = b2) IS NULL
        if isinstance(inner, ATOMS) or isinstance(node.parent, PREDICATES) or node.parent is None:
            return inner
        return node

    return expression.transform(rewrite, copy=False)


def lower_identifiers(expression: exp.Expr) -> exp.Expr:
    return normalize_identifiers(expression, dialect=DIALECT)


def simplify_pass(expression: exp.Expr) -> exp.Expr:
    return simplify(expression, dialect=DIALECT)


def _positive(node: exp.Expr) -> bool:
    """No NOT above `node`: only its TRUE rows matter there, not whether it is FALSE or NULL."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Not):
            return False
        parent = parent.parent
    return True


def null_safe_equality(expression: exp.Expr) -> exp.Expr:
    """``x <=> c`` is TRUE exactly where ``x = c`` is (c not NULL), but FALSE where the other is NULL, so
    they differ under NOT: rewritten only where no NOT is above."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.NullSafeEQ) and is_constant(node.expression) and _positive(node):
            if isinstance(node.expression, exp.Null):
                return exp.Is(this=node.this, expression=exp.Null())
            return exp.EQ(this=node.this, expression=node.expression)
        return node

    return expression.transform(rewrite, copy=False)


def _in_members(node: exp.Expr) -> tuple[exp.Expr, list[exp.Expr]] | None:
    """(expression, constants) when `node` is ``e = c`` or ``e IN (c, ...)`` with constants only."""
    if isinstance(node, exp.EQ) and is_constant(node.expression) and not is_constant(node.this):
        return node.this, [node.expression]
    if (
        isinstance(node, exp.In)
        and not node.args.get("query")
        and node.expressions
        and all(is_constant(e) for e in node.expressions)
        and not is_constant(node.this)
    ):
        return node.this, list(node.expressions)
    return None


def equalities_to_in(expression: exp.Expr) -> exp.Expr:
    """``x = a OR x = b`` -> ``x IN (a, b)``; IN lists deduplicated and sorted; one element -> ``=``.
    Not an equivalence in Spark: it types a list as one and a comparison by its two sides, so without
    ANSI ``d IN ('2024-2-29')`` compares a date as text and ``d = '2024-2-29'`` as a date. The query
    log's canonical text uses it (one text per family); pruning keeps a list a list (`lists_ordered`)."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Or):
            disjuncts = list(node.flatten())
            members = [_in_members(d.unnest()) for d in disjuncts]
            targets = {sql(m[0]) for m in members if m}
            if all(members) and len(targets) == 1:
                values = [v for m in members if m for v in m[1]]
                return _in(members[0][0], values)  # type: ignore[index]
        if isinstance(node, exp.In):
            found = _in_members(node)
            if found:
                return _in(*found)
        return node

    return expression.transform(rewrite, copy=False)


def lists_ordered(expression: exp.Expr) -> exp.Expr:
    """IN lists of constants deduplicated by text and sorted, kept lists (`equalities_to_in` without
    what changes Spark's typing): a list's type is its members', whatever their order."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        found = _in_members(node) if isinstance(node, exp.In) else None
        return _in(*found, keep_list=True) if found else node

    return expression.transform(rewrite, copy=False)


def _in(target: exp.Expr, values: list[exp.Expr], keep_list: bool = False) -> exp.Expr:
    unique = {sql(v): v for v in values}
    ordered = [v.copy() for v in sorted(unique.values(), key=_value_order)]
    if len(ordered) == 1 and not keep_list:
        return exp.EQ(this=target.copy(), expression=ordered[0])
    return exp.In(this=target.copy(), expressions=ordered)


def _value_order(value: exp.Expr) -> tuple[int, Decimal, str]:
    """Numbers by value, then strings by value, then anything else by its SQL text."""
    if isinstance(value, exp.Literal):
        if value.is_string:
            return (1, Decimal(0), value.this)
        try:
            return (0, Decimal(value.this), "")
        except InvalidOperation:
            pass
    return (2, Decimal(0), sql(value))


def like_prefix_to_startswith(expression: exp.Expr) -> exp.Expr:
    def rewrite(node: exp.Expr) -> exp.Expr:
        # sqlglot parses ``LIKE p ESCAPE e`` as Escape(Like): the prefix of ``'a!!%' ESCAPE '!'`` is ``a!``
        if isinstance(node, exp.Like) and not isinstance(node.parent, exp.Escape):
            pattern = node.expression
            if isinstance(pattern, exp.Literal) and pattern.is_string:
                text = pattern.this
                prefix = text[:-1]
                if text.endswith("%") and prefix and not any(w in prefix for w in LIKE_WILDCARDS):
                    return exp.StartsWith(this=node.this, expression=exp.Literal.string(prefix))
        return node

    return expression.transform(rewrite, copy=False)


def factor_common_conjuncts(expression: exp.Expr) -> exp.Expr:
    """``(a AND b) OR (a AND c)`` -> ``a AND (b OR c)``, as Spark's BooleanSimplification does, so the
    shared conjunct becomes a filter of its own (and ``(a AND b) OR a`` -> ``a``)."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Or):
            return node
        branches = [{sql(c): c for c in split_conjuncts(b)} for b in node.flatten()]
        common = set.intersection(*(set(b) for b in branches))
        if not common:
            return node
        shared = [branches[0][k].copy() for k in sorted(common)]
        remainders = [[c for k, c in b.items() if k not in common] for b in branches]
        if any(not r for r in remainders):
            return exp.and_(*shared)
        alternatives = [exp.and_(*[c.copy() for c in r]) if len(r) > 1 else r[0].copy() for r in remainders]
        return exp.and_(*shared, exp.Paren(this=exp.or_(*alternatives)))

    return expression.transform(rewrite, copy=False)


def order_operands(expression: exp.Expr) -> exp.Expr:
    """Fixed operand order for AND/OR and for comparisons between two non-constant sides."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.And | exp.Or):
            operands = sorted((o.unnest() for o in node.flatten()), key=sql)
            combined = operands[0]
            for operand in operands[1:]:
                combined = type(node)(this=_wrap(combined, node), expression=_wrap(operand, node))
            return combined
        if (
            isinstance(node, COMPARISONS)
            and not is_constant(node.this)
            and not is_constant(node.expression)
            and sql(node.expression.unnest()) < sql(node.this.unnest())  # parentheses kept or not
        ):
            return FLIPPED[type(node)](this=node.expression, expression=node.this)
        return node

    return expression.transform(rewrite, copy=False)


def _wrap(operand: exp.Expr, parent: exp.Expr) -> exp.Expr:
    """Parenthesise an OR inside an AND (and vice versa) so the rendered text keeps its meaning."""
    return (
        exp.Paren(this=operand)
        if isinstance(operand, exp.And | exp.Or) and type(operand) is not type(parent)
        else operand
    )


_ORDERED_FORMS: tuple[Pass, ...] = (
    like_prefix_to_startswith,
    order_operands,
    factor_common_conjuncts,
    order_operands,
)
_CANONICAL_FORMS: tuple[Pass, ...] = (equalities_to_in, *_ORDERED_FORMS)

SAFE_PASSES: tuple[Pass, ...] = (
    explicit_negation,
    lower_identifiers,
    push_negations,
    remove_redundant_parens,
    lists_ordered,
    *_ORDERED_FORMS,
)
"""Passes that are equivalences in three-valued logic and in Spark's typing by construction (our own
rules only). Pruning prepares query predicates with these, so its soundness never rests on sqlglot's
``simplify`` nor on `equalities_to_in`."""

PASSES: tuple[Pass, ...] = (
    explicit_negation,
    lower_identifiers,
    push_negations,
    simplify_pass,
    explicit_negation,
    remove_double_negation,
    remove_redundant_parens,
    null_safe_equality,
    *_CANONICAL_FORMS,
)


def split_conjuncts(expression: exp.Expr) -> list[exp.Expr]:
    expression = expression.unnest()
    if isinstance(expression, exp.And):
        return [c for part in expression.flatten() for c in split_conjuncts(part)]
    if isinstance(expression, exp.Boolean) and expression.this is True:
        return []
    return [expression]


def normalize_conjuncts(
    expression: exp.Expr, qualifiers: Iterable[str] = (), passes: tuple[Pass, ...] = PASSES
) -> list[exp.Expr]:
    """The canonical conjuncts of a predicate on one table (input is not modified)."""
    result = unqualify(expression, qualifiers)
    for rule in passes:
        result = rule(result)
    conjuncts = split_conjuncts(result)
    unique = {sql(c): c for c in conjuncts}
    return [unique[k] for k in sorted(unique)]


@lru_cache(maxsize=65536)
def _parsed_canonical(text: str) -> exp.Expr:
    return explicit_negation(unqualify(parse_condition(text)))


def parse_canonical(text: str) -> exp.Expr:
    """A canonical conjunct stored as text (cached: the same texts recur constantly). Qualified names
    in canonical text are struct fields, as `unqualify` wrote them."""
    return _parsed_canonical(text).copy()


def canonical_conjuncts(expression: exp.Expr, qualifiers: Iterable[str] = ()) -> list[str]:
    return [sql(c) for c in normalize_conjuncts(expression, qualifiers)]
