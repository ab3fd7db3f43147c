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
    if not pool:
        return result
    if len(pool) == 1:
        return [*result, SopPartition(pool[0][0], pool[0][1], (pool[0][0],))]

    tables = _byte_weight_tables(weights)
    size = 2 * len(pool)  # every merge adds one row
    vec = np.zeros(size, dtype=np.uint64)
    counts = np.zeros(size, dtype=float)
    members: list[tuple[int, ...]] = []
    for i, (vector, count) in enumerate(pool):
        vec[i] = vector
        counts[i] = count
        members.append((vector,))
    used = len(pool)
    ids = np.arange(used)  # active rows
    active = np.zeros(size, dtype=bool)
    active[:used] = True
    best_delta = np.full(size, -np.inf)
    best_partner = np.full(size, -1, dtype=np.int64)
    heap: list[tuple[float, int, int]] = []

    def deltas(i: int) -> np.ndarray:
        """delta(i, j) for every active row j, aligned with `ids` (-inf for i itself)."""
        others = vec[ids]
        lost_i = _weighted(others & ~vec[i], tables)  # features j has and i lacks
        lost_j = _weighted(~others & vec[i], tables)
        values = -(counts[i] * lost_i + counts[ids] * lost_j)
        values[ids == i] = -np.inf
        return values

    def set_best(i: int, values: np.ndarray) -> None:
        position = int(np.argmax(values))
        best_delta[i], best_partner[i] = values[position], ids[position]
        if np.isfinite(values[position]):
            j = int(ids[position])
            heapq.heappush(heap, (-values[position], min(i, j), max(i, j)))

    for i in range(used):
        set_best(i, deltas(i))
    while len(ids) > 1 and heap:
        _, i, j = heapq.heappop(heap)
        if not (active[i] and active[j]) or not (best_partner[i] == j or best_partner[j] == i):
            continue  # stale
        k = used
        used += 1
        vec[k] = vec[i] | vec[j]
        counts[k] = counts[i] + counts[j]
        members.append(members[i] + members[j])
        ids = ids[(ids != i) & (ids != j)]
        active[i] = active[j] = False
        if counts[k] > min_size:
            result.append(SopPartition(int(vec[k]), int(counts[k]), tuple(sorted(members[k]))))
        else:
            ids = np.append(ids, k)
            active[k] = True
        orphaned = (best_partner[ids] == i) | (best_partner[ids] == j)
        orphans = ids[orphaned]
        if active[k]:
            values = deltas(k)
            better = (values > best_delta[ids]) & ~orphaned
            for position in np.flatnonzero(better):
                x = int(ids[position])
                best_delta[x], best_partner[x] = values[position], k
                heapq.heappush(heap, (-values[position], min(x, k), max(x, k)))
            set_best(k, values)
        for x in orphans:
            set_best(int(x), deltas(int(x)))
    for row in ids:
        result.append(SopPartition(int(vec[row]), int(counts[row]), tuple(sorted(members[row]))))
    return result


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
