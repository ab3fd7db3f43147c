"""Small questions about sqlglot trees that several passes ask."""

from __future__ import annotations

from sqlglot import exp


def is_constant(node: exp.Expr) -> bool:
    """No column and no subquery anywhere below `node`."""
    return not any(isinstance(n, exp.Column | exp.Subquery | exp.Select) for n in node.walk())


def column_path(node: exp.Expr) -> tuple[str, ...] | None:
    """``a`` -> ("a",); ``a.b.c`` (a struct field, as `normalize.unqualify` writes it) -> ("a", "b", "c");
    anything else -> None. Lower-cased."""
    node = node.unnest()
    if isinstance(node, exp.Column) and not node.table:
        return (node.name.lower(),)
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        parent = column_path(node.this)
        return None if parent is None else (*parent, node.expression.name.lower())
    return None


def rendered(node: exp.Expr) -> str:
    """Canonical text of `node`, cached on the node. Only for trees no pass mutates any more (prepared
    predicates, parsed features): pruning asks for the same texts once per file."""
    text = node.meta.get("deltaopt.sql")
    if text is None:
        text = node.sql(dialect="spark")
        node.meta["deltaopt.sql"] = text
    return text
