"""What a min/max reader keeps of each scan, against what the scan's own min/max-testable conjuncts select.

A standard reader (Spark's Delta scan, DuckDB, Trino) keeps files by the Delta log's min/max, then row
groups by their footers' min/max (docs/READERS.md). Its *kept share* of a scan is the bytes of the
scan's columns it reads over those columns' bytes in the whole table. No layout can make it read less
than the rows matching the conjuncts it can test at all: a bare column against literals (comparisons,
BETWEEN, IN, IS NULL); that share of the table's rows is the scan's *bound*. kept / bound per scan says
how far a layout is from what min/max metadata could give: 1.0 is the bound, 3 reads three times the
rows its conjuncts select. The geometric mean and the 90th percentile over the scans that have such
conjuncts are issue 48's measure; scans without any (every file is read whatever the layout) are left
out of both and counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from optimizer.estimate.replay import Query, query_bytes
from optimizer.skipping.filestats import table_column_types
from optimizer.skipping.pruning import column_names_of, prepare
from optimizer.skipping.scan import column_sizes, file_row_groups, table_file_stats
from optimizer.table.access import TableAccess

Held = Sequence[tuple[str | None, tuple[str, ...]]]
"""(WHERE text, columns read) of each held-out scan."""


def min_max_where(where: str | None) -> str | None:
    """The conjuncts of `where` a min/max reader can test (a bare column against literals), ANDed in
    Spark SQL; None when there are none."""
    if not where:
        return None
    tree = sqlglot.parse_one(where, read="spark")
    kept = [c for c in tree.flatten() if _testable(c.unnest())] if isinstance(tree, exp.And) else []
    if not isinstance(tree, exp.And) and _testable(tree.unnest()):
        kept = [tree]
    return " AND ".join(f"({c.unnest().sql(dialect='spark')})" for c in kept) or None


def _testable(node: exp.Expression) -> bool:
    """A comparison of one bare column with literals (a literal may be cast: CAST('...' AS DATE))."""
    if isinstance(node, exp.EQ | exp.GT | exp.GTE | exp.LT | exp.LTE):
        sides = (node.this, node.expression)
        return any(isinstance(a, exp.Column) and _literal(b) for a, b in (sides, sides[::-1]))
    if isinstance(node, exp.Between):
        return isinstance(node.this, exp.Column) and _literal(node.args["low"]) and _literal(node.args["high"])
    if isinstance(node, exp.In):
        values = node.expressions
        return isinstance(node.this, exp.Column) and bool(values) and all(_literal(v) for v in values)
    if isinstance(node, exp.Is):
        return isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Null)
    return False


def _literal(node: exp.Expression) -> bool:
    if isinstance(node, exp.Literal | exp.Null | exp.Boolean):
        return True
    if isinstance(node, exp.Cast):
        return _literal(node.this)
    if isinstance(node, exp.Neg):
        return _literal(node.this)
    return False


def bounds(spark: Any, uri: str, held: Held) -> list[float | None]:
    """Per scan, the share of the table's rows matching its testable conjuncts (None: it has none), in
    one pass over the table (Spark's Delta reader)."""
    from pyspark.sql import functions as F

    testable = [min_max_where(where) for where, _ in held]
    frame = spark.read.format("delta").load(uri)
    counts = [F.count(F.when(F.expr(t), 1)).alias(f"q{i}") for i, t in enumerate(testable) if t]
    row = frame.agg(F.count(F.lit(1)).alias("rows"), *counts).first()
    total = row["rows"] or 1
    return [row[f"q{i}"] / total if t else None for i, t in enumerate(testable)]


@dataclass(frozen=True)
class PricedFiles:
    """A table's files as the benchmarks price what readers read of them (`replay.query_bytes`): each
    file's column bytes and its row groups from its footer, and the snapshot they are of."""

    snapshot: Any
    sizes: Mapping[str, Mapping[str, int]]
    groups: Mapping[str, tuple[Any, ...]]

    @classmethod
    def of(cls, table: TableAccess) -> PricedFiles:
        snapshot = table.snapshot()
        types = table_column_types(snapshot.spark_schema().fields)
        groups = {f.path: file_row_groups(table, f, types) or () for f in snapshot.files}
        return cls(snapshot, {f.path: column_sizes(table, f) or {} for f in snapshot.files}, groups)


def kept_bytes(table: TableAccess, held: Held) -> list[tuple[float, float]]:
    """Per scan, (bytes of its columns a min/max reader reads, those columns' bytes in the table): files
    by Delta's statistics, then row groups by their footers."""
    files = PricedFiles.of(table)
    stats = table_file_stats(table, files.snapshot, files.snapshot.files, {})  # Delta's statistics only
    shares = []
    for where, columns in held:
        predicate = prepare(where)
        query = Query(predicate, frozenset(columns) | set(column_names_of(predicate)), 1.0)
        shares.append(query_bytes(query, stats, files.sizes, files.groups))
    return shares


@dataclass(frozen=True)
class KeptOverBound:
    """One layout's kept share over the bound, summarised over the scans with testable conjuncts."""

    geometric_mean: float
    p90: float
    scans: int  # with testable conjuncts and a bound above zero
    left_out: int  # without (every file read whatever the layout) or matching no row
    kept_total: float  # all scans' column bytes read over their columns' bytes (unselective scans dominate it)
    ratios: tuple[float | None, ...] = ()  # per scan in the held-out order; None where left out


def kept_over_bound(kept: Sequence[tuple[float, float]], bound: Sequence[float | None]) -> KeptOverBound:
    """The per-scan ratios kept share / bound summarised. A scan whose conjuncts match no row has no
    finite ratio (any read is infinitely above it): left out, counted with the scans without conjuncts."""
    shares = [read / total if total else 1.0 for read, total in kept]
    per_scan = tuple(k / b if b else None for k, b in zip(shares, bound, strict=True))
    ratios = sorted(r for r in per_scan if r is not None)
    left = len(kept) - len(ratios)
    total = sum(read for read, _ in kept) / max(sum(t for _, t in kept), 1.0)
    if not ratios:
        return KeptOverBound(math.nan, math.nan, 0, left, total, per_scan)
    geometric = math.exp(sum(math.log(max(r, 1e-12)) for r in ratios) / len(ratios))
    p90 = ratios[min(len(ratios) - 1, math.ceil(0.9 * len(ratios)) - 1)]
    return KeptOverBound(geometric, p90, len(ratios), left, total, per_scan)


def race(spark: Any, copies: Mapping[str, TableAccess], held: Held) -> dict[str, KeptOverBound]:
    """Each copy's kept share over the bound. The copies hold the same rows (checked by the caller's
    benchmark), so the bound is counted once, on the first."""
    bound = bounds(spark, next(iter(copies.values())).uri, held)
    return {name: kept_over_bound(kept_bytes(copy, held), bound) for name, copy in copies.items()}


def render(results: Mapping[str, KeptOverBound], names: Mapping[str, str]) -> str:
    """The race as a table, and the service against the better of Delta's two layouts per figure
    (issue 48's targets: geometric mean <= 0.7x, 90th percentile <= 0.5x)."""
    from benchmarks.common import table

    rows = [
        (names.get(n, n), f"{r.geometric_mean:.2f}", f"{r.p90:.2f}", r.scans, r.left_out, f"{100 * r.kept_total:.1f}%")
        for n, r in results.items()
    ]
    header = ("copy", "kept / bound: geometric mean", "kept / bound: p90", "scans", "left out", "bytes kept in all")
    intro = (
        "\nWhat a min/max reader keeps (files by Delta's statistics, row groups by footers) per held-out scan, over"
        " the share of rows its own min/max-testable conjuncts select (`benchmarks/kept_share.py`):\n"
    )
    lines = [intro, table(header, rows)]
    peers = [results[p] for p in ("zorder", "liquid") if p in results]
    if "service" in results and peers:
        service = results["service"]
        best_mean = min(p.geometric_mean for p in peers)
        best_p90 = min(p.p90 for p in peers)
        lines.append(
            f"\nService against the better of Delta's layouts: geometric mean {service.geometric_mean / best_mean:.2f}x"
            f" (target <= 0.7x), p90 {service.p90 / best_p90:.2f}x (target <= 0.5x), bytes kept in all"
            f" {service.kept_total / min(p.kept_total for p in peers):.2f}x (target <= 1x at the same codec).\n"
        )
    return "\n".join(lines)
