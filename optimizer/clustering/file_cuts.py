"""File boundaries of an order key: cut points drawn from a sample collected to the driver (each row's
file or row group by them is `cut_search.with_cut_index`, computed by Spark).

A key is a tuple of columns compared lexicographically in Spark's ascending order (NULL first, NaN above
every number); the cuts come from the sample (`file_cuts`), or, where rows of different leading values
(a table partition, a cut tree's leaf) must never share a file, per group of them (`aligned_cuts`).
Cuts only balance file sizes: a sample that misjudges them makes files uneven, never loses a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def present_values(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(which of `values` are not NULL, those values as an array numpy orders as Spark does): numbers
    natively (floats: NaN above +Infinity, -0.0 = 0.0, where numpy's search and sort over Python objects
    reuse positions a NaN compares false with), anything else (dates, decimals, strings) as Python objects."""
    present = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    kept = [v for v in values if v is not None]
    column = np.asarray(kept)
    if not kept or column.dtype.kind not in "fiu":
        column = np.empty(len(kept), dtype=object)
        column[:] = kept
    return present, column


def _ranks(values: Sequence[Any]) -> np.ndarray:
    """Each value's rank among the distinct non-NULL values, -1 for NULL: Spark's ascending order
    with NULL first, as numbers numpy can sort (`present_values`; every NaN one value)."""
    present, column = present_values(values)
    ranks = np.full(len(values), -1, dtype=np.int64)
    if present.any():
        _, inverse = np.unique(column, return_inverse=True, equal_nan=column.dtype.kind == "f")
        ranks[present] = inverse.reshape(-1)
    return ranks


def file_cuts(columns: Sequence[Sequence[Any]], files: int) -> list[tuple[Any, ...]]:
    """Up to ``files - 1`` distinct keys cutting the sample into equal shares once sorted; the key of
    row r is ``tuple(c[r] for c in columns)``, and file i holds the keys in [cut i-1, cut i). A cut at
    the smallest key would only make an empty file."""
    count = len(columns[0]) if columns else 0
    if count == 0 or files <= 1:
        return []
    ranks = [_ranks(c) for c in columns]
    order = np.lexsort(ranks[::-1])  # lexsort's primary key is its last
    smallest = tuple(int(r[order[0]]) for r in ranks)
    cuts: list[tuple[Any, ...]] = []
    previous = smallest
    for k in range(1, files):
        position = order[count * k // files]
        ranked = tuple(int(r[position]) for r in ranks)
        if ranked != previous:
            cuts.append(tuple(c[position] for c in columns))
            previous = ranked
    return cuts


def aligned_cuts(columns: Sequence[Sequence[Any]], files: int, aligned: int) -> list[tuple[Any, ...]]:
    """`file_cuts`, except that rows whose first `aligned` key components differ never share a file (a
    cut tree's leaves, `clustering.cuts`): each such group of the sample gets its share of the files,
    and a cut (its values, NULL...) opens it, below every key of the group (NULL sorts first)."""
    count = len(columns[0]) if columns else 0
    if not aligned or count == 0:
        return file_cuts(columns, files)
    groups: dict[tuple[int, ...], list[int]] = {}  # by the leading values' ranks: Spark's groups (one NaN)
    for row, ranked in enumerate(zip(*(_ranks(c).tolist() for c in columns[:aligned]), strict=True)):
        groups.setdefault(ranked, []).append(row)
    cuts: list[tuple[Any, ...]] = []
    ordered = sorted(groups)  # ranks sort as Spark does: NULL first, NaN above every number
    for n, (ranked, share) in enumerate(zip(ordered, shares([len(groups[k]) for k in ordered], files), strict=True)):
        rows = groups[ranked]
        if n:  # opened by the group's own values (a NaN, which Spark finds equal to every NaN)
            cuts.append((*(c[rows[0]] for c in columns[:aligned]), *([None] * (len(columns) - aligned))))
        cuts.extend(file_cuts([[c[r] for r in rows] for c in columns], share))
    return cuts


def shares(sizes: Sequence[int], files: int) -> list[int]:
    """Files per group of `sizes` rows: in proportion, at least one each, and `files` in all where there are
    no more groups than files (rounding each share on its own made 13 of 12): the shares rounded down
    (at least 1), then files given to the groups furthest below their exact share, or taken from those
    furthest above it, one at a time."""
    total = sum(sizes) or 1
    exact = [files * size / total for size in sizes]
    given = [max(1, int(e)) for e in exact]
    while sum(given) < files:
        given[min(range(len(given)), key=lambda i: (given[i] - exact[i], i))] += 1
    while sum(given) > max(files, len(given)):
        given[max((i for i in range(len(given)) if given[i] > 1), key=lambda i: (given[i] - exact[i], -i))] -= 1
    return given
