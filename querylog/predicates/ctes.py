"""Inlining non-recursive CTEs, so each reference is its own scan with its own pushed filters (Spark
inlines them too)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp


def inline_ctes(expression: exp.Expr) -> exp.Expr:
    """Replace references to non-recursive CTEs by the CTE's query, aliased as the reference was.

    A CTE may read the CTEs defined before it (TPC-DS q2, q47, q64 chain two or three), so each body
    is inlined with the earlier definitions before it stands in for a reference; inner WITHs are
    inlined before the ones around them, so a nested definition shadows an outer one of the same name.
    """
    # find_all walks breadth first: reversed, the deepest WITH comes first
    for with_ in reversed(list(expression.find_all(exp.With))):
        if with_.args.get("recursive"):
            continue
        parent = with_.parent
        definitions: dict[str, exp.Expr] = {}
        for cte in with_.expressions:
            body = _substitute(cte.this.copy(), definitions)
            definitions[cte.alias_or_name.lower()] = body
        with_.pop()
        if parent is not None:
            _substitute(parent, definitions)
    return expression


def _substitute(node: exp.Expr, definitions: Mapping[str, exp.Expr]) -> exp.Expr:
    """`node` with every unqualified table named in `definitions` replaced by a copy of its query."""
    for table in list(node.find_all(exp.Table)):
        name = table.name.lower()
        if table.db or name not in definitions:
            continue
        alias = exp.TableAlias(this=exp.to_identifier(table.alias_or_name))
        replacement = exp.Subquery(this=definitions[name].copy(), alias=alias)
        if table is node:
            return replacement
        table.replace(replacement)
    return node
