"""How well a table is laid out for a column, from its files' Delta min/max statistics.

The figures are Snowflake's (SYSTEM$CLUSTERING_INFORMATION), on Delta files instead of
micro-partitions, so an operator can read them the same way:

* **average overlaps**: for each file, how many other files' [min, max] ranges intersect its range,
  averaged over the files (0: no two files share a value; files - 1: every file overlaps every other);
* **average depth**: for each distinct min or max value, how many files' ranges contain it, averaged
  over those values: the files a point lookup on that value has to read (1 is perfect);
* **constant files**: files whose minimum equals their maximum (a point lookup skips them all but one).

Files without both bounds for the column (no statistics, or all NULL) are counted apart: every reader
has to read them. Values of different types (a column whose type changed) are not compared.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from optimizer.table.access import DataFile


@dataclass(frozen=True)
class ColumnHealth:
    column: str
    files: int  # files with both bounds for the column
    without_stats: int  # files every reader must read for a filter on it
    constant_files: int
    average_overlaps: float
    average_depth: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        missing = f", {self.without_stats} without statistics" if self.without_stats else ""
        return (
            f"{self.column}: depth {self.average_depth:.1f}, overlaps {self.average_overlaps:.1f} "
            f"over {self.files} files, {self.constant_files} constant{missing}"
        )


def column_health(files: Sequence[DataFile], column: str) -> ColumnHealth:
    """The layout figures of `column` over `files` (see the module docstring)."""
    ranges: list[tuple[Any, Any]] = []
    wanted = column.lower()
    for f in files:
        low = _bound(f.min_values, wanted)
        high = _bound(f.max_values, wanted)
        if low is not None and high is not None:
            ranges.append((low, high))
    try:
        lows = sorted(low for low, _ in ranges)
        highs = sorted(high for _, high in ranges)
        points = sorted({v for pair in ranges for v in pair})
    except TypeError:  # values of several types: no order to measure with
        return ColumnHealth(column, 0, len(files), 0, 0.0, 0.0)
    n = len(ranges)
    # the files after i's range (low > i's high) and before it (high < i's low) are disjoint sets
    overlaps = [n - (n - bisect_right(lows, high)) - bisect_left(highs, low) - 1 for low, high in ranges]
    depths = [bisect_right(lows, p) - bisect_left(highs, p) for p in points]
    return ColumnHealth(
        column=column,
        files=n,
        without_stats=len(files) - n,
        constant_files=sum(1 for low, high in ranges if low == high),
        average_overlaps=round(sum(overlaps) / n, 2) if n else 0.0,
        average_depth=round(sum(depths) / len(depths), 2) if depths else 0.0,
    )


def _bound(values: Mapping[str, Any], column: str) -> Any:
    """A file's bound for `column` (lower-cased); Delta column names are case-insensitive."""
    if column in values:
        return values[column]
    return next((v for k, v in values.items() if k.lower() == column), None)


def layout_health(files: Sequence[DataFile], columns: Iterable[str]) -> tuple[ColumnHealth, ...]:
    """`column_health` for each of `columns`, in order, once each."""
    return tuple(column_health(files, c) for c in dict.fromkeys(columns))
