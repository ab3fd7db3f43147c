"""Bounds on what evaluating an untrusted predicate may cost.

The allow-list (`querylog.predicates.allowlist`) keeps side effects out; this keeps cost bounded. A
feature is evaluated on every row of every sample and every OPTIMIZE, so one logged query with a
catastrophic-backtracking regex such as ``(a+)+$`` could stall the service's jobs. Refused:

* regular expressions that are not string literals, that Python's regex parser cannot read (Java's
  syntax is close enough for the constructs that matter here), or that contain a **backreference** or a
  **nested unbounded quantifier** (an unbounded repeat inside another unbounded repeat: the shape of
  exponential backtracking in Java's engine);
* LIKE patterns with more than `MAX_LIKE_WILDCARDS` ``%`` (Spark turns LIKE into a regex whose
  backtracking grows with each ``%``);
* string literals longer than `MAX_LITERAL_CHARS`, IN lists longer than `MAX_IN_ITEMS`, trees deeper
  than `MAX_DEPTH` or larger than `MAX_NODES`.

`cost_problems` returns the reasons (empty: bounded); `allowlist.check_evaluable` refuses on either.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from sqlglot import exp

MAX_LITERAL_CHARS = 1_000
MAX_IN_ITEMS = 1_000
MAX_DEPTH = 40
MAX_NODES = 2_000
MAX_REGEX_CHARS = 200
MAX_LIKE_WILDCARDS = 8

# Regex-taking functions: sqlglot classes, and Spark names sqlglot leaves as Anonymous.
REGEX_NODES = (exp.RegexpLike, exp.RegexpILike, exp.RegexpReplace, exp.RegexpExtract, exp.RegexpSplit)
REGEX_ANONYMOUS = frozenset({"regexp", "rlike", "regexp_like", "regexp_count", "regexp_substr", "regexp_instr"})

_sre_parse: Any = importlib.import_module("re._parser")  # Python's own regex parser (3.11+): a pattern's shape
_UNBOUNDED = getattr(_sre_parse, "MAXREPEAT", 4294967295)


def cost_problems(expression: exp.Expr) -> list[str]:
    """Why evaluating `expression` on data might cost without bound (empty: it is bounded)."""
    problems: list[str] = []
    nodes = 0
    for node in expression.walk():
        nodes += 1
        if _depth(node) > MAX_DEPTH:
            problems.append(f"nested deeper than {MAX_DEPTH} levels")
            break
        if isinstance(node, exp.Literal) and node.is_string and len(node.this) > MAX_LITERAL_CHARS:
            problems.append(f"a string literal of {len(node.this):,} characters (limit {MAX_LITERAL_CHARS:,})")
        elif isinstance(node, exp.In) and len(node.expressions) > MAX_IN_ITEMS:
            problems.append(f"an IN list of {len(node.expressions):,} values (limit {MAX_IN_ITEMS:,})")
        elif isinstance(node, exp.Like | exp.ILike):
            problems += _like_problems(node.expression)
        elif isinstance(node, REGEX_NODES) or (
            isinstance(node, exp.Anonymous) and node.name.lower() in REGEX_ANONYMOUS
        ):
            problems += _regex_problems(_pattern_argument(node))
    if nodes > MAX_NODES:
        problems.append(f"{nodes:,} expression nodes (limit {MAX_NODES:,})")
    return sorted(set(problems))


def _depth(node: exp.Expr) -> int:
    depth = 0
    while node.parent is not None:
        node = node.parent
        depth += 1
    return depth


def _pattern_argument(node: exp.Expr) -> exp.Expr | None:
    if isinstance(node, exp.Anonymous):
        return node.expressions[1] if len(node.expressions) > 1 else None
    pattern = node.args.get("expression")
    return pattern if isinstance(pattern, exp.Expr) else None


def _like_problems(pattern: Any) -> list[str]:
    if not isinstance(pattern, exp.Literal) or not pattern.is_string:
        return ["a LIKE pattern that is not a string literal"]
    wildcards = pattern.this.count("%")
    if wildcards > MAX_LIKE_WILDCARDS:
        return [f"a LIKE pattern with {wildcards} '%' wildcards (limit {MAX_LIKE_WILDCARDS})"]
    return []


def _regex_problems(pattern: exp.Expr | None) -> list[str]:
    if not isinstance(pattern, exp.Literal) or not pattern.is_string:
        return ["a regular expression that is not a string literal"]
    text = pattern.this
    if len(text) > MAX_REGEX_CHARS:
        return [f"a regular expression of {len(text)} characters (limit {MAX_REGEX_CHARS})"]
    found: list[str] = []
    # the literal as written, and as Spark unescapes it ('\\1' is the backreference \1): both must pass
    for variant in dict.fromkeys((text, text.replace("\\\\", "\\"))):
        try:
            parsed = _sre_parse.parse(variant)
        except (re.error, RecursionError, OverflowError) as err:
            return [f"regular expression {text!r} cannot be checked ({err})"]
        _walk_regex(parsed, inside_unbounded=False, found=found)
    return [f"regular expression {text!r} has {problem}" for problem in sorted(set(found))]


def _walk_regex(items: Any, inside_unbounded: bool, found: list[str]) -> None:
    """Visit a parsed regex; note backreferences and unbounded repeats inside unbounded repeats."""
    for op, argument in items:
        name = str(op)
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            found.append("a backreference")
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            _, high, body = argument
            unbounded = high == _UNBOUNDED
            if unbounded and inside_unbounded and name != "POSSESSIVE_REPEAT":
                found.append("a nested quantifier (exponential backtracking)")
            _walk_regex(body, inside_unbounded or (unbounded and name != "POSSESSIVE_REPEAT"), found)
        elif name == "SUBPATTERN":
            _walk_regex(argument[-1], inside_unbounded, found)
        elif name in ("BRANCH",):
            for branch in argument[1]:
                _walk_regex(branch, inside_unbounded, found)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _walk_regex(argument[1], inside_unbounded, found)
        elif name == "ATOMIC_GROUP":
            _walk_regex(argument, False, found)
