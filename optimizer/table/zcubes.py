"""Which files Delta's ``OPTIMIZE`` of a liquid table rewrites: its ZCube rules, so the service prices the
OPTIMIZE Delta will actually run rather than "the new data".

Delta's clustering (``ClusteringStrategy.applyMinZCube`` and ``ZCube.filterOutLargeZCubes`` /
``filterOutSingleZCubes``, the same from Delta 3.2 through 4.0) tags every file an OPTIMIZE writes with the
id of its ZCube and the keys it was clustered by (``ZCUBE_ID``, ``ZCUBE_ZORDER_BY``), and
``clusteringProvider = "liquid"``. A later OPTIMIZE takes:

* every file no OPTIMIZE clustered (no ZCube);
* every file of a ZCube smaller than ``minCubeSize`` (100 GiB by default, whatever ``maxFileSize`` is; a
  cube weighed by its files' logical sizes, less the rows deletion vectors removed), so a table below that
  size is re-clustered whole by every OPTIMIZE (delta-io/delta#4304);
* not files clustered by other keys (left as they are after a key change) unless ``OPTIMIZE ... FULL``;
* nothing when what is left is one ZCube alone (already clustered together).

`liquid_rewrite` is that rule over `ClusteredFile`s; `clustered_files` reads the tags through Delta's own
snapshot (delta-rs does not hand tags over).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LIQUID_PROVIDER = "liquid"
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
MIN_CUBE_SIZE_KEY = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold"
MAX_FILE_SIZE_KEY = "spark.databricks.delta.optimize.maxFileSize"
DEFAULT_MAX_FILE_SIZE = 1024 * 1024 * 1024  # Delta's default maxFileSize: 1 GiB
MIN_CUBE_FILES = 100  # Delta's minCubeSize default: 100 x maxFileSize's default (not the session's)
FULL_SINCE = (3, 3)  # the Delta release that added OPTIMIZE ... FULL


@dataclass(frozen=True)
class ClusteredFile:
    """One active file as Delta's clustering sees it: its size, who clustered it (``clusteringProvider``)
    and its ZCube (id and keys; None: no OPTIMIZE clustered it). `logical`: the bytes Delta weighs a cube
    by (``estLogicalFileSize``: less than `size` where a deletion vector removed rows; None: `size`)."""

    path: str
    size: int
    provider: str | None = None
    cube: str | None = None
    keys: tuple[str, ...] | None = None
    logical: int | None = None

    @property
    def weight(self) -> int:
        """The bytes this file adds to its cube's size against ``minCubeSize``."""
        return self.size if self.logical is None else self.logical

    @classmethod
    def of_tags(
        cls,
        path: str,
        size: int,
        provider: str | None,
        tags: dict[str, str] | None,
        *,
        records: int | None = None,
        deleted: int = 0,
    ) -> ClusteredFile:
        """From an AddFile's fields; a ZCube needs both tags (Delta's ``ZCubeInfo.fromAddFileTags``).
        `records` (the statistics' ``numRecords``) and `deleted` (its deletion vector's cardinality) give
        the logical size as Delta estimates it."""
        tags = tags or {}
        cube = tags.get(ZCUBE_ID)
        keys = tags.get(ZCUBE_ZORDER_BY)
        logical = _logical_size(size, records, deleted)
        if cube is None or keys is None:
            return cls(path, size, provider, logical=logical)
        return cls(path, size, provider, cube, tuple(str(k) for k in json.loads(keys)), logical)


def _logical_size(size: int, records: int | None, deleted: int) -> int | None:
    """Delta's ``AddFile.estLogicalFileSize``: `size` x the share of the rows no deletion vector removed
    (None without ``numRecords``, where Delta weighs the file by its size; no file of 0 rows divides)."""
    if records is None or not deleted or records <= 0:
        return None
    return int((records - deleted) / records * size)


def liquid_rewrite(
    files: Sequence[ClusteredFile], keys: Sequence[str], *, min_cube_size: int, full: bool = False
) -> list[ClusteredFile]:
    """The files Delta's ``OPTIMIZE`` (``FULL`` with `full`) of a table clustered by `keys` rewrites."""
    wanted = list(keys)
    ordered = sorted(files, key=lambda f: (f.cube is not None, f.cube or ""))  # no ZCube first, as Delta sorts
    candidates: list[ClusteredFile] = []
    other_keys: list[ClusteredFile] = []
    for f in ordered:
        ours = f.provider in (None, LIQUID_PROVIDER)
        same_keys = f.keys is None or list(f.keys) == wanted  # as Delta compares: exactly
        (candidates if ours and same_keys else other_keys).append(f)
    small: list[ClusteredFile] = []
    cubes = 0
    for cube, members in groupby(candidates, key=lambda f: f.cube):
        group = list(members)
        if cube is None:
            small.extend(group)
        elif sum(f.weight for f in group) < min_cube_size:  # a sealed cube (>= minCubeSize) is left alone
            small.extend(group)
            cubes += 1
    if full and other_keys:
        return small + other_keys
    alone = cubes == 1 and all(f.cube is not None for f in small)
    return [] if alone else small


def min_cube_size(spark: SparkSession | None) -> int:
    """Delta's ``minCubeSize`` as the session sets it. Its default is a constant, 100 x the *default*
    ``maxFileSize`` (100 GiB: ``DeltaSQLConf``'s ``100 * DELTA_OPTIMIZE_MAX_FILE_SIZE.defaultValue``): a
    session that sets ``maxFileSize`` still re-clusters every cube below 100 GiB."""
    configured = spark.conf.get(MIN_CUBE_SIZE_KEY, None) if spark is not None else None
    if configured:
        return int(configured)
    return MIN_CUBE_FILES * DEFAULT_MAX_FILE_SIZE


def session_release(spark: SparkSession) -> tuple[int, int] | None:
    """The (major, minor) release of the Delta in the session's JVM; None: unknown (Spark Connect, a jar
    without a version)."""
    from optimizer.table.rewrite_path import Capabilities

    release = Capabilities.of_session(spark).release()
    if release is None:
        return None
    try:
        major, minor = (int(part) for part in release.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def supports_full(spark: SparkSession) -> bool:
    """Whether the session's Delta runs ``OPTIMIZE ... FULL`` (Delta 3.3 and later; unknown: no)."""
    release = session_release(spark)
    return release is not None and release >= FULL_SINCE


def check_full(spark: SparkSession, uri: str) -> None:
    """Refuse ``OPTIMIZE ... FULL`` before any work where the session's Delta is known to predate it: its
    parser would fail only after the key change it follows had committed. An unknown release (Spark
    Connect) is tried: Delta then refuses the statement itself."""
    from optimizer.errors import UnsupportedTableError

    release = session_release(spark)
    if release is not None and release < FULL_SINCE:
        raise UnsupportedTableError(
            f"{uri}: OPTIMIZE FULL needs Delta {'.'.join(map(str, FULL_SINCE))} or later and this session's "
            f"Delta is {'.'.join(map(str, release))}; nothing was changed"
        )


def clustered_files(spark: SparkSession, uri: str, version: int | None = None) -> list[ClusteredFile] | None:
    """The table's active files (at `version`; None: the latest) with their clustering tags, read through
    Delta's snapshot in the session's JVM; None where the session has no Delta engine (Spark Connect):
    then nobody can tell which ZCubes are sealed, and the caller says so."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from optimizer.errors import TableAccessError
    from optimizer.table.delta_engine import DeltaEngine

    try:
        engine = DeltaEngine(spark, uri)
    except TableAccessError:  # the session has no Delta engine classes
        return None
    snapshot = engine.latest() if version is None else engine.snapshot(version)
    actions = DataFrame(snapshot.allFiles().toDF(), spark)
    records = F.get_json_object("stats", "$.numRecords").cast("long").alias("records")
    deleted = F.coalesce(F.col("deletionVector.cardinality"), F.lit(0)).alias("deleted")
    rows = actions.select("path", "size", "clusteringProvider", "tags", records, deleted).collect()
    return [
        ClusteredFile.of_tags(r.path, int(r.size), r.clusteringProvider, r.tags, records=r.records, deleted=r.deleted)
        for r in rows
    ]
