"""Skipping-oriented partitioning (SOP), step C1: bottom-up clustering of feature bit vectors.

From the Berkeley dissertation (3.4): rows are reduced to distinct (vector, count) pairs; every pair
starts as a partition; the pair of partitions whose merge loses the least skipping is merged,

    delta(Pi, Pj) = -( |Pi| * sum_k w_k (vj & ~vi)_k  +  |Pj| * sum_k w_k (vi & ~vj)_k )

and a merged partition leaves the pool once it exceeds the minimum size (the last one leaves
whatever its size). A vector whose rows already exceed the minimum is a partition of its own, and
one far above it (at least twice the minimum) is cut into minimum-sized chunks; neither is merged.
So every partition but the last holds more than the minimum and at most twice it.

Scaling: vectors are packed into 64-bit words (at most 62 features) and weighted popcounts use
one table lookup per byte. The pool keeps, for every partition, its best partner; a heap holds those best pairs. A merge
computes the new partition's deltas against all others in one vectorised step and recomputes best
partners only for partitions whose partner disappeared. Thousands of distinct vectors take seconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SopPartition:
    """A SOP partition: the OR of its members' vectors, its row count, and the distinct vectors in it."""

    vector: int  # bit k (least significant = feature 0) set when some row satisfies feature k
    count: int
    members: tuple[int, ...]


def bits_of(vector: int, features: int) -> np.ndarray:
    return np.array([(vector >> k) & 1 for k in range(features)], dtype=bool)


def vector_of(bits: Sequence[bool]) -> int:
    return sum(1 << k for k, bit in enumerate(bits) if bit)


def merge_delta(vi: int, ni: int, vj: int, nj: int, weights: Sequence[float]) -> float:
    """The change of the skipping objective when merging (vi, ni) with (vj, nj) (always <= 0)."""
    gain_lost_i = sum(w for k, w in enumerate(weights) if (vj >> k) & 1 and not (vi >> k) & 1)
    gain_lost_j = sum(w for k, w in enumerate(weights) if (vi >> k) & 1 and not (vj >> k) & 1)
    return -(ni * gain_lost_i + nj * gain_lost_j)


def objective(partitions: Sequence[SopPartition], weights: Sequence[float]) -> float:
    """C(P): rows skipped over the workload, sum over partitions of |P| * sum of weights of its 0 bits."""
    return float(sum(p.count * sum(w for k, w in enumerate(weights) if not (p.vector >> k) & 1) for p in partitions))


def cluster(vectors: Sequence[tuple[int, int]], weights: Sequence[float], min_size: int) -> list[SopPartition]:
    """Partitions of the (vector, count) pairs, each of at least `min_size` rows but the last merged one."""
    if min_size < 1:
        raise ValueError("min_size must be at least 1")
    result, pool = _split_large(vectors, min_size)
    if len(pool) <= 1:
        return result + [SopPartition(vector, count, (vector,)) for vector, count in pool]
    return result + _Merger(pool, weights, min_size).run()


def _split_large(vectors: Sequence[tuple[int, int]], min_size: int) -> tuple[list[SopPartition], list[tuple[int, int]]]:
    """Vectors with enough rows become partitions of their own (chunked when at least twice the minimum);
    the rest go to the pool that greedy merging clusters."""
    result: list[SopPartition] = []
    pool: list[tuple[int, int]] = []
    for vector, count in sorted(vectors):
        if count <= 0:
            continue
        if count >= 2 * min_size:
            chunks = count // min_size
            base, extra = divmod(count, chunks)
            result += [SopPartition(vector, base + (i < extra), (vector,)) for i in range(chunks)]
        elif count > min_size:  # already past the minimum: never merged
            result.append(SopPartition(vector, count, (vector,)))
        else:
            pool.append((vector, count))
    return result, pool


class _Merger:
    """Greedy pairwise merging of the pool: always merge the pair whose union loses the least weighted
    skipping (delta), retiring a merged row once it passes `min_size`. Rows live in preallocated arrays
    (every merge adds one row); each active row keeps its best partner, and a heap of candidate pairs
    is checked lazily against those (a popped pair whose rows moved on is stale)."""

    def __init__(self, pool: Sequence[tuple[int, int]], weights: Sequence[float], min_size: int) -> None:
        self.tables = _byte_weight_tables(weights)
        self.min_size = min_size
        size = 2 * len(pool)
        self.vec = np.zeros(size, dtype=np.uint64)
        self.counts = np.zeros(size, dtype=float)
        self.members: list[tuple[int, ...]] = []
        for i, (vector, count) in enumerate(pool):
            self.vec[i] = vector
            self.counts[i] = count
            self.members.append((vector,))
        self.used = len(pool)
        self.ids = np.arange(self.used)  # active rows
        self.active = np.zeros(size, dtype=bool)
        self.active[: self.used] = True
        self.best_delta = np.full(size, -np.inf)
        self.best_partner = np.full(size, -1, dtype=np.int64)
        self.heap: list[tuple[float, int, int]] = []
        self.result: list[SopPartition] = []

    def deltas(self, i: int) -> np.ndarray:
        """delta(i, j) for every active row j, aligned with `ids` (-inf for i itself)."""
        others = self.vec[self.ids]
        lost_i = _weighted(others & ~self.vec[i], self.tables)  # features j has and i lacks
        lost_j = _weighted(~others & self.vec[i], self.tables)
        values = -(self.counts[i] * lost_i + self.counts[self.ids] * lost_j)
        values[self.ids == i] = -np.inf
        return values

    def set_best(self, i: int, values: np.ndarray) -> None:
        position = int(np.argmax(values))
        self.best_delta[i], self.best_partner[i] = values[position], self.ids[position]
        if np.isfinite(values[position]):
            j = int(self.ids[position])
            heapq.heappush(self.heap, (-values[position], min(i, j), max(i, j)))

    def run(self) -> list[SopPartition]:
        for i in range(self.used):
            self.set_best(i, self.deltas(i))
        while len(self.ids) > 1 and self.heap:
            _, i, j = heapq.heappop(self.heap)
            if not (self.active[i] and self.active[j]) or not (self.best_partner[i] == j or self.best_partner[j] == i):
                continue  # stale
            self.merge(i, j)
        for row in self.ids:
            self.result.append(
                SopPartition(int(self.vec[row]), int(self.counts[row]), tuple(sorted(self.members[row])))
            )
        return self.result

    def merge(self, i: int, j: int) -> None:
        """Merge rows i and j into a new row k; k retires when big enough, else it and the rows whose
        best partner was i or j get their best partners again."""
        k = self.used
        self.used += 1
        self.vec[k] = self.vec[i] | self.vec[j]
        self.counts[k] = self.counts[i] + self.counts[j]
        self.members.append(self.members[i] + self.members[j])
        self.ids = self.ids[(self.ids != i) & (self.ids != j)]
        self.active[i] = self.active[j] = False
        if self.counts[k] > self.min_size:
            self.result.append(SopPartition(int(self.vec[k]), int(self.counts[k]), tuple(sorted(self.members[k]))))
        else:
            self.ids = np.append(self.ids, k)
            self.active[k] = True
        orphaned = (self.best_partner[self.ids] == i) | (self.best_partner[self.ids] == j)
        orphans = self.ids[orphaned]
        if self.active[k]:
            values = self.deltas(k)
            better = (values > self.best_delta[self.ids]) & ~orphaned
            for position in np.flatnonzero(better):
                x = int(self.ids[position])
                self.best_delta[x], self.best_partner[x] = values[position], k
                heapq.heappush(self.heap, (-values[position], min(x, k), max(x, k)))
            self.set_best(k, values)
        for x in orphans:
            self.set_best(int(x), self.deltas(int(x)))


def _byte_weight_tables(weights: Sequence[float]) -> np.ndarray:
    """tables[b][v]: summed weights of the features whose bits are set in byte b of a vector."""
    count = max((len(weights) + 7) // 8, 1)
    tables = np.zeros((count, 256))
    for b in range(count):
        for value in range(256):
            tables[b, value] = sum(
                weights[8 * b + k] for k in range(8) if (value >> k) & 1 and 8 * b + k < len(weights)
            )
    return tables


def _weighted(vectors: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """Weighted popcount of packed vectors, one table lookup per byte (little-endian byte view)."""
    octets = vectors.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8)
    total = tables[0][octets[:, 0]]
    for b in range(1, len(tables)):
        total = total + tables[b][octets[:, b]]
    return total
