"""How long a one-off ``deltaopt optimize`` takes against Delta's own ``OPTIMIZE ZORDER BY`` (issue 48, item 4).

Both are what a user types once: a new process, JVM and Spark session (built by the same
`optimizer.runtime.build_session` defaults), rewriting the same table on the same four columns to the
same target file size. The table is TPC-H ``lineitem`` written by delta-rs in 8 appends; every run gets
a fresh copy of it. The two commands run in turn, in pairs (the order alternating from pair to pair),
and the figure that counts is the median of the pair-by-pair ratios: pairing keeps the ratio meaningful
when the machine's speed drifts.

deltaopt's run includes everything that makes it safe: its key-statistics check, the input fingerprint,
the written rows verified against it, Delta statistics and extended statistics per file, the
extended-stats index and Delta's transaction. Each run is checked: a new OPTIMIZE version with
``dataChange=false`` and the row count unchanged.

Run: ``python -m benchmarks rewrite-speed [--scales 0.33,1] [--pairs 5] [--codec zstd]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import table, write_report

COLUMNS = ("l_shipdate", "l_shipmode", "l_extendedprice", "l_quantity")
TARGET = 32 << 20


@dataclass(frozen=True)
class Pair:
    """One deltaopt run and one Delta run on fresh copies of the same table: whole-process seconds, and
    the seconds each spent rewriting (from its own clock: the rest is the process, JVM and session)."""

    deltaopt: float
    delta: float
    deltaopt_work: float
    delta_work: float

    @property
    def ratio(self) -> float:
        return self.deltaopt / self.delta


@dataclass(frozen=True)
class Base:
    """The table every run copies: where, its bytes, rows and version."""

    path: Path
    bytes: int
    rows: int
    version: int


def _base(scale: float, root: Path) -> Base:
    """lineitem at `scale`, written by delta-rs in 8 appends."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    from optimizer import tpch

    parts = tpch.generate("lineitem", scale, root / "tpch", parts=8)
    path = root / "base"
    for part in parts:
        write_deltalake(str(path), pq.read_table(part), mode="append")
    table = DeltaTable(str(path))
    actions = table.get_add_actions(flatten=True)
    size = sum(actions.column("size_bytes").to_pylist())
    return Base(path, size, sum(actions.column("num_records").to_pylist()), table.version())


def _deltaopt(path: Path, codec: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "optimizer.cli",
        "optimize",
        "--table",
        str(path),
        "--z",
        ",".join(COLUMNS),
        "--target-file-size",
        str(TARGET),
        "--codec",
        codec,
        "--json",
    ]


def _delta(path: Path, max_file_size: int, codec: str) -> list[str]:
    once = [sys.executable, "-m", "benchmarks.rewrite_speed", "delta-once", str(path), ",".join(COLUMNS)]
    return [*once, str(max_file_size), codec]


def delta_max_file_size(table_bytes: int) -> int:
    """The maxFileSize that makes Delta's ZORDER BY write as many files as deltaopt does: deltaopt writes
    round(bytes / target) files, Delta floor(bytes / maxFileSize)."""
    files = max(1, round(table_bytes / TARGET))
    return table_bytes // files


def _timed(command: list[str]) -> tuple[float, float]:
    """The command's whole-process seconds, and the rewrite's own seconds from the JSON it prints
    (deltaopt's ``seconds.total``; the Delta script's ``seconds``)."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[2:4]} failed: {done.stderr[-2000:]}")
    printed = json.loads(done.stdout)
    work = printed["seconds"]["total"] if isinstance(printed["seconds"], dict) else printed["seconds"]
    return seconds, float(work)


def _checked(path: Path, rows: int, version: int) -> tuple[int, float]:
    """The rewrite happened as it should: one OPTIMIZE commit after `version` (Delta's with its Z-order
    columns), every file it added with dataChange=false, rows unchanged; the files and MB it left."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    last = table.history(1)[0]
    if last.get("operation") != "OPTIMIZE" or table.version() != version + 1:
        raise RuntimeError(f"{path}: expected one OPTIMIZE after version {version}, found {last}")
    z_order = (last.get("operationParameters") or {}).get("zOrderBy")
    if z_order is not None and not all(c in z_order for c in COLUMNS):
        raise RuntimeError(f"{path}: Delta's OPTIMIZE ordered by {z_order}")
    commit = path / "_delta_log" / f"{version + 1:020d}.json"  # read only: what the commit says it added
    added = [json.loads(line)["add"] for line in commit.read_text().splitlines() if '"add"' in line]
    if not added or any(a.get("dataChange") is not False for a in added):
        raise RuntimeError(f"{path}: the rewrite added files with dataChange other than false")
    actions = table.get_add_actions(flatten=True)
    if sum(actions.column("num_records").to_pylist()) != rows:
        raise RuntimeError(f"{path}: row count changed")
    return len(actions), sum(actions.column("size_bytes").to_pylist()) / 1e6


def _pair(base: Base, work: Path, index: int, codec: str) -> tuple[Pair, dict[str, tuple[int, float]]]:
    """One pair on fresh copies; deltaopt first in even pairs, Delta first in odd ones."""
    copies = {name: work / f"{name}-{index}" for name in ("deltaopt", "delta")}
    for copy in copies.values():
        shutil.copytree(base.path, copy)
    commands = {
        "deltaopt": _deltaopt(copies["deltaopt"], codec),
        "delta": _delta(copies["delta"], delta_max_file_size(base.bytes), codec),
    }
    order = ("deltaopt", "delta") if index % 2 == 0 else ("delta", "deltaopt")
    seconds = {name: _timed(commands[name]) for name in order}
    written = {name: _checked(copy, base.rows, base.version) for name, copy in copies.items()}
    for copy in copies.values():
        shutil.rmtree(copy)
    (ours, our_work), (theirs, their_work) = seconds["deltaopt"], seconds["delta"]
    return Pair(ours, theirs, our_work, their_work), written


def measure(scale: float, pairs: int, codec: str) -> dict[str, object]:
    """`pairs` paired one-off runs at `scale`; medians and the spread of the ratio."""
    work = Path(tempfile.mkdtemp(prefix=f"deltaopt-rewrite-speed-{scale}-"))
    try:
        base = _base(scale, work)
        runs: list[Pair] = []
        written: dict[str, tuple[int, float]] = {}
        for index in range(pairs):
            pair, written = _pair(base, work, index, codec)
            runs.append(pair)
            print(
                f"  scale {scale} pair {index + 1}: deltaopt {pair.deltaopt:.1f} s, Delta {pair.delta:.1f} s",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = [p.ratio for p in runs]
    return {
        "scale": scale,
        "mb": base.bytes / 1e6,
        "rows": base.rows,
        "deltaopt": statistics.median(p.deltaopt for p in runs),
        "delta": statistics.median(p.delta for p in runs),
        "ratio": statistics.median(ratios),
        "deltaopt_work": statistics.median(p.deltaopt_work for p in runs),
        "delta_work": statistics.median(p.delta_work for p in runs),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "written": written,
    }


def _report(rows: list[dict[str, object]], pairs: int, codec: str) -> None:
    def files(row: dict[str, object], name: str) -> str:
        count, mb = row["written"][name]  # type: ignore[index]
        return f"{count} / {mb:.0f} MB"

    body = table(
        [
            "scale",
            "table",
            "deltaopt optimize (median)",
            "Delta OPTIMIZE ZORDER BY (median)",
            "ratio (median of pairs)",
            "ratio min-max",
            "rewrite alone: deltaopt / Delta (median)",
            "files / MB out: deltaopt",
            "Delta",
        ],
        [
            [
                r["scale"],
                f"{r['mb']:.0f} MB, {r['rows']:,} rows",
                f"{r['deltaopt']:.1f} s",
                f"{r['delta']:.1f} s",
                f"{r['ratio']:.2f}x",
                f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}x",
                f"{r['deltaopt_work']:.1f} s / {r['delta_work']:.1f} s",
                files(r, "deltaopt"),
                files(r, "delta"),
            ]
            for r in rows
        ],
    )
    notes = (
        f"\n\n{pairs} pairs per scale, each a new process, JVM and Spark session on fresh copies of the same\n"
        f"table (lineitem, 8 delta-rs appends), columns {', '.join(COLUMNS)}, target file size {TARGET >> 20} MiB,\n"
        f"this machine's 2 cores; the order within a pair alternates. Both write {codec} and the same number\n"
        "of files (Delta's maxFileSize set so its floor(input / maxFileSize) equals deltaopt's rounding).\n"
        "deltaopt's time includes its key-statistics check, the input fingerprint, verifying the written\n"
        "rows, Delta and extended statistics, the extended-stats index and Delta's transaction. Each run is\n"
        "checked: one OPTIMIZE commit (Delta's ordered by the four columns), dataChange=false, rows unchanged.\n"
        "Rewrite alone: each side's own clock around its rewrite (deltaopt's `seconds.total`, from opening\n"
        "the table to the commit; Delta's, the OPTIMIZE statement); the rest of the whole-process time is\n"
        "Python, the JVM and the Spark session.\n"
    )
    write_report(
        "rewrite-speed",
        "One-off rewrite: deltaopt optimize against Delta's OPTIMIZE ZORDER BY",
        body + notes,
        f"python -m benchmarks rewrite-speed --scales {','.join(str(r['scale']) for r in rows)} --pairs {pairs}",
    )


def delta_once(path: str, columns: str, max_file_size: int, codec: str) -> None:
    """Delta's ``OPTIMIZE ZORDER BY`` as a one-off command, in a session built as deltaopt's CLI builds it
    without a configuration file, writing `codec` as deltaopt does."""
    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session

    spark = build_session(SparkSettings())
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(max_file_size))
    spark.conf.set("spark.sql.parquet.compression.codec", codec)
    quoted = ", ".join(f"`{c}`" for c in columns.split(","))
    started = time.perf_counter()
    spark.sql(f"OPTIMIZE delta.`{path}` ZORDER BY ({quoted})").collect()
    print(json.dumps({"seconds": time.perf_counter() - started}))
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks rewrite-speed")
    parser.add_argument("--scales", default="0.33,1", help="TPC-H scales (0.33: about 65 MB)")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--codec", default="zstd", help="deltaopt's codec (Delta writes snappy)")
    args = parser.parse_args(argv)
    rows = [measure(float(s), args.pairs, args.codec) for s in args.scales.split(",")]
    _report(rows, args.pairs, args.codec)


if __name__ == "__main__":
    if sys.argv[1:2] == ["delta-once"]:
        delta_once(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        main(sys.argv[1:])
