"""The two file sets of a committed job, as realised benefit (`service.realised`) prices scans on them:
the files the commit at version v replaced (active at v-1, gone at v) and the files it wrote (added at
v), with the statistics each kind of reader prunes by and their sizes, all from the Delta log and the
extended-statistics sidecars (no data file is read). Read once per process and job (a small cache):
every later tick that measures the job reuses them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optimizer.skipping.extended import load_index
from optimizer.skipping.filestats import FileStats
from optimizer.skipping.scan import table_file_stats

if TYPE_CHECKING:
    from optimizer.table.access import DataFile, Snapshot, TableAccess

CACHED = 64  # jobs whose file sets a process keeps
WHOLE = ""  # the one "column" a file is priced under: the whole file


@dataclass(frozen=True)
class JobFiles:
    """The files a commit replaced (`before`, at the version before it) and those it wrote (`after`), with
    their statistics as each kind of reader sees them, and their sizes."""

    before: Mapping[str, tuple[FileStats, ...]]  # reader kind -> statistics
    after: Mapping[str, tuple[FileStats, ...]]
    before_bytes: Mapping[str, Mapping[str, float]]  # path -> {WHOLE: size}
    after_bytes: Mapping[str, Mapping[str, float]]
    added: frozenset[str]  # the paths the commit added

    @property
    def totals(self) -> tuple[float, float]:
        """Bytes of the replaced files and of the job's files."""
        return _total(self.before_bytes), _total(self.after_bytes)


def _total(sizes: Mapping[str, Mapping[str, float]]) -> float:
    return sum(size for per_file in sizes.values() for size in per_file.values())


_CACHE: dict[tuple[str, int], JobFiles] = {}
_CACHE_LOCK = threading.Lock()


def job_files(table: TableAccess, version: int) -> JobFiles:
    """The file sets of the commit at `version` (read from the log once per process)."""
    key = (table.uri, version)
    with _CACHE_LOCK:
        found = _CACHE.get(key)
    if found is None:
        found = _read_job_files(table, version)
        with _CACHE_LOCK:
            _CACHE[key] = found
            while len(_CACHE) > CACHED:
                del _CACHE[next(iter(_CACHE))]
    return found


def _read_job_files(table: TableAccess, version: int) -> JobFiles:
    after_snapshot = table.snapshot(version)
    before_snapshot = table.snapshot(version - 1)
    before_paths = {f.path for f in before_snapshot.files}
    after_paths = {f.path for f in after_snapshot.files}
    removed = [f for f in before_snapshot.files if f.path not in after_paths]
    added = [f for f in after_snapshot.files if f.path not in before_paths]
    return JobFiles(
        before=_reader_stats(table, before_snapshot, removed),
        after=_reader_stats(table, after_snapshot, added),
        before_bytes={f.path: {WHOLE: float(f.size)} for f in removed},
        after_bytes={f.path: {WHOLE: float(f.size)} for f in added},
        added=frozenset(f.path for f in added),
    )


def _reader_stats(table: TableAccess, snapshot: Snapshot, files: list[DataFile]) -> dict[str, tuple[FileStats, ...]]:
    """The statistics each kind of reader prunes `files` by: standard readers Delta's min/max only,
    deltaopt's pruning its extended statistics too (the sidecars of the runs still describing them)."""
    index = load_index(table, snapshot) if files else {}
    return {
        "standard": tuple(table_file_stats(table, snapshot, files, {})),
        "deltaopt": tuple(table_file_stats(table, snapshot, files, index)),
    }
