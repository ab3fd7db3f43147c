"""A greedy cut tree over the workload's comparison points (qd-tree style), and each row's leaf in it,
the same in numpy (over the estimate's sample) and in Spark (the job and the virtual files).

The tree (`optimizer.cut_tree.CutTree`) cuts rows by ``column < literal`` or ``column <= literal`` at the
literals the workload's Z-shaped conjuncts compare plain Z columns with, so a leaf's box is aligned with
the workload's own filters, where Z-order's quantile ranges straddle them. The builder grows the tree
best first: each leaf's best cut is the one under which the workload's queries skip the most weighted
rows in the two children beyond what they skip in the leaf (a query skips a child when one of its
conjuncts cannot hold between the child's min and max of that column, as a reader's min/max statistics
decide), both children of at least `min_leaf_rows` rows; it stops at `max_leaves` leaves or when no cut
skips more. Ties go to the column name, then the literal, then ``<`` before ``<=``. NULL (and NaN) rows
go above every cut, in numpy and in Spark alike; a child of NULLs only is skipped by every conjunct.

The builder works on ranks: each column's distinct non-NULL values sorted, NaN above them, NULL above
that, so a cut is a rank threshold and a child's min/max are two integer reductions.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from optimizer.clustering.cut_search import sample_literal
from optimizer.cut_tree import Cut, CutTree
from optimizer.errors import FeatureError

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

MAX_CANDIDATES = 48  # cuts evaluated per leaf, the workload's most used first: a large workload stays cheap
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


def below(values: Sequence[Any], cut: Cut) -> np.ndarray:
    """Which `values` the cut sends below: TRUE comparisons; NULL and NaN go above (as in Spark)."""
    column = np.empty(len(values), dtype=object)
    column[:] = list(values)
    present = np.fromiter((v is not None and v == v for v in values), dtype=bool, count=len(values))
    found = np.zeros(len(values), dtype=bool)
    if present.any():
        kept = column[present]
        found[present] = (kept < cut.value if cut.op == "<" else kept <= cut.value).astype(bool)
    return found


def leaf_ids(tree: CutTree, columns: Mapping[str, Sequence[Any]], rows: int) -> np.ndarray:
    """Each of `rows` rows' leaf (numbered as `leaf_column` numbers them) from its `columns` values."""
    ids = np.zeros(rows, dtype=np.int64)
    stack = [(tree, np.arange(rows), 0)]
    while stack:
        node, rows_at, first = stack.pop()
        if node.cut is None or node.below is None or node.above is None:
            ids[rows_at] = first
            continue
        values = columns[node.cut.column]
        mask = below([values[i] for i in rows_at.tolist()], node.cut)
        stack.append((node.below, rows_at[mask], first))
        stack.append((node.above, rows_at[~mask], first + node.below.leaves))
    return ids


def leaf_column(tree: CutTree, column_of: Callable[[str], Column]) -> Column:
    """The leaf id as a Spark column: nested CASE WHEN over typed literals (NULL fails the comparison:
    it goes above, as `below` sends it)."""
    from pyspark.sql import functions as F

    def walk(node: CutTree, first: int) -> Column:
        if node.cut is None or node.below is None or node.above is None:
            return F.lit(first).cast("long")
        target = column_of(node.cut.column)
        literal = sample_literal(node.cut.value)  # a date or timestamp cast from its ISO text
        test = target < literal if node.cut.op == "<" else target <= literal
        return F.when(test, walk(node.below, first)).otherwise(walk(node.above, first + node.below.leaves))

    return walk(tree, 0)


EXACT_DOUBLE = 2**53  # an integer literal a floating column compares exactly (Spark casts it to a double)


def check_cut_types(tree: CutTree, schema: StructType) -> None:
    """Refuse, before any work, a tree whose literal the column's type does not compare with as the
    tree was decided: a column gone (schema evolution since the decision), or a literal of another
    type (Spark would cast one side: by the session's time zone for a date or TIMESTAMP_NTZ against a
    timestamp, a string parsed as a number failing mid-job, an integer past 2^53 rounded to a double)."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    for cut in tree.cuts():
        kind = fields.get(cut.column.lower())
        if kind is None:
            raise FeatureError(f"the cut tree cuts column {cut.column!r}, which the table no longer has")
        if not _compares(kind, cut):
            raise FeatureError(
                f"the cut tree compares column {cut.column!r} ({kind.simpleString()}) with a {cut.kind} "
                f"literal {cut.value!r}: the column's type changed since the layout was decided"
            )


def _compares(kind: DataType, cut: Cut) -> bool:
    """Whether Spark compares a `kind` column with the cut's literal exactly as Python does."""
    from pyspark.sql import types as T

    if isinstance(kind, T.ByteType | T.ShortType | T.IntegerType | T.LongType | T.DecimalType):
        return cut.kind in ("integer", "decimal")
    if isinstance(kind, T.FloatType | T.DoubleType):
        return cut.kind == "double" or (cut.kind == "integer" and abs(cut.value) <= EXACT_DOUBLE)
    if isinstance(kind, T.StringType):  # a collation other than binary orders strings its own way
        return cut.kind == "string" and getattr(kind, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    if isinstance(kind, T.DateType):
        return cut.kind == "date"
    return isinstance(kind, T.TimestampType) and cut.kind == "timestamp"


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

    def skipped(self, ranked: Sequence[_Ranked], rows: np.ndarray) -> float:
        """The weight of the scans that skip `rows`, by those rows' min/max of each column."""
        if not len(self.weights):
            return 0.0
        low = np.array([r.low[rows].min() for r in ranked], dtype=np.int64)
        high = np.array([r.high[rows].max() for r in ranked], dtype=np.int64)
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
    for scan in scans:
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
    pairs = np.array(bounds, dtype=np.int64).reshape(-1, 2)
    return _Workload(
        names,
        np.array(column, dtype=np.int64),
        pairs[:, 0],
        pairs[:, 1],
        np.array(conjuncts, dtype=np.int64),
        np.array(starts, dtype=np.int64),
        np.array(weights, dtype=float),
    )


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
    candidates: Sequence[_Candidate]
    min_leaf_rows: int
    max_candidates: int

    def skipped_rows(self, rows: np.ndarray) -> float:
        """The weighted rows the workload skips among `rows` (a leaf of them)."""
        order = [self.ranked[n] for n in self.workload.columns]
        return self.workload.skipped(order, rows) * len(rows)

    def best(self, rows: np.ndarray) -> _Split | None:
        """The leaf's cut skipping the most beyond what the leaf skips; None when none skips more."""
        here = self.skipped_rows(rows)
        best: _Split | None = None
        tried = 0
        for candidate in self.candidates:
            mask = self.ranked[candidate.cut.column].low[rows] < candidate.threshold
            count = int(mask.sum())
            if count < self.min_leaf_rows or len(rows) - count < self.min_leaf_rows:
                continue
            tried += 1
            split = _Split(0.0, candidate, rows[mask], rows[~mask])
            gain = self.skipped_rows(split.below) + self.skipped_rows(split.above) - here
            if gain > 1e-9 and (best is None or (gain, -candidate.tie) > (best.gain, -best.candidate.tie)):
                best = _Split(gain, candidate, split.below, split.above)
            if tried >= self.max_candidates:
                break
        return best


def build_tree(
    columns: Mapping[str, Sequence[Any]],
    scans: Sequence[Scan],
    *,
    max_leaves: int,
    min_leaf_rows: int,
    max_candidates: int = MAX_CANDIDATES,
) -> CutTree:
    """The greedy cut tree over the sample's `columns` (name -> values, one per sampled row) for
    `scans`, at most `max_leaves` leaves of at least `min_leaf_rows` rows each (a single leaf: no
    cut skips anything). Deterministic: the same sample and scans give the same tree."""
    rows = len(next(iter(columns.values()), ()))
    ranked = {name: _Ranked.of(values) for name, values in columns.items()}
    grower = _Grower(
        ranked, _workload(scans, ranked), _candidates(scans, ranked), max(min_leaf_rows, 1), max_candidates
    )
    if rows == 0 or max_leaves < 2 or not grower.candidates:
        return CutTree()
    nodes: dict[int, tuple[Cut, int, int]] = {}  # split leaf -> (its cut, below, above)
    heap: list[tuple[float, int, int]] = []
    splits: dict[int, _Split] = {}
    leaves, made = 1, 1

    def offer(node: int, rows_at: np.ndarray) -> None:
        split = grower.best(rows_at)
        if split is not None:
            splits[node] = split
            heapq.heappush(heap, (-split.gain, split.candidate.tie, node))

    offer(0, np.arange(rows))
    while heap and leaves < max_leaves:
        _, _, node = heapq.heappop(heap)
        split = splits.pop(node)
        nodes[node] = (split.candidate.cut, made, made + 1)
        offer(made, split.below)
        offer(made + 1, split.above)
        made += 2
        leaves += 1
    return _assembled(nodes, 0)


def _assembled(nodes: Mapping[int, tuple[Cut, int, int]], node: int) -> CutTree:
    if node not in nodes:
        return CutTree()
    cut, below_node, above_node = nodes[node]
    return CutTree(cut, _assembled(nodes, below_node), _assembled(nodes, above_node))
