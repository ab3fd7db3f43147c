"""Inner equi-joins read from a Spark physical plan (an event log's ``sparkPlanInfo``), for join-derived
filters on queries that left no SQL text (DataFrame code, notebooks).

A join node's ``simpleString`` names its keys as attribute references with expression ids::

    BroadcastHashJoin [l_partkey#16L], [p_partkey#40L], Inner, BuildRight, false

A key is taken only where its expression id is a column a file scan in that side's subtree outputs
(``FileScan parquet [p_partkey#40L,p_brand#43]``): a key computed above the scan (an alias, a cast) is
not the dimension's column and derives nothing. The dimension side's scan filters (its pushed and data
filters, as `eventlog.scan_filters_from_plan` reads them) stand for the dimension filter: operators above
the scan can only remove dimension rows, so keys derived from the scan's filters alone are a superset of
the keys that reach the join (sound, possibly weaker).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from querylog.predicates.attribute import JoinKey

JOIN = re.compile(r"^(?:BroadcastHashJoin|SortMergeJoin|ShuffledHashJoin) \[(.*?)\], \[(.*?)\], (\w+)")
REFERENCE = re.compile(r"^([A-Za-z_]\w*)#(\d+)L?$")
SCAN_OUTPUT = re.compile(r"\[([^\]]*)\]")  # the first bracket of ``FileScan parquet [a#1L,b#2]``

Plan = Mapping[str, Any]


def scan_nodes(plan: Plan) -> Iterator[Plan]:
    """Every file scan node of a plan, depth first."""
    metadata = plan.get("metadata") or {}
    if "ReadSchema" in metadata and "Location" in metadata:
        yield plan
    for child in plan.get("children") or []:
        yield from scan_nodes(child)


def _joins(plan: Plan) -> Iterator[Plan]:
    if JOIN.match(str(plan.get("simpleString", ""))):
        yield plan
    for child in plan.get("children") or []:
        yield from _joins(child)


def _references(text: str) -> list[tuple[str, str]] | None:
    """``a#1L, b#2`` -> [(a, 1), (b, 2)]; None when a key is not a plain attribute reference."""
    found = []
    for part in text.split(","):
        match = REFERENCE.match(part.strip())
        if match is None:
            return None
        found.append((match.group(1).lower(), match.group(2)))
    return found


def scan_output(node: Plan) -> dict[str, str]:
    """{expression id: lower-cased column} a file scan outputs, from its ``simpleString``."""
    match = SCAN_OUTPUT.search(str(node.get("simpleString", "")))
    if match is None:
        return {}
    return {ref: name for name, ref in (_references(match.group(1)) or [])}


def plan_join_keys(
    plan: Plan, identity: Callable[[Plan], str], filters: Callable[[Plan], tuple[str, ...]]
) -> dict[int, list[JoinKey]]:
    """Per scan node (by ``id``), its inner equi-joins with a scan whose `filters` are not empty, the
    other table named by `identity`."""
    keys: dict[int, list[JoinKey]] = {}
    for join in _joins(plan):
        match = JOIN.match(str(join["simpleString"]))
        children = join.get("children") or []
        if match is None or match.group(3) != "Inner" or len(children) != 2:
            continue
        left = _references(match.group(1))
        right = _references(match.group(2))
        if left is None or right is None or len(left) != len(right):
            continue
        for (own_side, own_keys), (other_side, other_keys) in (
            ((children[0], left), (children[1], right)),
            ((children[1], right), (children[0], left)),
        ):
            for (own_name, own_id), (other_name, other_id) in zip(own_keys, other_keys, strict=True):
                own = _owner(own_side, own_id)
                other = _owner(other_side, other_id)
                if own is None or other is None:
                    continue
                stated = filters(other)
                if stated:
                    key = JoinKey(own_name, identity(other), other_name, stated)
                    if key not in keys.setdefault(id(own), []):
                        keys[id(own)].append(key)
    return keys


def _owner(subtree: Plan, expression_id: str) -> Plan | None:
    """The one file scan in `subtree` that outputs `expression_id`; None when none or several do."""
    owners = [node for node in scan_nodes(subtree) if expression_id in scan_output(node)]
    return owners[0] if len(owners) == 1 else None
