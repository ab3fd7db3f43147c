"""The benefit of a layout: workload bytes saved on the data it would rewrite, in cost units (5.2).

Per query of the workload window (its filters and the columns it reads):

* **before**: the bytes it reads from the files to be rewritten, pruned with their *current*
  statistics and measured from their Parquet footers (the thesis assumed no skipping at all here, its
  stated source of error);
* **after**: the share of bytes it reads from the virtual files of the clustered sample, times the
  same files' bytes as the new layout would store them: clustered data compresses differently
  (usually better), a change every query gets, filtered or not. `Compression` holds per-column ratios
  measured by scratch writes (`costmodel.stored_bytes`); without one, bytes per row stay as they
  are.

**Readers.** Standard engines (Spark with Delta, Databricks, Trino, DuckDB) skip files with the Delta
log's min/max of bare columns only; deltaopt's pruning also uses expression min/max and SOP bits.
The estimate is made for each kind of reader, with the statistics it uses, and `combine` weighs them
by the table's reader shares: a layout's value is what the table's readers will see of it.

The saving splits into a **skipping** term (files pruned) and a **compression** term (fewer bytes in
the files still read); both are reported. Queries count with the same recency weights as the
analysis. The saving per future query is the weighted mean of before - after; the number of future
queries is the recency-weighted rate measured over the period the log covered (`costmodel.rate`) times
the benefit horizon. Benefit = queries * MB saved per query * cost per MB.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime

from costmodel.rate import QueryRate
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
class Compression:
    """How the new layout changes stored bytes, per column: bytes after / bytes before, the product
    of a compaction term (file size, codec, writer) and a clustering term (row order); see
    `costmodel.stored_bytes` for how each is measured."""

    ratios: Mapping[str, float]
    codec_before: str | None
    codec_after: str | None
    sample_bytes_before: int  # the sample in current order, as the job would write it
    sample_bytes_after: int  # the sample in the layout's order
    compaction: Mapping[str, float] = field(default_factory=dict)
    clustering: Mapping[str, float] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)  # column bytes the overall ratios weigh by

    @property
    def ratio(self) -> float:
        """Overall ratio, columns weighted by `weights` (equally when there are none)."""
        return _weighted(self.ratios, self.weights)

    def as_dict(self) -> dict[str, object]:
        return {
            "ratio": round(self.ratio, 4),
            "compaction": round(_weighted(self.compaction, self.weights), 4),
            "clustering": round(_weighted(self.clustering, self.weights), 4),
            "codec_before": self.codec_before,
            "codec_after": self.codec_after,
            "sample_bytes_before": self.sample_bytes_before,
            "sample_bytes_after": self.sample_bytes_after,
            "ratios": {c: round(r, 4) for c, r in sorted(self.ratios.items())},
        }


def _weighted(ratios: Mapping[str, float], weights: Mapping[str, float]) -> float:
    if not ratios:
        return 1.0
    weight = {c: weights.get(c, 0.0) if weights else 1.0 for c in ratios}
    total = sum(weight.values())
    return sum(r * weight[c] for c, r in ratios.items()) / total if total else 1.0


@dataclass(frozen=True)
class BenefitEstimate:
    queries_in_window: int
    expected_queries: float  # over the benefit horizon
    bytes_per_query_before: float  # weighted mean over the workload, measured on the current files
    bytes_per_query_after: float  # estimated on the virtual files, compression change included
    bytes_per_query_total: float  # what a query would read without any skipping
    saved_mb_per_query: float
    benefit: float  # cost units (cluster seconds)
    sample_rows: int
    virtual_files: int
    seconds: float
    bytes_per_query_after_skipping: float | None = None  # after, at today's bytes per row
    benefit_skipping: float = 0.0  # the part of `benefit` from files pruned
    benefit_compression: float = 0.0  # the part from fewer bytes in the files still read
    rate: QueryRate | None = None
    compression: Compression | None = None
    readers: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # reader -> its figures and share

    @property
    def p_before(self) -> float:
        return self.bytes_per_query_before / self.bytes_per_query_total if self.bytes_per_query_total else 1.0

    @property
    def p_after(self) -> float:
        return self.bytes_per_query_after / self.bytes_per_query_total if self.bytes_per_query_total else 1.0

    def as_dict(self) -> dict[str, object]:
        data = {k: v for k, v in asdict(self).items() if k not in ("rate", "compression", "readers")}
        return {
            **data,
            "rate": self.rate.as_dict() if self.rate else None,
            "compression": self.compression.as_dict() if self.compression else None,
            "p_before": round(self.p_before, 4),
            "p_after": round(self.p_after, 4),
            "readers": {name: dict(figures) for name, figures in self.readers.items()},
        }


_WEIGHED = (
    "bytes_per_query_before",
    "bytes_per_query_after",
    "bytes_per_query_total",
    "saved_mb_per_query",
    "benefit",
    "bytes_per_query_after_skipping",
    "benefit_skipping",
    "benefit_compression",
)


def combine(by_reader: Mapping[str, BenefitEstimate], shares: Mapping[str, float]) -> BenefitEstimate:
    """One estimate for the table's mix of readers: each figure of `_WEIGHED` is the share-weighted
    mean of the readers' figures (readers without a share are reported, weighing nothing)."""
    weights = {name: shares.get(name, 0.0) for name in by_reader}
    total = sum(weights.values())
    if total <= 0:
        raise ValueError(f"no estimate for any reader with a share: {sorted(shares)} vs {sorted(by_reader)}")
    first = next(iter(by_reader.values()))
    mixed = {
        name: round(sum(weights[r] * float(getattr(e, name) or 0.0) for r, e in by_reader.items()) / total, 4)
        for name in _WEIGHED
    }
    readers = {
        name: {
            "share": round(weights[name] / total, 4),
            "bytes_per_query_before": e.bytes_per_query_before,
            "bytes_per_query_after_skipping": e.bytes_per_query_before
            if e.bytes_per_query_after_skipping is None
            else e.bytes_per_query_after_skipping,
            "bytes_per_query_after": e.bytes_per_query_after,
            "benefit": e.benefit,
        }
        for name, e in by_reader.items()
    }
    seconds = round(sum(e.seconds for e in by_reader.values()), 3)
    return replace(first, **mixed, readers=readers, seconds=seconds)  # type: ignore[arg-type]


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


def query_bytes(
    query: Query, files: Sequence[FileStats], column_bytes: Mapping[str, Mapping[str, float]]
) -> tuple[float, float]:
    """(bytes read after pruning, bytes without pruning) of `query` over `files`."""
    ((read, total),) = _query_bytes(query, files, (column_bytes,))
    return read, total


def _query_bytes(
    query: Query, files: Sequence[FileStats], byte_maps: Sequence[Mapping[str, Mapping[str, float]]]
) -> list[tuple[float, float]]:
    """(read, total) of `query` over `files` under each map of column bytes, with one pruning pass."""
    sums = [[0.0, 0.0] for _ in byte_maps]
    for stats in files:
        keep = might_match(query.predicate, stats)
        for totals, column_bytes in zip(sums, byte_maps, strict=True):
            sizes = column_bytes.get(stats.path, {})
            size = sum(v for c, v in sizes.items() if query.columns is None or c in query.columns)
            totals[1] += size
            if keep:
                totals[0] += size
    return [(read, total) for read, total in sums]


def recompressed(
    column_bytes: Mapping[str, Mapping[str, float]], ratios: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """`column_bytes` as the new layout would store them: each column times its ratio."""
    return {path: {c: v * ratios.get(c, 1.0) for c, v in sizes.items()} for path, sizes in column_bytes.items()}


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
    *,
    rate: QueryRate | None = None,
    compression: Compression | None = None,
    virtual_written: Mapping[str, Mapping[str, float]] | None = None,
) -> BenefitEstimate:
    """The benefit of replacing `current` (real statistics and column bytes) by files laid out like
    `virtual`, for `expected` future queries shaped like `queries`.

    `virtual_bytes` are the virtual files' column bytes at today's bytes per row. With `compression`,
    the rewritten data's total bytes change by its ratios, and the share each query reads comes from
    `virtual_written` (the virtual files as really written: a file of rows that all match a predicate
    often compresses far better than the average) when given, else from the ratios."""
    started = time.perf_counter()
    current_after = recompressed(current_bytes, compression.ratios) if compression else current_bytes
    written = virtual_written or (recompressed(virtual_bytes, compression.ratios) if compression else virtual_bytes)
    weight = sum(q.weight for q in queries)
    before = after_skipping = after = total = 0.0
    for query in queries:
        (read_now, total_now), (_, total_now_after) = _query_bytes(query, current, (current_bytes, current_after))
        (read_virtual, total_virtual), (read_written, total_written) = _query_bytes(
            query, virtual, (virtual_bytes, written)
        )
        share = read_virtual / total_virtual if total_virtual else 1.0
        share_after = read_written / total_written if total_written else 1.0
        before += query.weight * read_now
        after_skipping += query.weight * share * total_now
        after += query.weight * share_after * total_now_after
        total += query.weight * total_now
    if weight:
        before, after_skipping, after, total = (v / weight for v in (before, after_skipping, after, total))
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
