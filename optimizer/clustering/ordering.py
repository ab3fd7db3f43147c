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


MAX_STARTS = 32


def order_partitions(
    partitions: Sequence[SopPartition], rows_per_file: float | None = None, weights: Sequence[float] | None = None
) -> list[SopPartition]:
    """`partitions` in the order of the MST preorder walk.

    Without `rows_per_file`: the walk from the vector with the fewest 1 bits. With it, the walks from up
    to 32 start vertices and the given order are each cut into files of `rows_per_file` rows, and the
    order whose files keep the most skipping (the SOP objective on files, `weights` per feature) wins, so
    the result is never worse than the order the partitions came in.
    """
    if len(partitions) <= 2:
        return sorted(partitions, key=lambda p: (p.vector.bit_count(), p.vector))
    by_vector: dict[int, list[SopPartition]] = {}
    for partition in partitions:
        by_vector.setdefault(partition.vector, []).append(partition)
    vectors = sorted(by_vector)
    graph = nx.Graph()
    graph.add_nodes_from(vectors)
    graph.add_weighted_edges_from((a, b, hamming(a, b)) for i, a in enumerate(vectors) for b in vectors[i + 1 :])
    tree = _sorted_tree(nx.minimum_spanning_tree(graph, algorithm="prim"))
    by_ones = sorted(vectors, key=lambda v: (v.bit_count(), v))

    def walk(start: int) -> list[SopPartition]:
        return [p for vector in nx.dfs_preorder_nodes(tree, source=start) for p in by_vector[vector]]

    if rows_per_file is None:
        return walk(by_ones[0])
    step = max(len(by_ones) // MAX_STARTS, 1)
    candidates = [walk(start) for start in by_ones[::step][:MAX_STARTS]] + [list(partitions)]
    features = max(p.vector.bit_length() for p in partitions)
    w = list(weights) if weights is not None else [1.0] * features
    return max(candidates, key=lambda order: file_objective(order, rows_per_file, w))


def file_vectors(ordered: Sequence[SopPartition], rows_per_file: float) -> list[tuple[int, float]]:
    """(OR of vectors, rows) of the files a layout cuts along `ordered`, each `rows_per_file` rows."""
    files: list[tuple[int, float]] = []
    vector, rows = 0, 0.0
    for partition in ordered:
        remaining = float(partition.count)
        while remaining > 0:
            take = min(remaining, rows_per_file - rows)
            vector |= partition.vector
            rows += take
            remaining -= take
            if rows >= rows_per_file:
                files.append((vector, rows))
                vector, rows = 0, 0.0
    if rows:
        files.append((vector, rows))
    return files


def file_objective(ordered: Sequence[SopPartition], rows_per_file: float, weights: Sequence[float]) -> float:
    """Rows skipped over the workload when files are cut along `ordered` (the SOP cost on files)."""
    return sum(
        rows * sum(w for k, w in enumerate(weights) if not (vector >> k) & 1)
        for vector, rows in file_vectors(ordered, rows_per_file)
    )


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
