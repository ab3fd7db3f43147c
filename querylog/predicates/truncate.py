"""Bounds on the work one logged statement or scan may cost the capture and the analysis.

Generated queries carry chains of thousands of AND-ed comparisons. sqlglot's predicate pushdown
simplifies a chain in time quadratic in its length (1,000 conjuncts: 12 s; 5,000: 320 s per
statement, measured), and every distinct conjunct becomes an analysis candidate. So before the
expensive passes:

* a statement longer than `MAX_STATEMENT_CHARS`, or parsing to more than `MAX_STATEMENT_NODES`
  expression nodes, is refused (the importers quarantine it with the reason);
* each AND chain (a WHERE, HAVING or join condition) keeps its first `MAX_CONJUNCTS` conjuncts, and a
  conjunct larger than `bounds.MAX_NODES` (which could never be evaluated as a feature) is dropped;
  conjuncts holding a subquery are always kept, so no table's scan disappears;
* a scan keeps at most `MAX_SCAN_FILTERS` canonical conjuncts, however it arrived.

Every cut is sound: the conjuncts of an AND that remain are a weaker filter, still true of every row
the query reads, so the log never claims a query could skip data it needs; it only under-reports
what the query could skip.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from querylog.errors import PredicateError
from querylog.predicates.bounds import MAX_NODES

MAX_STATEMENT_CHARS = 500_000
MAX_STATEMENT_NODES = 200_000
MAX_CONJUNCTS = 64
MAX_SCAN_FILTERS = 64


def check_statement_size(sql: str) -> None:
    """Refuse a statement too long to parse within bounds (`PredicateError` names the limit)."""
    if len(sql) > MAX_STATEMENT_CHARS:
        raise PredicateError(f"statement of {len(sql):,} characters (limit {MAX_STATEMENT_CHARS:,})")


def bound_conditions(query: exp.Expr) -> int:
    """Cut every AND chain of `query` to its bounds, in place; how many conjuncts were dropped.
    Refuses (`PredicateError`) a statement larger than `MAX_STATEMENT_NODES` nodes."""
    nodes = sum(1 for _ in query.walk())
    if nodes > MAX_STATEMENT_NODES:
        raise PredicateError(f"statement of {nodes:,} expression nodes (limit {MAX_STATEMENT_NODES:,})")
    dropped = 0
    for holder in list(query.find_all(exp.Where, exp.Having, exp.Join)):
        key = "on" if isinstance(holder, exp.Join) else "this"
        condition = holder.args.get(key)
        if not isinstance(condition, exp.Expr):
            continue
        kept, cut = bound_condition(condition)
        if cut:
            dropped += cut
            holder.set(key, kept)
    return dropped


def bound_condition(condition: exp.Expr) -> tuple[exp.Expr, int]:
    """`condition` with its AND chain cut to the bounds, and how many conjuncts were dropped."""
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    if len(conjuncts) <= MAX_CONJUNCTS and not any(_too_large(c) for c in conjuncts):
        return condition, 0
    kept: list[exp.Expr] = []
    plain = 0
    for conjunct in conjuncts:
        if conjunct.find(exp.Select) is not None:
            kept.append(conjunct)  # a subquery's own scans must stay; its conditions are cut on their own
        elif plain < MAX_CONJUNCTS and not _too_large(conjunct):
            kept.append(conjunct)
            plain += 1
    if not kept:
        return exp.true(), len(conjuncts)
    return exp.and_(*(c.copy() for c in kept), copy=False), len(conjuncts) - len(kept)


def bound_filters(filters: Iterable[str]) -> tuple[str, ...]:
    """A scan's canonical conjuncts cut to `MAX_SCAN_FILTERS`, keeping the first in sorted order."""
    ordered = sorted(filters)
    return tuple(ordered[:MAX_SCAN_FILTERS])


def _too_large(conjunct: exp.Expr) -> bool:
    return sum(1 for _ in conjunct.walk()) > MAX_NODES
