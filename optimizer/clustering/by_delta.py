"""Layouts Delta's own commands apply: deltaopt chooses the columns, Delta rewrites and commits.

Two cases (docs/CLUSTERS.md, docs/TABLE-FEATURES.md):

* **liquid-clustered tables**, wherever deltaopt runs: Delta's ``OPTIMIZE`` re-clusters them by their
  keys and refuses ``ZORDER BY``, so a deltaopt Z-order would be undone by the next OPTIMIZE. The keys
  are the user's choice, so what deltaopt does with them is the `LiquidMode` the user set: ``keep``
  (the default: Delta's ``OPTIMIZE`` clusters by the table's own keys, and the result names the keys
  the workload wanted), ``suggest`` (nothing is run: the result names the wanted keys) or ``set`` (the
  plain-column Z features become the keys, ``ALTER TABLE ... CLUSTER BY``, at most `MAX_KEYS`, only
  when they differ, and Delta's ``OPTIMIZE`` clusters incrementally);
* **SQL-only sessions** (Spark Connect, serverless, shared compute): no JVM gateway, so deltaopt cannot
  write and commit files itself; ``OPTIMIZE ... ZORDER BY`` with the plain-column Z features, in the
  order deltaopt chose, is the layout the cluster's Delta can apply.

What Delta's commands cannot express (SOP predicates, expressions, joined attributes) is named in the
result and not applied; the service prices only what is applied (`delta_expressible`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer.clustering.curves import CURVE_NAMES
from optimizer.clustering.result import DeltaCommandResult, LiquidOutcome, OptimizeResult
from optimizer.config_types import LiquidMode
from optimizer.errors import CommitConflictError, TableAccessError, UnsupportedTableError
from optimizer.features import FeatureSet, ZFeature
from optimizer.skipping.extended import ExtendedStats, unclustered_files, write_index
from optimizer.table.delta_sql_commit import DeltaSqlCommitter
from optimizer.table.rewrite import DeltaOptimize
from optimizer.table.zcubes import check_full

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from optimizer.clustering.layout import Progress
    from optimizer.table.access import Commit, DataFile, TableAccess
    from optimizer.table.rewrite_path import OpenedPath, RewritePath

log = logging.getLogger(__name__)

MAX_KEYS = 4  # Delta's limit on clustering columns
CLUSTER_BY_OPERATION = "CLUSTER BY"  # the history's operation of ALTER TABLE ... CLUSTER BY


class KeysChangedError(CommitConflictError):
    """A service job's liquid table has other clustering keys than its decision saw (the user's ``ALTER
    TABLE ... CLUSTER BY`` since the tick): the job ran nothing, so the user's keys stand. ``deltaopt
    optimize`` exits with `exit_status` for it, so a service whose job ran remotely tells it apart."""

    exit_status = 4


def clustering_keys(features: FeatureSet, limit: int | None = MAX_KEYS) -> tuple[list[str], list[str]]:
    """(the columns Delta can lay out by: plain-column Z features, in order, at most `limit`; what it
    cannot express: every other feature)."""
    plain = list(dict.fromkeys(f.column for f in features.z if f.is_plain_column))
    keys = plain[:limit] if limit is not None else plain
    left = [f.expression for f in features.z if f.column not in keys or not f.is_plain_column]
    left += [f"SOP {f.predicate}" for f in features.sop]
    left += [f"joined {j.dimension}.{j.attribute}" for j in features.joined]
    return keys, left


def delta_expressible(features: FeatureSet, clustered: bool = False) -> tuple[FeatureSet, list[str]]:
    """(the part of `features` Delta's commands apply: what a layout by them should be priced as; what
    they cannot express)."""
    keys, left = clustering_keys(features, MAX_KEYS if clustered else None)
    kept = tuple(f for f in features.z if f.is_plain_column and f.column in keys)
    if clustered:  # a liquid table's OPTIMIZE orders by its own curve (`estimate.liquid.keys_layout`)
        return replace(features, z=kept, sop=(), joined=(), precision=(), cuts=None), left + _bit_pattern(features)
    applied = replace(features, z=kept, sop=(), joined=(), curve="z", precision=(), cuts=None)
    return applied, left + _zorder_only(features) + _bit_pattern(features)


def _zorder_only(features: FeatureSet) -> list[str]:
    """The curve ``OPTIMIZE ZORDER BY`` cannot follow, named as not applied (it orders by Z-order only)."""
    return [CURVE_NAMES[features.curve]] if features.curve != "z" else []


def _bit_pattern(features: FeatureSet) -> list[str]:
    """A Z-order bit pattern (`FeatureSet.precision`) and a cut tree (`FeatureSet.cuts`), named as not applied:
    Delta interleaves its own way, and cuts files by no tree."""
    named = ["workload bits"] if features.precision else []
    return named + (["cut tree"] if features.cuts is not None else [])


@dataclass(frozen=True)
class CommandRun:
    """One run by Delta's commands: its id, progress reports, commit metadata, and the files to lay out
    (None: the files no run clustered)."""

    run_id: str
    progress: Progress
    metadata: Mapping[str, Any] | None = None
    files: Sequence[DataFile] | None = None
    full: bool = False  # a liquid table: OPTIMIZE FULL (files clustered by other keys too)
    keys: Sequence[str] | None = None  # a service job: the liquid keys its decision saw (None: no decision)


def optimize_with_delta(
    opened: OpenedPath, table: TableAccess, features: FeatureSet, run: CommandRun
) -> OptimizeResult:
    """Delta's own commands lay the table out (the path `opened` chose); the files they wrote are recorded
    as this run's, so the service does not take them for new data on its next tick. Without files to lay
    out (default: the files no run clustered) no Z-order runs: Delta's ``OPTIMIZE ZORDER BY`` cannot be
    pointed at files and would rewrite the whole table again. The path's `liquid` says whose clustering
    keys a liquid table's OPTIMIZE clusters by."""
    started = time.perf_counter()
    path, snapshot = opened.path, opened.snapshot
    files = run.files if run.files is not None or path.liquid_table else unclustered_files(table, snapshot)
    if not path.liquid_table and not files:
        return OptimizeResult.nothing(run.run_id, features, {})
    tag = {"operation": "OPTIMIZE", "runId": run.run_id, "features": features.as_dict(), **dict(run.metadata or {})}
    committer = opened.committer
    assert isinstance(committer, DeltaSqlCommitter)  # `open_path` gives Delta's commands their committer
    version, done = apply_with_delta(committer, path, features, tag, snapshot.version, full=run.full, decided=run.keys)
    summary = done.describe()
    run.progress(summary)
    if version is not None:
        _record_delta_files(table, done.versions, run.run_id, _applied(features, done))
    return _result(opened, done, version, features=features, summary=summary, run_id=run.run_id, started=started)


def _result(
    opened: OpenedPath,
    done: DeltaCommandResult,
    version: int | None,
    *,
    features: FeatureSet,
    summary: str,
    run_id: str,
    started: float,
) -> OptimizeResult:
    """The run's result as deltaopt's own runs report it (rows: Delta's OPTIMIZE reports files, not rows)."""
    liquid = done.liquid
    return OptimizeResult(
        run_id=run_id,
        version=version,
        files_in=done.files_in,
        files_out=done.files_out,
        bytes_in=done.bytes_in,
        bytes_out=done.bytes_out,
        rows=0,  # Delta's OPTIMIZE reports files, not rows; its own transaction kept them
        distinct_vectors=0,
        sop_partitions=0,
        dimensions=() if liquid is not None and liquid.mode == "suggest" else tuple(done.keys),  # nothing laid out
        features=features.as_dict(),
        seconds={"total": round(time.perf_counter() - started, 3)},
        output={
            "writer": "delta",
            "clustering": summary,
            "not_applied": done.not_applied,
            "engine": done.engine,
            **({"liquid": liquid.as_dict()} if liquid is not None else {}),
        },
        committed_by=opened.committer.engine if version is not None else "",
        properties={"clusterBy": ",".join(done.keys)} if done.keys_changed else {},
        path=opened.path,
        command=done,
    )


def apply_with_delta(
    committer: DeltaSqlCommitter,
    path: RewritePath,
    features: FeatureSet,
    tag: Mapping[str, Any],
    read_version: int,
    *,
    full: bool = False,
    decided: Sequence[str] | None = None,
) -> tuple[int | None, DeltaCommandResult]:
    """Lay the table out by `features` with Delta's own commands: OPTIMIZE on a liquid table, by keys the
    path's `liquid` says whose, else OPTIMIZE ZORDER BY. Returns the version committed (None: nothing
    rewritten, or `suggest`: nothing run) and what was done (``versions``: every commit of the run, found
    by the run's tag after `read_version`; the version is the last of them). Raises
    `UnsupportedTableError` before any change when `liquid` is `set` and no feature is a plain column, or
    `full` is asked of a table that is not liquid or of a session whose Delta predates it (`zcubes.check_full`).
    `full`: ``OPTIMIZE ... FULL`` (files clustered by other keys re-clustered too). `decided`: the keys a
    service job's decision saw; a liquid table whose keys differ now raises `KeysChangedError`, nothing run."""
    clustered = path.liquid_table
    if full and not clustered:
        raise UnsupportedTableError(
            f"{committer.table.uri} is not liquid-clustered: OPTIMIZE FULL re-clusters a liquid table's files "
            "only; nothing was changed"
        )
    if full:  # a Delta without FULL would fail only after the CLUSTER BY below committed
        check_full(committer.spark, committer.table.uri)
    keys, left = clustering_keys(features, MAX_KEYS if clustered else None)
    left = (left if clustered else left + _zorder_only(features)) + _bit_pattern(features)
    done = DeltaCommandResult(keys=keys, not_applied=left, clustered=clustered)
    if clustered:
        done = _liquid_keys(committer, done, path.liquid, decided)
        if path.liquid == "suggest":  # the table is left exactly as it is
            return None, done
    request = DeltaOptimize(read_version, tag, () if clustered else tuple(keys), full=full)
    try:
        committed = committer.optimize(request)
    except TableAccessError as error:
        if done.keys_changed:  # the CLUSTER BY committed: the failure must not read as "nothing changed"
            raise type(error)(
                f"{error}; the clustering keys of {committer.table.uri} were already changed from "
                f"({', '.join(done.keys_before) or 'none'}) to ({', '.join(done.keys)}) (liquid: set), "
                "and stay changed"
            ) from error
        raise
    result, commits = committed.result, committed.commits
    done = replace(
        done,
        files_in=result.files_in,
        files_out=result.files_out,
        bytes_in=result.bytes_in,
        bytes_out=result.bytes_out,
        engine=commits[-1].engine if commits else None,
        versions=[c.version for c in commits],
    )
    return (commits[-1].version if commits else None), done


def _liquid_keys(
    committer: DeltaSqlCommitter,
    done: DeltaCommandResult,
    liquid: LiquidMode,
    decided: Sequence[str] | None = None,
) -> DeltaCommandResult:
    """The keys Delta's OPTIMIZE is to cluster by: the table's own, or with `set` the wanted ones
    (`done.keys`), set first when they differ. What was wanted and done goes in the result (``liquid``).
    A service job's `decided` keys are compared with the table's first (`_check_decided`)."""
    wanted = done.keys
    before = list(committer.clustering_columns() or ())
    _check_decided(committer.table.uri, before, decided)
    if liquid == "set" and not wanted:
        raise UnsupportedTableError(
            f"{committer.table.uri} is liquid-clustered and none of the features "
            f"({', '.join(done.not_applied) or 'none'}) is a column Delta can cluster by; nothing was changed"
        )
    changed = liquid == "set" and [k.lower() for k in before] != [k.lower() for k in wanted]
    if changed:
        committer.set_clustering(wanted)
    keys = wanted if liquid == "set" else before
    outcome = LiquidOutcome(mode=liquid, keys=keys, wanted=wanted, changed=changed)
    return replace(done, keys=keys, keys_before=before, keys_changed=changed, liquid=outcome)


def _check_decided(uri: str, now: Sequence[str], decided: Sequence[str] | None) -> None:
    """Raise `KeysChangedError` when a service job's table has other clustering keys than its decision saw
    (`decided`; None: no decision, as ``deltaopt optimize`` by hand): the decision priced and chose by
    those keys, and whoever changed them since (the user) chose the table's keys now, so neither an
    ``ALTER`` back nor an ``OPTIMIZE`` by keys nobody priced may run. Compared as `_liquid_keys` compares
    keys (case-insensitively), on the keys read right before the commands."""
    if decided is None or [k.lower() for k in now] == [k.lower() for k in decided]:
        return
    raise KeysChangedError(
        f"the clustering keys of {uri} changed from ({', '.join(decided) or 'none'}) to "
        f"({', '.join(now) or 'none'}) since the decision; nothing was run"
    )


def keys_changed_since(
    commits: Sequence[Commit], decided: Sequence[str], run_id: str, *, uri: str, failure: str
) -> KeysChangedError | None:
    """The refusal `_check_decided` would have made, read from the history after a remote run of a
    liquid decision `failure`d where the remote says only that it failed (a Databricks run ends FAILED,
    not why): the newest ``ALTER TABLE ... CLUSTER BY`` in `commits` (those after the decision) that is
    not the run's own set keys other than `decided`, and none of the run's commits landed. None: the
    failure is the run's own (the keys stand as decided, or the run committed something)."""
    if any(c.tagged_run == run_id for c in commits):
        return None
    theirs = [c for c in commits if c.operation == CLUSTER_BY_OPERATION]
    if not theirs:
        return None
    listed = str(theirs[-1].operation_parameters.get("newClusteringColumns") or "")
    now = [k.strip().strip("`") for k in listed.split(",") if k.strip()]
    try:
        _check_decided(uri, now, decided)
    except KeysChangedError as err:
        return KeysChangedError(f"{err} ({failure})")
    return None


def _applied(features: FeatureSet, done: DeltaCommandResult) -> FeatureSet:
    """What Delta's OPTIMIZE laid the files out by: the table's own keys where they were kept, else the
    part of `features` Delta's commands express."""
    if done.liquid is not None and done.liquid.mode != "set":
        # DESCRIBE DETAIL names a nested key by its dotted path (s.x): a struct field, not one column "s.x"
        return FeatureSet(z=tuple(ZFeature(exp.to_column(k, dialect="spark").sql("spark")) for k in done.keys))
    return delta_expressible(features, done.clustered)[0]


def _record_delta_files(table: TableAccess, versions: Sequence[int], run_id: str, applied: FeatureSet) -> None:
    """An index entry without statistics for each file Delta's OPTIMIZE wrote, the files its commits
    (`versions`, one per batch) added: they are clustered (by Delta, on the `applied` features), and nothing is known of
    them beyond Delta's own statistics, so no skipping rule uses the entry (nor trusts Delta's float
    maxima about NaN: Delta wrote them). Each compared with the version just before it, not with the
    run's planning snapshot: files other writers committed in between (an append, their own OPTIMIZE)
    are not the run's, and recorded as clustered they would never count as new data again
    (`unclustered_files`). Best effort: without it those files are only optimised again."""
    try:
        latest = {f.path: f for f in table.snapshot(versions[-1]).files}
        written: dict[str, int] = {}
        for version in versions:
            old = {f.path for f in table.snapshot(version - 1).files}
            written.update((f.path, f.size) for f in table.snapshot(version).files if f.path not in old)
        unknown = ExtendedStats(run_id, float_max_includes_nan=False)
        kept = {path: (size, unknown) for path, size in written.items() if path in latest}
        write_index(table, run_id, kept, features=applied.as_dict())
    except Exception as err:  # the commit stands; the index is an optimisation of the next tick
        log.warning("could not record the files Delta's OPTIMIZE wrote to %s: %s", table.uri, err)
