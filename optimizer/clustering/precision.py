"""Per-dimension precision from the workload: which dimensions get Z-order's leading key bits.

Round-robin interleaving (`curves.key_bit_order`) makes every dimension equally significant: n files
cut each of d dimensions about n^(1/d) times. A workload that filters one dimension often and narrowly
and another rarely and broadly reads fewer bytes when the first gets more of the key's leading bits
(learned Z-order, LMSFC): its ranges are cut finer, the other's coarser.

A dimension's weight is the sum, over the scans filtering it, of the scan's weight times the bits of
selectivity of its filters on it, ``log2(1 / selectivity)``: a filter keeping 1/8 of the rows is
worth 3 bits, one keeping everything none. Each key bit, from the most significant, then goes to the
dimension with the highest ``weight / 2 ** (bits already given)``: a bit halves a dimension's cells,
so its next bit is worth half the last. The bits are given out over every bit a dimension's range ids
can have (`allocation_bits`), not the ones this run's file count gives: the pattern, and so the layout
key that merging and drift compare runs by (`clustering.groups.layout_key`), does not change with the
bytes each run rewrites; a job whose dimensions have fewer bits passes over the rest
(`curves.key_bit_order`), which leaves exactly the greedy's order over the bits they have. Pure Python;
the selectivities are measured by the estimate (`optimizer.estimate.workload_bits`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from optimizer.clustering.curves import key_bit_order
from optimizer.features import DIMENSION_BITS, KEY_BITS

Scan = tuple[float, Mapping[int, float]]
"""One scan (or distinct query): its weight, and {dimension index: selectivity of its filters on it}."""


def dimension_weights(scans: Iterable[Scan], dimensions: int) -> list[float]:
    """Each dimension's weight: the scans filtering it, each counted by its weight times
    ``log2(1 / selectivity)``. A selectivity of 1 adds nothing; one of 0 (no sampled row matching) is
    left out too: the caller clamps it to one sampled row's share first."""
    weights = [0.0] * dimensions
    for weight, selectivities in scans:
        for i, selectivity in selectivities.items():
            if 0 < selectivity < 1:
                weights[i] += weight * -math.log2(selectivity)
    return weights


def allocate_bits(weights: Sequence[float], bits: Sequence[int]) -> tuple[int, ...]:
    """The dimension of each leading key bit, most significant first: greedily the highest
    ``weight / 2 ** given`` among dimensions with bits left, ties to the higher index (round-robin's
    own order from the top, so equal weights over equal bits give round-robin). Stops when no
    dimension with bits left has weight: those bits keep the round-robin order below the pattern."""
    given = [0] * len(bits)
    pattern: list[int] = []
    while True:
        open_ = [i for i in range(len(bits)) if given[i] < bits[i] and weights[i] > 0]
        if not open_:
            return tuple(pattern)
        best = max(open_, key=lambda i: (weights[i] / 2 ** given[i], i))
        pattern.append(best)
        given[best] += 1


def allocation_bits(dimensions: int) -> list[int]:
    """The bits each of `dimensions` dimensions is given out over: all a dimension's range ids can have,
    shared out so the pattern fits a key (`FeatureSet.precision` refuses a longer one)."""
    return [min(DIMENSION_BITS, KEY_BITS // max(dimensions, 1))] * dimensions


def workload_pattern(weights: Sequence[float], bits: Sequence[int]) -> tuple[int, ...]:
    """`allocate_bits` over `allocation_bits` (the same pattern whatever the file count), or () where
    its key over the `bits` the job's range ids have is round-robin's anyway (no candidate to price)."""
    pattern = allocate_bits(weights, allocation_bits(len(bits)))
    return pattern if key_bit_order(bits, pattern) != key_bit_order(bits) else ()


def kept_pattern(pattern: Sequence[int], kept: Sequence[bool]) -> tuple[int, ...]:
    """`pattern` over the dimensions the job has: each kept one renumbered among the kept, the bits of one
    left out (a joined attribute whose dimension could not be read) dropped."""
    numbers: list[int | None] = []
    count = 0
    for present in kept:
        numbers.append(count if present else None)
        count += int(present)
    return tuple(n for i in pattern if i < len(numbers) and (n := numbers[i]) is not None)
