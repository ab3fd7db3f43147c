"""Delta statistics of bare columns from the Parquet footers of files this process just wrote.

Why: the per-file Spark aggregation that computes statistics must group every row by its file, and
min/max of strings forces a sort-based aggregation; at TPC-H SF1 it took longer than writing the files.
Footers already hold min, max and null count per row group (delta-rs builds its statistics the same
way), so only what footers cannot tell soundly stays in the aggregation: row counts and fingerprints
(the verification), the extended statistics, and the types below that footers do not bound as Spark
orders them.

Taken from footers, only for top-level columns (a nested leaf's null count also counts its parents'):
integers, dates, booleans, plain strings (Parquet orders them by unsigned bytes, as Spark does), and
decimals of at most 18 digits (stored as signed integers). Left to the aggregation: floats (a footer
leaves NaN out of its maximum, but Spark orders NaN above every number, so that maximum is no bound),
timestamps (Spark's default INT96 has no footer order), wide decimals, and anything else.

A row group without min/max but with values makes the file's bound unknown (left out of the log, so
readers read the file); a footer without null counts leaves the column's null count unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from optimizer.errors import RewriteValidationError
from optimizer.table.stats import StatsColumn

_FOOTER_TYPES = frozenset({"tinyint", "smallint", "int", "bigint", "date", "boolean", "string", "binary"})
_DECIMAL = re.compile(r"decimal\((\d+),\s*\d+\)")
FOOTER_ROWS = "__footer_rows"


def from_footer(column: StatsColumn) -> bool:
    """Whether `column`'s min/max/null count can be read from the footers of files Spark wrote."""
    return len(column.path) == 1 and footer_type(column.type_name)


def footer_type(type_name: str) -> bool:
    """Whether footers bound a top-level column of Spark type `type_name` as Spark orders it."""
    if type_name in _FOOTER_TYPES:
        return True
    decimal = _DECIMAL.fullmatch(type_name)
    return decimal is not None and int(decimal.group(1)) <= 18


def footer_indices(columns: Sequence[StatsColumn]) -> frozenset[int]:
    """Positions in `columns` whose statistics come from footers (the aggregation skips them)."""
    return frozenset(i for i, c in enumerate(columns) if from_footer(c))


def footer_stats(
    fs: pafs.FileSystem, root: str, paths: Iterable[str], columns: Sequence[StatsColumn], indices: Iterable[int]
) -> dict[str, dict[str, Any]]:
    """Per relative path: ``min_i``/``max_i``/``nulls_i`` for each index in `indices` (the keys
    `collect_file_stats` uses) and the footer's row count under `FOOTER_ROWS`.

    Raises `RewriteValidationError` when a footer is unreadable or lacks one of the columns.
    """
    wanted = sorted(indices)
    result = {}
    for path in paths:
        try:
            metadata = pq.ParquetFile(fs.open_input_file(f"{root}/{path}")).metadata
        except (OSError, ValueError) as err:
            raise RewriteValidationError(f"cannot read the footer of written file {path}: {err}") from err
        result[path] = _file_stats(metadata, path, columns, wanted)
    return result


def _file_stats(
    metadata: pq.FileMetaData, path: str, columns: Sequence[StatsColumn], wanted: Sequence[int]
) -> dict[str, Any]:
    positions = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    row: dict[str, Any] = {FOOTER_ROWS: metadata.num_rows}
    for i in wanted:
        name = columns[i].path[0]
        if name not in positions:
            raise RewriteValidationError(f"written file {path} has no column {name!r}")
        row.update(_column_stats(metadata, positions[name], i))
    return row


def _column_stats(metadata: pq.FileMetaData, position: int, i: int) -> Mapping[str, Any]:
    """Row groups combined: the least minimum, the greatest maximum, the summed null counts; None for
    anything a row group leaves unknown."""
    low: Any = None
    high: Any = None
    nulls: int | None = 0
    bounded = True
    for g in range(metadata.num_row_groups):
        chunk = metadata.row_group(g).column(position)
        statistics = chunk.statistics
        if statistics is None:
            bounded, nulls = chunk.num_values == 0, None
            continue
        group_nulls = statistics.null_count if statistics.has_null_count else None
        nulls = None if nulls is None or group_nulls is None else nulls + group_nulls
        if statistics.has_min_max:
            low = statistics.min if low is None else min(low, statistics.min)
            high = statistics.max if high is None else max(high, statistics.max)
        elif group_nulls is None or group_nulls < chunk.num_values:
            bounded = False  # values present, but no bound for them
    if not bounded:
        low = high = None
    return {f"min_{i}": low, f"max_{i}": high, f"nulls_{i}": nulls}
