"""Each row's leaf in a cut tree (qd-tree style), the same in numpy (over the estimate's sample) and in
Spark (the job and the virtual files), each leaf's box, and the check that a recorded tree still compares
with the table's columns as decided. The tree is grown by `clustering.cut_growth`.

NULL (and NaN) rows go above every cut, in numpy and in Spark alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from optimizer.clustering.cut_search import sample_literal
from optimizer.cut_tree import Cut, CutTree
from optimizer.errors import FeatureError

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType


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


def leaf_boxes(tree: CutTree) -> list[dict[str, tuple[Any, Any]]]:
    """Each leaf's box, by leaf id: per column its cuts bound, (lowest, highest) value its rows can hold,
    None on a side no cut bounds. Rows below ``x < v`` or ``x <= v`` are at most v; rows above are at
    least v (they may also be NULL or NaN, which only ever go above: an upper bound comes from a `below`)."""
    boxes: list[dict[str, tuple[Any, Any]]] = []

    def walk(node: CutTree, box: dict[str, tuple[Any, Any]]) -> None:
        if node.cut is None or node.below is None or node.above is None:
            boxes.append(box)
            return
        column, value = node.cut.column, node.cut.value
        low, high = box.get(column, (None, None))
        walk(node.below, {**box, column: (low, value if high is None else min(high, value))})
        walk(node.above, {**box, column: (value if low is None else max(low, value), high)})

    walk(tree, {})
    return boxes


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
