"""A cut tree (qd-tree style layout): the type `FeatureSet.cuts` records and its JSON form.

A node cuts rows by one comparison of a plain column with a literal, ``column < value`` or
``column <= value``: rows where it is TRUE go `below`, every other row (FALSE, NULL, and NaN, which Spark
orders above every number) goes `above`. A leaf is a set of rows laid out together: files of its own
under file cuts, about a row group under a row-group cut (`CutTree.row_group`); leaves are numbered in
order, `below` before `above` (`leaves`). The builder and the leaf id in Spark and numpy are
`optimizer.clustering.cuts`; this module sits below `optimizer.features`, which validates a recorded tree
where the feature set is made.

JSON form: a leaf is ``{}``; a node is ``{"column", "op", "type", "value", "below", "above"}`` (and
``"row_group": true`` for a row-group cut), the value
typed so it reads back exactly: ``integer`` (a JSON integer), ``decimal`` (its text), ``double`` (a JSON
number), ``string``, ``date`` (ISO text), ``timestamp`` (ISO text with its UTC offset).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from optimizer.errors import FeatureError

OPS = ("<", "<=")
TYPES = ("integer", "decimal", "double", "string", "date", "timestamp")
MAX_DEPTH = 64  # a recorded tree deeper than this is refused: the job would nest as many CASEs
MAX_LEAVES = 256  # a tree travels in every record of its layout: none built larger, a record larger is refused
MAX_PRECISION = 38  # the most digits a Spark decimal literal holds (scale included)


@dataclass(frozen=True)
class Cut:
    """``column op value``: TRUE goes below."""

    column: str
    op: str
    kind: str  # one of TYPES: how `value` is written and given to Spark
    value: Any


@dataclass(frozen=True)
class CutTree:
    """A node (`cut` with both children) or a leaf (`cut` None). A node marked `row_group` cuts rows within
    a file (its leaves are about a row group each, a file a run of them); the others cut files (files
    never mix their leaves), and none of those lies under a row-group node."""

    cut: Cut | None = None
    below: CutTree | None = None
    above: CutTree | None = None
    row_group: bool = False

    @property
    def is_leaf(self) -> bool:
        return self.cut is None

    @property
    def leaves(self) -> int:
        if self.cut is None or self.below is None or self.above is None:
            return 1
        return self.below.leaves + self.above.leaves

    def cuts(self) -> Iterator[Cut]:
        """Every cut of the tree, depth first."""
        if self.cut is not None and self.below is not None and self.above is not None:
            yield self.cut
            yield from self.below.cuts()
            yield from self.above.cuts()

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.column for c in self.cuts()))

    @property
    def has_row_groups(self) -> bool:
        """Whether some node cuts within files."""
        if self.cut is None or self.below is None or self.above is None:
            return False
        return self.row_group or self.below.has_row_groups or self.above.has_row_groups

    @property
    def depth(self) -> int:
        """The most cuts on a path from the root to a leaf."""
        if self.cut is None or self.below is None or self.above is None:
            return 0
        return 1 + max(self.below.depth, self.above.depth)

    @property
    def well_nested(self) -> bool:
        """Whether no file cut lies under a row-group cut (files would mix a file cut's leaves)."""
        if self.cut is None or self.below is None or self.above is None:
            return True
        if self.row_group:
            return not self.below.has_file_cuts and not self.above.has_file_cuts
        return self.below.well_nested and self.above.well_nested

    @property
    def has_file_cuts(self) -> bool:
        if self.cut is None or self.below is None or self.above is None:
            return False
        return not self.row_group or self.below.has_file_cuts or self.above.has_file_cuts

    def file_level(self) -> CutTree:
        """The tree of the file cuts only: each row-group node a leaf (the leaves files never mix)."""
        if self.cut is None or self.below is None or self.above is None or self.row_group:
            return CutTree()
        return CutTree(self.cut, self.below.file_level(), self.above.file_level())

    def as_json(self) -> dict[str, Any]:
        if self.cut is None or self.below is None or self.above is None:
            return {}
        cut = self.cut
        node = {
            "column": cut.column,
            "op": cut.op,
            "type": cut.kind,
            "value": _written(cut.kind, cut.value),
            "below": self.below.as_json(),
            "above": self.above.as_json(),
        }
        return node | ({"row_group": True} if self.row_group else {})  # absent for file cuts: older records


def _written(kind: str, value: Any) -> Any:
    if kind in ("decimal", "date", "timestamp"):
        return str(value) if kind == "decimal" else value.isoformat()
    return value


def parse_tree(value: object, depth: int = 0) -> CutTree:
    """A recorded tree (`CutTree.as_json`); anything else is refused in one line naming what is wrong
    (a file cut under a row-group cut is refused where the feature set is made, as one made in process)."""
    if not isinstance(value, Mapping):
        raise FeatureError(f"malformed cut tree in the feature set: a node must be an object, not {value!r}")
    if not value:
        return CutTree()
    if depth >= MAX_DEPTH:
        raise FeatureError(f"cut tree deeper than {MAX_DEPTH} levels in the feature set")
    keys = {"column", "op", "type", "value", "below", "above"}
    if set(value) - {"row_group"} != keys or value.get("row_group", True) is not True:
        raise FeatureError(
            f"malformed cut tree node {sorted(value)} in the feature set: expected {sorted(keys)} (and row_group: true)"
        )
    row_group = "row_group" in value
    column, op, kind = value["column"], value["op"], value["type"]
    if not isinstance(column, str) or not column or op not in OPS or kind not in TYPES:
        raise FeatureError(
            f"malformed cut {column!r} {op!r} ({kind!r}) in the feature set: a column name, one of {OPS}, "
            f"one of {TYPES}"
        )
    cut = Cut(column, op, kind, _read(kind, value["value"]))
    below, above = (parse_tree(value[side], depth + 1) for side in ("below", "above"))
    return CutTree(cut, below, above, row_group)


def _read(kind: str, value: object) -> Any:
    """A cut's literal as the Python value Spark and numpy compare with."""
    try:
        return _READERS[kind](value)
    except (TypeError, ValueError, InvalidOperation, OverflowError) as err:  # overflow: an offset past year 1
        raise FeatureError(f"malformed {kind} literal {value!r} in the feature set's cut tree") from err


def _integer(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not an integer")
    if not -(2**63) <= value < 2**63:  # Spark has no integer literal past a long (`F.lit` fails in the JVM)
        raise ValueError("past a long")
    return value


def _decimal(value: object) -> Decimal:
    if not isinstance(value, str):
        raise TypeError("a decimal is written as its text")
    number = Decimal(value)
    if not number.is_finite():
        raise ValueError("not finite")
    if not fits_spark_decimal(number):
        raise ValueError(f"more than the {MAX_PRECISION} digits a Spark decimal literal holds")
    return number


def fits_spark_decimal(number: Decimal) -> bool:
    """Whether Spark can hold `number` as a decimal literal: its precision, as Spark counts it (an
    exponent past the digits adds zeros, a scale past them adds leading ones), at most 38. `F.lit` of
    1E+40 or 1E-40 fails in the JVM, where the job would only learn it while laying out."""
    _, digits, exponent = number.as_tuple()
    if not isinstance(exponent, int):
        return False
    precision = len(digits) + exponent if exponent > 0 else max(len(digits), -exponent)
    return precision <= MAX_PRECISION


def _double(value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise TypeError("not a finite number")
    return float(value)


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def _date(value: object) -> dt.date:
    return dt.date.fromisoformat(_string(value))


def _timestamp(value: object) -> dt.datetime:
    instant = dt.datetime.fromisoformat(_string(value))
    if instant.tzinfo is None:
        raise ValueError("a timestamp cut names its UTC offset")
    return instant.astimezone(dt.UTC)


_READERS = {
    "integer": _integer,
    "decimal": _decimal,
    "double": _double,
    "string": _string,
    "date": _date,
    "timestamp": _timestamp,
}
