"""How deltaopt's own layout run commits (`optimizer.clustering.job`): the property change that gives the
clustering keys statistics before any file is written, the atomic rewrite of the verified files through
the committer the rewrite path chose (`optimizer.table.rewrite_path.open_path`), and the keys' layout
health before and after, for the result.

A failed rewrite takes the run's extended-stats index with it, so nothing points at files that never
landed; only a commit whose outcome is unknown keeps it (its files may be the table's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from optimizer.errors import CommitOutcomeUnknownError
from optimizer.skipping.extended import delete_index
from optimizer.skipping.health import layout_health
from optimizer.table.key_stats import describe_change, key_columns
from optimizer.table.rewrite import Committer, RewriteRequest

if TYPE_CHECKING:
    from optimizer.clustering.layout import Layout, Progress
    from optimizer.features import FeatureSet
    from optimizer.table.access import DataFile, Snapshot, StagedFile, TableAccess


@dataclass(frozen=True)
class Staged:
    """Files written and verified but not committed, with what the commit and the result report."""

    files: list[StagedFile]
    layout: Layout
    output: Mapping[str, object]
    cluster_seconds: float
    write_seconds: float
    rows: int  # verified: the rows read and written


def index_keys(
    committer: Committer, snapshot: Snapshot, properties: Mapping[str, str], run_id: str, progress: Progress
) -> Snapshot:
    """Commit the property change that gives the clustering keys statistics; the table after it (so
    the files this run writes carry them)."""
    progress(f"run {run_id}: clustering keys get statistics: {describe_change(snapshot, properties)}")
    committer.set_properties(properties, {"run_id": run_id, "reason": "statistics for clustering keys"})
    return committer.table.snapshot()


def keys_health(table: TableAccess, before: Snapshot, version: int, features: FeatureSet) -> dict[str, Any]:
    """The clustering keys' layout health over the whole table before the run and at `version`."""
    keys = key_columns(features)
    if not keys:
        return {}
    after = table.snapshot(version).files
    return {
        "before": [h.as_dict() for h in layout_health(before.files, keys)],
        "after": [h.as_dict() for h in layout_health(after, keys)],
    }


def commit_staged(
    committer: Committer,
    snapshot: Snapshot,
    chosen: Sequence[DataFile],
    staged: Staged,
    features: FeatureSet,
    *,
    run_id: str,
    metadata: Mapping[str, Any] | None,
) -> int:
    """The atomic rewrite (remove `chosen`, add the staged files, ``dataChange=false``); on a lost race
    or any failure the run's index file goes too, so nothing points at files that never landed."""
    commit_metadata = {
        "operation": "OPTIMIZE",
        "runId": run_id,
        "features": features.as_dict(),
        "filesIn": len(chosen),
        "filesOut": len(staged.files),
        "rows": staged.rows,
        "sopPartitions": len(staged.layout.partitions),
        "dimensions": len(staged.layout.dimensions),
        "output": staged.output,
        **(metadata or {}),
    }
    request = RewriteRequest(
        snapshot.version,
        chosen,
        staged.files,
        commit_metadata,
        z_order_by=history_names(staged.layout),
    )
    try:
        return committer.rewrite(request)
    except CommitOutcomeUnknownError:
        raise  # the commit may have landed: its index must stay with its files
    except Exception:
        delete_index(committer.table, run_id)
        raise


def history_names(layout: Layout) -> tuple[str, ...]:
    """What Delta's history records as ``zOrderBy``: the user's expressions and joined attributes, and the
    SOP partition id as the predicates it stands for, never deltaopt's helper columns."""
    return tuple(layout.labels.get(d.column, d.column) for d in layout.dimensions)
