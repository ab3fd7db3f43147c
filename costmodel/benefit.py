"""The benefit of a layout: workload bytes saved on the data it would rewrite, in cost units (5.2).

Per query of the workload window (its filters and the columns it reads):

* **before**: the bytes it reads from the files to be rewritten, pruned with their *current*
  statistics and measured from their Parquet footers (the thesis assumed no skipping at all here, its
  stated source of error);
* **after**: the share of bytes it reads from the virtual files of the clustered sample, times the
  same total bytes.

Queries count with the same recency weights as the analysis. The saving per future query is the
weighted mean of before - after. The number of future queries is projected from the log with the
same exponential decay: the decayed count of logged scans divided by the decay kernel's area gives a
rate (an exponentially weighted moving average, so a burst of recent queries counts more than old
ones), times the benefit horizon. Benefit = queries * MB saved per query * cost per MB.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from optimizer.analysis.workload import recency_weight
from optimizer.skipping.filestats import FileStats
from optimizer.skipping.pruning import Predicate, column_names_of, might_match, prepare
from querylog.errors import PredicateError
from querylog.records import ScanRecord

MB = 1e6


@dataclass(frozen=True)
class Query:
    predicate: Predicate
    columns: frozenset[str] | None  # None: all columns
    weight: float


@dataclass(frozen=True)
class BenefitEstimate:
    queries_in_window: int
    expected_queries: float
    bytes_per_query_before: float  # weighted mean over the workload, measured on the current files
    bytes_per_query_after: float  # estimated on the virtual files
    bytes_per_query_total: float  # what a query would read without any skipping
    saved_mb_per_query: float
    benefit: float  # cost units (cluster seconds)
    sample_rows: int
    virtual_files: int
    seconds: float

    @property
    def p_before(self) -> float:
        return self.bytes_per_query_before / self.bytes_per_query_total if self.bytes_per_query_total else 1.0

    @property
    def p_after(self) -> float:
        return self.bytes_per_query_after / self.bytes_per_query_total if self.bytes_per_query_total else 1.0

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "p_before": round(self.p_before, 4), "p_after": round(self.p_after, 4)}


def workload_queries(records: Sequence[ScanRecord], now: datetime, half_life: float) -> list[Query]:
    """Distinct (filters, columns) of the window with their summed recency weights."""
    weights: dict[tuple[tuple[str, ...], tuple[str, ...]], float] = {}
    for record in records:
        key = (tuple(sorted(record.filters)), tuple(sorted(record.columns)))
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


def expected_queries(
    records: Sequence[ScanRecord], now: datetime, half_life: float, window: float, horizon: float
) -> float:
    """Queries expected over `horizon` seconds: decayed count / decay-kernel area over the window."""
    decayed = sum(recency_weight(r.ts, now, half_life) for r in records)
    area = half_life / math.log(2) * (1 - 0.5 ** (window / half_life))
    return decayed / area * horizon if area > 0 else 0.0


def query_bytes(
    query: Query, files: Sequence[FileStats], column_bytes: Mapping[str, Mapping[str, float]]
) -> tuple[float, float]:
    """(bytes read after pruning, bytes without pruning) of `query` over `files`."""
    read = total = 0.0
    for stats in files:
        sizes = column_bytes.get(stats.path, {})
        size = sum(v for c, v in sizes.items() if query.columns is None or c in query.columns)
        total += size
        if might_match(query.predicate, stats):
            read += size
    return read, total


def estimate_benefit(
    queries: Sequence[Query],
    current: Sequence[FileStats],
    current_bytes: Mapping[str, Mapping[str, float]],
    virtual: Sequence[FileStats],
    virtual_bytes: Mapping[str, Mapping[str, float]],
    expected: float,
    cost_per_mb: float,
    sample_rows: int,
    queries_in_window: int,
) -> BenefitEstimate:
    started = time.perf_counter()
    weight = sum(q.weight for q in queries)
    before = after = total = 0.0
    for query in queries:
        read_now, total_now = query_bytes(query, current, current_bytes)
        read_virtual, total_virtual = query_bytes(query, virtual, virtual_bytes)
        share_after = read_virtual / total_virtual if total_virtual else 1.0
        before += query.weight * read_now
        after += query.weight * share_after * total_now
        total += query.weight * total_now
    if weight:
        before, after, total = before / weight, after / weight, total / weight
    saved_mb = max(before - after, 0.0) / MB
    return BenefitEstimate(
        queries_in_window=queries_in_window,
        expected_queries=round(expected, 2),
        bytes_per_query_before=round(before, 1),
        bytes_per_query_after=round(after, 1),
        bytes_per_query_total=round(total, 1),
        saved_mb_per_query=round(saved_mb, 4),
        benefit=round(expected * saved_mb * cost_per_mb, 4),
        sample_rows=sample_rows,
        virtual_files=len(virtual),
        seconds=round(time.perf_counter() - started, 3),
    )
