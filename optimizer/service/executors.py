"""Where an OPTIMIZE job runs, and what it is given and returns: the request (`OptimizeRequest`), the
outcome (`JobOutcome`), the `Executor` protocol, the in-process `SparkExecutor`, and the command line a
remote one starts (`optimize_command`). The remote executors (Spark Connect, Databricks) and the choice
among them all are in `service.remote`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from optimizer.config_types import LiquidMode
from optimizer.features import FeatureSet
from optimizer.table.output import OutputSettings
from optimizer.table.rewrite_path import Capabilities

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.table.access import Snapshot, TableAccess

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OptimizeRequest:
    table_path: str
    features: FeatureSet
    target_file_size: int
    run_id: str
    read_version: int
    files: tuple[str, ...] | None = None  # paths; None: the unclustered files when the job starts
    output: OutputSettings = OutputSettings()  # codec and row-group size to write with
    stats_for_keys: bool = True  # clustering keys without min/max get them first (`table.key_stats`)
    liquid: LiquidMode = "keep"  # a liquid table's clustering keys: the user's, set only with `set`
    full: bool = False  # a liquid table: Delta's OPTIMIZE FULL (after a key change, the old files too)
    keys: tuple[str, ...] | None = None  # a liquid table's keys as the tick decided on them (None: no tick's)


@dataclass(frozen=True)
class JobOutcome:
    executor: str
    version: int | None
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    rows: int = 0
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    not_started: str | None = None  # why the executor did not run the job (`liquid_refusal`); nothing committed


def liquid_refusal(
    latest: Snapshot,
    features: FeatureSet,
    liquid: LiquidMode,
    read_version: int,
    *,
    keys: Callable[[], Sequence[str] | None] | None = None,
    net: float | None = None,
    decided_liquid: bool = False,
) -> str | None:
    """Why a service job must not run on `latest`: the table became liquid-clustered after the job was
    decided (on a snapshot that was not liquid) and its clustering keys are the user's (``liquid`` keep or
    suggest). The one rule both the job's start (`jobs`) and the in-process executor apply, the second
    on the snapshot it would run on. None: run it (not liquid; or ``set``, which lets the job make its
    plain-column Z features the keys; or a job decided on the table already liquid, `decided_liquid`: the
    service priced Delta's OPTIMIZE by its rules, `service.liquid`). The delta-rs snapshot decides; `keys`
    (a DESCRIBE DETAIL, which needs a Spark session) is read only to name the keys in the refusal."""
    from optimizer.clustering.by_delta import clustering_keys
    from optimizer.errors import TableAccessError
    from optimizer.table.rewrite_path import keys_are_users

    if decided_liquid or not keys_are_users(latest.features, liquid):
        return None
    try:
        named = "clustering keys " + (", ".join((keys() if keys else None) or ()) or "none") + ", "
    except TableAccessError:  # only the message needs them
        named = "clustering keys unreadable, "
    if keys is None:
        named = ""
    wanted = ", ".join(clustering_keys(features)[0]) or "no column Delta can cluster by"
    said = (
        f"the table became liquid-clustered ({named}version {latest.version}) after this job was decided at "
        f"version {read_version}; its keys are the user's (liquid: {liquid}): not started, keys kept; the "
        f"workload wants keys ({wanted})"
    )
    if liquid == "suggest" and net is not None:
        said += f" (the decision's estimate for its own layout: net {net:,.1f} cluster-s; liquid: set applies it)"
    return said


class Executor(Protocol):
    name: str

    @property
    def capabilities(self) -> Capabilities:
        """What the job's session can do: which rewrite path the job takes (`rewrite_path.choose_path`)."""
        ...

    def run(self, request: OptimizeRequest) -> JobOutcome: ...


class SparkExecutor:
    """Runs the job in-process with the service's own SparkSession."""

    def __init__(
        self, name: str, session: Callable[[], SparkSession], capabilities: Capabilities | None = None
    ) -> None:
        self.name = name
        self._session = session
        self._given = capabilities  # a stand-in's; None: the session's own, probed when asked

    @property
    def capabilities(self) -> Capabilities:
        """The session's own (`Capabilities.of_session`), probed each time: the job runs in that session and
        `rewrite_path.open_path` chooses its path from the same probe. Settings would only predict them: a
        driver attached to a cluster is built with ``spark.delta: off`` and has the cluster's Delta."""
        return self._given or Capabilities.of_session(self._session())

    def _keys(self, table: TableAccess) -> Callable[[], Sequence[str] | None]:
        """The table's clustering keys, read with this executor's session when a refusal names them."""
        from optimizer.table.delta_sql import DeltaSql

        return lambda: DeltaSql(self._session(), table.spark_uri("").rstrip("/")).clustering_columns()

    def run(self, request: OptimizeRequest) -> JobOutcome:
        from optimizer.clustering import optimize
        from optimizer.table import open_table
        from optimizer.table.rewrite_path import is_liquid

        table = open_table(request.table_path)
        snapshot = table.snapshot(request.read_version)
        latest = table.snapshot()
        if is_liquid(latest.features):  # liquid since the decision: the job's start checked before this read
            refused = liquid_refusal(
                latest,
                request.features,
                request.liquid,
                request.read_version,
                keys=self._keys(table),
                decided_liquid=is_liquid(snapshot.features),
            )
            if refused is not None:
                return JobOutcome(self.name, None, not_started=refused)
            snapshot = latest  # `set`: Delta's OPTIMIZE, with the job's plain-column Z features as the keys
        files = None
        if request.files is not None:
            wanted = set(request.files)
            files = [f for f in snapshot.files if f.path in wanted]
        started = time.perf_counter()
        result = optimize(
            self._session(),
            table,
            request.features,
            request.target_file_size,
            files=files,
            snapshot=snapshot,
            metadata={"trigger": "service", "executor": self.name},
            run_id=request.run_id,
            output=request.output,
            stats_for_keys=request.stats_for_keys,
            liquid=request.liquid,
            full=request.full,
            decided_keys=request.keys,
        )
        return JobOutcome(
            self.name,
            result.version,
            result.files_in,
            result.files_out,
            result.bytes_in,
            result.bytes_out,
            result.rows,
            round(time.perf_counter() - started, 3),
            {
                "dimensions": list(result.dimensions),
                "sop_partitions": result.sop_partitions,
                "output": result.output,
                "committed_by": result.committed_by,
                "properties": dict(result.properties),
            },
        )


def optimize_command(request: OptimizeRequest) -> list[str]:
    """The ``deltaopt optimize`` arguments that run `request` on whatever Spark the caller provides."""
    return [
        "optimize",
        "--table",
        request.table_path,
        "--features-json",
        json.dumps(request.features.as_dict()),
        "--target-file-size",
        str(request.target_file_size),
        "--run-id",
        request.run_id,
        "--output-json",
        json.dumps(request.output.as_dict()),
        *([] if request.stats_for_keys else ["--no-key-statistics"]),
        "--liquid",
        request.liquid,
        *(["--full"] if request.full else []),
        *(["--decided-keys", json.dumps(list(request.keys))] if request.keys is not None else []),
        "--json",
    ]
