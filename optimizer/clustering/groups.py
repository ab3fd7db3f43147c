"""Which feature set each clustered file was laid out under: the groups drift re-clustering works on.

Every OPTIMIZE run records its feature set twice: in its commit's metadata and in its extended-stats
index file. Files are grouped by the *clustering* features (Z and SOP; the statistics-only features
do not change the layout), so two runs that clustered on the same features form one group. A run
whose feature set cannot be found (an index written before runs recorded it, and a commit outside
log retention) forms a group of unknown features: it is still clustered, and the estimate decides
whether re-clustering it pays like for any other group.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from optimizer.cut_tree import CutTree
from optimizer.features import FeatureSet
from optimizer.skipping.extended import ExtendedStats, load_index_with_runs
from optimizer.table.access import DataFile, Snapshot

if TYPE_CHECKING:
    from optimizer.table.access import TableAccess

UNKNOWN = "unknown features"


@dataclass(frozen=True)
class FileGroup:
    key: str  # the clustering features in words (`layout_key`); UNKNOWN when the runs' were not found
    files: tuple[DataFile, ...]
    runs: tuple[str, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def as_dict(self) -> dict[str, object]:
        return {"features": self.key, "files": len(self.files), "bytes": self.bytes, "runs": list(self.runs)}


def layout_key(features: FeatureSet | Mapping[str, Any] | None) -> str:
    """The clustering features of a layout in words: equal keys, equal layouts."""
    if features is None:
        return UNKNOWN
    layout = features if isinstance(features, FeatureSet) else FeatureSet.from_dict(features)
    z = [f.expression for f in layout.z]
    sop = sorted(f.predicate for f in layout.sop)
    joined = f" joined={json.dumps([j.helper for j in layout.joined])}" if layout.joined else ""  # keys before stay
    curve = f" curve={layout.curve}" if layout.curve != "z" else ""  # likewise: Z-order says nothing
    bits = f" precision={json.dumps(list(layout.precision))}" if layout.precision else ""  # likewise: round-robin
    cuts = f" cuts={_tree_digest(layout.cuts)}" if layout.cuts is not None else ""  # likewise: no tree
    return f"z={json.dumps(z)} sop={json.dumps(sop)}{joined}{curve}{bits}{cuts}"


def _tree_digest(tree: CutTree) -> str:
    """A cut tree in a layout key: its leaf count and a digest of its cuts (a tree has up to a cut per file)."""
    text = json.dumps(tree.as_json(), sort_keys=True)
    return f"{tree.leaves} leaves #{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def clustered_groups(
    table: TableAccess,
    snapshot: Snapshot,
    index: Mapping[str, ExtendedStats] | None = None,
    runs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[FileGroup]:
    """The active files deltaopt clustered, grouped by the clustering features of their runs,
    largest group first."""
    if index is None or runs is None:
        index, runs = load_index_with_runs(table, snapshot)
    runs = dict(runs)
    clustered = [f for f in snapshot.files if f.path in index]
    missing = {index[f.path].run_id for f in clustered} - set(runs)
    if missing:  # older index files: the commits know
        for commit in table.history(0):
            run_id = commit.deltaopt.get("runId")
            features = commit.deltaopt.get("features")
            if run_id in missing and isinstance(features, Mapping):
                runs[str(run_id)] = features
    by_key: dict[str, list[DataFile]] = {}
    run_ids: dict[str, set[str]] = {}
    for f in clustered:
        run_id = index[f.path].run_id
        data = runs.get(run_id)
        key = layout_key(data)
        by_key.setdefault(key, []).append(f)
        run_ids.setdefault(key, set()).add(run_id)
    groups = [FileGroup(key, tuple(files), tuple(sorted(run_ids[key]))) for key, files in by_key.items()]
    return sorted(groups, key=lambda g: (-g.bytes, g.key))


def oldest_first(files: Sequence[DataFile], budget: int) -> list[DataFile]:
    """The files written longest ago, up to `budget` bytes in all. Files are never split: when the
    oldest one alone exceeds the budget, nothing is chosen."""
    chosen: list[DataFile] = []
    total = 0
    for f in sorted(files, key=lambda f: (f.modification_time, f.path)):
        if total + f.size > budget:
            break
        chosen.append(f)
        total += f.size
    return chosen
