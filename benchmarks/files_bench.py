"""Files as compact and as skippable as the best writers: deltaopt's OPTIMIZE beside delta-rs's.

    python -m benchmarks files [--scale 3] [--target 128MiB]

TPC-H ``lineitem`` at ``--scale`` is loaded as a Delta table by delta-rs (``write_deltalake``, its
defaults: Snappy) from ``tpchgen-cli``'s parts; two copies are rewritten with the same Z-order features
``l_shipdate, l_quantity, l_discount`` and the same target file size:

* delta-rs ``optimize.z_order`` (in a child process);
* ``deltaopt optimize --all-files`` (in a child process, Spark's default 1g driver, ZSTD and 16 MiB
  row groups by default).

Per output: bytes, files, row groups per file, rows and an order-insensitive hash (DuckDB over the
Delta log) against the input, wall time and the peak memory of the whole process tree (sampled from
/proc every 0.2 s: the Python process and, for deltaopt, its Spark JVM). Then a few selective filters
on both outputs: files DuckDB's Delta extension scans, the row groups inside the kept files whose own
statistics exclude the filter, and the bytes DuckDB's Parquet reader actually reads from those files,
counted by an fsspec file system it reads through (DuckDB's profiler counters, rows scanned and bytes
read, did not reflect row-group skipping on a file of known layout, so they are not used).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import sqlglot
from sqlglot import exp

from benchmarks.common import table, write_report
from optimizer import tpch
from optimizer.config_types import parse_size

FEATURES = ("l_shipdate", "l_quantity", "l_discount")
FILTERS = (
    "l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-07'",
    "l_quantity = 7 AND l_discount = 0.04",
    "l_shipdate >= DATE '1998-11-01'",
    "l_discount BETWEEN 0.02 AND 0.03 AND l_quantity < 3",
)


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children.get(current, []))
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_measured(command: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of the process tree in bytes, stdout) of `command`."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(_rss(p) for p in _tree(process.pid)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed ({process.returncode}): {err[-2000:]}")
    return time.perf_counter() - started, peak, out


def footers(path: Path) -> dict[str, Any]:
    from deltalake import DeltaTable

    files = DeltaTable(str(path)).file_uris()
    groups = [pq.ParquetFile(f.replace("file://", "")).metadata.num_row_groups for f in files]
    codecs = {str(pq.ParquetFile(f.replace("file://", "")).metadata.row_group(0).column(0).compression) for f in files}
    return {
        "files": len(files),
        "bytes": sum(os.path.getsize(f.replace("file://", "")) for f in files),
        "row_groups_per_file": sum(groups) / len(groups) if groups else 0,
        "codecs": sorted(codecs),
    }


def fingerprint(reader: Any, path: Path) -> tuple[int, int]:
    """Row count and an order-insensitive hash of every row (DuckDB over the Delta log)."""
    row = reader.connection.execute(
        f"SELECT count(*), sum(hash(l_orderkey, l_linenumber, l_partkey, l_suppkey, l_quantity, l_extendedprice, "
        f"l_discount, l_tax, l_returnflag, l_linestatus, l_shipdate, l_commitdate, l_receiptdate, l_shipinstruct, "
        f"l_shipmode, l_comment)::HUGEINT) FROM delta_scan('{path}')"
    ).fetchone()
    return int(row[0]), int(row[1])


def duckdb_reads(reader: Any, path: Path, where: str) -> dict[str, Any]:
    """For ``SELECT sum(l_extendedprice) ... WHERE where``: files DuckDB scans (the log's min/max), and
    in the files a min/max reader keeps, the row groups whose own statistics exclude the filter (what
    a reader of row-group statistics skips inside a file), through deltaopt's sound pruning."""
    from benchmarks.standard_reader import CountingReads
    from optimizer.skipping.filestats import file_stats, table_column_types
    from optimizer.skipping.pruning import might_match, prepare
    from optimizer.skipping.scan import plan_scan, table_file_stats
    from optimizer.table import open_table
    from optimizer.table.access import DataFile

    scanned = reader.files_scanned(str(path), where, ("l_extendedprice",))
    lineitem = open_table(str(path))
    snapshot = lineitem.snapshot()
    kept = plan_scan(lineitem, where, snapshot=snapshot, stats=table_file_stats(lineitem, snapshot, None, {})).files
    types = table_column_types(snapshot.spark_schema().fields)
    predicate = prepare(where)
    groups = skippable = column_bytes = 0
    needed = {"l_extendedprice"} | {c.name.lower() for c in sqlglot.parse_one(where, read="spark").find_all(exp.Column)}
    counting = CountingReads()
    try:
        paths = [str(path / f.path) for f in kept]
        duck_read = counting.read(paths, where, ("l_extendedprice",)) if paths else 0
    finally:
        counting.close()
    for data_file in kept:
        metadata = pq.ParquetFile(str(path / data_file.path)).metadata
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            mins, maxs, nulls = {}, {}, {}
            for c in range(group.num_columns):
                chunk = group.column(c)
                if chunk.path_in_schema.lower() in needed:
                    column_bytes += chunk.total_compressed_size
                if chunk.statistics is not None and chunk.statistics.has_min_max:
                    mins[chunk.path_in_schema] = chunk.statistics.min
                    maxs[chunk.path_in_schema] = chunk.statistics.max
                    nulls[chunk.path_in_schema] = chunk.statistics.null_count
            stats = file_stats(DataFile(f"{data_file.path}#{g}", 0, group.num_rows, 0, {}, mins, maxs, nulls), types)
            groups += 1
            skippable += not might_match(predicate, stats)
    return {
        "files": scanned.files if scanned else None,
        "of": scanned.total if scanned else None,
        "groups": groups,
        "skippable": skippable,
        "duckdb_read": duck_read,
        "column_bytes": column_bytes,
    }


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks files")
    parser.add_argument("--scale", type=float, default=3.0)
    parser.add_argument("--target", default="128MiB")
    parser.add_argument("--parts", type=int, help="input files (default: 50 per unit of scale)")
    args = parser.parse_args(argv)
    target = parse_size(args.target)
    work = Path(tempfile.mkdtemp(prefix="deltaopt-files-"))
    try:
        body = run(work, args.scale, target, args.parts or max(4, round(50 * args.scale)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(body)
    write_report(
        "files",
        "Output files: deltaopt OPTIMIZE beside delta-rs z_order",
        body,
        f"python -m benchmarks files --scale {args.scale:g} --target {args.target}",
    )


def run(work: Path, scale: float, target: int, parts: int) -> str:
    import pyarrow.dataset as ds
    from deltalake import write_deltalake

    from benchmarks.standard_reader import DuckDBReader

    generated = tpch.generate("lineitem", scale, work / "tpch", parts=parts)
    source = work / "input"
    for part in generated:  # one append per generated part, as delta-rs writes them (Snappy)
        write_deltalake(str(source), ds.dataset(str(part)).to_table(), mode="append")
    copies = {name: work / name for name in ("delta-rs", "deltaopt")}
    for path in copies.values():
        shutil.copytree(source, path)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    runs: dict[str, tuple[float, int]] = {}
    zorder = (
        "from deltalake import DeltaTable; "
        f"DeltaTable({str(copies['delta-rs'])!r}).optimize.z_order({list(FEATURES)!r}, target_size={target})"
    )
    wall, peak, _ = run_measured([sys.executable, "-c", zorder], env)
    runs["delta-rs"] = (wall, peak)
    command = [
        sys.executable,
        "-m",
        "optimizer.cli",
        "optimize",
        "--table",
        str(copies["deltaopt"]),
        "--z",
        ",".join(FEATURES),
        "--target-file-size",
        str(target),
        "--all-files",
        "--json",
    ]
    wall, peak, _ = run_measured(command, env)
    runs["deltaopt"] = (wall, peak)

    reader = DuckDBReader()
    try:
        original = fingerprint(reader, source)
        rows = []
        for name, path in copies.items():
            shape = footers(path)
            rows.append(
                (
                    name,
                    f"{shape['bytes'] / 1e6:,.1f} MB",
                    shape["files"],
                    f"{shape['row_groups_per_file']:.1f}",
                    ", ".join(shape["codecs"]),
                    "yes" if fingerprint(reader, path) == original else "NO",
                    f"{runs[name][0]:.0f} s",
                    f"{runs[name][1] / 1e9:.2f} GB",
                )
            )
        reads = []
        for where in FILTERS:
            figures = {name: duckdb_reads(reader, path, where) for name, path in copies.items()}
            reads.append(
                (
                    where,
                    *(
                        f"{f['files']}/{f['of']} files; {f['skippable']}/{f['groups']} row groups skippable; DuckDB "
                        f"read {f['duckdb_read'] / 1e6:,.1f} MB of their {f['column_bytes'] / 1e6:,.1f} MB "
                        "of needed columns"
                        for f in figures.values()
                    ),
                )
            )
        errors = dict(reader.errors)
    finally:
        reader.close()
    input_shape = footers(source)
    return (
        f"TPC-H lineitem scale {scale:g}: {original[0]:,} rows, {input_shape['bytes'] / 1e6:,.0f} MB in "
        f"{input_shape['files']} files ({', '.join(input_shape['codecs'])}) written by delta-rs; Z-order on "
        f"{', '.join(FEATURES)}, target {target >> 20} MiB.\n\n"
        + table(
            (
                "rewrite",
                "output bytes",
                "files",
                "row groups / file",
                "codec",
                "rows + hash kept",
                "wall",
                "peak memory",
            ),
            rows,
        )
        + "\n\nSelective filters (`SELECT max(l_extendedprice) ... WHERE`): files DuckDB's Delta extension scans "
        "(the log's min/max); of the row groups in the files a min/max reader keeps, how many their own "
        "statistics exclude (from the footers, with deltaopt's sound pruning); and the bytes DuckDB's Parquet "
        "reader really reads from those files (counted by the file system it reads through) against the "
        "compressed bytes of the columns the query needs in them: fewer means it skipped row groups.\n\n"
        + table(("filter", *copies), reads)
        + (f"\n\nDuckDB extension errors (unknown counts): {errors}" if errors else "")
        + "\n"
    )
