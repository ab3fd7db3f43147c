"""What a filter reads from a table, for a standard reader and for deltaopt's pruning, and why.

Standard engines (Spark with Delta, Databricks, Trino, DuckDB, delta-rs) skip files with the Delta
log's partition values and bare-column min/max only; deltaopt's pruning also uses expression min/max,
SOP bits, key sets and joined ranges (for filters on joined dimensions). `explain` runs the same sound
pruning with the statistics added one kind at a time, in that order, and credits each file skipped to
the first kind that skips it:

    partition values -> column min/max (the standard reader) -> expression min/max -> SOP bits -> key sets
    -> joined ranges

so an operator sees what the table's layout gives the engines that read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from optimizer.skipping.filestats import FileStats
from optimizer.skipping.joined import JoinFilter, JoinPruning
from optimizer.skipping.pruning import Predicate, column_names_of, might_match, prepare
from optimizer.skipping.scan import column_sizes, table_file_stats

if TYPE_CHECKING:
    from optimizer.table.access import DataFile, Snapshot, TableAccess

STAGES = ("partition values", "column min/max", "expression min/max", "SOP bits", "key sets", "joined ranges")


@dataclass(frozen=True)
class Reads:
    """Files a reader keeps and the bytes it reads."""

    files: int
    bytes: int  # whole files kept
    column_bytes: int | None  # of the columns the query reads, in the files kept (None: all columns)


@dataclass(frozen=True)
class Explanation:
    predicate: str  # canonical form the pruning used
    total_files: int
    total_bytes: int
    standard: Reads  # partition values and bare-column min/max
    deltaopt: Reads  # plus expression min/max, SOP bits, key sets and joined ranges
    skipped_by: Mapping[str, int]  # stage -> files that stage skipped first

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def explain(
    table: TableAccess, where: str, columns: Sequence[str] | None = None, joins: Sequence[JoinFilter] = ()
) -> Explanation:
    """How a scan of `table` filtered by `where` (reading `columns`, default all) and by the dimension
    filters of `joins` is pruned."""
    snapshot = table.snapshot()
    predicate = prepare(where)
    joined = JoinPruning.of(joins)
    full = table_file_stats(table, snapshot, versions=joined.versions)
    standard = table_file_stats(table, snapshot, None, {})
    partitions = {c.lower() for c in snapshot.partition_columns}
    stages: list[list[FileStats]] = [
        [replace(s, columns={k: v for k, v in s.columns.items() if k in partitions}) for s in standard],
        standard,
        [replace(s, sop={}, keys={}, joined={}) for s in full],
        [replace(s, keys={}, joined={}) for s in full],
        [replace(s, joined={}) for s in full],
        full,
    ]
    kept_by_stage = [{s.path for s in stats if might_match(predicate, s) and joined.may_join(s)} for stats in stages]
    skipped_by: dict[str, int] = {}
    kept_before = {f.path for f in snapshot.files}
    for name, kept in zip(STAGES, kept_by_stage, strict=True):
        kept = kept & kept_before  # a later stage never brings back a file: its statistics only add
        skipped_by[name] = len(kept_before - kept)
        kept_before = kept
    wanted = _wanted(columns, predicate)
    return Explanation(
        predicate=predicate.sql,
        total_files=len(snapshot.files),
        total_bytes=snapshot.total_bytes,
        standard=_reads(table, snapshot, [f for f in snapshot.files if f.path in kept_by_stage[1]], wanted),
        deltaopt=_reads(table, snapshot, [f for f in snapshot.files if f.path in kept_before], wanted),
        skipped_by=skipped_by,
    )


def _wanted(columns: Sequence[str] | None, predicate: Predicate) -> set[str] | None:
    if columns is None or "*" in columns:
        return None
    return {c.lower() for c in columns} | set(column_names_of(predicate))


def _reads(table: TableAccess, snapshot: Snapshot, files: Sequence[DataFile], wanted: set[str] | None) -> Reads:
    column_bytes: int | None = None
    if wanted is not None:
        names = snapshot.features.logical_names
        sizes: list[Mapping[str, int] | None] = [column_sizes(table, f, names) for f in files]
        if all(s is not None for s in sizes):
            column_bytes = sum(v for s in sizes if s for c, v in s.items() if c.split(".")[0] in wanted)
    return Reads(len(files), sum(f.size for f in files), column_bytes)
