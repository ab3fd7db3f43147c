"""Would Parquet Bloom filters on a fact table's join keys let a standard reader skip row groups for a
dimension filter? Measured, not argued.

    python -m benchmarks bloom [--scale 0.3] [--row-group-rows 50000] [--values 5]

TPC-H ``lineitem`` is written with DuckDB (Bloom filters on every column, dictionary limit raised so
the join keys get one; 1% false-positive rate) in three layouts: date-ordered, clustered by the
supplier's nation (what deltaopt's joined feature ``supplier.s_nationkey`` gathers) and clustered by
the part's brand (``part.p_brand``). For the `values` most popular nations and brands (`star_workload`'s
order), the dimension filter becomes its keys (``l_suppkey IN (<nation's suppliers>)``, ``l_partkey
IN (<brand's parts>)``: what dynamic file pruning hands a scan) and per row group the benchmark counts

* **holding a match**: row groups with a row whose key is among the keys (the lower bound);
* **min/max**: row groups whose key range holds one of the keys (row-group statistics);
* **Bloom filter**: row groups not excluded by DuckDB's ``parquet_bloom_probe`` for every key: the
  most any reader probing these Bloom filters can skip (a row group is skipped only if every probe
  misses).
"""

from __future__ import annotations

import argparse
import bisect
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import table, write_report
from benchmarks.star_workload import BRANDS, NATIONS
from optimizer import tpch

LAYOUTS = {
    "date-ordered": ("", "l_shipdate"),
    "clustered by supplier nation": ("JOIN supplier s ON l.l_suppkey = s.s_suppkey", "s.s_nationkey, l_shipdate"),
    "clustered by part brand": ("JOIN part p ON l.l_partkey = p.p_partkey", "p.p_brand, l_shipdate"),
}
FAMILIES = {  # name: (fact key, dimension, dimension key, attribute, values in popularity order)
    "supplier nation": ("l_suppkey", "supplier", "s_suppkey", "s_nationkey", NATIONS),
    "part brand": ("l_partkey", "part", "p_partkey", "p_brand", BRANDS),
}


def _row_groups(connection: Any, path: Path, column: str) -> list[tuple[int, Any, Any]]:
    """(rows, min, max) of `column` per row group."""
    rows = connection.execute(
        "SELECT row_group_id, row_group_num_rows, stats_min_value, stats_max_value FROM parquet_metadata(?) "
        "WHERE path_in_schema = ? ORDER BY row_group_id",
        [str(path), column],
    ).fetchall()
    return [(int(r[1]), int(r[2]), int(r[3])) for r in rows]


def measure(connection: Any, path: Path, family: str, value: Any) -> dict[str, int]:
    """Row groups of `path` kept for one dimension value, by each reader, and the lower bound."""
    fact_key, dimension, key, attribute, _ = FAMILIES[family]
    keys = sorted(
        r[0] for r in connection.execute(f"SELECT {key} FROM {dimension} WHERE {attribute} = ?", [value]).fetchall()
    )
    groups = _row_groups(connection, path, fact_key)
    starts = [0]
    for rows, _, _ in groups:
        starts.append(starts[-1] + rows)
    matched = connection.execute(
        f"SELECT DISTINCT file_row_number FROM read_parquet(?, file_row_number = true) "
        f"WHERE {fact_key} IN (SELECT {key} FROM {dimension} WHERE {attribute} = ?)",
        [str(path), value],
    ).fetchall()
    holding = {bisect.bisect_right(starts, r[0]) - 1 for r in matched}
    by_min_max = sum(1 for _, low, high in groups if bisect.bisect_left(keys, low) < bisect.bisect_right(keys, high))
    excluded_by_all = [True] * len(groups)
    for k in keys:
        for _, group, excluded in connection.execute(
            "SELECT * FROM parquet_bloom_probe(?, ?, ?)", [str(path), fact_key, k]
        ).fetchall():
            excluded_by_all[group] = excluded_by_all[group] and bool(excluded)
        if not any(excluded_by_all):
            break  # no row group can be skipped any more
    return {
        "row groups": len(groups),
        "keys": len(keys),
        "holding a match": len(holding),
        "min/max": by_min_max,
        "bloom filter": len(groups) - sum(excluded_by_all),
    }


def run(scale: float = 0.3, row_group_rows: int = 50_000, values: int = 5, work: Path | None = None) -> dict:
    import duckdb

    work = work or Path(tempfile.mkdtemp(prefix="deltaopt-bloom-"))
    connection = duckdb.connect()
    for name in ("lineitem", "part", "supplier"):
        paths = tpch.generate(name, scale, work / "tpch")
        listed = ", ".join(f"'{p}'" for p in paths)
        connection.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet([{listed}])")
    results: dict[str, Any] = {"scale": scale, "row_group_rows": row_group_rows, "layouts": {}}
    for layout, (join, order) in LAYOUTS.items():
        path = work / f"{layout.replace(' ', '_')}.parquet"
        connection.execute(
            f"COPY (SELECT l.* FROM lineitem l {join} ORDER BY {order}) TO '{path}' (FORMAT parquet, "
            f"ROW_GROUP_SIZE {row_group_rows}, DICTIONARY_SIZE_LIMIT {row_group_rows}, "
            "BLOOM_FILTER_FALSE_POSITIVE_RATIO 0.01)"
        )
        per: dict[str, Any] = {}
        for family, spec in FAMILIES.items():
            figures = [measure(connection, path, family, v) for v in spec[4][:values]]
            per[family] = {k: sum(f[k] for f in figures) / len(figures) for k in figures[0]}
        results["layouts"][layout] = per
        print(f"{layout}: {json.dumps(per)}", flush=True)
    connection.close()
    return results


def render(results: dict) -> str:
    rows = []
    for layout, per in results["layouts"].items():
        for family, f in per.items():
            rows.append(
                (
                    layout,
                    family,
                    f"{f['keys']:.0f}",
                    f"{f['row groups']:.0f}",
                    f"{f['holding a match']:.1f}",
                    f"{f['min/max']:.1f}",
                    f"{f['bloom filter']:.1f}",
                )
            )
    head = (
        f"TPC-H scale {results['scale']:g} lineitem written by DuckDB in row groups of {results['row_group_rows']:,} "
        "rows with Bloom filters on every column (1% false-positive rate). Per dimension value (the most popular "
        "ones, mean): keys the dimension filter selects, row groups, and row groups read: the lower bound "
        "(holding a match), by row-group min/max of the key, and at best by probing the key's Bloom filter with "
        "every key.\n\n"
    )
    return head + table(
        ("layout", "dimension filter", "keys", "row groups", "holding a match", "min/max", "Bloom filter"), rows
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks bloom")
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--row-group-rows", type=int, default=50_000)
    parser.add_argument("--values", type=int, default=5, help="dimension values measured per family")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="deltaopt-bloom-"))
    try:
        results = run(args.scale, args.row_group_rows, args.values, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    command = (
        f"python -m benchmarks bloom --scale {args.scale:g} --row-group-rows {args.row_group_rows} "
        f"--values {args.values}"
    )
    name = "bloom" + (f"-sf{args.scale:g}" if args.scale != 0.3 else "")
    write_report(name, "Parquet Bloom filters on join keys: what a reader could skip", render(results), command)
