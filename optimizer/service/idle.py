"""Idle checks that cost nothing: a tick on a table where nothing moved reuses the last verdict.

A tick's verdict depends on the table (its Delta version), the workload (the query log's version), the
configuration and the cost model, and slowly on the clock (queries age out of the window and weigh
less with time). When the first two have not moved since a verdict that started no job, and the
configuration and cost model are those it was made with, and it is less than `REFRESH` old, the tick
repeats it without replaying either log, reading a sidecar, starting Spark or committing a decision
row: it only probes the two logs' newest versions (`latest_version`: ``_last_checkpoint`` plus a
stat per commit after it) and appends the decision line.

Verdicts that are not reused: any job (its outcome moved the table), errors, a run in progress, and a
drift check a byte budget held back (the daily budget frees itself over time). A verdict that handed a
job to the fleet queue stands while the queue still holds that job.

The tick (`service.tick.TickRun`) asks `made_from` what its verdict would be made from, `standing` for
the stored verdict it may repeat, and stores `verdict_after` its full tick.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from optimizer.service.state import LastVerdict
from optimizer.table import open_table
from optimizer.verdict import Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from costmodel.cost import CostModel
    from optimizer.config import Config, TableSettings
    from optimizer.service.draft import Draft
    from optimizer.service.state import TableState

Versions = tuple[int | None, int | None]  # the table's and its query log's newest versions

REFRESH = timedelta(days=1)  # a reused verdict is made afresh at least this often
PROBE_BATCH = 32  # commit files stat-ed per request while looking for the newest


def latest_version(uri: str, storage_options: Mapping[str, str] | None = None) -> int | None:
    """The newest committed version of the Delta table at `uri` without replaying its log: the version
    ``_last_checkpoint`` names, then the commit files after it that exist. None: no table there."""
    fs, root = open_table(uri, dict(storage_options or {})).filesystem()  # opening reads nothing
    log_dir = f"{root.rstrip('/')}/_delta_log"
    start = -1
    try:
        with fs.open_input_stream(f"{log_dir}/_last_checkpoint") as stream:
            start = int(json.loads(stream.read())["version"])
    except (FileNotFoundError, OSError, ValueError, KeyError):
        pass  # no checkpoint yet: probe from version 0
    newest = start
    while True:
        batch = [f"{log_dir}/{v:020d}.json" for v in range(newest + 1, newest + 1 + PROBE_BATCH)]
        found = [info.type == pafs.FileType.File for info in fs.get_file_info(batch)]
        present = found.index(False) if False in found else len(found)
        newest += present
        if present < len(found):
            return newest if newest >= 0 else None


def made_from(table: TableSettings, config: Config, cost_model: CostModel) -> tuple[str, Versions]:
    """What a verdict of `table` made now would be made from (its `verdict_key`), and the two logs'
    newest versions (a repeated verdict's reason names them)."""
    versions = (
        latest_version(table.path, table.storage_options),
        latest_version(table.query_log_path, table.storage_options),
    )
    return verdict_key(table, config, cost_model, versions), versions


def verdict_key(table: TableSettings, config: Config, cost_model: CostModel, versions: Versions) -> str:
    """What a verdict was made from: the table's and the query log's versions, the table's settings,
    whether the service only logs (dry run), where its jobs run and which Delta and commit engine the
    service's own session is set up with (the estimate prices what the executor can apply), and the cost
    model."""
    inputs: dict[str, Any] = {
        "versions": list(versions),
        "table": table.model_dump(mode="json"),
        "execution": config.execution.model_dump(mode="json"),
        "commit": config.spark.commit,
        "delta": config.spark.delta_mode,
        "dry_run": config.service.dry_run,
        "connect": config.spark.connect_url,
        "cost_model": asdict(cost_model),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:32]


def standing(state: TableState, key: str, now: datetime, waiting_key: str | None) -> LastVerdict | None:
    """The stored verdict, if a tick whose inputs make `key` may repeat it at `now`: no run in progress,
    and a verdict that queued a job only while the fleet queue still holds that job (`waiting_key`: the
    key of the table's waiting candidate)."""
    last = state.verdict
    if state.run is not None or last is None:
        return None
    if last.action is Verdict.DEFERRED and waiting_key != key:
        return None
    fresh = last.key == key and bool(last.at) and now - datetime.fromisoformat(last.at) < REFRESH
    return last if fresh else None


def repeated_reason(last: LastVerdict, versions: Versions) -> str:
    """The reason of a tick that repeats `last`."""
    return (
        f"nothing moved since {last.at} (table version {versions[0]}, query log version {versions[1]}): {last.reason}"
    )


def verdict_after(draft: Draft, table: TableSettings, key: str, now: datetime) -> LastVerdict | None:
    """The verdict a full tick leaves for later ticks to repeat, None when a tick with the same inputs
    could decide otherwise. A job handed to the queue is stored as DEFERRED: it stands while it waits."""
    if not _repeatable(draft, table):
        return None
    action = Verdict.DEFERRED if draft.pending is not None else draft.action
    return LastVerdict(key, now.isoformat(), action, draft.reason)


def _repeatable(draft: Draft, table: TableSettings) -> bool:
    """Whether a tick with the same inputs would decide the same: no job ran (it moved the table), no
    drift check was held back by a byte budget (the daily one frees itself over time), and the verdict did
    not come from what the live session can do (a restart with Delta's jars fixed decides otherwise). A
    job decided and handed to the queue is repeatable: until it starts, the same inputs decide the same job."""
    if draft.pending is not None:
        return True
    if draft.from_session:
        return False
    if draft.action not in (Verdict.SKIP, Verdict.OPTIMIZE_DRY_RUN, Verdict.RECLUSTER_DRY_RUN) or draft.job is not None:
        return False
    held_back = draft.recluster is not None and draft.recluster.budget <= 0
    return not (held_back and table.thresholds.recluster_bytes_per_tick > 0)
