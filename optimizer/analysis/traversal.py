"""Algorithm 3: traverse a correlation graph to split features into primary and correlated ones.

Visit vertices by a policy (most frequent first by default, then most connected, then by name). The
visited vertex becomes *primary*; its edges, and the edges among its neighbours, are cut (those pairs
are now accounted for); a neighbour left with no edge is *correlated* with the primary and leaves the
traversal, while one with other correlations stays and may become primary later. The traversal stops
at the limit or when no remaining vertex is frequent enough; remaining vertices are *unvisited*.

The thesis's Figure 4.4/4.5 graph (1-2, 1-3, 2-3, 2-4, 4-5, 4-6, 5-6; frequency 1 > 4 > the rest)
gives primary {1, 4} and correlated {2, 3, 5, 6}.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal

import networkx as nx

Policy = Literal["frequency", "degree"]


@dataclass(frozen=True)
class Traversal:
    primary: tuple[Hashable, ...]
    correlated: Mapping[Hashable, tuple[Hashable, float | None]] = field(default_factory=dict)  # v -> (primary, index)
    unvisited: tuple[Hashable, ...] = ()


def traverse(
    graph: nx.Graph,
    frequency: Mapping[Hashable, float],
    limit: int,
    min_frequency: float = 0.0,
    policy: Policy = "frequency",
) -> Traversal:
    working = graph.copy()
    active = set(working.nodes)
    primary: list[Hashable] = []
    correlated: dict[Hashable, tuple[Hashable, float | None]] = {}

    def rank(vertex: Hashable) -> tuple[float, float, str]:
        first = frequency.get(vertex, 0.0)
        second = working.degree(vertex)
        if policy == "degree":
            first, second = second, first
        return (-first, -second, str(vertex))

    while len(primary) < limit:
        eligible = [v for v in active if frequency.get(v, 0.0) >= min_frequency]
        if not eligible:
            break
        current = min(eligible, key=rank)
        primary.append(current)
        active.discard(current)
        neighbours = list(working.neighbors(current))
        indexes = {n: working.edges[current, n].get("index") for n in neighbours}
        for a, b in combinations(neighbours, 2):
            if working.has_edge(a, b):
                working.remove_edge(a, b)
        for n in neighbours:
            working.remove_edge(current, n)
        for n in neighbours:
            if working.degree(n) == 0 and n in active:
                correlated[n] = (current, indexes[n])
                active.discard(n)
    unvisited = tuple(sorted(active, key=rank))
    return Traversal(tuple(primary), correlated, unvisited)
