"""The greedy cut tree's builder (qd-tree style) over the estimate's sample: where each row's leaf is
found, in numpy and in Spark, is `clustering.cuts`.

The tree (`optimizer.cut_tree.CutTree`) cuts rows by ``column < literal`` or ``column <= literal`` at the
literals the workload's Z-shaped conjuncts compare plain columns with (the curve's, and the columns of
recurring predicates a min/max reader can test), so a leaf's box is aligned with the workload's own
filters, where Z-order's quantile ranges straddle them. The builder grows the tree best first: each
leaf's best cut is the one under which the workload's queries skip the most weighted rows in the two
children beyond what they skip in the leaf (a query weighs its frequency over the square root of its
selectivity on the sample, `relative`; a query skips a child when one of its conjuncts cannot hold
between the child's min and max of that column, as a reader's min/max statistics decide), both children
of at least `min_leaf_rows` rows; it stops at `max_leaves` leaves or when no cut skips more, then, where
asked, grows on with row-group cuts. Ties go to the column name, then the literal, then ``<`` before
``<=``. NULL (and NaN) rows go above every cut; a child of NULLs only is skipped by every conjunct.

The builder works on ranks: each column's distinct non-NULL values sorted, NaN above them, NULL above
that, so a cut is a rank threshold and a child's min/max are two integer reductions.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optimizer.cut_tree import MAX_DEPTH, Cut, CutTree

MAX_CANDIDATES = 48  # cuts evaluated per leaf and column, the most used first: a large workload stays cheap
RELATIVE_POWER = 0.5  # a scan weighs 1 / its selectivity ** this (`relative`)
SHARE_FLOOR = 1e-3  # a scan selecting less of the sample weighs as one selecting this share
RANGE_OPS = ("<", "<=", ">", ">=", "=", "in")
_NEVER = np.iinfo(np.int64).max  # an `A` no minimum reaches below: the bound it stands for never fails


@dataclass(frozen=True)
class Comparison:
    """One Z-shaped conjunct of a scan on a plain column: ``column op value`` (``in``: any of `values`),
    the literals typed as the column's values (`Cut.kind`)."""

    column: str
    op: str  # one of RANGE_OPS
    kind: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Scan:
    """A query of the workload: its weight and the comparisons the tree can cut at (its other conjuncts
    skip nothing the tree decides)."""

    weight: float
    comparisons: tuple[Comparison, ...]


@dataclass(frozen=True)
class _Ranked:
    """A column as ranks: `low` with NULL above every value (for minima), `high` with NULL at -1 (maxima)."""

    distinct: list[Any]
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of(cls, values: Sequence[Any]) -> _Ranked:
        distinct = sorted({v for v in values if v is not None and v == v})
        position = {v: i for i, v in enumerate(distinct)}
        nan, null = len(distinct), len(distinct) + 1
        low = np.fromiter(
            (null if v is None else position.get(v, nan) for v in values), dtype=np.int64, count=len(values)
        )
        return cls(distinct, low, np.where(low == null, -1, low))

    def threshold(self, value: Any, op: str) -> int:
        """The rank below which ``value op`` sends a row below (raises TypeError for an alien literal)."""
        return (bisect.bisect_left if op == "<" else bisect.bisect_right)(self.distinct, value)


@dataclass(frozen=True)
class _Workload:
    """The scans as arrays: an alternative (a comparison, or one item of an IN list) holds in rows whose
    column's min rank < `a` and max rank >= `b`; a conjunct holds when one of its alternatives does
    (`conjuncts`: where each starts), a scan reads rows where all its conjuncts hold (`scans`: where each
    starts, in conjuncts)."""

    columns: tuple[str, ...]
    column: np.ndarray
    a: np.ndarray
    b: np.ndarray
    conjuncts: np.ndarray
    scans: np.ndarray
    weights: np.ndarray
    sources: np.ndarray  # each scan's place in the builder's `scans` (those with no comparison here are left out)

    def shares(self, ranked: Mapping[str, _Ranked]) -> np.ndarray:
        """Each scan's share of the sampled rows its own comparisons select (NULL rows never). A row's
        min and max rank are its value's, so an alternative holds for ranks in [b, a): each conjunct is a
        table over its column's ranks (their union), read at every row's rank: conjuncts x rows of work,
        not IN items x rows (review 62: 15 s and 478 MB at 100k rows, 300 scans of 50-item IN lists)."""
        rows = len(next(iter(ranked.values())).low) if ranked else 0
        ends = np.append(self.conjuncts[1:], len(self.column))
        last = np.append(self.scans[1:], len(self.conjuncts))
        read = np.zeros(len(self.weights))
        for scan, (first, stop) in enumerate(zip(self.scans.tolist(), last.tolist(), strict=True)):
            selected = np.ones(rows, dtype=bool)
            for conjunct in range(first, stop):
                alternatives = slice(self.conjuncts[conjunct], ends[conjunct])
                column = ranked[self.columns[self.column[self.conjuncts[conjunct]]]]
                size = len(column.distinct) + 2  # the values' ranks, NaN's, NULL's
                begin = np.clip(self.b[alternatives], 0, size)
                end = np.clip(self.a[alternatives], 0, size)
                kept = begin < end
                steps = np.zeros(size + 1, dtype=np.int64)
                np.add.at(steps, begin[kept], 1)
                np.add.at(steps, end[kept], -1)
                table = np.cumsum(steps[:size]) > 0
                table[size - 1] = False  # a NULL row: no comparison holds
                selected &= table[column.low]
            read[scan] = selected.sum()
        return read / max(rows, 1)

    def skipped(self, low: np.ndarray, high: np.ndarray) -> float:
        """The weight of the scans that skip rows whose min rank of each column (in `columns` order) is
        `low` and max rank `high`."""
        if not len(self.weights):
            return 0.0
        holds = (low[self.column] < self.a) & (high[self.column] >= self.b)
        conjunct = np.logical_or.reduceat(holds, self.conjuncts)
        read = np.logical_and.reduceat(conjunct, self.scans)
        return float(self.weights[~read].sum())


def _bounds(r: _Ranked, op: str, value: Any) -> tuple[int, int]:
    """(a, b) of one alternative ``column op value``, as `_Workload` reads them."""
    left = r.threshold(value, "<")  # ranks below it: values < value
    right = r.threshold(value, "<=")  # ranks below it: values <= value
    return {
        "<": (left, -1),
        "<=": (right, -1),
        ">": (_NEVER, right),
        ">=": (_NEVER, left),
        "=": (right, left),
        "in": (right, left),
    }[op]


def _workload(scans: Sequence[Scan], ranked: Mapping[str, _Ranked]) -> _Workload:
    """The scans' comparisons on `ranked` columns; a comparison whose literal does not compare with the
    column's values is left out (never an error), a scan left with none skips nothing here."""
    names = tuple(sorted(ranked))
    column: list[int] = []
    bounds: list[tuple[int, int]] = []
    conjuncts: list[int] = []
    starts: list[int] = []
    weights: list[float] = []
    sources: list[int] = []
    for place, scan in enumerate(scans):
        first = len(conjuncts)
        for c in scan.comparisons:
            if c.column not in ranked or c.op not in RANGE_OPS or not c.values:
                continue
            try:
                found = [_bounds(ranked[c.column], c.op, v) for v in c.values]
            except TypeError:
                continue
            conjuncts.append(len(column))
            column.extend([names.index(c.column)] * len(found))
            bounds.extend(found)
        if len(conjuncts) > first:
            starts.append(first)
            weights.append(scan.weight)
            sources.append(place)
    pairs = np.array(bounds, dtype=np.int64).reshape(-1, 2)
    return _Workload(
        names,
        np.array(column, dtype=np.int64),
        pairs[:, 0],
        pairs[:, 1],
        np.array(conjuncts, dtype=np.int64),
        np.array(starts, dtype=np.int64),
        np.array(weights, dtype=float),
        np.array(sources, dtype=np.int64),
    )


def relative(scans: Sequence[Scan], ranked: Mapping[str, _Ranked]) -> list[Scan]:
    """The scans weighted by their own selectivity on the sample too: weight / share ** `RELATIVE_POWER`
    (the share at least `SHARE_FLOOR`). Rows skipped summed over scans as they come let the unselective
    scans lead the tree (a scan reading half the table has the most rows left to skip), while a selective
    one already reading several times what it selects waits as long relative to its own answer; the
    square root measured best on the TPC-H stream's held-out scans, a tree grown on a 100k-row sample of
    SF0.3 lineitem to 256 leaves, each leaf's min/max (geometric mean and p90 of kept rows over the rows
    their min/max-testable conjuncts select; rows kept in all over those selected): power 0: 4.76, 20.8,
    1.63; 0.25: 4.25, 13.8, 1.63; 0.5: 4.10, 13.1, 1.67; 0.75: 4.07, 14.9, 1.70; 1: 4.28, 15.7, 1.74."""
    workload = _workload(scans, ranked)
    if not len(workload.weights):
        return list(scans)
    shares = np.maximum(workload.shares(ranked), SHARE_FLOOR)
    weighted = list(scans)
    for place, share in zip(workload.sources.tolist(), shares.tolist(), strict=True):
        weighted[place] = replace(scans[place], weight=scans[place].weight / share**RELATIVE_POWER)
    return weighted


@dataclass(frozen=True)
class _Candidate:
    cut: Cut
    threshold: int
    tie: int  # its place in (column, literal, op) order


def _candidates(scans: Sequence[Scan], ranked: Mapping[str, _Ranked]) -> list[_Candidate]:
    """The workload's comparison points as cuts, the most used (by scan weight) first: ``x < v`` for
    ``<``, ``>=`` and ``=`` (a lower bound), ``x <= v`` for ``<=``, ``>`` and ``=`` (an upper one). Cuts
    splitting the sample alike (the same rank threshold) are one: the first in tie order is kept."""
    used: dict[tuple[str, str, str, Any], float] = {}
    for scan in scans:
        for c in scan.comparisons:
            if c.column not in ranked or c.op not in RANGE_OPS:
                continue
            ops = ("<",) if c.op in ("<", ">=") else ("<=",) if c.op in ("<=", ">") else ("<", "<=")
            for value in c.values:
                for op in ops:
                    key = (c.column, op, c.kind, value)
                    used[key] = used.get(key, 0.0) + scan.weight
    found: list[tuple[tuple[str, Any, str], float, Cut, int]] = []
    for (column, op, kind, value), weight in used.items():
        try:
            threshold = ranked[column].threshold(value, op)
        except TypeError:  # a literal that does not compare with the column's values: no candidate
            continue
        found.append(((column, value, op), weight, Cut(column, op, kind, value), threshold))
    try:
        found.sort(key=lambda f: f[0])
    except TypeError:  # literals of one column that do not compare with each other: by their text
        found.sort(key=lambda f: (f[0][0], repr(f[0][1]), f[0][2]))
    kept: dict[tuple[str, int], _Candidate] = {}
    weights: dict[tuple[str, int], float] = {}
    for tie, (_, weight, cut, threshold) in enumerate(found):
        kept.setdefault((cut.column, threshold), _Candidate(cut, threshold, tie))
        weights[(cut.column, threshold)] = weights.get((cut.column, threshold), 0.0) + weight
    return sorted(kept.values(), key=lambda c: (-weights[(c.cut.column, c.threshold)], c.tie))


@dataclass(frozen=True)
class _Split:
    gain: float
    candidate: _Candidate
    below: np.ndarray  # the leaf's rows (indexes) that go below
    above: np.ndarray


@dataclass(frozen=True)
class _Grower:
    ranked: Mapping[str, _Ranked]
    workload: _Workload
    candidates: Mapping[str, Sequence[_Candidate]]  # by column, each column's most used first (`_by_column`)
    min_leaf_rows: int
    max_candidates: int

    def best(self, rows: np.ndarray) -> _Split | None:
        """The leaf's cut skipping the most beyond what the leaf skips; None when none skips more. Per
        column, the leaf's rows sorted by it once give both children's min/max of every column at any
        of its thresholds (running minima and maxima from either end), not a pass over the rows each."""
        names = self.workload.columns
        low = np.stack([self.ranked[n].low[rows] for n in names])  # column x row
        high = np.stack([self.ranked[n].high[rows] for n in names])
        count = len(rows)
        here = self.workload.skipped(low.min(axis=1), high.max(axis=1)) * count
        best: tuple[float, _Candidate] | None = None
        for column, candidates in self.candidates.items():
            key = self.ranked[column].low[rows]
            order = np.argsort(key, kind="stable")
            keys = key[order]
            ahead_low, ahead_high, behind_low, behind_high = _running(low[:, order], high[:, order])
            tried = 0
            for candidate in candidates:
                below = int(np.searchsorted(keys, candidate.threshold, side="left"))  # rows whose rank is below it
                if below < self.min_leaf_rows or count - below < self.min_leaf_rows:
                    continue
                tried += 1
                gain = (
                    self.workload.skipped(ahead_low[:, below - 1], ahead_high[:, below - 1]) * below
                    + self.workload.skipped(behind_low[:, below], behind_high[:, below]) * (count - below)
                    - here
                )
                if gain > 1e-9 and (best is None or (gain, -candidate.tie) > (best[0], -best[1].tie)):
                    best = (gain, candidate)
                if tried >= self.max_candidates:
                    break
        if best is None:
            return None
        mask = self.ranked[best[1].cut.column].low[rows] < best[1].threshold
        return _Split(best[0], best[1], rows[mask], rows[~mask])


def _by_column(candidates: Sequence[_Candidate]) -> dict[str, list[_Candidate]]:
    """The candidates by column, each column's in the workload's order (most used first)."""
    found: dict[str, list[_Candidate]] = {}
    for candidate in candidates:
        found.setdefault(candidate.cut.column, []).append(candidate)
    return found


def _running(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Of rows in some order (column x row ranks): each column's min and max over the first k rows, at
    k - 1, and over the rows from k on, at k."""
    ahead = (np.minimum.accumulate(low, 1), np.maximum.accumulate(high, 1))
    behind = (np.minimum.accumulate(low[:, ::-1], 1)[:, ::-1], np.maximum.accumulate(high[:, ::-1], 1)[:, ::-1])
    return (*ahead, *behind)


def build_tree(
    columns: Mapping[str, Sequence[Any]],
    scans: Sequence[Scan],
    *,
    max_leaves: int,
    min_leaf_rows: int,
    max_candidates: int = MAX_CANDIDATES,
    row_groups: tuple[int, int] | None = None,
) -> CutTree:
    """The greedy cut tree over the sample's `columns` (name -> values, one per sampled row) for
    `scans`, at most `max_leaves` leaves of at least `min_leaf_rows` rows each (a single leaf: no
    cut skips anything). With `row_groups` = (max leaves, min leaf rows), it then grows on, best first
    over every leaf, with row-group cuts (`CutTree.row_group`) up to that many leaves of at least that
    many rows: files are the file cuts' leaves, row groups about the others. Deterministic: the same
    sample and scans (in any order) give the same tree."""
    rows = len(next(iter(columns.values()), ()))
    ranked = {name: _Ranked.of(values) for name, values in columns.items()}
    if rows == 0 or max_leaves < 2:
        return CutTree()
    scans = relative(sorted(scans, key=_scan_order), ranked)
    candidates = _by_column(_candidates(scans, ranked))
    if not candidates:
        return CutTree()
    workload = _workload(scans, ranked)
    growth = _Growth(_Grower(ranked, workload, candidates, max(min_leaf_rows, 1), max_candidates))
    growth.offer(0, np.arange(rows))
    growth.grow(max_leaves, row_group=False)
    if row_groups is not None and row_groups[0] > growth.leaves:
        growth.grower = replace(growth.grower, min_leaf_rows=max(row_groups[1], 1))
        for node, rows_at in sorted(growth.open.items()):  # every leaf, its best cut at the finer size
            growth.offer(node, rows_at)
        growth.grow(row_groups[0], row_group=True)
    return _assembled(growth.nodes, 0)


def _scan_order(scan: Scan) -> tuple[str, float]:
    """A fixed order of the scans, whatever order the log gave them in: float sums of their weights (a
    candidate's use, a child's skipped weight) then add up alike, so ties break alike (review 62: with
    the replay's fractional recency weights, shuffled scans changed 41 of 150 trees)."""
    return repr(scan.comparisons), scan.weight


@dataclass
class _Growth:
    """A tree growing best first with the phase's `grower`: the split leaves' cuts (`nodes`: leaf -> cut,
    below, above, whether a row-group cut), the leaves' rows (`open`), and each leaf's best split waiting
    on a heap."""

    grower: _Grower
    nodes: dict[int, tuple[Cut, int, int, bool]] = field(default_factory=dict)
    open: dict[int, np.ndarray] = field(default_factory=dict)
    heap: list[tuple[float, int, int]] = field(default_factory=list)
    splits: dict[int, _Split] = field(default_factory=dict)
    depth: dict[int, int] = field(default_factory=dict)  # cuts above each node (the root's absent: 0)
    leaves: int = 1
    made: int = 1

    def offer(self, node: int, rows_at: np.ndarray) -> None:
        """Hold the leaf's rows and queue its best split (none past `MAX_DEPTH` cuts: a record that deep is
        refused, review 61b: weights growing geometrically grew a 106-level tree)."""
        self.open[node] = rows_at
        if self.depth.get(node, 0) >= MAX_DEPTH:
            return
        split = self.grower.best(rows_at)
        if split is not None:
            self.splits[node] = split
            heapq.heappush(self.heap, (-split.gain, split.candidate.tie, node))

    def grow(self, max_leaves: int, *, row_group: bool) -> None:
        while self.heap and self.leaves < max_leaves:
            _, _, node = heapq.heappop(self.heap)
            split = self.splits.pop(node)
            del self.open[node]
            self.nodes[node] = (split.candidate.cut, self.made, self.made + 1, row_group)
            self.depth[self.made] = self.depth[self.made + 1] = self.depth.get(node, 0) + 1
            self.offer(self.made, split.below)
            self.offer(self.made + 1, split.above)
            self.made += 2
            self.leaves += 1
        self.heap.clear()  # the next phase offers every open leaf again at its own size
        self.splits.clear()


def _assembled(nodes: Mapping[int, tuple[Cut, int, int, bool]], node: int) -> CutTree:
    if node not in nodes:
        return CutTree()
    cut, below_node, above_node, row_group = nodes[node]
    return CutTree(cut, _assembled(nodes, below_node), _assembled(nodes, above_node), row_group)
