"""Step C2: order SOP partitions so neighbours share bits, then number them in that order.

The thesis's 2-approximation of the travelling-salesman path on the Hamming-distance graph of the
partitions' vectors: a minimum spanning tree (Prim) and its preorder walk from a start vertex. The
Hamming distance is a metric, so the walk costs at most twice the optimum. Identical vectors (chunks
of one vector, or partitions that ended up equal) are one vertex, so they get consecutive ids.

Why it matters: Z-ordering on the SOP id puts neighbouring ids into the same file, whose statistics
are the OR of their vectors; neighbours that share 1s keep more 0s, i.e. more skipping.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from optimizer.clustering.sop import SopPartition


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def order_partitions(partitions: Sequence[SopPartition]) -> list[SopPartition]:
    """`partitions` reordered by the MST preorder walk (start: the vector with the fewest 1 bits)."""
    if len(partitions) <= 2:
        return sorted(partitions, key=lambda p: (p.vector.bit_count(), p.vector))
    by_vector: dict[int, list[SopPartition]] = {}
    for partition in partitions:
        by_vector.setdefault(partition.vector, []).append(partition)
    vectors = sorted(by_vector)
    graph = nx.Graph()
    graph.add_nodes_from(vectors)
    graph.add_weighted_edges_from((a, b, hamming(a, b)) for i, a in enumerate(vectors) for b in vectors[i + 1 :])
    tree = nx.minimum_spanning_tree(graph, algorithm="prim")
    start = min(vectors, key=lambda v: (v.bit_count(), v))
    ordered = nx.dfs_preorder_nodes(_sorted_tree(tree), source=start)
    return [p for vector in ordered for p in by_vector[vector]]


def _sorted_tree(tree: nx.Graph) -> nx.Graph:
    """The tree with each vertex's neighbours in (distance, vector) order, so the walk is deterministic
    and visits the closest subtree first."""
    ordered = nx.Graph()
    ordered.add_nodes_from(sorted(tree.nodes))
    for u in sorted(tree.nodes):
        for v in sorted(tree.neighbors(u), key=lambda v: (tree.edges[u, v]["weight"], v)):
            ordered.add_edge(u, v, weight=tree.edges[u, v]["weight"])
    return ordered


def zero_bits(vectors: Sequence[int], features: int) -> int:
    """Zeros across file bit vectors: the number of (file, feature) pairs a query can skip."""
    return sum(features - v.bit_count() for v in vectors)
