"""What a Delta user would run instead of deltaopt, in the same Spark session: Delta's own
``OPTIMIZE ... ZORDER BY`` and liquid clustering (``CLUSTER BY`` + ``OPTIMIZE``).

Both peers are Delta tables written by Delta's own writer (``format("delta")``): a Z-order copy
appended to as usual and re-optimised with ``OPTIMIZE delta.`path` ZORDER BY (cols)`` after each
append, and a liquid-clustered copy created with ``CLUSTER BY (cols)`` and ``OPTIMIZE``-d after each
append, as Delta's documentation recommends. The target file size is set the same as deltaopt's
(``spark.databricks.delta.optimize.maxFileSize``). Each rewrite's figures come from the commit Delta
wrote (``operationMetrics``): files and bytes added and removed, and whether it rewrote data that an
earlier OPTIMIZE had already clustered (removed bytes beyond what arrived since the last OPTIMIZE).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

PeerKind = Literal["zorder", "liquid"]
MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"


@dataclass(frozen=True)
class Rewrite:
    seconds: float
    files_added: int
    files_removed: int
    bytes_added: int
    bytes_removed: int
    rewrote_clustered: bool  # it removed bytes an earlier OPTIMIZE had written


@dataclass
class DeltaPeer:
    """One peer copy of a table at `path`, clustered on `columns` by Delta itself."""

    spark: Any
    path: str
    kind: PeerKind
    columns: tuple[str, ...]
    target_file_size: int
    rewrites: list[Rewrite] = field(default_factory=list)
    _arrived: int = 0  # bytes appended since the last OPTIMIZE

    @property
    def name(self) -> str:
        cols = ", ".join(self.columns)
        return f"Delta ZORDER BY ({cols})" if self.kind == "zorder" else f"Delta liquid CLUSTER BY ({cols})"

    def load(self, frame: Any) -> None:
        """Append `frame` with Delta's writer (the first load creates the table, clustered for liquid)."""
        before = self._bytes()
        if before is None and self.kind == "liquid":
            frame.createOrReplaceTempView("deltaopt_peer_load")
            cols = ", ".join(f"`{c}`" for c in self.columns)
            self.spark.sql(
                f"CREATE TABLE delta.`{self.path}` USING delta CLUSTER BY ({cols}) AS SELECT * FROM deltaopt_peer_load"
            )
        else:
            frame.write.format("delta").mode("append").save(self.path)
        self._arrived += (self._bytes() or 0) - (before or 0)

    def optimize(self) -> Rewrite:
        """One OPTIMIZE (ZORDER BY, or liquid's incremental clustering), timed, with Delta's metrics."""
        cols = ", ".join(f"`{c}`" for c in self.columns)
        sql = f"OPTIMIZE delta.`{self.path}`" + (f" ZORDER BY ({cols})" if self.kind == "zorder" else "")
        previous = self.spark.conf.get(MAX_FILE_SIZE, None)
        self.spark.conf.set(MAX_FILE_SIZE, str(self.target_file_size))
        try:
            started = time.perf_counter()
            self.spark.sql(sql).collect()
            seconds = time.perf_counter() - started
        finally:
            if previous is None:
                self.spark.conf.unset(MAX_FILE_SIZE)
            else:
                self.spark.conf.set(MAX_FILE_SIZE, previous)
        last = self.spark.sql(f"DESCRIBE HISTORY delta.`{self.path}` LIMIT 1").collect()[0]
        metrics = last["operationMetrics"] or {} if last["operation"] == "OPTIMIZE" else {}
        removed = int(metrics.get("numRemovedBytes", 0))
        rewrite = Rewrite(
            seconds=seconds,
            files_added=int(metrics.get("numAddedFiles", 0)),
            files_removed=int(metrics.get("numRemovedFiles", 0)),
            bytes_added=int(metrics.get("numAddedBytes", 0)),
            bytes_removed=removed,
            rewrote_clustered=bool(self.rewrites) and removed > self._arrived,
        )
        self._arrived = 0
        self.rewrites.append(rewrite)
        return rewrite

    def _bytes(self) -> int | None:
        try:
            detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self.path}`").collect()[0]
        except Exception:  # no table yet
            return None
        return int(detail["sizeInBytes"] or 0)


def expert_columns(filters: Iterable[Sequence[str]], count: int = 4) -> tuple[str, ...]:
    """The `count` plain columns filtered most often: what an expert picks for ZORDER BY / CLUSTER BY
    (Delta's liquid clustering takes at most 4 keys). Ties go to the column name: `Counter.most_common`
    keeps first-seen order, and each scan's columns come out of a set, in an order that changes with
    the process's string hashing (the TPC-H stream's l_linestatus and l_returnflag tie at 87 scans of
    400: the peers' fourth key changed between runs)."""
    frequency = Counter(
        column
        for conjuncts in filters
        for column in {f.split(" ")[0] for f in conjuncts}
        if column.replace("_", "").isalnum() and not column[0].isdigit()
    )
    return tuple(sorted(frequency, key=lambda c: (-frequency[c], c))[:count])


def totals(rewrites: Sequence[Rewrite]) -> dict[str, float]:
    return {
        "seconds": sum(r.seconds for r in rewrites),
        "bytes_written": sum(r.bytes_added for r in rewrites),
        "bytes_removed": sum(r.bytes_removed for r in rewrites),
        "rewrote_clustered": sum(1 for r in rewrites if r.rewrote_clustered),
    }
