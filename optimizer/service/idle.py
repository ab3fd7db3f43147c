"""Idle checks that cost nothing: a tick on a table where nothing moved reuses the last verdict.

A tick's verdict depends on the table (its Delta version), the workload (the query log's version), the
configuration and the cost model, and slowly on the clock (queries age out of the window and weigh
less with time). When the first two have not moved since a verdict that started no job, and the
configuration and cost model are those it was made with, and it is less than `REFRESH` old, the tick
repeats it without replaying either log, reading a sidecar, starting Spark or committing a decision
row: it only probes the two logs' newest versions (`latest_version`: ``_last_checkpoint`` plus a
stat per commit after it) and appends the decision line.

Verdicts that are not reused: any job (its outcome moved the table), errors, a run in progress, and a
drift check a byte budget held back (the daily budget frees itself over time).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from optimizer.table import open_table

if TYPE_CHECKING:
    from collections.abc import Mapping

    from costmodel.cost import CostModel
    from optimizer.config import Config, TableSettings

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


def verdict_key(
    table: TableSettings, config: Config, cost_model: CostModel, versions: tuple[int | None, int | None]
) -> str:
    """What a verdict was made from: the table's and the query log's versions, the table's settings,
    whether the service only logs (dry run), where its jobs run (the estimate prices what the executor
    can apply), and the cost model."""
    inputs: dict[str, Any] = {
        "versions": list(versions),
        "table": table.model_dump(mode="json"),
        "execution": config.execution.model_dump(mode="json"),
        "commit": config.spark.commit,
        "dry_run": config.service.dry_run,
        "connect": config.spark.connect_url,
        "cost_model": asdict(cost_model),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:32]


def reusable(state_key: str | None, state_at: str, key: str, now: datetime) -> bool:
    """Whether the verdict stored with `state_key` at `state_at` stands for `key` at `now`."""
    if state_key is None or state_key != key or not state_at:
        return False
    return now - datetime.fromisoformat(state_at) < REFRESH
