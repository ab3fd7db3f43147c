"""`deltaopt table info`: what a table looks like, from its Delta log and the extended-stats index."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from optimizer.clustering.groups import clustered_groups, layout_key
from optimizer.features import FeatureSet
from optimizer.skipping.extended import load_index_with_runs
from optimizer.skipping.health import ColumnHealth, layout_health
from optimizer.table.access import Commit, TableAccess
from optimizer.table.key_stats import key_columns
from querylog.errors import PredicateError
from querylog.predicates.classify import column_names
from querylog.predicates.normalize import parse_canonical
from querylog.store import QueryLogTable

FREQUENT_COLUMNS = 4  # filter columns of the query log shown beside the clustering keys

SIZE_BUCKETS: tuple[tuple[str, int], ...] = (
    ("<1MB", 1 << 20),
    ("1-8MB", 8 << 20),
    ("8-32MB", 32 << 20),
    ("32-128MB", 128 << 20),
    ("128-512MB", 512 << 20),
    (">=512MB", 1 << 62),
)


@dataclass(frozen=True)
class TableInfo:
    uri: str
    version: int
    files: int
    bytes: int
    records: int | None
    partition_columns: tuple[str, ...]
    size_histogram: dict[str, int]
    clustered_files: int
    clustered_bytes: int
    clustering_runs: tuple[str, ...]
    last_operation: str | None
    last_optimize_version: int | None
    current_features: Mapping[str, Any] | None = None  # of the latest deltaopt run
    current_bytes: int = 0  # bytes laid out under those features
    health: tuple[ColumnHealth, ...] = field(default_factory=tuple)  # per clustering key and frequent filter column
    table_features: str = ""  # the protocol's features, as `TableFeatures.summary` names them

    @property
    def unclustered_bytes(self) -> int:
        return self.bytes - self.clustered_bytes

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "unclustered_bytes": self.unclustered_bytes}


def table_info(table: TableAccess, columns: Sequence[str] = (), log_uri: str | None = None) -> TableInfo:
    """The table's state; layout health for the latest run's clustering keys, the `FREQUENT_COLUMNS`
    filter columns of the query log at `log_uri` (default: beside the table) and `columns`."""
    snapshot = table.snapshot()
    histogram: Counter[str] = Counter()
    for f in snapshot.files:
        histogram[next(label for label, upper in SIZE_BUCKETS if f.size < upper)] += 1
    index, runs = load_index_with_runs(table, snapshot)
    clustered = [f for f in snapshot.files if f.path in index]
    history = table.history(max(snapshot.version - 100, 0))
    optimizes = [c.version for c in history if c.is_deltaopt_optimize]
    current = _latest_features(history)
    keys = key_columns(FeatureSet.from_dict(current)) if current else []
    frequent = frequent_filter_columns(log_uri or table.uri.rstrip("/") + "_querylog")
    groups = clustered_groups(table, snapshot, index, runs) if current else []
    return TableInfo(
        uri=table.uri,
        version=snapshot.version,
        files=len(snapshot.files),
        bytes=snapshot.total_bytes,
        records=snapshot.num_records,
        partition_columns=snapshot.partition_columns,
        size_histogram={label: histogram.get(label, 0) for label, _ in SIZE_BUCKETS},
        clustered_files=len(clustered),
        clustered_bytes=sum(f.size for f in clustered),
        clustering_runs=tuple(sorted({index[f.path].run_id for f in clustered})),
        last_operation=history[-1].operation if history else None,
        last_optimize_version=optimizes[-1] if optimizes else None,
        current_features=current,
        current_bytes=sum(g.bytes for g in groups if g.key == layout_key(current)),
        health=layout_health(snapshot.files, [*keys, *frequent, *(c.lower() for c in columns)]),
        table_features=snapshot.features.summary(),
    )


def _latest_features(history: Sequence[Commit]) -> Mapping[str, Any] | None:
    for commit in reversed(history):
        features = commit.deltaopt.get("features") if commit.is_deltaopt_optimize else None
        if isinstance(features, Mapping):
            return features
    return None


def frequent_filter_columns(log_uri: str, limit: int = FREQUENT_COLUMNS) -> list[str]:
    """The columns most scans in the query log filter on (none when there is no log there); ties by name,
    so the same log names the same columns in every process (`Counter.most_common` keeps first-seen
    order, and a scan's columns come out of a set, whose order follows the process's string hashing)."""
    log = QueryLogTable(log_uri)
    if not log.exists():
        return []
    columns: dict[str, tuple[str, ...]] = {}  # per filter text: logs repeat a few texts many times

    def read(text: str) -> tuple[str, ...]:
        if text not in columns:
            try:
                columns[text] = column_names(parse_canonical(text))
            except PredicateError:  # a malformed row: the analysis counts those; here it only goes unseen
                columns[text] = ()
        return columns[text]

    counts: Counter[str] = Counter()
    for record in log.read():
        counts.update({name for text in record.filters for name in read(text)})
    return sorted(counts, key=lambda name: (-counts[name], name))[:limit]


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def render(info: TableInfo) -> str:
    share = info.clustered_bytes / info.bytes if info.bytes else 0.0
    lines = [
        f"table       {info.uri}",
        f"version     {info.version} (last operation: {info.last_operation})",
        f"files       {info.files}, {human_bytes(info.bytes)}, "
        f"{'?' if info.records is None else f'{info.records:,}'} records",
        f"partitions  {', '.join(info.partition_columns) or 'none'}",
        f"features    {info.table_features or 'none'}",
        "file sizes  " + "  ".join(f"{label}: {count}" for label, count in info.size_histogram.items()),
        f"clustered   {info.clustered_files} files, {human_bytes(info.clustered_bytes)} ({share:.0%}) "
        f"by deltaopt; unclustered {human_bytes(info.unclustered_bytes)}",
        "last OPTIMIZE by deltaopt: "
        + ("never" if info.last_optimize_version is None else f"version {info.last_optimize_version}"),
    ]
    if info.current_features is not None:
        current = info.current_bytes / info.bytes if info.bytes else 0.0
        lines.append(
            f"current     {layout_key(info.current_features)}: {human_bytes(info.current_bytes)} ({current:.0%})"
        )
    if info.health:
        lines.append("layout health (depth: files a point value falls in; overlaps: files each file overlaps)")
        lines += [f"  {h.describe()}" for h in info.health]
    return "\n".join(lines)
