"""Sound pruning: may a file hold a row that satisfies a predicate?

One visitor (iceberg-python's inclusive-metrics evaluator is the model) over the normalised sqlglot
predicate answers, for every node, two questions about the file: might some row make it TRUE, and
might some row make it FALSE (three-valued logic: a row may make it neither, NULL). Then

    AND: true if both may be true, false if either may be false
    OR:  true if either may be true, false if both may be false
    NOT: swaps the two

and a file is skipped only when the whole predicate cannot be TRUE. Leaves use the file's bounds
(Delta min/max and NULL counts, extended min/max of expressions), SOP bits (a bit of 0 for a
feature the node implies means no row can make the node TRUE) and key sets (``x = v`` and ``x IN``
cannot be TRUE in a file whose exact set of x values holds none of the constants). Every leaf
pruning does not understand, every missing statistic, every constant it cannot compare soundly
answers "may be true and may be false", so the file is kept.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlglot import exp

from optimizer.skipping.agreement import predicate_agrees, value_kind
from optimizer.skipping.filestats import Bounds, FileStats, is_padded
from optimizer.skipping.implication import implies
from optimizer.skipping.numbers import as_compared
from optimizer.skipping.values import NULL, ZONE_META, Span, Unknown, constant
from optimizer.skipping.zones import same_zone, zone_dependent
from querylog.predicates.normalize import FLIPPED, SAFE_PASSES, normalize_conjuncts, parse_canonical, sql
from querylog.predicates.parse import parse_condition
from querylog.predicates.tree import column_path, is_constant, rendered

MAYBE = (True, True)
_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # a date as Spark casts one to a string
NEVER = (False, False)  # e.g. a comparison in a file where the value is always NULL


@dataclass(frozen=True)
class Predicate:
    """A query predicate prepared for pruning: its canonical conjuncts, and the session time zone its
    offset-less timestamp literals are read in (None: unknown, so each stands for every instant a zone
    may give it: `values.local_instant`)."""

    conjuncts: tuple[exp.Expr, ...]
    zone: str | None = None

    @property
    def sql(self) -> str:
        return " AND ".join(sql(c) for c in self.conjuncts) or "TRUE"


@lru_cache(maxsize=256)
def prepare(where: str | None, zone: str | None = None) -> Predicate:
    """Parse and normalise a WHERE condition (unqualified column names) with the passes that are
    equivalences in three-valued logic (`SAFE_PASSES`); `zone` is the session time zone of the reader
    that runs it (Spark reads offset-less timestamp literals in it), None when unknown. Raises
    `PredicateError`. Memoised: normalising a join-induced key list of hundreds of keys takes a few
    hundred milliseconds, and a query is often planned more than once (explain, a benchmark's readers);
    what evaluation caches on the nodes depends on the query and zone alone, so a prepared predicate
    serves any table and file."""
    if where is None or not where.strip():
        return Predicate((), zone)
    conjuncts = tuple(normalize_conjuncts(parse_condition(where), passes=SAFE_PASSES))
    if zone is not None:
        for node in (n for conjunct in conjuncts for n in conjunct.walk()):
            node.meta[ZONE_META] = zone
    return Predicate(conjuncts, zone)


def might_match(predicate: Predicate, stats: FileStats) -> bool:
    """False only when no row of the file can satisfy the predicate."""
    return all(_evaluate(c, stats)[0] for c in predicate.conjuncts)


def prune(predicate: Predicate, files: Iterable[FileStats]) -> list[FileStats]:
    return [f for f in files if might_match(predicate, f)]


def _evaluate(node: exp.Expr, stats: FileStats) -> tuple[bool, bool]:
    node = node.unnest()
    if isinstance(node, exp.And):
        parts = [_evaluate(p, stats) for p in node.flatten()]
        result = (all(t for t, _ in parts), any(f for _, f in parts))
    elif isinstance(node, exp.Or):
        parts = [_evaluate(p, stats) for p in node.flatten()]
        result = (any(t for t, _ in parts), all(f for _, f in parts))
    elif isinstance(node, exp.Not):
        inner = _evaluate(node.this, stats)
        result = (inner[1], inner[0])
    else:
        result = _leaf(node, stats)
    if result[0] and _excluded_by_sop(node, stats):
        return (False, result[1])
    return result


def _excluded_by_sop(node: exp.Expr, stats: FileStats) -> bool:
    """Some feature with bit 0 in this file is implied by `node`. The bits were computed in the zone
    the statistics record, with ANSI off: a node whose meaning depends on the zone uses them only in
    that zone, and only nodes and features a reader evaluates alike in either mode (`agreement`) use
    them at all."""
    if not stats.sop or _zone_differs(node, stats) or not _agrees(node, stats):
        return False
    text = rendered(node)
    if stats.sop.get(text) is False:
        return True
    # per query node, feature, the file's string-typed expressions (text order is theirs alone) and types
    implied: dict[tuple[str, frozenset[str], frozenset[Any]], bool] = node.meta.setdefault("deltaopt.implies", {})
    strings = stats.string_expressions
    for feature, bit in stats.sop.items():
        if bit:
            continue
        key = (feature, strings, stats.types_key)
        if key not in implied:
            parsed = _feature(feature)
            implied[key] = _agrees(parsed, stats) and implies(node, parsed, strings, stats.types)
        if implied[key]:
            return True
    return False


def _agrees(node: exp.Expr, stats: FileStats, as_value: bool = False) -> bool:
    """A reader in either ANSI mode evaluates `node` (a predicate, or a value `as_value`) as deltaopt's
    session did where it computed SOP bits and expression ranges (`agreement`). Cached per set of types
    and string expressions (one table's, in practice)."""
    known: dict[tuple[frozenset[Any], frozenset[str], bool], bool] = node.meta.setdefault("deltaopt.agrees", {})
    key = (stats.types_key, stats.string_expressions, as_value)
    if key not in known:
        strings = stats.string_expressions
        if as_value:
            known[key] = value_kind(node, stats.types, strings) is not None
        else:
            known[key] = predicate_agrees(node, stats.types, strings)
    return known[key]


def _zone_differs(node: exp.Expr, stats: FileStats) -> bool:
    """`node` depends on the session zone and the file's statistics were not computed in the query's."""
    if same_zone(node.meta.get(ZONE_META), stats.zone):
        return False
    return zone_dependent(node, stats.column_family)


@lru_cache(maxsize=4096)
def _feature(text: str) -> exp.Expr:
    return parse_canonical(text)


def _bounds(expression: exp.Expr, stats: FileStats) -> Bounds | None:
    """Bounds of a plain (or struct) column from Delta statistics, else of an expression from the
    extended statistics where it means the same in the query's zone as in theirs."""
    path = column_path(expression)
    if path is not None and ".".join(path) in stats.columns:
        return stats.columns[".".join(path)]
    bounds = stats.expressions.get(rendered(expression))
    if bounds is None or "float" in (bounds.type_name or "") or _zone_differs(expression, stats):
        return None  # a FLOAT range was computed in float32 (without ANSI): a reader may compute in double
    if not _agrees(expression, stats, as_value=True):
        return None
    return bounds


def _all_null(bounds: Bounds, rows: int | None) -> bool:
    return rows is not None and bounds.nulls is not None and bounds.nulls >= rows


def _leaf(node: exp.Expr, stats: FileStats) -> tuple[bool, bool]:
    try:
        if isinstance(node, exp.Boolean):
            return (True, False) if node.this else (False, True)
        if type(node) in FLIPPED:
            return _comparison(node, stats)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return _is_null(node.this, stats)
        if isinstance(node, exp.In) and not node.args.get("query") and node.expressions:
            return _in(node, stats)
        if isinstance(node, exp.StartsWith):
            return _startswith(node, stats)
    except (Unknown, TypeError, ValueError, ArithmeticError):
        return MAYBE
    return MAYBE


def _oriented(node: exp.Expr) -> tuple[exp.Expr, type[exp.Expr], exp.Expr] | None:
    """(expression, comparison, constant) with the constant on the right; None without a constant side.
    Cached on the node: it depends on the query only, not on the file."""
    if "deltaopt.oriented" not in node.meta:
        left, right, kind = node.this, node.expression, type(node)
        if is_constant(left) and not is_constant(right):
            left, right, kind = right, left, FLIPPED[kind]
        node.meta["deltaopt.oriented"] = (left, kind, right) if is_constant(right) else None
    return node.meta["deltaopt.oriented"]


def _comparison(node: exp.Expr, stats: FileStats) -> tuple[bool, bool]:
    oriented = _oriented(node)
    if oriented is None:
        return MAYBE
    left, kind, right = oriented
    bounds = _bounds(left, stats)
    if bounds is None:
        return MAYBE
    keys = _key_set(left, stats)
    value = constant(right, bounds.family)
    if value is NULL or _all_null(bounds, stats.rows) or stats.rows == 0:
        return NEVER
    compared = as_compared(bounds, keys, [value], [right])
    if compared is None:
        return MAYBE
    bounds, keys, (value,) = compared
    may_be_true, may_be_false = _compare(kind, bounds, value)
    if kind is exp.EQ and may_be_true and not isinstance(value, Span):
        may_be_true = keys is None or value in keys
    return may_be_true, may_be_false


def _key_set(expression: exp.Expr, stats: FileStats) -> frozenset[Any] | None:
    """Every non-NULL value of a top-level column in the file, where the file keeps its key set (a CHAR
    column's values compare padded: none)."""
    path = column_path(expression)
    if path is None or len(path) != 1 or not stats.keys or is_padded(stats.types.get(path[0].lower(), "")):
        return None
    return stats.keys.get(path[0].lower())


def _compare(kind: type[exp.Expr], b: Bounds, v: Any) -> tuple[bool, bool]:
    """(may be true, may be false) of ``x <kind> v`` over the file; a `Span` constant may be any value
    of its span, so each question takes the end of the span that allows the most."""
    low, high, nan = b.low, b.high, b.nan_possible
    v_low, v_high = (v.low, v.high) if isinstance(v, Span) else (v, v)
    below = low is None or low < v_high  # some value may be < v
    at_or_below = low is None or low <= v_high
    above = high is None or high > v_low or nan  # NaN compares greater than every number in Spark
    at_or_above = high is None or high >= v_low or nan
    pinned = low is not None and high is not None and low == high == v and not nan  # every value == v
    if kind is exp.LT:
        return below, at_or_above
    if kind is exp.LTE:
        return at_or_below, above
    if kind is exp.GT:
        return above, at_or_below
    if kind is exp.GTE:
        return at_or_above, below
    in_range = at_or_below and (high is None or high >= v_low)
    if kind is exp.EQ:
        return in_range, not pinned
    return not pinned, in_range  # NEQ


def _is_null(target: exp.Expr, stats: FileStats) -> tuple[bool, bool]:
    bounds = _bounds(target, stats)
    if bounds is None or bounds.nulls is None or stats.rows is None:
        return MAYBE
    return bounds.nulls > 0, bounds.nulls < stats.rows


def _in(node: exp.In, stats: FileStats) -> tuple[bool, bool]:
    bounds = _bounds(node.this, stats)
    if bounds is None or not all(is_constant(v) for v in node.expressions):
        return MAYBE
    if _all_null(bounds, stats.rows) or stats.rows == 0:
        return NEVER
    present, has_null = _in_values(node, bounds.family)
    compared = as_compared(bounds, _key_set(node.this, stats), present, node.expressions)
    if compared is None:
        return MAYBE
    bounds, keys, present = compared  # rounding to doubles keeps the list sorted
    low, high, nan = bounds.low, bounds.high, bounds.nan_possible
    # x = v may be true for some v in [low, high] (NaN equals no constant): one binary search
    # over the sorted list, not a comparison per value (join-induced key sets list hundreds of keys)
    first = 0 if low is None else bisect_left(present, low)
    may_be_true = first < len(present) and (high is None or present[first] <= high)
    if may_be_true:  # and some listed value is one the file holds, where its key set says
        may_be_true = keys is None or not keys.isdisjoint(present)
    # x IN (..., NULL) is never FALSE: it is TRUE or NULL; and never FALSE where every value is one listed
    pinned = low is not None and high is not None and low == high and not nan and first < len(present)
    may_be_false = not has_null and not (pinned and present[first] == low)
    return may_be_true, may_be_false


def _listed_alike(node: exp.In, target: str) -> bool:
    """Whether every reader compares a date or timestamp with the list's string literals as `_in` does,
    as dates: without ANSI Spark compares them as text (``d IN ('2024-2-29')`` is FALSE on 2024-02-29),
    which agrees only for a date spelled as Spark writes one (``yyyy-MM-dd``)."""
    items = [v.unnest() for v in node.expressions]
    strings = [v.this for v in items if isinstance(v, exp.Literal) and v.is_string]
    if target in ("timestamp", "timestamp_ntz"):
        return not strings
    return target != "date" or all(_DATE_TEXT.fullmatch(text) for text in strings)


def _in_values(node: exp.In, target: str) -> tuple[list[Any], bool]:
    """The list's non-NULL constants as values of family `target`, sorted, and whether it lists NULL.
    Cached on the node per family: pruning converts the same list for every file. Raises `Unknown`."""
    key = f"deltaopt.in_values.{target}"
    if key not in node.meta:
        if not _listed_alike(node, target):
            raise Unknown("a date or timestamp against a list of strings, which Spark compares as text without ANSI")
        values = [constant(v, target) for v in node.expressions]
        if any(isinstance(v, Span) for v in values):
            raise Unknown("a list of timestamps whose instants depend on the session's zone")
        node.meta[key] = (sorted(v for v in values if v is not NULL), any(v is NULL for v in values))
    return node.meta[key]


def _startswith(node: exp.StartsWith, stats: FileStats) -> tuple[bool, bool]:
    bounds = _bounds(node.this, stats)
    prefix = node.expression.unnest()
    if bounds is None or bounds.family != "string" or not (isinstance(prefix, exp.Literal) and prefix.is_string):
        return MAYBE
    if _all_null(bounds, stats.rows) or stats.rows == 0:
        return NEVER
    p = prefix.this
    low, high = bounds.low, bounds.high
    # every value >= low: if low's first len(p) characters sort after p, no value starts with p
    may_be_true = (high is None or high >= p) and (low is None or low[: len(p)] <= p)
    all_start = low is not None and high is not None and len(low) >= len(p) and low.startswith(p) and high.startswith(p)
    return may_be_true, not all_start


def column_names_of(predicate: Predicate) -> Sequence[str]:
    names = {c.name.lower() for conjunct in predicate.conjuncts for c in conjunct.find_all(exp.Column)}
    return sorted(names)
