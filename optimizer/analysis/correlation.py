"""Correlation measures and graphs between candidate features (thesis 4.2.2, Algorithm 2).

**Z-order features: the sort-index.** Order the sample by feature *i* and ask how sorted feature *j*
then is. The thesis counts k = #{positions a < b : A[a] < A[b]} and divides by n(n-1)/2; its O(n²)
loop is replaced by Kendall's tau-b of (position, value), which counts the same ordered pairs in
O(n log n) (scipy's implementation of Knight's algorithm).

The thesis's index calls a constant column perfectly (descending) sorted, its admitted false
positive. The graph therefore uses the *tie-aware* index, ascending / (ascending + descending) pairs,
which is undefined (no edge) when every pair is tied, and keeps the thesis's bidirectional check.

**SOP features: mean-square contingency** (CORDS): chi-square / (n (min(d1, d2) - 1)) of the
contingency table, phi² for two boolean features. It is undefined (no edge) when a feature is
constant on the sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy.stats import kendalltau


def ordered_pair_counts(values: np.ndarray) -> tuple[int, int]:
    """(ascending, descending): the number of position pairs a < b with values[a] < values[b], and with
    values[a] > values[b]; tied pairs count in neither. O(n log n).

    Kendall's tau-b of (position, value) is (P - Q) / sqrt(n0 (n0 - U)) with n0 = n(n-1)/2 pairs and U
    pairs tied in value (positions never tie), and P + Q = n0 - U; scipy computes tau-b in C with
    Knight's algorithm, so P and Q follow exactly up to float rounding.
    """
    n = len(values)
    if n < 2:
        return 0, 0
    _, counts = np.unique(values, return_counts=True)
    total = n * (n - 1) // 2
    ordered = total - int(np.sum(counts * (counts - 1) // 2))
    if ordered == 0:
        return 0, 0
    tau = kendalltau(np.arange(n), values).statistic
    difference = float(tau) * math.sqrt(float(total) * float(ordered))
    ascending = round((ordered + difference) / 2)
    return ascending, ordered - ascending


def sort_index(values: np.ndarray) -> float:
    """The thesis's sort-index: ascending pairs / n(n-1)/2 (1: ascending, 0: descending or constant)."""
    n = len(values)
    if n < 2:
        return 1.0
    ascending, _ = ordered_pair_counts(values)
    return ascending / (n * (n - 1) / 2)


def tie_aware_sort_index(values: np.ndarray) -> float | None:
    """ascending / (ascending + descending) pairs; None when no pair is ordered (constant values)."""
    ascending, descending = ordered_pair_counts(values)
    total = ascending + descending
    return None if total == 0 else ascending / total


def sort_index_after_ordering(
    key: np.ndarray, target: np.ndarray, key_null: np.ndarray, target_null: np.ndarray
) -> float | None:
    """Tie-aware sort-index of `target` once the rows are ordered by `key` (ties in the key keep the
    sample's order). Rows where either is NULL do not take part."""
    keep = ~(key_null | target_null)
    if keep.sum() < 2:
        return None
    order = np.argsort(key[keep], kind="stable")
    return tie_aware_sort_index(target[keep][order])


def mean_square_contingency(a: np.ndarray, b: np.ndarray) -> float | None:
    """CORDS's mean-square contingency chi² / (n (min(d1, d2) - 1)) of two categorical arrays, in
    [0, 1] (for two boolean features it is phi²); None when either has a single value."""
    n = len(a)
    if n == 0:
        return None
    _, x = np.unique(a, return_inverse=True)
    _, y = np.unique(b, return_inverse=True)
    d1, d2 = int(x.max()) + 1, int(y.max()) + 1
    if min(d1, d2) < 2:
        return None
    observed = np.zeros((d1, d2))
    np.add.at(observed, (x.reshape(-1), y.reshape(-1)), 1)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / n
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    return chi2 / (n * (min(d1, d2) - 1))


@dataclass(frozen=True)
class ZSample:
    """A Z candidate evaluated on the sample: dense ranks (any orderable type) and a NULL mask."""

    ranks: np.ndarray
    nulls: np.ndarray

    @property
    def distinct(self) -> int:
        valid = self.ranks[~self.nulls]
        return len(np.unique(valid)) if len(valid) else 0


def z_correlation_graph(samples: Mapping[str, ZSample], epsilon: float) -> nx.Graph:
    """Algorithm 2 for Z-order: edge i-j when ordering by i sorts j (index < eps or > 1-eps) **and**
    ordering by j sorts i. Edge attribute ``index``: the sort-index of the weaker direction."""
    graph = nx.Graph()
    graph.add_nodes_from(samples)
    names = list(samples)

    def sorted_by(i: str, j: str) -> float | None:
        """The sort-index of j ordered by i, when it passes the threshold."""
        index = sort_index_after_ordering(samples[i].ranks, samples[j].ranks, samples[i].nulls, samples[j].nulls)
        return index if index is not None and (index > 1 - epsilon or index < epsilon) else None

    edges: dict[tuple[str, str], float] = {}
    for x, first in enumerate(names):
        for second in names[x + 1 :]:
            i, j = sorted((first, second))  # the edge's index is read with the smaller name as the key
            index = sorted_by(i, j)
            if index is None:
                continue  # both directions must pass: the reverse is not needed (most pairs stop here)
            back = sorted_by(j, i)
            if back is not None:
                edges[(i, j)] = index if abs(index - 0.5) <= abs(back - 0.5) else back
    position = {name: k for k, name in enumerate(names)}
    for (i, j), weaker in sorted(edges.items(), key=lambda e: (position[e[0][0]], position[e[0][1]])):
        graph.add_edge(i, j, index=round(weaker, 4))  # in the order the samples list them
    return graph


def sop_correlation_graph(bits: Mapping[str, np.ndarray], phi: float) -> nx.Graph:
    """Algorithm 2 for SOP: edge when the mean-square contingency exceeds `phi` (symmetric)."""
    graph = nx.Graph()
    graph.add_nodes_from(bits)
    names = list(bits)
    for x, i in enumerate(names):
        for j in names[x + 1 :]:
            value = mean_square_contingency(bits[i], bits[j])
            if value is not None and value > phi:
                graph.add_edge(i, j, index=round(value, 4))
    return graph
