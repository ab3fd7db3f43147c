"""A virtual row group's bounds on the columns a row-group cut tree cuts and no curve orders: by the boxes
of the leaves it holds, not by its sampled rows.

A virtual row group holds a few hundred sampled rows, so it looks narrow on any column: a value held by
0.2% of the rows is missing from most groups' samples, and pricing by them credits skipping the real
groups (thousands of rows each) never allow (review 61a: 0.39 of the bytes estimated, 0.91 read). What
the real group can hold is what its leaves' cuts allow (`clustering.cuts.leaf_boxes`); on a side no cut
bounds, the sample's extreme over every group stands in (a value sampled anywhere may be in any group).
The curve's own columns keep the sample's bounds, as every layout's do (`virtual_files._ordered_columns`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from optimizer.clustering.cuts import leaf_boxes, leaf_column
from optimizer.cut_tree import CutTree
from optimizer.features import FeatureSet
from optimizer.spark_expr import expression_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

LEAF_RANGE = ("__leaf_low", "__leaf_high")  # a group's lowest and highest leaf id, aggregated beside its statistics

Decoded = tuple[dict[str, Any], tuple[int, dict[str, Any], dict[str, Any], dict[str, int]]]
"""A group's aggregate row, and its (count, minima, maxima, null counts) as `table.stats.decode_stats` gives them."""


@dataclass(frozen=True)
class LeafBoxes:
    """The tree, its columns to bound by boxes (lower case -> the stored column's name), and the helper
    column holding each row's leaf."""

    tree: CutTree
    columns: Mapping[str, str]
    leaf: str

    @classmethod
    def of(cls, features: FeatureSet, stored: StructType, prefix: str, curve: Collection[str]) -> LeafBoxes | None:
        """For a tree with row-group cuts whose columns include some the `curve` (lower case) does not
        order; else None."""
        tree = features.cuts
        if tree is None or not tree.has_row_groups:
            return None
        names = {n.lower(): n for n in stored.names}
        columns = {c.lower(): names[c.lower()] for c in tree.columns if c.lower() in names and c.lower() not in curve}
        return cls(tree, columns, f"{prefix}leaf_at") if columns else None

    def with_leaf(self, frame: DataFrame) -> DataFrame:
        return frame.withColumn(self.leaf, leaf_column(self.tree, expression_column))

    def aggregates(self) -> list[Column]:
        from pyspark.sql import functions as F

        leaf = F.col(f"`{self.leaf}`")
        return [F.min(leaf).alias(LEAF_RANGE[0]), F.max(leaf).alias(LEAF_RANGE[1])]

    def bounded(self, groups: Sequence[Decoded]) -> list[Decoded]:
        """`groups` with each box column's min/max those of the leaves the group holds, and its NULL count
        unknown where one of them may hold NULLs (they go above every cut: a leaf never sent below on the
        column), none where no leaf may (review 61b: a group whose sampled rows were all NULL was priced
        as skipped by every comparison, one with no sampled NULL by IS NULL)."""
        boxes = leaf_boxes(self.tree)
        result = [
            (values, (count, dict(mins), dict(maxs), dict(nulls))) for values, (count, mins, maxs, nulls) in groups
        ]
        for lower, name in self.columns.items():
            present = [(g[1][1][name], g[1][2][name]) for g in result if name in g[1][1] and name in g[1][2]]
            if not present:
                continue
            lowest = min((low for low, _ in present), key=_order)
            highest = max((high for _, high in present), key=_order)
            for values, (_, mins, maxs, nulls) in result:
                held = [
                    boxes[i].get(lower, (None, None)) for i in range(values[LEAF_RANGE[0]], values[LEAF_RANGE[1]] + 1)
                ]
                low = None if any(b[0] is None for b in held) else min((b[0] for b in held), key=_order)
                high = None if any(b[1] is None for b in held) else max((b[1] for b in held), key=_order)
                mins[name] = lowest if low is None else _like(low, lowest)
                maxs[name] = highest if high is None else _like(high, highest)
                if any(b[1] is None for b in held):
                    nulls.pop(name, None)
                else:
                    nulls[name] = 0
        return result


def _order(value: Any) -> tuple[int, Any]:
    """Spark's order for a min/max: NaN above every number (Python's comparisons with NaN are all false)."""
    return (1, 0) if isinstance(value, float | Decimal) and math.isnan(value) else (0, value)


def _like(value: Any, example: Any) -> Any:
    """A cut's literal as the decoded statistics hold the column's values (a double's as a Decimal)."""
    if isinstance(example, Decimal) and isinstance(value, int | float) and not isinstance(value, bool):
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return value
