"""`deltaopt table info`: what a table looks like, from its Delta log and the extended-stats index."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

from optimizer.skipping.extended import load_index
from optimizer.table.access import TableAccess

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

    @property
    def unclustered_bytes(self) -> int:
        return self.bytes - self.clustered_bytes

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "unclustered_bytes": self.unclustered_bytes}


def table_info(table: TableAccess) -> TableInfo:
    snapshot = table.snapshot()
    histogram: Counter[str] = Counter()
    for f in snapshot.files:
        histogram[next(label for label, upper in SIZE_BUCKETS if f.size < upper)] += 1
    index = load_index(table, snapshot)
    clustered = [f for f in snapshot.files if f.path in index]
    history = table.history(max(snapshot.version - 100, 0))
    optimizes = [c.version for c in history if c.is_deltaopt_optimize]
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
    )


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
        "file sizes  " + "  ".join(f"{label}: {count}" for label, count in info.size_histogram.items()),
        f"clustered   {info.clustered_files} files, {human_bytes(info.clustered_bytes)} ({share:.0%}) "
        f"by deltaopt; unclustered {human_bytes(info.unclustered_bytes)}",
        "last OPTIMIZE by deltaopt: "
        + ("never" if info.last_optimize_version is None else f"version {info.last_optimize_version}"),
    ]
    return "\n".join(lines)
