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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer.clustering.result import OptimizeResult
from optimizer.config_types import LiquidMode
from optimizer.errors import CommitOutcomeUnknownError, TableAccessError, UnsupportedTableError
from optimizer.features import FeatureSet, ZFeature
from optimizer.skipping.extended import ExtendedStats, unclustered_files, write_index
from optimizer.table.delta_sql import CommandResult, DeltaSql, result_of, run_commits, tagged_commits

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession

    from optimizer.clustering.layout import Progress
    from optimizer.table.access import Commit, DataFile, Snapshot, TableAccess
    from optimizer.table.rewrite import CommitEngine

log = logging.getLogger(__name__)

MAX_KEYS = 4  # Delta's limit on clustering columns


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
    return replace(features, z=kept, sop=(), joined=()), left


def apply_with_delta(
    spark: SparkSession,
    table: TableAccess,
    features: FeatureSet,
    tag: Mapping[str, Any],
    *,
    clustered: bool,
    read_version: int,
    liquid: LiquidMode = "keep",
) -> tuple[int | None, dict[str, Any]]:
    """Lay `table` out by `features` with Delta's own commands: OPTIMIZE on a liquid table (`clustered`),
    by keys `liquid` says whose, else OPTIMIZE ZORDER BY. Returns the version committed (None: nothing
    rewritten, or `suggest`: nothing run) and what was done (``versions``: every commit of the run). The
    versions are the commits carrying the run's tag (``tag["runId"]``) after `read_version`, never merely
    the newest one; the version is the last of them. Raises `UnsupportedTableError` before any change
    when `liquid` is `set` and no feature is a plain column."""
    keys, left = clustering_keys(features, MAX_KEYS if clustered else None)
    delta = DeltaSql(spark, table.spark_uri("").rstrip("/"))
    done: dict[str, Any] = {"keys": keys, "not_applied": left, "clustered": clustered}
    if clustered:
        done.update(_liquid_keys(delta, table.uri, keys, left, liquid))
        if liquid == "suggest":  # the table is left exactly as it is
            return None, {**done, "files_in": 0, "files_out": 0, "bytes_in": 0, "bytes_out": 0, "engine": None}
    try:
        result, commits = _optimize(delta, table, [] if clustered else keys, tag, read_version)
    except TableAccessError as error:
        if done.get("keys_changed"):  # the CLUSTER BY committed: the failure must not read as "nothing changed"
            raise type(error)(
                f"{error}; the clustering keys of {table.uri} were already changed from "
                f"({', '.join(done['keys_before']) or 'none'}) to ({', '.join(done['keys'])}) (liquid: set), "
                "and stay changed"
            ) from error
        raise
    done.update(
        files_in=result.files_in,
        files_out=result.files_out,
        bytes_in=result.bytes_in,
        bytes_out=result.bytes_out,
        engine=commits[-1].engine if commits else None,
        versions=[c.version for c in commits],
    )
    return (commits[-1].version if commits else None), done


def _optimize(
    delta: DeltaSql, table: TableAccess, zorder_by: list[str], tag: Mapping[str, Any], read_version: int
) -> tuple[CommandResult, list[Commit]]:
    """Delta's OPTIMIZE and the run's commits. When the statement fails, its commits may still have
    landed (a post-commit hook failed; a Connect stream dropped after the server committed): the log
    says, as for deltaopt's own commits (`rewrite.outcome_after_failure`), and a run that committed is
    reported and recorded as such, with what its commits' metrics say."""
    run_id = str(tag["runId"])
    try:
        result = delta.optimize(zorder_by, tag)
    except TableAccessError as error:
        try:
            commits = tagged_commits(table, run_id, read_version)
        except Exception as err:  # the log is unreadable right now: Delta may have committed
            raise CommitOutcomeUnknownError(
                f"{error}; whether Delta committed cannot be read from the log ({err}): look for run {run_id} "
                f"in {table.uri}'s history"
            ) from error
        if not commits:
            raise
        log.warning("run %s: Delta's OPTIMIZE committed %s, then failed: %s", run_id, table.uri, error)
        return result_of(commits), commits
    return result, (run_commits(table, run_id, read_version) if result.committed else [])


def _liquid_keys(delta: DeltaSql, uri: str, wanted: list[str], left: list[str], liquid: LiquidMode) -> dict[str, Any]:
    """The keys Delta's OPTIMIZE is to cluster by: the table's own, or with `set` the `wanted` ones,
    set first when they differ. What was wanted and done goes in the result (``liquid``)."""
    before = list(delta.clustering_columns() or ())
    if liquid == "set" and not wanted:
        raise UnsupportedTableError(
            f"{uri} is liquid-clustered and none of the features ({', '.join(left) or 'none'}) is a "
            "column Delta can cluster by; nothing was changed"
        )
    changed = liquid == "set" and [k.lower() for k in before] != [k.lower() for k in wanted]
    if changed:
        delta.cluster_by(wanted)
    keys = wanted if liquid == "set" else before
    return {
        "keys": keys,
        "keys_before": before,
        "keys_changed": changed,
        "liquid": {"mode": liquid, "keys": keys, "wanted": wanted, "changed": changed},
    }


def describe(done: Mapping[str, Any]) -> str:
    """One line for progress and the result: what was applied, what Delta could not express."""
    keys = ", ".join(done["keys"])
    left = f"; not expressible by Delta: {', '.join(done['not_applied'])}" if done["not_applied"] else ""
    files = f"{done['files_in']} -> {done['files_out']} files"
    if not done["clustered"]:
        return f"Delta's OPTIMIZE ZORDER BY ({keys or 'nothing: compaction only'}) rewrote {files}{left}"
    liquid = done["liquid"]
    wanted = ", ".join(liquid["wanted"]) or "no column Delta can cluster by"
    if liquid["mode"] == "suggest":
        return (
            f"liquid table: clustering keys ({keys or 'none'}) left as they are (liquid: suggest); the workload "
            f"wants ({wanted}) (`--liquid set` makes them the keys); nothing was run{left}"
        )
    if liquid["mode"] == "keep":
        change = f"clustering keys ({keys or 'none'}) kept (liquid: keep; the workload wanted ({wanted}))"
    elif done["keys_changed"]:
        change = f"clustering keys ({', '.join(done['keys_before']) or 'none'}) -> ({keys}) (liquid: set)"
    else:
        change = f"clustering keys ({keys}) kept: already the wanted ones"
    return f"liquid table: {change}, Delta's OPTIMIZE clustered {files}{left}"


def laid_out_by_delta(engine: CommitEngine, snapshot: Snapshot) -> bool:
    """Whether Delta's own commands lay the table out: in a SQL-only session always, elsewhere a liquid
    table (one with no feature deltaopt does not know) where Delta's engine is there to cluster it."""
    features = snapshot.features
    return engine == "delta-sql" or (engine == "delta-spark" and features.clustered and not features.unknown())


def optimize_with_delta(
    spark: SparkSession,
    table: TableAccess,
    features: FeatureSet,
    snapshot: Snapshot,
    run_id: str,
    progress: Progress,
    *,
    metadata: Mapping[str, Any] | None,
    files: Sequence[DataFile] | None = None,
    engine: CommitEngine = "delta-sql",
    liquid: LiquidMode = "keep",
) -> OptimizeResult:
    """Delta's own commands lay the table out; the files they wrote are recorded as this run's, so the
    service does not take them for new data on its next tick. Without `files` to lay out (default: the
    files no run clustered) no Z-order runs: Delta's ``OPTIMIZE ZORDER BY`` cannot be pointed at files
    and would rewrite the whole table again. `engine` is who commits in `spark` (`commit_engine`);
    `liquid` says whose clustering keys a liquid table's OPTIMIZE clusters by."""
    started = time.perf_counter()
    clustered = snapshot.features.clustered
    if not clustered and not (files if files is not None else unclustered_files(table, snapshot)):
        return OptimizeResult.nothing(run_id, features, {})
    tag = {"operation": "OPTIMIZE", "runId": run_id, "features": features.as_dict(), **dict(metadata or {})}
    version, done = apply_with_delta(
        spark, table, features, tag, clustered=clustered, read_version=snapshot.version, liquid=liquid
    )
    summary = describe(done)
    progress(summary)
    if version is not None:
        _record_delta_files(table, done["versions"], run_id, _applied(features, done))
    return OptimizeResult(
        run_id=run_id,
        version=version,
        files_in=done["files_in"],
        files_out=done["files_out"],
        bytes_in=done["bytes_in"],
        bytes_out=done["bytes_out"],
        rows=0,  # Delta's OPTIMIZE reports files, not rows; its own transaction kept them
        distinct_vectors=0,
        sop_partitions=0,
        dimensions=() if liquid == "suggest" and clustered else tuple(done["keys"]),  # suggest: nothing laid out
        features=features.as_dict(),
        seconds={"total": round(time.perf_counter() - started, 3)},
        output={
            "writer": "delta",
            "clustering": summary,
            "not_applied": done["not_applied"],
            "engine": done["engine"],
            **({"liquid": done["liquid"]} if clustered else {}),
        },
        committed_by=engine if version is not None else "",
        properties={"clusterBy": ",".join(done["keys"])} if done.get("keys_changed") else {},
    )


def _applied(features: FeatureSet, done: Mapping[str, Any]) -> FeatureSet:
    """What Delta's OPTIMIZE laid the files out by: the table's own keys where they were kept, else the
    part of `features` Delta's commands express."""
    if done["clustered"] and done["liquid"]["mode"] != "set":
        # DESCRIBE DETAIL names a nested key by its dotted path (s.x): a struct field, not one column "s.x"
        return FeatureSet(z=tuple(ZFeature(exp.to_column(k, dialect="spark").sql("spark")) for k in done["keys"]))
    return delta_expressible(features, done["clustered"])[0]


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
        write_index(table, run_id, kept, applied.as_dict())
    except Exception as err:  # the commit stands; the index is an optimisation of the next tick
        log.warning("could not record the files Delta's OPTIMIZE wrote to %s: %s", table.uri, err)
