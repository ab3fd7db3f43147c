"""The estimate of Delta's own clustering of a liquid table (what ``CLUSTER BY AUTO`` weighs on Databricks).

Delta's ``OPTIMIZE`` of a liquid table lays files out by a Hilbert curve over range ids of its keys
(Z-order for one key) and rewrites what its ZCube rules pick (`optimizer.table.zcubes`): the files no
OPTIMIZE clustered and every file of a cube still below ``minCubeSize``. So the estimate prices that
OPTIMIZE, not deltaopt's own layout: the same sample, replay and cost model as every other layout, with
the layout fixed to the keys on the Hilbert curve (`keys_layout`), over the files Delta will rewrite.
Two questions are asked of it (`optimizer.service.liquid` asks them and decides):

* the table's own keys: does Delta's OPTIMIZE pay now (`by_keys`)?
* the workload's keys: which at most four plain columns pay best, over the files an OPTIMIZE after the
  key change would rewrite (`by_workload`): the new data only, or with ``FULL`` every file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from optimizer.clustering.by_delta import MAX_KEYS, delta_expressible
from optimizer.estimate.decision import estimate
from optimizer.features import FeatureSet, ZFeature
from optimizer.skipping.extended import load_index
from optimizer.table.output import CODECS
from optimizer.table.zcubes import session_release

if TYPE_CHECKING:
    from collections.abc import Mapping

    from optimizer.analysis.context import TableContext
    from optimizer.estimate.record import Decision
    from optimizer.skipping.extended import ExtendedStats
    from optimizer.table.access import DataFile, Snapshot

HILBERT_FROM = 2  # Delta's clustering: Z-order over one key's range ids, a Hilbert curve for 2-4 keys
# what Delta's OPTIMIZE writes unless the session says otherwise: Spark's Parquet codec, parquet-mr's
# row groups, Delta's maxFileSize
CODEC_KEY, DELTA_CODEC = "spark.sql.parquet.compression.codec", "snappy"
ROW_GROUP_KEY, DELTA_ROW_GROUP = "spark.hadoop.parquet.block.size", 128 << 20
MAX_FILE_KEY, DELTA_MAX_FILE = "spark.databricks.delta.optimize.maxFileSize", 1 << 30
# Delta's clustering range-partitions rows by the curve into files and sorts each file's rows by it only
# with this set (`MultiDimClustering`, Delta 4.0 and later; earlier releases never sort within files)
SORT_WITHIN_FILES_KEY, SORT_WITHIN_FILES_SINCE = "spark.databricks.io.skipping.mdc.sortWithinFiles", (4, 0)


def as_delta_writes(context: TableContext, **changes: object) -> TableContext:
    """`context` with the thresholds that describe what Delta's OPTIMIZE writes, not deltaopt's rewrite:
    files of Delta's ``maxFileSize``, in Spark's Parquet codec (the table's codec property still wins, as
    for every writer: `table.output.resolve_output`) and parquet-mr's row groups, as the service's
    session sets them. Otherwise the estimate would credit a liquid OPTIMIZE with deltaopt's ZSTD and
    its file size, which Delta never writes; nor with rows sorted within files where Delta leaves them
    unsorted (`sorts_within_files`): no row groups along the curve (at Delta's 128 MiB row groups in
    1 GiB files, eight a file the estimate priced as curve ranges), and the compression measured on rows
    in no order; nor with one file more than Delta writes (it rounds the file count down). `changes`: further
    threshold overrides."""
    conf = context.spark.conf
    codec = str(conf.get(CODEC_KEY, None) or DELTA_CODEC).lower()
    written = {
        "codec": codec if codec in CODECS else DELTA_CODEC,
        "codec_level": None,
        "row_group_size": int(conf.get(ROW_GROUP_KEY, None) or DELTA_ROW_GROUP),
        "target_file_size": int(conf.get(MAX_FILE_KEY, None) or DELTA_MAX_FILE),
        "sorted_within_files": sorts_within_files(conf, session_release(context.spark)),
        "file_count": "down",  # OptimizeExecutor: max(1, totalSize / maxFileSize), an integer division
    }
    return context.with_thresholds(context.thresholds.model_copy(update={**written, **changes}))


def sorts_within_files(conf: Any, release: tuple[int, int] | None) -> bool:
    """Whether Delta's clustering sorts each file's rows by the curve: `SORT_WITHIN_FILES_KEY` set true
    (as Spark reads a boolean conf: trimmed, any case) on a release that has it (unknown: as the conf says)."""
    wanted = str(conf.get(SORT_WITHIN_FILES_KEY, None) or "false").strip().lower() == "true"
    return wanted and (release is None or release >= SORT_WITHIN_FILES_SINCE)


def by_delta_zorder(
    context: TableContext, snapshot: Snapshot | None = None, index: Mapping[str, ExtendedStats] | None = None
) -> Decision:
    """Delta's OPTIMIZE ZORDER BY of a plain table, priced as Delta runs it where only SQL reaches the
    cluster: what its command can apply (`delta_expressible`), over every file of the table (it cannot
    be pointed at files: it rewrites them all, clustered or not), written as Delta writes
    (`as_delta_writes`: its file size, codec and row groups, rows unsorted within files), not as
    deltaopt's job over the new files. `snapshot` and `index`: as `estimate` takes them."""
    if snapshot is None or index is None:
        snapshot = context.table.snapshot()
        index = load_index(context.table, snapshot)
    decision = estimate(
        as_delta_writes(context), files=snapshot.files, snapshot=snapshot, index=index, applies=delta_expressible
    )
    unclustered = sum(1 for f in snapshot.files if f.path not in index)
    every = len(snapshot.files)
    said = f"Delta's ZORDER BY rewrites every file: its new data counts all {every}, {unclustered} unclustered"
    return replace(decision, reason=f"{decision.reason}; {said}")


def keys_layout(keys: Sequence[str]) -> FeatureSet:
    """The layout Delta's OPTIMIZE gives a table clustered by `keys`."""
    z = tuple(ZFeature(k) for k in keys)
    return FeatureSet(z=z, curve="hilbert") if len(keys) >= HILBERT_FROM else FeatureSet(z=z)


def _as_delta_clusters(features: FeatureSet) -> tuple[FeatureSet, list[str]]:
    """The workload's features as Delta's clustering applies them: at most four plain columns, on its
    curve; the rest named (SOP predicates, expressions, joined attributes)."""
    kept, left = delta_expressible(features, clustered=True)
    keys = [f.column for f in kept.z][:MAX_KEYS]
    return replace(keys_layout(keys), z_add=kept.z_add), left


def by_keys(
    context: TableContext,
    keys: Sequence[str],
    files: Sequence[DataFile],
    *,
    snapshot: Snapshot,
    index: Mapping[str, ExtendedStats],
) -> Decision:
    """Delta's OPTIMIZE by the table's `keys` over `files` (what its ZCube rules rewrite), whatever the
    workload would choose: only the layout by those keys is priced (no search, no variants)."""
    layout = keys_layout(keys)

    def fixed(features: FeatureSet) -> tuple[FeatureSet, list[str]]:
        wanted = {f.expression for f in features.z} | {f"SOP {f.predicate}" for f in features.sop}
        return layout, sorted(wanted - set(keys))

    delta = as_delta_writes(context, selection="frequency", compare_layouts=False)
    return estimate(delta, files=files, snapshot=snapshot, index=index, applies=fixed)


def by_workload(
    context: TableContext,
    files: Sequence[DataFile],
    *,
    snapshot: Snapshot,
    index: Mapping[str, ExtendedStats],
) -> Decision:
    """Delta's OPTIMIZE by the keys the workload wants over `files`: the estimate's search (its layouts
    on Delta's curve, `_as_delta_clusters`), and no variants (Delta lays out by keys, nothing else)."""
    delta = as_delta_writes(context, compare_layouts=False)
    return estimate(delta, files=files, snapshot=snapshot, index=index, applies=_as_delta_clusters)


def keys_of(decision: Decision | None) -> tuple[str, ...]:
    """The clustering keys a decision's layout stands for (none: it chose none)."""
    if decision is None or decision.features is None:
        return ()
    return tuple(f.column for f in decision.features.z)
