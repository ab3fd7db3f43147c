"""Row groups as a reader that skips them sees them: what the estimate prices for standard readers.

Spark's Parquet reader, DuckDB and Trino first keep a table's files by Delta's statistics, then read
each kept file's footer and skip its row groups whose min/max cannot match the pushed-down filter
(docs/READERS.md). So what such a reader reads of a file is the bytes of its matching row groups, and
the order of rows inside a file decides it as much as which rows share a file. This module turns
footers (of real files) and per-group aggregates (of the estimate's virtual files) into `RowGroup`s,
each judged by the same pruning code as a file (`pruning.might_match`), and says what share of a
kept file's bytes a query reads.

Only the footer statistics readers can order as Spark does are used (`footer_stats.footer_type`:
integers, dates, booleans, plain strings, narrow decimals); a column without them leaves the group
unknown for filters on it, so the group is read. This prices reading; it never decides what is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from optimizer.skipping.filestats import FileStats, file_stats
from optimizer.skipping.pruning import Predicate, might_match
from optimizer.table.access import DataFile
from optimizer.table.footer_stats import footer_type
from optimizer.table.stats import STRING_PREFIX


@dataclass(frozen=True)
class Chunk:
    """One column chunk of a row group: its footer's bounds (None: no usable bound) and size."""

    low: Any
    high: Any
    nulls: int | None
    bytes: int


@dataclass(frozen=True)
class GroupFooter:
    """One row group's footer, by lower-cased top-level physical column (nested leaves add their bytes
    to their top-level column and give no bounds)."""

    rows: int
    chunks: Mapping[str, Chunk]


@dataclass(frozen=True)
class RowGroup:
    """One row group: its statistics as pruning reads them, and the compressed bytes of each column."""

    stats: FileStats
    bytes: Mapping[str, float]


def group_footers(metadata: pq.FileMetaData) -> tuple[GroupFooter, ...]:
    """Every row group of one Parquet footer, in file order. Held in a cache for every file a replay
    reads, so only what pruning can use is kept (`_bounds`)."""
    groups = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        chunks: dict[str, Chunk] = {}
        for c in range(group.num_columns):
            chunk = group.column(c)
            path = chunk.path_in_schema
            top = path.split(".")[0].lower()
            previous = chunks.get(top)
            size = chunk.total_compressed_size + (previous.bytes if previous else 0)
            if "." in path:  # a nested leaf: bytes only (its null count also counts its parents')
                chunks[top] = Chunk(None, None, None, size)
                continue
            low, high, nulls = _bounds(chunk.statistics)
            chunks[top] = Chunk(low, high, nulls, size)
        groups.append(GroupFooter(group.num_rows, chunks))
    return tuple(groups)


def _bounds(statistics: pq.Statistics | None) -> tuple[Any, Any, int | None]:
    """(min, max, null count) of a column chunk as pruning can use them: a minimum string cut to its
    first `STRING_PREFIX` characters (still a lower bound), a maximum that long dropped (pruning
    drops it too), binary dropped; a value the footer cannot decode (a string that is not UTF-8) is
    no bound, never an error."""
    if statistics is None:
        return None, None, None
    nulls = statistics.null_count if statistics.has_null_count else None
    if not statistics.has_min_max:
        return None, None, nulls
    try:
        low, high = statistics.min, statistics.max
    except (UnicodeDecodeError, ValueError, TypeError, pa.ArrowException):
        return None, None, nulls
    if isinstance(low, bytes) or isinstance(high, bytes):
        return None, None, nulls
    if isinstance(low, str):
        low = low[:STRING_PREFIX]
    if isinstance(high, str) and len(high) >= STRING_PREFIX:
        high = None
    return low, high, nulls


def footer_row_groups(
    data_file: DataFile,
    footers: Sequence[GroupFooter],
    column_types: Mapping[str, str],
    names: Mapping[str, str] | None = None,
) -> tuple[RowGroup, ...]:
    """`data_file`'s row groups from its footers. `column_types` are the table's ({logical path: Spark
    type}); `names` maps physical to logical names under column mapping (a physical column no logical
    one maps to, a dropped column's, is left out)."""
    logical = {p.lower(): n.lower() for p, n in (names or {}).items() if "." not in p}
    top_types = {name.lower(): (name, kind) for name, kind in column_types.items() if "." not in name}
    groups = []
    for g, footer in enumerate(footers):
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        sizes: dict[str, float] = {}
        for physical, chunk in footer.chunks.items():
            name = logical.get(physical, physical) if names else physical
            if names and physical not in logical:
                continue
            sizes[name] = float(chunk.bytes)
            original, kind = top_types.get(name, (name, ""))
            if kind and footer_type(kind) and chunk.low is not None:
                mins[original], maxs[original] = chunk.low, chunk.high
            if chunk.nulls is not None:
                nulls[original] = chunk.nulls
        rows = DataFile(f"{data_file.path}#{g}", 0, footer.rows, 0, data_file.partition_values, mins, maxs, nulls)
        groups.append(RowGroup(file_stats(rows, column_types), sizes))
    return tuple(groups)


def read_share(predicate: Predicate, groups: Sequence[RowGroup], columns: frozenset[str] | None) -> dict[str, float]:
    """Per column, the share of a kept file's bytes a reader reads: the bytes of the row groups that
    might match `predicate` over the bytes of all (a column no group has bytes for: read whole).
    `columns` limits it to the columns the query reads (None: all)."""
    kept: dict[str, float] = {}
    total: dict[str, float] = {}
    for group in groups:
        keep = might_match(predicate, group.stats)
        for name, size in group.bytes.items():
            if columns is not None and name not in columns:
                continue
            total[name] = total.get(name, 0.0) + size
            if keep:
                kept[name] = kept.get(name, 0.0) + size
    return {name: kept.get(name, 0.0) / size if size else 1.0 for name, size in total.items()}
