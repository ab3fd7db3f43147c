"""The workload replayed on files: what each logged query reads from the files to rewrite now and
from the virtual files of a layout, priced as a `costmodel.benefit.BenefitEstimate`.

The arithmetic and the figures' meaning are documented in `costmodel.benefit`; this module does the
part that needs the pruning: which files a query keeps, under the statistics a reader uses.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from costmodel.benefit import MB, BenefitEstimate, Compression, recompressed
from costmodel.rate import QueryRate
from optimizer.analysis.joined import dimension_location, helper_filters, record_filters
from optimizer.analysis.workload import recency_weight
from optimizer.skipping.extended import location_key
from optimizer.skipping.filestats import FileStats
from optimizer.skipping.pruning import Predicate, column_names_of, might_match, prepare
from optimizer.skipping.row_groups import RowGroup, read_share
from querylog.errors import PredicateError
from querylog.records import ScanRecord


@dataclass(frozen=True)
class Query:
    predicate: Predicate
    columns: frozenset[str] | None  # None: all columns
    weight: float


def workload_queries(records: Sequence[ScanRecord], now: datetime, half_life: float) -> list[Query]:
    """Distinct (filters, columns) of the window with their summed recency weights."""
    weights: dict[tuple[tuple[str, ...], tuple[str, ...]], float] = {}
    for record in records:
        # dimension filters stated on joined features' helper columns: only virtual files of a layout
        # with joined features have statistics of those (a file without them is read)
        stated = {*record.filters, *helper_filters(record)}
        key = (tuple(sorted(stated)), tuple(sorted(record.columns)))
        weights[key] = weights.get(key, 0.0) + recency_weight(record.ts, now, half_life)
    queries = []
    for (filters, columns), weight in weights.items():
        try:
            predicate = prepare(" AND ".join(f"({f})" for f in filters) if filters else None)
        except PredicateError:  # a malformed log row: the analysis counted it, the replay skips it
            continue
        read = None if not columns or "*" in columns else frozenset(columns) | set(column_names_of(predicate))
        queries.append(Query(predicate, frozenset(read) if read is not None else None, weight))
    return queries


JoinHelpers = Mapping[tuple[str, str, str], Mapping[str, str]]
"""(fact column, dimension location, key) -> {attribute: the helper column the replay states it on}."""


def joined_helpers(
    records: Sequence[ScanRecord], locations: Mapping[str, str]
) -> dict[tuple[str, str, str], dict[str, str]]:
    """The joins the window's dimension filters go through, for dimensions the catalog (`locations`)
    knows, and the helper column of each attribute they filter."""
    found: dict[tuple[str, str, str], dict[str, str]] = {}
    for record in records:
        for f in record_filters(record):
            location = dimension_location(locations, f.dimension)
            if location is not None:
                found.setdefault((f.fact_column, location, f.key.lower()), {})[f.attribute] = f.helper
    return found


def with_joined_ranges(stats: FileStats, helpers: JoinHelpers) -> FileStats:
    """`stats` with its joined ranges (those kept: recorded at the dimension version read) also stated
    on the helper columns, so the replay's dimension filters judge a file already laid out with joined
    features as deltaopt's pruning would. Without this, such a file counts as read in full "before",
    and re-clustering it (a merge, drift) is credited with skipping it already has."""
    extra = {}
    for (fact_column, location, key), attributes in helpers.items():
        ranges = stats.joined.get((fact_column, location_key(location), key), {})
        extra.update({helper: ranges[a] for a, helper in attributes.items() if a in ranges})
    return replace(stats, expressions={**stats.expressions, **extra}) if extra else stats


Groups = Mapping[str, Sequence[RowGroup]]
"""File path -> its row groups, for a reader that skips row groups (a file not in it is read whole)."""


def query_bytes(
    query: Query,
    files: Sequence[FileStats],
    column_bytes: Mapping[str, Mapping[str, float]],
    groups: Groups | None = None,
) -> tuple[float, float]:
    """(bytes read after pruning, bytes without pruning) of `query` over `files`; with `groups`, a kept
    file's row groups are pruned too (`row_groups.read_share`)."""
    ((read, total),) = _query_bytes(query, files, (column_bytes,), groups)
    return read, total


def _query_bytes(
    query: Query,
    files: Sequence[FileStats],
    byte_maps: Sequence[Mapping[str, Mapping[str, float]]],
    groups: Groups | None = None,
) -> list[tuple[float, float]]:
    """(read, total) of `query` over `files` under each map of column bytes, with one pruning pass."""
    sums = [[0.0, 0.0] for _ in byte_maps]
    for stats in files:
        keep = might_match(query.predicate, stats)
        in_groups = groups.get(stats.path) if keep and groups else None
        shares = read_share(query.predicate, in_groups, query.columns) if in_groups else {}
        for totals, column_bytes in zip(sums, byte_maps, strict=True):
            sizes = column_bytes.get(stats.path, {})
            read = {c: v for c, v in sizes.items() if query.columns is None or c in query.columns}
            totals[1] += sum(read.values())
            if keep:
                totals[0] += sum(v * shares.get(c, 1.0) for c, v in read.items())
    return [(read, total) for read, total in sums]


@dataclass(frozen=True)
class Side:
    """One side of the comparison: files, their column bytes now and as (re)written, and their row
    groups for a reader that skips them (None: whole files)."""

    files: Sequence[FileStats]
    now: Mapping[str, Mapping[str, float]]
    written: Mapping[str, Mapping[str, float]]
    groups: Groups | None = None


def _mean_bytes(queries: Sequence[Query], now: Side, virtual: Side) -> tuple[float, float, float, float]:
    """Weighted mean bytes per query: read now, after skipping alone, after skipping and compression,
    and the total of the files now."""
    weight = sum(q.weight for q in queries)
    before = after_skipping = after = total = 0.0
    for query in queries:
        (read_now, total_now), (_, total_now_after) = _query_bytes(query, now.files, (now.now, now.written), now.groups)
        (read_virtual, total_virtual), (read_written, total_written) = _query_bytes(
            query, virtual.files, (virtual.now, virtual.written), virtual.groups
        )
        share = read_virtual / total_virtual if total_virtual else 1.0
        share_after = read_written / total_written if total_written else 1.0
        before += query.weight * read_now
        after_skipping += query.weight * share * total_now
        after += query.weight * share_after * total_now_after
        total += query.weight * total_now
    if not weight:
        return before, after_skipping, after, total
    return before / weight, after_skipping / weight, after / weight, total / weight


def estimate_benefit(
    queries: Sequence[Query],
    current: Sequence[FileStats],
    current_bytes: Mapping[str, Mapping[str, float]],
    virtual: Sequence[FileStats],
    virtual_bytes: Mapping[str, Mapping[str, float]],
    *,
    expected: float,
    cost_per_mb: float,
    sample_rows: int,
    queries_in_window: int,
    rate: QueryRate | None = None,
    compression: Compression | None = None,
    virtual_written: Mapping[str, Mapping[str, float]] | None = None,
    current_groups: Groups | None = None,
    virtual_groups: Groups | None = None,
) -> BenefitEstimate:
    """The benefit of replacing `current` (real statistics and column bytes) by files laid out like
    `virtual`, for `expected` future queries shaped like `queries`.

    `virtual_bytes` are the virtual files' column bytes at today's bytes per row. With `compression`,
    the rewritten data's total bytes change by its ratios, and the share each query reads comes from
    `virtual_written` (the virtual files as really written: a file of rows that all match a predicate
    often compresses far better than the average) when given, else from the ratios. With
    `current_groups` and `virtual_groups`, a reader that skips row groups is priced: a kept file's
    bytes are those of its row groups that might match."""
    started = time.perf_counter()
    current_after = recompressed(current_bytes, compression.ratios) if compression else current_bytes
    written = virtual_written or (recompressed(virtual_bytes, compression.ratios) if compression else virtual_bytes)
    before, after_skipping, after, total = _mean_bytes(
        queries,
        Side(current, current_bytes, current_after, current_groups),
        Side(virtual, virtual_bytes, written, virtual_groups),
    )
    saved_mb = max(before - after, 0.0) / MB

    def value(saved_bytes: float) -> float:
        return round(expected * saved_bytes / MB * cost_per_mb, 4)

    return BenefitEstimate(
        queries_in_window=queries_in_window,
        expected_queries=round(expected, 2),
        bytes_per_query_before=round(before, 1),
        bytes_per_query_after=round(after, 1),
        bytes_per_query_total=round(total, 1),
        saved_mb_per_query=round(saved_mb, 4),
        benefit=value(saved_mb * MB),
        sample_rows=sample_rows,
        virtual_files=len(virtual),
        seconds=round(time.perf_counter() - started, 3),
        bytes_per_query_after_skipping=round(after_skipping, 1),
        benefit_skipping=value(before - after_skipping),
        benefit_compression=value(after_skipping - after),
        rate=rate,
        compression=compression,
    )
