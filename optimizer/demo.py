"""``deltaopt demo``: the whole pipeline on a TPC-H lineitem table with embedded Spark.

Creates the table from the first increments of lineitem, records a workload in the query log, then
appends the remaining increments and lets the service decide, tick by tick, whether to optimise.
Everything lands under the work directory; the last lines printed say where the decision log is.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from optimizer import tpch
from optimizer.config import SparkSettings
from optimizer.runtime import build_session, runtime_info
from optimizer.table import open_table
from optimizer.table.info import render, table_info


def _say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def load_part(spark, table, part_file: Path, files_per_part: int = 4):  # type: ignore[no-untyped-def]
    """Append one generated lineitem increment as `files_per_part` small files (like a streaming writer)."""
    df = spark.read.parquet(str(part_file)).repartition(files_per_part)
    if not table.exists():
        return table.create(spark, df, metadata={"source": "deltaopt demo", "part": part_file.name})
    snapshot = table.snapshot()
    staged = table.stage(spark, df, snapshot, "data")
    table.append(staged, snapshot, {"source": "deltaopt demo", "part": part_file.name})
    return table.snapshot()


def run_demo(workdir: str, scale: float = 0.1, parts: int = 8, fresh: bool = True) -> int:
    root = Path(workdir).resolve()
    if fresh and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    _say(f"generating TPC-H lineitem at scale {scale} in {parts} increments with tpchgen-cli")
    part_files = tpch.generate("lineitem", scale, root / "tpch", parts=parts)

    spark = build_session(SparkSettings(master="local[*]", shuffle_partitions=8, app_name="deltaopt-demo"))
    _say(runtime_info(spark).describe())
    table = open_table(str(root / "lineitem"))
    initial = part_files[: max(parts // 2, 1)]
    for part in initial:
        load_part(spark, table, part)
    _say(f"created {table.uri} from {len(initial)} increments")
    print(render(table_info(table)))
    _say(f"done in {time.monotonic() - started:.0f}s")
    return 0
